"""The numba kernel against the slow reference model (tests/reference_model.py).

For every preset in presets/*.yaml (collected when the tests run, so presets
added later are included) and a set of hand-built scenarios that switch on
every option (six stages; full / LoRA / QLoRA; PPO / GRPO; reward model /
rule; live / precomputed / no reference; keep-all / keep-last-K / milestones;
explicit MFU / auto; measured tokens_per_gpu_s and tflops_per_gpu; ZeRO 0-3; recompute modes),
each line item and statistic of each enabled stage must agree to rel 1e-9.

One test per (scenario, quantity), so a disagreement names the quantity.
"""
from __future__ import annotations

import functools
import math
from pathlib import Path

import pytest
import reference_model as ref
from hypothesis import given
from test_properties import SETTINGS, scenarios

import costcore
from costcore.kernel import LINE_ITEMS, STATS
from costcore.schema import BY_PATH, STAGES

REL, ABS = 1e-9, 1e-12
PRESET_DIR = Path(__file__).resolve().parent.parent / "presets"
QUANTITIES = ref.ITEM_KEYS + ref.STAT_KEYS

ALL_STAGES_DEFAULT = {"name": "all six stages, defaults", "stages": {s: {} for s in STAGES}}

FULL_FT_PPO_KEEP_ALL = {
    "name": "full fine-tuning, PPO with reward model, keep-all, explicit MFU",
    "model": {"params_b": 13.0},
    "hardware": {"gpu": "a100-80gb", "num_gpus": 64},
    "network": {"ckpt_replicas": 2, "model_exports": 3},
    "stages": {
        "pretrain": {"tokens_b": 260, "mfu": 0.42, "keep_last": 0, "seq_len": 2048, "epochs": 2,
                     "acquisition_usd_per_b_tokens": 50},
        "cpt": {"tokens_b": 20, "recompute": "none", "zero_stage": 1, "keep_last": 0, "milestone_every": 4,
                "ckpt_type": "full"},
        "sft": {"method": "full", "samples": 200000, "tokens_per_sample": 3000, "seq_len": 2048,
                "recompute": "full", "keep_last": 0, "ckpt_interval_h": 0.5, "synthetic_tokens_m": 300},
        "dpo": {"method": "full", "reference": "live", "pairs": 80000, "chosen_tokens": 700, "rejected_tokens": 900,
                "epochs": 2, "zero_stage": 2, "ckpt_interval_h": 0.25},
        "rl": {"method": "full", "algorithm": "ppo", "reward": "model", "reference": "live", "steps": 300,
               "samples_per_prompt": 1, "prompts_per_step": 512, "critic_params_b": 3.0, "reward_params_b": 7.0,
               "update_epochs": 2, "mfu": 0.3, "ckpt_interval_h": 1.5, "keep_last": 0},
        "eval": {"runs": 40, "generated_tokens_m": 20, "context_tokens": 4096, "decode_batch": 512},
    },
}

LORA_GRPO_RULE = {
    "name": "LoRA everywhere, GRPO with rule reward, no reference, precomputed DPO reference",
    "model": {"params_b": 8.0, "kv_heads": 8},
    "hardware": {"gpu": "h100-80gb", "num_gpus": 16},
    "stages": {
        "sft": {"method": "lora", "lora_rank": 64, "lora_targets": "qv", "samples": 50000, "epochs": 2},
        "dpo": {"method": "lora", "lora_rank": 32, "lora_targets": "attn", "reference": "precomputed",
                "pairs": 30000},
        "rl": {"method": "lora", "lora_rank": 16, "algorithm": "grpo", "reward": "rule", "reference": "none",
               "steps": 800, "samples_per_prompt": 16, "rollout_batch": 1024, "verifier_usd_per_sample": 0.002,
               "keep_last": 3, "milestone_every": 5, "ckpt_interval_h": 0.75},
        "eval": {"runs": 12, "human_samples": 0},
    },
}

