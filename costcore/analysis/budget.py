"""Budget governance: budget lines and alerts, timeline, iteration lifecycle, attribution, comparison.

All money comes from the kernel's line items; this module only arranges
them (per budget line, per month, per iteration). Nothing here changes a
total: the monthly spend sums to the plan total, and the lifecycle total is
the plan plus the repeated post-training iterations.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import numpy as np
import pandas as pd

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # type hints only: api builds on budget (Result.to_dict), not the other way round
    from costcore import api
from costcore import fmt
from costcore.scenario import schema
from costcore.engine.formulas import DAYS_PER_MONTH
from costcore.engine.kernel import I_HID_RESERVED, ITEM_PROFILE, ITEM_REUSED
from costcore.scenario.schema import RESOURCES, STAGES, effective_value

STATUS_ORDER = ("ok", "unchecked", "warning", "over")  # unchecked: the plan (or the stage) cannot run as laid out


# ---------------------------------------------------------------------------
# Budget lines
# ---------------------------------------------------------------------------
def budget_lines(res: api.Result) -> pd.DataFrame:
    """One row per budget set in the scenario: scope, name, budget, actual, warning line, status."""
    scn = res.scenario
    warn = float(effective_value(scn, "budget.warn_at"))
    m = res.resource_matrix()
    rows = []

    def add(scope, name, budget, actual, runs=res.feasible):
        if budget <= 0:
            return
        status = "over" if actual > budget else ("warning" if actual >= warn * budget else "ok")
        if not runs:  # a plan that cannot run has no cost to hold against a budget ("No total" on every page)
            status = "unchecked"
        rows.append({"scope": scope, "name": name, "budget_usd": budget, "warning_usd": warn * budget,
                     "actual_usd": actual, "status": status, "over_usd": max(0.0, actual - budget),
                     "share_used": actual / budget, "share_over": max(0.0, actual / budget - 1.0)})

    add("total", "total", float(effective_value(scn, "budget.total_usd")), res.total_usd)
    for i, s in enumerate(STAGES):
        add("stage", s, float(effective_value(scn, f"budget.{s}_usd")), float(m[i].sum()),
            s not in res.stages or res.stat(s, "fits") > 0.5)
    for j, r in enumerate(RESOURCES):
        add("resource", r, float(effective_value(scn, f"budget.{r}_usd")), float(m[:, j].sum()))
    return pd.DataFrame(rows, columns=["scope", "name", "budget_usd", "warning_usd", "actual_usd", "status",
                                       "over_usd", "share_used", "share_over"])


def budget_status(res: api.Result) -> dict | None:
    """{"status", "alerts": [...]} when any budget is set, else None. Alerts: lines at warning or over, and
    lines "unchecked" while the plan (for a stage budget, the stage) cannot run as laid out."""
    lines = budget_lines(res)
    if lines.empty:
        return None
    status = max(lines.status, key=STATUS_ORDER.index)
    alerts = []
    for r in lines[lines.status != "ok"].itertuples():
        alerts.append({"scope": r.scope, "name": r.name, "status": r.status, "budget_usd": float(r.budget_usd),
                       "actual_usd": float(r.actual_usd), "over_usd": float(r.over_usd),
                       "share_over": float(r.share_over), "share_used": float(r.share_used),
                       "message": _alert_text(r)})
    total = float(effective_value(res.scenario, "budget.total_usd"))
    stages = lines[lines.scope == "stage"]
    if total > 0 and stages.budget_usd.sum() > total * (1.0 + 1e-9):  # budgets that cannot all be kept
        parts = float(stages.budget_usd.sum())
        alerts.append({"scope": "budgets", "name": "stages", "status": "warning", "budget_usd": total,
                       "actual_usd": parts, "over_usd": parts - total, "share_over": parts / total - 1.0,
                       "share_used": parts / total,
                       "message": f"The stage budgets add up to {fmt.usd(parts)}, more than the total budget of "
                                  f"{fmt.usd(total)}: spending every stage's budget would overrun the total."})
        status = max(status, "warning", key=STATUS_ORDER.index)
    return {"status": status, "alerts": alerts}


def _alert_text(r) -> str:
    label = "Total" if r.scope == "total" else (schema.STAGE_LABELS.get(r.name, r.name) if r.scope == "stage"
                                                else f"{r.name.capitalize()} (all stages)")
    if r.status == "unchecked":  # not "$31.8B against $35.0M (909 times the budget)" beside "No total"
        what = "the stage" if r.scope == "stage" else "the plan"
        return (f"{label}: not checked against its {fmt.usd(r.budget_usd)} budget, since {what} cannot run as "
                f"laid out (it does not fit in GPU memory on its GPUs).")
    # money as a person reads it (3 significant digits); the exact amounts are in the alert's fields
    if r.status == "over":  # past ten times the budget a percent reads as noise ("3966887207% over"): a multiple
        over = (f"{fmt.share(r.share_over)} over" if r.share_used < 10.0 else  # 12.9%, as the table beside it
                f"{fmt.num(r.share_used)} times the budget")
        return (f"{label} is over budget: {fmt.usd(r.actual_usd)} against {fmt.usd(r.budget_usd)} "
                f"({fmt.usd(r.over_usd)}, {over}).")
    return (f"{label} has passed its warning line: {fmt.usd(r.actual_usd)} is {fmt.share(r.share_used)} "
            f"of the {fmt.usd(r.budget_usd)} budget.")


# ---------------------------------------------------------------------------
# Timeline
# ---------------------------------------------------------------------------
# How each line item is spread over a stage's calendar span is the "profile" column of
# kernel.LINE_ITEM_TABLE (documented there and in the page): setup, run, span, kept, end.


@dataclass
class Timeline:
    schedule: pd.DataFrame  # stage, iteration, start, setup_end, end, gpus
    monthly: pd.DataFrame  # month (Timestamp), stage, usd
    usage: pd.DataFrame  # day, gpus, storage_gb
    peak_gpus: float
    average_gpus: float
    total_usd: float


def _stage_spans(res: api.Result, start: dt.date) -> list[dict]:
    scn = res.scenario
    spans = []
    prev_run = prev_end = None
    for s in res.stages:
        months = res.stat(s, "months")
        setup_d = res.stat(s, "setup_months") * DAYS_PER_MONTH
        span_d = months * DAYS_PER_MONTH
        if prev_end is None:
            begin = 0.0
        else:  # an overlap is a share of the previous stage's run, after its setup: CPT at 0.5 starts halfway
            # through the pre-training run, not halfway through a span whose first months are setup (it then
            # started, with every stage after it, before the pre-training run had begun)
            overlap = float(effective_value(scn, f"schedule.{s}_overlap"))
            begin = prev_end - overlap * (prev_end - prev_run)
        spans.append({"stage": s, "iteration": 1, "start_d": begin, "setup_end_d": begin + setup_d,
                      "end_d": begin + span_d, "gpus": res.stat(s, "num_gpus"),
                      "storage_gb": res.stat(s, "storage_peak_gb")})
        prev_run, prev_end = begin + min(setup_d, span_d), begin + span_d
    return spans


def concurrent_peak_gpus(res: api.Result) -> float:
    """Most GPUs held at once by the first pass, stages overlapping as scheduled."""
    spans = _stage_spans(res, dt.date(2000, 1, 1))
    ev = sorted({sp["setup_end_d"] for sp in spans})
    return max((sum(sp["gpus"] for sp in spans if sp["setup_end_d"] <= t < sp["end_d"]) for t in ev), default=0.0)


def _lifecycle_stages(scn: dict, res: api.Result) -> list[str]:
    return [s for s in ("sft", "dpo", "rl", "eval")
            if s in res.stages and bool(effective_value(scn, f"lifecycle.{s}"))]


def iteration_items(res: api.Result) -> np.ndarray:
    """Line items ($, stages x items) of one repeated post-training iteration (iterations 2..N). The reservation's
    idle hours are the first pass's to bill (the term is billed once), so a repeat carries none of them; its GPU
    time is billed as the first pass's is, an overestimate when the repeats run on hours the term left idle."""
    scn = res.scenario
    reuse = float(effective_value(scn, "lifecycle.data_reuse"))
    keep = _lifecycle_stages(scn, res)
    items = np.zeros_like(res.items)
    for s in keep:
        i = STAGES.index(s)
        items[i] = res.items[i]
        for j in np.flatnonzero(ITEM_REUSED):  # data bought or made once, reused by later iterations
            items[i, j] *= 1.0 - reuse
        items[i, I_HID_RESERVED] = 0.0
    return items


