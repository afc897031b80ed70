"""Hand-built scenarios that exercise every option of the cost model.

Shared by the reference-model parity and the JIT/no-JIT parity tests.
"""
from __future__ import annotations

from costcore.scenario.schema import BY_PATH, STAGES

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
    "name": "LoRA everywhere, GRPO with rule reward, no reference, precomputed DPO reference, pinned inference replicas",
    "model": {"params_b": 8.0, "kv_heads": 8},
    "hardware": {"gpu": "h100-80gb", "num_gpus": 16},
    "stages": {
        "sft": {"method": "lora", "lora_rank": 64, "lora_targets": "qv", "samples": 50000, "epochs": 2},
        "dpo": {"method": "lora", "lora_rank": 32, "lora_targets": "attn", "reference": "precomputed",
                "pairs": 30000},
        "rl": {"method": "lora", "lora_rank": 16, "algorithm": "grpo", "reward": "rule", "reference": "none",
               "steps": 800, "samples_per_prompt": 16, "rollout_batch": 1024, "verifier_usd_per_sample": 0.002,
               "keep_last": 3, "milestone_every": 5, "ckpt_interval_h": 0.75, "rollout_tp": 2},
        "eval": {"runs": 12, "human_samples": 0, "decode_tp": 4},
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
    "name": "MoE 671B/37B known by its sizes only (derived fine-grained experts) on 16k GPUs, weights checkpoints "
            "with milestones",
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
    "hardware": {"gpu": "a100-40gb", "num_gpus": 4, "gemm_efficiency": 0.7},
    "efficiency": {"gemm_half_dim": 500, "memory_traffic": 3.0, "grad_reduce_bytes": 4},
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
    "efficiency": {"sustained_fraction": 0.5, "overlap_contention": 0.3, "dp_overlap": 0.5,
                   "collective_efficiency": 0.5, "comm_buffer_gb": 3.0, "tp_overlap": 0.4},
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
                 "mem_bandwidth_tbs": 1.2, "gemm_efficiency": 0.6, "intra_node_gbs": 50, "inter_node_gbs": 25,
                 "gpus_per_node": 4},
    "data": {"usd_per_m_synthetic_tokens": 10, "review_fraction": 1.0},
    "stages": {
        "pretrain": {"tokens_b": 780, "seq_len": 2048, "tp": 12, "pp": 12, "labels": 1000, "usd_per_label": 20},
        "eval": {"runs": 1000, "benchmark_tokens_m": 500, "generated_tokens_m": 50, "synthetic_tokens_m": 1000,
                 "decode_efficiency": 0.2, "human_samples": 1000},
    },
}

FP8_MOE_PINNED_LAYOUT = {
    "name": "Mixtral-like MoE with its experts given, FP8 on H100, every plan field pinned somewhere",
    "model": {"params_b": 46.7, "active_params_b": 12.9, "layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8,
              "ffn": 14336, "experts": 8, "experts_active": 2, "moe_ffn": 14336},
    "hardware": {"gpu": "h100-80gb", "num_gpus": 128, "precision": "fp8", "fp8_peak_tflops": 1900},
    "efficiency": {"fp8_gemm_efficiency": 0.7},
    "stages": {
        "pretrain": {"tokens_b": 100, "seq_len": 32768, "tp": 4, "pp": 2, "cp": 2, "ep": 8, "interleave": 2,
                     "sequence_parallel": "off", "recompute": "selective", "micro_batch": 1, "zero_stage": 1},
        "cpt": {"tokens_b": 10, "seq_len": 8192, "sequence_parallel": "on", "recompute": "auto"},
        "sft": {"method": "full", "global_batch": 64, "dp": 4, "zero_stage": 3, "recompute": "none",
                "num_gpus": 32},
        "dpo": {"method": "lora", "reference": "live", "pairs": 20000},
    },
}

GELU_CONFIG_LORA = {
    "name": "GPT-2 from its shipped Hugging Face config (GELU MLP), LoRA on all linear layers, one GPU",
    "model": {"hf_config": "gpt2"},
    "hardware": {"gpu": "l40s", "num_gpus": 1},
    "stages": {
        "pretrain": {"tokens_b": 10, "seq_len": 1024, "global_batch_tokens": 524288},
        "sft": {"method": "lora", "lora_targets": "all", "lora_rank": 8, "tokens_per_sample": 1024},
        "rl": {"method": "lora", "reference": "live", "algorithm": "grpo", "steps": 20},
    },
}

