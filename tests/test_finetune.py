"""Fine-tuning workbench (issue 15): memory against the estimators people use, the QLoRA paper's
claims, the optimizer and offload techniques, picking a real model, a custom GPU, the JSON contract,
the methods comparison and its page.

Sources of the checked formulas:
- DeepSpeed ``deepspeed/runtime/zero/stage_1_and_2.py`` ``estimate_zero2_model_states_mem_needs``:
  per GPU 4 N + 16 N / G bytes (no offload), 2 N with the optimizer offloaded;
- DeepSpeed ``deepspeed/runtime/zero/stage3.py`` ``estimate_zero3_model_states_mem_needs``:
  18 N / G + 4 x largest layer (no offload), 2 N / G + 4 x largest layer (optimizer offloaded),
  4 x largest layer (parameters offloaded too);
- Hugging Face accelerate ``src/accelerate/commands/estimate.py`` ``estimate_training_usage``
  (bf16 mixed precision): model (FP32 copy) 4 N, gradients 4 N + 2 N, optimizer 8 N;
- QLoRA (Dettmers et al. 2023, arXiv:2305.14314) abstract and Sec. 2: a 65B model fine-tunes on
  one 48 GB GPU, a 33B one on a 24 GB consumer GPU, with paged optimizers;
- 8-bit optimizers (Dettmers et al. 2022, arXiv:2110.02861): block-wise 8-bit states, 75% less
  optimizer-state memory than 32-bit Adam.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import costcore
from costcore import fmt
from costcore.analysis import finetune
from costcore.engine import kernel, layout
from costcore.scenario import schema, share
from costcore.scenario.hfconfig import parse_hf_config
from server_support import NEVER_S  # the one wait limit of the suite (not a speed)

N_8B = 8_030_261_248  # Llama-3.1-8B, safetensors


def sft(model, gpu, gpus, **stage):
    res = costcore.estimate({"model": model, "hardware": {"gpu": gpu, "num_gpus": gpus}, "stages": {"sft": stage}})
    return res, res.to_dict()["stages"]["sft"]


def states_bytes(d) -> float:
    m = d["memory_breakdown_gb"]
    return (m["weights"] + m["gradients"] + m["optimizer"]) * 1e9


def largest_layer_params(res) -> float:
    """The largest layer's parameters as DeepSpeed's estimator counts them (attention + MLP of one layer)."""
    h = res.stat("sft", "model_hidden")
    # Llama-3.1-8B: q, o 4096 x 4096; k, v 4096 x 1024; MLP 3 x 4096 x 14336
    return 2 * h * h + 2 * h * 1024 + 3 * h * 14336


# ---------------------------------------------------------------------------
# Model states against DeepSpeed's and accelerate's estimators
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("gpus", [1, 8, 64])
def test_zero2_states_match_deepspeed(gpus):
    _, d = sft({"name": "llama-3.1-8b"}, "h100-80gb", gpus, method="full", zero_stage=2 if gpus > 1 else 0,
               tp=1, pp=1, micro_batch=1)
    want = 4 * N_8B + 16 * N_8B / gpus
    assert states_bytes(d) == pytest.approx(want, rel=0.10)


def test_zero2_with_the_optimizer_offloaded_matches_deepspeed():
    _, d = sft({"name": "llama-3.1-8b"}, "h100-80gb", 8, method="full", zero_stage=2, tp=1, pp=1,
               offload="optimizer", micro_batch=1)
    assert states_bytes(d) == pytest.approx(2 * N_8B, rel=0.10)


@pytest.mark.parametrize("offload, want_per_n", [("none", 18.0), ("optimizer", 2.0), ("optimizer_and_params", 0.0)])
def test_zero3_matches_deepspeed_with_and_without_offload(offload, want_per_n):
    gpus = 8
    res, d = sft({"name": "llama-3.1-8b"}, "h100-80gb", gpus, method="full", zero_stage=3, tp=1, pp=1,
                 offload=offload, micro_batch=1)
    largest = 4 * largest_layer_params(res)  # DeepSpeed: largest_layer_memory = 4 x largest layer params
    got = states_bytes(d) + largest
    want = want_per_n * N_8B / gpus + largest
    assert got == pytest.approx(want, rel=0.10)
    # the two prefetched layers are in the buffers (2 layers x 2 bytes = DeepSpeed's 4 x largest layer)
    assert d["memory_breakdown_gb"]["buffers"] * 1e9 >= largest


def test_accelerate_training_components_on_one_gpu():
    """accelerate's bf16 figures: FP32 model copy 4N, gradients 6N, optimizer states 8N.

    Its headline "Training using Adam" is the largest of these (8N), not their sum; they are all
    held at once, so the planner reports the sum (2N BF16 weights + 6N + 4N master + 8N = 20N).
    """
    res, d = sft({"name": "llama-3.1-8b"}, "b200", 1, method="full", zero_stage=0, micro_batch=1)
    m = d["memory_breakdown_gb"]
    assert m["gradients"] * 1e9 == pytest.approx(4 * N_8B + 2 * N_8B, rel=0.01)
    assert m["optimizer"] * 1e9 == pytest.approx(4 * N_8B + 8 * N_8B, rel=0.01)  # master 4N + Adam 8N
    assert m["weights"] * 1e9 == pytest.approx(2 * N_8B, rel=0.01)
    assert states_bytes(d) == pytest.approx(20 * N_8B, rel=0.01)


# ---------------------------------------------------------------------------
# The QLoRA paper's claims and the 8-bit optimizer's factor
# ---------------------------------------------------------------------------
LLAMA_65B = {"params_b": 65.2, "layers": 80, "hidden": 8192, "heads": 64, "ffn": 22016, "vocab": 32000}
LLAMA_33B = {"params_b": 32.5, "layers": 60, "hidden": 6656, "heads": 52, "ffn": 17920, "vocab": 32000}
GUANACO = dict(method="qlora", lora_rank=64, lora_targets="all", optimizer="paged_adamw_8bit", seq_len=512,
               samples=9846, tokens_per_sample=512, micro_batch=1, recompute="full", grad_accum=16)


def test_qlora_65b_fits_one_48gb_gpu_and_33b_one_24gb_gpu():
    _, d65 = sft(LLAMA_65B, "rtx-a6000", 1, **GUANACO)
    _, d33 = sft(LLAMA_33B, "rtx-4090", 1, **GUANACO)
    assert d65["fits"] and d65["min_gpus"] == 1
    assert d33["fits"] and d33["min_gpus"] == 1
    # the same jobs with a plain 16-bit LoRA base do not fit
    _, lora65 = sft(LLAMA_65B, "rtx-a6000", 1, **dict(GUANACO, method="lora"))
    assert not lora65["fits"]


def test_paging_is_what_lets_the_optimizer_states_overflow():
    _, paged = sft(LLAMA_33B, "rtx-4090", 1, **GUANACO)
    _, plain = sft(LLAMA_33B, "rtx-4090", 1, **dict(GUANACO, optimizer="adamw_8bit"))
    assert paged["fits"] and paged["optimizer_paged_out_gb"] > 0
    assert not plain["fits"] and plain["optimizer_paged_out_gb"] == 0
    assert paged["plan"]["step_time_s"] > plain["plan"]["step_time_s"]  # the paged bytes cross PCIe


def test_8bit_adam_states_are_a_quarter_of_32bit_ones():
    def optimizer_gb(opt):
        return sft({"name": "llama-3.1-8b"}, "h100-80gb", 8, method="full", zero_stage=0, tp=1, pp=1,
                   micro_batch=1, optimizer=opt)[1]["memory_breakdown_gb"]["optimizer"]
    master_gb = 4 * N_8B / 1e9
    full, eight, paged = optimizer_gb("adamw"), optimizer_gb("adamw_8bit"), optimizer_gb("paged_adamw_8bit")
    assert (eight - master_gb) / (full - master_gb) == pytest.approx(0.25, rel=1e-4)  # the published 75% saving
    assert paged < eight  # 160 GB does not fit one 80 GB GPU: the paged states go to the CPU instead
    assert optimizer_gb("sgd") == pytest.approx(master_gb + 4 * N_8B / 1e9, rel=1e-4)  # one momentum buffer
    assert optimizer_gb("adafactor") < master_gb * 1.01  # factored: a few values per row and column


def test_8bit_adam_lowers_the_fewest_gpus_of_a_full_fine_tune():
    _, adam = sft({"name": "llama-3.1-8b"}, "a100-80gb", 8, method="full")
    _, eight = sft({"name": "llama-3.1-8b"}, "a100-80gb", 8, method="full", optimizer="adamw_8bit")
    assert eight["memory_breakdown_gb"]["optimizer"] < adam["memory_breakdown_gb"]["optimizer"]
    assert 0 < eight["min_gpus"] < adam["min_gpus"]


def test_cpu_offload_costs_step_time_through_pcie_and_host_memory():
    base = dict(method="full", zero_stage=2, tp=1, pp=1, micro_batch=1, global_batch=8)
    _, on_gpu = sft({"name": "llama-3.1-8b"}, "h100-80gb", 8, **base)
    _, offloaded = sft({"name": "llama-3.1-8b"}, "h100-80gb", 8, offload="optimizer", **base)
    assert offloaded["memory_per_gpu_gb"] < on_gpu["memory_per_gpu_gb"]
    assert offloaded["plan"]["step_time_s"] > on_gpu["plan"]["step_time_s"]
    assert offloaded["tokens_per_s_per_gpu"] < on_gpu["tokens_per_s_per_gpu"]


def test_gradient_accumulation_sets_the_micro_batches_per_step():
    _, d = sft({"name": "llama-3.1-8b"}, "h100-80gb", 8, method="lora", grad_accum=4, micro_batch=2, tp=1, pp=1)
    assert d["plan"]["micro_batches"] == 4
    assert d["plan"]["dp"] == 8  # the global batch follows the plan: 4 x 8 x 2 sequences
    # and says so: the stage's global batch was the box's 128 whatever the accumulation (64 steps took 4,096)
    res, _ = sft({"name": "llama-3.1-8b"}, "h100-80gb", 8, method="lora", grad_accum=4, micro_batch=2, tp=1, pp=1)
    assert res.stat("sft", "global_batch") == 4 * 8 * 2


def test_an_8bit_base_halves_the_frozen_weights_of_lora():
    _, b16 = sft({"name": "llama-3.1-8b"}, "h100-80gb", 1, method="lora")
    _, b8 = sft({"name": "llama-3.1-8b"}, "h100-80gb", 1, method="lora", base_bits=8)
    _, b4 = sft({"name": "llama-3.1-8b"}, "h100-80gb", 1, method="lora", base_bits=4)
    _, q = sft({"name": "llama-3.1-8b"}, "h100-80gb", 1, method="qlora")
    adapters = b16["memory_breakdown_gb"]["gradients"]  # 2 bytes per adapter parameter, as the BF16 weight
    assert b8["memory_breakdown_gb"]["weights"] - adapters == pytest.approx(
        (b16["memory_breakdown_gb"]["weights"] - adapters) / 2, rel=1e-6)
    assert b4["memory_breakdown_gb"] == q["memory_breakdown_gb"]  # LoRA on a 4-bit base is QLoRA


@pytest.mark.parametrize("gpu, hbm_bytes_s", [("a100-80gb", 2.0e12), ("rtx-4090", 1.008e12)])
def test_a_4bit_base_adds_its_dequantization_traffic_to_every_matmul(gpu, hbm_bytes_s):
    # bitsandbytes MatMul4Bit dequantizes a layer's NF4 weights to BF16 before its forward and again before its
    # backward matmul (autograd/_functions.py): 4.127 bits read + 2 bytes written per weight at HBM bandwidth.
    # Same plan, no recompute: QLoRA's step - LoRA's = micro-batches x 32 layers x 2 passes x that traffic.
    plan = dict(tp=1, pp=1, micro_batch=1, grad_accum=4, recompute="none", lora_rank=16, lora_targets="all",
                samples=1000, tokens_per_sample=512, seq_len=512)
    model = {"name": "llama-3.1-8b"}
    _, lora = sft(model, gpu, 1, method="lora", **plan)
    _, qlora = sft(model, gpu, 1, method="qlora", **plan)
    layer = 4096 * 4096 * 2 + 2 * 4096 * 1024 + 3 * 4096 * 14336  # q, o; k, v (8 KV heads of 128); gated MLP
    per_pass = layer * (4.127 / 8 + 2.0) / hbm_bytes_s
    assert qlora["plan"]["micro_batches"] == 4
    assert qlora["plan"]["step_time_s"] - lora["plan"]["step_time_s"] == pytest.approx(4 * 32 * 2 * per_pass, rel=1e-6)
    # the step names that time apart, inside its compute; the adapters are named too, the same in both
    assert qlora["plan"]["compute_s"]["dequantization"] == pytest.approx(4 * 32 * 2 * per_pass, rel=1e-9)
    assert lora["plan"]["compute_s"]["dequantization"] == 0.0
    assert qlora["plan"]["compute_s"]["adapters"] == lora["plan"]["compute_s"]["adapters"] > 0.0
    assert sum(qlora["plan"]["compute_s"].values()) < qlora["plan"]["time_s"]["compute"]
    # memory: bitsandbytes dequantizes into a fresh BF16 tensor of the weight's shape (functional.py
    # dequantize_4bit), one matrix at a time: the widest, 4096 x 14336 (the MLP), is the extra buffer
    extra = qlora["plan"]["memory_gb"]["buffers"] - lora["plan"]["memory_gb"]["buffers"]
    assert extra == pytest.approx(2.0 * 4096 * 14336 / 1e9, rel=1e-9)
    # the same model FLOPs: the time shows in the MFU, not in the FLOPs per token
    assert qlora["plan"]["mfu"] < lora["plan"]["mfu"]
    res_l, res_q = (costcore.estimate({"model": model, "hardware": {"gpu": gpu, "num_gpus": 1},
                                       "stages": {"sft": dict(method=m, **plan)}}) for m in ("lora", "qlora"))
    assert res_q.stat("sft", "train_flops_per_token") == res_l.stat("sft", "train_flops_per_token")


def test_lora_adapters_take_step_time_in_proportion_to_their_flops():
    """A LoRA stage's FLOPs per token count 6 N_lora for the adapters (forward 2, backward 4 per parameter); the
    step times them too. Before, a rank-4096 adapter on a 7B model (more adapter than base parameters) printed
    an MFU of 112%: the step held the frozen base's matmuls only. Now the MFU stays where rank 16 has it and the
    productive GPU-hours follow the FLOPs. A batch of 8,192 sequences keeps the pipeline bubble of the plan
    rank 4096 needs to fit (tp 2, pp 2) small, so the MFUs compare the matmuls."""
    res = {r: costcore.estimate({"model": {"name": "llama-3.1-8b"}, "hardware": {"gpu": "h100-80gb", "num_gpus": 8},
                                 "stages": {"sft": {"method": "lora", "lora_rank": r, "lora_targets": "all",
                                                    "global_batch": 8192}}})
           for r in (16, 4096)}
    mfu = {r: x.stat("sft", "mfu") for r, x in res.items()}
    assert mfu[4096] < 1.0 and mfu[4096] == pytest.approx(mfu[16], rel=0.1)
    flops = {r: x.stat("sft", "train_flops_per_token") for r, x in res.items()}
    hours = {r: x.stat("sft", "productive_gpu_hours") for r, x in res.items()}
    assert flops[4096] > 2 * flops[16]  # 6 x 13.6B adapter parameters against 4 x 8B frozen ones
    assert hours[4096] / hours[16] == pytest.approx(flops[4096] / flops[16], rel=0.1)


@pytest.mark.parametrize("stage, message", [
    ({"method": "full", "base_bits": 8}, "full fine-tuning trains 16-bit weights"),
    ({"method": "qlora", "base_bits": 8}, "QLoRA stores its base in 4 bits"),
    ({"method": "lora", "base_bits": 12}, "must be 16, 8 or 4"),
    ({"offload": "optimizer", "zero_stage": 1}, "needs ZeRO stage 2"),
    ({"optimizer": "lion"}, "one of adamw, adamw_8bit"),
])
def test_settings_that_do_not_go_together_get_one_sentence(stage, message):
    with pytest.raises(costcore.ScenarioError) as err:
        schema.validate({"stages": {"sft": stage}})
    assert message in str(err.value) and "\n" not in str(err.value)
    assert str(err.value).startswith("stages.sft.")


# ---------------------------------------------------------------------------
# Picking a model, a config.json, a custom GPU
# ---------------------------------------------------------------------------
def test_picking_a_model_sets_its_exact_shape():
    scn = schema.validate({"model": {"name": "llama-3.1-8b"}})
    m = scn["model"]
    assert (m["layers"], m["hidden"], m["kv_heads"], m["vocab"]) == (32, 4096, 8, 128256)
    res = costcore.estimate(dict(scn, stages={"sft": {}}))
    assert res.stat("sft", "model_layers") == 32 and res.stat("sft", "model_hidden") == 4096


def test_picking_a_model_replaces_the_old_models_size_and_shape():
    old = costcore.load_scenario("pipeline-70b")
    new = schema.validate(schema.pick_model(old, "qwen2.5-7b"))
    assert new["model"]["hidden"] == 3584 and new["model"]["params_b"] == pytest.approx(7.61, rel=0.03)


def test_an_unknown_model_name_gets_one_sentence():
    with pytest.raises(costcore.ScenarioError, match=r"^model.name: must be a shipped model"):
        schema.validate({"model": {"name": "llama-9"}})


@pytest.mark.parametrize("text, words", [
    ('{"model_type": "llama", "hidden_size": 4096,', "not valid JSON"),
    ('{"model_type": "mamba", "hidden_size": 768, "num_hidden_layers": 24, "vocab_size": 50280}', "mamba"),
])
def test_a_bad_config_json_gets_one_sentence(text, words):
    with pytest.raises(costcore.ScenarioError) as err:
        parse_hf_config(text)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_models_command_lists_the_shipped_models(cli):
    code, out, _ = cli("models", "--format", "json")
    rows = json.loads(out)
    assert code == 0 and len(rows) >= 20
    assert rows["llama-3.1-8b"]["layers"] == 32 and rows["qwen3-8b"]["vocab"] == 151936
    code, out, _ = cli("models")
    assert code == 0 and "Llama 3.1 8B" in out and "Qwen3 8B" in out


CUSTOM = {"name": "My 4090 Ti", "peak_tflops": 200, "memory_gb": 32, "mem_bandwidth_tbs": 1.2,
          "gpus_per_node": 4, "inter_node_gbs": 5, "usd_per_gpu_hour": 0.6}


def test_a_custom_gpu_is_validated_and_shared_like_any_setting():
    scn = schema.validate({"hardware": {"gpu": CUSTOM}, "stages": {"sft": {}}})
    hw = scn["hardware"]
    assert hw["gpu"] == "custom" and hw["peak_tflops"] == 200 and hw["gpu_name"] == "My 4090 Ti"
    res = costcore.estimate(scn)
    assert res.stat("sft", "usable_memory_gb") == pytest.approx(32 * 0.9)
    params = share.encode(scn, "scratch-7b")
    back, _, problems = share.decode(params, "scratch-7b")
    assert not problems and all(back["hardware"][k] == v for k, v in scn["hardware"].items())
    assert costcore.estimate(back).total_usd == res.total_usd


@pytest.mark.parametrize("gpu, words", [
    ({"memory_gb": 24}, "hardware.gpu.peak_tflops: a custom GPU needs"),
    (dict(CUSTOM, memory_gb=-5), "hardware.memory_gb"),
    (dict(CUSTOM, tensor_cores=1), "unknown figure of a custom GPU"),
])
def test_a_bad_custom_gpu_gets_one_sentence(gpu, words):
    with pytest.raises(costcore.ScenarioError) as err:
        schema.validate({"hardware": {"gpu": gpu}})
    assert words in str(err.value) and "\n" not in str(err.value)


# ---------------------------------------------------------------------------
# The JSON contract and the comparison
# ---------------------------------------------------------------------------
def test_training_stages_carry_the_memory_breakdown_rate_and_epoch_time():
    d = costcore.estimate("alpaca-7b-sft").to_dict()["stages"]["sft"]
    m = d["memory_breakdown_gb"]
    assert set(m) == {"weights", "gradients", "optimizer", "activations", "buffers"}
    assert sum(m.values()) == pytest.approx(d["memory_per_gpu_gb"], rel=1e-9)
    assert d["tokens_per_s_per_gpu"] > 0 and d["epoch_hours"] > 0
    epochs = costcore.load_scenario("alpaca-7b-sft")["stages"]["sft"]["epochs"]
    train_h = d["epoch_hours"] * epochs  # one epoch's time x epochs = the training time before failures
    assert train_h * d["num_gpus"] == pytest.approx(d["productive_gpu_hours"] + d["data_stall_gpu_hours"], rel=1e-6)


def test_compare_methods_rows_are_the_kernels_numbers():
    scn = costcore.load_scenario("alpaca-7b-sft")
    rows = finetune.compare_methods(scn, ("full", "lora", "qlora", "full_adamw_8bit"))
    assert [r["label"] for r in rows] == ["Full fine-tuning", "LoRA", "QLoRA", "Full fine-tuning with 8-bit AdamW"]
    for r in rows:
        res = costcore.estimate(finetune.method_scenario(scn, r["name"]))
        assert r["gpu_hours"] == res.stat("sft", "gpu_hours")
        assert r["caveat"] and "arXiv" in r["source"]
    full, lora, qlora, eight = rows
    assert lora["trainable_params_b"] < full["trainable_params_b"] / 50
    assert qlora["memory_weights_gb"] < lora["memory_weights_gb"] / 2
    assert eight["memory_optimizer_gb"] < full["memory_optimizer_gb"]
    with pytest.raises(costcore.ScenarioError, match="unknown fine-tuning method"):
        finetune.compare_methods(scn, ("dora",))


def test_a_slow_data_loader_shows_as_stalls_with_their_cost():
    fast = costcore.estimate("alpaca-7b-sft")
    scn = schema.set_path(costcore.load_scenario("alpaca-7b-sft"), "stages.sft.loader_tokens_per_s_per_node", 2000)
    slow = costcore.estimate(scn)
    stall = slow.stat("sft", "data_stall_gpu_hours")
    assert stall > 0 and fast.stat("sft", "data_stall_gpu_hours") == 0
    item = dict(zip((k for k, *_ in kernel.LINE_ITEMS), slow.items[kernel.SFT]))["hidden.data_stalls"]
    assert item == pytest.approx(stall * schema.effective_value(scn, "hardware.usd_per_gpu_hour"), rel=1e-9)
    assert slow.stat("sft", "tokens_per_s_per_gpu") * 8 == pytest.approx(2000, rel=1e-6)  # the loader's pace


def test_layout_memory_kinds_are_the_plans():
    assert "offload_s" in layout.TERM_FIELDS and "mem_paged_out" in layout.TERM_FIELDS


# ---------------------------------------------------------------------------
# Published fine-tuning runs (costcore/data/finetune_runs.yaml)
# ---------------------------------------------------------------------------
def test_published_fine_tuning_runs_are_scored_with_sources():
    from costcore.validation.finetune import finetune_table
    df = finetune_table()
    assert {"stanford-alpaca-7b", "guanaco-65b"} <= set(df.run)
    # issue 15: at least four more public fine-tuning and preference runs besides the bar's two
    assert (df.split != "bar").sum() >= 4 and (df.stage != "sft").sum() >= 4
    assert (df.predicted_hours > 0).all() and df.fits.all()
    assert all(s and a for s, a in zip(df.source, df.assumptions))
    assert (df.ratio == df.predicted_hours / df.published_hours).all()


def test_an_rl_run_is_scored_on_its_whole_stage():
    """A PPO run's figure is its stage's productive GPU-hours over its GPUs (rollouts, scoring passes and
    updates), typed out here from the estimate's own numbers."""
    from costcore.validation.finetune import finetune_runs, finetune_table
    run = finetune_runs()["deepspeed-chat-opt-13b-8xa100-40g"]
    res = costcore.estimate(run["scenario"])
    rollout, passes = res.stat("rl", "rollout_gpu_hours"), res.stat("rl", "passes_gpu_hours")
    assert rollout > 0 and passes > 0
    assert res.stat("rl", "productive_gpu_hours") == pytest.approx(rollout + passes, rel=1e-9)
    row = finetune_table().set_index("run").loc["deepspeed-chat-opt-13b-8xa100-40g"]
    assert row["stage"] == "rl" and row["published_hours"] == 10.8
    assert row["predicted_hours"] == pytest.approx((rollout + passes) / 8, rel=1e-12)


