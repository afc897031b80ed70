"""Properties of the job-layout model (costcore/engine/layout.py) that must hold for any job.

Each compares the kernel with itself on two scenarios that differ in one thing, with the plan
pinned where the property is about one plan (so the search cannot pick a different one):

* recompute: full recompute costs more step time than selective, selective more than none,
  and holds the opposite order of activation memory;
* GPUs: doubling a stage's GPUs never more than doubles its productive GPU-hours (at worst the
  extra GPUs idle, billed, when the global batch cannot use them);
* memory per GPU: never grows with more data parallelism (ZeRO), more tensor parallelism, and
  never shrinks with a longer sequence or a bigger micro-batch;
* a 70B model in BF16 (full fine-tuning or LoRA) never fits one GPU with less usable memory
  than its 140 GB of weights, whatever the plan; QLoRA makes it fit one 80 GB GPU.
"""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import SETTINGS

import costcore
from costcore.scenario.schema import CATALOG

GPUS = ["h100-80gb", "a100-80gb", "a100-40gb", "l40s", "mi300x", "h200"]


@st.composite
def pinned_pretraining(draw, gpus=None):
    """A pre-training stage with every plan field pinned (tp, pp, cp, ep, micro-batch, ZeRO, recompute, interleave)."""
    params_b = draw(st.floats(0.1, 70.0), label="params_b")
    gpu = draw(st.sampled_from(GPUS), label="gpu")
    tp = draw(st.sampled_from([1, 2, 4, 8]), label="tp")
    pp = draw(st.sampled_from([1, 2, 4]), label="pp")
    g = gpus if gpus is not None else tp * pp * draw(st.sampled_from([1, 2, 4, 8]), label="dp")
    stage = {"tokens_b": 10, "seq_len": draw(st.sampled_from([512, 2048, 8192]), label="seq_len"),
             "tp": tp, "pp": pp, "cp": 1, "ep": 1, "interleave": 1,
             "micro_batch": draw(st.sampled_from([1, 2, 4]), label="micro_batch"),
             "zero_stage": draw(st.sampled_from([0, 1, 2, 3]), label="zero_stage"),
             "recompute": draw(st.sampled_from(["none", "selective", "full"]), label="recompute")}
    return {"model": {"params_b": params_b}, "hardware": {"gpu": gpu, "num_gpus": g}, "stages": {"pretrain": stage}}


def _plan(scn: dict, **stage) -> dict:
    s = dict(scn, stages={"pretrain": {**scn["stages"]["pretrain"], **stage}})
    return costcore.estimate(s).plan("pretrain")


@SETTINGS
@given(pinned_pretraining())
def test_recompute_order_of_time_and_memory(scn):
    none, sel, full = (_plan(scn, recompute=m) for m in ("none", "selective", "full"))
    assert (none["tp"], none["pp"], none["dp"]) == (sel["tp"], sel["pp"], sel["dp"]) == (full["tp"], full["pp"],
                                                                                        full["dp"])
    assert full["step_time_s"] > sel["step_time_s"] > none["step_time_s"]
    assert full["time_s"]["recompute"] > sel["time_s"]["recompute"] > none["time_s"]["recompute"] == 0.0
    act = [p["memory_gb"]["activations"] for p in (none, sel, full)]
    assert act[0] > act[1] > act[2] > 0.0


@SETTINGS
@given(st.data())
def test_doubling_gpus_never_more_than_doubles_productive_gpu_hours(data):
    method = data.draw(st.sampled_from(["full", "lora", "qlora"]), label="method")
    seq = data.draw(st.sampled_from([512, 2048, 8192]), label="seq_len")
    scn = {"model": {"params_b": data.draw(st.floats(0.1, 100.0), label="params_b")},
           "hardware": {"gpu": data.draw(st.sampled_from(GPUS), label="gpu")},
           "stages": {"sft": {"method": method, "samples": 10000, "tokens_per_sample": seq, "seq_len": seq}}}
    g = 2 ** data.draw(st.integers(0, 11), label="log2 gpus")
    a = costcore.estimate(dict(scn, hardware={**scn["hardware"], "num_gpus": g}))
    b = costcore.estimate(dict(scn, hardware={**scn["hardware"], "num_gpus": 2 * g}))
    if a.stat("sft", "fits") and b.stat("sft", "fits"):
        assert b.stat("sft", "productive_gpu_hours") <= 2.0 * a.stat("sft", "productive_gpu_hours") * (1 + 1e-9)
    if a.stat("sft", "fits"):  # more GPUs never stop a stage that fits from fitting
        assert b.stat("sft", "fits") == 1.0