def _all_spans(res: api.Result, start: dt.date) -> tuple[list[dict], list]:
    """The first pass's stage spans plus the repeated post-training iterations, each with its items."""
    scn = res.scenario
    spans = _stage_spans(res, start)
    n_iter = int(effective_value(scn, "lifecycle.iterations"))
    loop = _lifecycle_stages(scn, res)
    # every ``every`` months, but at least one iteration apart (_iteration_days)
    every_d = max(float(effective_value(scn, "lifecycle.every_months")) * DAYS_PER_MONTH, _iteration_days(spans, loop))
    first = {sp["stage"]: sp for sp in spans}
    item_sets = [(sp, res.items[STAGES.index(sp["stage"])]) for sp in spans]
    if n_iter > 1 and loop:
        it_items = iteration_items(res)
        for k in range(2, n_iter + 1):
            shift = (k - 1) * every_d
            for s in loop:
                sp = dict(first[s], iteration=k)
                for key in ("start_d", "setup_end_d", "end_d"):
                    sp[key] = sp[key] + shift
                spans.append(sp)
                item_sets.append((sp, it_items[STAGES.index(s)]))
    return spans, item_sets


def _month_edges(start: dt.date, horizon: float) -> tuple[np.ndarray, list[dt.date]]:
    """Calendar-month boundaries (days from the start date) covering the horizon, and each month's first day."""
    bounds = [0.0]
    d = start.replace(day=1)
    while bounds[-1] < horizon:
        d = (d.replace(day=28) + dt.timedelta(days=4)).replace(day=1)
        bounds.append(float((d - start).days))
    bounds[-1] = max(bounds[-1], horizon)
    edges = np.array(bounds)
    month_starts = [start.replace(day=1)]
    for _ in range(len(edges) - 2):
        m = month_starts[-1]
        month_starts.append((m.replace(day=28) + dt.timedelta(days=4)).replace(day=1))
    return edges, month_starts


