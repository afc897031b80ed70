"""The scheduler: jobs on pools of GPUs with Kueue's quota, borrowing and preemption rules (numba).

Semantics (docs/cluster.md says where this differs from Kueue):

* each team has one ClusterQueue per pool with a nominal quota and a borrowing limit; a pool's
  ClusterQueues form one cohort whose capacity is the pool;
* pending workloads are ordered by priority (high first), then by the time they became ready, then
  by job index (Kueue ``BestEffortFIFO``: a workload that does not fit does not block the next);
* a workload is admitted when its ClusterQueue stays within its nominal quota and the pool has the
  GPUs, or, borrowing, within nominal + borrowing limit with GPUs unused in the cohort;
* a workload that would fit within its nominal quota may preempt (``withinClusterQueue:
  LowerPriority``) lower-priority workloads of its own ClusterQueue and reclaim
  (``reclaimWithinCohort: LowerPriority``) quota lent to borrowing ClusterQueues from their
  lower-priority workloads; candidates go borrowing ClusterQueues first, lowest priority first,
  most recently started first, and those not needed are put back (Kueue's minimal set); a workload
  that needs to borrow never preempts (``borrowWithinCohort: Never``);
* a preempted job goes back to its queue with its original time, keeps the work up to its last
  checkpoint (``lost_work_hours``) and pays a restart when it runs again;
* with burst on, a job still waiting at its latest start (``rules.latest_start_hours``) runs on the
  pool's burst market (on-demand or spot, at most ``burst_cap`` GPUs at once; never preempted).

Times are hours from the start of the horizon. The slow, obvious twin is tests/cluster_reference.py.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from costcore.engine import config  # noqa: F401  (numba's cache folder)

# job float inputs (columns of jf)
F_WORK, F_READY0, F_CKPT, F_RESTART, F_LATEST = range(5)
# job int inputs (columns of ji)
J_GPUS, J_PRIO, J_CQ = range(3)
# per-job state: floats
S_READY, S_QUEUE, S_START, S_LEFT, S_SEGR, S_OWED = range(6)
NSF = 6
# per-job state: ints (state: 0 waiting, 1 pending, 2 running reserved, 3 running burst, 4 done)
T_STATE, T_NPRED = range(2)
# per-job outputs (columns of out)
OUT_COLS = ("first_start_h", "finish_h", "kept_reserved_h", "burst_h", "lost_h", "restart_reserved_h",
            "restart_burst_h", "preemptions", "interrupted_h")
(O_FIRST, O_FINISH, O_KEPT, O_BURST, O_LOST, O_RRES, O_RBURST, O_NPRE, O_INTR) = range(len(OUT_COLS))
# segments (rows of seg): job, start h, end h, kind (0 reserved done, 1 preempted, 2 burst), restart h, preemptor
SEG_COLS = ("job", "start_h", "end_h", "kind", "restart_h", "preempted_by")
KIND_DONE, KIND_PREEMPTED, KIND_BURST = 0, 1, 2
# counters (cnt): pending, running, waiting, segments, iterations
C_PEND, C_RUN, C_WAIT, C_SEG, C_ITER = range(5)


@njit(cache=True)
def lost_work_hours(useful_h: float, ckpt_interval_h: float) -> float:
    """Hours of work a preempted job redoes: the progress since its last checkpoint, h.

    Checkpoints are written every ``ckpt_interval_h`` hours of useful run time since the job last
    (re)started (the stage's interval, kernel stat ``ckpt_interval_h``: its own setting or the
    Young/Daly optimum); a stage with no checkpoint (interval 0, evaluation) loses everything since
    it started. Kueue and Slurm evict a preempted job's pods; the work since the last checkpoint is
    what a restart from that checkpoint repeats.
    """
    if useful_h <= 0.0:
        return 0.0
    if ckpt_interval_h <= 0.0:
        return useful_h
    return useful_h - ckpt_interval_h * math.floor(useful_h / ckpt_interval_h)


@njit(cache=True)
def _record(seg, cnt, j, t0, t1, kind, restart_h, by):
    """Append one run segment, doubling the table when full; returns the (maybe new) table."""
    k = cnt[C_SEG]
    if k >= seg.shape[0]:
        bigger = np.empty((seg.shape[0] * 2 + 16, seg.shape[1]))
        bigger[:k] = seg[:k]
        seg = bigger
    seg[k, 0] = j
    seg[k, 1] = t0
    seg[k, 2] = t1
    seg[k, 3] = kind
    seg[k, 4] = restart_h
    seg[k, 5] = by
    cnt[C_SEG] = k + 1
    return seg


@njit(cache=True)
def _insert_pending(pend, cnt, j, ji, sf):
    """Insert job j into the pending list, kept sorted by (priority desc, queue time, index)."""
    n = cnt[C_PEND]
    k = n
    while k > 0:
        o = pend[k - 1]
        before = ji[o, J_PRIO] > ji[j, J_PRIO] or (ji[o, J_PRIO] == ji[j, J_PRIO] and (
            sf[o, S_QUEUE] < sf[j, S_QUEUE] or (sf[o, S_QUEUE] == sf[j, S_QUEUE] and o < j)))
        if before:
            break
        pend[k] = o
        k -= 1
    pend[k] = j
    cnt[C_PEND] = n + 1


@njit(cache=True)
def _drop(lst, cnt, c, k):
    """Remove position k from a list (order kept)."""
    for i in range(k, cnt[c] - 1):
        lst[i] = lst[i + 1]
    cnt[c] -= 1


@njit(cache=True)
def _start(j, t, burst, ji, sf, st, out, run, cnt, cq_used, pool_used, burst_used, cq_pool):
    """Job j starts a run segment at t on the reserved pool or on burst; a restart owed is paid first."""
    g = ji[j, J_GPUS]
    p = cq_pool[ji[j, J_CQ]]
    if burst:
        burst_used[p] += g
        st[j, T_STATE] = 3
    else:
        cq_used[ji[j, J_CQ]] += g
        pool_used[p] += g
        st[j, T_STATE] = 2
    sf[j, S_START] = t
    sf[j, S_SEGR] = sf[j, S_OWED]
    sf[j, S_OWED] = 0.0
    if not out[j, O_FIRST] <= t:
        out[j, O_FIRST] = t
    run[cnt[C_RUN]] = j
    cnt[C_RUN] += 1


@njit(cache=True)
def _evict(v, t, by, jf, ji, sf, st, out, run, cnt, cq_used, pool_used, cq_pool, seg):
    """Preempt reserved job v at t: keep the work up to its last checkpoint, owe a restart, requeue."""
    p_h = t - sf[v, S_START]
    r_spent = min(p_h, sf[v, S_SEGR])
    useful = p_h - r_spent
    lost = lost_work_hours(useful, jf[v, F_CKPT])
    kept = useful - lost
    out[v, O_KEPT] += kept
    out[v, O_LOST] += lost
    out[v, O_RRES] += r_spent
    out[v, O_NPRE] += 1.0
    out[v, O_INTR] += p_h
    sf[v, S_LEFT] = max(sf[v, S_LEFT] - kept, 0.0)
    sf[v, S_OWED] = jf[v, F_RESTART]
    g = ji[v, J_GPUS]
    cq_used[ji[v, J_CQ]] -= g
    pool_used[cq_pool[ji[v, J_CQ]]] -= g
    st[v, T_STATE] = 1
    for k in range(cnt[C_RUN]):
        if run[k] == v:
            _drop(run, cnt, C_RUN, k)
            break
    return _record(seg, cnt, v, sf[v, S_START], t, KIND_PREEMPTED, sf[v, S_SEGR], by)


@njit(cache=True)
def _candidates(j, ji, sf, st, run, cnt, cq_used, cq_nominal, cq_pool):
    """Running reserved jobs j may preempt, in Kueue's order: borrowing other queues first, then
    lowest priority, then most recently started (then the higher job index)."""
    c = ji[j, J_CQ]
    p = cq_pool[c]
    m = 0
    cand = np.empty(cnt[C_RUN], dtype=np.int64)
    for k in range(cnt[C_RUN]):
        v = run[k]
        cv = ji[v, J_CQ]
        if st[v, T_STATE] != 2 or cq_pool[cv] != p or ji[v, J_PRIO] >= ji[j, J_PRIO]:
            continue
        if cv == c or cq_used[cv] > cq_nominal[cv]:
            cand[m] = v
            m += 1
    cand = cand[:m]
    k1 = np.empty(m)
    k2 = np.empty(m)
    k3 = np.empty(m)
    for i in range(m):
        v = cand[i]
        k1[i] = 0.0 if ji[v, J_CQ] != c else 1.0
        k2[i] = ji[v, J_PRIO]
        k3[i] = -sf[v, S_START]
    order = np.argsort(-cand, kind="mergesort")  # ties: the later job first
    order = order[np.argsort(k3[order], kind="mergesort")]
    order = order[np.argsort(k2[order], kind="mergesort")]
    order = order[np.argsort(k1[order], kind="mergesort")]
    return cand[order]


@njit(cache=True)
def _victims(j, cand, ji, cq_used, cq_nominal, pool_cap, pool_used, cq_pool):
    """The fewest candidates (greedy in order, then put back those not needed) whose eviction lets j
    run within its nominal quota; empty when no set does."""
    c = ji[j, J_CQ]
    p = cq_pool[c]
    g = ji[j, J_GPUS]
    u = cq_used.copy()
    free = pool_cap[p] - pool_used[p]
    chosen = np.zeros(len(cand), dtype=np.bool_)
    fits = False
    for i in range(len(cand)):
        v = cand[i]
        cv = ji[v, J_CQ]
        if cv != c and u[cv] <= cq_nominal[cv]:  # no longer borrowing: its quota is its own
            continue
        chosen[i] = True
        u[cv] -= ji[v, J_GPUS]
        free += ji[v, J_GPUS]
        if u[c] + g <= cq_nominal[c] and free >= g:
            fits = True
            break
    if not fits:
        return cand[:0]
    for i in range(len(cand) - 1, -1, -1):
        if chosen[i]:
            v = cand[i]
            u[ji[v, J_CQ]] += ji[v, J_GPUS]
            free -= ji[v, J_GPUS]
            if u[c] + g <= cq_nominal[c] and free >= g:
                chosen[i] = False  # not needed: it keeps running
            else:
                u[ji[v, J_CQ]] -= ji[v, J_GPUS]
                free += ji[v, J_GPUS]
    return cand[chosen]


@njit(cache=True)
def _try_admit(j, t, jf, ji, sf, st, out, pend, run, cnt, cq_used, pool_used, burst_used, cq_pool, cq_nominal,
               cq_limit, pool_cap, burst_cap, burst_on, min_prio, seg):
    """Admit pending job j at t if Kueue would (quota, borrowing, preemption), else burst it if due.
    Returns (0 not admitted, 1 admitted, 2 admitted after preempting; segment table)."""
    c = ji[j, J_CQ]
    p = cq_pool[c]
    g = ji[j, J_GPUS]
    free = pool_cap[p] - pool_used[p]
    if free >= g and cq_used[c] + g <= cq_nominal[c] + cq_limit[c]:
        _start(j, t, False, ji, sf, st, out, run, cnt, cq_used, pool_used, burst_used, cq_pool)
        return 1, seg
    if g <= cq_nominal[c] and ji[j, J_PRIO] > min_prio[p]:
        cand = _candidates(j, ji, sf, st, run, cnt, cq_used, cq_nominal, cq_pool)
        vic = _victims(j, cand, ji, cq_used, cq_nominal, pool_cap, pool_used, cq_pool) if len(cand) else cand
        if len(vic):
            for v in vic:
                seg = _evict(v, t, j, jf, ji, sf, st, out, run, cnt, cq_used, pool_used, cq_pool, seg)
                _insert_pending(pend, cnt, v, ji, sf)
            _start(j, t, False, ji, sf, st, out, run, cnt, cq_used, pool_used, burst_used, cq_pool)
            return 2, seg
    if burst_on and t >= jf[j, F_LATEST] and burst_used[p] + g <= burst_cap[p]:
        _start(j, t, True, ji, sf, st, out, run, cnt, cq_used, pool_used, burst_used, cq_pool)
        return 1, seg
    return 0, seg


@njit(cache=True)
def _min_running_prio(ji, st, run, cnt, cq_pool, npool):
    """Lowest priority running on each pool's reserved GPUs (+inf where none): who could be preempted."""
    m = np.full(npool, np.inf)
    for k in range(cnt[C_RUN]):
        v = run[k]
        if st[v, T_STATE] == 2:
            p = cq_pool[ji[v, J_CQ]]
            m[p] = min(m[p], ji[v, J_PRIO])
    return m