# Multimodal phases (issue 17): every modality, connector kind and what-is-trained combination.
MM_LLAVA_IMAGE = {
    "name": "LLaVA-style image phases: frozen LLM alignment, full tuning with ZeRO-3",
    "model": {"hf_config": "llama-2-7b"},
    "hardware": {"gpu": "a100-80gb", "num_gpus": 8},
    "multimodal": {"modality": "image", "encoder": "clip-vit-l-14-336", "connector": "mlp2x"},
    "stages": {
        "mm_align": {"samples": 558000, "text_tokens_per_sample": 40, "train": ["connector"], "micro_batch": 32,
                     "zero_stage": 2, "tp": 1, "pp": 1},
        "mm_tune": {"samples": 665000, "media_share": 0.94, "text_tokens_per_sample": 500, "train": ["connector", "llm"],
                    "method": "full", "zero_stage": 3, "recompute": "full", "license_usd_per_item": 0.01},
    },
}
MM_VIDEO_TRAINED_ENCODER = {
    "name": "video through a trained encoder, pixel shuffle, LoRA LLM, tiles and a per-phase token override",
    "model": {"params_b": 13.0},
    "hardware": {"gpu": "h100-80gb", "num_gpus": 16},
    "multimodal": {"modality": "video", "encoder": "clip-vit-l-14-336", "connector": "pixel-shuffle",
                   "frames_per_item": 4, "resolution_px": 224, "raw_mb_per_item": 20, "shard_copies": 2},
    "stages": {
        "mm_cpt": {"samples": 200000, "items_per_sample": 2, "text_tokens_per_sample": 300, "seq_len": 4096,
                   "train": ["connector", "llm", "encoder"], "method": "lora", "recompute": "none",
                   "caption_usd_per_item": 0.02},
        "mm_tune": {"samples": 50000, "tokens_per_item": 512, "train": ["llm", "encoder"], "method": "full",
                    "recompute": "full", "zero_stage": 3},
    },
}
MM_AUDIO_PRECOMPUTED = {
    "name": "audio: Whisper windows, pooled tokens, precomputed features, QLoRA tuning, a Q-Former",
    "model": {"params_b": 7.0},
    "hardware": {"gpu": "a100-40gb", "num_gpus": 4},
    "multimodal": {"modality": "audio", "encoder": "whisper-large-v3-encoder", "token_compression": 2,
                   "seconds_per_item": 45, "precomputed_features": True, "usd_per_cpu_hour": 0.1},
    "stages": {
        "mm_align": {"samples": 300000, "text_tokens_per_sample": 30, "train": ["connector"],
                     "caption_usd_per_item": 0.5},
        "mm_tune": {"samples": 40000, "items_per_sample": 1, "text_tokens_per_sample": 200, "method": "qlora",
                    "train": ["connector", "llm"], "seq_len": 4096},
    },
}
MM_QFORMER_FROZEN_CONNECTOR = {
    "name": "Q-Former connector with a given query count; the LLM alone trained; stage GPUs",
    "model": {"params_b": 3.0},
    "hardware": {"gpu": "h100-80gb", "num_gpus": 8},
    "multimodal": {"connector": "qformer", "connector_queries": 64, "tiles_per_item": 3},
    "stages": {"mm_tune": {"samples": 100000, "items_per_sample": 3, "train": ["llm"], "num_gpus": 4,
                           "mfu": 0.3}},
}

if "storage.finished_weights_only" in BY_PATH:  # retained checkpoints shrink to weights after the stage
    FULL_FT_PPO_KEEP_ALL["storage"] = {"finished_weights_only": True}
    QLORA_PPO_MODEL["storage"] = {"finished_weights_only": True}

SLIDING_WINDOW_LONG_CONTEXT = {
    "name": "Olmo-3-style 7B, three of four layers in a 4,096-token window, 32K context: pre-training, SFT, DPO, "
            "GRPO and eval with no recompute (the scores term of the activations follows the window too)",
    "model": {"params_b": 7.3, "layers": 32, "hidden": 4096, "heads": 32, "ffn": 11008, "vocab": 100352,
              "sliding_window": 4096, "sliding_window_share": 0.75},
    "hardware": {"gpu": "h100-80gb", "num_gpus": 64},
    "stages": {
        "pretrain": {"tokens_b": 100, "seq_len": 32768, "recompute": "none", "tp": 4, "cp": 4},
        "sft": {"samples": 20000, "tokens_per_sample": 32768, "seq_len": 32768, "recompute": "full"},
        "dpo": {"pairs": 10000, "chosen_tokens": 6000, "rejected_tokens": 6000, "seq_len": 8192},
        "rl": {"algorithm": "grpo", "reward": "rule", "steps": 50, "prompt_tokens": 2048, "response_tokens": 8192},
        "eval": {"context_tokens": 16384},
    },
}

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
    "fp8_moe_pinned_layout": FP8_MOE_PINNED_LAYOUT,
    "gelu_config_lora": GELU_CONFIG_LORA,
    "mm_llava_image": MM_LLAVA_IMAGE,
    "mm_video_trained_encoder": MM_VIDEO_TRAINED_ENCODER,
    "mm_audio_precomputed": MM_AUDIO_PRECOMPUTED,
    "mm_qformer_frozen_connector": MM_QFORMER_FROZEN_CONNECTOR,
    "sliding_window_long_context": SLIDING_WINDOW_LONG_CONTEXT,
}