def _monthly_spend(item_sets, edges: np.ndarray, retention_d: float) -> np.ndarray:
    """(months, stages) $: each line item spread uniformly over its profile's part of the span."""
    monthly = np.zeros((len(edges) - 1, len(STAGES)))

    def spread(usd, a, b, col):
        if usd == 0.0:
            return
        if b <= a:  # a point in time
            k = min(max(np.searchsorted(edges, a, side="right") - 1, 0), len(edges) - 2)
            monthly[k, col] += usd
            return
        lo = np.clip(edges[:-1], a, b)
        hi = np.clip(edges[1:], a, b)
        monthly[:, col] += usd * (hi - lo) / (b - a)

    for sp, items in item_sets:
        col = STAGES.index(sp["stage"])
        parts = {"setup": (sp["start_d"], sp["setup_end_d"]), "run": (sp["setup_end_d"], sp["end_d"]),
                 "span": (sp["start_d"], sp["end_d"]), "kept": (sp["setup_end_d"], sp["end_d"] + retention_d),
                 "end": (sp["end_d"], sp["end_d"])}
        for j, prof in enumerate(ITEM_PROFILE):
            a, b = parts[prof]
            spread(float(items[j]), a, b, col)
    return monthly


def _usage(spans, horizon: float, retention_d: float, start: dt.date) -> tuple[pd.DataFrame, float, float]:
    """(GPUs and storage held per day, peak GPUs, average GPUs while any run)."""
    # GPUs in use: an exact step function over the run periods (sweep over start/end events)
    events = sorted({0.0, horizon} | {sp["setup_end_d"] for sp in spans} | {sp["end_d"] for sp in spans})
    ev = np.array(events)
    s0 = np.array([sp["setup_end_d"] for sp in spans], dtype=np.float64)
    s1 = np.array([sp["end_d"] for sp in spans], dtype=np.float64)
    g = np.array([sp["gpus"] for sp in spans], dtype=np.float64)

    def held_at(t):  # GPUs of the runs under way at each time t (a run holds [setup end, end))
        return ((t[:, None] >= s0) & (t[:, None] < s1)).astype(np.float64) @ g
    gpus_at = held_at(ev)
    widths = np.diff(ev)
    busy = gpus_at[:-1] > 0
    peak = float(gpus_at.max(initial=0.0))
    avg = float((gpus_at[:-1] * widths)[busy].sum() / widths[busy].sum()) if busy.any() else 0.0
    # storage held: ramps up during each run, then held through retention (daily, plus the events)
    days = np.unique(np.concatenate([np.arange(0.0, np.ceil(horizon) + 1.0), ev]))
    gpus = held_at(days)
    storage = np.zeros_like(days)
    for sp in spans:
        ramp = np.clip((days - sp["setup_end_d"]) / max(sp["end_d"] - sp["setup_end_d"], 1e-9), 0, 1)
        held = (days >= sp["setup_end_d"]) & (days < sp["end_d"] + retention_d)
        storage += np.where(held, ramp * sp["storage_gb"], 0.0)
    usage = pd.DataFrame({"day": days, "date": pd.Timestamp(start) + pd.to_timedelta(days, unit="D"),
                          "gpus": gpus, "storage_gb": storage})
    return usage, peak, avg