QLORA_PPO_MODEL = {
    "name": "QLoRA, PPO with reward model and critic, live DPO reference, weights-only checkpoints",
    "model": {"params_b": 70.0, "layers": 80, "hidden": 8192, "heads": 64, "kv_heads": 8, "ffn": 28672,
              "vocab": 128256},
    "hardware": {"gpu": "h200", "num_gpus": 8},
    "stages": {
        "sft": {"method": "qlora", "lora_targets": "all", "lora_rank": 64, "qlora_dequant_overhead": 0.5,
                "ckpt_type": "weights", "zero_stage": 0},
        "dpo": {"method": "qlora", "reference": "live", "zero_stage": 3, "micro_batch": 2},
        "rl": {"method": "qlora", "algorithm": "ppo", "reward": "model", "reward_params_b": 0, "critic_params_b": 0,
               "reference": "live", "steps": 100, "prompts_per_step": 64, "samples_per_prompt": 4,
               "response_tokens": 1024, "rollout_efficiency": 0.3, "milestone_every": 3, "keep_last": 1},
    },
}

MOE_BIG_CLUSTER = {
    "name": "MoE 671B/37B on 16k GPUs (cluster term, auto recompute), weights checkpoints with milestones",
    "model": {"params_b": 671.0, "active_params_b": 37.0, "vocab": 129280},
    "hardware": {"gpu": "h800", "num_gpus": 16384},
    "reliability": {"failures_per_gpu_hour": 0.00005, "restart_hours": 0.5},
    "storage": {"retention_months": 24, "cold_after_days": 60},
    "stages": {
        "pretrain": {"tokens_b": 14800, "seq_len": 4096, "tp": 1, "pp": 16, "keep_last": 5, "milestone_every": 10,
                     "ckpt_type": "weights", "experiments": 2, "experiment_size": 0.05},
        "cpt": {"tokens_b": 600, "seq_len": 32768, "num_gpus": 2048, "recompute": "auto", "pp": 16,
                "tflops_per_gpu": 400, "mfu": 0.3},  # mfu wins over tflops_per_gpu
        "rl": {"num_gpus": 512, "steps": 2000, "prompts_per_step": 256, "response_tokens": 8192,
               "tp": 8, "pp": 4},
        "eval": {"num_gpus": 64, "runs": 100, "context_tokens": 32768},
    },
}

MEASURED_THROUGHPUT = {
    "name": "measured tokens_per_gpu_s on every training stage",
    "model": {"params_b": 1.3},
    "hardware": {"gpu": "a100-40gb", "num_gpus": 32},
    "stages": {
        "pretrain": {"tokens_b": 300, "tokens_per_gpu_s": 12000},
        "cpt": {"tokens_b": 30, "tokens_per_gpu_s": 11000, "epochs": 3},
        "sft": {"tokens_per_gpu_s": 9000, "method": "lora"},
        "dpo": {"tokens_per_gpu_s": 5000, "reference": "precomputed", "tflops_per_gpu": 100},  # tps wins
        "rl": {"tokens_per_gpu_s": 7000, "algorithm": "ppo"},
        "eval": {},
    },
}

SMALL_MODEL_ZERO_STAGES = {
    "name": "125M model on A100-40GB: ZeRO 0/1/2/3, no recompute, big micro-batch, stage GPU counts",
    "model": {"params_b": 0.125, "vocab": 50257},
    "hardware": {"gpu": "a100-40gb", "num_gpus": 4, "size_exponent": 0.1},
    "efficiency": {"small_model_b": 0.5},
    "stages": {
        "pretrain": {"tokens_b": 50, "zero_stage": 0, "recompute": "none", "micro_batch": 16, "seq_len": 1024},
        "cpt": {"tokens_b": 5, "zero_stage": 1, "recompute": "selective", "micro_batch": 8, "num_gpus": 2,
                "tflops_per_gpu": 140},
        "sft": {"zero_stage": 2, "micro_batch": 4, "num_gpus": 1, "tokens_per_sample": 8192},
        "dpo": {"zero_stage": 0, "num_gpus": 1, "chosen_tokens": 300, "rejected_tokens": 200, "seq_len": 256},
    },
}