def test_the_alpaca_reruns_on_transformers_main_agree_and_the_early_stack_ones_do_not():
    """docs/validation.md says so: the README's Alpaca command rerun with transformers main (issues #168 and
    #170 of tatsu-lab/stanford_alpaca, 1.32 h on 4 and 3.18 h for 15 epochs on 8 A100 80GB) is predicted
    within 10% with the Alpaca row's token assumption, while the early-fork figures (the published 3 h,
    and 4 h at batch 1 on 40 GB GPUs in issue #32) come out 3-5x too fast."""
    from costcore.validation.finetune import finetune_table
    df = finetune_table().set_index("run")
    for run in ("stanford-alpaca-7b-rerun-4xa100", "stanford-alpaca-7b-rerun-8xa100"):
        assert 0.9 <= df.loc[run, "ratio"] <= 1.1, (run, df.loc[run, "ratio"])
    for run in ("stanford-alpaca-7b", "stanford-alpaca-7b-rerun-8xa100-40g"):
        assert 1 / 5 <= df.loc[run, "ratio"] <= 1 / 3, (run, df.loc[run, "ratio"])


@pytest.mark.xfail(strict=True, reason="issue 15's bar (Alpaca 7B and Guanaco 65B within 25% of their published "
                   "time) is missed: 0.20x and 2.22x (docs/validation.md); strict, so meeting it fails this marker")
