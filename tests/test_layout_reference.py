"""The job-layout search and the GPU minimum, against slow obvious references.

tests/test_reference_parity.py checks that the kernel times, sizes and costs the plan its search
chose exactly as tests/reference_model.py re-derives it. Here the choice itself is checked:

* the search: for tiny jobs every plan of the documented search space is enumerated in Python
  (reference_model.candidate_plans), timed and sized by the reference; the kernel's plan must be
  the fastest one that fits (most tokens per GPU-second, within 1e-9 relative), the count of
  plans that fit must be the kernel's ``plans_fitting``, and ``api.plans`` must list the
  reference's ranking;
* the GPU minimum: ``min_gpus`` is the true minimum, found by brute force -- estimate the stage
  on 1, 2, 3, ... GPUs and take the first count on which it fits.

Cases the core gets wrong are at the end, each an ``xfail(strict=True)`` with its reason.
"""
from __future__ import annotations

import math

import pytest
import reference_model as ref
from hypothesis import given
from hypothesis import strategies as st
from strategies import SETTINGS

import costcore
from costcore import api
from costcore.engine import layout

REL = 1e-9


def _sft(params_b=1.0, gpus=8, gpu="h100-80gb", model=None, hardware=None, **stage):
    s = {"method": "full", "samples": 1000, "tokens_per_sample": 2048, "seq_len": 2048, **stage}
    return {"model": {"params_b": params_b, **(model or {})}, "hardware": {"gpu": gpu, "num_gpus": gpus,
                                                                             **(hardware or {})},
            "stages": {"sft": s}}


def _stage(scn: dict) -> str:
    return next(s for s in ("pretrain", "cpt", "sft", "dpo", "rl") if s in scn["stages"])


def reference_ranking(scn: dict) -> tuple[list[tuple[float, dict]], dict]:
    """(tokens per GPU-second, plan) of every plan of the search space that fits, fastest first."""
    stage = _stage(scn)
    inputs: dict = {}
    ref.reference_estimate(scn, ref.kernel_plans(scn), inputs)
    model, hw, job = inputs[stage]
    ranked = []
    for plan in ref.candidate_plans(model, job, ref.stage_pins(scn, stage), layout):
        terms = ref.plan_step(model, hw, job, plan)
        if terms["memory"]["total"] <= hw["capacity"]:
            ranked.append((terms["tokens_per_gpu_s"], plan))
    ranked.sort(key=lambda r: -r[0])
    return ranked, ref.kernel_plans(scn)[stage]


TINY = {  # small jobs whose whole search space the reference enumerates in well under a second
    "1B full SFT on 8 H100": _sft(),
    "3B LoRA on 4 A100-40GB, GQA": _sft(3.0, 4, "a100-40gb", model={"kv_heads": 4}, method="lora"),
    "7B QLoRA on 1 L40S": _sft(7.0, 1, "l40s", method="qlora", seq_len=4096, tokens_per_sample=4096),
    "2B FP8, long context (CP) on 16 H100": _sft(2.0, 16, hardware={"precision": "fp8"}, seq_len=16384,
                                                 tokens_per_sample=16384),
    "MoE 8 experts top-2 on 16 H100 (EP)": _sft(8.0, 16, model={"active_params_b": 2.5, "experts": 8,
                                                                "experts_active": 2, "heads": 16}),
    "13B full on 6 A100-80GB (not a power of two), ZeRO pinned 3": _sft(13.0, 6, "a100-80gb", zero_stage=3),
    # ZeRO-3 shards a frozen base too, and gathers it twice a micro-batch over the network (timed since stop 51)
    "7B LoRA on 16 A100-40GB (2 nodes), ZeRO pinned 3": _sft(7.0, 16, "a100-40gb", method="lora", zero_stage=3),
    "MoE QLoRA on 16 H100, ZeRO pinned 3": _sft(8.0, 16, method="qlora", zero_stage=3,
                                                model={"active_params_b": 2.5, "experts": 8, "experts_active": 2,
                                                       "heads": 16}),
    "GELU, tiny global batch": _sft(1.5, 8, model={"gated": False}, global_batch=12),
    "DPO live reference (2 sequences per sample, a frozen copy)": {
        "model": {"params_b": 2.0}, "hardware": {"gpu": "h100-80gb", "num_gpus": 8},
        "stages": {"dpo": {"method": "full", "reference": "live", "pairs": 1000}}},
    "RL GRPO with a live reference and a reward model": {
        "model": {"params_b": 1.0}, "hardware": {"gpu": "h100-80gb", "num_gpus": 8},
        "stages": {"rl": {"method": "full", "reward": "model", "reference": "live", "steps": 10}}},
    "MoE 16 experts on 16 H800, schedule searched (1F1B or DualPipe)": {
        "model": {"params_b": 6.0, "active_params_b": 1.0, "experts": 16, "experts_active": 2, "heads": 16},
        "hardware": {"gpu": "h800", "num_gpus": 16},
        "stages": {"pretrain": {"tokens_b": 10, "seq_len": 2048, "global_batch": 64, "schedule": "search",
                                "micro_batch": 1}}},
    "7B pretraining on 32 H100, pp and micro-batch pinned": {
        "model": {"params_b": 7.0}, "hardware": {"gpu": "h100-80gb", "num_gpus": 32},
        "stages": {"pretrain": {"tokens_b": 10, "pp": 2, "micro_batch": 2}}},
}


