"""The numba kernel: one scenario vector -> stages x line items (+ per-stage stats).

``_eval_one`` is the private kernel, a short orchestrator over one named
function per stage's work (``_pretrain_work`` ... ``_eval_work``), the hidden
time around it (``_hidden_time``, ``_retention``) and one per resource's money
(``_compute_usd`` ... ``_labor_ops_usd``); every dollar formula is in
:mod:`costcore.formulas`. The terms the explanations and pages show are written
into named stats (``STATS``). :func:`evaluate_vector` and
:func:`evaluate_batch` are the public wrappers. The batch kernel runs with
``parallel=True`` over chunks of variants of one base vector (a few fields
overridden per variant), so a million variants need no million-row input.

Thread safety: Streamlit serves each session in its own thread and numba's
default ``workqueue`` threading layer aborts when two threads enter a
parallel region at once, so parallel calls are serialized by a lock
(``costcore.engine.config.PARALLEL_LOCK``). Single-scenario calls are serial and
need no lock.
"""
from __future__ import annotations

import math
import threading

import numpy as np
from numba import njit, prange

from costcore.engine import config
from costcore.engine import layout as lay
from costcore.engine import sampling
from costcore.engine.formulas import (DAYS_PER_MONTH, HOURS_PER_MONTH, METHOD_FULL, METHOD_LORA, METHOD_QLORA,
                       frozen_base_bytes, data_stall_gpu_hours,
                       MODEL_PER_HARDWARE_FLOPS_FULL_RECOMPUTE, RECOMPUTE_MODE_FULL,
                       checkpoint_storage_usd, dataset_storage_usd,
                       attention_context, decode_gpu_seconds_per_token, fitting_replica, inference_tp, replica_tp, tp_splits_heads, kv_context, forward_flops_per_token, gpu_hours_for_flops,
                       gpu_time_usd, held_checkpoint_sum, held_checkpoints, kv_cache_bytes_per_token, labeling_usd,
                       lora_trainable_params, model_shape, dense_ffn, moe_expert_ffn, monthly_usd, per_sample_usd,
                       per_token_usd, staff_usd_per_month, synthetic_usd, train_flops_per_token, transfer_usd,
                       young_daly_interval_h, reserved_idle_gpu_hours, encoder_tokens_per_pass, encoder_passes_per_item,
                       media_tokens_per_item, encoder_forward_flops, connector_params, encoder_activation_bytes,
                       cpu_hours_usd, CONN_QFORMER, CONN_RESAMPLER, MODALITY_VIDEO, MODALITY_AUDIO)
from costcore.scenario.schema import (CKPT_WEIGHTS, CPT_EPOCHS, CPT_TOKENS_B, D_REVIEW, D_SYNTH_USD_PER_M, DPO_CHOSEN,
                     DPO_EPOCHS, DPO_PAIRS, DPO_REF_PRECOMPUTED, DPO_REFERENCE, DPO_REJECTED,
                     E_BUFFER_GB, E_LOGIT_BYTES, E_COLL_EFF, E_CONTENTION, E_TP_OVERLAP, E_DUAL_SMS, E_SUSTAINED, E_DP_OVERLAP, E_FP8_EFF, E_GEMM_HALF, E_GRAD_BYTES, E_TRAFFIC,
                     E_INFER_MFU, E_USABLE_MEM, EV_BENCH_M, EV_CONTEXT, EV_DECODE_BATCH, EV_DECODE_EFF, EV_DECODE_TP, EV_WEIGHT_BITS,
                     EV_GEN_M, EV_HUMAN, EV_MEDIA_K, EV_RUNS, EV_USD_HUMAN, H_ATTN_EFF, H_BW_TBS, H_MEM_GB, H_FP8_TFLOPS,
                     H_GEMM_EFF, H_INTRA_GBS, H_INTER_GBS, H_GPUS_PER_NODE, H_PRECISION, PRECISION_FP8,
                     H_NUM_GPUS, H_PEAK_TFLOPS, H_USD_GPU_H, H_RESERVED, H_RESERVED_MONTHS, H_RESERVED_GPUS, L_ROLES, M_ACTIVE_B, M_FFN, M_HEADS,
                     M_GATED, M_EXPERTS, M_EXPERTS_ACTIVE, M_SHARED_EXPERTS, M_MOE_FFN, M_NODE_LIMIT, M_WINDOW, M_WINDOW_SHARE,
                     M_HIDDEN, M_KV_HEADS, M_LAYERS, M_PARAMS_B, M_VOCAB, N_CKPT_REPLICAS,
                     N_DATASET_MOVES, N_EXPORTS, N_USD_PER_GB, NS, O_USD_PER_MONTH, PT_EPOCHS,
                     PT_TOKENS_B, R_FAIL_RATE, R_FAILED_RUNS, R_IDLE, R_RESTART_H, R_WRITE_GBPS,
                     RECOMPUTE_AUTO, RESOURCES, SCHEDULE_DUALPIPE, SCHEDULE_SEARCH, SEQ_PAR_ON, SEQ_PAR_OFF, S_DP, S_CP, S_EP, S_INTERLEAVE,
                     S_SCHEDULE, S_SEQ_PAR, S_GLOBAL_BATCH, S_GLOBAL_BATCH_TOKENS, RL_ALGO, RL_CRITIC_B, RL_PPO,
                     RL_PROMPT_TOK, RL_PROMPTS, RL_REFERENCE, RL_REFERENCE_LIVE, RL_RESPONSE_TOK,
                     RL_REWARD, RL_REWARD_B, RL_REWARD_MODEL, RL_ROLLOUT_BATCH, RL_ROLLOUT_EFF, RL_ROLLOUT_TP,
                     RL_SAMPLES, RL_STEPS, RL_UPDATE_EPOCHS, RL_VERIFIER_USD, S_ACQ_USD_B,
                     S_CKPT_INTERVAL_H, S_CKPT_TYPE, S_CLEAN_USD_B, S_ENABLED, S_EXP_SIZE,
                     S_EXPERIMENTS, S_KEEP_LAST, S_LABELS, S_LORA_RANK, S_LORA_TARGETS, S_METHOD,
                     S_MFU, S_MICRO_BATCH, S_MILESTONE, S_NUM_GPUS, S_PP, S_QLORA_DEQ, S_RECOMPUTE,
                     S_SEQ_LEN, S_SETUP_MO, S_TFLOPS, S_SYNTH_M, S_TOK_PER_GPU_S, S_TP, S_USD_PER_LABEL,
                     S_ZERO, SFT_EPOCHS, SFT_SAMPLES, SFT_TOK_PER_SAMPLE, STAGE_BASE, ST_BYTES_PER_TOKEN,
                     ST_COLD, ST_COLD_AFTER_D, ST_FINISHED_WEIGHTS, ST_FULL_CKPT_BPP, ST_HOT, ST_OBJECT, ST_RETENTION_MO,
                     ST_VERSIONS, ST_WEIGHTS_CKPT_BPP, H_PCIE_GBS, E_CPU_OPT_GBS, S_BASE_BITS, S_OPTIMIZER,
                     S_OFFLOAD, S_GRAD_ACCUM, S_LOADER_TPS, STAGES, MM_MODALITY, MM_ENC_B, MM_ENC_L, MM_ENC_D,
                     MM_PATCH, MM_RES, MM_ENC_TOK, MM_AUDIO_TPS, MM_MAX_S, MM_TILES, MM_FRAMES, MM_SECONDS,
                     MM_TOK_ITEM, MM_CONNECTOR, MM_QUERIES, MM_COMPRESS, MM_CONN_B, MM_RAW_MB, MM_SHARDS,
                     MM_PRECOMP, MM_CPU_S, MM_ONLINE, MM_LOADER_CORES, PREPROCESS_ONLINE, MM_USD_CPU_H,
                     MM_TRANSFERS, MS_SAMPLES, MS_ITEMS, MS_TEXT, MS_SHARE,
                     MS_EPOCHS, MS_TOK_ITEM, MS_RES, MS_TRAIN_CONN, MS_TRAIN_LLM, MS_TRAIN_ENC, MS_LICENSE, MS_CAPTION)
from costcore.scenario.schema import METHOD_QLORA as _SCHEMA_METHOD_QLORA

assert METHOD_QLORA == _SCHEMA_METHOD_QLORA, "formulas.METHOD_QLORA must be the schema's code"

# ---------------------------------------------------------------------------
# Line items, one table: (key, resource, fixed?, label, profile, reused?). Row order = column
# order of `items`.
#   fixed   committed whatever the run does (people, platform, bought data, datasets kept);
#           elastic = scales with GPU time, tokens, samples.
#   profile how budget.timeline spreads the item over the stage's calendar span:
#           setup = over the setup months; run = over the run; span = setup + run;
#           kept = from the run's start to the end of the retention period; end = on the last day.
#   reused  data a repeated post-training iteration reuses (lifecycle.data_reuse of it is not
#           bought again; budget.iteration_items).
# ---------------------------------------------------------------------------
LINE_ITEM_TABLE = (
    ("compute.gpu", "compute", False, "Productive GPU time", "run", False),
    ("compute.verifier", "compute", False, "Reward verifier (CPU sandbox)", "run", False),
    ("storage.dataset", "storage", True, "Datasets (object storage)", "kept", False),
    ("storage.ckpt_hot", "storage", False, "Checkpoints, hot tier", "kept", False),
    ("storage.ckpt_cold", "storage", False, "Checkpoints, cold tier", "kept", False),
    ("network.dataset", "network", False, "Dataset transfers", "run", False),
    ("network.ckpt_replication", "network", False, "Checkpoint replication", "end", False),
    ("network.model_export", "network", False, "Model export", "end", False),
    ("data.acquisition", "data", True, "Data acquisition", "setup", True),
    ("data.cleaning", "data", False, "Data cleaning", "setup", True),
    ("data.labeling", "data", False, "Labeling and review", "setup", True),
    ("data.synthetic", "data", False, "Synthetic data", "setup", True),
    ("data.human_eval", "data", False, "Human evaluation", "run", False),
    ("labor.team", "labor", True, "Team", "span", False),
    ("ops.platform", "ops", True, "Platform and operations", "span", False),
    ("hidden.failures", "hidden", False, "Failures and restarts", "run", False),
    ("hidden.ckpt_stalls", "hidden", False, "Checkpoint write stalls", "run", False),
    ("hidden.idle", "hidden", False, "Idle and queued GPUs", "run", False),
    ("hidden.experiments", "hidden", False, "Repeated experiments", "run", False),
    ("hidden.failed_runs", "hidden", False, "Failed runs", "run", False),
    ("hidden.data_stalls", "hidden", False, "Data-pipeline stalls", "run", False),
    ("compute.media_preprocessing", "compute", False, "Media preprocessing (CPU)", "setup", False),
    ("storage.media", "storage", True, "Media storage (raw, shards, features)", "kept", False),
    ("network.media", "network", False, "Media transfers", "run", False),
    ("data.media_license", "data", True, "Media licensing", "setup", True),
    ("data.captioning", "data", False, "Captioning and transcription", "setup", True),
    ("hidden.reserved_idle", "hidden", False, "Idle reserved capacity", "run", False),
)
PROFILES = ("setup", "run", "span", "kept", "end")
# The first four columns, as (key, resource, fixed, label) rows: what api.py and the tests unpack.
LINE_ITEMS = tuple(row[:4] for row in LINE_ITEM_TABLE)
ITEM_PROFILE = tuple(row[4] for row in LINE_ITEM_TABLE)
ITEM_REUSED = np.array([1.0 if row[5] else 0.0 for row in LINE_ITEM_TABLE])
NI = len(LINE_ITEMS)
ITEM_RESOURCE = np.array([RESOURCES.index(r) for _, r, _, _ in LINE_ITEMS], dtype=np.int64)
ITEM_FIXED = np.array([1.0 if f else 0.0 for _, _, f, _ in LINE_ITEMS])
# GPU time, productive and hidden: fixed cost when the GPUs are reserved (hardware.reserved, a commitment billed
# whether used or not), elastic on demand
ITEM_GPU_TIME = np.array([1.0 if k == "compute.gpu" or k.startswith("hidden.") else 0.0 for k, _, _, _ in LINE_ITEMS])
ITEM_FIXED_RESERVED = np.maximum(ITEM_FIXED, ITEM_GPU_TIME)


def item_fixed(reserved: bool) -> np.ndarray:
    """Which line items are fixed cost (1.0): ITEM_FIXED, and the GPU time too on reserved GPUs."""
    return ITEM_FIXED_RESERVED if reserved else ITEM_FIXED


NR = len(RESOURCES)
(I_COMPUTE, I_VERIFIER, I_ST_DATA, I_ST_HOT, I_ST_COLD, I_NET_DATA, I_NET_REPL, I_NET_EXPORT,
 I_DATA_ACQ, I_DATA_CLEAN, I_DATA_LABEL, I_DATA_SYNTH, I_DATA_HEVAL, I_LABOR, I_OPS,
 I_HID_FAIL, I_HID_STALL, I_HID_IDLE, I_HID_EXP, I_HID_FAILED, I_HID_DATA, I_MM_PREP, I_MM_STORE, I_MM_NET,
 I_MM_LICENSE, I_MM_CAPTION, I_HID_RESERVED) = range(NI)