def test_alpaca_and_guanaco_within_25_percent_of_their_published_time():
    from costcore.validation.finetune import finetune_table
    df = finetune_table().set_index("run")
    for run in ("stanford-alpaca-7b", "guanaco-65b"):
        assert 0.75 <= df.loc[run, "ratio"] <= 1.25, (run, df.loc[run, "ratio"])


# ---------------------------------------------------------------------------
# The workbench page (AppTest; the browser test is in tests/test_e2e_browser.py)
# ---------------------------------------------------------------------------
def test_workbench_page_picks_a_model_and_8bit_adam_shrinks_the_optimizer(warm_kernels):
    from streamlit.testing.v1 import AppTest
    from shared import APP
    at = AppTest.from_file(str(APP), default_timeout=NEVER_S)
    at.switch_page("pages/fine-tuning.py")
    at.run()
    assert not at.exception
    next(s for s in at.selectbox if s.label == "Model").set_value("llama-3.1-8b").run()
    assert not at.exception
    assert any("32 layers, hidden 4,096" in c.value and "vocabulary 128.3k" in c.value for c in at.caption)
    # the default preset's SFT stage pins TP 8: the page says why the fewest GPUs come in eights
    assert at.session_state["scenario"]["stages"]["sft"]["tp"] == 8
    assert any("pinned tensor parallelism 8" in c.value for c in at.caption)
    assert at.session_state["scenario"]["model"]["name"] == "llama-3.1-8b"
    table = at.dataframe[0].value
    assert list(table["Method"]) == ["Full fine-tuning", "LoRA", "QLoRA"]
    before = at.session_state["scenario"]
    next(s for s in at.selectbox if s.label == "Optimizer").set_value("adamw_8bit").run()
    assert not at.exception
    after = at.session_state["scenario"]
    assert after["stages"]["sft"]["optimizer"] == "adamw_8bit"
    old = finetune.compare_methods(schema.validate(before), ("full",))[0]
    new = finetune.compare_methods(schema.validate(after), ("full",))[0]
    assert new["memory_optimizer_gb"] < old["memory_optimizer_gb"]


