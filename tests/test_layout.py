"""The job layout (costcore/engine/layout.py) as a user sees it through the API.

Properties the issue asks for: FP8 changes step time through the FP8 peak (only on GPUs that have
one) and memory through the activations' precision; MoE compute follows the active parameters while
memory follows the total; no plan uses more GPUs than the stage has; the minimum GPU count is the
true minimum (checked against a brute force over GPU counts); pinned plan fields stay pinned.
"""
import pytest

import costcore

from costcore import api
from costcore.scenario import schema


def _pre(params_b=13.0, gpu="h100-80gb", gpus=64, precision="bf16", seq=4096, model=None, **stage):
    m = {"params_b": params_b, **(model or {})}
    return {"model": m, "hardware": {"gpu": gpu, "num_gpus": gpus, "precision": precision},
            "stages": {"pretrain": {"tokens_b": 100, "seq_len": seq, **stage}}}


@pytest.mark.parametrize("gpu", ["h100-80gb", "h200", "b200", "mi300x"])
def test_fp8_is_faster_where_the_gpu_has_fp8(gpu):
    bf16 = api.estimate(_pre(gpu=gpu)).plan("pretrain")
    fp8 = api.estimate(_pre(gpu=gpu, precision="fp8")).plan("pretrain")
    assert fp8["step_time_s"] < 0.9 * bf16["step_time_s"]
    same = dict(tp=bf16["tp"], pp=bf16["pp"], micro_batch=bf16["micro_batch"], recompute=bf16["recompute"],
                zero_stage=bf16["zero"], cp=bf16["cp"])
    a = api.estimate(_pre(gpu=gpu, **same)).plan("pretrain")["memory_gb"]["activations"]
    b = api.estimate(_pre(gpu=gpu, precision="fp8", **same)).plan("pretrain")["memory_gb"]["activations"]
    assert b < a  # FP8 activations of the linear layers


def test_fp8_changes_nothing_on_a100():
    a = api.estimate(_pre(gpu="a100-80gb")).plan("pretrain")["step_time_s"]
    b = api.estimate(_pre(gpu="a100-80gb", precision="fp8", recompute="selective")).plan("pretrain")
    c = api.estimate(_pre(gpu="a100-80gb", recompute="selective")).plan("pretrain")
    assert b["step_time_s"] == pytest.approx(c["step_time_s"], rel=0.05)
    assert a > 0


def test_moe_compute_follows_active_memory_follows_total():
    moe = dict(model={"experts": 64, "experts_active": 4}, params_b=140, gpus=256)
    r_moe = api.estimate(_pre(**{**moe, "model": {**moe["model"], "active_params_b": 14}}))
    r_dense_active = api.estimate(_pre(params_b=14, gpus=256))
    r_dense_total = api.estimate(_pre(params_b=140, gpus=256))
    h_moe, h_act, h_tot = (r.stat("pretrain", "productive_gpu_hours") for r in (r_moe, r_dense_active, r_dense_total))
    assert h_moe < 0.5 * h_tot  # compute: far closer to the active size than to the total
    assert h_moe < 4 * h_act
    pinned = dict(tp=1, pp=1, zero_stage=3, recompute="full", micro_batch=1)
    m_moe = api.estimate(_pre(**{**moe, "model": {**moe["model"], "active_params_b": 14}}, **pinned, ep=1))
    m_act = api.estimate(_pre(params_b=14, gpus=256, **pinned))
    assert m_moe.plan("pretrain")["memory_gb"]["weights"] > 5 * m_act.plan("pretrain")["memory_gb"]["weights"]


def test_expert_parallel_all_to_all_costs_communication():
    base = _pre(params_b=140, gpus=256, model={"experts": 64, "experts_active": 4, "active_params_b": 14},
                tp=1, pp=1, zero_stage=3, micro_batch=1, recompute="selective")
    p1 = api.plans({**base, "stages": {"pretrain": {**base["stages"]["pretrain"], "ep": 1}}}, "pretrain", 1)[0]
    p8 = api.plans({**base, "stages": {"pretrain": {**base["stages"]["pretrain"], "ep": 8}}}, "pretrain", 1)[0]
    assert p8["ep"] == 8 and p1["ep"] == 1
    assert p1["communication_s"]["ep"] == 0.0 < p8["communication_s"]["ep"]
    assert p8["communication_s"]["dp"] < p1["communication_s"]["dp"]  # fewer expert gradients per GPU


