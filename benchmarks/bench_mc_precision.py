"""How many Monte Carlo samples the Sensitivity page needs: prints numbers, asserts nothing.

    python benchmarks/bench_mc_precision.py [--presets pipeline-70b,llama3-8b] [--seeds 8]

For each preset, the total's P10, P50 and P90 from a million samples (seed 99) are the reference; for
each sample count the page offers, ``--seeds`` runs with other seeds give the largest relative
distance of any of the three percentiles from the reference (worst and median over the seeds), and
the time of one run. The page shows 3 significant digits, so a distance under about 0.5% is a change
in the third digit at most. The spread P10..P90 itself (the model's uncertainty) is tens of percent.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--presets", default="pipeline-70b,llama3-8b")
    ap.add_argument("--seeds", type=int, default=8)
    ap.add_argument("--counts", default="1000,5000,20000,50000,100000")
    args = ap.parse_args()
    from costcore.analysis import sensitivity as sens
    from costcore.scenario import loaders

    counts = [int(c) for c in args.counts.split(",")]
    for preset in args.presets.split(","):
        scn = loaders.load_preset(preset)
        dists = sens.default_distributions(scn)
        sens.monte_carlo(scn, n=1000, seed=0, dists=dists)  # compile / load the kernels outside the clock
        ref = sens.monte_carlo(scn, n=1_000_000, seed=99, dists=dists).percentiles.loc["total"]
        print(f"{preset}: 1M samples P10 ${ref.P10 / 1e6:,.2f}M  P50 ${ref.P50 / 1e6:,.2f}M  P90 ${ref.P90 / 1e6:,.2f}M")
        for n in counts:
            errs = []
            for seed in range(args.seeds):
                p = sens.monte_carlo(scn, n=n, seed=seed, dists=dists).percentiles.loc["total"]
                errs.append(max(abs(p[k] / ref[k] - 1.0) for k in ("P10", "P50", "P90")))
            t0 = time.perf_counter()
            sens.monte_carlo(scn, n=n, seed=1, dists=dists)
            ms = (time.perf_counter() - t0) * 1000
            print(f"  {n:>9,} samples: farthest percentile {max(errs):.2%} from the 1M run (median over "
                  f"{args.seeds} seeds {statistics.median(errs):.2%}); one run {ms:,.0f} ms")


if __name__ == "__main__":
    main()