def test_workbench_shows_data_and_people_costs_in_a_table_of_their_own(warm_kernels):
    """With the toggle on, the money columns go to a second table (added to the first, they pushed its
    columns past the page's right edge); each method's total is the kernel's."""
    from streamlit.testing.v1 import AppTest
    from shared import APP
    at = AppTest.from_file(str(APP), default_timeout=NEVER_S)
    at.switch_page("pages/fine-tuning.py")
    at.run()
    assert "GPU cost" in at.dataframe[0].value.columns and len(at.dataframe) == 1
    next(t for t in at.toggle if t.label == "Show data and people costs").set_value(True).run()
    assert not at.exception
    speed, money = at.dataframe[0].value, at.dataframe[1].value
    assert "GPU cost" not in speed.columns and "Fewest GPUs" in speed.columns
    assert list(money.columns) == ["Method", "GPU cost", "Data cost", "People and platform", "Total"]
    rows = finetune.compare_methods(schema.validate(at.session_state["scenario"]))
    assert list(money["Total"]) == [fmt.usd(r["usd_total"]) for r in rows]


def test_the_fewest_gpus_are_over_every_layout_and_the_pinned_ones_are_shown_apart(warm_kernels):
    """Issue 14: the minimum GPU count is the true minimum over all plans (a 70B QLoRA fits one 80 GB GPU;
    the 70B's BF16 weights never fit one). The 70B preset pins TP 8 on its SFT stage: as pinned, every
    method needs a multiple of 8; over every layout QLoRA needs 1, and a full fine-tune more than 1. The
    workbench shows both columns."""
    scn = schema.validate(costcore.load_preset("pipeline-70b"))
    rows = {r["name"]: r for r in finetune.compare_methods(scn)}
    assert all(r["pinned_layout"] == {"tp": 8} and r["min_gpus"] % 8 == 0 for r in rows.values())
    assert rows["qlora"]["min_gpus_any_layout"] == 1 and rows["qlora"]["min_gpus"] == 8
    assert rows["full"]["min_gpus_any_layout"] > 1
    unpinned = schema.without_layout_pins(scn, "sft")
    assert "tp" not in unpinned["stages"]["sft"] and unpinned["stages"]["sft"]["zero_stage"] == 3  # ZeRO stays
    assert {r["name"]: r["min_gpus"] for r in finetune.compare_methods(unpinned)} == \
        {k: r["min_gpus_any_layout"] for k, r in rows.items()}
    from streamlit.testing.v1 import AppTest
    from shared import APP
    at = AppTest.from_file(str(APP), default_timeout=NEVER_S)
    at.switch_page("pages/fine-tuning.py")
    at.run()
    table = at.dataframe[0].value
    assert list(table["Fewest GPUs"]) == [f"{rows[k]['min_gpus_any_layout']:,}" for k in finetune.DEFAULT_METHODS]
    assert list(table["As pinned"]) == [f"{rows[k]['min_gpus']:,}" for k in finetune.DEFAULT_METHODS]


