"""Property-based tests of the cost core (hypothesis).

``scenarios()`` draws random *valid* scenarios: every field of
``costcore.scenario.schema.FIELDS`` may be set to a value inside its [lo, hi] range
(log-uniform for wide ranges, so 1e-3 and 1e6 are both likely), and a random
subset of the six stages is enabled (tests/strategies.py, shared with the
reference-parity and contract tests).
"""
from __future__ import annotations

import copy
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import costcore
from costcore.errors import ScenarioError
from costcore.engine.kernel import LINE_ITEMS, STATS
from costcore.scenario.schema import (MM_STAGES, BY_PATH, CATALOG_KEYS, FIELDS, RESOURCES, STAGE_KEYS, STAGES, Field,
                                      set_path, validate, with_size)
from strategies import (GLOBAL_FIELDS, NUMERIC_GLOBAL_FIELDS, PEFT_STAGES, SETTINGS, TRAIN_STAGES,  # noqa: F401
                        _log_uniform, field_values, scenarios)

def total(res) -> float:
    return float(res.stats[:, STATS.index("usd_total")].sum())


# ---------------------------------------------------------------------------
# Every line item is a non-negative finite number; the totals add up
# ---------------------------------------------------------------------------
@SETTINGS
@given(scenarios())
def test_items_non_negative_and_finite(scn):
    res = costcore.estimate(scn)
    assert np.all(np.isfinite(res.items)), res.items
    assert np.all(np.isfinite(res.stats)), res.stats
    bad = [(STAGES[i], LINE_ITEMS[j][0], res.items[i, j]) for i, j in zip(*np.nonzero(res.items < 0))]
    assert not bad
    for s in res.stages:
        for name in ("gpu_hours", "productive_gpu_hours", "wall_days", "memory_per_gpu_gb", "ckpt_count",
                     "months", "flops", "tokens"):
            assert res.stat(s, name) >= 0.0, (s, name)
        assert res.stat(s, "gpu_hours") >= res.stat(s, "productive_gpu_hours") * (1 - 1e-12)
    # disabled stages cost nothing
    for i, s in enumerate(STAGES):
        if s not in res.stages:
            assert not res.items[i].any() and not res.stats[i].any()


@SETTINGS
@given(scenarios())
def test_parts_sum_to_totals(scn):
    res = costcore.estimate(scn)
    d = res.to_dict()
    assert set(d["stages"]) == set(scn["stages"])
    stage_sum = 0.0
    for s, sd in d["stages"].items():
        assert math.isclose(sum(sd["usd"].values()), sd["usd_total"], rel_tol=1e-9, abs_tol=1e-9), s
        i = STAGES.index(s)
        assert math.isclose(float(res.items[i].sum()), sd["usd_total"], rel_tol=1e-9, abs_tol=1e-9), s
        assert sd["fixed_usd"] <= sd["usd_total"] * (1 + 1e-12) + 1e-9
        stage_sum += sd["usd_total"]
    assert math.isclose(stage_sum, d["total_usd"], rel_tol=1e-9, abs_tol=1e-9)
    assert math.isclose(sum(d["resources"].values()), d["total_usd"], rel_tol=1e-9, abs_tol=1e-9)
    assert math.isclose(d["fixed_usd"] + d["elastic_usd"], d["total_usd"], rel_tol=1e-9, abs_tol=1e-9)
    assert math.isclose(d["gpu_hours"], sum(sd["gpu_hours"] for sd in d["stages"].values()), rel_tol=1e-9,
                        abs_tol=1e-9)
    # the line-item table agrees with the per-stage totals
    table = res.line_items()
    assert len(table) == len(d["stages"]) * len(LINE_ITEMS)
    if len(table):
        by_stage = table.groupby("stage")["usd"].sum()
        for s, sd in d["stages"].items():
            assert math.isclose(by_stage[s], sd["usd_total"], rel_tol=1e-9, abs_tol=1e-9)
        by_res = table.groupby("resource")["usd"].sum()
        for r in RESOURCES:
            assert math.isclose(float(by_res.get(r, 0.0)), d["resources"][r], rel_tol=1e-9, abs_tol=1e-9)


# ---------------------------------------------------------------------------
# More work is never cheaper
# ---------------------------------------------------------------------------
SIZE_FIELDS = {  # stage: the field that sets how much it trains on
    "pretrain": "tokens_b",
    "cpt": "tokens_b",
    "sft": "samples",
    "dpo": "pairs",
    "rl": "steps",
}