@pytest.mark.parametrize("name", list(TINY))
def test_kernel_plan_is_the_fastest_that_fits(name):
    scn = TINY[name]
    stage = _stage(scn)
    ranked, chosen = reference_ranking(scn)
    res = costcore.estimate(scn)
    assert ranked, "no plan of the search space fits: pick a case that fits"
    assert res.stat(stage, "fits") == 1.0
    best_rate = ranked[0][0]
    assert res.stat(stage, "plan_tokens_per_gpu_s") == pytest.approx(best_rate, rel=REL), (chosen, ranked[0][1])
    # the kernel's plan is itself a plan of the search space that fits (not just as fast as one)
    fields = ("tp", "pp", "dp", "cp", "ep", "micro_batch", "recompute", "zero", "interleave", "sp", "dualpipe")
    plans = [tuple(p[k] for k in fields) for _, p in ranked]
    assert tuple(chosen[k] for k in fields) in plans
    assert res.stat(stage, "plans_fitting") == len(ranked)


@pytest.mark.parametrize("name", ["1B full SFT on 8 H100", "MoE 8 experts top-2 on 16 H100 (EP)",
                                  "DPO live reference (2 sequences per sample, a frozen copy)"])
def test_plans_lists_the_reference_ranking(name):
    """api.plans(top=8): the i-th plan listed runs at the reference's i-th best rate (ties in any order)."""
    scn = TINY[name]
    stage = _stage(scn)
    ranked, _ = reference_ranking(scn)
    inputs: dict = {}
    ref.reference_estimate(scn, ref.kernel_plans(scn), inputs)
    model, hw, job = inputs[stage]
    listed = api.plans(scn, stage, 8)
    assert len(listed) == min(8, len(ranked))
    for i, got in enumerate(listed):
        plan = {k: got[k] for k in ("tp", "pp", "dp", "cp", "ep", "micro_batch", "recompute", "zero", "interleave")}
        plan["sp"] = got["sequence_parallel"]
        terms = ref.plan_step(model, hw, job, {k: float(v) if k not in ("recompute", "sp") else v
                                               for k, v in plan.items()})
        assert got["fits"] and terms["fits"], (i, plan)
        assert terms["tokens_per_gpu_s"] == pytest.approx(ranked[i][0], rel=REL), (i, plan, ranked[i][1])
        assert got["step_time_s"] == pytest.approx(terms["step_time_s"], rel=REL)
        assert got["memory_per_gpu_gb"] == pytest.approx(terms["memory"]["total"] / 1e9, rel=REL)


# ---------------------------------------------------------------------------
# The GPU minimum, by brute force
# ---------------------------------------------------------------------------
MAX_BRUTE = 48  # GPU counts tried one by one


def fewest_gpus_that_fit(scn: dict, stage: str, limit: int = MAX_BRUTE) -> int:
    """The obvious way: estimate the stage on 1, 2, 3, ... GPUs; the first count on which it fits (0: none up to limit)."""
    for g in range(1, limit + 1):
        trial = dict(scn, hardware={**scn.get("hardware", {}), "num_gpus": g})
        if costcore.estimate(trial).stat(stage, "fits") == 1.0:
            return g
    return 0


