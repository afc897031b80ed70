"""Command line: ``python -m costcore estimate FILE.yaml [--set k=v ...] [--format table|json|csv]`` and
``python -m costcore plan FILE.yaml [--stage pretrain] [--top 10] [--format table|json]`` (the fastest job
layouts of a training stage that fit, best first).

Exit codes: 0 done; 2 bad input (one line on stderr naming the field); 3 the plan
is infeasible (a stage does not fit in GPU memory): the table says so where the
total would be, the JSON carries ``"feasible": false`` and the sentences under
``"infeasible"``.

The input is read and validated before numba and pandas are imported, so a
refusal costs little more than Python's start.
"""
from __future__ import annotations

import argparse
import io
import json
import sys

from costcore import fmt
from costcore.scenario import loaders
from costcore.scenario.loaders import apply_sets  # noqa: F401  (cli.apply_sets: the --set rule)
from costcore.scenario import schema
from costcore.errors import ScenarioError
from costcore.scenario.schema import RESOURCE_LABELS, RESOURCES, STAGE_SHORT
from costcore.scenario.yamlio import parse_yaml

EXIT_BAD_INPUT = 2
EXIT_INFEASIBLE = 3


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2
        print(f"error: {message}", file=sys.stderr)
        raise SystemExit(2)


fmt_usd = fmt.usd