# Per-stage statistics (columns of `stats`). Append new names at the end: the order is the layout.
STATS = ("enabled", "num_gpus", "productive_gpu_hours", "gpu_hours", "wall_days", "months", "flops",
         "mfu", "tokens", "interruptions", "ckpt_interval_h", "young_daly_h", "ckpt_count",
         "ckpt_gb", "ckpt_write_s", "dataset_gb", "storage_peak_gb", "memory_per_gpu_gb", "fits",
         "min_gpus", "rollout_gpu_hours", "trainable_params_b", "usd_total", "fixed_usd", "recompute_mode",
         # the terms the explanations, timeline and pages show (0 where they do not apply):
         "ctx_tokens",  # attention context used in the FLOPs, tokens
         "unique_tokens",  # tokens of one copy of the stage's data
         "trainable_params",  # trainable (and checkpointed) parameters, count
         "ckpt_bytes",  # one checkpoint, bytes
         "setup_months", "run_months",  # months = setup + run
         "ckpt_spacing_h",  # hours between checkpoints written (wall time / count)
         "ckpt_held",  # checkpoints kept after the stage (keep-last-K + milestones)
         "ckpt_kept_gb",  # size of each kept one (weights only when storage.finished_weights_only)
         "ckpt_held_gb",  # GB held after the stage: on the hot tier for ckpt_hot_months, then cold
         "ckpt_hot_months", "ckpt_cold_months",  # months on each tier after the stage
         "ckpt_in_run_gb_months",  # checkpoint GB-months stored during the run (hot)
         "dataset_copy_gb",  # one copy of the dataset (dataset_gb holds all versions)
         "verifier_samples",  # RL samples scored in the CPU sandbox
         "human_eval_samples",  # evaluation samples scored by people
         "model_layers", "model_hidden", "active_params",  # the model's shape as used (count)
         "train_flops_per_token",  # FLOPs per trained token of the stage's model (one update pass)
         "passes_gpu_hours",  # RL: productive GPU-hours of the scoring and update passes (not rollouts)
         "usable_memory_gb",  # GPU memory a plan may use (memory_gb x usable fraction)
         "gpu_usd",  # billed GPU time (productive + hidden), $
         # the job layout of a training stage (costcore/engine/layout.py): its plan ...
         "plan_tp", "plan_pp", "plan_dp", "plan_cp", "plan_ep", "plan_micro_batch", "plan_zero",
         "plan_interleave", "plan_sp", "plan_dualpipe",
         # ... one optimizer step's time, split into named terms (s) ...
         "step_time_s", "step_compute_s", "step_communication_s", "step_bubble_s", "step_recompute_s",
         "step_optimizer_s",
         # ... memory per GPU by kind (GB), plans searched that fit, the step's shape
         "mem_weights_gb", "mem_grads_gb", "mem_optimizer_gb", "mem_activations_gb", "mem_buffers_gb",
         "plans_fitting", "micro_batches", "global_batch", "plan_mfu", "plan_tokens_per_gpu_s",
         # ... the exposed communication by collective (s per step; they sum to step_communication_s)
         "step_tp_comm_s", "step_dp_comm_s", "step_zero_comm_s", "step_cp_comm_s", "step_ep_comm_s",
         "step_p2p_s",
         # ... and the plan's own memory per GPU (memory_per_gpu_gb may be an RL rollout replica's)
         "plan_memory_gb", "plan_gpus_used",
         # ... fine-tuning: CPU offload and paging seconds per step, optimizer state paged out (GB);
         # the data pipeline's stall, the time of one epoch and the sustained training rate
         "plan_offload_s", "mem_paged_gb", "data_stall_gpu_hours", "epoch_hours", "tokens_per_s_per_gpu",
         # ... multimodal phases: media items, tokens per item in the LLM, encoder passes and the
         # encoder + connector share of the GPU time, media tokens' share of the LLM's, preprocessing
         # CPU-hours, raw / feature storage, the connector's and encoder's parameters
         "media_items", "media_tokens_per_item", "encoder_passes_per_item", "encoder_gpu_hours",
         "media_token_share", "preprocess_cpu_hours", "media_raw_gb", "media_features_gb",
         "connector_params", "encoder_params",
         # ... RL rollouts and evaluation: GPUs of one decoding replica and the sequences it decodes at once
         "decode_replica_gpus", "decode_batch_used",
         # ... and an RL decoding replica's memory per GPU: its BF16 weights and its KV cache (GB)
         "rollout_weights_gb", "rollout_kv_gb",
         # ... a training stage's frozen base: bytes per weight, 1 when quantized (dequantized before its matmuls)
         "base_bytes_per_param", "quantized_base",
         # ... and of the step's compute: dequantizing that base and the LoRA adapters (s per step)
         "step_dequant_s", "step_adapter_s",
         # ... a multimodal phase decoding its media online: items per second its GPUs take and its
         # loader delivers, per node (0 when preprocessed offline or read as precomputed features)
         "media_items_per_s_per_node", "media_loader_items_per_s_per_node")
NK = len(STATS)
(K_ENABLED, K_GPUS, K_PROD_H, K_GPU_H, K_WALL_D, K_MONTHS, K_FLOPS, K_MFU, K_TOKENS, K_INTERRUPT,
 K_CKPT_INT, K_YOUNG_DALY, K_CKPT_N, K_CKPT_GB, K_CKPT_WRITE_S, K_DATASET_GB, K_STORAGE_PEAK_GB,
 K_MEM_GB, K_FITS, K_MIN_GPUS, K_ROLLOUT_H, K_TRAINABLE_B, K_USD, K_FIXED, K_RECOMPUTE,
 K_CTX, K_UNIQUE_TOKENS, K_TRAINABLE, K_CKPT_BYTES,
 K_SETUP_MO, K_RUN_MO, K_CKPT_SPACING_H, K_CKPT_HELD, K_CKPT_KEPT_GB, K_CKPT_HELD_GB, K_CKPT_HOT_MO,
 K_CKPT_COLD_MO, K_CKPT_IN_RUN_GBMO, K_DATASET_COPY_GB, K_VERIFIER_SAMPLES, K_HUMAN_SAMPLES,
 K_LAYERS, K_HIDDEN, K_ACTIVE, K_FPT, K_PASSES_H, K_USABLE_GB, K_GPU_USD,
 K_PLAN_TP, K_PLAN_PP, K_PLAN_DP, K_PLAN_CP, K_PLAN_EP, K_PLAN_MB, K_PLAN_ZERO, K_PLAN_V, K_PLAN_SP,
 K_PLAN_DUAL,
 K_STEP, K_STEP_COMPUTE, K_STEP_COMM, K_STEP_BUBBLE, K_STEP_RECOMP, K_STEP_OPT,
 K_MEM_W, K_MEM_G, K_MEM_O, K_MEM_A, K_MEM_B, K_PLANS_FIT, K_MICRO, K_GLOBAL_BATCH, K_PLAN_MFU,
 K_PLAN_TOKS, K_COMM_TP, K_COMM_DP, K_COMM_ZERO, K_COMM_CP, K_COMM_EP, K_COMM_P2P, K_PLAN_MEM,
 K_PLAN_USED, K_PLAN_OFFLOAD, K_MEM_PAGED, K_DATA_STALL_H, K_EPOCH_H, K_TOKS_RATE,
 K_MM_ITEMS, K_MM_TOK_ITEM, K_MM_PASSES, K_MM_ENC_H, K_MM_SHARE, K_MM_CPU_H, K_MM_RAW_GB, K_MM_FEAT_GB,
 K_MM_CONN, K_MM_ENC, K_DEC_TP, K_DEC_B, K_ROLL_W, K_ROLL_KV, K_BASE_BYTES, K_QBASE, K_STEP_DEQUANT,
 K_STEP_ADAPTER, K_MM_EAT_IPS, K_MM_LOADER_IPS) = range(NK)
# Scratch rows the callers allocate for _eval_one (it allocates nothing): model, hw, job, pins,
# one plan row, the best plan; then one row per stage of plans to reuse (batch).
SCRATCH_ROWS = 6
R_MODEL, R_HW, R_JOB, R_PINS, R_ROW, R_BEST = range(SCRATCH_ROWS)
NSCRATCH = max(lay.NROW, len(lay.MODEL_FIELDS), len(lay.HW_FIELDS), len(lay.JOB_FIELDS))

# A stage's kept plan (rows of the ``plans`` arrays the search fills and a reuse reads): the plan
# fields, then the fewest GPUs it fits on and how many plans the search found to fit (0: none; the plan
# kept is then the fallback shown, and a reuse must report it as not fitting too).
PLAN_MIN_G, PLAN_FOUND = lay.NP, lay.NP + 1
PLAN_COLS = lay.NP + 2

# Batch output columns ("full" mode): the resources, then these.
BATCH_EXTRA = ("gpu_hours", "productive_gpu_hours", "wall_days", "fits")
NBATCH_FULL = NR + len(BATCH_EXTRA)

PRETRAIN, CPT, MM_ALIGN, MM_CPT, MM_TUNE, SFT, DPO, RL, EVAL = (STAGES.index(n) for n in (
    "pretrain", "cpt", "mm_align", "mm_cpt", "mm_tune", "sft", "dpo", "rl", "eval"))
_CHUNK = 512
SERIAL_BELOW = 4096  # variants; below this the parallel launch costs more than it saves


# ---------------------------------------------------------------------------
# Speed note: the parts below are separate functions for reading, one machine-code loop
# after compiling. LLVM inlines the small ones by itself; the larger ones (the stage work,
# memory, MFU, hidden time, retention) it would leave as calls that cost ~10 ns each with
# array arguments, so they are inlined by numba (inline='always'). Each part writes row s
# of the 2-D stats/items arrays (no per-stage views: each would add reference counting).
# _eval_one is compiled without numba's runtime (_nrt=False): it allocates nothing and only
# reads and writes arrays its caller owns, so the atomic reference counts numba otherwise
# emits for every array handed to an inlined part (a third of the kernel's time) are not
# needed. The callers (_single, _batch_range) allocate with the runtime as before.
# Numbers are unchanged: every expression keeps its operation order (tests/test_golden.py).
# ---------------------------------------------------------------------------

# ---------------------------------------------------------------------------
# The model: shape and sizes every stage reads
# ---------------------------------------------------------------------------
@njit(cache=True)
def _model(x):
    """(n_total, act_b, n_act, L, d, a, kv_heads, ffn, vocab, kv_dim, kv_bytes_per_token) of the scenario's model.

    n_total: all parameters (count); act_b / n_act: active ones per token (billions / count, MoE);
    the shape from formulas.model_shape when not given; a dense model's FFN then from
    formulas.dense_ffn, so the shape holds the parameters the user gave (a MoE's dense FFN: 8d/3
    when gated, the 8 d^2 parameters of a 4d GELU MLP).
    """
    n_total = x[M_PARAMS_B] * 1e9
    # at most all of them (schema._active_rule refuses more; a batch column may still ask for it)
    act_b = min(x[M_ACTIVE_B], x[M_PARAMS_B]) if x[M_ACTIVE_B] > 0.0 else x[M_PARAMS_B]
    L, d, a, kvh, ffn = model_shape(act_b, x[M_LAYERS], x[M_HIDDEN], x[M_HEADS], x[M_KV_HEADS], x[M_FFN])
    head_dim = d / a
    if x[M_FFN] <= 0.0:
        nmat = 3.0 if x[M_GATED] > 0.5 else 2.0
        if x[M_EXPERTS] <= 0.0 and n_total <= 1.05 * act_b * 1e9:
            ffn = dense_ffn(n_total, L, d, a * head_dim, kvh * head_dim, x[M_VOCAB], nmat)
        elif nmat == 3.0:
            ffn = 8.0 * d / 3.0
    kv_tok = kv_cache_bytes_per_token(L, kvh, head_dim)
    return n_total, act_b, act_b * 1e9, L, d, a, kvh, ffn, x[M_VOCAB], kvh * head_dim, kv_tok


# ---------------------------------------------------------------------------
# The job layout of a training stage: plan, step time, memory (costcore/engine/layout.py)
# ---------------------------------------------------------------------------
@njit(cache=True)
def _experts(x, shape):
    """(routed experts, active per token, shared, an expert's inner width) of the model; zeros for a dense one.

    Top-k defaults to 2. A MoE known only by total and active size: fine-grained DeepSeek-style experts,
    top-8, with 8 x total / active of them (DeepSeek-V3: 256 of 671B / 37B; assumption, docs/layout.md).
    The width is model.moe_ffn, else formulas.moe_expert_ffn.
    """
    n_total, n_act, L, d, ffn = shape[0], shape[2], shape[3], shape[4], shape[7]
    E = x[M_EXPERTS]
    k = x[M_EXPERTS_ACTIVE] if x[M_EXPERTS_ACTIVE] > 0.0 else 2.0
    if E <= 0.0 and n_total > 1.05 * n_act:
        k = 8.0
        E = 8.0 * math.floor(n_total / n_act + 0.5)
    if E <= 0.0:
        return 0.0, 0.0, 0.0, 0.0
    nmat = 3.0 if x[M_GATED] > 0.5 else 2.0
    f_exp = x[M_MOE_FFN] if x[M_MOE_FFN] > 0.0 else moe_expert_ffn(n_total, n_act, E, k, L, d, nmat, ffn)
    return E, k, x[M_SHARED_EXPERTS], f_exp


@njit(cache=True)
def _fill_model(x, shape, n_lora, method, m):
    """The layout's model array (layout.MODEL_FIELDS) from the scenario and its shape."""
    n_total, _, n_act, L, d, a, kvh, ffn, vocab, _, _ = shape
    m[lay.M_L] = L
    m[lay.M_H] = d
    m[lay.M_A] = a
    m[lay.M_KV] = kvh
    m[lay.M_HD] = d / a
    m[lay.M_FFN] = ffn
    m[lay.M_V] = vocab
    m[lay.M_GATED] = x[M_GATED]
    E, k, shared, f_exp = _experts(x, shape)
    nmat = 3.0 if x[M_GATED] > 0.5 else 2.0
    m[lay.M_E] = E
    m[lay.M_K] = k
    m[lay.M_SHARED] = shared
    n_exp = 0.0
    if E > 0.0:
        n_exp = min(0.98 * n_total, E * L * nmat * d * f_exp)
    m[lay.M_MOE_FFN] = f_exp
    m[lay.M_NTOT] = n_total
    m[lay.M_NACT] = n_act
    m[lay.M_NEXP] = n_exp
    m[lay.M_NTRAIN] = n_total if method == METHOD_FULL else n_lora
    m[lay.M_NODES] = x[M_NODE_LIMIT] if E > 0.0 else 0.0


