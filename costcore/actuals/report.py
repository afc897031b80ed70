"""The review: every figure of ``actuals report`` and of the Review page, from the cube.

Money is summed as exact ``Decimal`` (the store's DECIMAL(38, 12)) and rounded to the cent only
when printed (``cents``, half to even); plan dollars come from :func:`costcore.api.estimate`.

The plan's dollars are its *billed* resources (``BILLED_RESOURCES``: compute, storage, network, ops
and hidden losses, which a bill carries as compute time); labor and bought data never reach a
cloud bill, so they are left out of plan vs actual. A stage slicer narrows the plan to those
stages; the plan has no projects or teams, so other slicers leave it whole.
"""
from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, Decimal

import pandas as pd

from costcore.actuals import anomalies as anom
from costcore.actuals.columns import DIMENSIONS

BILLED_RESOURCES = ("compute", "storage", "network", "ops", "hidden")
WASTE_KINDS = ("failed_runs", "cancelled_runs", "idle_allocations", "duplicate_experiments", "orphaned_storage")
WASTE_WORDS = {"failed_runs": "Failed runs", "cancelled_runs": "Cancelled runs", "idle_allocations": "Idle allocation",
               "duplicate_experiments": "Repeated runs (same configuration)",
               "orphaned_storage": "Storage kept past retention"}
DIMENSION_WORDS = {"project": "Project", "team": "Team", "model_version": "Model version", "task_type": "Task type",
                   "stage": "Stage", "resource_type": "Resource type"}
BURN_RATE_DAYS = 14  # the forecast extends the mean daily spend of the last 14 days
ZERO = Decimal(0)
CENT = Decimal("0.01")


def cents(v) -> float:
    """Dollars rounded to the cent (half to even), as a JSON number."""
    return float(Decimal(v).quantize(CENT, rounding=ROUND_HALF_EVEN))


def _dec(x: float) -> Decimal:
    return Decimal(repr(float(x))) if math.isfinite(x) else ZERO


def dsum(values) -> Decimal:
    """Exact sum of Decimal values."""
    return sum(values, ZERO)


@dataclass
class Data:
    """What the review reads from a store: the cube (queries.cube) and one row per run."""
    cube: pd.DataFrame
    runs: pd.DataFrame
    where: str = ""
    meta: dict = field(default_factory=dict)


def load(store, since=None, until=None, retention_days: int | None = None) -> Data:
    """Run the review's queries on a store (DuckDB or a warehouse): the cube and the run table."""
    from costcore.actuals import queries
    ret = queries.DEFAULT_RETENTION_DAYS if retention_days is None else int(retention_days)
    cube = queries.fetch(queries.cube(store.cost_table(), store.jobs_table(), since, until, ret))
    runs = queries.fetch(queries.run_table(store.jobs_table()))
    if not cube.empty:
        cube["day"] = pd.to_datetime(cube["day"]).dt.date
    return Data(cube=cube, runs=runs, where=store.where, meta={"retention_days": ret})


def empty_data() -> Data:
    """A Data with no rows (before anything is imported)."""
    from costcore.actuals.queries import CUBE_KEYS
    return Data(cube=pd.DataFrame(columns=[*CUBE_KEYS, "usd", "gpu_hours", "lines"]), runs=pd.DataFrame())


def select(cube: pd.DataFrame, filters: dict | None = None, since=None, until=None) -> pd.DataFrame:
    """The cube rows inside the slicers (dimension -> allowed values; empty or None = all) and dates."""
    keep = pd.Series(True, index=cube.index)
    for dim, values in (filters or {}).items():
        if values:
            keep &= cube[dim].isin(list(values))
    if since is not None:
        keep &= cube["day"] >= since
    if until is not None:
        keep &= cube["day"] <= until
    return cube[keep]


def slices(cube: pd.DataFrame) -> dict:
    """{dimension: {value: Decimal $}} for every slicing dimension, largest first."""
    out = {}
    for dim in DIMENSIONS:
        sums = {str(k): v for k, v in cube.groupby(dim, sort=True)["usd"].sum().items()}
        out[dim] = dict(sorted(sums.items(), key=lambda kv: (-kv[1], kv[0])))
    return out