@pytest.mark.parametrize("zero", [1, 2, 3])
def test_zero_shards_each_expert_over_the_ranks_that_hold_it_not_again_over_ep(zero):
    """An expert shard lives on dp x cp / ep of the replicas, so ZeRO splits it that many ways: whatever
    the ep, a GPU keeps 1/(tp pp dp cp) of the model's sharded states, so ZeRO-1's optimizer states (and
    ZeRO-2's FP32 gradients, ZeRO-3's weights) per GPU do not change with ep, and equal the dense
    model's share. Dividing by ep again undercounted a 671B LoRA's base 16x on 4 GPUs (it 'fit' in
    44.7 GB per GPU; its BF16 weights alone are 1.34 TB)."""
    def plan(ep):
        scn = _pre(params_b=140, gpus=256, model={"experts": 64, "experts_active": 4, "active_params_b": 14},
                   tp=1, pp=1, cp=1, dp=256, ep=ep, zero_stage=zero, micro_batch=1, recompute="full")
        return api.estimate(scn).plan("pretrain")
    one = plan(1)
    for ep in (8, 64):
        p = plan(ep)
        assert (p["ep"], p["dp"]) == (ep, 256)
        assert p["memory_gb"]["optimizer"] == pytest.approx(one["memory_gb"]["optimizer"], rel=1e-9), ep
        if zero == 3:  # (ZeRO-2 keeps the held BF16 gradients whole)
            assert p["memory_gb"]["grads"] == pytest.approx(one["memory_gb"]["grads"], rel=1e-9), ep
            assert p["memory_gb"]["weights"] == pytest.approx(one["memory_gb"]["weights"], rel=1e-9), ep
        else:
            assert p["memory_gb"]["weights"] < one["memory_gb"]["weights"] / 4  # held experts split ep ways


@pytest.mark.parametrize("gpus", [1, 3, 8, 24, 100, 512])
@pytest.mark.parametrize("params_b", [0.5, 7, 70])
def test_no_plan_uses_more_gpus_than_the_stage_has(gpus, params_b):
    for p in api.plans(_pre(params_b=params_b, gpus=gpus, gpu="h100-80gb"), "pretrain", top=50):
        assert p["tp"] * p["pp"] * p["dp"] * p["cp"] <= gpus


def _sft(params_b, method, gpus, gpu="h100-80gb"):
    return {"model": {"params_b": params_b}, "hardware": {"gpu": gpu, "num_gpus": gpus},
            "stages": {"sft": {"method": method, "samples": 1000, "tokens_per_sample": 1024, "seq_len": 2048}}}


def test_qlora_70b_fits_one_80gb_gpu_and_bf16_70b_never_does():
    q = api.estimate(_sft(70, "qlora", 1))
    assert q.stat("sft", "fits") == 1.0 and q.stat("sft", "min_gpus") == 1
    g = api.estimate(_sft(65, "qlora", 1))
    assert g.stat("sft", "fits") == 1.0
    for method in ("full", "lora"):
        r = api.estimate(_sft(70, method, 1))
        assert r.stat("sft", "fits") == 0.0
        assert r.stat("sft", "min_gpus") > 1
        need = int(r.stat("sft", "min_gpus"))
        assert not r.feasible and f"{need:,}" in r.infeasible[0]