@njit(cache=True)
def _fill_hw(x, w):
    """The layout's hardware array (layout.HW_FIELDS): catalog figures and the efficiency knobs, in SI units."""
    w[lay.W_PEAK] = x[H_PEAK_TFLOPS] * 1e12
    w[lay.W_FP8] = x[H_FP8_TFLOPS] * 1e12
    w[lay.W_MEM] = x[H_MEM_GB] * 1e9 * x[E_USABLE_MEM]
    w[lay.W_HBM] = x[H_BW_TBS] * 1e12
    w[lay.W_INTRA] = x[H_INTRA_GBS] * 1e9
    w[lay.W_INTER] = x[H_INTER_GBS] * 1e9
    w[lay.W_GPN] = x[H_GPUS_PER_NODE]
    w[lay.W_GEMM] = x[H_GEMM_EFF]
    w[lay.W_ATTN] = x[H_ATTN_EFF]
    w[lay.W_COLL] = x[E_COLL_EFF]
    w[lay.W_HALF] = lay.gemm_half_dim_for(x[E_GEMM_HALF], x[H_PEAK_TFLOPS], x[H_BW_TBS])
    w[lay.W_TRAFFIC] = x[E_TRAFFIC]
    w[lay.W_OVERLAP] = x[E_DP_OVERLAP]
    w[lay.W_BUFFER] = x[E_BUFFER_GB] * 1e9
    w[lay.W_FP8_EFF] = x[E_FP8_EFF]
    w[lay.W_GRAD_BYTES] = x[E_GRAD_BYTES]
    w[lay.W_CONTENTION] = x[E_CONTENTION]
    w[lay.W_PCIE] = x[H_PCIE_GBS] * 1e9
    w[lay.W_CPU_BW] = x[E_CPU_OPT_GBS] * 1e9
    w[lay.W_TP_OVERLAP] = x[E_TP_OVERLAP]
    w[lay.W_DUAL_SMS] = x[E_DUAL_SMS]
    w[lay.W_LOGIT] = x[E_LOGIT_BYTES]


@njit(cache=True)
def _actx(x, ctx):
    """The stage's attention context (tokens): ``ctx`` for causal attention in every layer, less when the model
    has sliding-window layers (formulas.attention_context; model.sliding_window and its share of layers)."""
    return attention_context(ctx, x[M_WINDOW], x[M_WINDOW_SHARE])


@njit(cache=True)
def _kvctx(x, ctx):
    """Tokens of KV cache a sequence of ``ctx`` tokens holds per layer (formulas.kv_context): fewer in
    sliding-window layers."""
    return kv_context(ctx, x[M_WINDOW], x[M_WINDOW_SHARE])


@njit(cache=True)
def _fill_job_pins(x, b, G, method, ctx, mbs_mult, extra_w, fpt, j, pins, media_act=0.0):
    """The layout's job array (layout.JOB_FIELDS) and the stage's pinned plan fields (0 / -1 = search)."""
    ctx = max(ctx, 1.0)
    j[lay.J_SEQ] = ctx
    gb = x[b + S_GLOBAL_BATCH]
    if gb <= 0.0:
        gb = max(1.0, math.floor(x[b + S_GLOBAL_BATCH_TOKENS] / (ctx * mbs_mult)))
    j[lay.J_GB] = gb
    j[lay.J_G] = G
    j[lay.J_METHOD] = method
    j[lay.J_OPT] = x[b + S_OPTIMIZER]
    j[lay.J_OFFLOAD] = x[b + S_OFFLOAD]
    j[lay.J_ACCUM] = x[b + S_GRAD_ACCUM]
    j[lay.J_MBS] = mbs_mult
    j[lay.J_EXTRA] = extra_w
    # FP8 only where the GPU has FP8 tensor cores (else the job runs, and stores, BF16; a warning says so)
    j[lay.J_FP8] = 1.0 if (x[H_PRECISION] == PRECISION_FP8 and x[H_FP8_TFLOPS] > x[H_PEAK_TFLOPS]) else 0.0
    # the frozen base of LoRA (formulas.frozen_base_bytes): FP8 or BF16 as the job runs; NF4 for QLoRA; LLM.int8
    # for an 8-bit base; a quantized one is dequantized before every matmul, plus the knob's extra share
    base, quantized = frozen_base_bytes(method, x[b + S_BASE_BITS], j[lay.J_FP8] > 0.5)
    j[lay.J_QBASE] = quantized
    j[lay.J_DEQ] = x[b + S_QLORA_DEQ] if quantized > 0.5 else 0.0
    j[lay.J_BASE_BYTES] = base
    j[lay.J_FPT] = fpt
    j[lay.J_TOKSEQ] = ctx * mbs_mult
    j[lay.J_MEDIA_ACT] = media_act
    j[lay.J_ACTX] = _actx(x, ctx)
    j[lay.J_DUAL] = lay.SCHED_1F1B
    if x[b + S_SCHEDULE] == SCHEDULE_DUALPIPE:
        j[lay.J_DUAL] = lay.SCHED_DUALPIPE
    elif x[b + S_SCHEDULE] == SCHEDULE_SEARCH:
        j[lay.J_DUAL] = lay.SCHED_EITHER
    pins[lay.P_TP] = x[b + S_TP]
    pins[lay.P_PP] = x[b + S_PP]
    pins[lay.P_DP] = x[b + S_DP]
    pins[lay.P_CP] = x[b + S_CP]
    pins[lay.P_EP] = x[b + S_EP]
    pins[lay.P_MB] = x[b + S_MICRO_BATCH]
    pins[lay.P_RC] = x[b + S_RECOMPUTE] - 1.0  # choices auto, none, selective, full -> -1, 0, 1, 2
    pins[lay.P_ZERO] = x[b + S_ZERO]
    pins[lay.P_V] = 1.0 if j[lay.J_DUAL] == lay.SCHED_DUALPIPE else x[b + S_INTERLEAVE]  # DualPipe: its own two chunks
    sp = -1.0
    if x[b + S_SEQ_PAR] == SEQ_PAR_ON:
        sp = 1.0
    elif x[b + S_SEQ_PAR] == SEQ_PAR_OFF:
        sp = 0.0
    pins[lay.P_SP] = sp


@njit(cache=True)
def _fallback_plan(model, hw, job, pins, row):
    """The plan shown when none fits: the pins, else the most sharded plan among the degrees the search
    tries (tensor up to 8 dividing the heads, a pipeline degree the search takes for the layers; the
    most GPUs in tp x pp, the larger tp on a tie), ZeRO-3, full recompute."""
    G = job[lay.J_G]
    tp, pp = 1.0, 1.0
    for c in lay.TP_CHOICES:
        t = pins[lay.P_TP] if pins[lay.P_TP] > 0.0 else c
        if pins[lay.P_TP] <= 0.0 and (t > min(8.0, G) or not lay._tp_ok(t, model, pins)):
            continue
        q = pins[lay.P_PP]
        if q <= 0.0:
            q = 1.0
            for ipp in range(1, int(min(model[lay.M_L], math.floor(G / t))) + 1):
                if lay._pp_ok(ipp, model[lay.M_L]):
                    q = float(ipp)
        if t * q >= tp * pp:
            tp, pp = t, q
    cp = pins[lay.P_CP] if pins[lay.P_CP] > 0.0 else 1.0
    dp = pins[lay.P_DP] if pins[lay.P_DP] > 0.0 else max(1.0, math.floor(G / (tp * pp * cp)))
    ep = pins[lay.P_EP] if pins[lay.P_EP] > 0.0 else 1.0
    mb = pins[lay.P_MB] if pins[lay.P_MB] > 0.0 else 1.0
    rc = pins[lay.P_RC] if pins[lay.P_RC] >= 0.0 else 2.0
    zero = pins[lay.P_ZERO] if pins[lay.P_ZERO] >= 0.0 else 3.0
    v = pins[lay.P_V] if pins[lay.P_V] > 0.0 else 1.0
    sp = pins[lay.P_SP] if pins[lay.P_SP] >= 0.0 else (1.0 if tp > 1.0 else 0.0)
    dual = 1.0 if job[lay.J_DUAL] == lay.SCHED_DUALPIPE and pp > 1.0 and pp % 2.0 == 0.0 else 0.0
    lay._fill_plan(row, tp, pp, dp, cp, ep, mb, rc, zero, v, sp, dual)
    lay.plan_terms(model, hw, job, row, row)


# The chosen plan's fields and terms as stage stats: (stat, layout row field, divisor). One table for
# the kernel (_write_plan) and for api.Result.plan, which turns the stats back into a plan row.
PLAN_STATS = (
    ("plan_tp", "tp", 1.0), ("plan_pp", "pp", 1.0), ("plan_dp", "dp", 1.0), ("plan_cp", "cp", 1.0),
    ("plan_ep", "ep", 1.0), ("plan_micro_batch", "micro_batch", 1.0), ("recompute_mode", "recompute", 1.0),
    ("plan_zero", "zero", 1.0), ("plan_interleave", "interleave", 1.0), ("plan_sp", "sp", 1.0), ("plan_dualpipe", "dualpipe", 1.0),
    ("step_time_s", "step_time_s", 1.0), ("step_compute_s", "compute_s", 1.0),
    ("step_communication_s", "communication_s", 1.0), ("step_bubble_s", "bubble_s", 1.0),
    ("step_recompute_s", "recompute_s", 1.0), ("step_optimizer_s", "optimizer_s", 1.0),
    ("mem_weights_gb", "mem_weights", 1e9), ("mem_grads_gb", "mem_grads", 1e9),
    ("mem_optimizer_gb", "mem_optimizer", 1e9), ("mem_activations_gb", "mem_activations", 1e9),
    ("mem_buffers_gb", "mem_buffers", 1e9), ("micro_batches", "micro_batches", 1.0),
    ("plan_mfu", "mfu", 1.0), ("plan_tokens_per_gpu_s", "tokens_per_gpu_s", 1.0),
    ("step_tp_comm_s", "tp_comm_s", 1.0), ("step_dp_comm_s", "dp_comm_s", 1.0),
    ("step_zero_comm_s", "zero_comm_s", 1.0), ("step_cp_comm_s", "cp_comm_s", 1.0),
    ("step_ep_comm_s", "ep_comm_s", 1.0), ("step_p2p_s", "p2p_s", 1.0),
    ("plan_memory_gb", "mem_total", 1e9), ("plan_gpus_used", "gpus_used", 1.0),
    ("plan_offload_s", "offload_s", 1.0), ("mem_paged_gb", "mem_paged_out", 1e9),
    ("step_dequant_s", "dequant_s", 1.0), ("step_adapter_s", "adapter_s", 1.0))
_PLAN_ROW_FIELDS = lay.PLAN_FIELDS + lay.TERM_FIELDS
PLAN_STAT_COL = np.array([STATS.index(a) for a, _, _ in PLAN_STATS], dtype=np.int64)
PLAN_STAT_ROW = np.array([_PLAN_ROW_FIELDS.index(b) for _, b, _ in PLAN_STATS], dtype=np.int64)
PLAN_STAT_DIV = np.array([c for _, _, c in PLAN_STATS])


@njit(cache=True)
def _write_plan(st, s, best, fits):
    """The chosen plan's fields and terms into the stats row (PLAN_STATS), and how many plans fit."""
    for i in range(PLAN_STAT_COL.shape[0]):
        st[s, PLAN_STAT_COL[i]] = best[PLAN_STAT_ROW[i]] / PLAN_STAT_DIV[i]
    st[s, K_PLANS_FIT] = fits


@njit(cache=True, inline='always')
def _stage_layout(x, b, s, G, shape, method, n_lora, ctx, mbs_mult, extra_w, fpt, st, sc, plans, reuse,
                  media_act=0.0):
    """Search (or reuse) the stage's plan; returns (bytes per GPU, min GPUs, MFU).

    reuse > 0: take the plan and min GPUs in ``plans[s]`` (a batch's base plan, valid because
    the variant changed nothing the search reads); the terms are still evaluated for this x.
    reuse = 2 (a batch row that changed what some stages' searches read): take ``plans[s]`` where it
    holds a plan (``P_TP`` > 0), search the stages whose plan was cleared, without the GPU minimum.
    reuse < 0: search, but skip the GPU minimum (a batch row: evaluate_batch returns no stats).
    Otherwise the search runs and its plan is written to ``plans[s]``. The MFU is the given one,
    or the measured TFLOP/s converted, or the plan's.
    """
    model, hw, job, pins, row, best = sc[R_MODEL], sc[R_HW], sc[R_JOB], sc[R_PINS], sc[R_ROW], sc[R_BEST:R_BEST + 1]
    _fill_model(x, shape, n_lora, method, model)
    _fill_hw(x, hw)
    _fill_job_pins(x, b, G, method, ctx, mbs_mult, extra_w, fpt, job, pins, media_act)
    st[s, K_GLOBAL_BATCH] = job[lay.J_GB]
    st[s, K_BASE_BYTES] = job[lay.J_BASE_BYTES] if method != METHOD_FULL else 0.0
    st[s, K_QBASE] = job[lay.J_QBASE]
    if reuse > 0.5 and plans[s, lay.P_TP] > 0.0:
        for i in range(lay.NP):
            row[i] = plans[s, i]
        lay.plan_terms(model, hw, job, row, row)
        # as the search found it: how many plans fit (0 when none did and this is its fallback plan)
        fits = plans[s, PLAN_FOUND] if row[lay.T_FITS] > 0.5 else 0.0
        min_g = plans[s, PLAN_MIN_G]
    else:
        fits = float(lay.search(model, hw, job, pins, best, row, True))
        for i in range(lay.NROW):
            row[i] = best[0, i]
        if fits < 0.5:
            _fallback_plan(model, hw, job, pins, row)
        min_g = 0.0  # reuse < 0 or 2: a batch row; its outputs hold no GPU minimum, so none is looked for
        if reuse > -0.5 and reuse < 1.5:
            known = row[lay.T_USED] if fits > 0.5 else math.inf  # the best plan fits on the GPUs it uses
            min_g = lay.min_gpus(model, hw, job, pins, best[0], known)
        for i in range(lay.NP):
            plans[s, i] = row[i]
        plans[s, PLAN_MIN_G] = min_g
        plans[s, PLAN_FOUND] = fits
    _write_plan(st, s, row, fits)
    if job[lay.J_ACCUM] > 0.0:  # a step takes accum x dp x micro-batch sequences: the global batch the run trains on
        st[s, K_GLOBAL_BATCH] = job[lay.J_ACCUM] * row[lay.P_DP] * row[lay.P_MB]
    mem = row[lay.T_MEM]  # the plan's, as it is: a plan that does not run has plans_fitting 0 (_write_work)
    mfu = x[b + S_MFU]
    if mfu <= 0.0 and x[b + S_TFLOPS] > 0.0:  # hardware FLOP/s: full recompute does 8N instead of 6N per token
        mfu = x[b + S_TFLOPS] / x[H_PEAK_TFLOPS]
        if row[lay.P_RC] == RECOMPUTE_MODE_FULL:
            mfu *= MODEL_PER_HARDWARE_FLOPS_FULL_RECOMPUTE
    elif mfu <= 0.0:  # the plan's benchmark step rate, at the share a production run sustains
        mfu = row[lay.T_MFU] * x[E_SUSTAINED]
    st[s, K_MFU] = mfu
    return mem, min_g, mfu


