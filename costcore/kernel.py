"""The numba kernel: one scenario vector -> stages x line items (+ per-stage stats).

``_eval_one`` is the private kernel; :func:`evaluate_vector` and
:func:`evaluate_batch` are the public wrappers. The batch kernel runs with
``parallel=True`` over chunks of variants of one base vector (a few fields
overridden per variant), so a million variants need no million-row input.

Thread safety: Streamlit serves each session in its own thread and numba's
default ``workqueue`` threading layer aborts when two threads enter a
parallel region at once, so parallel calls are serialized by a lock
(``costcore.config.PARALLEL_LOCK``). Single-scenario calls are serial and
need no lock.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from . import config
from .formulas import (DAYS_PER_MONTH, HOURS_PER_MONTH, LORA_TRAINABLE_BYTES, MODEL_PER_HARDWARE_FLOPS_FULL_RECOMPUTE,
                       NF4_BYTES_PER_PARAM,
                       QLORA_TRAINABLE_BYTES, activation_bytes_per_gpu,
                       decode_gpu_seconds_per_token, default_mfu, attention_mfu_factor, forward_flops_per_token,
                       gpu_hours_for_flops, held_checkpoint_sum, held_checkpoints, kv_cache_bytes_per_token, lora_trainable_params, model_shape,
                       model_state_bytes_per_gpu, train_flops_per_token, young_daly_interval_h)
from .schema import (CKPT_WEIGHTS, CPT_EPOCHS, CPT_TOKENS_B, D_REVIEW, D_SYNTH_USD_PER_M, DPO_CHOSEN,
                     DPO_EPOCHS, DPO_PAIRS, DPO_REF_PRECOMPUTED, DPO_REFERENCE, DPO_REJECTED, E_CLUSTER_REF,
                     E_CLUSTER_SLOPE, E_INFER_MFU, E_MFU_MIN, E_PEFT_MFU, E_RECOMP_FULL, E_RECOMP_SEL,
                     E_SMALL_B, E_USABLE_MEM, EV_BENCH_M, EV_CONTEXT, EV_DECODE_BATCH, EV_DECODE_EFF,
                     EV_GEN_M, EV_HUMAN, EV_RUNS, EV_USD_HUMAN, H_ATTN_EFF, H_BW_TBS, H_SIZE_EXP, H_MEM_GB, H_MFU_BASE,
                     H_NUM_GPUS, H_PEAK_TFLOPS, H_USD_GPU_H, L_ROLES, M_ACTIVE_B, M_FFN, M_HEADS,
                     M_HIDDEN, M_KV_HEADS, M_LAYERS, M_PARAMS_B, M_VOCAB, N_CKPT_REPLICAS,
                     N_DATASET_MOVES, N_EXPORTS, N_USD_PER_GB, NS, O_USD_PER_MONTH, PT_EPOCHS,
                     PT_TOKENS_B, R_FAIL_RATE, R_FAILED_RUNS, R_IDLE, R_RESTART_H, R_WRITE_GBPS,
                     RECOMPUTE_AUTO, RECOMPUTE_FULL, RECOMPUTE_NONE, RESOURCES, RL_ALGO, RL_CRITIC_B, RL_PPO,
                     RL_PROMPT_TOK, RL_PROMPTS, RL_REFERENCE, RL_REFERENCE_LIVE, RL_RESPONSE_TOK,
                     RL_REWARD, RL_REWARD_B, RL_REWARD_MODEL, RL_ROLLOUT_BATCH, RL_ROLLOUT_EFF,
                     RL_SAMPLES, RL_STEPS, RL_UPDATE_EPOCHS, RL_VERIFIER_USD, S_ACQ_USD_B,
                     S_CKPT_INTERVAL_H, S_CKPT_TYPE, S_CLEAN_USD_B, S_ENABLED, S_EXP_SIZE,
                     S_EXPERIMENTS, S_KEEP_LAST, S_LABELS, S_LORA_RANK, S_LORA_TARGETS, S_METHOD,
                     S_MFU, S_MICRO_BATCH, S_MILESTONE, S_NUM_GPUS, S_PP, S_QLORA_DEQ, S_RECOMPUTE,
                     S_SEQ_LEN, S_SETUP_MO, S_TFLOPS, S_SYNTH_M, S_TOK_PER_GPU_S, S_TP, S_USD_PER_LABEL,
                     S_ZERO, SFT_EPOCHS, SFT_SAMPLES, SFT_TOK_PER_SAMPLE, STAGE_BASE, ST_BYTES_PER_TOKEN,
                     ST_COLD, ST_COLD_AFTER_D, ST_FINISHED_WEIGHTS, ST_FULL_CKPT_BPP, ST_HOT, ST_OBJECT, ST_RETENTION_MO,
                     ST_VERSIONS, ST_WEIGHTS_CKPT_BPP)

# ---------------------------------------------------------------------------
# Line items: (key, resource, fixed?, label). Order = column order of `items`.
# fixed = committed whatever the run does (people, platform, bought data,
# datasets kept); elastic = scales with GPU time, tokens, samples.
# ---------------------------------------------------------------------------
LINE_ITEMS = (
    ("compute.gpu", "compute", False, "Productive GPU time"),
    ("compute.verifier", "compute", False, "Reward verifier (CPU sandbox)"),
    ("storage.dataset", "storage", True, "Datasets (object storage)"),
    ("storage.ckpt_hot", "storage", False, "Checkpoints, hot tier"),
    ("storage.ckpt_cold", "storage", False, "Checkpoints, cold tier"),
    ("network.dataset", "network", False, "Dataset transfers"),
    ("network.ckpt_replication", "network", False, "Checkpoint replication"),
    ("network.model_export", "network", False, "Model export"),
    ("data.acquisition", "data", True, "Data acquisition"),
    ("data.cleaning", "data", False, "Data cleaning"),
    ("data.labeling", "data", False, "Labeling and review"),
    ("data.synthetic", "data", False, "Synthetic data"),
    ("data.human_eval", "data", False, "Human evaluation"),
    ("labor.team", "labor", True, "Team"),
    ("ops.platform", "ops", True, "Platform and operations"),
    ("hidden.failures", "hidden", False, "Failures and restarts"),
    ("hidden.ckpt_stalls", "hidden", False, "Checkpoint write stalls"),
    ("hidden.idle", "hidden", False, "Idle and queued GPUs"),
    ("hidden.experiments", "hidden", False, "Repeated experiments"),
    ("hidden.failed_runs", "hidden", False, "Failed runs"),
)
NI = len(LINE_ITEMS)
ITEM_RESOURCE = np.array([RESOURCES.index(r) for _, r, _, _ in LINE_ITEMS], dtype=np.int64)
ITEM_FIXED = np.array([1.0 if f else 0.0 for _, _, f, _ in LINE_ITEMS])
NR = len(RESOURCES)
(I_COMPUTE, I_VERIFIER, I_ST_DATA, I_ST_HOT, I_ST_COLD, I_NET_DATA, I_NET_REPL, I_NET_EXPORT,
 I_DATA_ACQ, I_DATA_CLEAN, I_DATA_LABEL, I_DATA_SYNTH, I_DATA_HEVAL, I_LABOR, I_OPS,
 I_HID_FAIL, I_HID_STALL, I_HID_IDLE, I_HID_EXP, I_HID_FAILED) = range(NI)

# Per-stage statistics (columns of `stats`).
STATS = ("enabled", "num_gpus", "productive_gpu_hours", "gpu_hours", "wall_days", "months", "flops",
         "mfu", "tokens", "interruptions", "ckpt_interval_h", "young_daly_h", "ckpt_count",
         "ckpt_gb", "ckpt_write_s", "dataset_gb", "storage_peak_gb", "memory_per_gpu_gb", "fits",
         "min_gpus", "rollout_gpu_hours", "trainable_params_b", "usd_total", "fixed_usd", "recompute_mode")
NK = len(STATS)
(K_ENABLED, K_GPUS, K_PROD_H, K_GPU_H, K_WALL_D, K_MONTHS, K_FLOPS, K_MFU, K_TOKENS, K_INTERRUPT,
 K_CKPT_INT, K_YOUNG_DALY, K_CKPT_N, K_CKPT_GB, K_CKPT_WRITE_S, K_DATASET_GB, K_STORAGE_PEAK_GB,
 K_MEM_GB, K_FITS, K_MIN_GPUS, K_ROLLOUT_H, K_TRAINABLE_B, K_USD, K_FIXED, K_RECOMPUTE) = range(NK)

# Batch output columns ("full" mode): the resources, then these.
BATCH_EXTRA = ("gpu_hours", "productive_gpu_hours", "wall_days", "fits")
NBATCH_FULL = NR + len(BATCH_EXTRA)

PRETRAIN, CPT, SFT, DPO, RL, EVAL = range(6)
_CHUNK = 512
SERIAL_BELOW = 4096  # variants; below this the parallel launch costs more than it saves


@njit(cache=True)
def _train_memory(x, b, n_total, n_lora, method, L, d, a, vocab, ffn, G, mbs_mult, extra_weights, mode):
    """(bytes per GPU, min GPUs) of a training stage; see formulas for each term.

    mode: activation recompute 0 none, 1 selective, 2 full.
    """
    tp = x[b + S_TP]
    pp = x[b + S_PP]
    mp = tp * pp
    dp = max(1.0, math.floor(G / mp))
    zero = x[b + S_ZERO]
    largest = max(vocab * d, ffn * d)
    act = activation_bytes_per_gpu(L, d, a, x[b + S_SEQ_LEN], x[b + S_MICRO_BATCH] * mbs_mult,
                                   vocab, mode, tp)
    if method < 0.5:
        sharded = model_state_bytes_per_gpu(n_total, zero, 1.0, mp, largest) - \
            model_state_bytes_per_gpu(n_total, zero, 1e30, mp, largest)
        fixed = model_state_bytes_per_gpu(n_total, zero, 1e30, mp, largest)
    else:
        base_bpp = NF4_BYTES_PER_PARAM if method > 1.5 else 2.0
        base = base_bpp * n_total / mp
        fixed = (QLORA_TRAINABLE_BYTES if method > 1.5 else LORA_TRAINABLE_BYTES) * n_lora / mp
        sharded = 0.0
        if zero > 2.5:
            sharded = base
        else:
            fixed += base
    if extra_weights > 0.0:  # frozen reference copy (DPO live reference)
        w = 2.0 * extra_weights / mp
        if zero > 2.5:
            sharded += w
        else:
            fixed += w
    fixed += act
    mem = fixed + sharded / dp
    cap = x[H_MEM_GB] * 1e9 * x[E_USABLE_MEM]
    if fixed >= cap:
        min_g = 0.0
    elif sharded <= 0.0:
        min_g = mp
    else:
        min_g = math.ceil(sharded / (cap - fixed)) * mp
    return mem, min_g


@njit(cache=True)
def _memory_and_recompute(x, b, n_total, n_lora, method, L, d, a, vocab, ffn, G, mbs_mult, extra_weights):
    """Resolve the recompute setting: 'auto' is selective when that fits in memory, else full.

    Returns (bytes per GPU, min GPUs, mode) with mode 0 none, 1 selective, 2 full.
    """
    rc = x[b + S_RECOMPUTE]
    if rc == RECOMPUTE_NONE:
        mode = 0.0
    elif rc == RECOMPUTE_FULL:
        mode = 2.0
    else:
        mode = 1.0
    mem, min_g = _train_memory(x, b, n_total, n_lora, method, L, d, a, vocab, ffn, G, mbs_mult,
                               extra_weights, mode)
    if rc == RECOMPUTE_AUTO and mem > x[H_MEM_GB] * 1e9 * x[E_USABLE_MEM]:
        mode = 2.0
        mem, min_g = _train_memory(x, b, n_total, n_lora, method, L, d, a, vocab, ffn, G, mbs_mult,
                                   extra_weights, mode)
    return mem, min_g, mode


@njit(cache=True)
def _stage_mfu(x, b, act_b, G, method, mode, L, d, ctx):
    """The stage's MFU: given, or the default model with attention, recompute and PEFT factors."""
    mfu = x[b + S_MFU]
    if mfu > 0.0:
        return mfu
    if x[b + S_TFLOPS] > 0.0:  # hardware FLOP/s: full recompute does 8N instead of 6N per token
        mfu = x[b + S_TFLOPS] / x[H_PEAK_TFLOPS]
        return mfu * MODEL_PER_HARDWARE_FLOPS_FULL_RECOMPUTE if mode > 1.5 else mfu
    mfu = default_mfu(x[H_MFU_BASE], act_b, G, x[H_SIZE_EXP], x[E_SMALL_B],
                      x[E_CLUSTER_REF], x[E_CLUSTER_SLOPE], x[E_MFU_MIN])
    mfu *= attention_mfu_factor(act_b * 1e9, L, d, ctx, x[H_ATTN_EFF])
    if mode > 1.5:
        mfu *= x[E_RECOMP_FULL]
    elif mode > 0.5:
        mfu *= x[E_RECOMP_SEL]
    if method > 0.5:
        mfu *= x[E_PEFT_MFU]
    return mfu


