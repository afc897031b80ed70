"""The shape of the code: short functions, enum codes by name, one line-item table.

- No function in costcore/ is longer than 80 lines (decorators included), so each one
  reads on a screen; the kernel is an orchestrator over named parts.
- The codes the formulas compare against are the positions in data/schema.yaml's choices.
- explain.py and the pages import no cost formula: the numbers they show are the kernel's
  stats (they may still import constants and the checkpoint-count helper for drawing).
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from costcore.engine import formulas as F
from costcore.engine import kernel
from costcore.scenario import schema

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 80


def _functions(path: Path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            yield node.name, node.end_lineno - first + 1, node.lineno


def test_no_function_in_costcore_over_80_lines():
    long = [f"{p.relative_to(ROOT)}:{line} {name} ({n} lines)"
            for p in sorted((ROOT / "costcore").rglob("*.py"))
            for name, n, line in _functions(p) if n > MAX_LINES]
    assert not long, "split these: " + "; ".join(long)


def test_the_orchestrator_is_short():
    n = {name: k for name, k, _ in _functions(ROOT / "costcore" / "engine" / "kernel.py")}
    assert n["_eval_one"] <= 50


def test_enum_codes_are_the_schema_positions():
    method = schema.BY_PATH["stages.sft.method"].choices
    assert (F.METHOD_FULL, F.METHOD_LORA, F.METHOD_QLORA) == tuple(
        float(method.index(c)) for c in ("full", "lora", "qlora"))
    assert F.METHOD_QLORA == schema.METHOD_QLORA
    targets = schema.BY_PATH["stages.sft.lora_targets"].choices
    assert (F.LORA_QV, F.LORA_ATTN, F.LORA_ALL) == tuple(float(targets.index(c)) for c in ("qv", "attn", "all"))
    for stage in ("dpo", "rl"):
        assert schema.BY_PATH[f"stages.{stage}.method"].choices == method


def test_no_threshold_comparisons_on_enum_codes_in_the_kernel():
    """'method > 1.5' style comparisons are gone: codes are compared by their names."""
    for name in ("kernel.py", "formulas.py"):
        text = (ROOT / "costcore" / "engine" / name).read_text(encoding="utf-8")
        for bad in ("method > 1.5", "method < 0.5", "method > 0.5", "mode > 1.5", "mode > 0.5",
                    "targets >= 1.0", "targets >= 2.0", "recompute < 0.5", "recompute < 1.5"):
            assert bad not in text, (name, bad)


def test_line_items_are_one_table():
    assert kernel.LINE_ITEMS == tuple(row[:4] for row in kernel.LINE_ITEM_TABLE)
    assert set(kernel.ITEM_PROFILE) <= set(kernel.PROFILES)
    reused = [row[0] for row in kernel.LINE_ITEM_TABLE if row[5]]
    assert reused == ["data.acquisition", "data.cleaning", "data.labeling", "data.synthetic", "data.media_license",
                      "data.captioning"]
    import costcore.analysis.budget as budget
    assert not hasattr(budget, "_PROFILE")


# Formula functions that compute a cost or a term of one; explain and the pages must not call them.
_COST_FORMULAS = {name for name in dir(F) if callable(getattr(F, name)) and not name.startswith("_")
                  and name not in ("njit", "held_checkpoints")}


@pytest.mark.parametrize("path", ["costcore/analysis/explain.py"] + sorted(str(p.relative_to(ROOT))
                                                                for p in (ROOT / "pages").glob("*.py")))
def test_explain_and_pages_import_no_cost_formula(path):
    tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
    used = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.endswith("formulas"):
            used |= {a.name for a in node.names}
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in ("F", "formulas"):
            used.add(node.attr)
    assert not (used & _COST_FORMULAS), f"{path} re-derives {sorted(used & _COST_FORMULAS)}; read the kernel's stats"


def test_no_days_per_month_literal_in_pages():
    for p in (ROOT / "pages").glob("*.py"):
        text = p.read_text(encoding="utf-8")
        assert "30.4" not in text, f"{p.name}: use costcore.engine.formulas.DAYS_PER_MONTH or the kernel's stats"


def test_charts_encode_with_channel_objects_not_strings():
    """`x2="end:Q"` makes Altair 5 rebuild a table of all ~560 schema classes (3.6 ms a channel, every
    rerun, measured Dec 2026); `x2=alt.X2("end:Q")` costs 0.07 ms. Pages pass channel objects."""
    found = []
    for path in sorted((ROOT / "pages").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "encode":
                for kw in node.keywords:
                    values = kw.value.elts if isinstance(kw.value, (ast.List, ast.Tuple)) else [kw.value]
                    found += [f"{path.name}:{v.lineno} {kw.arg}=" for v in values
                              if isinstance(v, ast.JoinedStr) or (isinstance(v, ast.Constant) and isinstance(v.value, str))]
    assert not found, found
