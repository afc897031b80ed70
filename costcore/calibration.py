"""Calibration of the default-MFU coefficients on published runs, and its out-of-sample check.

The default utilization model (costcore.formulas.default_mfu and
attention_mfu_factor) has five searched coefficients: the steady-state
``mfu_base`` of the two generations with several published runs (A100, H100),
the model-size exponent, the small-model term and the full-recompute factor.
The attention-kernel efficiency per generation is a cited figure and is not
searched.

* :func:`fit` grid-searches them on the reference runs (the project's copy of
  the reference set) by worst fold + median error.
* :func:`leave_one_out` refits on every published run but one (reference and
  extra) and predicts the one left out: the error to expect on a run the
  model has not seen.

Used by ``benchmarks/calibrate.py`` and ``scripts/make_validation_doc.py``.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from . import api, validation

GRID = {
    "a100": (0.475, 0.50, 0.525, 0.55),
    "h100": (0.40, 0.45, 0.50, 0.55),
    "size_exponent": (0.0, 0.02, 0.045),
    "small_model_b": (0.0, 0.1, 0.2),
    "recompute_full_factor": (0.75, 0.80, 0.85),
}
BASE_GPUS = {"a100": ("a100-40gb", "a100-80gb"), "h100": ("h100-80gb",)}
EFFICIENCY_KEYS = ("size_exponent", "small_model_b", "recompute_full_factor")


def runs(dataset: str) -> list[tuple[str, dict, str, float]]:
    """(name, defaults-only scenario, 'h' or 'd', published GPU-hours or days) per usable run."""
    out = []
    for _, r in validation.pretraining_rows(dataset=dataset).iterrows():
        scn = validation.scenario_for(r)[0]
        kind, pub = ("h", float(r["gpu_hours"])) if r["gpu_hours"] > 0 else ("d", float(r["days"]))
        out.append((str(r["name"]), scn, kind, pub))
    return out


def ratios(settings: dict, run_list) -> np.ndarray:
    """Predicted / published for each run under one setting of the searched coefficients."""
    eff = {k: settings[k] for k in EFFICIENCY_KEYS}
    out = []
    for _, scn, kind, pub in run_list:
        hw = dict(scn["hardware"])
        for key, gpus in BASE_GPUS.items():
            if hw["gpu"] in gpus:
                hw["mfu_base"] = settings[key]
        res = api.estimate(dict(scn, hardware=hw, efficiency=eff))
        days = res.stat("pretrain", "wall_days")
        out.append((days * 24 * res.stat("pretrain", "num_gpus") if kind == "h" else days) / pub)
    return np.array(out)


def score(r: np.ndarray) -> tuple[float, float]:
    """(worst fold, median relative error)."""
    return float(np.maximum(r, 1 / r).max()), float(np.median(np.abs(r - 1)))


@dataclass(frozen=True)
class Grid:
    settings: tuple  # one dict per grid point
    names: tuple  # run names, reference runs first
    n_reference: int
    ratio: np.ndarray  # grid points x runs


@lru_cache(maxsize=1)
def grid() -> Grid:
    """Every grid point evaluated on every reference and extra run (one matrix)."""
    ref, extra = runs("reference"), runs("extra")
    settings = tuple(dict(zip(GRID, c)) for c in itertools.product(*GRID.values()))
    m = np.array([ratios(s, ref + extra) for s in settings])
    return Grid(settings, tuple(r[0] for r in ref + extra), len(ref), m)


def _objective(log_err: np.ndarray) -> np.ndarray:
    return log_err.max(axis=1) + np.median(log_err, axis=1)


def fit(columns: np.ndarray | None = None) -> list[tuple[float, dict]]:
    """Grid points sorted by worst-fold + median error on the given runs (default: reference runs)."""
    g = grid()
    cols = np.arange(g.n_reference) if columns is None else columns
    obj = _objective(np.abs(np.log(g.ratio[:, cols])))
    order = np.argsort(obj, kind="stable")
    return [(float(obj[i]), g.settings[i]) for i in order]


def leave_one_out() -> dict:
    """Refit on all runs but one, predict that one; the summary of those out-of-sample ratios."""
    g = grid()
    log_err = np.abs(np.log(g.ratio))
    n = g.ratio.shape[1]
    loo = np.empty(n)
    for j in range(n):
        cols = np.array([i for i in range(n) if i != j])
        best = int(np.argmin(_objective(log_err[:, cols])))
        loo[j] = g.ratio[best, j]
    worst, median = score(loo)
    return {"ratios": dict(zip(g.names, loo)), "worst_fold": worst, "median_error": median, "runs": n}