@njit(cache=True)
def _eval_one(x, items, stats):
    """Evaluate one scenario vector into items (NS x NI, $) and stats (NS x NK)."""
    items[:, :] = 0.0
    stats[:, :] = 0.0
    n_total = x[M_PARAMS_B] * 1e9
    act_b = x[M_ACTIVE_B] if x[M_ACTIVE_B] > 0.0 else x[M_PARAMS_B]
    n_act = act_b * 1e9
    L, d, a, kvh, ffn = model_shape(act_b, x[M_LAYERS], x[M_HIDDEN], x[M_HEADS], x[M_KV_HEADS], x[M_FFN])
    vocab = x[M_VOCAB]
    head_dim = d / a
    kv_dim = kvh * head_dim
    kv_tok = kv_cache_bytes_per_token(L, kvh, head_dim)
    peak = x[H_PEAK_TFLOPS]
    price = x[H_USD_GPU_H]
    mem_gb = x[H_MEM_GB]
    inf_mfu = x[E_INFER_MFU]
    team_usd_month = 0.0
    for r in range(len(L_ROLES)):
        team_usd_month += x[L_ROLES[r][0]] * x[L_ROLES[r][1]]

    for s in range(NS):
        b = STAGE_BASE[s]
        if x[b + S_ENABLED] < 0.5:
            continue
        G = x[b + S_NUM_GPUS] if x[b + S_NUM_GPUS] > 0.0 else x[H_NUM_GPUS]
        method = x[b + S_METHOD] if (s == SFT or s == DPO or s == RL) else 0.0
        n_lora = 0.0
        if method > 0.5:
            n_lora = lora_trainable_params(L, d, kv_dim, ffn, x[b + S_LORA_RANK], x[b + S_LORA_TARGETS])
        tps = x[b + S_TOK_PER_GPU_S]
        deq = x[b + S_QLORA_DEQ]
        seq = x[b + S_SEQ_LEN]
        flops = 0.0
        roll_short = False
        mfu = 0.0
        mode = 0.0
        prod_h = 0.0
        tokens = 0.0
        unique_tokens = 0.0
        rollout_h = 0.0
        mem = 0.0
        min_g = 0.0
        if s == PRETRAIN or s == CPT:
            tok_b = x[PT_TOKENS_B] if s == PRETRAIN else x[CPT_TOKENS_B]
            epochs = x[PT_EPOCHS] if s == PRETRAIN else x[CPT_EPOCHS]
            tokens = tok_b * 1e9
            unique_tokens = tokens / epochs
            flops = train_flops_per_token(n_act, L, d, seq, 0.0, 0.0, 0.0) * tokens
            mem, min_g, mode = _memory_and_recompute(x, b, n_total, 0.0, 0.0, L, d, a, vocab, ffn, G, 1.0, 0.0)
            mfu = _stage_mfu(x, b, act_b, G, method, mode, L, d, seq)
            if tps > 0.0:
                prod_h = tokens / (tps * 3600.0)
            else:
                prod_h = gpu_hours_for_flops(flops, peak, mfu)
        elif s == SFT:
            tps_sample = x[SFT_TOK_PER_SAMPLE]
            unique_tokens = x[SFT_SAMPLES] * tps_sample
            tokens = unique_tokens * x[SFT_EPOCHS]
            ctx = min(seq, tps_sample)
            flops = train_flops_per_token(n_act, L, d, ctx, method, n_lora, deq) * tokens
            mem, min_g, mode = _memory_and_recompute(x, b, n_total, n_lora, method, L, d, a, vocab, ffn, G, 1.0, 0.0)
            mfu = _stage_mfu(x, b, act_b, G, method, mode, L, d, ctx)
            if tps > 0.0:
                prod_h = tokens / (tps * 3600.0)
            else:
                prod_h = gpu_hours_for_flops(flops, peak, mfu)
        elif s == DPO:
            per_pair = x[DPO_CHOSEN] + x[DPO_REJECTED]
            unique_tokens = x[DPO_PAIRS] * per_pair
            tokens = unique_tokens * x[DPO_EPOCHS]
            ctx = min(seq, max(x[DPO_CHOSEN], x[DPO_REJECTED]))
            train_flops = train_flops_per_token(n_act, L, d, ctx, method, n_lora, deq) * tokens
            ref_passes = 1.0 if x[DPO_REFERENCE] == DPO_REF_PRECOMPUTED else x[DPO_EPOCHS]
            ref_flops = forward_flops_per_token(n_act, L, d, ctx) * unique_tokens * ref_passes
            flops = train_flops + ref_flops
            ref_w = n_total if x[DPO_REFERENCE] != DPO_REF_PRECOMPUTED and method < 0.5 else 0.0
            mem, min_g, mode = _memory_and_recompute(x, b, n_total, n_lora, method, L, d, a, vocab, ffn, G, 2.0, ref_w)
            mfu = _stage_mfu(x, b, act_b, G, method, mode, L, d, ctx)
            if tps > 0.0:
                prod_h = tokens / (tps * 3600.0)
            else:
                prod_h = gpu_hours_for_flops(train_flops, peak, mfu)
            prod_h += gpu_hours_for_flops(ref_flops, peak, inf_mfu)
        elif s == RL:
            q = x[RL_PROMPTS] * x[RL_SAMPLES]
            steps = x[RL_STEPS]
            lp = x[RL_PROMPT_TOK]
            lr = x[RL_RESPONSE_TOK]
            ctx = lp + lr
            tok_step = q * ctx
            tokens = steps * tok_step
            unique_tokens = steps * x[RL_PROMPTS] * lp
            dps, tp_inf, b_used = decode_gpu_seconds_per_token(
                n_total, n_act, kv_tok, lp + 0.5 * lr, ctx, x[RL_ROLLOUT_BATCH], peak,
                x[H_BW_TBS], mem_gb, x[RL_ROLLOUT_EFF])
            prefill_h = gpu_hours_for_flops(forward_flops_per_token(n_act, L, d, lp) * steps * q * lp, peak, inf_mfu)
            rollout_h = steps * q * lr * dps / 3600.0 + prefill_h
            fwd = forward_flops_per_token(n_act, L, d, ctx)
            infer_flops = fwd * tokens  # old log-probs of the policy
            if x[RL_REFERENCE] == RL_REFERENCE_LIVE:
                infer_flops += fwd * tokens
            if x[RL_REWARD] == RL_REWARD_MODEL:
                n_rm = x[RL_REWARD_B] * 1e9 if x[RL_REWARD_B] > 0.0 else n_act
                infer_flops += forward_flops_per_token(n_rm, L, d, ctx) * tokens
            else:
                items[s, I_VERIFIER] = steps * q * x[RL_VERIFIER_USD]
            upd = x[RL_UPDATE_EPOCHS]
            train_flops = train_flops_per_token(n_act, L, d, ctx, method, n_lora, deq) * tokens * upd
            if x[RL_ALGO] == RL_PPO:
                n_c = x[RL_CRITIC_B] * 1e9 if x[RL_CRITIC_B] > 0.0 else n_act
                infer_flops += forward_flops_per_token(n_c, L, d, ctx) * tokens
                train_flops += train_flops_per_token(n_c, L, d, ctx, 0.0, 0.0, 0.0) * tokens * upd
            flops = train_flops + infer_flops
            mem, min_g, mode = _memory_and_recompute(x, b, n_total, n_lora, method, L, d, a, vocab, ffn, G, 1.0, 0.0)
            mfu = _stage_mfu(x, b, act_b, G, method, mode, L, d, ctx)
            train_h = gpu_hours_for_flops(train_flops, peak, mfu)
            if tps > 0.0:
                train_h = tokens * upd / (tps * 3600.0)
            prod_h = rollout_h + train_h + gpu_hours_for_flops(infer_flops, peak, inf_mfu)
            roll_mem = (2.0 * n_total + b_used * kv_tok * ctx) / tp_inf
            if roll_mem > mem:
                mem = roll_mem
            if tp_inf > G:  # an inference replica needs more GPUs than the stage has
                roll_short = True
            if min_g > 0.0 and tp_inf > min_g:
                min_g = tp_inf
        else:  # EVAL
            runs = x[EV_RUNS]
            ctx = x[EV_CONTEXT]
            bench = x[EV_BENCH_M] * 1e6
            gen = x[EV_GEN_M] * 1e6
            tokens = runs * (bench + gen)
            unique_tokens = bench + gen
            dps, tp_inf, b_used = decode_gpu_seconds_per_token(
                n_total, n_act, kv_tok, ctx, ctx, x[EV_DECODE_BATCH], peak, x[H_BW_TBS], mem_gb,
                x[EV_DECODE_EFF])
            flops = runs * (forward_flops_per_token(n_act, L, d, ctx) * bench + 2.0 * n_act * gen)
            rollout_h = runs * gen * dps / 3600.0
            prod_h = rollout_h + gpu_hours_for_flops(
                runs * forward_flops_per_token(n_act, L, d, ctx) * bench, peak, inf_mfu)
            mfu = inf_mfu
            mem = (2.0 * n_total + b_used * kv_tok * ctx) / tp_inf
            min_g = tp_inf
            if tp_inf > G:
                roll_short = True
            items[s, I_DATA_HEVAL] = runs * x[EV_HUMAN] * x[EV_USD_HUMAN]

        # ---- hidden GPU time: failures, checkpoint stalls, idle, failed runs, experiments
        wall_h = prod_h / G
        saved_params = n_total if method < 0.5 else n_lora
        bpp = x[ST_WEIGHTS_CKPT_BPP] if x[b + S_CKPT_TYPE] == CKPT_WEIGHTS else x[ST_FULL_CKPT_BPP]
        ckpt_bytes = saved_params * bpp if s != EVAL else 0.0
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
        stall_h = n_ckpt * write_h * G
        interruptions = wall_h * lam
        fail_h = interruptions * (0.5 * tau + x[R_RESTART_H]) * G
        idle_h = x[R_IDLE] * prod_h
        failed_h = x[R_FAILED_RUNS] * prod_h
        main_h = prod_h + fail_h + stall_h + idle_h + failed_h
        exp_h = x[b + S_EXPERIMENTS] * x[b + S_EXP_SIZE] * main_h
        billed = main_h + exp_h
        months = x[b + S_SETUP_MO] + billed / G / 24.0 / DAYS_PER_MONTH
        items[s, I_COMPUTE] = prod_h * price
        items[s, I_HID_FAIL] = fail_h * price
        items[s, I_HID_STALL] = stall_h * price
        items[s, I_HID_IDLE] = idle_h * price
        items[s, I_HID_FAILED] = failed_h * price
        items[s, I_HID_EXP] = exp_h * price

        # ---- storage: checkpoints (keep-last-K + milestones, hot then cold) and datasets
        ckpt_gb = ckpt_bytes / 1e9
        keep = x[b + S_KEEP_LAST]
        mile = x[b + S_MILESTONE]
        retention = x[ST_RETENTION_MO]
        hot_after = min(retention, x[ST_COLD_AFTER_D] / DAYS_PER_MONTH)
        final_held = held_checkpoints(n_ckpt, keep, mile) if n_ckpt > 0.0 else 0.0
        spacing_h = wall_h / n_ckpt if n_ckpt > 0.0 else 0.0
        # checkpoint k is written at the end of interval k: the set held after it is stored for the
        # next interval, so during the run that is k = 1..n-1 (the n-th is written as the run ends)
        in_run_gb_months = ckpt_gb * held_checkpoint_sum(n_ckpt - 1.0, keep, mile) * spacing_h / HOURS_PER_MONTH
        kept_gb = ckpt_gb  # size of each checkpoint retained after the stage
        if x[ST_FINISHED_WEIGHTS] > 0.5 and x[b + S_CKPT_TYPE] != CKPT_WEIGHTS:
            kept_gb = ckpt_gb * x[ST_WEIGHTS_CKPT_BPP] / x[ST_FULL_CKPT_BPP]
        items[s, I_ST_HOT] = x[ST_HOT] * (in_run_gb_months + final_held * kept_gb * hot_after)
        items[s, I_ST_COLD] = x[ST_COLD] * final_held * kept_gb * (retention - hot_after)
        one_copy_gb = unique_tokens * x[ST_BYTES_PER_TOKEN] / 1e9
        dataset_gb = one_copy_gb * x[ST_VERSIONS]
        items[s, I_ST_DATA] = x[ST_OBJECT] * dataset_gb * (months + retention)

        # ---- network (billed transfers)
        usd_gb = x[N_USD_PER_GB]
        items[s, I_NET_DATA] = one_copy_gb * x[N_DATASET_MOVES] * usd_gb
        items[s, I_NET_REPL] = final_held * kept_gb * x[N_CKPT_REPLICAS] * usd_gb
        if s != EVAL:
            items[s, I_NET_EXPORT] = saved_params * x[ST_WEIGHTS_CKPT_BPP] / 1e9 * x[N_EXPORTS] * usd_gb

        # ---- data
        unique_b = unique_tokens / 1e9
        items[s, I_DATA_ACQ] = unique_b * x[b + S_ACQ_USD_B]
        items[s, I_DATA_CLEAN] = unique_b * x[b + S_CLEAN_USD_B]
        items[s, I_DATA_LABEL] = x[b + S_LABELS] * x[b + S_USD_PER_LABEL] * (1.0 + x[D_REVIEW])
        items[s, I_DATA_SYNTH] = x[b + S_SYNTH_M] * x[D_SYNTH_USD_PER_M]

        # ---- people and platform, billed for setup + run time
        items[s, I_LABOR] = team_usd_month * months
        items[s, I_OPS] = x[O_USD_PER_MONTH] * months

        st = stats[s]
        st[K_ENABLED] = 1.0
        st[K_GPUS] = G
        st[K_PROD_H] = prod_h
        st[K_GPU_H] = billed
        st[K_WALL_D] = main_h / G / 24.0
        st[K_MONTHS] = months
        st[K_FLOPS] = flops
        st[K_MFU] = mfu
        st[K_RECOMPUTE] = mode
        st[K_TOKENS] = tokens
        st[K_INTERRUPT] = interruptions
        st[K_CKPT_INT] = tau if s != EVAL else 0.0
        st[K_YOUNG_DALY] = yd if yd < 1e30 else 0.0
        st[K_CKPT_N] = n_ckpt
        st[K_CKPT_GB] = ckpt_gb
        st[K_CKPT_WRITE_S] = write_h * 3600.0
        st[K_DATASET_GB] = dataset_gb
        st[K_STORAGE_PEAK_GB] = final_held * ckpt_gb + dataset_gb  # at the end of the run, before conversion
        st[K_MEM_GB] = mem / 1e9
        st[K_FITS] = 1.0 if (mem <= mem_gb * 1e9 * x[E_USABLE_MEM] and not roll_short) else 0.0
        st[K_MIN_GPUS] = min_g
        st[K_ROLLOUT_H] = rollout_h
        st[K_TRAINABLE_B] = (n_total if method < 0.5 else n_lora) / 1e9
        tot = 0.0
        fixed = 0.0
        for i in range(NI):
            tot += items[s, i]
            fixed += items[s, i] * ITEM_FIXED[i]
        st[K_USD] = tot
        st[K_FIXED] = fixed


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
def _batch_range(base, idx, cols, out, start, stop):
    """Rows start..stop-1: row i sets base[idx[j]] = cols[j, i] for every j, then evaluates."""
    x = base.copy()
    items = np.empty((NS, NI))
    stats = np.empty((NS, NK))
    k = idx.shape[0]
    for i in range(start, stop):
        for j in range(k):
            x[idx[j]] = cols[j, i]
        _eval_one(x, items, stats)
        _write_row(out, i, items, stats)


