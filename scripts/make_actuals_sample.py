"""Write the sample data set of the Review page: python scripts/make_actuals_sample.py [OUT_DIR] [--seed 7].

FOCUS bill (focus.csv), run CSV (runs.csv), sacct --parsable2 output (sacct.txt) and truth.json (the
injected anomalies, the true efficiency factor, the exact billed sums), from costcore.actuals.sample
with a fixed seed: the same seed writes the same bytes. Then:

    python -m costcore actuals import OUT_DIR/focus.csv OUT_DIR/runs.csv OUT_DIR/sacct.txt --db OUT_DIR/store.duckdb
    python -m costcore actuals report --db OUT_DIR/store.duckdb --plan llama3-8b
    python -m costcore validate --db OUT_DIR/store.duckdb
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from costcore.actuals import sample  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", nargs="?", default="actuals-sample", help="directory to write (created)")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--pieces", type=int, default=1, help="billing rows per day, project, resource and run")
    args = p.parse_args()
    truth = sample.write_sample(args.out, seed=args.seed, pieces=args.pieces)
    for f in truth["files"]:
        print(f)
    print(f"billed ${truth['billed_usd']} over {sample.DAYS} days; {len(truth['anomalies'])} injected anomalous days; "
          f"plan: the {truth['plan']} preset")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
