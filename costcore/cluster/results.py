"""The shared cluster's results: schedule, per-project and per-team tables, utilization, attribution.

:class:`ClusterModel` estimates every project once (``costcore.cluster.jobs``); :meth:`ClusterModel.run`
applies what-if knobs (pool size, a team's quota, a project's priority, burst on or off, the idle
rule), runs the scheduler (``costcore.cluster.kernel.simulate``) and returns a :class:`ClusterResult`.

Money: the reserved pools are paid for the whole horizon (GPUs x hours x reserved price); each job's
share of it is the GPU-hours it held, priced by its estimate's own GPU-time line items; burst GPU time
is priced by the estimate at the burst price; every other line item (storage, network, data, labor,
ops, the RL verifier) is the estimate's. What no job held is idle, priced at the reserved price and
shared by the idle rule (``rules.idle_weights``). Attribution rows are whole cents (largest remainder),
so they add up to the cluster's total to the cent.
"""
from __future__ import annotations

import datetime as _dt
import math
from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np
import pandas as pd

from costcore.engine import kernel as ek
from costcore.engine.formulas import gpu_time_usd
from costcore.errors import ScenarioError
from costcore.scenario.schema import RESOURCE_LABELS, RESOURCES
from costcore.cluster import jobs as cj
from costcore.cluster import kernel as ck
from costcore.cluster import portfolio as cp
from costcore.cluster import rules

PREEMPTION = "preemption"  # GPU-hours redone after a preemption, and restarts
IDLE = "idle"              # reserved GPU-hours nobody held
RESOURCE_TYPES = tuple(RESOURCES) + (PREEMPTION, IDLE)
# the planner's own resource labels (one name per resource on every page), plus the cluster's two
RESOURCE_WORDS = {**RESOURCE_LABELS, PREEMPTION: "Preemption (lost work and restarts)", IDLE: "Idle reserved capacity"}
IDLE_PROJECT = "(idle share)"
UNALLOCATED = "(unallocated)"
ATTR_DIMS = ("project", "team", "model_version", "task_type", "stage", "resource", "pool")
_ITEM_RES = ek.ITEM_RESOURCE
_GPU_MASK = np.zeros(ek.NI, dtype=bool)
_GPU_MASK[cj.GPU_ITEMS] = True


def what_if(pf: cp.Portfolio, pool_gpus: dict | None = None, team_quota: dict | None = None,
            project_priority: dict | None = None, burst: bool | None = None,
            idle_rule: str | None = None) -> cp.Portfolio:
    """A copy of a portfolio with scheduling knobs changed (never a project's scenario); ScenarioError if bad.

    ``pool_gpus`` {pool: GPUs}; ``team_quota`` {team: {pool: GPUs}}; ``project_priority`` {project: priority}.
    """
    pools, teams, projects = dict(pf.pools), dict(pf.teams), dict(pf.projects)
    for name, g in (pool_gpus or {}).items():
        if name not in pools:
            raise ScenarioError(f"pools.{str(name)[:40]}", "names no pool")
        pools[name] = replace(pools[name], gpus=cp.number(g, f"pools.{name}.gpus", 1, 1_000_000, "GPUs", True))
    for name, q in (team_quota or {}).items():
        if name not in teams:
            raise ScenarioError(f"teams.{str(name)[:40]}", "names no team")
        quota = dict(teams[name].quota_gpus)
        given = cp.per_pool(q, f"teams.{name}.quota_gpus", pools, 0)
        quota.update({p: v for p, v in given.items() if not isinstance(q, dict) or p in q})
        teams[name] = replace(teams[name], quota_gpus=quota)
    for name, prio in (project_priority or {}).items():
        if name not in projects:
            raise ScenarioError(f"projects.{str(name)[:40]}", "names no project")
        projects[name] = replace(projects[name], priority=cp.number(prio, f"projects.{name}.priority",
                                                                     -1_000_000, 1_000_000, "", True))
    if idle_rule is not None and idle_rule not in cp.IDLE_RULES:
        raise ScenarioError("idle_rule", "must be quota, use or unallocated")
    cp.check_capacity(pools, teams)
    return replace(pf, pools=pools, teams=teams, projects=projects,
                   burst=pf.burst if burst is None else bool(burst), idle_rule=idle_rule or pf.idle_rule)