@njit(cache=True)
def _admit_all(t, jf, ji, sf, st, out, pend, run, cnt, cq_used, pool_used, burst_used, cq_pool, cq_nominal,
               cq_limit, pool_cap, burst_cap, burst_on, seg):
    """Scheduling cycles at t: walk the pending list in order until a walk admits nothing; after an
    admission that preempted, walk again from the top (the freed GPUs go to the first in order)."""
    changed = True
    while changed:
        changed = False
        min_prio = _min_running_prio(ji, st, run, cnt, cq_pool, len(pool_cap))
        k = 0
        while k < cnt[C_PEND]:
            j = pend[k]
            ok, seg = _try_admit(j, t, jf, ji, sf, st, out, pend, run, cnt, cq_used, pool_used, burst_used,
                                 cq_pool, cq_nominal, cq_limit, pool_cap, burst_cap, burst_on, min_prio, seg)
            if ok:
                for i in range(k, cnt[C_PEND]):  # j is still at k: victims sort after it
                    if pend[i] == j:
                        _drop(pend, cnt, C_PEND, i)
                        break
                changed = True
                if ok == 2:
                    k = 0
                    min_prio = _min_running_prio(ji, st, run, cnt, cq_pool, len(pool_cap))
                else:
                    p = cq_pool[ji[j, J_CQ]]
                    min_prio[p] = min(min_prio[p], ji[j, J_PRIO])
            else:
                k += 1
    return seg