def plan_stages(plan, stages=None, shares: dict | None = None) -> dict:
    """{stage: {"usd", "compute_usd", "gpu_hours"}} of the plan's billed resources (Decimal $).

    ``shares`` ({stage: fraction}, :func:`stage_shares`): each stage's figures scaled to the part of its run
    the plan puts before a day (the plan to date); None: the whole plan.
    """
    if plan is None:
        return {}
    out = {}
    for s in plan.stages:
        if stages and s not in stages:
            continue
        u = plan.stage_usd(s)
        f = _dec(shares.get(s, 0.0)) if shares is not None else Decimal(1)
        out[s] = {"usd": _dec(sum(u[r] for r in BILLED_RESOURCES)) * f,
                  "compute_usd": _dec(u["compute"] + u["hidden"]) * f,
                  "gpu_hours": _dec(plan.stat(s, "gpu_hours")) * f}
    return out


def plan_vs_actual(cube: pd.DataFrame, plan, stages=None, shares: dict | None = None) -> dict:
    """{stage: {"plan_usd", "actual_usd", "variance_usd", "plan_gpu_hours", "actual_gpu_hours", "cause"}}; the plan
    to date with ``shares`` (:func:`plan_stages`)."""
    planned = plan_stages(plan, stages, shares)
    actual = {str(k): g for k, g in cube.groupby("stage")}
    out = {}
    for s in list(planned) + sorted(k for k in actual if k not in planned):
        p = planned.get(s, {"usd": ZERO, "compute_usd": ZERO, "gpu_hours": ZERO})
        rows = actual.get(s, cube.iloc[0:0])
        a = dsum(rows["usd"])
        steps = variance_steps(rows, {s: p} if s in planned else {})
        cause = max(steps[1:-1], key=lambda st: abs(st["usd"]), default=None)
        out[s] = {"plan_usd": p["usd"], "actual_usd": a, "variance_usd": a - p["usd"],
                  "plan_gpu_hours": p["gpu_hours"], "actual_gpu_hours": dsum(rows["gpu_hours"]),
                  "cause": cause["label"] if cause and cause["usd"] != 0 else ""}
    return out


def variance_steps(cube: pd.DataFrame, planned: dict) -> list[dict]:
    """The waterfall from plan to actual: [{"label", "usd" (Decimal), "kind": plan|step|actual}].

    Steps, which sum exactly to actual - plan: GPU-hours of useful compute beyond (or short of) the
    plan's at the plan's rate; the rate paid on them beyond the plan's; each waste class; and the
    other resources (storage, network, other) beyond the plan's.
    """
    plan_usd = dsum(p["usd"] for p in planned.values())
    plan_c = dsum(p["compute_usd"] for p in planned.values())
    plan_h = dsum(p["gpu_hours"] for p in planned.values())
    waste = {k: dsum(cube.loc[cube["waste_kind"] == k, "usd"]) for k in WASTE_KINDS}
    useful = cube[cube["waste_kind"] == ""]
    useful_c = useful[useful["resource"] == "compute"]
    u_usd, uc_usd, uc_h = dsum(useful["usd"]), dsum(useful_c["usd"]), dsum(useful_c["gpu_hours"])
    rate = plan_c / plan_h if plan_h else ZERO
    gpu_effect = (uc_h - plan_h) * rate
    steps = [{"label": "Plan", "usd": plan_usd, "kind": "plan"},
             {"label": "More GPU-hours than planned" if gpu_effect >= 0 else "Fewer GPU-hours than planned",
              "usd": gpu_effect, "kind": "step"}]
    rate_effect = uc_usd - plan_c - gpu_effect
    steps.append({"label": "Higher rate than planned" if rate_effect >= 0 else "Lower rate than planned",
                  "usd": rate_effect, "kind": "step"})
    steps += [{"label": WASTE_WORDS[k], "usd": waste[k], "kind": "step"} for k in WASTE_KINDS]
    steps.append({"label": "Other resources (storage, network, other)", "usd": (u_usd - uc_usd) - (plan_usd - plan_c),
                  "kind": "step"})
    steps.append({"label": "Actual", "usd": dsum(cube["usd"]), "kind": "actual"})
    return steps


def waste(cube: pd.DataFrame) -> list[dict]:
    """[{"kind", "usd" (Decimal), "items": sorted run or resource ids}] of every waste class, in WASTE_KINDS order."""
    out = []
    for k in WASTE_KINDS:
        rows = cube[cube["waste_kind"] == k]
        out.append({"kind": k, "usd": dsum(rows["usd"]), "items": sorted(set(rows["waste_item"]) - {""})})
    return out


def daily(cube: pd.DataFrame, keys=("project", "resource_type")) -> pd.DataFrame:
    """Daily spend per series: day, keys, usd (float $, for charts and the anomaly scorer)."""
    if cube.empty:
        return pd.DataFrame(columns=["day", *keys, "usd"])
    g = cube.groupby(["day", *keys], sort=True)["usd"].sum().reset_index()
    g["usd"] = g["usd"].map(float)
    return g


