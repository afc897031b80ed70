"""The shared cluster's scheduler (costcore/cluster/kernel.py): hand-computed cases, the scheduling
rules as properties over random clusters, and parity with the slow reference (tests/cluster_reference.py).

The inputs are built directly as the kernel's flat arrays (no estimate), so each case is small and
every number in it can be checked by hand.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cluster_reference as ref
from costcore.cluster import kernel as ck


def inputs(jobs, cqs, pools, burst_on=False):
    """Kernel inputs from plain rows.

    jobs: dicts with gpus, work, cq and optional prio, ready, ckpt, restart, latest, after (job indices);
    cqs: (pool, nominal, limit); pools: (GPUs, burst GPUs).
    """
    n = len(jobs)
    jf = np.zeros((n, 5))
    ji = np.zeros((n, 3), dtype=np.int64)
    succ = [[] for _ in range(n)]
    npred = np.zeros(n, dtype=np.int64)
    for k, j in enumerate(jobs):
        jf[k] = (j["work"], j.get("ready", 0.0), j.get("ckpt", 0.0), j.get("restart", 0.0), j.get("latest", math.inf))
        ji[k] = (j["gpus"], j.get("prio", 0), j["cq"])
        for a in j.get("after", ()):
            succ[a].append(k)
            npred[k] += 1
    ptr = np.zeros(n + 1, dtype=np.int64)
    ptr[1:] = np.cumsum([len(s) for s in succ])
    idx = np.array([k for s in succ for k in s], dtype=np.int64)
    cq_pool = np.array([c[0] for c in cqs], dtype=np.int64)
    nominal = np.array([c[1] for c in cqs], dtype=np.int64)
    limit = np.array([c[2] for c in cqs], dtype=np.int64)
    cap = np.array([p[0] for p in pools], dtype=np.int64)
    bcap = np.array([p[1] for p in pools], dtype=np.int64)
    return jf, ji, npred, ptr, idx, cq_pool, nominal, limit, cap, bcap, burst_on


def run(args):
    out, seg, _ = ck.simulate(*args)
    return out, seg


# ---------------------------------------------------------------------------
# Small cases computed by hand
# ---------------------------------------------------------------------------
def test_a_borrowing_job_is_reclaimed_by_the_owner_and_loses_work_since_its_checkpoint():
    # pool of 8; team A (nominal 4, may borrow 4) runs an 8-GPU job from t=0; team B (nominal 4, higher
    # priority) submits a 4-GPU job at t=4: B reclaims its quota. A's job ran 4 h with a checkpoint every
    # 3 h: it keeps 3 h, loses 1 h, restarts (0.5 h) when B is done at t=6 and ends at 6 + 0.5 + 7 = 13.5.
    args = inputs([dict(gpus=8, work=10.0, cq=0, prio=1, ckpt=3.0, restart=0.5),
                   dict(gpus=4, work=2.0, cq=1, prio=5, ready=4.0)],
                  cqs=[(0, 4, 4), (0, 4, 0)], pools=[(8, 0)])
    out, seg = run(args)
    a, b = out
    assert a[ck.O_FIRST] == 0.0 and a[ck.O_FINISH] == pytest.approx(13.5)
    assert a[ck.O_KEPT] == pytest.approx(10.0) and a[ck.O_LOST] == pytest.approx(1.0)
    assert a[ck.O_RRES] == pytest.approx(0.5) and a[ck.O_NPRE] == 1 and a[ck.O_INTR] == pytest.approx(4.0)
    assert b[ck.O_FIRST] == 4.0 and b[ck.O_FINISH] == 6.0 and b[ck.O_NPRE] == 0
    preempted = seg[seg[:, 3] == ck.KIND_PREEMPTED]
    assert preempted.tolist() == [[0.0, 0.0, 4.0, ck.KIND_PREEMPTED, 0.0, 1.0]]


def test_a_higher_priority_job_preempts_within_its_own_queue_and_a_job_without_checkpoints_loses_all():
    args = inputs([dict(gpus=4, work=10.0, cq=0, prio=0, ckpt=0.0, restart=0.25),
                   dict(gpus=4, work=1.0, cq=0, prio=9, ready=2.0)], cqs=[(0, 4, 0)], pools=[(4, 0)])
    out, _ = run(args)
    low, high = out
    assert high[ck.O_FIRST] == 2.0 and high[ck.O_FINISH] == 3.0
    assert low[ck.O_LOST] == pytest.approx(2.0) and low[ck.O_FINISH] == pytest.approx(3.0 + 0.25 + 10.0)


def test_equal_priority_never_preempts_and_a_borrower_does_not_preempt():
    # same priority: the second job waits; a job that needs to borrow (team 1 has no quota) never preempts
    args = inputs([dict(gpus=4, work=5.0, cq=0, prio=3), dict(gpus=4, work=1.0, cq=0, prio=3, ready=1.0),
                   dict(gpus=4, work=1.0, cq=1, prio=99, ready=1.0)], cqs=[(0, 4, 0), (0, 0, 4)], pools=[(4, 0)])
    out, seg = run(args)
    assert not (seg[:, 3] == ck.KIND_PREEMPTED).any()
    assert out[1, ck.O_FIRST] == 5.0 or out[2, ck.O_FIRST] == 5.0


def test_a_missed_deadline_and_the_burst_that_saves_it():
    # 4 GPUs; x holds them 0-10 h; y (5 h, deadline 12 h, so latest start 7 h) waits until 10 h and misses;
    # with 4 GPUs of burst it starts on burst at 7 h and ends at 12 h, on time.
    jobs = [dict(gpus=4, work=10.0, cq=0, prio=5), dict(gpus=4, work=5.0, cq=0, prio=1, latest=7.0)]
    out, _ = run(inputs(jobs, cqs=[(0, 4, 0)], pools=[(4, 4)], burst_on=False))
    assert out[1, ck.O_FINISH] == 15.0 and out[1, ck.O_BURST] == 0.0
    out, seg = run(inputs(jobs, cqs=[(0, 4, 0)], pools=[(4, 4)], burst_on=True))
    assert out[1, ck.O_FIRST] == 7.0 and out[1, ck.O_FINISH] == 12.0 and out[1, ck.O_BURST] == 5.0
    assert seg[seg[:, 0] == 1, 3].tolist() == [ck.KIND_BURST]


def test_stages_run_in_order():
    args = inputs([dict(gpus=2, work=3.0, cq=0, ready=1.0), dict(gpus=4, work=2.0, cq=0, after=[0])],
                  cqs=[(0, 4, 0)], pools=[(4, 0)])
    out, _ = run(args)
    assert out[0, ck.O_FINISH] == 4.0 and out[1, ck.O_FIRST] == 4.0 and out[1, ck.O_FINISH] == 6.0


# ---------------------------------------------------------------------------
# Random clusters: the rules hold, and the fast kernel equals the slow reference
# ---------------------------------------------------------------------------
@st.composite
def clusters(draw):
    npool = draw(st.integers(1, 2))
    pools = [(draw(st.integers(4, 24)), draw(st.sampled_from([0, 0, 4, 8]))) for _ in range(npool)]
    nteam = draw(st.integers(1, 3))
    cqs = []
    for p, (cap, _) in enumerate(pools):
        left = cap
        for _ in range(nteam):
            nominal = draw(st.integers(0, left))
            left -= nominal
            cqs.append((p, nominal, draw(st.sampled_from([0, 2, cap]))))
    jobs = []
    for _ in range(draw(st.integers(1, 6))):  # projects: chains of 1-3 jobs
        cq = draw(st.integers(0, len(cqs) - 1))
        p, nominal, limit = cqs[cq]
        most = min(pools[p][0], nominal + limit)
        if most < 1:
            continue
        ready = float(draw(st.integers(0, 8)))
        prio = draw(st.integers(0, 3))
        for k in range(draw(st.integers(1, 3))):
            jobs.append(dict(gpus=draw(st.integers(1, most)), work=draw(st.integers(1, 20)) / 2.0, cq=cq, prio=prio,
                             ready=ready, ckpt=float(draw(st.sampled_from([0, 1, 3]))),
                             restart=draw(st.sampled_from([0.0, 0.5])),
                             latest=draw(st.sampled_from([math.inf, 2.0, 6.0])),
                             after=[len(jobs) - 1] if k else []))
    if not jobs:
        jobs.append(dict(gpus=1, work=1.0, cq=0))
        cqs[0] = (cqs[0][0], max(cqs[0][1], 1), cqs[0][2])
    return inputs(jobs, cqs, pools, burst_on=draw(st.booleans()))


def _usage_at(seg, gpus, key, t):
    """GPUs held at time t by segments (start <= t < end), summed by key (an array per segment)."""
    live = (seg[:, 1] <= t) & (t < seg[:, 2])
    total = {}
    for k, g in zip(key[live], gpus[live]):
        total[k] = total.get(k, 0) + g
    return total


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_scheduling_rules_hold_and_the_reference_agrees(args):
    jf, ji, npred, ptr, idx, cq_pool, nominal, limit, cap, bcap, burst_on = args
    out, seg = run(args)
    r_out, r_seg = ref.simulate(*args)
    np.testing.assert_allclose(out, r_out, rtol=1e-12, atol=1e-9, equal_nan=True)
    np.testing.assert_allclose(seg[np.lexsort(seg[:, :3].T[::-1])], r_seg[np.lexsort(r_seg[:, :3].T[::-1])],
                               rtol=1e-12, atol=1e-9)
    assert np.isfinite(out[:, ck.O_FINISH]).all(), "every job fits somewhere, so every job ends"
    job = seg[:, 0].astype(int)
    g = ji[job, ck.J_GPUS]
    cq = ji[job, ck.J_CQ]
    reserved = seg[:, 3] != ck.KIND_BURST
    for t in np.unique(seg[:, 1]):
        by_cq = _usage_at(seg[reserved], g[reserved], cq[reserved], t)
        for c, used in by_cq.items():
            assert used <= nominal[c] + limit[c], "a team above its quota plus its borrowing limit"
        by_pool = _usage_at(seg[reserved], g[reserved], cq_pool[cq[reserved]], t)
        assert all(used <= cap[p] for p, used in by_pool.items())
        by_burst = _usage_at(seg[~reserved], g[~reserved], cq_pool[cq[~reserved]], t)
        assert all(used <= bcap[p] for p, used in by_burst.items())
    for s in seg[seg[:, 3] == ck.KIND_PREEMPTED]:
        victim, by = int(s[0]), int(s[5])
        assert ji[by, ck.J_PRIO] > ji[victim, ck.J_PRIO], "preempted by a job of no higher priority"
    for k in range(len(jf)):
        preds = [a for a in range(len(jf)) if k in idx[ptr[a]:ptr[a + 1]]]
        earliest = max([jf[k, ck.F_READY0]] + [out[a, ck.O_FINISH] for a in preds])
        assert out[k, ck.O_FIRST] >= earliest, "a job started before its predecessor ended"
    np.testing.assert_allclose(out[:, ck.O_KEPT] + out[:, ck.O_BURST], jf[:, ck.F_WORK], rtol=1e-9, atol=1e-9)