def test_picking_a_windowed_model_says_how_its_layers_attend(warm_kernels):
    """Gemma 2 alternates 4,096-token sliding-window layers with global ones (its config.json, read through
    hfconfig): the workbench's shape line says so, and the scenario carries the window."""
    from streamlit.testing.v1 import AppTest
    from shared import APP
    at = AppTest.from_file(str(APP), default_timeout=NEVER_S)
    at.switch_page("pages/fine-tuning.py")
    at.run()
    next(s for s in at.selectbox if s.label == "Model").set_value("gemma-2-9b").run()
    assert not at.exception
    assert any("50.0% of the layers attend in a 4,096-token sliding window" in c.value for c in at.caption)
    scn = schema.validate(at.session_state["scenario"])
    assert schema.effective_value(scn, "model.sliding_window") == 4096
    next(s for s in at.selectbox if s.label == "Model").set_value("llama-3.1-8b").run()
    assert not any("sliding window" in c.value for c in at.caption)


@pytest.mark.parametrize("preset, gpus", [("pipeline-70b", None), ("reasoning-grpo-32b", None), ("pipeline-70b", 1)])
def test_memory_breakdown_sums_to_memory_per_gpu_in_every_training_stage(preset, gpus):
    """Issue 15's contract: the kinds sum to memory_per_gpu_gb. In RL the figure is the larger of the training
    plan and a decoding replica (the 70B pipeline's replica: 35.3 GB of BF16 weights on its 4 GPUs and 36.5 GB
    of KV cache); a stage that fits nowhere (a 70B on 1 GPU) reports its plan's memory, not a made-up one."""
    scn = costcore.load_preset(preset)
    if gpus:
        scn = costcore.scenario.schema.set_path(scn, "hardware.num_gpus", gpus)
    stages = costcore.estimate(scn).to_dict()["stages"]
    for name, st in stages.items():
        if "memory_breakdown_gb" in st:
            assert sum(st["memory_breakdown_gb"].values()) == pytest.approx(st["memory_per_gpu_gb"], rel=1e-9), name
    if not gpus:
        rl = stages["rl"]["memory_breakdown_gb"]
        assert rl["activations"] > 0 and rl["weights"] > 0