@njit(cache=True, parallel=True)
def _batch_kernel(base, idx, cols, out):
    """Evaluate ``base`` with column i of ``cols`` written at ``idx``, for every i, in parallel chunks.

    cols: (k, n), one contiguous row per varied input (so callers fill it without a transpose).
    out: (n, NS, 1) stage totals in $, (n, NS, 2) totals and fits (1/0), or (n, NS, NBATCH_FULL)
    resources in $ followed by gpu_hours, productive_gpu_hours, wall_days and fits.
    """
    n = cols.shape[1]
    nchunks = (n + _CHUNK - 1) // _CHUNK
    for c in prange(nchunks):
        _batch_range(base, idx, cols, out, c * _CHUNK, min(n, (c + 1) * _CHUNK))


@njit(cache=True)
def _batch_serial(base, idx, cols, out):
    """Same as _batch_kernel on one thread: small batches skip the thread-pool launch."""
    _batch_range(base, idx, cols, out, 0, cols.shape[1])


@njit(cache=True)
def _single(x):
    items = np.empty((NS, NI))
    stats = np.empty((NS, NK))
    _eval_one(x, items, stats)
    return items, stats


def evaluate_vector(x: np.ndarray):
    """Evaluate one scenario vector. Returns (items[NS, NI] in $, stats[NS, NK])."""
    return _single(np.ascontiguousarray(x, dtype=np.float64))