class ClusterModel:
    """A portfolio's projects estimated once; :meth:`run` schedules them under any what-if knobs."""

    def __init__(self, pf: cp.Portfolio):
        self.portfolio = pf
        self.estimates = {n: cj.estimate_project(pf, n) for n in pf.projects}
        self.jobs = cj.project_jobs(pf, self.estimates)
        cj.check_fits(pf, self.jobs)
        n = len(self.jobs.gpus)
        self._npred = np.array([len(p or ()) for p in self.jobs.pred], dtype=np.int64)
        succ: list = [[] for _ in range(n)]
        for k, preds in enumerate(self.jobs.pred):
            for q in preds or ():
                succ[q].append(k)
        self._succ_ptr = np.zeros(n + 1, dtype=np.int64)
        self._succ_ptr[1:] = np.cumsum([len(s) for s in succ])
        self._succ_idx = np.array([k for s in succ for k in s], dtype=np.int64)

    def run(self, pf: cp.Portfolio | None = None, **knobs) -> "ClusterResult":
        """Schedule under ``pf`` (the model's portfolio with other knobs) or under :func:`what_if` knobs."""
        pf = pf or self.portfolio
        if knobs:
            pf = what_if(pf, **knobs)
        if list(pf.projects) != list(self.portfolio.projects):
            raise ScenarioError("projects", "a what-if may change scheduling knobs, not the projects")
        cj.check_fits(pf, self.jobs)
        args = self.kernel_inputs(pf)
        out, seg, cnt = ck.simulate(*args)
        return ClusterResult(pf, self.jobs, out, seg, args)

    def kernel_inputs(self, pf: cp.Portfolio) -> tuple:
        """The scheduler's flat arrays for a portfolio (docs: costcore.cluster.kernel.simulate)."""
        jt = self.jobs
        teams, pools = list(pf.teams), list(pf.pools)
        npool = len(pools)
        n = len(jt.gpus)
        cq_pool = np.tile(np.arange(npool, dtype=np.int64), len(teams))
        cq_nominal = np.array([pf.teams[t].quota_gpus[p] for t in teams for p in pools], dtype=np.int64)
        cq_limit = np.array([pf.pools[p].gpus if pf.teams[t].borrowing_limit_gpus[p] is None
                             else pf.teams[t].borrowing_limit_gpus[p] for t in teams for p in pools], dtype=np.int64)
        pool_cap = np.array([pf.pools[p].gpus for p in pools], dtype=np.int64)
        burst_cap = np.array([pf.pools[p].burst_max_gpus for p in pools], dtype=np.int64)
        names = list(pf.projects)
        prio = np.array([pf.project_priority(names[k]) for k in jt.project], dtype=np.int64)
        jf = np.empty((n, 5))
        jf[:, ck.F_WORK] = jt.work_h
        jf[:, ck.F_READY0] = jt.start_h
        jf[:, ck.F_CKPT] = jt.ckpt_h
        jf[:, ck.F_RESTART] = jt.restart_h
        jf[:, ck.F_LATEST] = cj.latest_starts(pf, jt)
        ji = np.empty((n, 3), dtype=np.int64)
        ji[:, ck.J_GPUS] = jt.gpus
        ji[:, ck.J_PRIO] = prio
        ji[:, ck.J_CQ] = jt.team * npool + jt.pool
        return (jf, ji, self._npred, self._succ_ptr, self._succ_idx, cq_pool, cq_nominal, cq_limit, pool_cap,
                burst_cap, bool(pf.burst))