@njit(cache=True)
def _write_setup(st, s, G, shape, trainable):
    """What the stage runs on into its stats row: GPUs, the model's shape, trainable parameters."""
    st[s, K_ENABLED] = 1.0
    st[s, K_GPUS] = G
    st[s, K_TRAINABLE] = trainable
    st[s, K_TRAINABLE_B] = trainable / 1e9
    st[s, K_LAYERS] = shape[3]
    st[s, K_HIDDEN] = shape[4]
    st[s, K_ACTIVE] = shape[2]


@njit(cache=True)
def _train_hours(x, b, tokens, flops, mfu):
    """Productive GPU-hours of training passes: measured tokens/s/GPU when given, else FLOPs at the MFU."""
    tps = x[b + S_TOK_PER_GPU_S]
    if tps > 0.0:
        return tokens / (tps * 3600.0)
    return gpu_hours_for_flops(flops, x[H_PEAK_TFLOPS], mfu)


@njit(cache=True)
def _write_work(x, st, s, tokens, unique_tokens, ctx, flops, prod_h, rollout_h, mem, min_g, short):
    """The stage's work into its stats row; fits = the memory fits, inference replicas fit the GPUs and
    a training stage's plan runs (the search found one that fits, K_PLANS_FIT; the fallback shown when
    none did keeps its own memory, which may be within the GPU's: a pinned TP larger than the GPUs).

    Returns (productive GPU-hours, unique tokens), what the hidden time and the money read next.
    """
    st[s, K_TOKENS] = tokens
    st[s, K_UNIQUE_TOKENS] = unique_tokens
    st[s, K_CTX] = ctx
    st[s, K_FLOPS] = flops
    st[s, K_PROD_H] = prod_h
    st[s, K_ROLLOUT_H] = rollout_h
    cap = x[H_MEM_GB] * 1e9 * x[E_USABLE_MEM]
    st[s, K_MEM_GB] = mem / 1e9
    st[s, K_USABLE_GB] = cap / 1e9
    plan_runs = s == EVAL or st[s, K_PLANS_FIT] > 0.5
    st[s, K_FITS] = 1.0 if (mem <= cap and not short and plan_runs) else 0.0
    st[s, K_MIN_GPUS] = min_g
    return prod_h, unique_tokens


# ---------------------------------------------------------------------------
# Each stage's work: tokens, FLOPs, MFU, memory, productive GPU-hours
# ---------------------------------------------------------------------------
@njit(cache=True, inline='always')
def _pretrain_work(x, s, b, G, shape, st, sc, plans, reuse):
    """Pre-training or continued pre-training: 6N + attention per token over tokens_b x 1e9 tokens."""
    n_act = shape[2]
    L, d = shape[3], shape[4]
    tok_b = x[PT_TOKENS_B] if s == PRETRAIN else x[CPT_TOKENS_B]
    epochs = x[PT_EPOCHS] if s == PRETRAIN else x[CPT_EPOCHS]
    tokens = tok_b * 1e9
    seq = x[b + S_SEQ_LEN]
    fpt = train_flops_per_token(n_act, L, d, _actx(x, seq), METHOD_FULL, 0.0)
    st[s, K_FPT] = fpt
    flops = fpt * tokens
    mem, min_g, mfu = _stage_layout(x, b, s, G, shape, METHOD_FULL, 0.0, seq, 1.0, 0.0, fpt, st, sc, plans, reuse)
    prod_h = _train_hours(x, b, tokens, flops, mfu)
    return _write_work(x, st, s, tokens, tokens / epochs, seq, flops, prod_h, 0.0, mem, min_g, False)


@njit(cache=True, inline='always')
def _sft_work(x, b, G, method, n_lora, shape, st, s, sc, plans, reuse):
    """Supervised fine-tuning: samples x tokens per sample x epochs; context = min(seq_len, sample)."""
    n_act, L, d = shape[2], shape[3], shape[4]
    tps_sample = x[SFT_TOK_PER_SAMPLE]
    unique_tokens = x[SFT_SAMPLES] * tps_sample
    tokens = unique_tokens * x[SFT_EPOCHS]
    ctx = min(x[b + S_SEQ_LEN], tps_sample)
    fpt = train_flops_per_token(n_act, L, d, _actx(x, ctx), method, n_lora)
    st[s, K_FPT] = fpt
    flops = fpt * tokens
    mem, min_g, mfu = _stage_layout(x, b, s, G, shape, method, n_lora, ctx, 1.0, 0.0, fpt, st, sc, plans, reuse)
    prod_h = _train_hours(x, b, tokens, flops, mfu)
    return _write_work(x, st, s, tokens, unique_tokens, ctx, flops, prod_h, 0.0, mem, min_g, False)


@njit(cache=True, inline='always')
def _dpo_work(x, b, G, method, n_lora, shape, st, s, sc, plans, reuse):
    """DPO: chosen + rejected per pair, trained each epoch; reference log-probs live or precomputed once.

    Micro-batches hold both responses (2x activations); a live reference of a full fine-tune is a
    second frozen copy of the weights. Reference passes run at the inference MFU.
    """
    n_total, n_act, L, d = shape[0], shape[2], shape[3], shape[4]
    per_pair = x[DPO_CHOSEN] + x[DPO_REJECTED]
    unique_tokens = x[DPO_PAIRS] * per_pair
    tokens = unique_tokens * x[DPO_EPOCHS]
    ctx = min(x[b + S_SEQ_LEN], max(x[DPO_CHOSEN], x[DPO_REJECTED]))
    actx = _actx(x, ctx)
    fpt = train_flops_per_token(n_act, L, d, actx, method, n_lora)
    st[s, K_FPT] = fpt
    train_flops = fpt * tokens
    ref_passes = 1.0 if x[DPO_REFERENCE] == DPO_REF_PRECOMPUTED else x[DPO_EPOCHS]
    ref_flops = forward_flops_per_token(n_act, L, d, actx) * unique_tokens * ref_passes
    ref_w = n_total if x[DPO_REFERENCE] != DPO_REF_PRECOMPUTED and method == METHOD_FULL else 0.0
    mem, min_g, mfu = _stage_layout(x, b, s, G, shape, method, n_lora, ctx, 2.0, ref_w, fpt, st, sc, plans, reuse)
    prod_h = _train_hours(x, b, tokens, train_flops, mfu)
    prod_h += gpu_hours_for_flops(ref_flops, x[H_PEAK_TFLOPS], x[E_INFER_MFU])
    return _write_work(x, st, s, tokens, unique_tokens, ctx, train_flops + ref_flops, prod_h, 0.0, mem, min_g, False)


@njit(cache=True)
def _rl_scoring_flops(x, n_act, L, d, ctx, tokens, method, n_lora, upd):
    """(train FLOPs, inference FLOPs, policy FLOPs per trained token) of one RL run's scoring and update passes.

    Policy old log-probs, live reference, reward model (when the reward is a model) forward
    passes; policy updates over update_epochs; PPO adds a critic (forward + update).
    """
    actx = _actx(x, ctx)
    fwd = forward_flops_per_token(n_act, L, d, actx)
    infer_flops = fwd * tokens  # old log-probs of the policy
    if x[RL_REFERENCE] == RL_REFERENCE_LIVE:
        infer_flops += fwd * tokens
    if x[RL_REWARD] == RL_REWARD_MODEL:
        n_rm = x[RL_REWARD_B] * 1e9 if x[RL_REWARD_B] > 0.0 else n_act
        infer_flops += forward_flops_per_token(n_rm, L, d, actx) * tokens
    fpt = train_flops_per_token(n_act, L, d, actx, method, n_lora)
    train_flops = fpt * tokens * upd
    if x[RL_ALGO] == RL_PPO:
        n_c = x[RL_CRITIC_B] * 1e9 if x[RL_CRITIC_B] > 0.0 else n_act
        infer_flops += forward_flops_per_token(n_c, L, d, actx) * tokens
        train_flops += train_flops_per_token(n_c, L, d, actx, METHOD_FULL, 0.0) * tokens * upd
    return train_flops, infer_flops, fpt


@njit(cache=True)
def _rl_colocated_params(x, shape):
    """BF16-weight equivalents of the models an RL stage holds besides the policy, count.

    Live reference and reward model: frozen copies (2 bytes per parameter); a PPO critic trains,
    so its 16 bytes per parameter (weights, gradients, Adam states) count as 8 BF16 copies.
    Colocated with the policy on the stage's GPUs (OpenRLHF / veRL hybrid engine).
    """
    n = 0.0
    if x[RL_REFERENCE] == RL_REFERENCE_LIVE:
        n += shape[0]
    if x[RL_REWARD] == RL_REWARD_MODEL:
        n += x[RL_REWARD_B] * 1e9 if x[RL_REWARD_B] > 0.0 else shape[2]
    if x[RL_ALGO] == RL_PPO:
        n += 8.0 * (x[RL_CRITIC_B] * 1e9 if x[RL_CRITIC_B] > 0.0 else shape[2])
    return n


@njit(cache=True)
def _fewest_replica(x, pinned, shape, seq_kv_bytes, bytes_per_param=2.0):
    """GPUs an inference replica needs at the least (what must fit): the pinned count, else
    formulas.fitting_replica's fewest that hold the weights (of ``bytes_per_param``) and one sequence's KV cache,
    else (past a node) formulas.inference_tp's; not the larger replica decode_gpu_seconds_per_token may find
    cheaper."""
    if pinned > 0.0:
        return pinned
    fit = fitting_replica(bytes_per_param * shape[0], seq_kv_bytes, x[H_MEM_GB], x[H_GPUS_PER_NODE], shape[5],
                          shape[6])
    return fit if fit > 0.0 else inference_tp(bytes_per_param * shape[0], x[H_MEM_GB], x[H_GPUS_PER_NODE], shape[5],
                                              shape[6])


@njit(cache=True, inline='always')
def _replica_refused(x, pinned, shape):
    """A pinned decoding replica whose tensor-parallel part splits the attention heads (formulas.replica_tp,
    formulas.tp_splits_heads): no serving engine runs it, so the stage cannot run as planned (a pinned replica
    of 3 GPUs on 64 heads was costed)."""
    return pinned > 0.0 and tp_splits_heads(replica_tp(pinned, x[H_GPUS_PER_NODE]), shape[5], shape[6])


@njit(cache=True, inline='always')
def _rl_work(x, b, G, method, n_lora, shape, st, s, sc, plans, reuse):
    """RL (PPO/GRPO): rollout generation (decode roofline + prefill), scoring passes, policy updates."""
    n_total, n_act, L, d, kv_tok = shape[0], shape[2], shape[3], shape[4], shape[10]
    peak = x[H_PEAK_TFLOPS]
    q = x[RL_PROMPTS] * x[RL_SAMPLES]
    steps = x[RL_STEPS]
    lp = x[RL_PROMPT_TOK]
    lr = x[RL_RESPONSE_TOK]
    ctx = lp + lr
    tokens = steps * (q * ctx)
    kv_ctx = _kvctx(x, ctx)
    dps, tp_inf, b_used = decode_gpu_seconds_per_token(
        n_total, n_act, kv_tok, _kvctx(x, lp + 0.5 * lr), kv_ctx, x[RL_ROLLOUT_BATCH], peak,
        x[H_BW_TBS], x[H_MEM_GB], x[RL_ROLLOUT_EFF], x[RL_ROLLOUT_TP], x[H_GPUS_PER_NODE], G, shape[5], shape[6])
    tp_need = _fewest_replica(x, x[RL_ROLLOUT_TP], shape, kv_tok * kv_ctx)
    prefill_h = gpu_hours_for_flops(forward_flops_per_token(n_act, L, d, _actx(x, lp)) * steps * q * lp, peak, x[E_INFER_MFU])
    rollout_h = steps * q * lr * dps / 3600.0 + prefill_h
    if x[RL_REWARD] != RL_REWARD_MODEL:
        st[s, K_VERIFIER_SAMPLES] = steps * q
    upd = x[RL_UPDATE_EPOCHS]
    train_flops, infer_flops, fpt = _rl_scoring_flops(x, n_act, L, d, ctx, tokens, method, n_lora, upd)
    mem, min_g, mfu = _stage_layout(x, b, s, G, shape, method, n_lora, ctx, 1.0, _rl_colocated_params(x, shape),
                                    fpt, st, sc, plans, reuse)
    train_h = _train_hours(x, b, tokens * upd, train_flops, mfu)
    infer_h = gpu_hours_for_flops(infer_flops, peak, x[E_INFER_MFU])
    prod_h = rollout_h + train_h + infer_h
    st[s, K_FPT] = fpt
    st[s, K_PASSES_H] = train_h + infer_h
    st[s, K_DEC_TP] = tp_inf
    st[s, K_DEC_B] = b_used
    st[s, K_ROLL_W] = 2.0 * n_total / tp_inf / 1e9  # an inference replica's weights and KV cache per GPU
    st[s, K_ROLL_KV] = b_used * kv_tok * kv_ctx / tp_inf / 1e9
    mem = max(mem, (2.0 * n_total + b_used * kv_tok * kv_ctx) / tp_inf)
    if min_g > 0.0 and tp_need > min_g:
        min_g = tp_need
    return _write_work(x, st, s, tokens, steps * x[RL_PROMPTS] * lp, ctx, train_flops + infer_flops, prod_h, rollout_h, mem, min_g,
                       tp_inf > G or _replica_refused(x, x[RL_ROLLOUT_TP], shape))