@njit(cache=True)
def _complete(t, ji, sf, st, out, run, wait, cnt, cq_used, pool_used, burst_used, cq_pool, succ_ptr, succ_idx,
              seg):
    """Jobs whose segment ends by t finish: release their GPUs; successors count one predecessor less."""
    for k in range(cnt[C_RUN] - 1, -1, -1):
        j = run[k]
        end = sf[j, S_START] + sf[j, S_SEGR] + sf[j, S_LEFT]
        if end > t:
            continue
        g = ji[j, J_GPUS]
        p = cq_pool[ji[j, J_CQ]]
        burst = st[j, T_STATE] == 3
        if burst:
            out[j, O_BURST] += sf[j, S_LEFT]
            out[j, O_RBURST] += sf[j, S_SEGR]
            burst_used[p] -= g
        else:
            out[j, O_KEPT] += sf[j, S_LEFT]
            out[j, O_RRES] += sf[j, S_SEGR]
            cq_used[ji[j, J_CQ]] -= g
            pool_used[p] -= g
        seg = _record(seg, cnt, j, sf[j, S_START], end, KIND_BURST if burst else KIND_DONE, sf[j, S_SEGR], -1)
        sf[j, S_LEFT] = 0.0
        st[j, T_STATE] = 4
        out[j, O_FINISH] = end
        _drop(run, cnt, C_RUN, k)
        for i in range(succ_ptr[j], succ_ptr[j + 1]):
            s = succ_idx[i]
            st[s, T_NPRED] -= 1
            sf[s, S_READY] = max(sf[s, S_READY], end)
            if st[s, T_NPRED] == 0:
                wait[cnt[C_WAIT]] = s
                cnt[C_WAIT] += 1
    return seg


