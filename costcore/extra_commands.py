"""CLI subcommands beyond estimate/presets (validation; levers come with budgeting)."""
from __future__ import annotations

import json


def cmd_validate(args) -> int:
    from . import validation
    df = validation.validation_table(throughput=args.throughput)
    if args.format == "json":
        print(json.dumps({"summary": validation.summary(df), "runs": df.drop(columns=["source"]).to_dict("records")},
                         indent=2, default=float))
        return 0
    cols = ["run", "gpu", "num_gpus", "basis", "published", "predicted", "ratio", "mfu", "notes"]
    with_fmt = df[cols].copy()
    print(with_fmt.to_string(index=False, float_format=lambda v: f"{v:,.3g}"))
    s = validation.summary(df)
    print(f"\nmedian error {s['median_error']:.1%}; worst {s['worst_fold']:.2f}x ({s['worst_run']}); {s['runs']} runs")
    if not args.throughput:
        b = validation.baseline_table()
        print(f"baseline 6ND/(peak x 30%): median error {b['error'].median():.1%}; worst {b['fold'].max():.2f}x")
    return 0


def register(sub) -> None:
    v = sub.add_parser("validate", help="predicted vs published GPU-hours of public pre-training runs")
    v.add_argument("--throughput", action="store_true", help="feed each run's published throughput instead of defaults")
    v.add_argument("--format", choices=("table", "json"), default="table")
    v.set_defaults(func=cmd_validate)