@st.composite
def small_jobs(draw):
    """A training stage that fits on a few dozen GPUs at most, with a random subset of its plan pinned
    (tensor and pipeline degrees, context, micro-batch, recompute, ZeRO, sequence parallelism) and at
    times a small global batch: the cases that broke the old closed-form min_gpus."""
    method = draw(st.sampled_from(["full", "lora", "qlora"]), label="method")
    params_b = draw(st.floats(0.1, 30.0 if method == "full" else 70.0), label="params_b")
    gpu = draw(st.sampled_from(["h100-80gb", "a100-40gb", "l40s", "mi300x"]), label="gpu")
    seq = draw(st.sampled_from([512, 2048, 8192]), label="seq_len")
    stage = {"method": method, "samples": 100, "tokens_per_sample": seq, "seq_len": seq}
    for key, values in (("cp", [1, 2]), ("micro_batch", [1, 2, 4]), ("recompute", ["none", "selective", "full"]),
                        ("zero_stage", [0, 1, 2, 3]), ("tp", [1, 2, 4, 8]), ("pp", [1, 2, 3, 4]),
                        ("sequence_parallel", ["on", "off"]), ("global_batch", [1, 2, 3, 8]),
                        ("schedule", ["search"])):
        if draw(st.booleans(), label=f"pin {key}"):
            stage[key] = draw(st.sampled_from(values), label=key)
    return {"model": {"params_b": params_b}, "hardware": {"gpu": gpu, "num_gpus": 1}, "stages": {"sft": stage}}


@SETTINGS
@given(small_jobs())
def test_min_gpus_is_the_brute_force_minimum(scn):
    m = int(costcore.estimate(scn).stat("sft", "min_gpus"))
    if m == 0:  # "fits on no GPU count": not on any count tried either
        assert fewest_gpus_that_fit(scn, "sft", 16) == 0
        trial = dict(scn, hardware={**scn["hardware"], "num_gpus": 4096})
        assert costcore.estimate(trial).stat("sft", "fits") == 0.0
        return
    brute = fewest_gpus_that_fit(scn, "sft", min(m, MAX_BRUTE))
    if m <= MAX_BRUTE:
        assert brute == m, f"min_gpus {m}, but the stage first fits on {brute or 'none up to that'} GPUs"
    else:  # too many to walk: it fits on m and on no count up to MAX_BRUTE
        assert brute == 0
        trial = dict(scn, hardware={**scn["hardware"], "num_gpus": m})
        assert costcore.estimate(trial).stat("sft", "fits") == 1.0


@pytest.mark.parametrize("params_b,method,gpu", [(13, "full", "h100-80gb"), (70, "full", "h100-80gb"),
                                                 (34, "lora", "a100-40gb"), (7, "qlora", "l40s")])
def test_min_gpus_brute_force_examples(params_b, method, gpu):
    scn = _sft(params_b, 1, gpu, method=method)
    m = int(costcore.estimate(scn).stat("sft", "min_gpus"))
    assert 1 <= m <= MAX_BRUTE
    assert fewest_gpus_that_fit(scn, "sft", m) == m


# ---------------------------------------------------------------------------
# Core bugs these tests found (once strict xfails; each fixed)
# ---------------------------------------------------------------------------
def test_min_gpus_with_the_pipeline_pinned():
    scn = _sft(17.0, 1, method="full", tp=1, pp=4, recompute="selective", zero_stage=1)
    m = int(costcore.estimate(scn).stat("sft", "min_gpus"))
    assert fewest_gpus_that_fit(scn, "sft", m) == m


def test_min_gpus_with_one_replica():
    scn = _sft(17.0, 1, "l40s", method="full", tp=8, tokens_per_sample=512, seq_len=512)
    m = int(costcore.estimate(scn).stat("sft", "min_gpus"))
    assert fewest_gpus_that_fit(scn, "sft", m) == m


def test_min_gpus_with_sequence_parallelism_pinned_off():
    scn = {"model": {"params_b": 70}, "hardware": {"gpu": "h100-80gb", "num_gpus": 1},
           "stages": {"pretrain": {"tokens_b": 1, "seq_len": 16384, "tp": 8, "pp": 1, "recompute": "selective",
                                   "micro_batch": 1, "sequence_parallel": "off"}}}
    m = int(costcore.estimate(scn).stat("pretrain", "min_gpus"))
    assert m > 0
    trial = dict(scn, hardware={"gpu": "h100-80gb", "num_gpus": m})
    assert costcore.estimate(trial).stat("pretrain", "fits") == 1.0, f"min_gpus {m} does not fit"