def test_a_pinned_tp_that_sets_the_gpu_count_says_so_and_names_the_true_minimum():
    """The issue's own case: the 70B pipeline preset pins TP 8 on SFT; with one SFT GPU and QLoRA the stage
    cannot run as pinned (8 GPUs), yet a 70B QLoRA fits one 80 GB GPU. The sentence names the pin, the
    pinned minimum and the minimum over every layout; a stage with nothing pinned keeps the short one."""
    scn = costcore.load_preset("pipeline-70b")
    scn["stages"]["sft"].update(method="qlora", num_gpus=1)
    r = api.estimate(scn)
    assert r.stat("sft", "min_gpus") == 8
    [sentence] = [x for x in r.infeasible if x.startswith("Supervised fine-tuning")]
    assert sentence.startswith("Supervised fine-tuning does not fit on its 1 GPU: with its pinned tensor parallelism 8, "
                               "it needs at least 8 GPUs"), sentence
    assert sentence.endswith("with the layout searched, 1 GPU is enough.")
    scn["stages"]["sft"].update(method="full", num_gpus=4)
    [sentence] = [x for x in api.estimate(scn).infeasible if x.startswith("Supervised fine-tuning")]
    del scn["stages"]["sft"]["tp"]
    searched = api.estimate(scn)  # the same stage with TP searched: its minimum is the one the sentence names
    assert 4 < searched.stat("sft", "min_gpus") < 24
    assert f"with the layout searched, {int(searched.stat('sft', 'min_gpus')):,} GPUs are enough." in sentence
    [short] = [x for x in searched.infeasible if x.startswith("Supervised fine-tuning")]
    assert "pinned" not in short and short.endswith("the plan gives it 4.")


@pytest.mark.parametrize("params_b,method", [(13, "full"), (34, "full"), (70, "lora"), (7, "full")])
def test_min_gpus_is_the_true_minimum(params_b, method):
    """Brute force: the stage fits on min_gpus GPUs and on none fewer."""
    m = int(api.estimate(_sft(params_b, method, 1)).stat("sft", "min_gpus"))
    assert m >= 1
    assert api.estimate(_sft(params_b, method, m)).stat("sft", "fits") == 1.0
    for g in range(1, m):
        assert api.estimate(_sft(params_b, method, g)).stat("sft", "fits") == 0.0, g


def test_pinned_fields_stay_pinned():
    p = api.estimate(_pre(gpus=64, plan={"tp": 4, "pp": 2, "recompute": "full", "zero": 1})).plan("pretrain")
    assert (p["tp"], p["pp"], p["recompute"], p["zero"]) == (4, 2, "full", 1)
    assert p["dp"] == 8  # the rest of the GPUs


def test_more_gpus_shorten_the_step():
    a = api.estimate(_pre(gpus=64)).plan("pretrain")
    b = api.estimate(_pre(gpus=256)).plan("pretrain")
    assert b["step_time_s"] < a["step_time_s"]


def test_json_contract_keys():
    d = api.estimate("pipeline-70b").to_dict()
    for s in ("pretrain", "sft"):
        st = d["stages"][s]
        assert {"tp", "pp", "dp", "cp", "ep", "micro_batch", "recompute", "zero", "step_time_s", "mfu",
                "memory_per_gpu_gb"} <= set(st["plan"])
        assert st["gpu_hours_p10"] < st["gpu_hours"] < st["gpu_hours_p90"]
    assert d["total_usd_p10"] < d["total_usd"] < d["total_usd_p90"]


def test_resizing_the_model_takes_the_new_sizes_shape():
    """The size slider (pages/common.apply -> schema.resize_model): a 7B on the 70B preset costs what a 7B costs."""
    from costcore.scenario import schema
    big = api.load_preset("pipeline-70b")
    small = schema.validate(schema.resize_model(big, 7.0))
    r = api.estimate(small)
    assert (r.stat("pretrain", "model_layers"), r.stat("pretrain", "model_hidden")) == (32.0, 4096.0)
    fresh = dict(small, model={"params_b": 7.0, "vocab": big["model"]["vocab"]})
    assert r.stat("pretrain", "flops") == pytest.approx(api.estimate(fresh).stat("pretrain", "flops"))
    moe = schema.validate(schema.resize_model(api.load_preset("moe-deepseek-v3"), 335.5))
    assert moe["model"]["active_params_b"] == pytest.approx(18.5)