@njit(cache=True)
def _arrive(t, ji, sf, st, pend, wait, cnt):
    """Jobs whose predecessors are done and whose ready time has come join the pending list."""
    for k in range(cnt[C_WAIT] - 1, -1, -1):
        j = wait[k]
        if sf[j, S_READY] <= t:
            st[j, T_STATE] = 1
            sf[j, S_QUEUE] = sf[j, S_READY]
            _insert_pending(pend, cnt, j, ji, sf)
            _drop(wait, cnt, C_WAIT, k)


@njit(cache=True)
def _next_time(t, jf, ji, sf, pend, run, wait, cnt, cq_pool, burst_cap, burst_on):
    """The next event after (or at) t: a job ready, a segment ending, a pending job's latest start."""
    tn = math.inf
    for k in range(cnt[C_WAIT]):
        tn = min(tn, sf[wait[k], S_READY])
    for k in range(cnt[C_RUN]):
        j = run[k]
        tn = min(tn, sf[j, S_START] + sf[j, S_SEGR] + sf[j, S_LEFT])
    if burst_on:
        for k in range(cnt[C_PEND]):
            j = pend[k]
            if jf[j, F_LATEST] > t and burst_cap[cq_pool[ji[j, J_CQ]]] >= ji[j, J_GPUS]:
                tn = min(tn, jf[j, F_LATEST])
    return tn