@dataclass
class ClusterResult:
    """One schedule of a portfolio and everything read from it (hours inside, days in the tables)."""
    portfolio: cp.Portfolio
    jobs: cj.JobTable
    out: np.ndarray        # (jobs, kernel.OUT_COLS)
    segments: np.ndarray   # (segments, kernel.SEG_COLS)
    inputs: tuple          # what the kernel was given

    # -- time and GPU-hours ---------------------------------------------------------------------
    @cached_property
    def finished(self) -> np.ndarray:
        return np.isfinite(self.out[:, ck.O_FINISH])

    @cached_property
    def horizon_h(self) -> float:
        """The portfolio's horizon, or longer when a job ends after it (the pools are paid until then), h."""
        ends = self.out[self.finished, ck.O_FINISH]
        return max(self.portfolio.horizon_days * rules.HOURS_PER_DAY, float(ends.max()) if len(ends) else 0.0)

    @cached_property
    def reserved_gpu_hours(self) -> np.ndarray:
        """Per job: GPU-hours held on its reserved pool (work kept, work lost, restarts)."""
        o = self.out
        return self.jobs.gpus * (o[:, ck.O_KEPT] + o[:, ck.O_LOST] + o[:, ck.O_RRES])

    @cached_property
    def burst_gpu_hours(self) -> np.ndarray:
        return self.jobs.gpus * (self.out[:, ck.O_BURST] + self.out[:, ck.O_RBURST])

    @cached_property
    def lost_gpu_hours(self) -> np.ndarray:
        """Per job: GPU-hours redone after preemptions (work since the last checkpoint) plus restarts."""
        o = self.out
        return self.jobs.gpus * (o[:, ck.O_LOST] + o[:, ck.O_RRES] + o[:, ck.O_RBURST])

    @cached_property
    def pool_capacity_gpu_hours(self) -> np.ndarray:
        return np.array([p.gpus for p in self.portfolio.pools.values()], dtype=np.float64) * self.horizon_h

    @cached_property
    def pool_used_gpu_hours(self) -> np.ndarray:
        """Reserved GPU-hours held on each pool, summed over the run segments (not the job totals)."""
        s = self.segments
        res = s[:, 3] != ck.KIND_BURST
        j = s[res, 0].astype(np.int64)
        used = self.jobs.gpus[j] * (s[res, 2] - s[res, 1])
        return np.bincount(self.jobs.pool[j], weights=used, minlength=len(self.portfolio.pools))

    @cached_property
    def idle_gpu_hours_by_pool(self) -> np.ndarray:
        return self.pool_capacity_gpu_hours - self.pool_used_gpu_hours

    @property
    def idle_gpu_hours(self) -> float:
        return float(self.idle_gpu_hours_by_pool.sum())

    @property
    def utilization(self) -> float:
        """Reserved GPU-hours held / reserved GPU-hours paid for, over the horizon."""
        cap = float(self.pool_capacity_gpu_hours.sum())
        return float(self.pool_used_gpu_hours.sum()) / cap if cap > 0 else 0.0

    # -- money -------------------------------------------------------------------------------------
    @cached_property
    def job_usd(self) -> np.ndarray:
        """(jobs, RESOURCE_TYPES without idle) $: the estimate's line items, GPU time split between the
        reserved and the burst price by the hours run on each, plus the preemption losses."""
        jt, o = self.jobs, self.out
        with np.errstate(invalid="ignore", divide="ignore"):
            f_res = np.where(jt.work_h > 0, o[:, ck.O_KEPT] / jt.work_h, 1.0)
            f_burst = np.where(jt.work_h > 0, o[:, ck.O_BURST] / jt.work_h, 0.0)
        items = np.where(_GPU_MASK, f_res[:, None] * jt.items_reserved + f_burst[:, None] * jt.items_burst,
                         jt.items_reserved)
        m = np.zeros((len(jt.gpus), len(RESOURCE_TYPES) - 1))
        for i in range(ek.NI):
            m[:, _ITEM_RES[i]] += items[:, i]
        pools = list(self.portfolio.pools.values())
        price_res = np.array([pools[p].reserved_usd_per_gpu_hour for p in jt.pool])
        price_burst = np.array([pools[p].burst_usd_per_gpu_hour for p in jt.pool])
        m[:, -1] = (gpu_time_usd(jt.gpus * (o[:, ck.O_LOST] + o[:, ck.O_RRES]), price_res)
                    + gpu_time_usd(jt.gpus * o[:, ck.O_RBURST], price_burst))
        return m

    @cached_property
    def reserved_usd_by_pool(self) -> np.ndarray:
        """What each reserved pool costs over the horizon: GPUs x hours x reserved price, $."""
        prices = np.array([p.reserved_usd_per_gpu_hour for p in self.portfolio.pools.values()])
        return gpu_time_usd(self.pool_capacity_gpu_hours, prices)

    @cached_property
    def idle_usd_by_pool(self) -> np.ndarray:
        prices = np.array([p.reserved_usd_per_gpu_hour for p in self.portfolio.pools.values()])
        return gpu_time_usd(self.idle_gpu_hours_by_pool, prices)

    @cached_property
    def total_usd(self) -> float:
        """The cluster's bill: the reserved pools for the horizon, burst GPU time, every non-GPU line item."""
        jt, o = self.jobs, self.out
        with np.errstate(invalid="ignore", divide="ignore"):
            f_burst = np.where(jt.work_h > 0, o[:, ck.O_BURST] / jt.work_h, 0.0)
        burst = (f_burst[:, None] * jt.items_burst[:, _GPU_MASK]).sum()
        pools = list(self.portfolio.pools.values())
        burst += gpu_time_usd(jt.gpus * o[:, ck.O_RBURST],
                              np.array([pools[p].burst_usd_per_gpu_hour for p in jt.pool])).sum()
        other = jt.items_reserved[:, ~_GPU_MASK].sum()
        return float(self.reserved_usd_by_pool.sum() + burst + other)

    @property
    def total_cents(self) -> int:
        return int(round(self.total_usd * 100))

    # -- attribution -------------------------------------------------------------------------------
    def _idle_rows(self, rule: str) -> list:
        """(team, pool, $) rows of each pool's idle dollars under an idle rule (UNALLOCATED: no team)."""
        pf = self.portfolio
        teams = list(pf.teams)
        rows = []
        used = np.zeros((len(teams), len(pf.pools)))
        np.add.at(used, (self.jobs.team, self.jobs.pool), self.reserved_gpu_hours)
        for p, pool in enumerate(pf.pools):
            idle = float(self.idle_usd_by_pool[p])
            quota = np.array([pf.teams[t].quota_gpus[pool] for t in teams])
            w = rules.idle_weights(rule, quota, used[:, p])
            if w.sum() <= 0:
                rows.append((UNALLOCATED, pool, idle))
                continue
            rows.extend((teams[t], pool, idle * float(w[t])) for t in range(len(teams)) if w[t] > 0)
        return rows

    def attribution_rows(self, rule: str | None = None) -> pd.DataFrame:
        """Every dollar of the cluster, one row per (project, run, stage, resource type) and per (team, pool)
        idle share, in whole cents that add up to :attr:`total_cents` (rules.largest_remainder_cents)."""
        rule = rule or self.portfolio.idle_rule
        pf, jt = self.portfolio, self.jobs
        names, teams, pools = list(pf.projects), list(pf.teams), list(pf.pools)
        m = self.job_usd
        jj, rr = np.nonzero(m > 0)
        proj = [names[k] for k in jt.project[jj]]
        frame = {
            "project": proj,
            "team": [teams[k] for k in jt.team[jj]],
            "model_version": [pf.projects[p].model_version for p in proj],
            "task_type": [pf.projects[p].task_type for p in proj],
            "stage": [jt.stage[k] for k in jj],
            "run": jt.run[jj] + 1,
            "resource": [RESOURCE_TYPES[r] for r in rr],
            "pool": [pools[k] for k in jt.pool[jj]],
            "job": jj.tolist(),
            "usd_float": m[jj, rr],
        }
        df = pd.DataFrame(frame)
        idle = pd.DataFrame([{"project": IDLE_PROJECT, "team": t, "model_version": "", "task_type": "",
                              "stage": "", "run": 0, "resource": IDLE, "pool": p, "job": -1, "usd_float": v}
                             for t, p, v in self._idle_rows(rule) if v > 0])
        df = pd.concat([df, idle], ignore_index=True) if len(idle) else df
        df["cents"] = rules.largest_remainder_cents(df["usd_float"].to_numpy(), self.total_cents)
        df["usd"] = df["cents"] / 100.0
        return df.drop(columns=["usd_float"])

    @cached_property
    def attribution(self) -> pd.DataFrame:
        return self.attribution_rows()

    def attribute(self, by, rule: str | None = None) -> pd.DataFrame:
        """Dollars grouped by one or more of ATTR_DIMS (cents exact), largest first."""
        by = [by] if isinstance(by, str) else list(by)
        for b in by:
            if b not in ATTR_DIMS:
                raise ScenarioError("by", f"must be among {', '.join(ATTR_DIMS)}", value=b)
        df = self.attribution if rule is None else self.attribution_rows(rule)
        g = df.groupby(by, as_index=False, sort=False)["cents"].sum()
        g["usd"] = g["cents"] / 100.0
        return g.sort_values("cents", ascending=False, kind="stable").reset_index(drop=True)

    # -- tables ------------------------------------------------------------------------------------
    @cached_property
    def job_table(self) -> pd.DataFrame:
        """One row per job: project, team, run of its sweep (from 1), stage, pool, GPUs, ready/start/finish
        days, hours, GPU-hours."""
        pf, jt, o = self.portfolio, self.jobs, self.out
        names, teams, pools = list(pf.projects), list(pf.teams), list(pf.pools)
        ready = jt.start_h.copy()
        for k, preds in enumerate(jt.pred):
            for q in preds or ():
                ready[k] = max(ready[k], o[q, ck.O_FINISH])
        running_h = o[:, ck.O_KEPT] + o[:, ck.O_LOST] + o[:, ck.O_RRES] + o[:, ck.O_BURST] + o[:, ck.O_RBURST]
        wait_h = o[:, ck.O_FINISH] - ready - running_h  # ready but not running
        return pd.DataFrame({
            "project": [names[k] for k in jt.project], "team": [teams[k] for k in jt.team],
            "run": jt.run + 1, "stage": jt.stage, "pool": [pools[k] for k in jt.pool], "gpus": jt.gpus,
            "priority": self.inputs[1][:, ck.J_PRIO], "ready_day": ready / 24.0,
            "start_day": o[:, ck.O_FIRST] / 24.0, "finish_day": o[:, ck.O_FINISH] / 24.0,
            "wait_days": np.where(wait_h > 1e-9, wait_h, 0.0) / 24.0,  # float dust below a microsecond is 0
            "gpu_hours": self.reserved_gpu_hours + self.burst_gpu_hours, "burst_gpu_hours": self.burst_gpu_hours,
            "preempted_gpu_hours": jt.gpus * o[:, ck.O_INTR], "lost_gpu_hours": self.lost_gpu_hours,
            "preemptions": o[:, ck.O_NPRE].astype(np.int64),
        })

    @cached_property
    def project_table(self) -> pd.DataFrame:
        """One row per project: team, runs, start, finish and wait days (a sweep's: its longest-waiting run's),
        deadline met or at risk, GPU-hours, $."""
        pf, jt = self.portfolio, self.jobs
        j = self.job_table
        pi, n = jt.project, len(pf.projects)

        def total(col):
            return np.bincount(pi, weights=j[col].to_numpy(dtype=np.float64), minlength=n)
        runs = np.array([p.runs for p in pf.projects.values()], dtype=np.int64)
        chain = np.concatenate([[0], np.cumsum(runs)[:-1]])[pi] + jt.run  # one index per (project, run)
        run_wait = np.bincount(chain, weights=j["wait_days"].to_numpy(dtype=np.float64), minlength=int(runs.sum()))
        wait = np.zeros(n)
        np.maximum.at(wait, np.repeat(np.arange(n), runs), run_wait)
        start = np.full(n, np.inf)
        np.minimum.at(start, pi, np.nan_to_num(j["start_day"].to_numpy(), nan=np.inf))
        fin = j["finish_day"].to_numpy()
        finish = np.full(n, -np.inf)
        np.maximum.at(finish, pi, np.nan_to_num(fin, nan=-np.inf))
        unfinished = np.bincount(pi, weights=np.isnan(fin).astype(np.float64), minlength=n) > 0
        finish = np.where(unfinished | ~np.isfinite(finish), np.nan, finish)
        start = np.where(np.isfinite(start), start, np.nan)
        attr = self.attribution
        own = attr["job"].to_numpy() >= 0
        cents = np.bincount(jt.project[attr["job"].to_numpy()[own]], weights=attr["cents"].to_numpy()[own],
                            minlength=n)
        dl = np.array([np.nan if p.deadline_day is None else p.deadline_day for p in pf.projects.values()])
        with np.errstate(invalid="ignore"):
            met = np.where(np.isnan(dl), True, finish <= dl) & ~unfinished
        return pd.DataFrame({
            "project": list(pf.projects), "team": [p.team for p in pf.projects.values()], "runs": runs,
            "start_day": start, "finish_day": finish, "wait_days": wait,
            "gpu_hours": total("gpu_hours"), "burst_gpu_hours": total("burst_gpu_hours"),
            "preempted_gpu_hours": total("preempted_gpu_hours"), "lost_gpu_hours": total("lost_gpu_hours"),
            "preemptions": total("preemptions").astype(np.int64), "unfinished": unfinished,
            "usd": np.round(cents) / 100.0, "deadline_day": dl, "deadline_met": met,
            "at_risk": met & (dl - finish < rules.AT_RISK_DAYS),
            "model_version": [p.model_version for p in pf.projects.values()],
            "task_type": [p.task_type for p in pf.projects.values()],
            "priority": [pf.project_priority(n_) for n_ in pf.projects],
        })

    @cached_property
    def team_table(self) -> pd.DataFrame:
        """One row per team: $ (its projects and its idle share), GPU-hours, quota (GPUs over all pools)."""
        pf = self.portfolio
        usd = self.attribution.groupby("team")["cents"].sum()
        gh = self.job_table.groupby("team")["gpu_hours"].sum()
        rows = [{"team": t, "usd": float(usd.get(t, 0)) / 100.0, "gpu_hours": float(gh.get(t, 0.0)),
                 "quota_gpus": int(sum(v for v in pf.teams[t].quota_gpus.values())),
                 "priority": pf.teams[t].priority} for t in pf.teams]
        return pd.DataFrame(rows)

    def usage_over_time(self, step_days: float = 1.0) -> pd.DataFrame:
        """Average GPUs each team held on each pool per step (reserved and burst), with its quota there."""
        pf, jt, s = self.portfolio, self.jobs, self.segments
        edges = np.arange(0.0, self.horizon_h + step_days * 24.0, step_days * 24.0)
        j = s[:, 0].astype(np.int64)
        burst = s[:, 3] == ck.KIND_BURST
        cols: dict = {"day": [], "team": [], "pool": [], "gpus": [], "burst_gpus": [], "quota_gpus": []}
        steps = len(edges) - 1
        for ti, team in enumerate(pf.teams):
            for pi, pool in enumerate(pf.pools):
                sel = (jt.team[j] == ti) & (jt.pool[j] == pi)
                for key, mask in (("gpus", sel & ~burst), ("burst_gpus", sel & burst)):
                    cols[key].append(_held_per_step(s[mask, 1], s[mask, 2], jt.gpus[j[mask]], edges)
                                     / (step_days * 24.0))
                cols["day"].append(edges[:-1] / 24.0)
                cols["team"] += [team] * steps
                cols["pool"] += [pool] * steps
                cols["quota_gpus"].append(np.full(steps, pf.teams[team].quota_gpus[pool]))
        for key in ("day", "gpus", "burst_gpus", "quota_gpus"):
            cols[key] = np.concatenate(cols[key])
        return pd.DataFrame(cols)

    @cached_property
    def segment_table(self) -> pd.DataFrame:
        """One row per run segment: project, team, run of its sweep (from 1), stage, GPUs, start and end day,
        how it ended."""
        pf, jt, s = self.portfolio, self.jobs, self.segments
        names, teams = list(pf.projects), list(pf.teams)
        j = s[:, 0].astype(np.int64)
        kind = s[:, 3].astype(np.int64)
        words = np.array(["Ran to the end", "Preempted", "Burst (on-demand or spot)"])
        return pd.DataFrame({"project": [names[k] for k in jt.project[j]], "team": [teams[k] for k in jt.team[j]],
                             "run": jt.run[j] + 1, "stage": [jt.stage[k] for k in j], "gpus": jt.gpus[j],
                             "start_day": s[:, 1] / 24.0,
                             "end_day": s[:, 2] / 24.0, "how": words[kind], "preempted": kind == ck.KIND_PREEMPTED})

    @cached_property
    def summary(self) -> dict:
        """Headline figures: total, idle GPU-hours and their cost, utilization, burst, deadlines."""
        pt = self.project_table
        projects_usd = float(self.attribution.loc[self.attribution["job"] >= 0, "cents"].sum()) / 100.0
        return {"total_usd": self.total_usd, "idle_gpu_hours": self.idle_gpu_hours,
                "idle_usd": float(self.idle_usd_by_pool.sum()), "utilization": self.utilization,
                "horizon_days": self.horizon_h / 24.0, "projects_usd": projects_usd,
                "burst_gpu_hours": float(self.burst_gpu_hours.sum()),
                "lost_gpu_hours": float(self.lost_gpu_hours.sum()),
                "deadlines_missed": int((~pt["deadline_met"]).sum()), "deadlines_at_risk": int(pt["at_risk"].sum()),
                "unfinished_projects": int(pt["unfinished"].sum())}

    def to_json(self) -> dict:
        """The CLI's JSON (issue 18's contract): totals, then per project and per team."""
        pt, tt = self.project_table, self.team_table

        def num(v):
            return None if v is None or (isinstance(v, float) and not math.isfinite(v)) else float(v)
        projects = {r.project: {"team": r.team, "start_day": num(r.start_day), "finish_day": num(r.finish_day),
                                "wait_days": num(r.wait_days), "deadline_met": bool(r.deadline_met),
                                "gpu_hours": float(r.gpu_hours), "preempted_gpu_hours": float(r.preempted_gpu_hours),
                                "usd": float(r.usd)} for r in pt.itertuples()}
        teams = {r.team: {"usd": float(r.usd), "gpu_hours": float(r.gpu_hours), "quota_gpus": int(r.quota_gpus)}
                 for r in tt.itertuples()}
        return {"total_usd": self.total_cents / 100.0, "idle_gpu_hours": self.idle_gpu_hours,
                "utilization": self.utilization, "projects": projects, "teams": teams, "warnings": self.warnings}

    @property
    def warnings(self) -> list[str]:
        """Sentences on a schedule that is not what the portfolio says: work that runs past its horizon (1,000 runs
        of 16 GPUs on a 64-GPU pool ran to day 2,650 of a 91-day quarter, under "every deadline met")."""
        horizon = float(self.portfolio.horizon_days)
        end = self.horizon_h / rules.HOURS_PER_DAY
        if end <= horizon * (1.0 + 1e-9):
            return []
        return [f"The work runs to day {end:,.0f}, past the {horizon:,.0f}-day horizon: the pools are paid until "
                f"then ({end / horizon:,.3g} times the horizon); give them more GPUs, or plan fewer runs."]

    def period_start(self) -> _dt.datetime:
        return _dt.datetime.fromisoformat(self.portfolio.start_date).replace(tzinfo=_dt.timezone.utc)


def _held_per_step(t0: np.ndarray, t1: np.ndarray, gpus: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """GPU-hours held in each [edges[k], edges[k+1]) by segments [t0, t1) of ``gpus`` GPUs each."""
    if len(t0) == 0:
        return np.zeros(len(edges) - 1)
    times = np.concatenate([t0, t1])
    slope = np.concatenate([gpus, -gpus]).astype(np.float64)
    order = np.argsort(times, kind="stable")
    times, slope = times[order], np.cumsum(slope[order])
    area = np.concatenate([[0.0], np.cumsum(slope[:-1] * np.diff(times))])
    at = np.interp(edges, times, area, left=0.0, right=area[-1])
    return np.diff(at)