def render_table(res) -> str:
    d = res.to_dict()
    cols = ["Stage"] + [RESOURCE_LABELS[r] for r in RESOURCES] + ["Total", "GPU time", "Wall-clock", "Memory/GPU"]
    rows = []
    for s, v in d["stages"].items():
        rows.append([STAGE_SHORT[s]] + [fmt_usd(v["usd"][r]) for r in RESOURCES] + [
            fmt_usd(v["usd_total"]), fmt.gpu_hours(v["gpu_hours"]), fmt.days(v["wall_days"]),
            fmt.gb(v["memory_per_gpu_gb"])])
    if d["feasible"]:
        rows.append(["TOTAL"] + [fmt_usd(d["resources"][r]) for r in RESOURCES] + [
            fmt_usd(d["total_usd"]), fmt.gpu_hours(d["gpu_hours"]), "", ""])
    widths = [max(len(str(r[i])) for r in rows + [cols]) for i in range(len(cols))]
    out = io.StringIO()
    out.write(f"{fmt.one_line(d['name'])}\n")
    out.write("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cols, widths))) + "\n")
    for r in rows:
        out.write("  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(zip(r, widths))) + "\n")
    if not d["feasible"]:
        out.write("TOTAL: none, the plan is infeasible.\n")  # once, then each stage's reason (it was repeated)
        for sentence in d["infeasible"]:
            out.write(f"  - {sentence}\n")
        return out.getvalue()
    out.write(f"fixed {fmt_usd(d['fixed_usd'])}  elastic {fmt_usd(d['elastic_usd'])}  peak GPUs {d['peak_gpus']:,}\n")
    for s, v in d["stages"].items():
        if "multimodal" in v:
            out.write(_media_line(s, v, res) + "\n")
    for w in d["warnings"]:
        out.write(f"warning: {w}\n")
    return out.getvalue()


def _media_line(stage: str, v: dict, res) -> str:
    """A multimodal phase's media: items x tokens, the preprocessing and media storage lines; an evaluation's
    benchmark media: items x tokens and the encoder's GPU-hours (no preprocessing or storage is billed)."""
    m, items = v["multimodal"], v["line_items"]
    words = schema.MEDIA_WORDS[schema.effective_value(res.scenario, "multimodal.modality")]
    head = (f"{schema.STAGE_LABELS[stage]} media: {fmt.num(m['media_items'])} {words} x "
            f"{fmt.num(m['media_tokens_per_item'])} tokens")
    if stage not in schema.MM_STAGES:
        return (f"{head} ({fmt.pct(m['media_token_share'])} of the prompt tokens); encoder and connector "
                f"{fmt.num(m['encoder_gpu_hours'])} GPU-h")
    line = (f"{head} ({fmt.pct(m['media_token_share'])} of the LLM's tokens); preprocessing "
            f"{fmt.num(m['preprocess_cpu_hours'])} CPU-h {fmt_usd(items.get('compute.media_preprocessing', 0.0))}; "
            f"media storage {fmt.gb(m['media_raw_gb'] + m['media_features_gb'])} "
            f"{fmt_usd(items.get('storage.media', 0.0))}")
    if m["media_loader_items_per_s_per_node"] > 0:  # decoded online by the data loader
        line += (f"; decoded online: the loader delivers {fmt.num(m['media_loader_items_per_s_per_node'])} {words}/s "
                 f"per node, the GPUs take {fmt.num(m['media_items_per_s_per_node'])}")
    return line


def cmd_estimate(args) -> int:
    scn = loaders.load_scenario(args.file)
    scn = apply_sets(scn, args.set)
    if getattr(args, "org_efficiency", None):
        from costcore.actuals import efficiency
        scn = efficiency.apply(scn, efficiency.factor_from(args.org_efficiency))
    from costcore import api  # heavy (numba, pandas): only once the input is valid
    res = api.estimate(scn)
    if args.format == "json":
        print(json.dumps(res.to_dict(), indent=2))
    elif args.format == "csv":
        df = res.line_items()
        df.insert(0, "scenario", res.scenario.get("name", ""))
        df.insert(1, "feasible", res.feasible)
        sys.stdout.write(fmt.to_csv(df))
    else:
        sys.stdout.write(render_table(res))
    return 0 if res.feasible else EXIT_INFEASIBLE


def render_plans(stage: str, plans: list[dict]) -> str:
    """The plans as a text table; a schedule column (1F1B, 1F1B with its interleaved chunks, DualPipe)
    when they do not all run plain 1F1B."""
    cols = ("TP", "PP", "DP", "CP", "EP", "micro-batch", "recompute", "ZeRO", "step", "MFU", "memory/GPU")
    rows = [[str(p["tp"]), str(p["pp"]), str(p["dp"]), str(p["cp"]), str(p["ep"]), str(p["micro_batch"]),
             p["recompute"], str(p["zero"]), fmt.duration_s(p["step_time_s"]), fmt.share(p["mfu"]),
             fmt.gb(p["memory_per_gpu_gb"])] for p in plans]
    if any(fmt.schedule(p) != "1F1B" for p in plans):
        cols += ("schedule",)
        rows = [r + [fmt.schedule(p)] for r, p in zip(rows, plans)]
    widths = [max(len(r[i]) for r in rows + [list(cols)]) for i in range(len(cols))]
    if not plans:  # not "0 fastest plans that fit, best first" over an empty table
        return f"{schema.STAGE_LABELS[stage]}: no plan fits in GPU memory on this stage's GPUs\n"
    lines = [f"{schema.STAGE_LABELS[stage]}: the {len(plans)} fastest plan{'s' if len(plans) != 1 else ''} that fit, "
             "best first" if len(plans) != 1 else f"{schema.STAGE_LABELS[stage]}: the one plan that fits"]
    lines.append("  ".join(c.rjust(w) for c, w in zip(cols, widths)))
    lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in rows]
    return "\n".join(lines) + "\n"


def cmd_plan(args) -> int:
    scn = loaders.load_scenario(args.file)
    scn = apply_sets(scn, args.set)
    from costcore import api
    plans = api.plans(scn, args.stage, args.top)
    stage = args.stage or next(s for s in api.TRAINING_STAGES if s in scn.get("stages", {}))
    if args.format == "json":
        print(json.dumps({"stage": stage, "plans": plans}, indent=2))
    else:
        sys.stdout.write(render_plans(stage, plans))
    return 0 if plans else EXIT_INFEASIBLE


def cmd_models(args) -> int:
    """The shipped open models (model.name): name, label, shape and source."""
    from costcore.scenario.hfconfig import shipped_configs
    rows = shipped_configs()
    if args.format == "json":
        print(json.dumps({n: dict(v["model"], label=v["label"], source=v["source"]) for n, v in rows.items()},
                         indent=2))
        return 0
    print(f"{'name':30s} {'model':30s} {'params':>8s} {'layers':>6s} {'hidden':>6s} {'KV heads':>8s} {'vocab':>8s}")
    for name, v in rows.items():
        m = v["model"]
        size = f"{fmt.sig3(m['params_b'])}B" + (f" ({fmt.sig3(m['active_params_b'])}B active)" if m.get("experts")
                                                 else "")
        print(f"{name:30s} {fmt.one_line(v['label'], 30):30s} {size:>8s} {m['layers']:>6d} {m['hidden']:>6d} "
              f"{m['kv_heads']:>8d} {m['vocab']:>8,d}")
    return 0


def cmd_warm(args) -> int:
    """Compile every numba kernel the app runs into the on-disk cache (costcore/engine/config.py CACHE_DIR)
    once after an install, so the app's first page does not wait for it (~50 s on 2 cores, Dec 2026);
    later processes load the cache in a few seconds. Prints what it did and how long each part took."""
    import time
    t0 = time.perf_counter()
    import costcore
    from costcore.cluster import results
    from costcore.cluster import portfolio
    import numpy as np
    from costcore.engine import formulas

    def formulas_called_from_python():  # the pages' and the cluster results' direct calls, with their types
        formulas.held_checkpoints(4.0, 2.0, 1.0)
        formulas.gpu_time_usd(np.ones(2), np.ones(2))
        formulas.gpu_time_usd(1.0, 1.0)

    parts = [("the estimate, batch and plan-search kernels", costcore.warm_up),
             ("every shipped preset", lambda: [costcore.estimate(n) for n in loaders.preset_names()]),
             ("the formulas the pages call", formulas_called_from_python),
             ("Monte Carlo", lambda: costcore.monte_carlo(costcore.load_preset(loaders.preset_names()[0]), n=64)),
             ("the shared-cluster scheduler",
              lambda: results.ClusterModel(portfolio.load(portfolio.portfolio_names()[0])).run())]
    for what, run in parts:
        t = time.perf_counter()
        run()
        print(f"compiled or loaded {what} in {time.perf_counter() - t:.1f} s")
    from costcore.engine.config import CACHE_DIR
    print(f"kernels ready in {time.perf_counter() - t0:.1f} s (cache: {fmt.one_line(CACHE_DIR, 200)})")
    return 0


def cmd_presets(args) -> int:
    for name, title in loaders.preset_titles().items():
        print(f"{name:28s} {fmt.one_line(title)}")
    return 0


def main(argv=None) -> int:
    p = _Parser(prog="python -m costcore", description="LLM training cost planner (cost core)")
    sub = p.add_subparsers(dest="cmd", required=True, parser_class=_Parser)
    e = sub.add_parser("estimate", help="estimate a scenario file or preset name")
    e.add_argument("file", help="scenario YAML file, or a preset name (see `presets`)")
    e.add_argument("--set", action="append", default=[], metavar="dotted.key=value")
    e.add_argument("--format", choices=("table", "json", "csv"), default="table")
    e.add_argument("--org-efficiency", default=None, metavar="PATH_OR_DB",
                   help="scale efficiency.sustained_fraction by your organisation's measured factor: a YAML file "
                        "from `validate --db STORE --save F.yaml`, or an actuals store to fit it on")
    e.set_defaults(func=cmd_estimate)
    pl = sub.add_parser("plan", help="the fastest job layouts of a training stage (TP/PP/DP/CP/EP, ZeRO, recompute)")
    pl.add_argument("file", help="scenario YAML file, or a preset name")
    pl.add_argument("--stage", choices=("pretrain", "cpt", "mm_align", "mm_cpt", "mm_tune", "sft", "dpo", "rl"),
                    default=None,
                    help="training stage (default: the first one in the scenario)")
    pl.add_argument("--top", type=int, default=10, help="how many plans (1-1000)")
    pl.add_argument("--set", action="append", default=[], metavar="dotted.key=value")
    pl.add_argument("--format", choices=("table", "json"), default="table")
    pl.set_defaults(func=cmd_plan)
    pr = sub.add_parser("presets", help="list the bundled presets")
    pr.set_defaults(func=cmd_presets)
    wa = sub.add_parser("warm", help="compile the cost kernels once after an install (the app then starts at once)")
    wa.set_defaults(func=cmd_warm)
    mo = sub.add_parser("models", help="list the shipped open models (model.name in a scenario)")
    mo.add_argument("--format", choices=("table", "json"), default="table")
    mo.set_defaults(func=cmd_models)
    from costcore.cli import validate_levers
    validate_levers.register(sub)
    from costcore.actuals import cli as actuals_cli; actuals_cli.register(sub)  # noqa: E702
    from costcore.cluster import cli as cluster_cli; cluster_cli.register(sub)  # noqa: E702
    args = p.parse_args(argv)
    try:
        return args.func(args)
    except ScenarioError as err:
        print(f"error: {fmt.one_line(str(err), 1000)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except ArithmeticError as err:  # a scenario the model cannot evaluate finitely
        print(f"error: {fmt.one_line(str(err), 1000)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:
        return 0