@njit(cache=True, inline='always')
def _eval_work(x, G, shape, st, s):
    """Evaluation: benchmark prompts (prefill, compute bound) and generated tokens (decode roofline) per run,
    the replicas holding the weights at stages.eval.weight_bits (a QLoRA model evaluated in 4 bits on its one GPU).

    A multimodal benchmark's items (stages.eval.media_items_k) each run the encoder's forward and the
    connector over their encoder tokens, and add their media tokens to the prefill; all at the
    inference MFU, as the prompts.
    """
    n_total, n_act, L, d, kv_tok = shape[0], shape[2], shape[3], shape[4], shape[10]
    runs = x[EV_RUNS]
    ctx = x[EV_CONTEXT]
    bench = x[EV_BENCH_M] * 1e6
    gen = x[EV_GEN_M] * 1e6
    kv_ctx = _kvctx(x, ctx)
    wb = x[EV_WEIGHT_BITS] / 8.0  # bytes per weight
    dps, tp_inf, b_used = decode_gpu_seconds_per_token(
        n_total, n_act, kv_tok, kv_ctx, kv_ctx, x[EV_DECODE_BATCH], x[H_PEAK_TFLOPS], x[H_BW_TBS], x[H_MEM_GB],
        x[EV_DECODE_EFF], x[EV_DECODE_TP], x[H_GPUS_PER_NODE], G, shape[5], shape[6], wb)
    fwd_tok = forward_flops_per_token(n_act, L, d, _actx(x, ctx))
    media_items = runs * x[EV_MEDIA_K] * 1e3
    media_tok, side = 0.0, 0.0
    if media_items > 0.0:
        t_pass, passes, tok_item, enc_fwd, n_conn = _media_shape(x, 0.0, shape)
        conn_tok = _connector_tokens(x, t_pass, passes, tok_item)
        media_tok = media_items * tok_item
        side = media_items * (enc_fwd + 2.0 * n_conn * conn_tok)
        st[s, K_MM_ITEMS] = media_items
        st[s, K_MM_TOK_ITEM] = tok_item
        st[s, K_MM_PASSES] = passes
        st[s, K_MM_SHARE] = media_tok / (media_tok + runs * bench)
        st[s, K_MM_CONN] = n_conn
        st[s, K_MM_ENC] = x[MM_ENC_B] * 1e9
        st[s, K_MM_ENC_H] = gpu_hours_for_flops(side, x[H_PEAK_TFLOPS], x[E_INFER_MFU])
    prefill = fwd_tok * (runs * bench + media_tok) + side
    flops = prefill + runs * 2.0 * n_act * gen
    rollout_h = runs * gen * dps / 3600.0
    prod_h = rollout_h + gpu_hours_for_flops(prefill, x[H_PEAK_TFLOPS], x[E_INFER_MFU])
    st[s, K_MFU] = x[E_INFER_MFU]
    st[s, K_HUMAN_SAMPLES] = runs * x[EV_HUMAN]
    st[s, K_DEC_TP] = tp_inf
    st[s, K_DEC_B] = b_used
    mem = (wb * n_total + b_used * kv_tok * kv_ctx) / tp_inf
    tp_need = _fewest_replica(x, x[EV_DECODE_TP], shape, kv_tok * kv_ctx, wb)
    return _write_work(x, st, s, runs * (bench + gen) + media_tok, bench + gen, ctx, flops, prod_h, rollout_h, mem,
                       tp_need, tp_inf > G or _replica_refused(x, x[EV_DECODE_TP], shape))


# ---------------------------------------------------------------------------
# Hidden GPU time: checkpoints, failures, idle, failed runs, experiments
# ---------------------------------------------------------------------------
@njit(cache=True)
def _media_shape(x, tok, shape, res=0.0):
    """(encoder tokens per pass, passes per item, LLM tokens per item, encoder forward FLOPs per item,
    connector parameters) of a multimodal stage or a multimodal evaluation (formulas:
    encoder_tokens_per_pass ... connector_params).

    Tokens per item: ``tok`` (a phase's own override; 0 = none), else the multimodal block's, else derived.
    Input resolution: ``res`` (a phase's own, stages.<phase>.resolution_px; 0 = none), else the block's.
    """
    mod = x[MM_MODALITY]
    t_pass = encoder_tokens_per_pass(mod, _res(x, res), x[MM_PATCH], x[MM_ENC_TOK], x[MM_AUDIO_TPS], x[MM_MAX_S])
    passes = encoder_passes_per_item(mod, x[MM_TILES], x[MM_FRAMES], x[MM_SECONDS], x[MM_MAX_S])
    if tok <= 0.0:
        tok = x[MM_TOK_ITEM]
    if tok <= 0.0:
        tok = media_tokens_per_item(mod, passes, t_pass, x[MM_SECONDS], x[MM_MAX_S], x[MM_CONNECTOR], x[MM_QUERIES],
                                    x[MM_COMPRESS])
    enc_fwd = encoder_forward_flops(x[MM_ENC_B] * 1e9, x[MM_ENC_L], x[MM_ENC_D], t_pass, passes)
    n_conn = x[MM_CONN_B] * 1e9
    if n_conn <= 0.0:
        n_conn = connector_params(x[MM_CONNECTOR], x[MM_ENC_D], shape[4], x[MM_COMPRESS])
    return t_pass, passes, tok, enc_fwd, n_conn


@njit(cache=True, inline='always')
def _res(x, own):
    """A phase's input resolution (pixels a side): its own when stated, else the multimodal block's."""
    return own if own > 0.0 else x[MM_RES]


@njit(cache=True, inline='always')
def _connector_tokens(x, t_pass, passes, tok_item):
    """Tokens one item sends through the connector: a Q-Former or resampler reads every encoder token of
    every pass; an MLP, linear or pixel-shuffle connector the item's media tokens."""
    if x[MM_CONNECTOR] == CONN_QFORMER or x[MM_CONNECTOR] == CONN_RESAMPLER:
        return passes * t_pass
    return tok_item


@njit(cache=True)
def _mm_train(x, b, shape, method, n_lora):
    """What a multimodal stage trains: (LLM method, LoRA adapters, trained side parameters, trained
    parameters checkpointed, frozen-or-trained extra weights for the layout, media activations per sequence).

    A frozen LLM still carries the gradients back to the connector: its FLOPs and memory are a LoRA
    base's (4N per token, weights at base bytes) with no adapters. The connector and a trained
    encoder are trained side parameters: with a LoRA or frozen LLM they are the layout's trained
    parameters (2 + 2 + master + states bytes each); with a full LLM they ride as extra weights
    of 8 BF16 copies (16 bytes: weights, gradients, Adam states; as an RL critic). Frozen parts
    are BF16 copies. A trained encoder keeps its activations (formulas.encoder_activation_bytes).
    """
    t_pass, passes, _, _, n_conn = _media_shape(x, x[b + MS_TOK_ITEM], shape, x[b + MS_RES])
    n_enc = x[MM_ENC_B] * 1e9
    tr_llm = x[b + MS_TRAIN_LLM] > 0.5
    tr_conn = x[b + MS_TRAIN_CONN] > 0.5
    tr_enc = x[b + MS_TRAIN_ENC] > 0.5
    m_llm = method if tr_llm else METHOD_LORA
    adapters = n_lora if (tr_llm and method != METHOD_FULL) else 0.0
    side = (n_conn if tr_conn else 0.0) + (n_enc if tr_enc else 0.0)
    frozen = (0.0 if tr_conn else n_conn) + (0.0 if (tr_enc or x[MM_PRECOMP] > 0.5) else n_enc)
    saved = (shape[0] if m_llm == METHOD_FULL else adapters) + side
    if m_llm == METHOD_FULL:
        n_train, extra = 0.0, frozen + 8.0 * side
    else:
        n_train, extra = adapters + side, frozen
    act = x[b + MS_ITEMS] * encoder_activation_bytes(x[MM_ENC_L], x[MM_ENC_D], t_pass, passes) if tr_enc else 0.0
    return m_llm, adapters, n_train, saved, extra, act


@njit(cache=True, inline='always')
def _mm_work(x, b, G, method, n_lora, shape, st, s, sc, plans, reuse):
    """A multimodal phase: the LLM over text + media tokens, the encoder and connector over every item.

    Tokens per sample: text + share x items x media tokens per item (the media sample's sequence,
    capped by seq_len, is the attention context). FLOPs: the LLM's per token (full, LoRA, or frozen
    = 4N) x tokens; the encoder's forward per item x 3 when trained, x 1 when frozen, once in all
    (not per epoch) with precomputed features; the connector 2 P per token through it, x 3 when
    anything before the LLM trains. All at the stage's MFU (the LLM plan's). Returns (productive
    GPU-hours, unique text tokens: the stored, bought and cleaned text; media is billed per item).
    """
    n_act, L, d = shape[2], shape[3], shape[4]
    t_pass, passes, tok_item, enc_fwd, n_conn = _media_shape(x, x[b + MS_TOK_ITEM], shape, x[b + MS_RES])
    m_llm, adapters, n_train, _, extra, act = _mm_train(x, b, shape, method, n_lora)
    items, share, text = x[b + MS_ITEMS], x[b + MS_SHARE], x[b + MS_TEXT]
    samples, epochs = x[b + MS_SAMPLES], x[b + MS_EPOCHS]
    media_items = samples * share * items
    unique_tokens = samples * (text + share * items * tok_item)
    tokens = unique_tokens * epochs
    ctx = max(1.0, min(x[b + S_SEQ_LEN], text + items * tok_item))
    fpt = train_flops_per_token(n_act, L, d, _actx(x, ctx), m_llm, adapters)
    tr_enc = x[b + MS_TRAIN_ENC] > 0.5
    enc_runs = 3.0 * epochs if tr_enc else (1.0 if x[MM_PRECOMP] > 0.5 else epochs)
    conn_tok = _connector_tokens(x, t_pass, passes, tok_item)
    conn_x = 3.0 if (x[b + MS_TRAIN_CONN] > 0.5 or tr_enc) else 1.0
    side_flops = media_items * (enc_fwd * enc_runs + 2.0 * n_conn * conn_tok * conn_x * epochs)
    flops = fpt * tokens + side_flops
    st[s, K_FPT] = fpt
    mem, min_g, mfu = _stage_layout(x, b, s, G, shape, m_llm, n_train, ctx, 1.0, extra, fpt, st, sc, plans, reuse,
                                    act)
    prod_h = _train_hours(x, b, tokens, flops, mfu)
    st[s, K_MM_ITEMS] = media_items
    st[s, K_MM_TOK_ITEM] = tok_item
    st[s, K_MM_PASSES] = passes
    st[s, K_MM_ENC_H] = prod_h * side_flops / flops if flops > 0.0 else 0.0
    st[s, K_MM_SHARE] = share * items * tok_item / (text + share * items * tok_item) if unique_tokens > 0.0 else 0.0
    st[s, K_MM_CONN] = n_conn
    st[s, K_MM_ENC] = x[MM_ENC_B] * 1e9
    _write_work(x, st, s, tokens, unique_tokens, ctx, flops, prod_h, 0.0, mem, min_g, False)
    return prod_h, samples * text


@njit(cache=True, inline='always')
def _media_cpu_s(x):
    """CPU-seconds to decode and resize one media item: the input, else 0.02 s per image, 0.25 s per
    sampled video frame, 0.01 s per second of audio (data/schema.yaml multimodal.preprocess_cpu_s_per_item)."""
    cpu_s = x[MM_CPU_S]
    if cpu_s <= 0.0:
        mod = x[MM_MODALITY]
        cpu_s = 0.25 * x[MM_FRAMES] if mod == MODALITY_VIDEO else (0.01 * x[MM_SECONDS] if mod == MODALITY_AUDIO
                                                                    else 0.02)
    return cpu_s


@njit(cache=True, inline='always')
def _media_online(x, b):
    """The data loader decodes the media every epoch: online preprocessing, unless a frozen encoder's features
    are precomputed (decoded once, then read)."""
    return x[MM_ONLINE] == PREPROCESS_ONLINE and not (x[MM_PRECOMP] > 0.5 and x[b + MS_TRAIN_ENC] < 0.5)