def timeline(res: api.Result) -> Timeline:
    """Stages on a calendar, monthly spend by stage, GPUs and storage held over time.

    Stages run in sequence from schedule.start_date, each overlapping the
    previous one by schedule.<stage>_overlap of its span; repeated
    post-training iterations (lifecycle) follow every lifecycle.every_months.
    Each line item is spread uniformly over its part of the stage's span
    (its profile in kernel.LINE_ITEM_TABLE); the monthly spend therefore sums
    exactly to the totals.
    """
    scn = res.scenario
    start = dt.date.fromisoformat(str(effective_value(scn, "schedule.start_date")))
    spans, item_sets = _all_spans(res, start)
    retention_d = float(effective_value(scn, "storage.retention_months")) * DAYS_PER_MONTH
    horizon = max(max(sp["end_d"] for sp in spans) + retention_d, 1.0)
    edges, month_starts = _month_edges(start, horizon)
    monthly = _monthly_spend(item_sets, edges, retention_d)
    rows = []
    for k, ms in enumerate(month_starts):
        for col, s in enumerate(STAGES):
            if monthly[k, col] != 0.0:
                rows.append({"month": pd.Timestamp(ms), "stage": s, "usd": float(monthly[k, col])})
    mdf = pd.DataFrame(rows, columns=["month", "stage", "usd"])
    usage, peak, avg = _usage(spans, horizon, retention_d, start)
    t0 = pd.Timestamp(start)
    sched = pd.DataFrame([{"stage": sp["stage"], "iteration": sp["iteration"],
                           "start": t0 + pd.Timedelta(days=sp["start_d"]),
                           "run_start": t0 + pd.Timedelta(days=sp["setup_end_d"]),
                           "end": t0 + pd.Timedelta(days=sp["end_d"]),
                           "gpus": sp["gpus"]} for sp in spans])
    return Timeline(schedule=sched, monthly=mdf, usage=usage, peak_gpus=peak, average_gpus=avg,
                    total_usd=float(monthly.sum()))


@dataclass
class Lifecycle:
    iterations: int
    every_months: float
    stages: list
    first_pass_usd: float  # the plan as estimated (all stages, once)
    per_iteration_usd: float  # one repeated iteration (iterations 2..N)
    total_usd: float  # first pass + (N - 1) repeated iterations
    horizon_months: float
    table: pd.DataFrame  # iteration, stage, usd


