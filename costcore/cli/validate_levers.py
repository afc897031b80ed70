"""CLI subcommands beyond estimate/presets (validation; levers come with budgeting)."""
from __future__ import annotations

import json

from costcore import fmt


def cmd_validate_db(args) -> int:
    """``validate --db STORE``: the planner's defaults on the organisation's own runs, and the fitted factor."""
    from costcore.actuals import efficiency, queries, store
    st = store.open_store(args.db, must_exist=True)
    try:
        fit = efficiency.fit(queries.fetch(queries.run_table(st.jobs_table())))
    finally:
        st.close()
    if args.save:
        import yaml
        from pathlib import Path
        doc = {"factor": fit["factor"], "sustained_fraction": round(fit["sustained_fraction"], 4),
               "runs": len(fit["runs"]), "loo_median_error": round(fit["loo_median_error"], 4),
               "store": str(args.db), "applies_to": "efficiency.sustained_fraction (multiplied)"}
        Path(args.save).write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    if args.format == "json":
        print(json.dumps(fit, indent=2, allow_nan=False))
        return 0
    from costcore.fmt import one_line
    print(f"{'run':<14}{'GPU':<14}{'GPUs':>6}{'actual GPU-h':>14}{'predicted':>12}{'ratio':>8}{'fitted':>8}{'LOO':>8}")
    for r in fit["runs"]:
        print(f"{one_line(r['run_id'], 13):<14}{one_line(r['gpu_type'], 13):<14}{r['gpu_count']:>6,}"
              f"{r['actual_gpu_hours']:>14,.0f}{r['predicted_gpu_hours']:>12,.0f}{r['ratio']:>8.2f}"
              f"{r['fitted_ratio']:>8.2f}{r['loo_ratio']:>8.2f}")
    print(f"\n{fmt.count(len(fit['runs']), 'run')}. Defaults: median error {fit['default_median_error']:.1%}. Organisation "
          f"efficiency factor {fit['factor']:.2f} (sustained fraction {fit['sustained_fraction']:.3g}): median error "
          f"{fit['fitted_median_error']:.1%} in sample, {fit['loo_median_error']:.1%} leave-one-out (worst "
          f"{fit['loo_worst_fold']:.2f}x).")
    print("apply it: python -m costcore estimate PLAN.yaml --org-efficiency " + (args.save or str(args.db)))
    return 0


def cmd_validate(args) -> int:
    if getattr(args, "db", None):
        return cmd_validate_db(args)
    from costcore.validation import runs as validation
    df = validation.validation_table(throughput=args.throughput, dataset=args.runs)
    if df.empty:
        print(f"no run in {args.runs} publishes a throughput" if args.throughput
              else f"no usable run in {args.runs} (each needs tokens, a known GPU and GPU-hours or days with GPUs)")
        return 0
    if args.format == "json":
        runs = df.drop(columns=["source"])
        runs = runs.astype(object).where(runs.notna(), None)  # NaN is not JSON: unpublished figures are null
        print(json.dumps({"summary": validation.summary(df), "runs": runs.to_dict("records")},
                         indent=2, default=float, allow_nan=False))
        return 0
    cols = ["run", "gpu", "num_gpus", "basis", "published", "predicted", "ratio", "error", "predicted_gpu_hours",
            "predicted_days", "mfu", "notes"]
    if args.format == "markdown":
        print(markdown_table(df, throughput=args.throughput, dataset=args.runs))
        return 0
    with_fmt = df[cols].copy()
    print(with_fmt.to_string(index=False, float_format=lambda v: f"{v:,.3g}"))
    s = validation.summary(df)
    print(f"\nmedian error {s['median_error']:.1%}; worst {s['worst_fold']:.2f}x ({s['worst_run']}); {fmt.count(s['runs'], 'run')}")
    skipped = validation.skipped_runs(validation.load_runs(args.runs))
    if skipped and not args.throughput:
        print("not scored: " + "; ".join(f"{fmt.one_line(n, 80)}: {fmt.one_line(why, 200)}" for n, why in skipped.items()))
    if not args.throughput:
        b = validation.baseline_table(dataset=args.runs)
        print(f"baseline 6ND/(peak x 30%): median error {b['error'].median():.1%}; worst {b['fold'].max():.2f}x")
    return 0


