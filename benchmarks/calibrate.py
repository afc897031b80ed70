"""Grid search of the default-MFU coefficients against the published runs.

Fits on every published run (costcore/data/published_runs.csv and
extra_runs.csv) among settings that meet the bar on the reference runs, prints
the best settings with their errors on both sets, then the leave-one-out check
over all runs (refit without one run, predict it): the out-of-sample figure.
The grid and the search live in costcore/calibration.py. Run:
    python benchmarks/calibrate.py            # print
    python benchmarks/calibrate.py --write    # also refresh costcore/data/calibration.yaml
"""
import datetime
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from costcore.validation import calibration  # noqa: E402

g = calibration.grid()
ref = np.arange(g.n_reference)
extra = np.arange(g.n_reference, len(g.names))
print("best on all runs (reference bar met), errors on each set:")
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

if "--write" in sys.argv:
    calibration.SUMMARY_FILE.write_text(calibration.summary_text(datetime.date.today().isoformat()))
    print(f"wrote {calibration.SUMMARY_FILE}")
