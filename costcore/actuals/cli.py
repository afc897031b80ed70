"""``python -m costcore actuals import FILE... [--db PATH]`` and ``python -m costcore actuals report
[--db PATH|URL] [--plan F.yaml] [--since DATE --until DATE] [--where dim=value] --format json|csv``.

``register(sub)`` adds the ``actuals`` command to the CLI's subparsers; duckdb, ibis and numba load
only when a command runs, so ``--help`` and refusals stay fast. Bad input raises ScenarioError
(one line on stderr, exit 2, by costcore.cli.main).
"""
from __future__ import annotations

import datetime as dt
import json
import sys

from costcore.errors import ScenarioError

DB_HELP = ("the store: a DuckDB file (default: $XDG_DATA_HOME/costcore/actuals.duckdb, i.e. "
           "~/.local/share/costcore/actuals.duckdb) or an Ibis connection URL (postgres://..., trino://...)")
WHERE_DIMENSIONS = ("project", "team", "model_version", "task_type", "stage", "resource_type")


def parse_date(name: str, text: str | None):
    """A YYYY-MM-DD argument as a date (None when not given); ScenarioError otherwise."""
    if text is None:
        return None
    try:
        return dt.date.fromisoformat(str(text).strip())
    except ValueError:
        raise ScenarioError(name, "must be a date written YYYY-MM-DD", value=text, allowed="YYYY-MM-DD") from None


def parse_where(items) -> dict:
    """``--where project=atlas --where stage=sft`` -> {"project": ["atlas"], "stage": ["sft"]}."""
    out: dict = {}
    for item in items or []:
        key, sep, value = str(item).partition("=")
        key = key.strip()
        if not sep or key not in WHERE_DIMENSIONS:
            raise ScenarioError("where", f"must be dimension=value with a dimension among {', '.join(WHERE_DIMENSIONS)}",
                                value=item, allowed=", ".join(WHERE_DIMENSIONS))
        out.setdefault(key, []).append(value.strip())
    return out


def cmd_import(args) -> int:
    from costcore.actuals import importers, store
    st = store.open_store(args.db)
    try:
        out = importers.import_files(st, args.files)
    finally:
        st.close()
    print(json.dumps({"imported_rows": out["imported_rows"], "duplicate_rows": out["duplicate_rows"],
                      "files": out["files"]}, indent=2))
    return 0


def cmd_report(args) -> int:
    since, until = parse_date("since", args.since), parse_date("until", args.until)
    if since and until and since > until:
        raise ScenarioError("since", f"{since} is after --until {until}")
    filters = parse_where(args.where)
    if args.retention_days is not None and not 0 <= args.retention_days <= 3650:
        raise ScenarioError("retention_days", "must be a whole number of days from 0 to 3,650", value=args.retention_days)
    plan = None
    if args.plan:
        from costcore.scenario import loaders
        scn = loaders.load_scenario(args.plan)  # refused here, before the store is opened
        from costcore import api
        plan = api.estimate(scn)
    from costcore.actuals import report, store
    st = store.open_store(args.db, focus_table=args.focus_table, must_exist=True)
    try:
        data = report.load(st, since, until, args.retention_days)
    finally:
        st.close()
    doc = report.report_dict(data, plan, filters)
    if args.format == "csv":
        from costcore import fmt
        sys.stdout.write(fmt.to_csv(report.report_frame(doc)))
    else:
        print(json.dumps(doc, indent=2))
    return 0


def register(sub) -> None:
    a = sub.add_parser("actuals", help="plan vs actual: import bills and job records, review them")
    asub = a.add_subparsers(dest="actuals_cmd", required=True, parser_class=type(a))
    im = asub.add_parser("import", help="import FOCUS billing CSV, sacct --parsable2 output or a run CSV")
    im.add_argument("files", nargs="+", metavar="FILE")
    im.add_argument("--db", default=None, help=DB_HELP)
    im.set_defaults(func=cmd_import)
    rp = asub.add_parser("report", help="totals, slices, plan vs actual, anomalies and waste")
    rp.add_argument("--db", default=None, help=DB_HELP)
    rp.add_argument("--focus-table", default=None, metavar="NAME",
                    help="read billing lines from this table of a raw FOCUS export (warehouse) instead of cost_rows")
    rp.add_argument("--plan", default=None, metavar="F.yaml", help="scenario file or preset name to compare with")
    rp.add_argument("--since", default=None, metavar="YYYY-MM-DD")
    rp.add_argument("--until", default=None, metavar="YYYY-MM-DD")
    rp.add_argument("--where", action="append", default=[], metavar="dimension=value",
                    help=f"keep only these rows ({', '.join(WHERE_DIMENSIONS)}); repeat to allow several values")
    rp.add_argument("--retention-days", type=int, default=None,
                    help="storage billed this long after its run ended counts as orphaned (default 30)")
    rp.add_argument("--format", choices=("json", "csv"), default="json")
    rp.set_defaults(func=cmd_report)