@njit(cache=True)
def _media_usd(x, b, months, st, s, it):
    """A multimodal stage's media: CPU preprocessing, raw + preprocessed copies in object storage for the
    stage and its retention, precomputed features on the hot tier during the run, transfers, licences
    and captions per item. Defaults per modality when the size or CPU time is 0 (schema docs)."""
    n = st[s, K_MM_ITEMS]
    mod = x[MM_MODALITY]
    raw_mb = x[MM_RAW_MB]
    if raw_mb <= 0.0:
        raw_mb = 10.0 if mod == MODALITY_VIDEO else (0.032 * x[MM_SECONDS] if mod == MODALITY_AUDIO else 0.15)
    cpu_h = n * _media_cpu_s(x) * (x[b + MS_EPOCHS] if _media_online(x, b) else 1.0) / 3600.0
    raw_gb = n * raw_mb / 1e3
    feat_gb = 0.0
    if x[MM_PRECOMP] > 0.5 and x[b + MS_TRAIN_ENC] < 0.5:
        feat_gb = n * st[s, K_MM_PASSES] * encoder_tokens_per_pass(mod, _res(x, x[b + MS_RES]), x[MM_PATCH], x[MM_ENC_TOK],
                                                                   x[MM_AUDIO_TPS], x[MM_MAX_S]) * x[MM_ENC_D] * 2.0 / 1e9
    st[s, K_MM_CPU_H] = cpu_h
    st[s, K_MM_RAW_GB] = raw_gb
    st[s, K_MM_FEAT_GB] = feat_gb
    # what the stage holds at its end counts its media too: raw, its sharded copies and the features (a LLaVA
    # alignment held 390 GB of checkpoints and text next to 84 TB of images, and said 390 GB)
    st[s, K_STORAGE_PEAK_GB] += raw_gb * (1.0 + x[MM_SHARDS]) + feat_gb
    it[s, I_MM_PREP] = cpu_hours_usd(cpu_h, x[MM_USD_CPU_H])
    it[s, I_MM_STORE] = (dataset_storage_usd(x[ST_OBJECT], raw_gb * (1.0 + x[MM_SHARDS]), months, x[ST_RETENTION_MO])
                         + monthly_usd(x[ST_HOT] * feat_gb, st[s, K_RUN_MO]))
    it[s, I_MM_NET] = transfer_usd(raw_gb, x[MM_TRANSFERS], x[N_USD_PER_GB])
    it[s, I_MM_LICENSE] = per_sample_usd(n, x[b + MS_LICENSE])
    it[s, I_MM_CAPTION] = per_sample_usd(n, x[b + MS_CAPTION])


@njit(cache=True)
def _checkpoint_plan(x, s, b, G, ckpt_bytes, wall_h):
    """(write_h, failures per hour, Young/Daly interval, interval used, checkpoints written) of a stage.

    Evaluation writes no checkpoints: its interval is its wall time (for the lost-work term).
    """
    write_h = ckpt_bytes / (x[R_WRITE_GBPS] * G * 1e9) / 3600.0
    lam = x[R_FAIL_RATE] * G
    mtbi = 1.0 / lam if lam > 0.0 else math.inf
    yd = young_daly_interval_h(write_h, mtbi) if s != EVAL else 0.0
    tau = x[b + S_CKPT_INTERVAL_H]
    if tau <= 0.0:
        tau = yd
    if s == EVAL or not (tau < wall_h):
        tau = wall_h
    n_ckpt = max(1.0, math.floor(wall_h / tau)) if (s != EVAL and wall_h > 0.0) else 0.0
    return write_h, lam, yd, tau, n_ckpt


@njit(cache=True, inline='always')
def _hidden_time(x, s, b, G, prod_h, ckpt_bytes, st):
    """Hidden GPU-hours (failures, checkpoint stalls, idle, failed runs, experiments) and the calendar.

    Failures lose half an interval plus the restart each (Llama 3 arXiv:2407.21783 Sec. 3.3.4 rate);
    every checkpoint stalls all G GPUs while written; a data loader slower than the GPUs stretches
    the run (formulas.data_stall_gpu_hours). Returns the six hidden GPU-hour terms (failures,
    stalls, idle, failed runs, experiments, data stalls) and (months, checkpoints, GB each, spacing h).
    """
    data_h = 0.0
    if s != EVAL and s != RL and prod_h > 0.0:
        per_node = min(G, x[H_GPUS_PER_NODE]) * st[s, K_TOKENS] / (prod_h * 3600.0)
        data_h = data_stall_gpu_hours(prod_h, per_node, x[b + S_LOADER_TPS])
        if (s == MM_ALIGN or s == MM_CPT or s == MM_TUNE) and _media_online(x, b):
            # online media decoding: items per second per node the GPUs take against what the loader's
            # cores decode; the slower of the two pipelines (tokens, media) sets the stall
            eat = min(G, x[H_GPUS_PER_NODE]) * st[s, K_MM_ITEMS] * x[b + MS_EPOCHS] / (prod_h * 3600.0)
            deliver = x[MM_LOADER_CORES] / _media_cpu_s(x)
            st[s, K_MM_EAT_IPS] = eat
            st[s, K_MM_LOADER_IPS] = deliver
            data_h = max(data_h, data_stall_gpu_hours(prod_h, eat, deliver))
    train_h = prod_h + data_h
    st[s, K_DATA_STALL_H] = data_h
    if st[s, K_TOKENS] > 0.0 and s != EVAL:
        st[s, K_TOKS_RATE] = st[s, K_TOKENS] / (train_h * 3600.0)
        st[s, K_EPOCH_H] = train_h / G * st[s, K_UNIQUE_TOKENS] / st[s, K_TOKENS]
    wall_h = train_h / G
    write_h, lam, yd, tau, n_ckpt = _checkpoint_plan(x, s, b, G, ckpt_bytes, wall_h)
    stall_h = n_ckpt * write_h * G
    interruptions = wall_h * lam
    fail_h = interruptions * (0.5 * tau + x[R_RESTART_H]) * G
    idle_h = x[R_IDLE] * prod_h
    failed_h = x[R_FAILED_RUNS] * prod_h
    main_h = train_h + fail_h + stall_h + idle_h + failed_h
    exp_h = x[b + S_EXPERIMENTS] * x[b + S_EXP_SIZE] * main_h
    billed = main_h + exp_h
    run_months = billed / G / 24.0 / DAYS_PER_MONTH
    st[s, K_GPU_H] = billed
    st[s, K_WALL_D] = main_h / G / 24.0
    st[s, K_SETUP_MO] = x[b + S_SETUP_MO]
    st[s, K_RUN_MO] = run_months
    st[s, K_INTERRUPT] = interruptions
    st[s, K_CKPT_INT] = tau if s != EVAL else 0.0
    st[s, K_YOUNG_DALY] = yd if yd < 1e30 else 0.0
    st[s, K_CKPT_N] = n_ckpt
    st[s, K_CKPT_BYTES] = ckpt_bytes
    st[s, K_CKPT_GB] = ckpt_bytes / 1e9
    st[s, K_CKPT_WRITE_S] = write_h * 3600.0
    spacing_h = wall_h / n_ckpt if n_ckpt > 0.0 else 0.0
    st[s, K_CKPT_SPACING_H] = spacing_h
    months = x[b + S_SETUP_MO] + run_months
    st[s, K_MONTHS] = months
    return (fail_h, stall_h, idle_h, failed_h, exp_h, data_h), (months, n_ckpt, ckpt_bytes / 1e9, spacing_h)


@njit(cache=True, inline='always')
def _retention(x, b, n_ckpt, ckpt_gb, spacing_h, unique_tokens, st, s):
    """Checkpoints held during and after the stage: keep-last-K + milestones, hot then cold.

    Writes held count and GB at the end, GB-months during the run, months on each tier; returns
    (GB-months in the run, held, GB each kept, months hot after, dataset GB, one copy's GB).
    """
    keep = x[b + S_KEEP_LAST]
    mile = x[b + S_MILESTONE]
    retention = x[ST_RETENTION_MO]
    hot_after = min(retention, x[ST_COLD_AFTER_D] / DAYS_PER_MONTH)
    held = held_checkpoints(n_ckpt, keep, mile) if n_ckpt > 0.0 else 0.0
    # checkpoint k is written at the end of interval k: the set held after it is stored for the
    # next interval, so during the run that is k = 1..n-1 (the n-th is written as the run ends)
    in_run = ckpt_gb * held_checkpoint_sum(n_ckpt - 1.0, keep, mile) * spacing_h / HOURS_PER_MONTH
    st[s, K_CKPT_IN_RUN_GBMO] = in_run
    kept_gb = ckpt_gb  # size of each checkpoint retained after the stage
    if x[ST_FINISHED_WEIGHTS] > 0.5 and x[b + S_CKPT_TYPE] != CKPT_WEIGHTS:
        kept_gb = ckpt_gb * x[ST_WEIGHTS_CKPT_BPP] / x[ST_FULL_CKPT_BPP]
    st[s, K_CKPT_HELD] = held
    st[s, K_CKPT_KEPT_GB] = kept_gb
    st[s, K_CKPT_HELD_GB] = held * kept_gb
    st[s, K_CKPT_HOT_MO] = hot_after
    st[s, K_CKPT_COLD_MO] = retention - hot_after
    one_copy_gb = unique_tokens * x[ST_BYTES_PER_TOKEN] / 1e9
    dataset_gb = one_copy_gb * x[ST_VERSIONS]
    st[s, K_DATASET_COPY_GB] = one_copy_gb
    st[s, K_DATASET_GB] = dataset_gb
    st[s, K_STORAGE_PEAK_GB] = held * ckpt_gb + dataset_gb  # at the end of the run, before conversion
    return in_run, held, kept_gb, hot_after, dataset_gb, one_copy_gb


# ---------------------------------------------------------------------------
# Each resource's money (formulas in costcore.formulas)
# ---------------------------------------------------------------------------
@njit(cache=True)
def _compute_usd(x, prod_h, hidden, st, s, it):
    """Productive and hidden GPU time, the RL verifier's sandbox runs."""
    price = x[H_USD_GPU_H]
    fail_h, stall_h, idle_h, failed_h, exp_h, data_h = hidden
    it[s, I_COMPUTE] = gpu_time_usd(prod_h, price)
    st[s, K_GPU_USD] = gpu_time_usd(st[s, K_GPU_H], price)  # shown by explain; not a line item
    it[s, I_VERIFIER] = per_sample_usd(st[s, K_VERIFIER_SAMPLES], x[RL_VERIFIER_USD])
    it[s, I_HID_FAIL] = gpu_time_usd(fail_h, price)
    it[s, I_HID_STALL] = gpu_time_usd(stall_h, price)
    it[s, I_HID_IDLE] = gpu_time_usd(idle_h, price)
    it[s, I_HID_FAILED] = gpu_time_usd(failed_h, price)
    it[s, I_HID_EXP] = gpu_time_usd(exp_h, price)
    it[s, I_HID_DATA] = gpu_time_usd(data_h, price)


@njit(cache=True)
def _storage_usd(x, months, kept, s, it):
    """Checkpoints on the hot and cold tiers; datasets in object storage for the stage and its retention."""
    in_run, held, kept_gb, hot_after, dataset_gb, _ = kept
    hot, cold = checkpoint_storage_usd(x[ST_HOT], x[ST_COLD], in_run, held, kept_gb, hot_after, x[ST_RETENTION_MO])
    it[s, I_ST_HOT] = hot
    it[s, I_ST_COLD] = cold
    it[s, I_ST_DATA] = dataset_storage_usd(x[ST_OBJECT], dataset_gb, months, x[ST_RETENTION_MO])


@njit(cache=True)
def _network_usd(x, trainable, kept, s, it):
    """Dataset moves, replication of the kept checkpoints, exports of the finished weights."""
    _, held, kept_gb, _, _, one_copy_gb = kept
    usd_gb = x[N_USD_PER_GB]
    it[s, I_NET_DATA] = transfer_usd(one_copy_gb, x[N_DATASET_MOVES], usd_gb)
    it[s, I_NET_REPL] = transfer_usd(held * kept_gb, x[N_CKPT_REPLICAS], usd_gb)
    if s != EVAL:
        it[s, I_NET_EXPORT] = transfer_usd(trainable * x[ST_WEIGHTS_CKPT_BPP] / 1e9, x[N_EXPORTS], usd_gb)


@njit(cache=True)
def _data_usd(x, b, unique_tokens, st, s, it):
    """Bought and cleaned tokens, labels with review, synthetic tokens, human evaluation."""
    unique_b = unique_tokens / 1e9
    it[s, I_DATA_ACQ] = per_token_usd(unique_b, x[b + S_ACQ_USD_B])
    it[s, I_DATA_CLEAN] = per_token_usd(unique_b, x[b + S_CLEAN_USD_B])
    it[s, I_DATA_LABEL] = labeling_usd(x[b + S_LABELS], x[b + S_USD_PER_LABEL], x[D_REVIEW])
    it[s, I_DATA_SYNTH] = synthetic_usd(x[b + S_SYNTH_M], x[D_SYNTH_USD_PER_M])
    it[s, I_DATA_HEVAL] = per_sample_usd(st[s, K_HUMAN_SAMPLES], x[EV_USD_HUMAN])


@njit(cache=True)
def _team_usd_per_month(x):
    """Payroll of every role, $/month."""
    team = 0.0
    for r in range(len(L_ROLES)):
        team += staff_usd_per_month(x[L_ROLES[r][0]], x[L_ROLES[r][1]])
    return team


@njit(cache=True)
def _labor_ops_usd(x, team_usd_month, months, s, it):
    """People and platform, billed for the stage's setup + run months."""
    it[s, I_LABOR] = monthly_usd(team_usd_month, months)
    it[s, I_OPS] = monthly_usd(x[O_USD_PER_MONTH], months)


@njit(cache=True)
def _reserved_idle_usd(x, st, it):
    """The reservation's unused GPU-hours (formulas.reserved_idle_gpu_hours) at the GPU price, shared among the
    stages by their billed GPU-hours: hardware.reserved_gpus (0: hardware.num_gpus) for hardware.reserved_months."""
    used = 0.0
    for s in range(NS):
        if x[STAGE_BASE[s] + S_ENABLED] > 0.5:
            used += st[s, K_GPU_H]
    if used <= 0.0:
        return
    gpus = x[H_RESERVED_GPUS] if x[H_RESERVED_GPUS] > 0.0 else x[H_NUM_GPUS]
    idle = reserved_idle_gpu_hours(gpus, x[H_RESERVED_MONTHS], used)
    for s in range(NS):
        if x[STAGE_BASE[s] + S_ENABLED] > 0.5:
            it[s, I_HID_RESERVED] = gpu_time_usd(idle * st[s, K_GPU_H] / used, x[H_USD_GPU_H])


@njit(cache=True)
def _totals(st, s, it, reserved):
    """Stage total and its fixed part, $ (on reserved GPUs their time is fixed: item_fixed)."""
    tot = 0.0
    fixed = 0.0
    for i in range(NI):
        tot += it[s, i]
        fixed += it[s, i] * (ITEM_FIXED_RESERVED[i] if reserved else ITEM_FIXED[i])
    st[s, K_USD] = tot
    st[s, K_FIXED] = fixed


