"""The review queries, written once as Ibis expressions: they run unchanged on DuckDB, PostgreSQL or
any engine Ibis compiles to.

The one query the review needs is the *cube*: billed dollars and GPU-hours summed by day, the six
slicing dimensions, the planner resource, the run, and the waste class of each billing line (with
the item the class is about). Every figure of the report (totals, slices, plan vs actual, daily
series, waste, cost per run) is a sum over cube rows, in exact decimals, so a slicer change filters
the cube instead of querying the store again.

Waste classes of a billing line (``waste_kind``; first rule that applies, so no dollar counts twice):

``idle_allocations``
    compute billed with no run attached (reserved or allocated capacity no job used);
``orphaned_storage``
    storage billed more than ``retention_days`` after the end of the run it holds;
``failed_runs`` / ``cancelled_runs``
    any line of a run whose last record says failed (also timeout, out of memory, node failure,
    preempted) or cancelled;
``duplicate_experiments``
    any line of a completed run that repeats the configuration (project and ``config``) of an
    earlier completed run.
"""
from __future__ import annotations

from costcore.actuals.columns import DIMENSIONS, UNATTRIBUTED

FAILED_STATES = ("failed", "timeout", "out_of_memory", "node_fail", "preempted")
# FOCUS ServiceCategory -> the planner's resource (costcore/data/schema.yaml resources).
CATEGORY_RESOURCE = {"Compute": "compute", "AI and Machine Learning": "compute", "Storage": "storage",
                     "Databases": "storage", "Networking": "network"}
DEFAULT_RETENTION_DAYS = 30
CUBE_KEYS = ("day",) + DIMENSIONS + ("resource", "run_id", "waste_kind", "waste_item")
JOB_SCHEMA = {"row_key": "string", "file": "string", "source": "string", "run_id": "string", "name": "string",
              "project": "string", "team": "string", "model_version": "string", "task_type": "string",
              "stage": "string", "gpu_type": "string", "gpu_count": "int32", "start_at": "timestamp",
              "end_at": "timestamp", "status": "string", "gpu_hours": "float64", "params_b": "float64",
              "tokens_b": "float64", "config": "string", "eval_score": "float64", "metrics": "string"}


def empty_jobs():
    """An empty job table (a warehouse that holds bills only)."""
    import ibis
    return ibis.memtable({k: [] for k in JOB_SCHEMA}, schema=ibis.schema(JOB_SCHEMA))


def _tag(tags, key: str):
    """A string tag of a FOCUS Tags JSON object, by pattern (portable: no engine's JSON functions)."""
    v = tags.re_extract(rf'"{key}"\s*:\s*"([^"]*)"', 1)
    return (v == "").ifelse(None, v)


def focus_view(raw):
    """A table that holds a raw FOCUS export (BilledCost, ChargePeriodStart, Tags...) seen with the
    columns of ``cost_rows``, for pointing the report at a warehouse. Money is cast to decimal."""
    import ibis
    money = ibis.expr.datatypes.Decimal(38, 12)
    tags = raw.Tags.cast("string").fill_null("")
    unit = raw.ConsumedUnit.cast("string").lower().fill_null("")
    gpu_h = unit.isin(["gpu-hours", "gpu-hour", "gpu hours", "gpu_hours"]).ifelse(
        raw.ConsumedQuantity.cast(money).fill_null(0), ibis.literal(0).cast(money))
    cols = {"row_key": ibis.literal(None, "string"), "file": ibis.literal("warehouse"),
            "charge_start": raw.ChargePeriodStart.cast("timestamp"), "charge_end": raw.ChargePeriodEnd.cast("timestamp"),
            "billed_usd": raw.BilledCost.cast(money), "effective_usd": raw.EffectiveCost.cast(money),
            "list_usd": raw.ListCost.cast(money), "service_category": raw.ServiceCategory.cast("string"),
            "service_name": raw.ServiceName.cast("string"), "resource_id": raw.ResourceId.cast("string"),
            "resource_type": raw.ResourceType.cast("string").fill_null(UNATTRIBUTED),
            "sku_id": raw.SkuId.cast("string"), "consumed_quantity": raw.ConsumedQuantity.cast(money),
            "consumed_unit": raw.ConsumedUnit.cast("string"), "gpu_hours": gpu_h, "tags": tags}
    for k in ("project", "team", "model_version", "task_type", "stage"):
        cols[k] = _tag(tags, k).fill_null(UNATTRIBUTED)
    cols["run_id"] = _tag(tags, "run_id")
    return raw.select(**cols)


