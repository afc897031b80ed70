"""Grid search of the default-MFU coefficients against the published runs.

Fits on the reference runs only (costcore/data/published_runs.csv) and prints,
for the best settings, the errors on those runs and on the extra runs
(costcore/data/extra_runs.csv), which are not in that fit. Then a
leave-one-out check over all runs: refit without one run, predict it. The
grid and the search live in costcore/calibration.py. Run:
    python benchmarks/calibrate.py
"""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from costcore import calibration  # noqa: E402

g = calibration.grid()
ref = np.arange(g.n_reference)
extra = np.arange(g.n_reference, len(g.names))
print("best on the reference runs (fit), with the extra runs (not in the fit):")
for _, settings in calibration.fit()[:8]:
    i = g.settings.index(settings)
    rw, rm = calibration.score(g.ratio[i, ref])
    ew, em = calibration.score(g.ratio[i, extra])
    print(f"reference worst {rw:.2f}x median {rm:.1%} | extra worst {ew:.2f}x median {em:.1%} | {settings}")
loo = calibration.leave_one_out()
print(f"\nleave-one-out over {loo['runs']} runs: median error {loo['median_error']:.1%}, "
      f"worst {loo['worst_fold']:.2f}x")
for name, r in sorted(loo["ratios"].items(), key=lambda kv: -abs(np.log(kv[1])))[:6]:
    print(f"  {name}: {r:.2f}")