TIGHT_MEMORY = {
    "name": "70B on 8 x A100-40GB with long context: auto recompute falls back to full, does not fit",
    "model": {"params_b": 70.0},
    "hardware": {"gpu": "a100-40gb", "num_gpus": 8},
    "stages": {
        "pretrain": {"tokens_b": 10, "seq_len": 16384, "micro_batch": 2, "tflops_per_gpu": 150},
        "sft": {"seq_len": 8192, "tokens_per_sample": 8192, "tflops_per_gpu": 120, "method": "lora"},
        "rl": {"seq_len": 8192, "tp": 8},
        "eval": {"decode_batch": 4096, "context_tokens": 65536},
    },
}

NO_FAILURES_NO_RETENTION = {
    "name": "no failures, no idle, nothing retained, free storage tiers, custom GQA shape on L40S",
    "model": {"params_b": 3.0, "layers": 26, "hidden": 3072, "heads": 24, "kv_heads": 8, "ffn": 8192},
    "hardware": {"gpu": "l40s", "num_gpus": 24, "usd_per_gpu_hour": 1.1},
    "reliability": {"failures_per_gpu_hour": 0, "idle_fraction": 0, "failed_run_fraction": 0},
    "storage": {"retention_months": 0, "cold_after_days": 0, "dataset_versions": 1},
    "network": {"dataset_transfers": 0, "model_exports": 0},
    "labor": {"researcher": {"fte": 0.5, "usd_per_month": 30000}},
    "ops": {"usd_per_month": 0},
    "stages": {
        "pretrain": {"tokens_b": 100, "setup_months": 0, "ckpt_interval_h": 5},
        "sft": {"experiments": 0, "labels": 0},
        "dpo": {"enabled": False},
        "eval": {"runs": 0},
    },
}

EXPENSIVE_RELIABILITY = {
    "name": "failure-heavy cluster: slow checkpoint writes (Young/Daly >= 2M branch), many experiments",
    "model": {"params_b": 34.0},
    "hardware": {"gpu": "mi300x", "num_gpus": 2048},
    "reliability": {"failures_per_gpu_hour": 0.005, "ckpt_write_gbps_per_gpu": 0.0005, "restart_hours": 2,
                    "idle_fraction": 0.3, "failed_run_fraction": 1.5},
    "efficiency": {"mfu_min": 0.2},
    "stages": {
        "pretrain": {"tokens_b": 2000, "experiments": 5, "experiment_size": 0.1},
        "cpt": {"ckpt_interval_h": 0.001},
        "sft": {"method": "lora", "ckpt_interval_h": 0},
        "rl": {"method": "lora", "reward": "model", "steps": 50},
    },
}

TPU_SWEEP = {
    "name": "TPU v4, explicit specs and prices, eval-heavy with synthetic data",
    "model": {"params_b": 540.0},
    "hardware": {"gpu": "tpu-v4", "num_gpus": 6144, "usd_per_gpu_hour": 1.5, "peak_tflops": 275,
                 "mem_bandwidth_tbs": 1.2, "mfu_base": 0.5},
    "data": {"usd_per_m_synthetic_tokens": 10, "review_fraction": 1.0},
    "stages": {
        "pretrain": {"tokens_b": 780, "seq_len": 2048, "tp": 12, "pp": 12, "labels": 1000, "usd_per_label": 20},
        "eval": {"runs": 1000, "benchmark_tokens_m": 500, "generated_tokens_m": 50, "synthetic_tokens_m": 1000,
                 "decode_efficiency": 0.2, "human_samples": 1000},
    },
}