@njit(cache=True)
def _stage_method(x, b, s, shape, mm):
    """(method, LoRA adapter parameters, trained parameters checkpointed) of stage s.

    The fine-tuning method applies to SFT, DPO, RL and the multimodal phases (others train fully);
    LoRA on a 4-bit NF4 base is QLoRA. A multimodal phase trains what its switches say (_mm_train).
    """
    method = x[b + S_METHOD] if (s == SFT or s == DPO or s == RL or mm) else METHOD_FULL
    if method == METHOD_LORA and x[b + S_BASE_BITS] == 4.0:
        method = METHOD_QLORA
    n_lora = 0.0
    if method != METHOD_FULL:
        E, _, shared, f_exp = _experts(x, shape)  # a MoE's MLP adapters: one set per expert (routed and shared)
        n_lora = lora_trainable_params(shape[3], shape[4], shape[9], f_exp if E > 0.0 else shape[7],
                                       x[b + S_LORA_RANK], x[b + S_LORA_TARGETS], 3.0 if x[M_GATED] > 0.5 else 2.0,
                                       E + shared if E > 0.0 else 1.0)
    trainable = shape[0] if method == METHOD_FULL else n_lora
    if mm:
        trainable = _mm_train(x, b, shape, method, n_lora)[3]
    return method, n_lora, trainable


# ---------------------------------------------------------------------------
# The orchestrator
# ---------------------------------------------------------------------------
@njit(cache=True, _nrt=False)
def _eval_one(x, items, stats, sc, plans, reuse):
    """Evaluate one scenario vector into items (NS x NI, $) and stats (NS x NK).

    Per enabled stage: its work (tokens, FLOPs, MFU, memory, productive GPU-hours), the hidden
    time and checkpoints around it, then each resource's money.
    """
    items[:, :] = 0.0
    stats[:, :] = 0.0
    st = stats  # each part writes row s of the stats and items (2-D indexing: no array views)
    it = items
    shape = _model(x)
    team_usd_month = _team_usd_per_month(x)
    for s in range(NS):
        b = STAGE_BASE[s]
        if x[b + S_ENABLED] < 0.5:
            continue
        G = x[b + S_NUM_GPUS] if x[b + S_NUM_GPUS] > 0.0 else x[H_NUM_GPUS]
        mm = s == MM_ALIGN or s == MM_CPT or s == MM_TUNE
        method, n_lora, trainable = _stage_method(x, b, s, shape, mm)
        _write_setup(st, s, G, shape, trainable)
        if s == PRETRAIN or s == CPT:
            prod_h, unique_tokens = _pretrain_work(x, s, b, G, shape, st, sc, plans, reuse)
        elif s == SFT:
            prod_h, unique_tokens = _sft_work(x, b, G, method, n_lora, shape, st, s, sc, plans, reuse)
        elif s == DPO:
            prod_h, unique_tokens = _dpo_work(x, b, G, method, n_lora, shape, st, s, sc, plans, reuse)
        elif s == RL:
            prod_h, unique_tokens = _rl_work(x, b, G, method, n_lora, shape, st, s, sc, plans, reuse)
        elif mm:
            prod_h, unique_tokens = _mm_work(x, b, G, method, n_lora, shape, st, s, sc, plans, reuse)
        else:
            prod_h, unique_tokens = _eval_work(x, G, shape, st, s)
        bpp = x[ST_WEIGHTS_CKPT_BPP] if x[b + S_CKPT_TYPE] == CKPT_WEIGHTS else x[ST_FULL_CKPT_BPP]
        hidden, cal = _hidden_time(x, s, b, G, prod_h, trainable * bpp if s != EVAL else 0.0, st)
        months, n_ckpt, ckpt_gb, spacing_h = cal
        kept = _retention(x, b, n_ckpt, ckpt_gb, spacing_h, unique_tokens, st, s)
        _compute_usd(x, prod_h, hidden, st, s, it)
        _storage_usd(x, months, kept, s, it)
        _network_usd(x, trainable, kept, s, it)
        _data_usd(x, b, unique_tokens, st, s, it)
        _labor_ops_usd(x, team_usd_month, months, s, it)
        if mm:
            _media_usd(x, b, months, st, s, it)
    if x[H_RESERVED] > 0.5:
        _reserved_idle_usd(x, st, it)
    for s in range(NS):
        if x[STAGE_BASE[s] + S_ENABLED] > 0.5:
            _totals(st, s, it, x[H_RESERVED] > 0.5)


@njit(cache=True)
def _write_row(out, i, items, stats):
    ncol = out.shape[2]
    for s in range(NS):
        fits = stats[s, K_FITS] if stats[s, K_ENABLED] > 0.5 else 1.0  # a stage switched off never blocks
        if ncol <= 2:
            out[i, s, 0] = stats[s, K_USD]
            if ncol == 2:
                out[i, s, 1] = fits
            continue
        for c in range(ncol):
            out[i, s, c] = 0.0
        for it in range(NI):
            out[i, s, ITEM_RESOURCE[it]] += items[s, it]
        out[i, s, NR] = stats[s, K_GPU_H]
        out[i, s, NR + 1] = stats[s, K_PROD_H]
        out[i, s, NR + 2] = stats[s, K_WALL_D]
        out[i, s, NR + 3] = fits


@njit(cache=True)
def _batch_range(base, idx, cols, out, start, stop, row_plans, row_plan, plan_free, field_stage):
    """Rows start..stop-1: row i sets base[idx[j]] = cols[j, i] for every j, then evaluates.

    row_plan[i] >= 0: row i takes the plans row_plans[row_plan[i]] (searched once for every row
    with the same inputs the search reads: the base's, or one combination of them); -1: the row
    keeps the base's plans (row_plans[0]) for every stage whose search reads nothing it changed and
    searches the others (``plan_free``: inputs no search reads; ``field_stage``: the one stage an
    input belongs to, -1 for model, hardware and efficiency inputs, which every stage reads).
    """
    x = base.copy()
    items = np.empty((NS, NI))
    stats = np.empty((NS, NK))
    sc = np.zeros((SCRATCH_ROWS, NSCRATCH))
    plans = np.zeros((NS, PLAN_COLS))
    k = idx.shape[0]
    for i in range(start, stop):
        for j in range(k):
            x[idx[j]] = cols[j, i]
        reuse = 1.0
        src = max(row_plan[i], 0)
        for r in range(NS):
            for c in range(PLAN_COLS):
                plans[r, c] = row_plans[src, r, c]
        if row_plan[i] < 0:  # clear the plans of the stages whose search reads a changed input
            reuse = 2.0
            for j in range(k):
                f = idx[j]
                if not plan_free[f] and cols[j, i] != base[f]:
                    if field_stage[f] < 0:
                        for r in range(NS):
                            plans[r, lay.P_TP] = 0.0
                    else:
                        plans[field_stage[f], lay.P_TP] = 0.0
        _eval_one(x, items, stats, sc, plans, reuse)
        _write_row(out, i, items, stats)


@njit(cache=True, parallel=True)
def _batch_kernel(base, idx, cols, out, row_plans, row_plan, plan_free, field_stage):
    """Evaluate ``base`` with column i of ``cols`` written at ``idx``, for every i, in parallel chunks.

    cols: (k, n), one contiguous row per varied input (so callers fill it without a transpose).
    out: (n, NS, 1) stage totals in $, (n, NS, 2) totals and fits (1/0), or (n, NS, NBATCH_FULL)
    resources in $ followed by gpu_hours, productive_gpu_hours, wall_days and fits.
    """
    n = cols.shape[1]
    nchunks = (n + _CHUNK - 1) // _CHUNK
    for c in prange(nchunks):
        _batch_range(base, idx, cols, out, c * _CHUNK, min(n, (c + 1) * _CHUNK), row_plans, row_plan, plan_free,
                     field_stage)


@njit(cache=True)
def _batch_serial(base, idx, cols, out, row_plans, row_plan, plan_free, field_stage):
    """Same as _batch_kernel on one thread: small batches skip the thread-pool launch."""
    _batch_range(base, idx, cols, out, 0, cols.shape[1], row_plans, row_plan, plan_free, field_stage)


@njit(cache=True)
def _single(x, reuse):
    """One scenario: (items, stats, plans). reuse 0: searched with GPU minima; -1: a batch's plans only (no
    GPU minimum). Always called with a float ``reuse``: one compiled signature, the one warm_up compiles."""
    items = np.empty((NS, NI))
    stats = np.empty((NS, NK))
    sc = np.zeros((SCRATCH_ROWS, NSCRATCH))
    plans = np.zeros((NS, PLAN_COLS))
    _eval_one(x, items, stats, sc, plans, reuse)
    return items, stats, plans


@njit(cache=True)
def _stage_top(x, s, top, prune):
    """The plans of training stage s that fit, fastest first, into ``top`` (k x layout.NROW); returns how many fit.

    Runs the stage once (for its GPUs, context, FLOPs per token and trainable parameters), then the
    same search the stage's estimate ran, keeping the k best instead of one. ``prune`` False: every
    candidate timed, no branch and bound (tests/test_search_bound.py checks both give the same plans).
    """
    items = np.empty((NS, NI))
    stats = np.empty((NS, NK))
    sc = np.zeros((SCRATCH_ROWS, NSCRATCH))
    plans = np.zeros((NS, PLAN_COLS))
    _eval_one(x, items, stats, sc, plans, 0.0)
    b = STAGE_BASE[s]
    shape = _model(x)
    mm = s == MM_ALIGN or s == MM_CPT or s == MM_TUNE
    method, n_lora, _ = _stage_method(x, b, s, shape, mm)  # as the estimate: the method, the LoRA adapters
    mbs = 2.0 if s == DPO else 1.0
    extra = 0.0
    act = 0.0
    if s == DPO and x[DPO_REFERENCE] != DPO_REF_PRECOMPUTED and method == METHOD_FULL:
        extra = shape[0]
    if s == RL:  # the models an RL stage holds besides the policy, as its estimate does
        extra = _rl_colocated_params(x, shape)
    if mm:  # as _mm_work: the LLM's method, trained side parameters, extra weights, encoder activations
        method, _, n_lora, _, extra, act = _mm_train(x, b, shape, method, n_lora)
    _fill_model(x, shape, n_lora, method, sc[R_MODEL])
    _fill_hw(x, sc[R_HW])
    _fill_job_pins(x, b, stats[s, K_GPUS], method, stats[s, K_CTX], mbs, extra, stats[s, K_FPT], sc[R_JOB],
                   sc[R_PINS], act)
    return lay.search(sc[R_MODEL], sc[R_HW], sc[R_JOB], sc[R_PINS], top, sc[R_ROW], prune)


def _vec(x) -> np.ndarray:
    """``x`` as the one array type the kernels are compiled for (and warm_up compiles): C-contiguous,
    float64, writeable. A read-only vector (a frozen scenario's) would make numba compile every kernel
    again for that type, ~15 s on 2 cores on a page's first use; a copy of a few thousand floats costs ~1 us."""
    x = np.ascontiguousarray(x, dtype=np.float64)
    return x if x.flags.writeable else x.copy()


def stage_plans(x: np.ndarray, stage_index: int, k: int = 10) -> tuple[np.ndarray, int]:
    """(top plans, number that fit) of one training stage: rows of layout.PLAN_FIELDS + layout.TERM_FIELDS."""
    top = np.zeros((max(1, int(k)), lay.NROW))
    n = _stage_top(_vec(x), int(stage_index), top, True)
    return top[:min(int(n), top.shape[0])], int(n)


def error_band(stats: np.ndarray, log_p10: np.ndarray, log_p90: np.ndarray, layout_stage: np.ndarray) -> np.ndarray:
    """P10 and P90 of each stage's GPU-hours and dollars: (NS, 4) = gpu_h_p10, gpu_h_p90, usd_p10, usd_p90.

    A stage whose speed comes from its job layout gets GPU-hours x exp(log_p10[s] / log_p90[s]), the
    percentiles of ln(published / predicted) over the public runs of its kind predicted out of sample
    (costcore/validation/calibration.py, data/calibration.yaml); its dollars move by the billed GPU
    time's share (labor, ops, storage and data held at the point estimate). Other stages (a given
    MFU or throughput, evaluation) keep their point value.
    """
    out = np.zeros((NS, 4))
    for s in range(NS):
        lo = math.exp(log_p10[s]) if layout_stage[s] else 1.0
        hi = math.exp(log_p90[s]) if layout_stage[s] else 1.0
        out[s, 0] = stats[s, K_GPU_H] * lo
        out[s, 1] = stats[s, K_GPU_H] * hi
        out[s, 2] = stats[s, K_USD] + (lo - 1.0) * stats[s, K_GPU_USD]
        out[s, 3] = stats[s, K_USD] + (hi - 1.0) * stats[s, K_GPU_USD]
    return out


@njit(cache=True)
def _single_reusing(x, plans):
    """One scenario on known plans (``plans``: what ``_single`` found for a vector that differs from
    ``x`` only in inputs no search reads): the terms, costs and stats for this x, no search."""
    items = np.empty((NS, NI))
    stats = np.empty((NS, NK))
    sc = np.zeros((SCRATCH_ROWS, NSCRATCH))
    _eval_one(x, items, stats, sc, plans, 1.0)
    return items, stats


_EVAL_MEMO: dict = {}  # the vector's bytes -> (items, stats): the pages ask for one scenario several times a rerun
_EVAL_MEMO_MAX = 512
_SEARCHED: dict = {}  # x[~PLAN_FREE] bytes -> plans (NS, PLAN_COLS), GPU minima included


def _searched(x):
    """(plans, (items, stats) when this call searched, else None): the search's plans of ``x``, kept per value
    of the inputs it reads."""
    pkey = x[~PLAN_FREE].tobytes()
    known = _SEARCHED.get(pkey)
    if known is not None:
        return known, None
    items, stats, plans = _single(x, 0.0)
    _keep(_SEARCHED, pkey, plans, _PLAN_MEMO_MAX)
    return plans, (items, stats)