SERIES_FILTERS = ("project", "team", "resource_type")


def anomalies(cube: pd.DataFrame, filters: dict | None = None, since=None, until=None) -> pd.DataFrame:
    """Anomalous days of spend per project and resource type (costcore.actuals.anomalies).

    Each series is a project's whole spend on a resource type over all the days in ``cube``:
    slicers on the series (project, team, resource type) pick series, the dates pick the days
    shown; slicers inside a series (stage, model version, task type) do not cut it up, since a
    stage's spend starts and stops with its runs and would read as anomalies.
    """
    series = {k: v for k, v in (filters or {}).items() if k in SERIES_FILTERS}
    found = anom.detect(daily(select(cube, series)))
    if since is not None:
        found = found[found["day"] >= since]
    if until is not None:
        found = found[found["day"] <= until]
    return found.reset_index(drop=True)


def _run_shares(plan, days: list, stages=None) -> dict:
    """{stage: (len(days),) array}: the share of each stage's first iteration the plan's timeline
    (costcore.analysis.budget.timeline) has run by the end of each day of ``days``, the plan's first day placed
    on ``days[0]``; the run's dollars accrue evenly over it."""
    import numpy as np
    from costcore.analysis.budget import timeline
    sched = timeline(plan).schedule
    t0 = pd.Timestamp(sched["start"].min())
    at_s = (np.arange(1, len(days) + 1) * 86400.0)
    out = {}
    for r in sched.itertuples():
        if (stages and r.stage not in stages) or r.iteration != 1:
            continue
        a, b = (r.run_start - t0).total_seconds(), (r.end - t0).total_seconds()
        out[r.stage] = np.ones(len(days)) if b <= a else np.clip((at_s - a) / (b - a), 0.0, 1.0)
    return out


def stage_shares(plan, days: list, stages=None) -> dict:
    """{stage: fraction}: the share of each stage's billed dollars the plan spends by the end of the last day of
    ``days`` (its first day placed on ``days[0]``); :func:`plan_stages` scales the plan to date by it."""
    if plan is None or not days:
        return {}
    return {s: float(sh[-1]) for s, sh in _run_shares(plan, days, stages).items()}


def plan_curve(plan, days: list, stages=None) -> list[Decimal]:
    """Cumulative planned billed dollars at the end of each day of ``days``.

    Each stage's billed dollars spread evenly over its run in the plan's timeline
    (costcore.analysis.budget.timeline), the plan's first day placed on the first day reviewed.
    """
    if plan is None or not days:
        return [ZERO] * len(days)
    planned = plan_stages(plan, stages)
    total = [ZERO] * len(days)
    for stage, share in _run_shares(plan, days, stages).items():
        if stage not in planned:
            continue
        usd = planned[stage]["usd"]
        total = [t + (usd if sh >= 1.0 else usd * _dec(sh) if sh > 0 else ZERO) for t, sh in zip(total, share)]
    return total


def _plan_days(plan) -> list:
    """Days of the plan's own timeline (for a burn chart before any actual is imported)."""
    if plan is None or not plan.stages:
        return []
    from costcore.analysis.budget import timeline
    sched = timeline(plan).schedule
    first = pd.Timestamp(sched["start"].min()).date()
    n = int(math.ceil((pd.Timestamp(sched["end"].max()) - pd.Timestamp(sched["start"].min())).total_seconds() / 86400))
    return [first + dt.timedelta(days=i) for i in range(max(n, 1) + 1)]


def bill_days(cube: pd.DataFrame) -> list:
    """Every day from the first to the last day billed in ``cube`` ([] without bills)."""
    if cube.empty:
        return []
    first, last = min(cube["day"]), max(cube["day"])
    return [first + dt.timedelta(days=i) for i in range((last - first).days + 1)]


def _crossing(days, cum, line: Decimal, rate: Decimal) -> dict | None:
    """{"date", "forecast"}: the first day the cumulative spend reaches ``line``, or when it will at ``rate``/day."""
    if line <= 0:
        return None
    for d, c in zip(days, cum):
        if c >= line:
            return {"date": d.isoformat(), "forecast": False}
    if rate <= 0 or not days:
        return None
    need = math.ceil(float((line - cum[-1]) / rate))
    return {"date": (days[-1] + dt.timedelta(days=need)).isoformat(), "forecast": True}


