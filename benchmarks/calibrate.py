"""Fit the job-layout model's production knobs on the public runs and print the out-of-sample check.

The grid and the search live in costcore/validation/calibration.py: the knobs are fitted on the
runs of the ``calibration`` split; each calibration run is then predicted by a refit that did not
see it (leave-one-out) and each ``holdout`` run by the fit on all calibration runs. Run:
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
cal = calibration._calibration_columns(g)
print("best settings on the calibration runs (in-sample):")
for obj, settings in calibration.fit()[:5]:
    w, m = calibration.score(g.ratio[g.settings.index(settings), cal])
    print(f"  objective {obj:.3f} | worst {w:.2f}x median {m:.1%} | {settings}")
loo = calibration.leave_one_out()
print(f"\nleave-one-out over {loo['runs']} calibration runs: median error {loo['median_error']:.1%}, "
      f"worst {loo['worst_fold']:.2f}x")
for name, r in sorted(loo["ratios"].items(), key=lambda kv: -abs(np.log(kv[1])))[:8]:
    print(f"  {name}: {r:.2f}")
print(f"holdout ({len(loo['holdout'])} runs, never fitted): median {loo.get('holdout_median_error', 0):.1%}, "
      f"worst {loo.get('holdout_worst_fold', 0):.2f}x, P10-P90 band holds {loo.get('holdout_band_coverage', 0):.0%}")
for name, r in loo["holdout"].items():
    print(f"  {name}: {r:.2f}")
print(f"band: P10 x{np.exp(loo['band_log_p10']):.2f}, P90 x{np.exp(loo['band_log_p90']):.2f}")
for family, b in calibration.stage_bands().items():  # scored out of sample, nothing fitted on them
    print(f"{family} band ({', '.join(b['stages'])}; {b['runs']} runs): P10 x{np.exp(b['band_log_p10']):.2f}, "
          f"P90 x{np.exp(b['band_log_p90']):.2f}, holding {b['loo_coverage']:.0%} of its runs by leave-one-out")

if "--write" in sys.argv:
    calibration.SUMMARY_FILE.write_text(calibration.summary_text(datetime.date.today().isoformat()))
    print(f"wrote {calibration.SUMMARY_FILE}")