@SETTINGS
@given(pinned_pretraining(gpus=4096), st.sampled_from([1, 2, 4, 8, 16]))
def test_memory_never_grows_with_data_or_tensor_parallelism(scn, dp):
    st0 = scn["stages"]["pretrain"]
    base = _plan(scn, dp=dp, global_batch=4096)
    more_dp = _plan(scn, dp=2 * dp, global_batch=4096)
    assert more_dp["memory_per_gpu_gb"] <= base["memory_per_gpu_gb"] * (1 + 1e-12)
    if st0["zero_stage"] > 0:
        assert more_dp["memory_gb"]["optimizer"] < base["memory_gb"]["optimizer"]
    if st0["tp"] < 8:
        more_tp = _plan(scn, dp=dp, global_batch=4096, tp=2 * st0["tp"])
        assert more_tp["memory_per_gpu_gb"] <= base["memory_per_gpu_gb"] * (1 + 1e-12)


@SETTINGS
@given(pinned_pretraining())
def test_memory_never_shrinks_with_longer_sequences_or_bigger_micro_batches(scn):
    st0 = scn["stages"]["pretrain"]
    base = _plan(scn, global_batch=512)  # sequences per step held fixed
    longer = _plan(scn, global_batch=512, seq_len=2 * st0["seq_len"])
    bigger = _plan(scn, global_batch=512, micro_batch=2 * st0["micro_batch"])
    assert longer["memory_per_gpu_gb"] >= base["memory_per_gpu_gb"] * (1 - 1e-12)
    assert bigger["memory_per_gpu_gb"] >= base["memory_per_gpu_gb"] * (1 - 1e-12)
    assert longer["memory_gb"]["activations"] > base["memory_gb"]["activations"]


SMALL_GPUS = [g for g, spec in CATALOG.items() if spec["memory_gb"] * 0.9 < 140.0]


@SETTINGS
@given(st.sampled_from(SMALL_GPUS), st.sampled_from(["full", "lora"]), st.sampled_from([0, 1, 2, 3]),
       st.sampled_from(["none", "selective", "full"]), st.sampled_from([128, 2048]))
def test_bf16_70b_never_fits_one_gpu_smaller_than_its_weights(gpu, method, zero, recompute, seq):
    res = costcore.estimate({"model": {"params_b": 70}, "hardware": {"gpu": gpu, "num_gpus": 1},
                             "stages": {"sft": {"method": method, "zero_stage": zero, "recompute": recompute,
                                                "seq_len": seq, "tokens_per_sample": seq, "micro_batch": 1}}})
    assert res.stat("sft", "fits") == 0.0
    assert res.plan("sft")["memory_gb"]["weights"] >= 140.0 * (1 - 1e-12)  # the whole bf16 model on the one GPU
    assert res.stat("sft", "min_gpus") != 1


@pytest.mark.parametrize("gpu", ["h100-80gb", "a100-80gb"])
def test_qlora_70b_fits_one_80gb_gpu(gpu):
    res = costcore.estimate({"model": {"params_b": 70}, "hardware": {"gpu": gpu, "num_gpus": 1},
                             "stages": {"sft": {"method": "qlora", "seq_len": 2048, "tokens_per_sample": 2048}}})
    assert res.stat("sft", "fits") == 1.0 and res.stat("sft", "min_gpus") == 1
    mem = res.plan("sft")["memory_gb"]  # the NF4 base, plus the adapters' BF16 weights (2 bytes, as their gradients)
    assert mem["weights"] - mem["grads"] == pytest.approx(70e9 * 4.127 / 8 / 1e9, rel=1e-12)