@pytest.mark.parametrize("gpus", [1, 3, 6, 12, 24, 64, 100])
def test_the_plan_shown_when_none_fits_is_one_the_search_tries(gpus):
    """A stage that fits on no plan still shows a plan (its memory and step time say why): it must be
    made of degrees the search tries (tp dividing the heads, a pipeline degree the search takes for
    the layers) on no more GPUs than the job has, and use as many of them as such degrees allow."""
    from costcore.engine import layout as lay
    from costcore.scenario import schema
    scn = schema.resize_model(schema.set_path(api.load_preset("llama3-8b"), "hardware.num_gpus", gpus), 405)
    res = api.estimate(scn)
    plan = res.plan("pretrain")
    assert not plan["fits"] and not res.feasible
    heads = float(schema.effective_value(scn, "model.heads"))
    layers = int(schema.effective_value(scn, "model.layers"))
    assert plan["tp"] in lay.TP_CHOICES and plan["tp"] <= 8 and heads % plan["tp"] == 0
    assert plan["pp"] <= layers and (layers % plan["pp"] == 0 or plan["pp"] & (plan["pp"] - 1) == 0)
    assert plan["tp"] * plan["pp"] * plan["dp"] * plan["cp"] <= gpus
    best = max(t * p for t in lay.TP_CHOICES if t <= min(8, gpus) and heads % t == 0
               for p in range(1, min(layers, int(gpus // t)) + 1) if layers % p == 0 or p & (p - 1) == 0)
    assert plan["tp"] * plan["pp"] == best


def test_sliding_window_layers_cost_their_window_not_the_sequence():
    """Olmo 3's layout (three of four layers in a 4,096-token window) at 32K tokens: the FLOPs per token are
    6N + 12 L d ctx_eff with ctx_eff counted by hand (a windowed query sees 4,096 keys, a full one i), the
    attention time of the step falls with it, and at a context within the window nothing changes."""
    shape = {"params_b": 7.3, "layers": 32, "hidden": 4096, "heads": 32, "ffn": 11008, "vocab": 100352}
    def sft(window, seq):
        model = dict(shape, sliding_window=window, sliding_window_share=0.75) if window else shape
        return api.estimate({"model": model, "hardware": {"gpu": "h100-80gb", "num_gpus": 8},
                             "stages": {"sft": {"samples": 2000, "tokens_per_sample": seq, "seq_len": seq}}})
    full, local = sft(0, 32768), sft(4096, 32768)
    n = full.stat("sft", "train_flops_per_token") - 12.0 * 32 * 4096 * 32768  # 6N (+ nothing else: full method)
    ctx_eff = 32768 * (0.25 + 0.75 * (4096 * 32768 - 4096 ** 2 / 2) / (32768 ** 2 / 2))
    assert local.stat("sft", "train_flops_per_token") == pytest.approx(n + 12.0 * 32 * 4096 * ctx_eff, rel=1e-9)
    assert local.stat("sft", "gpu_hours") < 0.8 * full.stat("sft", "gpu_hours")
    short_full, short_local = sft(0, 4096), sft(4096, 4096)
    assert short_local.stat("sft", "gpu_hours") == short_full.stat("sft", "gpu_hours")


def test_picking_another_model_drops_the_old_ones_window():
    from costcore.scenario import schema
    scn = schema.validate({"model": {"params_b": 7.24, "layers": 32, "hidden": 4096, "sliding_window": 4096,
                                     "sliding_window_share": 1.0}})
    new = schema.pick_model(scn, "llama-3.1-8b")
    assert "sliding_window" not in new["model"] and "sliding_window_share" not in new["model"]
    assert schema.effective_value(schema.validate(new), "model.sliding_window") == 0


def test_a_pinned_plan_larger_than_the_job_is_rated_on_its_own_gpus():
    """The 70B pipeline pins TP 8 x PP 4 for pre-training; on 1 GPU nothing fits and the plan shown is the
    pinned one on 32 GPUs. Its MFU and tokens/s per GPU are over the 32 GPUs it uses, not the job's one
    (which printed an MFU of 803%), and the stage says it does not fit with the fewest GPUs that do."""
    from costcore.scenario import schema
    scn = schema.set_path(api.load_preset("pipeline-70b"), "hardware.num_gpus", 1)
    res = api.estimate(scn)
    plan = res.plan("pretrain")
    assert not plan["fits"] and plan["tp"] * plan["pp"] == 32
    assert 0.0 < plan["benchmark_mfu"] < 1.0 and 0.0 < plan["mfu"] < 1.0
    tokens = plan["micro_batches"] * plan["dp"] * plan["micro_batch"] * schema.effective_value(scn, "stages.pretrain.seq_len")
    assert plan["benchmark_mfu"] == pytest.approx(
        res.stat("pretrain", "train_flops_per_token") * tokens / (plan["step_time_s"] * 32 * 989e12), rel=1e-6)
    assert res.stat("pretrain", "min_gpus") == 32 and not res.feasible


@pytest.mark.parametrize("preset, sets, words", [
    ("pipeline-70b", {"stages.pretrain.tp": 3},
     "Pre-training cannot be laid out: its pinned tensor parallelism of 3 does not divide the model's 64 attention "
     "heads (a head is not split across GPUs); pin 1, 2, 4, 8, 16, 32 or 64, or set it to 0 (searched)."),
    ("moe-deepseek-v3", {"stages.pretrain.ep": 3},
     "Pre-training cannot be laid out: its pinned expert parallelism of 3 does not divide the model's 256 experts "
     "evenly; pin a divisor of 256, or set it to 0 (searched)."),
])
def test_a_pinned_degree_no_layout_can_take_is_refused_in_words(preset, sets, words):
    """A tensor degree that splits an attention head, or an expert degree that splits the experts unevenly: Megatron-LM
    refuses both. A link's TP 3 on the 70B's 64 heads was costed as if it ran; EP 3 on DeepSeek-V3 was blamed on
    memory ("needs 157.0 GB ... use more tensor parallelism")."""
    scn = costcore.load_preset(preset)
    for k, v in sets.items():
        scn = schema.set_path(scn, k, v)
    r = api.estimate(scn)
    assert not r.feasible and r.plan("pretrain")["fits"] is False
    assert [x for x in r.infeasible if x.startswith("Pre-training")] == [words]


def test_a_plan_too_big_for_memory_is_told_what_shrinks_its_largest_part():
    """Micro-batch 64 without recompute on TP 4 x PP 64: activations are most of 829 GB a GPU. The sentence said
    "use more tensor or pipeline parallelism, ZeRO-3, or LoRA/QLoRA" (LoRA is not a pre-training choice); it now
    names the micro-batch and recompute. A fine-tuning stage whose model states are too large is offered LoRA/QLoRA."""
    scn = costcore.load_preset("pipeline-70b")
    for k, v in {"tp": 4, "pp": 64, "micro_batch": 64, "recompute": "none", "zero_stage": 0}.items():
        scn = schema.set_path(scn, f"stages.pretrain.{k}", v)
    [said] = [x for x in api.estimate(scn).infeasible if x.startswith("Pre-training")]
    assert "its activations are the largest part: use a smaller micro-batch, activation recompute" in said, said
    assert "LoRA" not in said
    scn = costcore.load_preset("pipeline-70b")
    for k, v in {"tp": 1, "pp": 1, "micro_batch": 1, "recompute": "full", "zero_stage": 0, "method": "full"}.items():
        scn = schema.set_path(scn, f"stages.sft.{k}", v)
    [said] = [x for x in api.estimate(scn).infeasible if x.startswith("Supervised")]
    assert said.endswith("use more tensor or pipeline parallelism, ZeRO-3 or LoRA/QLoRA."), said


def test_a_new_size_unpins_what_its_shape_cannot_take_and_keeps_the_rest():
    """The 70B preset pins TP 8 on five stages. Moved by the size slider to 5.6B (28 heads) or 1B, TP 8 splits a head:
    every stage was refused. The pins belonged to the 70B's shape, as its layers did, so those stages search again;
    at 13B (40 heads, which 8 divides) the pins stay. A shipped model picked on the workbench does the same."""
    base = costcore.load_preset("pipeline-70b")
    small = schema.resize_model(base, 5.62)
    assert schema.effective_value(schema.validate(small), "model.heads") % 8 != 0
    assert not any(st.get("tp") for st in small["stages"].values() if isinstance(st, dict))  # 0: searched
    assert small["stages"]["pretrain"]["pp"] == base["stages"]["pretrain"]["pp"]  # PP 4 still fits its layers
    assert api.estimate(small).feasible
    kept = schema.resize_model(base, 13)
    assert [st.get("tp") for st in kept["stages"].values() if isinstance(st, dict) and "tp" in st] == [8] * 5
    picked = schema.pick_model(base, "qwen2.5-7b")
    assert api.estimate(picked).feasible and picked["stages"]["sft"]["tp"] == 0


def test_the_job_layout_page_does_not_show_a_fallback_as_a_plan():
    """With TP 64 and EP 8 pinned on DeepSeek-V3's 2,048 GPUs no plan fits (EP 8 needs 8 data-parallel replicas); the
    page showed the kernel's fallback, "TP 64 × PP 16 × DP 2 × CP 1 (EP 8)", as the plan. It now says no plan fits."""
    from shared import app_on
    at = app_on("pages/job-layout.py", p="moe-deepseek-v3", **{"stages.pretrain.tp": "64", "stages.pretrain.ep": "8"})
    text = " ".join(m.value for m in at.markdown)
    assert "**No plan fits** on 2,048 GPUs as pinned" in text and "**Plan:**" not in text
    at = app_on("pages/job-layout.py", p="moe-deepseek-v3")
    assert "**Plan:** TP 1 × PP 16" in " ".join(m.value for m in at.markdown)


def test_a_pinned_degree_past_the_stage_gpus_is_named_as_such():
    """TP 64 on 8 GPUs was refused as a head-count problem, offering TP 16 and 32 (more GPUs than the stage has): the
    GPU count is named first; a TP the heads refuse is offered divisors within the stage's GPUs only."""
    import re
    import costcore
    from costcore.scenario import schema
    base = schema.set_path(schema.pick_model(costcore.load_preset("vertical-7b-lora"), "qwen2.5-7b"),
                           "stages.sft.num_gpus", 8)
    said = " ".join(costcore.estimate(schema.validate(schema.set_path(base, "stages.sft.tp", 64))).infeasible)
    assert "pinned tensor parallelism 64 needs 64 GPUs and it has 8" in said and "heads" not in said, said
    said = " ".join(costcore.estimate(schema.validate(schema.set_path(base, "stages.sft.tp", 8))).infeasible)
    assert "does not divide the model's 28 attention heads" in said
    offered = [int(v) for v in re.findall(r"\b(\d+)\b", said.split("; pin ")[1].split(", or set")[0])]
    assert offered == [1, 2, 4]  # not 14 or 28: more than the stage's 8 GPUs; not 7: 4 key/value heads


def test_tensor_parallelism_that_splits_the_key_value_heads_is_refused():
    """Qwen2.5-7B has 28 query heads and 4 key/value heads: TP 7 divides the first but cannot split or copy the
    second evenly (Megatron-LM divides the query groups by TP; vLLM asserts the same), and it was costed as a
    plan that runs. Pinned, the stage is refused in words naming the key/value heads; searched, no plan uses it;
    a pinned rollout replica of 3 GPUs on the 32B GRPO preset (40 heads) cannot decode either."""
    import costcore
    from costcore.scenario import schema
    from reference_model import attention_splits
    base = schema.set_path(schema.pick_model(costcore.load_preset("vertical-7b-lora"), "qwen2.5-7b"),
                           "stages.sft.num_gpus", 8)
    res = costcore.estimate(schema.validate(schema.set_path(base, "stages.sft.tp", 7)))
    said = " ".join(res.infeasible)
    assert res.stat("sft", "fits") == 0.0
    assert "tensor parallelism of 7 neither divides the model's 4 key/value heads" in said, said
    assert "pin 1, 2 or 4, or set it to 0" in said, said
    assert not attention_splits(7, 28, 4) and attention_splits(4, 28, 4) and attention_splits(8, 64, 4)
    assert attention_splits(2, 128, 5)  # 5 does not divide 128: a KV cache's stand-in (MLA), not GQA groups
    rl = costcore.load_preset("reasoning-grpo-32b")
    ok = costcore.estimate(schema.validate(schema.set_path(rl, "stages.rl.rollout_tp", 4)))
    assert ok.stat("rl", "fits") == 1.0 and not ok.infeasible
    bad = costcore.estimate(schema.validate(schema.set_path(rl, "stages.rl.rollout_tp", 3)))
    assert bad.stat("rl", "fits") == 0.0
    said = " ".join(bad.infeasible)
    assert "cannot decode on its pinned replica of 3 GPUs: tensor parallelism of 3 does not divide the model's 40 " \
           "attention heads" in said, said
