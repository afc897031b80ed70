"""``python -m costcore cluster PORTFOLIO [--format json|csv|focus] [--idle-rule quota|use|unallocated]``.

PORTFOLIO is a YAML file or a shipped portfolio's name (presets/portfolios/). The file is read and
checked before numba and pandas load (costcore.cluster.portfolio is light), so a bad portfolio is
refused with one line naming the entry (exit 2) at little more than Python's start.
"""
from __future__ import annotations

import json
import sys


def cmd_cluster(args) -> int:
    from costcore.cluster import portfolio
    pf = portfolio.load(args.portfolio)
    if args.idle_rule:
        pf = pf.with_changes(idle_rule=args.idle_rule)
    if args.no_burst:
        pf = pf.with_changes(burst=False)
    from costcore.cluster import focus, results  # numba and pandas from here on
    res = results.ClusterModel(pf).run()
    if args.format == "json":
        print(json.dumps(res.to_json(), indent=2, allow_nan=False))
    elif args.format == "focus":
        sys.stdout.write(focus.focus_csv(res))
    else:
        sys.stdout.write(focus.plain_csv(res))
    for w in res.warnings:  # beside a CSV, where the JSON carries them under "warnings"
        if args.format != "json":
            print(f"warning: {w}", file=sys.stderr)
    return 0


def register(sub) -> None:
    """Add the ``cluster`` subcommand to the CLI's subparsers (imports nothing heavy)."""
    c = sub.add_parser("cluster", help="schedule a portfolio of projects on a shared cluster and attribute its cost")
    c.add_argument("portfolio", help="portfolio YAML file, or a shipped portfolio's name (e.g. cluster-quarter)")
    c.add_argument("--format", choices=("json", "csv", "focus"), default="json",
                   help="json: the summary; csv: every attributed dollar; focus: FOCUS 1.x cost and usage rows")
    c.add_argument("--idle-rule", choices=("quota", "use", "unallocated"), default=None,
                   help="who pays for idle reserved GPUs (default: the portfolio's idle_rule)")
    c.add_argument("--no-burst", action="store_true", help="never burst to on-demand or spot")
    c.set_defaults(func=cmd_cluster)
