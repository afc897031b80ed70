"""Command line: ``python -m costcore estimate FILE.yaml [--set k=v ...] [--format table|json|csv]``.

Bad input exits with code 2 and one line on stderr.
"""
from __future__ import annotations

import argparse
import io
import json
import sys

from . import api, fmt, schema
from .schema import RESOURCES, ScenarioError
from .yamlio import parse_yaml


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2
        print(f"error: {message}", file=sys.stderr)
        raise SystemExit(2)


def apply_sets(scn: dict, sets: list[str]) -> dict:
    """Apply ``dotted.key=value`` overrides and re-validate.

    Values of numeric fields are read by :func:`schema.parse_number_text`; others as YAML scalars.
    """
    raw = dict(scn)
    for item in sets or []:
        if "=" not in item:
            raise ScenarioError("--set", f"expected dotted.key=value, got {item!r}")
        key, _, text = item.partition("=")
        key = key.strip()
        shown = schema._path(*key.split(".")) if key else "''"
        if not key or any(not part for part in key.split(".")) or shown != key:
            raise ScenarioError("--set", f"bad key {shown}")
        f = schema.BY_PATH.get(key)
        if f is not None and f.kind in ("float", "int") and text.strip():
            # numbers follow the one rule of schema.parse_number_text (the URL uses it too): no YAML
            # 1.1 extras such as 1_000, 0x10 or .inf, no non-ASCII digits
            value = schema.parse_number_text(key, text)
        else:
            value = parse_yaml(text, what=f"--set {key}") if text.strip() else None
        if value is None:
            raise ScenarioError(key, "needs a value")
        raw = schema.set_path(raw, key, schema.coerce_text(key, value))
    return schema.validate(raw)


fmt_usd = fmt.usd


def render_table(res: api.Result) -> str:
    d = res.to_dict()
    cols = ["stage"] + list(RESOURCES) + ["total", "GPU-h", "days"]
    rows = []
    for s, v in d["stages"].items():
        rows.append([s] + [fmt_usd(v["usd"][r]) for r in RESOURCES] + [
            fmt_usd(v["usd_total"]), f"{v['gpu_hours']:,.0f}", f"{v['wall_days']:,.1f}"])
    rows.append(["TOTAL"] + [fmt_usd(d["resources"][r]) for r in RESOURCES] + [
        fmt_usd(d["total_usd"]), f"{d['gpu_hours']:,.0f}", ""])
    widths = [max(len(str(r[i])) for r in rows + [cols]) for i in range(len(cols))]
    out = io.StringIO()
    out.write(f"{d['name']}\n")
    out.write("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cols, widths))) + "\n")
    for r in rows:
        out.write("  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(zip(r, widths))) + "\n")
    out.write(f"fixed {fmt_usd(d['fixed_usd'])}  elastic {fmt_usd(d['elastic_usd'])}  peak GPUs {d['peak_gpus']:,}\n")
    for s, v in d["stages"].items():
        if not v["fits"]:
            need = f"needs at least {v['min_gpus']:,} GPUs" if v["min_gpus"] > 0 else "does not fit at any GPU count with this parallelism"
            out.write(f"warning: {s} needs {v['memory_per_gpu_gb']:,.1f} GB per GPU and does not fit ({need})\n")
    return out.getvalue()


def cmd_estimate(args) -> int:
    scn = api.load_scenario(args.file)
    scn = apply_sets(scn, args.set)
    res = api.estimate(scn)
    if args.format == "json":
        print(json.dumps(res.to_dict(), indent=2))
    elif args.format == "csv":
        df = res.line_items()
        df.insert(0, "scenario", res.scenario.get("name", ""))
        sys.stdout.write(df.to_csv(index=False))
    else:
        sys.stdout.write(render_table(res))
    return 0


def cmd_presets(args) -> int:
    for name, title in api.preset_titles().items():
        print(f"{name:28s} {title}")
    return 0


def main(argv=None) -> int:
    p = _Parser(prog="python -m costcore", description="LLM training cost planner (cost core)")
    sub = p.add_subparsers(dest="cmd", required=True, parser_class=_Parser)
    e = sub.add_parser("estimate", help="estimate a scenario file or preset name")
    e.add_argument("file", help="scenario YAML file, or a preset name (see `presets`)")
    e.add_argument("--set", action="append", default=[], metavar="dotted.key=value")
    e.add_argument("--format", choices=("table", "json", "csv"), default="table")
    e.set_defaults(func=cmd_estimate)
    pr = sub.add_parser("presets", help="list the bundled presets")
    pr.set_defaults(func=cmd_presets)
    from . import extra_commands
    extra_commands.register(sub)
    args = p.parse_args(argv)
    try:
        return args.func(args)
    except ScenarioError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except ArithmeticError as err:  # a scenario the model cannot evaluate finitely
        print(f"error: {err}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