def test_min_gpus_with_a_small_global_batch():
    scn = _sft(13.0, 1, method="full", global_batch=2, tp=1, pp=1, zero_stage=3, tokens_per_sample=1024,
               seq_len=1024)
    m = int(costcore.estimate(scn).stat("sft", "min_gpus"))
    fits = [costcore.estimate(dict(scn, hardware={"gpu": "h100-80gb", "num_gpus": g})).stat("sft", "fits")
            for g in (m, 2 * m, 64)] if m else [0.0]
    assert (m == 0 and not any(fits)) or fits[0] == 1.0, (m, fits)


def test_expert_parallel_pin_on_a_dense_model():
    res = costcore.estimate({"stages": {"pretrain": {"ep": 2}}})
    m = res.stat("pretrain", "min_gpus")
    assert res.stat("pretrain", "fits") == 1.0 or m == 0 or m > res.stat("pretrain", "num_gpus")


def test_plans_of_an_rl_stage_hold_what_the_estimate_holds():
    scn = TINY["RL GRPO with a live reference and a reward model"]
    chosen = api.estimate(scn).plan("rl")
    listed = api.plans(scn, "rl", 1)[0]
    assert listed["memory_gb"]["weights"] == pytest.approx(chosen["memory_gb"]["weights"], rel=REL)


def test_estimate_plan_breaks_communication_down():
    plan = api.estimate("pipeline-70b").plan("pretrain")
    assert plan["time_s"]["communication"] > 0
    assert sum(plan["communication_s"].values()) > 0


def test_fp8_on_a_gpu_without_fp8_changes_no_memory():
    def plan(precision):
        return api.estimate({"model": {"params_b": 7}, "hardware": {"gpu": "a100-80gb", "num_gpus": 8,
                                                                    "precision": precision},
                             "stages": {"pretrain": {"tokens_b": 1, "tp": 1, "pp": 1, "micro_batch": 1,
                                                     "recompute": "selective", "zero_stage": 3}}}).plan("pretrain")
    bf16, fp8 = plan("bf16"), plan("fp8")
    assert fp8["step_time_s"] == bf16["step_time_s"]
    assert fp8["memory_gb"]["activations"] == bf16["memory_gb"]["activations"]


def test_lora_all_targets_on_a_gelu_model_adapt_two_mlp_matrices():
    def trainable(gated):
        return api.estimate({"model": {"params_b": 1.5, "layers": 24, "hidden": 2048, "heads": 16, "ffn": 8192,
                                       "gated": gated},
                             "stages": {"sft": {"method": "lora", "lora_targets": "all", "lora_rank": 8}}}).stat(
            "sft", "trainable_params")
    attention = 24 * 8 * (4 * 2048 + 4 * 2048)  # q, k, v, o: r (d_in + d_out) each
    assert trainable(True) == attention + 24 * 3 * 8 * (2048 + 8192)
    assert trainable(False) == attention + 24 * 2 * 8 * (2048 + 8192)


def test_rl_plan_memory_is_the_sum_of_its_parts():
    plan = api.estimate("pipeline-70b").plan("rl")
    assert plan["memory_per_gpu_gb"] == pytest.approx(sum(plan["memory_gb"].values()), rel=REL)


def test_estimate_plan_is_the_first_listed_plan():
    """What the estimate chose is what `costcore plan` lists first (every key the two share but the
    per-collective breakdown and an RL plan's memory total, see the xfails above)."""
    for name in ("llama3-8b", "pipeline-70b"):
        res = api.estimate(name)
        for stage in ("pretrain", "cpt", "sft", "dpo", "rl"):
            if stage not in res.stages:
                continue
            a, b = res.plan(stage), api.plans(name, stage, 1)[0]
            for key in ("tp", "pp", "dp", "cp", "ep", "micro_batch", "recompute", "zero", "interleave",
                        "sequence_parallel", "micro_batches", "gpus_used", "fits"):
                assert a[key] == b[key], (name, stage, key)
            for key in ("step_time_s", "benchmark_mfu") + (("memory_per_gpu_gb",) if stage != "rl" else ()):
                assert a[key] == pytest.approx(b[key], rel=REL), (name, stage, key)  # rl: see the xfail below
            for group in ("memory_gb", "time_s"):
                for key in a[group]:
                    assert a[group][key] == pytest.approx(b[group][key], rel=REL, abs=1e-12), (name, stage, key)
            assert math.isclose(a["mfu"], b["mfu"], rel_tol=REL)