def test_logit_bytes_sets_the_loss_buffer_per_token_and_vocabulary_entry():
    """efficiency.logit_bytes: the loss holds that many bytes per token and vocabulary entry on the GPU
    (4 = one FP32 copy, fused cross-entropy); raising it adds exactly the difference x s x b x V / tp."""
    base = {"model": {"params_b": 7.72, "layers": 32, "hidden": 4096, "heads": 32, "ffn": 11008, "vocab": 151936},
            "hardware": {"gpu": "a100-80gb", "num_gpus": 1},
            "stages": {"sft": {"method": "lora", "samples": 8, "tokens_per_sample": 8192, "seq_len": 8192,
                               "micro_batch": 1, "grad_accum": 8, "recompute": "full"}}}
    fused = costcore.estimate(base).plan("sft")
    hf = costcore.estimate(dict(base, efficiency={"logit_bytes": 11})).plan("sft")
    assert hf["memory_gb"]["buffers"] - fused["memory_gb"]["buffers"] == pytest.approx(7 * 8192 * 151936 / 1e9, rel=1e-9)
    assert hf["memory_gb"]["weights"] == fused["memory_gb"]["weights"]
    assert hf["step_time_s"] == fused["step_time_s"]  # memory only


def test_hugging_face_logit_bytes_matches_qwens_profiled_lora_memory_it_was_not_read_from():
    """About 11 bytes per logit is the slope of Qwen-7B's LoRA memory from 2,048 to 8,192 tokens (QwenLM/Qwen
    README, Profiling of Memory and Speed; docs/layout.md). The 14B and 72B rows, not used for it, then come
    within 5% of their published memory (at the default 4 bytes, 4-5% under)."""
    from costcore.validation import finetune as ft
    assert 10 < ft.hf_logit_bytes() < 12.5  # three to four FP32/BF16 copies, as the docstring says
    t = ft.step_table({"logit_bytes": ft.hf_logit_bytes()}).set_index("run")
    for run in ("qwen-14b-lora-2048", "qwen-72b-lora-2048"):
        assert abs(t.loc[run, "memory_ratio"] - 1) < 0.05, (run, t.loc[run, "memory_ratio"])