if "storage.finished_weights_only" in BY_PATH:  # retained checkpoints shrink to weights after the stage
    FULL_FT_PPO_KEEP_ALL["storage"] = {"finished_weights_only": True}
    QLORA_PPO_MODEL["storage"] = {"finished_weights_only": True}

HAND_BUILT = {
    "all_default": ALL_STAGES_DEFAULT,
    "full_ppo_keep_all": FULL_FT_PPO_KEEP_ALL,
    "lora_grpo_rule": LORA_GRPO_RULE,
    "qlora_ppo_model": QLORA_PPO_MODEL,
    "moe_big_cluster": MOE_BIG_CLUSTER,
    "measured_throughput": MEASURED_THROUGHPUT,
    "small_model_zero_stages": SMALL_MODEL_ZERO_STAGES,
    "tight_memory": TIGHT_MEMORY,
    "no_failures_no_retention": NO_FAILURES_NO_RETENTION,
    "expensive_reliability": EXPENSIVE_RELIABILITY,
    "tpu_sweep": TPU_SWEEP,
}


def preset_names() -> list[str]:
    return sorted(p.stem for p in PRESET_DIR.glob("*.yaml"))


CASES = [f"preset:{n}" for n in preset_names()] + [f"hand:{n}" for n in HAND_BUILT]


def scenario_of(case: str) -> dict:
    kind, name = case.split(":", 1)
    if kind == "preset":
        return costcore.load_preset(name)
    return HAND_BUILT[name]


def kernel_rows(res) -> dict:
    """{stage: {line item: $, stat: value}} from a kernel Result."""
    out = {}
    for s in res.stages:
        i = STAGES.index(s)
        row = {key: float(res.items[i, j]) for j, (key, _, _, _) in enumerate(LINE_ITEMS)}
        row.update({name: float(res.stats[i, k]) for k, name in enumerate(STATS)})
        out[s] = row
    return out


@functools.cache
def pair(case: str):
    scn = scenario_of(case)
    return kernel_rows(costcore.estimate(scn)), ref.reference_estimate(scn)


def mismatches(kern: dict, want: dict, quantity: str) -> list[str]:
    out = []
    for s in want:
        a, b = kern[s][quantity], want[s][quantity]
        if not math.isclose(a, b, rel_tol=REL, abs_tol=ABS):
            diff = f"rel diff {abs(a - b) / abs(b):.3g}" if b else f"abs diff {abs(a - b):.3g}"
            out.append(f"{s}: kernel {a!r} vs reference {b!r} ({diff})")
    return out


@pytest.mark.parametrize("case", CASES)
def test_same_stages_enabled(case):
    kern, want = pair(case)
    assert sorted(kern) == sorted(want)
    assert want, "scenario enables no stage"


@pytest.mark.parametrize("quantity", QUANTITIES)
@pytest.mark.parametrize("case", CASES)
def test_kernel_matches_reference(case, quantity):
    kern, want = pair(case)
    bad = mismatches(kern, want, quantity)
    assert not bad, f"{case} {quantity}:\n  " + "\n  ".join(bad)


def test_hand_built_scenarios_cover_every_option():
    """The hand-built list really switches on every stage and every option named in its names."""
    seen: dict[str, set] = {}
    for scn in HAND_BUILT.values():
        for s, sdata in scn["stages"].items():
            seen.setdefault("stage", set()).add(s)
            for key, value in sdata.items():
                seen.setdefault(key, set()).add(value if isinstance(value, str) else (value > 0))
    assert seen["stage"] == set(STAGES)
    assert {"full", "lora", "qlora"} <= seen["method"]
    assert {"ppo", "grpo"} <= seen["algorithm"]
    assert {"model", "rule"} <= seen["reward"]
    assert {"live", "precomputed", "none"} <= seen["reference"]
    assert {"none", "selective", "full", "auto"} <= seen["recompute"]
    assert {"full", "weights"} <= seen["ckpt_type"]
    assert {"qv", "attn", "all"} <= seen["lora_targets"]
    assert {True, False} <= seen["keep_last"]          # keep-all (0) and keep-last-K
    assert True in seen["milestone_every"] and True in seen["mfu"] and True in seen["tokens_per_gpu_s"]
    assert True in seen["tflops_per_gpu"]
    assert {True, False} <= seen["zero_stage"] and {True, False} <= seen["ckpt_interval_h"]
    # kernel branches the scenarios must reach
    modes = {pair(f"hand:{n}")[0][s]["recompute_mode"] for n in HAND_BUILT for s in pair(f"hand:{n}")[0]}
    assert {0.0, 1.0, 2.0} <= modes
    fits = {pair(f"hand:{n}")[0][s]["fits"] for n in HAND_BUILT for s in pair(f"hand:{n}")[0]}
    assert fits == {0.0, 1.0}