@pytest.mark.parametrize("stage", list(SIZE_FIELDS))
@SETTINGS
@given(data=st.data())
def test_more_tokens_never_cheaper(stage, data):
    f = BY_PATH[f"stages.{stage}.{SIZE_FIELDS[stage]}"]
    scn = data.draw(scenarios(stages=[stage]), label="scenario")
    small = data.draw(field_values(f, hi=f.hi / 1.001), label="value")
    factor = data.draw(st.one_of(st.floats(1.001, 1.5), _log_uniform(1.5, 1e4)), label="factor")
    big = min(f.hi, small * factor)
    if f.kind == "int":
        big = max(small + 1, round(big))
        assume(big <= f.hi)
    a = costcore.estimate(set_path(scn, f"stages.{stage}.{SIZE_FIELDS[stage]}", small))
    b = costcore.estimate(set_path(scn, f"stages.{stage}.{SIZE_FIELDS[stage]}", big))
    assert total(b) >= total(a) * (1 - 1e-12), (small, big, total(a), total(b))
    assert b.stat(stage, "gpu_hours") >= a.stat(stage, "gpu_hours") * (1 - 1e-12)
    assert b.stat(stage, "productive_gpu_hours") > a.stat(stage, "productive_gpu_hours")


# ---------------------------------------------------------------------------
# LoRA never needs more compute than full fine-tuning (same data, same MFU)
# ---------------------------------------------------------------------------
@SETTINGS
@given(data=st.data())
def test_lora_never_more_compute_than_full(data):
    """Productive GPU-hours with LoRA <= full fine-tuning, MFU given explicitly.

    Holds when the adapters are small against the model (6 N_lora <= 2 N):
    shapes derived from params_b (no user layer/hidden/ffn), dense model,
    rank <= 64 (every derived shape has d >= 456, and N_lora / N = 23 r / (12 d)
    for all-linear targets). A rank close to d makes LoRA train more parameters
    than the model has, and then it is (correctly) more compute.
    """
    stages = data.draw(st.lists(st.sampled_from(PEFT_STAGES), min_size=1, unique=True), label="stages")
    scn = data.draw(scenarios(stages=stages), label="scenario")
    scn.pop("model", None)
    scn.setdefault("model", {})["params_b"] = data.draw(field_values(BY_PATH["model.params_b"]), label="N")
    mfu = data.draw(st.floats(0.05, 0.8), label="mfu")
    rank = data.draw(st.integers(1, 64), label="rank")
    for s in stages:
        scn["stages"][s].pop("tokens_per_gpu_s", None)
        scn["stages"][s]["mfu"] = mfu
        scn["stages"][s]["lora_rank"] = rank
        scn["stages"][s].pop("base_bits", None)  # a 4- or 8-bit base is not a full fine-tune (schema refuses it)
    full = copy.deepcopy(scn)
    lora = copy.deepcopy(scn)
    for s in stages:
        full["stages"][s]["method"] = "full"
        lora["stages"][s]["method"] = "lora"
    rf, rl = costcore.estimate(full), costcore.estimate(lora)
    for s in stages:
        assert rl.stat(s, "trainable_params_b") < rf.stat(s, "trainable_params_b")
        assert rl.stat(s, "productive_gpu_hours") <= rf.stat(s, "productive_gpu_hours") * (1 + 1e-12), s
        assert rl.stat(s, "flops") <= rf.stat(s, "flops") * (1 + 1e-12), s


# ---------------------------------------------------------------------------
# Keeping every checkpoint never stores less than keep-last-K
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("stage", TRAIN_STAGES)
@SETTINGS
@given(data=st.data())
def test_keep_all_never_cheaper_storage(stage, data):
    scn = data.draw(scenarios(stages=[stage]), label="scenario")
    k = data.draw(field_values(BY_PATH[f"stages.{stage}.keep_last"], lo=1), label="keep_last")
    m = data.draw(field_values(BY_PATH[f"stages.{stage}.milestone_every"]), label="milestone_every")
    some = costcore.estimate(set_path(set_path(scn, f"stages.{stage}.keep_last", k),
                                      f"stages.{stage}.milestone_every", m))
    every = costcore.estimate(set_path(set_path(scn, f"stages.{stage}.keep_last", 0),
                                       f"stages.{stage}.milestone_every", m))
    assert every.stage_usd(stage)["storage"] >= some.stage_usd(stage)["storage"] * (1 - 1e-12)
    assert every.stage_usd(stage)["network"] >= some.stage_usd(stage)["network"] * (1 - 1e-12)
    assert every.stat(stage, "storage_peak_gb") >= some.stat(stage, "storage_peak_gb") * (1 - 1e-12)
    # retention does not change the GPU time
    assert every.stat(stage, "gpu_hours") == some.stat(stage, "gpu_hours")


# ---------------------------------------------------------------------------
# batch(...) equals estimate(...) row by row
# ---------------------------------------------------------------------------
def _variable_paths(scn: dict) -> list[str]:
    # text (model.hf_config) cannot be a batch column; the media block's values are bound by scenario.media's
    # rules (tokens must fit the sequence, the resolution the encoder) that a batch column does not check
    paths = [f.path for f in NUMERIC_GLOBAL_FIELDS if not f.path.startswith("multimodal.")]
    for s in scn["stages"]:
        keys = STAGE_KEYS[s] - {"enabled", "base_bits"} - (MM_RULED if s in MM_STAGES else set())  # cross-field rules
        paths += [f"stages.{s}.{k}" for k in sorted(keys)]
    return paths


MM_RULED = {"items_per_sample", "text_tokens_per_sample", "tokens_per_item", "seq_len", "train_connector",
            "train_llm", "train_encoder", "resolution_px"}


