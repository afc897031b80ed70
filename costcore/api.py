"""Public Python API: load a scenario, estimate it, evaluate many variants."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd

from . import kernel, schema
from .kernel import (ITEM_FIXED, K_CKPT_GB, K_ENABLED, K_FITS, K_GPU_H, K_GPUS, K_MEM_GB,
                     K_MIN_GPUS, K_PROD_H, K_USD, K_WALL_D, LINE_ITEMS, STATS)
from .schema import BY_PATH, CATALOG, CATALOG_KEYS, IX, RESOURCES, STAGES, ScenarioError
from .yamlio import parse_yaml, read_yaml_file

PRESET_DIR = Path(__file__).resolve().parent.parent / "presets"
_PRESET_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")


def load_scenario(source: str | Path | Mapping) -> dict:
    """Load and validate a scenario from a mapping, a YAML file path, or a preset name.

    Raises :class:`ScenarioError` (one sentence naming the field) on bad input.
    """
    if isinstance(source, Mapping):
        return schema.validate(dict(source))
    if isinstance(source, (str, Path)):
        p = Path(source)
        try:
            is_file = p.suffix in (".yaml", ".yml") or p.exists()
        except (OSError, ValueError):  # name too long, NUL byte
            raise ScenarioError("file", "is not a usable file name") from None
        if is_file:
            return schema.validate(read_yaml_file(p))
        return load_preset(str(source))
    raise ScenarioError("scenario", f"expected a mapping, a YAML path or a preset name, got {type(source).__name__}")


def load_yaml_text(text: str | bytes, what: str = "upload") -> dict:
    """Validate a scenario given as YAML text (uploads)."""
    return schema.validate(parse_yaml(text, what=what))


def preset_names() -> list[str]:
    return sorted(p.stem for p in PRESET_DIR.glob("*.yaml"))


def load_preset(name: str) -> dict:
    """Load a preset by name from presets/ only (no paths: ``../x`` is refused)."""
    if not isinstance(name, str) or not _PRESET_NAME.match(name) or name not in preset_names():
        shown = name if isinstance(name, str) and len(name) < 60 else "that name"
        raise ScenarioError("preset", f"unknown preset {shown!r}; choose one of: " + ", ".join(preset_names()))
    return schema.validate(read_yaml_file(PRESET_DIR / f"{name}.yaml"))


def preset_titles() -> dict[str, str]:
    return {n: load_preset(n)["name"] for n in preset_names()}


@dataclass
class Result:
    """The estimate of one scenario: line items ($) and per-stage statistics."""
    scenario: dict
    vector: np.ndarray
    items: np.ndarray  # (stages, line items) in $
    stats: np.ndarray  # (stages, STATS)

    @property
    def stages(self) -> list[str]:
        return [s for i, s in enumerate(STAGES) if self.stats[i, K_ENABLED] > 0.5]

    def stat(self, stage: str, name: str) -> float:
        return float(self.stats[STAGES.index(stage), STATS.index(name)])

    @property
    def total_usd(self) -> float:
        return float(self.stats[:, K_USD].sum())

    @property
    def fixed_usd(self) -> float:
        return float((self.items * ITEM_FIXED).sum())

    @property
    def elastic_usd(self) -> float:
        return self.total_usd - self.fixed_usd

    @property
    def gpu_hours(self) -> float:
        return float(self.stats[:, K_GPU_H].sum())

    @property
    def peak_gpus(self) -> int:
        """Most GPUs held at once: stages in sequence, overlapping as schedule.<stage>_overlap says."""
        from .budget import concurrent_peak_gpus
        return int(round(concurrent_peak_gpus(self))) if self.stages else 0

    def resource_matrix(self) -> np.ndarray:
        """(stages, resources) in $."""
        m = np.zeros((len(STAGES), len(RESOURCES)))
        for i, (_, res, _, _) in enumerate(LINE_ITEMS):
            m[:, RESOURCES.index(res)] += self.items[:, i]
        return m

    def stage_usd(self, stage: str) -> dict[str, float]:
        row = self.resource_matrix()[STAGES.index(stage)]
        return {r: float(v) for r, v in zip(RESOURCES, row)}

    def to_dict(self) -> dict[str, Any]:
        m = self.resource_matrix()
        stages = {}
        for s in self.stages:
            i = STAGES.index(s)
            st = self.stats[i]
            stages[s] = {
                "gpu_hours": float(st[K_GPU_H]),
                "productive_gpu_hours": float(st[K_PROD_H]),
                "wall_days": float(st[K_WALL_D]),
                "num_gpus": int(st[K_GPUS]),
                "usd": {r: float(m[i, j]) for j, r in enumerate(RESOURCES)},
                "usd_total": float(st[K_USD]),
                "fixed_usd": float((self.items[i] * ITEM_FIXED).sum()),
                "memory_per_gpu_gb": float(st[K_MEM_GB]),
                "fits": bool(st[K_FITS] > 0.5),
                "min_gpus": int(st[K_MIN_GPUS]),
                "checkpoint_gb": float(st[K_CKPT_GB]),
            }
        out = {
            "name": self.scenario.get("name", ""),
            "total_usd": self.total_usd,
            "fixed_usd": self.fixed_usd,
            "elastic_usd": self.elastic_usd,
            "gpu_hours": self.gpu_hours,
            "peak_gpus": self.peak_gpus,
            "stages": stages,
            "resources": {r: float(m[:, j].sum()) for j, r in enumerate(RESOURCES)},
        }
        from .budget import budget_status, lifecycle
        status = budget_status(self)
        if status is not None:
            out["budget"] = status
        life = lifecycle(self)
        if life.iterations > 1:
            out["lifecycle"] = {"iterations": life.iterations, "every_months": life.every_months,
                                "stages": life.stages, "per_iteration_usd": life.per_iteration_usd,
                                "total_usd": life.total_usd}
        _assert_finite(out)
        return out

    def line_items(self) -> pd.DataFrame:
        """One row per (enabled stage, line item): stage, resource, item, label, kind, usd."""
        rows = []
        for s in self.stages:
            i = STAGES.index(s)
            for j, (key, res, fixed, label) in enumerate(LINE_ITEMS):
                rows.append({"stage": s, "resource": res, "item": key, "label": label,
                             "kind": "fixed" if fixed else "elastic", "usd": float(self.items[i, j])})
        return pd.DataFrame(rows, columns=["stage", "resource", "item", "label", "kind", "usd"])

    def stage_table(self) -> pd.DataFrame:
        m = self.resource_matrix()
        rows = []
        for s in self.stages:
            i = STAGES.index(s)
            row = {"stage": s}
            row.update({r: float(m[i, j]) for j, r in enumerate(RESOURCES)})
            row["total"] = float(self.stats[i, K_USD])
            row["gpu_hours"] = float(self.stats[i, K_GPU_H])
            row["wall_days"] = float(self.stats[i, K_WALL_D])
            rows.append(row)
        return pd.DataFrame(rows)


def _assert_finite(obj) -> None:
    if isinstance(obj, dict):
        for v in obj.values():
            _assert_finite(v)
    elif isinstance(obj, float) and not math.isfinite(obj):
        raise ArithmeticError("the core produced a non-finite number; please report the scenario")


def estimate(scenario: Mapping | str | Path) -> Result:
    """Estimate every enabled stage of a scenario (mapping, YAML path or preset name)."""
    scn = load_scenario(scenario)
    x = schema.to_vector(scn)
    items, stats = kernel.evaluate_vector(x)
    return Result(scenario=scn, vector=x, items=items, stats=stats)


# ---------------------------------------------------------------------------
# Variants of one scenario
# ---------------------------------------------------------------------------
def _expand_columns(columns: Mapping[str, Any]) -> tuple[list[int], list[np.ndarray]]:
    """Turn {path: values} into vector indices and float columns (GPU names expand to specs)."""
    idx, cols = [], []
    n = None
    for path, values in columns.items():
        if path not in BY_PATH:
            raise ScenarioError(path, "unknown setting")
        f = BY_PATH[path]
        if f.kind == "enum":
            try:
                codes = np.array([float(f.choices.index(v)) if isinstance(v, str) else float(v) for v in values])
            except ValueError:
                raise ScenarioError(path, f"must be {f.allowed()}") from None
        else:
            codes = np.asarray(values, dtype=np.float64).ravel()
        if n is None:
            n = len(codes)
        elif len(codes) != n:
            raise ScenarioError(path, f"has {len(codes)} values but other columns have {n}")
        if not np.all(np.isfinite(codes)) or codes.min(initial=f.lo) < f.lo or codes.max(initial=f.hi) > f.hi:
            raise ScenarioError(path, f"values must be {f.allowed()}")
        idx.append(IX[path])
        cols.append(codes)
        if path == "hardware.gpu":
            for key in CATALOG_KEYS:
                if "hardware." + key in columns:
                    continue
                spec = np.array([CATALOG[schema.GPU_NAMES[int(c)]][key] for c in codes], dtype=np.float64)
                idx.append(IX["hardware." + key])
                cols.append(spec)
    return idx, cols


def batch(scenario: Mapping | str | Path, columns: Mapping[str, Any], full: bool = False,
          vector: np.ndarray | None = None) -> np.ndarray:
    """Evaluate many variants of one scenario in one call of the parallel kernel.

    Parameters
    ----------
    scenario : the base scenario (mapping, YAML path or preset name).
    columns : {dotted path: values}; all columns have the same length n and
        row i is one variant. ``hardware.gpu`` values are names (or codes)
        and bring that GPU's catalog specs along.
    full : False -> (n, stages) total $ per stage; True -> (n, stages,
        resources + [gpu_hours, productive_gpu_hours, wall_days]).
    """
    base = vector if vector is not None else schema.to_vector(load_scenario(scenario))
    idx, cols = _expand_columns(columns)
    if not cols:
        raise ScenarioError("columns", "give at least one setting to vary")
    mat = np.empty((len(cols), len(cols[0])))
    for j, c in enumerate(cols):
        mat[j] = c
    out = kernel.evaluate_batch(base, np.array(idx, dtype=np.int64), mat, full=full)
    return out if full else out[:, :, 0]


BATCH_COLUMNS = list(RESOURCES) + list(kernel.BATCH_EXTRA)
