"""Grid search of the default-MFU coefficients against the published runs.

Fits on the reference runs only (costcore/data/published_runs.csv) and prints,
for the best settings, the errors on those runs and on the extra runs
(costcore/data/extra_runs.csv), which are never used for fitting and so
measure out-of-sample error. Searched: the steady-state mfu_base of the two
generations with several published runs (A100, H100) and the shared physics
terms (model size, small models, full recompute). The attention-kernel
efficiency per generation is not searched: it is a cited figure
(hardware.yaml attn_source). Run:
    python benchmarks/calibrate.py
"""
import itertools
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from costcore import api, validation  # noqa: E402


def load(dataset):
    rows = validation.pretraining_rows(dataset=dataset)
    out = []
    for _, r in rows.iterrows():
        scn = validation.scenario_for(r)[0]
        kind, pub = ("h", r["gpu_hours"]) if r["gpu_hours"] == r["gpu_hours"] else ("d", r["days"])
        out.append((scn, kind, pub))
    return out


SETS = {"reference": load("reference"), "extra": load("extra")}
GRID = {
    "a100": [0.50, 0.525, 0.55, 0.575],
    "h100": [0.45, 0.50, 0.55],
    "size_exponent": [0.0, 0.02, 0.045],
    "small_model_b": [0.0, 0.1, 0.2],
    "recompute_full_factor": [0.75, 0.80, 0.85],
}
BASE_GPUS = {"a100": ("a100-40gb", "a100-80gb"), "h100": ("h100-80gb",)}


def ratios(settings, runs):
    eff = {k: settings[k] for k in ("size_exponent", "small_model_b", "recompute_full_factor")}
    out = []
    for scn, kind, pub in runs:
        hw = dict(scn["hardware"])
        for key, gpus in BASE_GPUS.items():
            if hw["gpu"] in gpus:
                hw["mfu_base"] = settings[key]
        res = api.estimate(dict(scn, hardware=hw, efficiency=eff))
        d = res.stat("pretrain", "wall_days")
        out.append((d * 24 * res.stat("pretrain", "num_gpus") if kind == "h" else d) / pub)
    return np.array(out)


def score(r):
    fold = np.maximum(r, 1 / r)
    return fold.max(), float(np.median(np.abs(r - 1)))


results = []
for combo in itertools.product(*GRID.values()):
    settings = dict(zip(GRID, combo))
    worst, med = score(ratios(settings, SETS["reference"]))
    results.append((worst + med, worst, med, settings))
results.sort(key=lambda t: t[0])
print("best on the reference runs (fit), with the extra runs (out of sample):")
for _, worst, med, settings in results[:8]:
    ew, em = score(ratios(settings, SETS["extra"]))
    print(f"reference worst {worst:.2f}x median {med:.1%} | extra worst {ew:.2f}x median {em:.1%} | {settings}")