def _as_scenario(scn: dict, path: str, value) -> dict:
    """The scenario one batch row stands for.

    A ``hardware.gpu`` column brings that GPU's catalog specs along (api.batch
    docstring), replacing specs the base scenario set explicitly. A ``model.params_b``
    column on a stated shape is a whole model of that size: its depth and a MoE's active
    parameters follow (api.batch docstring, schema.with_size); the caller applies it first,
    so a ``model.layers`` or ``model.active_params_b`` column of the same row wins.
    """
    if path == "model.params_b":
        return with_size(validate(scn), value)
    out = set_path(scn, path, value)
    if path == "hardware.gpu":
        for key in CATALOG_KEYS:
            out.get("hardware", {}).pop(key, None)
    return out


def _valid(scn: dict) -> bool:
    try:
        validate(scn)
    except ScenarioError:
        return False
    return True


@pytest.mark.parametrize("scn", [
    # the two draws hypothesis found (a one-layer 10M and an all-active 10M model moved to 1B), then two
    # shipped models' stated shapes
    {"model": {"params_b": 0.01, "active_params_b": 0.0, "layers": 1}, "stages": {"pretrain": {}}},
    {"model": {"params_b": 0.01, "active_params_b": 0.01, "layers": 0}, "stages": {"pretrain": {}}},
    {"model": {"name": "llama-3.1-8b"}, "stages": {"pretrain": {}, "sft": {}}},
    {"model": {"name": "mixtral-8x7b"}, "stages": {"cpt": {}}},
], ids=["one-layer-10m", "auto-shape-all-active", "llama-3.1-8b", "mixtral-8x7b"])
def test_batch_size_column_equals_estimate_of_that_whole_model(scn):
    """A size column on a stated shape equals the estimate of the model at that size by depth."""
    sizes = [1.0, 4.0, 9.0]
    full = costcore.batch(scn, {"model.params_b": sizes}, full=True)
    for i, p in enumerate(sizes):
        res = costcore.estimate(_as_scenario(scn, "model.params_b", p))
        np.testing.assert_allclose(full[i, :, :len(RESOURCES)], res.resource_matrix(), rtol=1e-12, atol=1e-9)


@SETTINGS
@given(data=st.data())
def test_batch_equals_estimate(data):
    scn = data.draw(scenarios(), label="scenario")
    paths = data.draw(st.lists(st.sampled_from(_variable_paths(scn)), min_size=1, max_size=3, unique=True),
                      label="paths")
    for first in ("model.params_b", "hardware.gpu"):  # a GPU's catalog values and a size's depth come first,
        if first in paths:                            # so explicit columns of the same row override them
            paths.remove(first)
            paths.insert(0, first)
    n = data.draw(st.integers(1, 12), label="rows")
    columns = {p: data.draw(st.lists(field_values(BY_PATH[p]), min_size=n, max_size=n), label=p) for p in paths}
    variants = []
    for i in range(n):
        variant = scn
        for p in paths:
            variant = _as_scenario(variant, p, columns[p][i])
        variants.append(variant)
    # a size column far from the base's moves a stated depth past the schema's 1,000 layers, or a MoE's
    # active share below its 0.01B floor: a batch row evaluates it, a scenario of that shape is refused;
    # such draws compare nothing
    assume(all(_valid(v) for v in variants))
    full = costcore.batch(scn, columns, full=True)
    totals = costcore.batch(scn, columns)
    assert full.shape == (n, len(STAGES), len(costcore.BATCH_COLUMNS))
    assert totals.shape == (n, len(STAGES))
    for i, variant in enumerate(variants):
        res = costcore.estimate(variant)
        want_res = res.resource_matrix()
        np.testing.assert_allclose(full[i, :, :len(RESOURCES)], want_res, rtol=1e-12, atol=1e-9)
        for j, name in enumerate(("gpu_hours", "productive_gpu_hours", "wall_days")):
            want = res.stats[:, STATS.index(name)]
            np.testing.assert_allclose(full[i, :, len(RESOURCES) + j], want, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(totals[i], res.stats[:, STATS.index("usd_total")], rtol=1e-12, atol=1e-9)


def test_hypothesis_constants_are_frozen_under_ci(tmp_path, monkeypatch):
    """Under CI the property tests draw from one pool of constants in every process (conftest's
    _freeze_hypothesis_constants): otherwise which tests ran before decides what is drawn."""
    import importlib
    import os

    import conftest
    if not os.environ.get("CI"):
        pytest.skip("the pool is frozen under CI=true only (local runs keep exploring)")
    assert conftest.HYPOTHESIS_CONSTANTS_FROZEN, "hypothesis's private providers._get_local_constants is gone"
    from hypothesis.internal.conjecture import providers
    before = set(providers._get_local_constants().floats)
    (tmp_path / "late_local_module.py").write_text("PROBE = 123456789.25\n")  # a local module loaded late
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.import_module("late_local_module")
    after = set(providers._get_local_constants().floats)
    assert after == before and 123456789.25 not in after