def test_the_workbench_reads_a_pasted_config_and_words_its_refusals():
    """Paste a config.json on the workbench: an empty box asks for one (the parser said "Expecting value (line 1,
    column 1)"), a malformed one is refused naming the config in words (not "model.hf_config:"), a good one sets the
    shape, and the Model box then says the shape is the stated one (it read "Any size (shape from the size)")."""
    from streamlit.testing.v1 import AppTest
    from server_support import NEVER_S
    from shared import APP
    at = AppTest.from_file(str(APP), default_timeout=NEVER_S)
    at.query_params["p"] = "alpaca-7b-sft"
    at.run()
    at.switch_page("pages/fine-tuning.py")
    at.run()

    def paste(text):
        rev = at.session_state["rev"]
        at.text_area(key=f"ft:cfgtext:{rev}").set_value(text)
        at.button(key=f"ft:cfguse:{rev}").click().run()
        assert not at.exception

    paste("  ")
    assert [w.value.replace("\\", "") for w in at.warning] == ["Choose a config.json file or paste its text first."]
    paste('{"hidden_size": 4096, }')
    said = [w.value.replace("\\", "") for w in at.warning]
    assert any(v.startswith("config.json: is not valid JSON") for v in said), said
    assert not any("model.hf_config" in v or "model\\.hf" in v for v in said), said
    paste((Path(APP).parent / "costcore" / "data" / "hf_configs" / "llama-3.1-8b.json").read_text())
    model = at.session_state["scenario"]["model"]
    assert (model["layers"], model["hidden"], model["kv_heads"], model["vocab"]) == (32, 4096, 8, 128256)
    box = at.selectbox(key=f"ft:model:{at.session_state['rev']}")
    assert box.format_func(box.value) == "Its stated shape (from the preset or a config.json)"


@pytest.mark.parametrize("preset, said", [("alpaca-7b-sft", True), ("qlora-single-gpu", False)])
def test_the_workbench_says_when_fine_tuning_speed_is_set_by_hand(preset, said):
    """The Alpaca preset pins its MFU (the 2023 stack's 8%): offload and 8-bit Adam then change memory and not
    tokens/s, which read as a bug with nothing said; the workbench now says the speed is set by hand."""
    from shared import app_on
    at = app_on("pages/fine-tuning.py", p=preset)
    text = " ".join(c.value for c in at.caption)
    assert ("speed is set by hand in this scenario" in text) == said
    assert [c for c in at.dataframe[0].value.columns][:2] == ["Method", "Trainable"]


def test_lora_on_a_mixture_of_experts_adapts_every_expert():
    """peft's all-linear LoRA adapts each expert's gate, up and down matrices: Mixtral-8x7B at rank 16 holds
    32 x (q 16 x 8,192 + k and v 16 x 5,120 each + o 16 x 8,192 + 8 experts x 3 x 16 x (4,096 + 14,336)) =
    240,123,904 adapter parameters; the workbench showed 41.9M, one dense MLP's, as for Llama-3.1-8B."""
    res, _ = sft({"name": "mixtral-8x7b"}, "h100-80gb", 8, method="lora", lora_rank=16, lora_targets="all")
    attention = 16 * 8192 + 2 * 16 * 5120 + 16 * 8192
    assert res.stat("sft", "trainable_params_b") * 1e9 == 32 * (attention + 8 * 3 * 16 * (4096 + 14336)) == 240_123_904
    dense, _ = sft({"name": "llama-3.1-8b"}, "h100-80gb", 8, method="lora", lora_rank=16, lora_targets="all")
    assert dense.stat("sft", "trainable_params_b") * 1e9 == 41_943_040  # one MLP a layer, as before


def test_visiting_the_workbench_never_changes_the_plan(warm_kernels):
    """On a plan without SFT the workbench switched SFT on by itself (the 32B GRPO plan went from $245k to $397k,
    $96.0k of it paid labels, from a visit) and drew its first view from the plan before ("0 layers, hidden 0");
    it now says so and adds the stage on a click."""
    from streamlit.testing.v1 import AppTest
    from shared import APP
    at = AppTest.from_file(str(APP), default_timeout=NEVER_S)
    at.query_params["p"] = "reasoning-grpo-32b"
    at.switch_page("pages/fine-tuning.py")
    at.run()
    assert not at.exception
    assert at.session_state["scenario"] == costcore.load_preset("reasoning-grpo-32b")
    assert any("no supervised fine-tuning stage" in i.value for i in at.info) and not at.dataframe
    at.button(key="ft:add_sft").click().run()
    assert not at.exception and "sft" in at.session_state["scenario"]["stages"]
    assert not any("0 layers" in c.value for c in at.caption) and len(at.dataframe) == 1


def test_a_lora_row_on_a_quantized_base_says_so():
    """With the plan's LoRA on a 4-bit base the 'LoRA' row was QLoRA's (3,910 tokens/s, 23.7 GB) under LoRA's name and
    its 'frozen 16-bit base' caveat."""
    scn = costcore.load_preset("vertical-7b-lora")
    scn = schema.validate(schema.set_path(schema.set_path(scn, "stages.sft.method", "lora"), "stages.sft.base_bits", 4))
    rows = {r["name"]: r for r in finetune.compare_methods(scn, ["lora", "qlora"])}
    assert rows["lora"]["label"] == "LoRA (4-bit base)" and rows["lora"]["base_bits"] == 4
    assert "16-bit" not in rows["lora"]["caveat"] and "frozen 4-bit base" in rows["lora"]["caveat"]
    plain = {r["name"]: r for r in finetune.compare_methods(costcore.load_preset("vertical-7b-lora"), ["lora"])}
    assert plain["lora"]["label"] == "LoRA" and "frozen 16-bit base" in plain["lora"]["caveat"]


def test_a_method_that_does_not_fit_shows_no_speed_or_bill(warm_kernels):
    """An 8B full fine-tune on one A100 showed 1,920 tokens/s, 8.98 GPU-h and $16.1 beside 'Fits: no'."""
    from shared import app_on
    at = app_on("pages/fine-tuning.py", p="llama3-8b", **{"hardware.num_gpus": "1", "hardware.gpu": "a100-80gb",
                                                         "stages.sft.num_gpus": "1"})
    assert not at.exception
    table = at.dataframe[0].value.set_index("Method")
    assert table.loc["Full fine-tuning", "Fits"] == "no"
    assert list(table.loc["Full fine-tuning", ["Tokens/s/GPU", "Epoch", "GPU-hours", "GPU cost"]]) == ["–"] * 4
    fitting = table[table.Fits == "yes"]
    assert len(fitting) and all(v != "–" for v in fitting["Tokens/s/GPU"])