def burn(cube: pd.DataFrame, plan=None, budget_usd=None, warn_at: float | None = None, stages=None) -> dict:
    """Cumulative spend by day against the plan, the budget and the warning line.

    ``budget_usd`` defaults to the plan's budget.total_usd, else the plan's billed total;
    ``warn_at`` to the plan's budget.warn_at (0.8 by default). Returns {"days": DataFrame(day,
    actual_usd, plan_usd), "budget_usd", "budget_set" (False: no budget was given or set, the line is the
    plan's billed total), "warning_usd", "budget_crossing", "warning_crossing", "rate_usd_per_day"}; a crossing is {"date", "forecast"} or None.
    """
    from costcore.scenario.schema import effective_value
    per_day = cube.groupby("day")["usd"].sum() if not cube.empty else pd.Series(dtype=object)
    days = bill_days(cube) or _plan_days(plan)
    cum, run = [], ZERO
    for d in days:
        run += per_day.get(d, ZERO)
        cum.append(run)
    planned = plan_curve(plan, days, stages)
    budget_set = budget_usd is not None  # given, or the plan's own budget; else the plan's billed total
    if budget_usd is None:
        b = float(effective_value(plan.scenario, "budget.total_usd")) if plan is not None else 0.0
        budget_set = b > 0
        budget_usd = _dec(b) if b > 0 else dsum(p["usd"] for p in plan_stages(plan, stages).values())
    budget_usd = Decimal(budget_usd)
    if warn_at is None:
        warn_at = float(effective_value(plan.scenario, "budget.warn_at")) if plan is not None else 0.8
    warning = budget_usd * _dec(warn_at)
    recent = [per_day.get(d, ZERO) for d in days[-BURN_RATE_DAYS:]]
    rate = dsum(recent) / len(recent) if recent else ZERO
    frame = pd.DataFrame({"day": days, "actual_usd": [float(c) for c in cum], "plan_usd": [float(p) for p in planned]})
    return {"days": frame, "budget_usd": budget_usd, "budget_set": budget_set, "warning_usd": warning,
            "rate_usd_per_day": rate,
            "budget_crossing": _crossing(days, cum, budget_usd, rate),
            "warning_crossing": _crossing(days, cum, warning, rate)}