# ---------------------------------------------------------------------------
# Random scenarios
# ---------------------------------------------------------------------------
@SETTINGS
@given(scenarios())
def test_random_scenarios_match_reference(scn):
    kern = kernel_rows(costcore.estimate(scn))
    want = ref.reference_estimate(scn)
    assert sorted(kern) == sorted(want)
    bad = []
    for q in QUANTITIES:
        bad += [f"{q} {m}" for m in mismatches(kern, want, q)]
    assert not bad, "\n".join(bad)


# ---------------------------------------------------------------------------
# In-run checkpoint storage, by hand
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("interval_h,n_ckpt,stored_intervals", [
    (1.0, 1, 0),    # one checkpoint, written when the run ends: nothing stored during the run
    (0.003, 4, 6),  # keep-all, writes at s, 2s, 3s, 4s = end: 0 + 1 + 2 + 3 checkpoint-intervals
])
def test_in_run_checkpoint_storage_by_hand(interval_h, n_ckpt, stored_intervals):
    """formulas.held_checkpoint_sum: 'Multiplied by the interval and the checkpoint size it gives the
    checkpoint-hours stored during a run.' A checkpoint exists from its write on; the n-th write ends the
    run, after which the retention term (hot_after_days, then cold) bills it."""
    scn = {
        "model": {"params_b": 7.0, "layers": 32, "hidden": 4096, "heads": 32, "ffn": 11008},
        "hardware": {"gpu": "h100-80gb", "num_gpus": 8},
        "reliability": {"failures_per_gpu_hour": 0.0, "idle_fraction": 0.0, "failed_run_fraction": 0.0},
        "stages": {"sft": {"samples": 1000, "tokens_per_sample": 500, "epochs": 2, "tokens_per_gpu_s": 2500,
                           "ckpt_interval_h": interval_h, "keep_last": 0, "experiments": 0}},
    }
    res = costcore.estimate(scn)
    wall_h = 1000 * 500 * 2 / 2500 / 3600 / 8  # 1e6 tokens at 2,500 tokens/s/GPU on 8 GPUs = 0.01389 h
    assert res.stat("sft", "ckpt_count") == n_ckpt
    spacing_h = wall_h / n_ckpt
    ckpt_gb = 7e9 * 14 / 1e9  # 98 GB with optimizer state
    hot_after_months = 30 / 30.4167  # cold_after_days
    in_run_gb_months = ckpt_gb * stored_intervals * spacing_h / 730.0
    expected_hot = 0.10 * (in_run_gb_months + n_ckpt * ckpt_gb * hot_after_months)
    expected_cold = 0.004 * n_ckpt * ckpt_gb * (12 - hot_after_months)
    i_hot = [k for k, *_ in LINE_ITEMS].index("storage.ckpt_hot")
    i_cold = [k for k, *_ in LINE_ITEMS].index("storage.ckpt_cold")
    assert res.items[STAGES.index("sft"), i_cold] == pytest.approx(expected_cold, rel=1e-9)
    assert res.items[STAGES.index("sft"), i_hot] == pytest.approx(expected_hot, rel=1e-9)