def test_a_qlora_model_is_evaluated_from_its_four_bit_weights_on_its_one_gpu():
    """The QLoRA preset at 70B trains on one A100 80GB, but its evaluation held BF16 weights (141 GB: 2 GPUs at
    the least) and the plan could not run, with no way out but more GPUs. stages.eval.weight_bits
    holds the weights at 8 or 4 bits (vLLM's AWQ/GPTQ/bitsandbytes weights): the replica shrinks, each decoding
    step reads fewer bytes, and the refusal names the setting."""
    import costcore
    from costcore.scenario import schema
    big = schema.resize_model(costcore.load_preset("qlora-single-gpu"), 70)
    at = {b: costcore.estimate(schema.validate(schema.set_path(big, "stages.eval.weight_bits", b))) for b in (16, 8, 4)}
    # the fewest GPUs that hold the weights and one sequence's KV cache in 90% of 80 GB (formulas.fitting_replica)
    assert [at[b].stat("eval", "min_gpus") for b in (16, 8, 4)] == [2.0, 1.0, 1.0]
    assert at[16].stat("eval", "fits") == 0.0 and at[8].stat("eval", "fits") == at[4].stat("eval", "fits") == 1.0
    said = " ".join(at[16].infeasible)
    assert "needs at least 2 GPUs" in said and "Weights of 8 or 4 bits" in said, said
    # the 4-bit replica holds half a byte per weight: at least 35 GB of a 70B's weights on the one GPU
    assert at[4].stat("eval", "memory_per_gpu_gb") >= 0.5 * 70
    # a memory-bound decode reads a quarter of the bytes: fewer GPU-hours than the same evaluation in BF16 on 4 GPUs
    wide = schema.set_path(big, "stages.eval.num_gpus", 4)
    bf16 = costcore.estimate(schema.validate(wide)).stat("eval", "productive_gpu_hours")
    four = costcore.estimate(schema.validate(schema.set_path(wide, "stages.eval.weight_bits", 4))).stat(
        "eval", "productive_gpu_hours")
    assert four < bf16


def test_samples_longer_than_the_sequence_are_said_to_train_in_pieces():
    """16,000-token chain-of-thought samples trained as 4,096-token pieces (about 20% fewer GPU-hours than whole)
    with no warning, and the Post-training page had no sequence length to raise. The warning names both numbers
    and goes away at a sequence that holds the samples; the page has the knob for SFT and DPO."""
    import costcore
    from costcore.scenario import schema
    from shared import app_on
    scn = schema.set_path(costcore.load_preset("reasoning-grpo-32b"), "stages.sft", {"tokens_per_sample": 16000})
    cut = costcore.estimate(schema.validate(scn))
    said = [w for w in cut.warnings if w.startswith("Supervised fine-tuning: its samples")]
    assert said and "16,000 tokens are longer than its Sequence length of 4,096" in said[0], cut.warnings
    whole = costcore.estimate(schema.validate(schema.set_path(scn, "stages.sft.seq_len", 16384)))
    assert not [w for w in whole.warnings if "longer than its Sequence length" in w]
    assert whole.stat("sft", "gpu_hours") > cut.stat("sft", "gpu_hours")  # attention over whole samples costs more
    dpo = schema.set_path(schema.set_path(scn, "stages.dpo", {}), "stages.dpo.chosen_tokens", 8192)
    assert any(w.startswith("Preference alignment (DPO): its responses of 8,192 tokens")
               for w in costcore.estimate(schema.validate(dpo)).warnings)
    at = app_on("pages/post-training.py", p="alpaca-7b-sft")
    assert any(s.label == "Sequence length (tokens)" for s in at.select_slider)


def test_rl_sequence_length_is_not_a_knob_since_nothing_reads_it():
    """The Overview's "Reinforcement learning: sequence length" slider moved nothing (an RL sequence is its prompt
    and response) and the tornado listed it at zero swing: the Overview offers the response length instead."""
    import costcore
    from costcore.analysis import sensitivity
    from shared import app_on
    scn = costcore.load_preset("reasoning-grpo-32b")
    assert "stages.rl.seq_len" not in sensitivity.numeric_inputs(scn)
    at = app_on("pages/overview.py", p="reasoning-grpo-32b")
    labels = [s.label for s in at.select_slider] + [s.label for s in at.slider]
    assert not any(label.endswith("sequence length") for label in labels)
    assert "Reinforcement learning: response tokens (average)" in labels


def test_a_replica_needs_the_gpus_that_hold_its_weights_not_twice_them():
    """An 8B model's 16 GB of BF16 weights on one 24 GB RTX 4090 (vLLM serves it so) was refused: "Evaluation ...
    needs at least 2 GPUs", the half-memory rule of a serving engine's default replica, while a replica pinned at
    1 GPU fit. The fewest GPUs are those that hold the weights and one sequence's KV cache; a stage with fewer
    GPUs than the default replica decodes on that fewest."""
    import costcore
    from costcore.engine import formulas as F
    from costcore.scenario import schema
    scn = schema.set_path(schema.pick_model(costcore.load_preset("qlora-single-gpu"), "llama-3.1-8b"),
                          "hardware.gpu", "rtx-4090")
    res = costcore.estimate(schema.validate(scn))
    assert res.feasible and res.stat("eval", "min_gpus") == 1.0 and res.stat("eval", "decode_replica_gpus") == 1.0
    pinned = costcore.estimate(schema.validate(schema.set_path(scn, "stages.eval.decode_tp", 1)))
    assert pinned.stat("eval", "gpu_hours") == res.stat("eval", "gpu_hours")
    assert F.fitting_replica(16e9, 1e9, 24.0) == 1.0 and F.fitting_replica(16e9, 6e9, 24.0) == 2.0
    assert F.fitting_replica(16e9, 6e9, 24.0, 8.0, 0.0, 0.0, 1.0) == 0.0  # none within one GPU
