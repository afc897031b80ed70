"""The shared cluster's own rules, each once, with its units and source (docs/cluster.md).

Everything a stage costs comes from ``costcore.api.estimate``; these are only the terms the
single-project model has no notion of: the latest start that still meets a deadline, how idle
dollars are shared and how dollars are split into whole cents. The work a preemption loses is
``costcore.cluster.kernel.lost_work_hours`` (it lives beside the scheduler that calls it, so numba's
on-disk cache, keyed on each file, can never pair the scheduler with a stale copy of the rule).
"""
from __future__ import annotations

import math

import numpy as np

HOURS_PER_DAY = 24.0
AT_RISK_DAYS = 3.0  # a met deadline with less slack than this is "at risk" (a planning margin, assumption)


def latest_start_hours(deadline_h: float, chain_hours) -> np.ndarray:
    """The latest start of each job of a project that still meets its deadline, h from the horizon start.

    ``chain_hours``: the run hours of the project's jobs in order; job k must start by
    deadline - (its own hours + the hours of every later job). A job still waiting at that time
    bursts (docs/cluster.md, "Burst"). No deadline: +inf.
    """
    h = np.asarray(chain_hours, dtype=np.float64)
    if deadline_h is None or not math.isfinite(deadline_h):
        return np.full(len(h), math.inf)
    tail = np.cumsum(h[::-1])[::-1]
    return deadline_h - tail


def largest_remainder_cents(amounts_usd, total_cents: int) -> np.ndarray:
    """Whole cents for each amount that add up to ``total_cents`` exactly (Hamilton's largest remainder).

    Each amount gets floor(100 x amount) cents; the cents left over go one each to the amounts with the
    largest fractional parts (ties: the earlier row). Amounts are $, >= 0; the result is int64 cents.
    """
    a = np.maximum(np.asarray(amounts_usd, dtype=np.float64), 0.0) * 100.0
    base = np.floor(a).astype(np.int64)
    left = int(total_cents) - int(base.sum())
    if left > 0 and len(a):
        order = np.argsort(-(a - base), kind="stable")
        k = np.arange(left) % len(a)
        np.add.at(base, order[k], 1)
    elif left < 0 and len(a):  # float sums a cent above the total: take back from the smallest remainders
        order = np.argsort(a - base, kind="stable")
        for i in order:
            if left == 0:
                break
            if base[i] > 0:
                base[i] -= 1
                left += 1
    return base


def idle_weights(rule: str, quota_gpus: np.ndarray, used_gpu_hours: np.ndarray) -> np.ndarray:
    """Shares of a pool's idle reserved dollars per team under an idle rule (they sum to 1, or all 0).

    quota (default): by guaranteed quota, so every idle dollar lands on a team (a team with no quota
    pays none); use: by the reserved GPU-hours each team used (by quota when nobody used the pool);
    unallocated: no team pays, the idle dollars stay on the cluster's own line.
    """
    q = np.asarray(quota_gpus, dtype=np.float64)
    u = np.asarray(used_gpu_hours, dtype=np.float64)
    if rule == "unallocated":
        return np.zeros(len(q))
    w = u if rule == "use" and u.sum() > 0 else q
    if w.sum() <= 0:
        w = np.ones(len(q))
    return w / w.sum()


def team_ceiling_gpus(pf, team: str, pool: str) -> int:
    """The most GPUs of ``pool`` that ``team`` can ever hold: its quota plus its borrowing limit there (Kueue
    ClusterQueue nominalQuota + borrowingLimit), the whole pool when it has no limit; at most the pool. A pool
    made larger reaches none of the team's jobs past this (docs/cluster.md, "Scheduler semantics")."""
    size = int(pf.pools[pool].gpus)
    t = pf.teams[team]
    limit = t.borrowing_limit_gpus.get(pool)
    if limit is None:
        return size
    return min(size, int(t.quota_gpus.get(pool, 0)) + int(limit))
