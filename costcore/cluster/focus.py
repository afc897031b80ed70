"""Exports of a cluster's attribution: FOCUS 1.x cost and usage rows, and a plain CSV.

FOCUS (FinOps Open Cost and Usage Specification, focus.finops.org, 1.0/1.1 column names): one row
per attribution row of :meth:`ClusterResult.attribution_rows` (project x run x stage x resource type,
and each team's idle share). BilledCost = EffectiveCost = the row's whole cents; ListCost prices the
row's GPU time at the catalog's on-demand price (costcore/data/hardware.yaml) and every other
resource at what it costs; ChargePeriodStart/End span the job's first start to its finish (idle rows:
the horizon); Tags is a JSON object with project, team, model_version, task_type, stage (and pool; and run, from 1,
for a project that is a sweep of several runs, whose ResourceId then names the run).
Every cell goes through ``costcore.fmt.to_csv`` (formula cells neutralised), and Tags is written by
``json.dumps``, so a name from the portfolio cannot forge a column or a row.
"""
from __future__ import annotations

import datetime as _dt
import json

import numpy as np
import pandas as pd

from costcore import fmt
from costcore.engine import kernel as ek
from costcore.scenario.schema import CATALOG
from costcore.cluster import jobs as cj
from costcore.cluster import kernel as ck
from costcore.cluster import results as cr

FOCUS_COLUMNS = ("BillingPeriodStart", "BillingPeriodEnd", "ChargePeriodStart", "ChargePeriodEnd", "BilledCost",
                 "EffectiveCost", "ListCost", "BillingCurrency", "ChargeCategory", "ChargeDescription", "ProviderName",
                 "ServiceName", "ServiceCategory", "ResourceId", "ResourceName", "ResourceType", "Tags")
SERVICE = {"compute": ("GPU cluster", "Compute"), "hidden": ("GPU cluster", "Compute"),
           cr.PREEMPTION: ("GPU cluster", "Compute"), cr.IDLE: ("GPU cluster", "Compute"),
           "storage": ("Object storage", "Storage"), "network": ("Data transfer", "Networking"),
           "data": ("Training data", "AI and Machine Learning"), "labor": ("Team", "Other"),
           "ops": ("Platform and operations", "Other")}
PLAIN_COLUMNS = ("project", "team", "model_version", "task_type", "stage", "run", "resource", "pool", "usd")


def _list_ratio(res: "cr.ClusterResult") -> np.ndarray:
    """(jobs, RESOURCE_TYPES without idle): list $ / billed $ of each job's cell (GPU time at the catalog's
    on-demand price, other items as billed)."""
    jt, o = res.jobs, res.out
    pools = list(res.portfolio.pools.values())
    cat = np.array([CATALOG[pools[p].gpu]["usd_per_gpu_hour"] for p in jt.pool])
    price = np.array([pools[p].reserved_usd_per_gpu_hour for p in jt.pool])
    with np.errstate(invalid="ignore", divide="ignore"):
        done = np.where(jt.work_h > 0, (o[:, ck.O_KEPT] + o[:, ck.O_BURST]) / jt.work_h, 1.0)
        scale = np.where(price > 0, cat / price, 1.0)
    mask = np.zeros(ek.NI, dtype=bool)
    mask[cj.GPU_ITEMS] = True
    items = np.where(mask, (scale * done)[:, None] * jt.items_reserved, jt.items_reserved)
    lst = np.zeros_like(res.job_usd)
    for i in range(ek.NI):
        lst[:, ek.ITEM_RESOURCE[i]] += items[:, i]
    lst[:, -1] = res.lost_gpu_hours * cat
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(res.job_usd > 0, lst / res.job_usd, 1.0)


def _iso(start: _dt.datetime, hours) -> list:
    return [(start + _dt.timedelta(hours=float(h))).strftime("%Y-%m-%dT%H:%M:%SZ") for h in hours]


def focus_frame(res: "cr.ClusterResult", rule: str | None = None) -> pd.DataFrame:
    """The FOCUS rows of a cluster result under an idle rule (default: the portfolio's)."""
    df = res.attribution_rows(rule)
    start = res.period_start()
    job = df["job"].to_numpy()
    is_job = job >= 0
    t0 = np.where(is_job, res.out[np.maximum(job, 0), ck.O_FIRST], 0.0)
    t1 = np.where(is_job, res.out[np.maximum(job, 0), ck.O_FINISH], res.horizon_h)
    ratio = _list_ratio(res)
    col = [cr.RESOURCE_TYPES.index(r) for r in df["resource"]]
    lst = np.where(is_job, ratio[np.maximum(job, 0), np.minimum(col, ratio.shape[1] - 1)], 1.0)
    pools = res.portfolio.pools
    idle_list = {p: CATALOG[v.gpu]["usd_per_gpu_hour"] / v.reserved_usd_per_gpu_hour
                 if v.reserved_usd_per_gpu_hour > 0 else 1.0 for p, v in pools.items()}
    lst = np.where(is_job, lst, [idle_list[p] for p in df["pool"]])
    billed = df["cents"].to_numpy() / 100.0
    projects = res.portfolio.projects
    sweep = [r.job >= 0 and projects[r.project].runs > 1 for r in df.itertuples()]
    tags = [json.dumps({"project": r.project, "team": r.team, "model_version": r.model_version,
                        "task_type": r.task_type, "stage": r.stage, "pool": r.pool,
                        **({"run": int(r.run)} if sw else {})}, ensure_ascii=False)
            for r, sw in zip(df.itertuples(), sweep)]
    ids = [(f"{r.pool}/{r.project}/" + (f"run-{int(r.run)}/" if sw else "") + f"{r.stage}/{r.resource}")
           if r.job >= 0 else f"{r.pool}/idle/{r.team}" for r, sw in zip(df.itertuples(), sweep)]
    out = pd.DataFrame({
        "BillingPeriodStart": _iso(start, [0.0])[0], "BillingPeriodEnd": _iso(start, [res.horizon_h])[0],
        "ChargePeriodStart": _iso(start, t0), "ChargePeriodEnd": _iso(start, t1),
        "BilledCost": billed, "EffectiveCost": billed, "ListCost": np.round(billed * lst, 2),
        "BillingCurrency": "USD", "ChargeCategory": "Usage",
        "ChargeDescription": [cr.RESOURCE_WORDS[r] for r in df["resource"]], "ProviderName": "Shared cluster",
        "ServiceName": [f"{SERVICE[r][0]} {p}" if SERVICE[r][0] == "GPU cluster" else SERVICE[r][0]
                        for r, p in zip(df["resource"], df["pool"])],
        "ServiceCategory": [SERVICE[r][1] for r in df["resource"]],
        "ResourceId": ids, "ResourceName": [fmt.one_line(i) for i in ids],
        "ResourceType": [cr.RESOURCE_WORDS[r] for r in df["resource"]], "Tags": tags,
    })
    return out[list(FOCUS_COLUMNS)]


def focus_csv(res: "cr.ClusterResult", rule: str | None = None) -> str:
    return fmt.to_csv(focus_frame(res, rule))


def plain_frame(res: "cr.ClusterResult", rule: str | None = None) -> pd.DataFrame:
    df = res.attribution_rows(rule)
    return df[list(PLAIN_COLUMNS)]


def plain_csv(res: "cr.ClusterResult", rule: str | None = None) -> str:
    return fmt.to_csv(plain_frame(res, rule))
