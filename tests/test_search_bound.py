"""The plan search's branch and bound against the search that times every candidate.

``layout.search(..., prune=True)`` (what every estimate runs) skips timing a (tp, pp, cp, dp,
micro-batch) whose best possible rate (``layout._rate_bound``: micro-batches x compute, the TP and
CP collectives, the pinned recompute, the smallest point-to-point and bubble) cannot enter the kept
plans, and counts its fitting plans from separable parts (``layout._count_inner``). Neither may change
anything: the same plans in the same order with the same terms, and the same count of plans that fit,
as ``prune=False`` gives (every candidate through ``plan_terms``). Checked on every preset's training
stages and on random valid scenarios (MoE, pinned degrees, paged optimizers, offload, FP8 among them).
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from strategies import SETTINGS, scenarios

import costcore
from costcore import api
from costcore.engine import kernel, layout


def _layout_stages(res) -> list[str]:
    """The training stages: each searches its plans (a pinned MFU still takes its memory from the plan)."""
    return [s for s in res.stages if s != "eval"]


def _both(x: np.ndarray, stage: str, k: int):
    i = kernel.STAGES.index(stage)
    pruned, full = np.zeros((k, layout.NROW)), np.zeros((k, layout.NROW))
    n_pruned = kernel._stage_top(x, i, pruned, True)
    n_full = kernel._stage_top(x, i, full, False)
    return (n_pruned, pruned), (n_full, full)


def _check(res, k: int) -> None:
    for stage in _layout_stages(res):
        (n_p, top_p), (n_f, top_f) = _both(res.vector, stage, k)
        assert n_p == n_f, f"{stage}: {n_p} plans fit with the bound, {n_f} without"
        assert np.array_equal(top_p, top_f, equal_nan=True), f"{stage}: the kept plans differ"


@pytest.mark.parametrize("name", api.preset_names())
@pytest.mark.parametrize("k", [1, 10])
def test_every_preset_keeps_the_same_plans(name, k):
    res = costcore.estimate(costcore.load_preset(name))
    assert _layout_stages(res), "every preset trains something"
    _check(res, k)


@SETTINGS
@given(scenarios(stages=("pretrain", "cpt", "sft", "dpo", "rl")))
def test_random_scenarios_keep_the_same_plans(scn):
    res = costcore.estimate(scn)
    _check(res, 1)
    _check(res, 5)