def _iteration_days(spans: list[dict], loop: list[str]) -> float:
    """Days one repeated iteration takes: the first pass's repeated stages, first start to last end. Iterations are
    at least this far apart: at every 0.25 months a 1-month iteration started while the one before it still ran."""
    mine = [sp for sp in spans if sp["stage"] in loop]
    return max(sp["end_d"] for sp in mine) - min(sp["start_d"] for sp in mine) if mine else 0.0


def lifecycle(res: api.Result) -> Lifecycle:
    """The recurring cost of repeated post-training iterations over a horizon. An interval shorter than one
    iteration runs them back to back (``every_months`` is then the iteration's own length)."""
    scn = res.scenario
    n = int(effective_value(scn, "lifecycle.iterations"))
    loop = _lifecycle_stages(scn, res)
    every = float(effective_value(scn, "lifecycle.every_months"))
    if n > 1 and loop:
        every = max(every, _iteration_days(_stage_spans(res, dt.date(2000, 1, 1)), loop) / DAYS_PER_MONTH)
    it = iteration_items(res)
    per_iter = float(it.sum()) if loop else 0.0
    rows = []
    for s in loop:
        i = STAGES.index(s)
        rows.append({"iteration": 1, "stage": s, "usd": float(res.items[i].sum())})
        for k in range(2, n + 1):
            rows.append({"iteration": k, "stage": s, "usd": float(it[i].sum())})
    total = res.total_usd + (n - 1) * per_iter
    return Lifecycle(iterations=n, every_months=every, stages=loop, first_pass_usd=res.total_usd,
                     per_iteration_usd=per_iter, total_usd=total, horizon_months=n * every,
                     table=pd.DataFrame(rows, columns=["iteration", "stage", "usd"]))


# ---------------------------------------------------------------------------
# Attribution and comparison
# ---------------------------------------------------------------------------
def attribution(res: api.Result) -> pd.DataFrame:
    """All line items with stage, resource, fixed/elastic and the scenario's tags."""
    df = res.line_items()
    df.insert(0, "scenario", res.scenario.get("name", ""))
    df["project"] = str(effective_value(res.scenario, "tags.project"))
    df["team"] = str(effective_value(res.scenario, "tags.team"))
    return df


def attribution_yaml(res: api.Result) -> str:
    from costcore.scenario.yamlio import dump_yaml
    df = attribution(res)
    return dump_yaml({"scenario": res.scenario.get("name", ""),
                      "project": str(effective_value(res.scenario, "tags.project")),
                      "team": str(effective_value(res.scenario, "tags.team")),
                      "total_usd": res.total_usd,
                      "line_items": [{k: (float(v) if k == "usd" else v) for k, v in row.items()
                                      if k not in ("scenario", "project", "team")}
                                     for row in df.to_dict("records")]})


def compare(a: api.Result, b: api.Result) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(inputs that differ, costs side by side) of two estimated scenarios."""
    fa, fb = dict(schema.iter_values(a.scenario)), dict(schema.iter_values(b.scenario))
    rows = []
    for path in sorted(set(fa) | set(fb)):
        va = fa.get(path, schema.effective_value(a.scenario, path))
        vb = fb.get(path, schema.effective_value(b.scenario, path))
        if va != vb:  # the values as the scenarios hold them; the page puts them in words (pages/compare.py)
            rows.append({"input": path, "A": va, "B": vb})
    for s in STAGES:
        ina, inb = s in a.stages, s in b.stages
        if ina != inb:
            rows.append({"input": f"stages.{s}", "A": "on" if ina else "off", "B": "on" if inb else "off"})
    inputs = pd.DataFrame(rows, columns=["input", "A", "B"])
    ma, mb = a.resource_matrix(), b.resource_matrix()
    crow = []
    for i, s in enumerate(STAGES):
        if s not in a.stages and s not in b.stages:
            continue
        for j, r in enumerate(RESOURCES):
            crow.append({"stage": s, "resource": r, "A": float(ma[i, j]), "B": float(mb[i, j]),
                         "B_minus_A": float(mb[i, j] - ma[i, j])})
    return inputs, pd.DataFrame(crow, columns=["stage", "resource", "A", "B", "B_minus_A"])