def evaluate_batch(base: np.ndarray, idx: np.ndarray, cols: np.ndarray, full: bool = False,
                   fits: bool = False) -> np.ndarray:
    """Evaluate many variants of ``base``: variant i sets ``base[idx[j]] = cols[j, i]``.

    ``cols`` is (len(idx), n). Returns (n, NS, 1) stage totals ($); with
    ``fits=True`` (n, NS, 2): totals and 1.0 where the stage fits in GPU memory
    (stages switched off count as fitting); with ``full=True``
    (n, NS, NBATCH_FULL): the resources ($) then gpu_hours,
    productive_gpu_hours, wall_days, fits.
    """
    base = np.ascontiguousarray(base, dtype=np.float64)
    idx = np.ascontiguousarray(idx, dtype=np.int64)
    cols = np.ascontiguousarray(cols, dtype=np.float64)
    if cols.ndim != 2 or cols.shape[0] != idx.shape[0]:
        raise ValueError("cols must be (len(idx), n)")
    n = cols.shape[1]
    out = np.empty((n, NS, NBATCH_FULL if full else (2 if fits else 1)))
    if n <= SERIAL_BELOW:
        _batch_serial(base, idx, cols, out)
    else:
        with config.PARALLEL_LOCK:
            _batch_kernel(base, idx, cols, out)
    return out


def warm_up() -> None:
    """Compile (or load from the on-disk cache) every kernel once per process."""
    from .schema import DEFAULT_VECTOR, IX
    x = DEFAULT_VECTOR.copy()
    evaluate_vector(x)
    idx = np.array([IX["model.params_b"]])
    for n in (2, SERIAL_BELOW + 1):
        cols = np.full((1, n), 7.0)
        evaluate_batch(x, idx, cols)
        evaluate_batch(x, idx, cols, full=True)
        evaluate_batch(x, idx, cols, fits=True)
