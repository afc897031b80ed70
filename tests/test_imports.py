"""The package has no import cycle, and each room imports only the rooms below it.

Walks every ``import`` and ``from ... import`` in costcore/ (module level and inside
functions alike: a deferred import is still a dependency) and checks the graph of
costcore modules for cycles and for imports the layer table forbids. The table is
docs/architecture.md's.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "costcore"

# Room -> rooms it may import (besides itself). "top" is costcore/*.py (api, errors, fmt, __init__).
ALLOWED = {
    "errors": set(),
    "fmt": set(),
    # the media rules count tokens with the kernel's own formulas (plain functions of floats), so the
    # message and the estimate never disagree; deferred, so a refusal of a text-only file loads no numba
    "scenario": {"errors", "fmt", "engine.formulas"},
    # engine.feasibility writes its sentences' lists as fmt.words_list does ("a, b and c"; fmt imports nothing)
    "engine": {"errors", "fmt", "scenario"},
    # Result.to_dict: budget status, lifecycle; Result.warnings: the planner's warnings
    "api": {"errors", "fmt", "scenario", "engine", "analysis.budget", "analysis.warnings"},
    "analysis": {"errors", "fmt", "scenario", "engine", "api", "validation"},
    "validation": {"errors", "fmt", "scenario", "engine", "api"},
    # shared cluster (issue 18): a portfolio of scenarios on one pool; reuses every stage's cost via api
    "cluster": {"errors", "fmt", "scenario", "engine", "api", "analysis"},
    # plan vs actual (issue 19): imported bills and job records in DuckDB, review queries in Ibis
    "actuals": {"errors", "fmt", "scenario", "engine", "api", "analysis", "validation"},
    "cli": {"errors", "fmt", "scenario", "engine", "api", "analysis", "validation", "cli", "cluster", "actuals"},
    "init": {"errors", "scenario", "engine", "api", "analysis"},
    "main": {"cli"},
}


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def room(mod: str) -> str:
    parts = mod.split(".")
    if len(parts) == 1:
        return "init"
    if parts[1] in ("errors", "fmt", "api"):
        return parts[1]
    if parts[1] == "__main__":
        return "main"
    return parts[1]


def imports_of(path: Path, known: set[str]) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only = set()  # imports under "if TYPE_CHECKING:" run only for type checkers
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            typing_only.update(id(n) for b in node.body for n in ast.walk(b))
    out = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                raise AssertionError(f"{path}: relative import (use costcore.<room>.<module>)")
            base = node.module or ""
            names = [base] + [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        for n in names:
            while n and n not in known:
                n = n.rpartition(".")[0]
            if n and n != "costcore":
                out.add(n)
    return out


def graph() -> dict[str, set[str]]:
    files = sorted(PKG.rglob("*.py"))
    known = {module_name(p) for p in files}
    return {module_name(p): imports_of(p, known) - {module_name(p)} for p in files}


def test_every_module_is_seen():
    g = graph()
    assert "costcore.engine.kernel" in g and "costcore.scenario.schema" in g and "costcore.api" in g
    assert "costcore.scenario.schema" in g["costcore.engine.kernel"]


def test_no_import_cycle():
    g = graph()
    # package __init__ modules only document their room; a cycle through one would still be a cycle
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(m):
        state[m] = 1
        stack.append(m)
        for d in sorted(g.get(m, ())):
            if state.get(d) == 1:
                cycles.append(stack[stack.index(d):] + [d])
            elif d not in state:
                visit(d)
        stack.pop()
        state[m] = 2
    for m in sorted(g):
        if m not in state:
            visit(m)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_rooms_import_only_what_the_table_allows():
    bad = []
    for mod, deps in graph().items():
        r = room(mod)
        for d in deps:
            rd = room(d)
            if rd == r:
                continue
            full = ".".join(d.split(".")[1:3])
            if rd not in ALLOWED[r] and full not in ALLOWED[r]:
                bad.append(f"{mod} imports {d} ({r} may import {sorted(ALLOWED[r]) or 'nothing'})")
    assert not bad, "\n".join(bad)


def test_the_light_rooms_import_no_heavy_library():
    """scenario/ and errors load before numba and pandas (fast CLI refusals)."""
    for p in list((PKG / "scenario").glob("*.py")) + [PKG / "errors.py", PKG / "fmt.py"]:
        tree = ast.parse(p.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                for n in names:
                    assert n.split(".")[0] not in ("numba", "pandas", "streamlit", "altair"), f"{p.name} imports {n}"
