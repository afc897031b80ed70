"""Calibration of the default-MFU coefficients on published runs, and its out-of-sample check.

The default utilization model (costcore.engine.formulas.default_mfu and
attention_mfu_factor) has six searched coefficients: the steady-state
``mfu_base`` of the two generations with several published runs (A100, H100),
the model-size exponent of A100-era GPUs and of Hopper, the small-model term
and the full-recompute factor. The attention-kernel efficiency per generation
is a cited figure and is not searched.

* :func:`fit` grid-searches them on every published run (reference and extra)
  by worst fold + median error, keeping only points that meet the issue's bar
  on the reference runs (worst <= 1.5x, median <= 12%).
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

from costcore import api
from costcore.validation import runs as validation

GRID = {
    "a100": (0.475, 0.50, 0.525),
    "h100": (0.30, 0.35, 0.40, 0.45, 0.50),
    "size_exponent": (0.0, 0.02, 0.045),
    "hopper_size_exponent": (-0.15, -0.10, -0.05, 0.0),
    "small_model_b": (0.0, 0.1, 0.2),
    "recompute_full_factor": (0.75, 0.80),
}
BASE_GPUS = {"a100": ("a100-40gb", "a100-80gb"), "h100": ("h100-80gb",)}
HOPPER = ("h100-80gb", "h800", "h200")
# H800 is an H100 with less NVLink bandwidth: its catalog base keeps this ratio to the H100 one.
H800_TO_H100 = 0.42 / 0.50
EFFICIENCY_KEYS = ("small_model_b", "recompute_full_factor")
# The bar on the reference runs, which every fit must meet.
REFERENCE_WORST, REFERENCE_MEDIAN = 1.5, 0.12


def runs(dataset: str) -> list[tuple[str, dict, str, float]]:
    """(name, defaults-only scenario, basis, published GPU-hours or days) per usable run."""
    out = []
    for _, r in validation.pretraining_rows(dataset=dataset).iterrows():
        out.append((str(r["name"]), validation.scenario_for(r)[0], *validation.published_figure(r)))
    return out


def ratios(settings: dict, run_list) -> np.ndarray:
    """Predicted / published for each run under one setting of the searched coefficients."""
    eff = {k: settings[k] for k in EFFICIENCY_KEYS}
    out = []
    for _, scn, basis, pub in run_list:
        hw = dict(scn["hardware"])
        for key, gpus in BASE_GPUS.items():
            if hw["gpu"] in gpus:
                hw["mfu_base"] = settings[key]
        if hw["gpu"] == "h800":
            hw["mfu_base"] = settings["h100"] * H800_TO_H100
        hw["size_exponent"] = settings["hopper_size_exponent" if hw["gpu"] in HOPPER else "size_exponent"]
        res = api.estimate(dict(scn, hardware=hw, efficiency=eff))
        out.append(validation.predicted_figure(res, basis) / pub)
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
    """Grid points that meet the bar on the reference runs, best first.

    Ranked by worst fold + median error over ``columns`` (default: every run, reference and extra);
    a point qualifies only if its reference runs stay within REFERENCE_WORST and REFERENCE_MEDIAN.
    """
    g = grid()
    cols = np.arange(g.ratio.shape[1]) if columns is None else columns
    obj = _objective(np.abs(np.log(g.ratio[:, cols])))
    ref = np.abs(np.log(g.ratio[:, :g.n_reference]))
    ok = (ref.max(axis=1) <= np.log(REFERENCE_WORST)) & (
        np.median(np.abs(g.ratio[:, :g.n_reference] - 1), axis=1) <= REFERENCE_MEDIAN)
    order = [i for i in np.argsort(obj, kind="stable") if ok[i]]
    return [(float(obj[i]), g.settings[i]) for i in order]


def leave_one_out() -> dict:
    """Refit on all runs but one, predict that one; the summary of those out-of-sample ratios."""
    g = grid()
    log_err = np.abs(np.log(g.ratio))
    n = g.ratio.shape[1]
    loo = np.empty(n)
    for j in range(n):
        cols = np.array([i for i in range(n) if i != j])
        best = int(np.argmin(_objective(log_err[:, cols])))  # unconstrained: j may be a reference run
        loo[j] = g.ratio[best, j]
    worst, median = score(loo)
    return {"ratios": dict(zip(g.names, loo)), "worst_fold": worst, "median_error": median, "runs": n,
            "rms_log_error": float(np.sqrt(np.mean(np.log(loo) ** 2)))}


SUMMARY_FILE = validation.DATA.parent / "calibration.yaml"


def summary_text(date: str) -> str:
    """The checked-in summary (costcore/data/calibration.yaml) as YAML text."""
    loo = leave_one_out()
    best = fit()[0][1]
    lines = [
        "# Written by `python benchmarks/calibrate.py --write`; tests/test_validation.py checks it is current.",
        "# mfu_log_sigma is the spread the Monte Carlo gives a default MFU: the RMS of ln(predicted /",
        "# published) when each run is predicted by a fit that did not see it (leave-one-out).",
        f"date: {date}",
        'source: "costcore/calibration.py leave_one_out over costcore/data/published_runs.csv and extra_runs.csv"',
        f"runs: {loo['runs']}",
        f"loo_median_error: {loo['median_error']:.4f}",
        f"loo_worst_fold: {loo['worst_fold']:.4f}",
        f"mfu_log_sigma: {loo['rms_log_error']:.4f}",
        "best_fit: {" + ", ".join(f"{k}: {v}" for k, v in best.items()) + "}",
    ]
    return "\n".join(lines) + "\n"
