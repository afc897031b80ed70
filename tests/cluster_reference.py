"""A slow, obvious scheduler with the same rules as costcore/cluster/kernel.py, for parity tests.

Not a test module. Plain Python objects and lists, no numba, written from docs/cluster.md's rules
(Kueue ClusterQueues in one cohort per pool) rather than from the kernel's code: every scheduling
cycle sorts the whole queue again, preemption candidates are sorted with a tuple key, and the
bookkeeping is by job attributes. ``simulate(*inputs)`` takes the kernel's inputs and returns
``(out, segments)`` in the kernel's layout.
"""
from __future__ import annotations

import math

import numpy as np

from costcore.cluster import kernel as ck


def lost_hours(useful, interval):
    """Progress since the last checkpoint: checkpoints every `interval` hours of useful time."""
    if useful <= 0:
        return 0.0
    if interval <= 0:
        return useful
    if interval > useful:  # no checkpoint written yet
        return useful
    return useful - interval * math.floor(useful / interval)


class Job:
    def __init__(self, k, jf, ji):
        self.k = k
        self.gpus = int(ji[k, ck.J_GPUS])
        self.prio = int(ji[k, ck.J_PRIO])
        self.cq = int(ji[k, ck.J_CQ])
        self.left = float(jf[k, ck.F_WORK])
        self.ready = float(jf[k, ck.F_READY0])
        self.ckpt = float(jf[k, ck.F_CKPT])
        self.restart = float(jf[k, ck.F_RESTART])
        self.latest = float(jf[k, ck.F_LATEST])
        self.state = "waiting"
        self.queue_time = math.nan
        self.seg_start = math.nan
        self.seg_restart = 0.0
        self.owed = 0.0
        self.row = np.zeros(len(ck.OUT_COLS))
        self.row[ck.O_FIRST] = math.nan
        self.row[ck.O_FINISH] = math.nan

    def end(self):
        return self.seg_start + self.seg_restart + self.left