def latest_runs(jobs):
    """One row per run: its latest record (the one that ended last), with ``duplicate`` (bool): a
    completed run repeating an earlier completed run's configuration in the same project."""
    import ibis
    order = [ibis.desc(jobs.end_at), ibis.desc(jobs.row_key)]
    last = jobs.mutate(_n=ibis.row_number().over(group_by=jobs.run_id, order_by=order))
    last = last.filter(last._n == 0).drop("_n")
    done = last.status == "completed"
    rank = ibis.row_number().over(group_by=[last.project, last.config, done], order_by=[last.start_at, last.run_id])
    return last.mutate(duplicate=(done & last.config.notnull() & (rank > 0)))


def _resource(cost):
    import ibis
    cat = cost.service_category.fill_null("")
    return ibis.cases(*[(cat == k, v) for k, v in CATEGORY_RESOURCE.items()], else_="ops")


def classified(cost, jobs, retention_days: int = DEFAULT_RETENTION_DAYS):
    """Billing lines with their planner ``resource``, ``waste_kind`` and ``waste_item`` (see module doc)."""
    import ibis
    runs = latest_runs(jobs).select(r_run=jobs.run_id, r_status="status", r_end="end_at", r_dup="duplicate")
    j = cost.left_join(runs, cost.run_id == runs.r_run)
    compute = j.service_category.fill_null("").isin(["Compute", "AI and Machine Learning"])
    storage = j.service_category.fill_null("") == "Storage"
    late = storage & j.r_end.notnull() & (j.charge_start > j.r_end + ibis.interval(days=int(retention_days)))
    kind = ibis.cases(
        (compute & j.run_id.isnull(), "idle_allocations"),
        (late, "orphaned_storage"),
        (j.r_status.isin(list(FAILED_STATES)), "failed_runs"),
        (j.r_status == "cancelled", "cancelled_runs"),
        (j.r_dup.fill_null(False), "duplicate_experiments"),
        else_=ibis.literal(None, "string"))
    item = ibis.cases((compute & j.run_id.isnull(), j.resource_id.fill_null(UNATTRIBUTED)),
                      (kind.notnull(), j.run_id), else_=ibis.literal(None, "string"))
    return j.mutate(resource=_resource(j), waste_kind=kind, waste_item=item)


def cube(cost, jobs, since=None, until=None, retention_days: int = DEFAULT_RETENTION_DAYS):
    """The Ibis expression of the cube (``CUBE_KEYS`` + usd, gpu_hours, lines), ``since``/``until``
    (dates, inclusive) filtering on the charge period's start."""
    import datetime as dt
    import ibis
    if since is not None:
        cost = cost.filter(cost.charge_start >= ibis.timestamp(dt.datetime.combine(since, dt.time())))
    if until is not None:
        end = dt.datetime.combine(until + dt.timedelta(days=1), dt.time())
        cost = cost.filter(cost.charge_start < ibis.timestamp(end))
    c = classified(cost, jobs, retention_days)
    c = c.mutate(day=c.charge_start.date(), run_id=c.run_id.fill_null(""), waste_kind=c.waste_kind.fill_null(""),
                 waste_item=c.waste_item.fill_null(""))
    return c.group_by(list(CUBE_KEYS)).aggregate(usd=c.billed_usd.sum(), gpu_hours=c.gpu_hours.sum(),
                                                 lines=c.count())


def run_table(jobs):
    """Latest record of every run as an Ibis expression (for cost per result and the org-efficiency fit)."""
    r = latest_runs(jobs)
    return r.select("run_id", "name", "source", "project", "team", "model_version", "task_type", "stage", "gpu_type",
                    "gpu_count", "start_at", "end_at", "status", "gpu_hours", "params_b", "tokens_b", "config",
                    "eval_score", "duplicate")


def fetch(expr):
    """Run an Ibis expression: a pandas DataFrame whose money columns hold exact ``Decimal`` values."""
    import pandas as pd
    table = expr.to_pyarrow()
    return pd.DataFrame({name: table.column(name).to_pylist() for name in table.column_names})