def per_run(cube: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """Dollars and GPU-hours of every run with billed lines: run_id, project, model_version, stage,
    status, usd (Decimal), gpu_hours (billed), eval_score."""
    cols = ["run_id", "project", "model_version", "stage", "status", "usd", "gpu_hours", "eval_score"]
    rows = cube[cube["run_id"] != ""]
    if rows.empty:
        return pd.DataFrame(columns=cols)
    g = rows.groupby("run_id").agg(usd=("usd", "sum"), gpu_hours=("gpu_hours", "sum"),
                                   project=("project", "first"), model_version=("model_version", "first"),
                                   stage=("stage", "first")).reset_index()
    info = runs[["run_id", "status", "eval_score", "start_at"]] if not runs.empty else pd.DataFrame(
        columns=["run_id", "status", "eval_score", "start_at"])
    g = g.merge(info, on="run_id", how="left")
    g["status"] = g["status"].fillna("no job record")
    return g.sort_values(["start_at", "run_id"], na_position="last")[cols].reset_index(drop=True)


def per_model_version(runs_cost: pd.DataFrame) -> pd.DataFrame:
    """Per model version: usd, runs, best eval score, points gained over the project's previous
    version (in order of first run), and dollars per point gained (NaN when nothing was gained)."""
    cols = ["project", "model_version", "usd", "runs", "eval_score", "points_gained", "usd_per_point"]
    if runs_cost.empty:
        return pd.DataFrame(columns=cols)
    order = {mv: i for i, mv in enumerate(dict.fromkeys(runs_cost["model_version"]))}
    g = runs_cost.groupby(["project", "model_version"]).agg(
        usd=("usd", "sum"), runs=("run_id", "count"), eval_score=("eval_score", "max")).reset_index()
    g["order"] = g["model_version"].map(order)
    g = g.sort_values(["project", "order"])
    g["points_gained"] = g.groupby("project")["eval_score"].transform(lambda s: s - s.ffill().shift(1))
    gained = g["points_gained"].where(g["points_gained"] > 0)
    g["usd_per_point"] = [float(u) / p if p == p else float("nan") for u, p in zip(g["usd"], gained)]
    return g[cols].reset_index(drop=True)


def report_dict(data: Data, plan=None, filters: dict | None = None, since=None, until=None) -> dict:
    """The JSON of ``actuals report``: {"actual_usd", "by", "plan_vs_actual", "anomalies", "waste"}, dollars to the cent."""
    cube = select(data.cube, filters, since, until)
    stages = (filters or {}).get("stage")
    by = {dim: {k: cents(v) for k, v in vals.items()} for dim, vals in slices(cube).items()}
    pva = {s: {"plan_usd": cents(v["plan_usd"]), "actual_usd": cents(v["actual_usd"]),
               "variance_usd": cents(v["variance_usd"])} for s, v in plan_vs_actual(cube, plan, stages).items()}
    found = anomalies(data.cube, filters, since, until)
    anoms = [{"date": r.day.isoformat(), "project": r.project, "resource_type": r.resource_type,
              "usd": cents(_dec(r.usd)), "expected_usd": cents(_dec(r.expected_usd))} for r in found.itertuples()]
    return {"actual_usd": cents(dsum(cube["usd"])), "by": by, "plan_vs_actual": pva, "anomalies": anoms,
            "waste": [{"kind": w["kind"], "usd": cents(w["usd"]), "items": w["items"]} for w in waste(cube)]}


def report_frame(doc: dict) -> pd.DataFrame:
    """The report as rows for CSV: section, key, value (dollars), detail."""
    rows = [("total", "actual_usd", doc["actual_usd"], "")]
    for dim, vals in doc["by"].items():
        rows += [(f"by_{dim}", k, v, "") for k, v in vals.items()]
    for s, v in doc["plan_vs_actual"].items():
        rows += [("plan_vs_actual", s, v["actual_usd"], f"plan {v['plan_usd']:.2f}; variance {v['variance_usd']:.2f}")]
    rows += [("anomaly", f"{a['date']} {a['project']} {a['resource_type']}", a["usd"], f"expected {a['expected_usd']:.2f}")
             for a in doc["anomalies"]]
    rows += [("waste", w["kind"], w["usd"], " ".join(w["items"])) for w in doc["waste"]]
    return pd.DataFrame(rows, columns=["section", "key", "usd", "detail"])


def waterfall_frame(steps: list[dict]) -> pd.DataFrame:
    """The waterfall's bars: order, label, start and end (running total, $), usd, direction words."""
    rows, level = [], ZERO
    for i, st in enumerate(steps):
        if st["kind"] == "step":
            start, level = level, level + st["usd"]
            direction = "Adds to the plan" if st["usd"] >= 0 else "Saves against the plan"
        else:
            start, level = ZERO, st["usd"]
            direction = "Plan" if st["kind"] == "plan" else "Actual"
        rows.append({"order": i, "label": st["label"], "start": float(start), "end": float(level),
                     "usd": float(st["usd"]), "direction": direction})
    return pd.DataFrame(rows)


def view(data: Data, plan=None, filters: dict | None = None, since=None, until=None, budget_usd=None) -> dict:
    """Everything the Review page draws, for one selection: totals, slices, plan vs actual, the
    waterfall, burn, daily spend, anomalies, waste, cost per run and per model version.

    Plan vs actual, the waterfall and ``plan_usd`` compare the bills with the plan to the last day billed
    (``last_day``; :func:`stage_shares`): a month into a four-month plan the actual is not "under plan" by the
    three months still to come. ``plan_total_usd`` is the whole plan's billed dollars; without bills the two
    are equal."""
    cube = select(data.cube, filters, since, until)
    stages = (filters or {}).get("stage")
    days = bill_days(cube)
    shares = stage_shares(plan, days, stages) if days else None  # the plan to the last day billed
    pva = plan_vs_actual(cube, plan, stages, shares)
    steps = variance_steps(cube, plan_stages(plan, stages, shares))
    runs_cost = per_run(cube, data.runs)
    found = anomalies(data.cube, filters, since, until)
    found_days = daily(cube, keys=("project",))
    actual, planned = dsum(cube["usd"]), dsum(v["plan_usd"] for v in pva.values())
    return {"actual_usd": actual, "plan_usd": planned, "variance_usd": actual - planned,
            "plan_total_usd": dsum(p["usd"] for p in plan_stages(plan, stages).values()),
            "last_day": days[-1] if days else None,
            "lines": int(cube["lines"].sum()) if not cube.empty else 0, "slices": slices(cube),
            "plan_vs_actual": pva, "waterfall": waterfall_frame(steps), "steps": steps,
            "burn": burn(cube, plan, budget_usd, stages=stages), "daily": found_days, "anomalies": found,
            "waste": waste(cube), "per_run": runs_cost, "per_model_version": per_model_version(runs_cost)}