@njit(cache=True)
def simulate(jf, ji, npred, succ_ptr, succ_idx, cq_pool, cq_nominal, cq_limit, pool_cap, burst_cap, burst_on):
    """Run every job to its end. Inputs: jf (n, F_*) float hours, ji (n, J_*) ints, npred (n,) predecessor
    counts, successors in CSR (succ_ptr, succ_idx), per ClusterQueue its pool, nominal quota and borrowing
    limit (GPUs), per pool its GPUs and burst GPUs. Returns (out (n, OUT_COLS), segments (m, SEG_COLS),
    counters); a job that never ran has NaN start and finish."""
    n = jf.shape[0]
    sf = np.zeros((n, NSF))
    st = np.zeros((n, 2), dtype=np.int64)
    out = np.zeros((n, len(OUT_COLS)))
    out[:, O_FIRST] = np.nan
    out[:, O_FINISH] = np.nan
    pend = np.empty(n, dtype=np.int64)
    run = np.empty(n, dtype=np.int64)
    wait = np.empty(n, dtype=np.int64)
    cnt = np.zeros(5, dtype=np.int64)
    seg = np.empty((2 * n + 16, len(SEG_COLS)))
    cq_used = np.zeros(len(cq_pool), dtype=np.int64)
    pool_used = np.zeros(len(pool_cap), dtype=np.int64)
    burst_used = np.zeros(len(pool_cap), dtype=np.int64)
    for j in range(n):
        sf[j, S_LEFT] = jf[j, F_WORK]
        sf[j, S_READY] = jf[j, F_READY0]
        st[j, T_NPRED] = npred[j]
        if npred[j] == 0:
            wait[cnt[C_WAIT]] = j
            cnt[C_WAIT] += 1
    t = 0.0
    while cnt[C_ITER] < 64 * n + 1024:
        cnt[C_ITER] += 1
        tn = _next_time(t, jf, ji, sf, pend, run, wait, cnt, cq_pool, burst_cap, burst_on)
        if tn == math.inf:
            break
        t = max(t, tn)
        seg = _complete(t, ji, sf, st, out, run, wait, cnt, cq_used, pool_used, burst_used, cq_pool, succ_ptr,
                        succ_idx, seg)
        _arrive(t, ji, sf, st, pend, wait, cnt)
        seg = _admit_all(t, jf, ji, sf, st, out, pend, run, cnt, cq_used, pool_used, burst_used, cq_pool,
                         cq_nominal, cq_limit, pool_cap, burst_cap, burst_on, seg)
    return out, seg[:cnt[C_SEG]].copy(), cnt