def markdown_table(df, throughput: bool = False, dataset: str = "reference") -> str:
    from costcore.validation import runs as validation
    lines = ["| run | GPU | GPUs | compared | published | predicted | predicted / published | MFU used | notes |",
             "|---|---|---:|---|---:|---:|---:|---:|---|"]
    for r in df.itertuples():
        nd = 1 if r.basis == "days" else 0
        lines.append(f"| {r.run} | {r.gpu} | {r.num_gpus:,} | {r.basis} | {r.published:,.{nd}f} | {r.predicted:,.{nd}f} | "
                     f"{r.ratio:.2f} | {r.mfu:.1%} | {r.notes} |")
    s = validation.summary(df)
    lines.append("")
    lines.append(f"Median error **{s['median_error']:.1%}**, worst **{s['worst_fold']:.2f}x** ({s['worst_run']}), {s['runs']} runs.")
    if not throughput:
        b = validation.baseline_table(dataset=dataset)
        lines.append(f"The plain rule 6ND / (peak x 30%) on the same rows: median error {b['error'].median():.1%}, "
                     f"worst {b['fold'].max():.2f}x.")
    return "\n".join(lines)


def cmd_levers(args) -> int:
    from costcore import api
    from costcore.analysis import levers
    from costcore.scenario.loaders import apply_sets
    from costcore.fmt import one_line, usd
    scn = apply_sets(api.load_scenario(args.file), args.set)
    base = api.estimate(scn).total_usd
    lv = levers.levers(scn)
    if args.format == "json":
        print(json.dumps({"total_usd": base, "levers": [
            {"key": x.key, "title": x.title, "saving_usd": x.saving_usd, "new_total_usd": x.new_total_usd,
             "risk": x.risk, "changes": x.changes} for x in lv]}, indent=2))
        return 0
    print(f"{one_line(scn.get('name', ''))}: total {usd(base)}")
    for x in lv:
        share = x.saving_usd / base if base else 0.0
        print(f"{usd(x.saving_usd):>10} ({share:6.1%})  {x.title}")
        print(f"{'':>21}risk: {x.risk}")
    return 0


def register(sub) -> None:
    lv = sub.add_parser("levers", help="optimization levers for a scenario, sorted by saving")
    lv.add_argument("file", help="scenario YAML file or preset name")
    lv.add_argument("--set", action="append", default=[], metavar="dotted.key=value")
    lv.add_argument("--format", choices=("table", "json"), default="table")
    lv.set_defaults(func=cmd_levers)
    v = sub.add_parser("validate", help="predicted vs published GPU-hours of public pre-training runs")
    v.add_argument("--throughput", action="store_true", help="feed each run's published throughput instead of defaults")
    v.add_argument("--format", choices=("table", "json", "markdown"), default="table")
    v.add_argument("--runs", default="reference", metavar="reference|extra|FILE.csv",
                   help="reference: the runs the defaults are calibrated on; extra: other public runs, not in "
                        "the fit (out of sample); or a CSV of your own runs with the columns of "
                        "costcore/data/published_runs.csv (name, params_total_b, tokens_b, gpu, gpu_hours or "
                        "days; optional params_active_b, seq_len, num_gpus, throughput, source)")
    v.add_argument("--db", default=None, metavar="PATH_OR_URL",
                   help="score the planner on your own runs in an actuals store (completed pre-training runs with "
                        "params_b, tokens_b, GPU type and count) and fit your organisation's efficiency factor")
    v.add_argument("--save", default=None, metavar="F.yaml", help="with --db: write the fitted factor to this file "
                   "(for estimate --org-efficiency F.yaml)")
    v.set_defaults(func=cmd_validate)