class Cluster:
    def __init__(self, jf, ji, npred, succ_ptr, succ_idx, cq_pool, cq_nominal, cq_limit, pool_cap, burst_cap,
                 burst_on):
        self.jobs = [Job(k, jf, ji) for k in range(len(jf))]
        self.npred = [int(v) for v in npred]
        self.succ = [list(succ_idx[succ_ptr[k]:succ_ptr[k + 1]]) for k in range(len(jf))]
        self.cq_pool = [int(v) for v in cq_pool]
        self.nominal = [int(v) for v in cq_nominal]
        self.limit = [int(v) for v in cq_limit]
        self.cap = [int(v) for v in pool_cap]
        self.burst_cap = [int(v) for v in burst_cap]
        self.burst_on = bool(burst_on)
        self.segments = []

    # -- usage, recomputed from the jobs every time (slow on purpose) --
    def cq_usage(self, cq):
        return sum(j.gpus for j in self.jobs if j.state == "reserved" and j.cq == cq)

    def pool_usage(self, pool):
        return sum(j.gpus for j in self.jobs if j.state == "reserved" and self.cq_pool[j.cq] == pool)

    def burst_usage(self, pool):
        return sum(j.gpus for j in self.jobs if j.state == "burst" and self.cq_pool[j.cq] == pool)

    def start(self, j, t, where):
        j.state = where
        j.seg_start = t
        j.seg_restart, j.owed = j.owed, 0.0
        if math.isnan(j.row[ck.O_FIRST]):
            j.row[ck.O_FIRST] = t

    def evict(self, v, t, by):
        ran = t - v.seg_start
        restart_spent = min(ran, v.seg_restart)
        useful = ran - restart_spent
        lost = lost_hours(useful, v.ckpt)
        v.row[ck.O_KEPT] += useful - lost
        v.row[ck.O_LOST] += lost
        v.row[ck.O_RRES] += restart_spent
        v.row[ck.O_NPRE] += 1
        v.row[ck.O_INTR] += ran
        v.left = max(v.left - (useful - lost), 0.0)
        v.owed = v.restart
        v.state = "pending"
        self.segments.append([v.k, v.seg_start, t, ck.KIND_PREEMPTED, v.seg_restart, by])

    def preemption_set(self, j):
        """Kueue's candidates in order, greedy until j fits within its nominal quota, then the minimal set."""
        pool = self.cq_pool[j.cq]
        usage = {c: self.cq_usage(c) for c in range(len(self.nominal))}
        cands = [v for v in self.jobs if v.state == "reserved" and self.cq_pool[v.cq] == pool and v.prio < j.prio
                 and (v.cq == j.cq or usage[v.cq] > self.nominal[v.cq])]
        cands.sort(key=lambda v: (0 if v.cq != j.cq else 1, v.prio, -v.seg_start, -v.k))
        free = self.cap[pool] - self.pool_usage(pool)

        def fits():
            return usage[j.cq] + j.gpus <= self.nominal[j.cq] and free >= j.gpus
        chosen = []
        for v in cands:
            if v.cq != j.cq and usage[v.cq] <= self.nominal[v.cq]:
                continue
            chosen.append(v)
            usage[v.cq] -= v.gpus
            free += v.gpus
            if fits():
                break
        else:
            return []
        for v in reversed(list(chosen)):
            usage[v.cq] += v.gpus
            free -= v.gpus
            if fits():
                chosen.remove(v)
            else:
                usage[v.cq] -= v.gpus
                free += v.gpus
        return chosen

    def admit(self, j, t):
        """'' (not admitted), 'plain' (quota or borrowing or burst) or 'preempted' (after evicting others)."""
        pool = self.cq_pool[j.cq]
        free = self.cap[pool] - self.pool_usage(pool)
        use = self.cq_usage(j.cq)
        if free >= j.gpus and use + j.gpus <= self.nominal[j.cq] + self.limit[j.cq]:
            self.start(j, t, "reserved")
            return "plain"
        if j.gpus <= self.nominal[j.cq]:
            victims = self.preemption_set(j)
            if victims:
                for v in victims:
                    self.evict(v, t, j.k)
                self.start(j, t, "reserved")
                return "preempted"
        if self.burst_on and t >= j.latest and self.burst_usage(pool) + j.gpus <= self.burst_cap[pool]:
            self.start(j, t, "burst")
            return "plain"
        return ""

    def cycle(self, t):
        """Walk the queue in order; after an admission that preempted, sort again and start from the top;
        walk again until a whole walk admits nothing."""
        progress = True
        while progress:
            progress = False
            queue = sorted((j for j in self.jobs if j.state == "pending"), key=lambda j: (-j.prio, j.queue_time, j.k))
            for j in queue:
                how = self.admit(j, t) if j.state == "pending" else ""
                if how:
                    progress = True
                if how == "preempted":
                    break

    def finish_due(self, t):
        for j in self.jobs:
            if j.state in ("reserved", "burst") and j.end() <= t:
                end = j.end()
                burst = j.state == "burst"
                j.row[ck.O_BURST if burst else ck.O_KEPT] += j.left
                j.row[ck.O_RBURST if burst else ck.O_RRES] += j.seg_restart
                self.segments.append([j.k, j.seg_start, end, ck.KIND_BURST if burst else ck.KIND_DONE,
                                      j.seg_restart, -1])
                j.left = 0.0
                j.state = "done"
                j.row[ck.O_FINISH] = end
                for s in self.succ[j.k]:
                    self.npred[s] -= 1
                    self.jobs[s].ready = max(self.jobs[s].ready, end)

    def next_time(self, t):
        times = [j.ready for j in self.jobs if j.state == "waiting" and self.npred[j.k] == 0]
        times += [j.end() for j in self.jobs if j.state in ("reserved", "burst")]
        if self.burst_on:
            times += [j.latest for j in self.jobs if j.state == "pending" and j.latest > t
                      and self.burst_cap[self.cq_pool[j.cq]] >= j.gpus]
        return min(times, default=math.inf)

    def run(self):
        t = 0.0
        for _ in range(64 * len(self.jobs) + 1024):
            tn = self.next_time(t)
            if tn == math.inf:
                break
            t = max(t, tn)
            self.finish_due(t)
            for j in self.jobs:
                if j.state == "waiting" and self.npred[j.k] == 0 and j.ready <= t:
                    j.state = "pending"
                    j.queue_time = j.ready
            self.cycle(t)
        out = np.array([j.row for j in self.jobs]).reshape(len(self.jobs), len(ck.OUT_COLS))
        return out, np.array(self.segments, dtype=float).reshape(-1, len(ck.SEG_COLS))


def simulate(*inputs):
    return Cluster(*inputs).run()


def one_team_portfolio(runs: int = 1, quota: int = 32, priority: str = "50") -> str:
    """A one-team, one-project portfolio YAML (16 GPUs of a 64-GPU H100 pool) for page and rule tests."""
    return f"""name: One small team
horizon_days: 91
start_date: '2026-01-05'
pools:
  h100: {{gpu: h100-80gb, nodes: 8, reserved_usd_per_gpu_hour: 2.1}}
teams:
  team_a: {{quota_gpus: {{h100: {quota}}}, priority: {priority}}}
projects:
  proj-1:
    team: team_a
    preset: llama2-7b-pretrain
    pool: h100
    set: {{stages.pretrain.tokens_b: 100, hardware.num_gpus: 16}}
    runs: {runs}
"""
