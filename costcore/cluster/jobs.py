"""Projects into jobs: each enabled stage of a project's scenario is one job, in stage order.

A job's GPUs (stat ``num_gpus``), its run hours (billed ``gpu_hours`` / GPUs, so the job holds exactly
the GPU-hours the estimate bills), its checkpoint interval (stat ``ckpt_interval_h``) and every dollar
come from ``costcore.api.estimate`` of the project's scenario placed on its pool; a second estimate at
the pool's burst price prices the GPU time of a job that bursts. Estimates are cached by scenario
content: pool size, quotas, priorities and burst on/off never change them, so a what-if only re-runs
the scheduler.

A project with ``runs: N`` is a sweep (seeds, hyperparameters, ablations): N chains of the same jobs, which
may run side by side. Its first run carries every dollar of the estimate; each further run carries only the
line items that a run repeats (:data:`RUN_REPEATS`: GPU time, hidden GPU time, checkpoints, transfers, human
evaluation), not what the project buys or staffs once (data acquisition, cleaning, labeling and synthesis,
licences, media preprocessing, dataset storage, team, platform).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np

from costcore import api
from costcore.engine import kernel as ek
from costcore.errors import ScenarioError
from costcore.scenario import schema
from costcore.cluster import rules
from costcore.cluster.portfolio import Portfolio

# line items that are GPU time (productive + hidden): their sum is the stat gpu_usd = gpu_hours x price
GPU_ITEMS = np.array([ek.I_COMPUTE, ek.I_HID_FAIL, ek.I_HID_STALL, ek.I_HID_IDLE, ek.I_HID_EXP, ek.I_HID_FAILED])
# line items a further run of a sweep repeats: neither fixed (kernel ITEM_FIXED) nor data a repeat reuses
# (ITEM_REUSED) nor one-off set-up work (profile "setup")
RUN_REPEATS = np.array([(1.0 - ek.ITEM_FIXED[i]) * (1.0 - ek.ITEM_REUSED[i]) * (ek.ITEM_PROFILE[i] != "setup")
                        for i in range(ek.NI)])
_CACHE: dict = {}
_CACHE_MAX = 4096


def estimate_cached(scn: dict) -> api.Result:
    """``api.estimate`` of a validated scenario, once per distinct scenario content (process-wide)."""
    key = json.dumps(scn, sort_keys=True, default=str)
    res = _CACHE.get(key)
    if res is None:
        if len(_CACHE) >= _CACHE_MAX:
            _CACHE.clear()
        res = _CACHE[key] = api.estimate(scn)
    return res


@dataclass
class ProjectEstimate:
    """A project's estimate at the pool's reserved price and at its burst price."""
    reserved: api.Result
    burst: api.Result
    restart_h: float


def estimate_project(pf: Portfolio, name: str) -> ProjectEstimate:
    p = pf.projects[name]
    scn = p.scenario
    res = estimate_cached(scn)
    if not res.feasible:
        raise ScenarioError(f"projects.{name}", "cannot run: " + res.infeasible[0])
    pool = pf.pools[p.pool]
    burst = res
    if pool.burst_usd_per_gpu_hour != pool.reserved_usd_per_gpu_hour:
        burst = estimate_cached(schema.validate(schema.set_path(scn, "hardware.usd_per_gpu_hour",
                                                                 pool.burst_usd_per_gpu_hour)))
    return ProjectEstimate(res, burst, float(schema.effective_value(scn, "reliability.restart_hours")))


@dataclass
class JobTable:
    """Flat arrays, one row per job (``project``/``stage`` name the row); dollars per line item."""
    project: np.ndarray      # project index
    stage: list
    team: np.ndarray         # team index
    pool: np.ndarray         # pool index
    gpus: np.ndarray         # GPUs, int64
    work_h: np.ndarray       # run hours on its GPUs
    ckpt_h: np.ndarray       # checkpoint interval, h (0: none)
    restart_h: np.ndarray    # hours to restart after a preemption
    start_h: np.ndarray      # earliest start (its project's start_day), h
    items_reserved: np.ndarray  # (n, line items) $ at the reserved price
    items_burst: np.ndarray     # (n, line items) $ at the burst price
    pred: list               # predecessor job indices per job
    run: np.ndarray = None   # run of its project's sweep (0: the first), int64


def project_jobs(pf: Portfolio, estimates: dict) -> JobTable:
    """The job table of every project, run by run, stages in order; the first stage of every run waits
    for every run of the ``after`` projects."""
    names = list(pf.projects)
    teams, pools = list(pf.teams), list(pf.pools)
    rows: dict = {k: [] for k in ("project", "run", "stage", "team", "pool", "gpus", "work_h", "ckpt_h",
                                  "restart_h", "start_h", "ir", "ib", "pred")}
    last: dict = {}
    firsts: dict = {}
    for pi, name in enumerate(names):
        p, e = pf.projects[name], estimates[name]
        for run in range(p.runs):
            k0 = len(rows["project"])
            _append_run(rows, pi, run, teams.index(p.team), pools.index(p.pool), p.start_day, e)
            if len(rows["project"]) > k0:
                firsts.setdefault(name, []).append(k0)
                last.setdefault(name, []).append(len(rows["project"]) - 1)
    for name, ks in firsts.items():  # the first job of each run waits for the `after` projects
        wait = [q for a in pf.projects[name].after for q in last.get(a, [])]
        for k in ks:
            rows["pred"][k] = list(wait)
    return JobTable(np.array(rows["project"], dtype=np.int64), rows["stage"], np.array(rows["team"], dtype=np.int64),
                    np.array(rows["pool"], dtype=np.int64), np.array(rows["gpus"], dtype=np.int64),
                    np.array(rows["work_h"]), np.array(rows["ckpt_h"]), np.array(rows["restart_h"]),
                    np.array(rows["start_h"]), np.array(rows["ir"]).reshape(-1, ek.NI),
                    np.array(rows["ib"]).reshape(-1, ek.NI), rows["pred"], np.array(rows["run"], dtype=np.int64))


def _append_run(rows: dict, pi: int, run: int, team: int, pool: int, start_day: float, e: ProjectEstimate) -> None:
    """One run's jobs, one per stage of the estimate, each after the one before."""
    res = e.reserved
    share = 1.0 if run == 0 else RUN_REPEATS
    prev = -1
    for s in res.stages:
        i = schema.STAGES.index(s)
        g = max(int(round(res.stats[i, ek.K_GPUS])), 1)
        k = len(rows["project"])
        for col, v in (("project", pi), ("run", run), ("stage", s), ("team", team), ("pool", pool), ("gpus", g),
                       ("work_h", float(res.stats[i, ek.K_GPU_H]) / g), ("ckpt_h", float(res.stats[i, ek.K_CKPT_INT])),
                       ("restart_h", e.restart_h), ("start_h", start_day * rules.HOURS_PER_DAY),
                       ("ir", res.items[i] * share), ("ib", e.burst.items[i] * share),
                       ("pred", [prev] if prev >= 0 else None)):
            rows[col].append(v)
        prev = k