def _keep(memo: dict, key, value, most: int) -> None:
    """Store in a process-wide memo, emptied when it holds ``most`` entries (sessions share it: a lock)."""
    with _PLAN_MEMO_LOCK:
        if len(memo) >= most:
            memo.clear()
        memo[key] = value


def clear_memos() -> None:
    """Forget every searched plan and kept result (tests that need a search afresh)."""
    with _PLAN_MEMO_LOCK:
        _EVAL_MEMO.clear()
        _SEARCHED.clear()
        _PLAN_MEMO.clear()


def evaluate_vector(x: np.ndarray):
    """Evaluate one scenario vector. Returns (items[NS, NI] in $, stats[NS, NK]).

    The layout search runs once per distinct value of the inputs it reads (``~PLAN_FREE``): a
    scenario that differs from one seen before only in prices, epochs, samples, data or people
    takes that one's plans and GPU minima (``_single_reusing``; tests/test_kernel_parts.py checks
    every preset against a fresh search). An exact repeat returns the kept result (copies).
    """
    x = _vec(x)
    key = x.tobytes()
    got = _EVAL_MEMO.get(key)
    if got is None:
        known, fresh = _searched(x)
        items, stats = fresh if fresh is not None else _single_reusing(x, known.copy())
        got = (items, stats)
        _keep(_EVAL_MEMO, key, got, _EVAL_MEMO_MAX)
    return got[0].copy(), got[1].copy()


# Inputs the plan search never reads: a batch that varies only these reuses the base's plans.
def _plan_free_mask() -> np.ndarray:
    from costcore.scenario import schema as _sc
    free = np.zeros(_sc.NF, dtype=np.bool_)
    read = {"num_gpus", "seq_len", "micro_batch", "global_batch", "global_batch_tokens", "recompute", "zero_stage",
            "tp", "pp", "dp", "cp", "ep", "interleave", "sequence_parallel", "schedule", "method", "lora_rank", "lora_targets",
            "qlora_dequant_overhead", "enabled", "tokens_per_sample", "chosen_tokens", "rejected_tokens",
            "reference", "prompt_tokens", "response_tokens", "prompts_per_step", "samples_per_prompt",
            "base_bits", "optimizer", "offload", "grad_accum", "items_per_sample", "text_tokens_per_sample",
            "tokens_per_item", "train_connector", "train_llm", "train_encoder",
            # RL's co-located models (reference, reward, critic) hold memory beside the policy (_rl_colocated_params)
            "algorithm", "reward", "reward_params_b", "critic_params_b"}
    for f in _sc.FIELDS:
        sec, _, key = f.path.partition(".")
        if sec in ("model", "multimodal") or (sec == "hardware" and key not in ("usd_per_gpu_hour", "reserved")) or \
                (sec == "efficiency" and key != "inference_mfu"):
            continue
        if sec == "stages" and key.split(".", 1)[1] in read:
            continue
        free[f.index] = True
    return free


PLAN_FREE = _plan_free_mask()


def _field_stage() -> np.ndarray:
    """The stage each input belongs to (``stages.<stage>.*``), -1 for the inputs every stage reads."""
    from costcore.scenario import schema as _sc
    out = np.full(_sc.NF, -1, dtype=np.int64)
    for f in _sc.FIELDS:
        parts = f.path.split(".")
        if parts[0] == "stages" and parts[1] in STAGES:
            out[f.index] = STAGES.index(parts[1])
    return out


FIELD_STAGE = _field_stage()


_PLAN_MEMO: dict = {}
_PLAN_MEMO_MAX = 8192
_PLAN_MEMO_LOCK = threading.Lock()


def _plans_of(x, reuse: float) -> np.ndarray:
    """The plans (per stage) of scenario ``x``, searched once per distinct value of the inputs the
    search reads (``~PLAN_FREE``; process-wide memo): a sweep or a rerun that moves only plan-free
    inputs (price, epochs, samples, data, people) never searches again. A copy: the memo's stays as found."""
    if reuse == 0.0:  # with GPU minima: what evaluate_vector searches and keeps
        return _searched(x)[0].copy()
    key = (x[~PLAN_FREE].tobytes(), reuse)
    got = _PLAN_MEMO.get(key)
    if got is None:
        got = _single(x, reuse)[2]
        _keep(_PLAN_MEMO, key, got, _PLAN_MEMO_MAX)
    return got.copy()


def _row_plans(base, idx, cols, replan: bool):
    """(plans per distinct combination, index per row) for a batch: each combination of the varied
    inputs the plan search reads is searched once (the base's always); with ``replan=False`` every
    row keeps the base's plans (Monte Carlo: the layout is a decision, not an uncertain input)."""
    n = cols.shape[1]
    base_plans = _plans_of(base, 0.0)
    rel = ~PLAN_FREE[idx]
    if not replan or not rel.any():
        return base_plans[None], np.zeros(n, dtype=np.int64)
    rel_idx = idx[rel]
    vals = cols[rel]
    row_plan = np.zeros(n, dtype=np.int64)  # 0: the base's plans
    other = ~np.all(vals == base[rel_idx][:, None], axis=0)
    if not other.any():
        return base_plans[None], row_plan
    keys, inverse = np.unique(vals[:, other].T, axis=0, return_inverse=True)
    if len(keys) > max(64, n // 4):  # mostly distinct: those rows search their own
        row_plan[other] = -1
        return base_plans[None], row_plan
    out = np.empty((len(keys) + 1, NS, PLAN_COLS))
    out[0] = base_plans
    out[1:] = _searched_plans(base, rel_idx, keys)
    row_plan[other] = inverse.reshape(-1) + 1
    return out, row_plan


def _searched_plans(base, rel_idx, keys) -> np.ndarray:
    """(len(keys), NS, PLAN_COLS): the plans of ``base`` with the inputs ``rel_idx`` set to each row of ``keys``,
    searched (memoized by :func:`_plans_of`); the batch's outputs carry no GPU minimum."""
    out = np.empty((len(keys), NS, PLAN_COLS))
    x = base.copy()
    for u, key in enumerate(keys):
        x[rel_idx] = key
        out[u] = _plans_of(x, -1.0)
    return out


def batch_plans(base, idx, cols) -> np.ndarray:
    """(n, NS, PLAN_COLS): the plans each row of a batch is evaluated on with ``replan=True`` (what its own
    estimate would search), one search per distinct combination of the varied inputs the search reads
    (memoized by :func:`_plans_of`). For a sweep to say where the searched job layout changes."""
    base = _vec(base)
    idx = np.ascontiguousarray(idx, dtype=np.int64)
    cols = _vec(cols)
    rel = ~PLAN_FREE[idx]
    if not rel.any():
        return np.repeat(_plans_of(base, -1.0)[None], cols.shape[1], axis=0)
    keys, inverse = np.unique(cols[rel].T, axis=0, return_inverse=True)
    return _searched_plans(base, idx[rel], keys)[inverse.reshape(-1)]


REFIT_BUCKETS = 16  # quantile buckets per varied input when samples are laid out again (_refit_rows)


def _unique_rows(which: np.ndarray):
    """``np.unique(which, axis=0, return_inverse=True)`` for small non-negative ints, through one int64
    key per row (mixed radix): a 2-D unique sorts row by row, 0.7 s of a million-sample Monte Carlo."""
    radix = which.max(axis=0) + 1
    if float(np.prod(radix.astype(np.float64))) >= 2.0 ** 62:
        combos, inverse = np.unique(which, axis=0, return_inverse=True)
        return combos, inverse.reshape(-1)
    key = np.zeros(which.shape[0], dtype=np.int64)
    for c in range(which.shape[1]):
        key = key * radix[c] + which[:, c]
    keys, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    return which[first], inverse.reshape(-1)


def _refit_plans(base, idx, cols, stage_fits, buckets: int = REFIT_BUCKETS):
    """(plans per combination, index per row) laying out again the stages that do not fit on the base's plans.

    For each stage, the rows where it does not fit take the plan searched with every varied input that
    stage's search reads (its own and those every stage reads) rounded up to the upper edge of its
    quantile bucket (``buckets`` equal-count buckets over those rows' draws): one search per bucket
    instead of one per row. A team that finds its rollouts 1.5x longer re-lays the job out for the
    longest it expects; a layout that holds a bucket's upper edge holds its lighter draws of an input
    that only adds memory (sequence lengths, response lengths). Stages that fit keep the base's plan.
    ``stage_fits``: (n, NS), 1.0 where the stage fits on the base's plans.
    """
    n = cols.shape[1]
    base_plans = _plans_of(base, 0.0)
    rel = [j for j in range(len(idx)) if not PLAN_FREE[idx[j]]]
    which = np.zeros((n, NS), dtype=np.int64)  # per row and stage: 0 the base's plan, k the k-th searched
    found: list[list[np.ndarray]] = [[base_plans[s]] for s in range(NS)]
    # per varied input: each row's bucket, as the index of its upper edge, so the rows' combinations are
    # small ints (_unique_rows) rather than float rows (a 2-D np.unique). Two rows share an index exactly
    # when they share an upper edge: the left search gives every draw the first edge at or above it.
    tops, at = {}, {}
    for j in rel:
        v = cols[j]
        edges = np.quantile(v, np.linspace(0.0, 1.0, buckets + 1))
        tops[j] = edges[1:]
        at[j] = np.searchsorted(edges[1:-1], v, side="left")
    for s in range(NS):
        rows = np.nonzero(stage_fits[:, s] < 0.5)[0]
        js = [j for j in rel if FIELD_STAGE[idx[j]] in (-1, s)]
        if not len(rows) or not js:
            continue
        combos, inverse = _unique_rows(np.stack([at[j][rows] for j in js], axis=1))
        x = base.copy()
        for combo in combos:
            x[idx[js]] = [tops[j][c] for j, c in zip(js, combo)]
            found[s].append(_plans_of(x, -1.0)[s])
        which[rows, s] = inverse + 1
    combos, row_plan = _unique_rows(which)
    plans = np.empty((len(combos), NS, PLAN_COLS))
    for c, combo in enumerate(combos):
        for s in range(NS):
            plans[c, s] = found[s][combo[s]]
    return plans, row_plan.reshape(-1).astype(np.int64)


def _run_batch(base, idx, cols, out, row_plans, row_plan):
    if cols.shape[1] <= SERIAL_BELOW:
        _batch_serial(base, idx, cols, out, row_plans, row_plan, PLAN_FREE, FIELD_STAGE)
    else:
        with config.PARALLEL_LOCK:
            _batch_kernel(base, idx, cols, out, row_plans, row_plan, PLAN_FREE, FIELD_STAGE)


def _refit_rows(base, idx, cols, out, fit_col: int) -> np.ndarray:
    """Lay out again (``_refit_plans``) the rows of ``out`` (evaluated on the base's plans) that do not fit;
    a row whose new layout fits replaces its outputs. Returns (n,) True for the rows replaced."""
    n = cols.shape[1]
    done = np.zeros(n, dtype=np.bool_)
    bad = np.nonzero(out[:, :, fit_col].min(axis=1) < 0.5)[0]
    if not len(bad) or PLAN_FREE[idx].all():
        return done
    sub = np.ascontiguousarray(cols[:, bad])
    row_plans, row_plan = _refit_plans(base, idx, sub, out[bad, :, fit_col])
    again = np.empty((len(bad), NS, out.shape[2]))
    _run_batch(base, idx, sub, again, row_plans, row_plan)
    ok = again[:, :, fit_col].min(axis=1) > 0.5
    out[bad[ok]] = again[ok]
    done[bad[ok]] = True
    return done


def evaluate_batch(base: np.ndarray, idx: np.ndarray, cols: np.ndarray, full: bool = False,
                   fits: bool = False, replan: bool = True, refit: bool = False):
    """Evaluate many variants of ``base``: variant i sets ``base[idx[j]] = cols[j, i]``.

    ``cols`` is (len(idx), n). Returns (n, NS, 1) stage totals ($); with
    ``fits=True`` (n, NS, 2): totals and 1.0 where the stage fits in GPU memory
    (stages switched off count as fitting); with ``full=True``
    (n, NS, NBATCH_FULL): the resources ($) then gpu_hours,
    productive_gpu_hours, wall_days, fits.

    ``refit=True`` (with ``replan=False``): rows that do not fit on the base's plans are laid out again
    (``_refit_rows``) and the call returns ``(out, relaid)``, ``relaid`` (n,) True for those rows.
    """
    base = _vec(base)
    idx = np.ascontiguousarray(idx, dtype=np.int64)
    cols = _vec(cols)
    if cols.ndim != 2 or cols.shape[0] != idx.shape[0]:
        raise ValueError("cols must be (len(idx), n)")
    n = cols.shape[1]
    refit = refit and not replan
    width = NBATCH_FULL if full else (2 if fits or refit else 1)
    out = np.empty((n, NS, width))
    row_plans, row_plan = _row_plans(base, idx, cols, replan)
    _run_batch(base, idx, cols, out, row_plans, row_plan)
    if not refit:
        return out
    relaid = _refit_rows(base, idx, cols, out, width - 1)
    return (out if full or fits else out[:, :, :1]), relaid


def warm_up() -> None:
    """Compile (or load from the on-disk cache) every kernel once per process."""
    from costcore.scenario.schema import DEFAULT_VECTOR, IX
    x = DEFAULT_VECTOR.copy()
    evaluate_vector(x)
    z = x.copy()
    z[IX["hardware.usd_per_gpu_hour"]] += 1.0  # plan-free: evaluated on the kept plans (_single_reusing)
    evaluate_vector(z)
    y = x.copy()
    y[STAGE_BASE[PRETRAIN] + S_ENABLED] = 1.0  # a stage to search (no stage is on by default)
    stage_plans(y, PRETRAIN, 2)
    idx = np.array([IX["model.params_b"]])
    for n in (2, SERIAL_BELOW + 1):
        cols = np.full((1, n), 7.0)
        evaluate_batch(x, idx, cols)
        evaluate_batch(x, idx, cols, full=True)
        evaluate_batch(x, idx, cols, fits=True)
    sampling.warm_up()