def check_fits(pf: Portfolio, jt: JobTable) -> None:
    """Refuse a job no schedule can ever run: more GPUs than its pool, or than its team's nominal quota plus
    borrowing limit there (Kueue never admits such a workload)."""
    names, teams, pools = list(pf.projects), list(pf.teams), list(pf.pools)
    for k in range(len(jt.gpus)):
        g, pool = int(jt.gpus[k]), pf.pools[pools[jt.pool[k]]]
        team = pf.teams[teams[jt.team[k]]]
        cap = pool.gpus
        limit = team.borrowing_limit_gpus[pool.name]
        if limit is not None:
            cap = min(cap, team.quota_gpus[pool.name] + limit)
        if g > cap:
            why = (f"pool {pool.name} has {pool.gpus:,} GPUs" if cap == pool.gpus else
                   f"team {team.name} may hold at most {cap:,} there (quota + borrowing limit)")
            raise ScenarioError(f"projects.{names[jt.project[k]]}",
                                f"can never fit: its {schema.STAGE_LABELS[jt.stage[k]]} stage needs {g:,} GPUs on "
                                f"pool {pool.name} and {why}")


def latest_starts(pf: Portfolio, jt: JobTable) -> np.ndarray:
    """Each job's latest start that meets its project's deadline (rules.latest_start_hours, run by run of a
    sweep: every run must end by the deadline), h."""
    out = np.full(len(jt.gpus), math.inf)
    for pi, name in enumerate(pf.projects):
        d = pf.projects[name].deadline_day
        if d is None:
            continue
        for run in range(pf.projects[name].runs):
            idx = np.nonzero((jt.project == pi) & (jt.run == run))[0]
            if len(idx):
                out[idx] = rules.latest_start_hours(d * rules.HOURS_PER_DAY, jt.work_h[idx])
    return out
