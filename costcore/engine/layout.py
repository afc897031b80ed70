"""The job layout: step time and memory per GPU of one parallel plan, and the plan search.

A *plan* is how a training job is laid out on G GPUs: tensor (tp), pipeline (pp), data (dp),
context (cp) and expert (ep) parallelism, the micro-batch, activation recompute, the ZeRO stage,
the interleaving of pipeline stages and sequence parallelism. :func:`plan_terms` builds one
optimizer step of such a job from named terms, each with its source (the Megatron-LM and
Calculon way: compute, communication, bubble, recompute), and the memory per GPU by kind
(weights, gradients, optimizer, activations, buffers). :func:`search` evaluates every plan of a
job that fits in memory and keeps the fastest ones; :func:`min_gpus` is the fewest GPUs any plan
fits on.

Everything here is numba-jitted and reads three flat float64 arrays (built by the kernel from the
scenario vector, :func:`costcore.engine.kernel.stage_job`):

``model`` (``MODEL_FIELDS``)
    the transformer's shape and parameter counts;
``hw`` (``HW_FIELDS``)
    the accelerator and the step model's efficiency knobs (``data/hardware.yaml``,
    ``data/schema.yaml`` efficiency section);
``job`` (``JOB_FIELDS``)
    the stage: sequence length, global batch, GPUs, method (full / LoRA / QLoRA), precision.

A plan is a float64 array laid out as ``PLAN_FIELDS``; 0 (or -1 for ``zero``, ``recompute``,
``sp``) in a search's *pins* means "search this one".

Units: seconds, bytes, FLOPs, bytes/s. Symbols as in Korthikanti et al. 2022: s sequence length,
b micro-batch, h hidden size, a heads, L layers, t = tp, p = pp, V vocabulary.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from costcore.engine.formulas import (CPU_ADAM_BYTES_PER_PARAM, MASTER_BYTES_PER_PARAM, METHOD_FULL,
                                      OFFLOAD_OPTIMIZER, OFFLOAD_OPTIMIZER_AND_PARAMS, OPT_PAGED_ADAMW_8BIT,
                                      RECOMPUTE_MODE_FULL, RECOMPUTE_MODE_NONE, RECOMPUTE_MODE_SELECTIVE,
                                      dequant_seconds, optimizer_state_bytes, tp_splits_heads)

MODEL_FIELDS = ("layers", "hidden", "heads", "kv_heads", "head_dim", "ffn", "vocab", "gated", "experts",
                "experts_active", "shared_experts", "moe_ffn", "n_total", "n_active", "n_expert_params",
                "n_trainable", "node_limit")
HW_FIELDS = ("peak_flops", "fp8_peak_flops", "memory_bytes", "hbm_bytes_s", "intra_bytes_s", "inter_bytes_s",
             "gpus_per_node", "gemm_efficiency", "attn_efficiency", "collective_efficiency", "gemm_half_dim",
             "memory_traffic", "dp_overlap", "buffer_bytes", "fp8_efficiency", "grad_reduce_bytes", "overlap_contention",
             "pcie_bytes_s", "cpu_optimizer_bytes_s", "tp_overlap", "dualpipe_comm_sm_share", "logit_bytes")
JOB_FIELDS = ("seq", "global_batch", "gpus", "method", "deq", "mbs_mult", "extra_weights", "fp8",
              "flops_per_token", "tokens_per_seq", "optimizer", "offload", "grad_accum", "base_bytes", "media_act",
              "attn_ctx", "dualpipe", "quantized_base")
PLAN_FIELDS = ("tp", "pp", "dp", "cp", "ep", "micro_batch", "recompute", "zero", "interleave", "sp", "dualpipe")
# Terms of one evaluated plan (columns of a plan row after the PLAN_FIELDS).
TERM_FIELDS = ("step_time_s", "compute_s", "communication_s", "bubble_s", "recompute_s", "optimizer_s",
               "tp_comm_s", "dp_comm_s", "zero_comm_s", "cp_comm_s", "ep_comm_s", "p2p_s",
               "mem_weights", "mem_grads", "mem_optimizer", "mem_activations", "mem_buffers", "mem_total",
               "mfu", "micro_batches", "fits", "gpus_used", "tokens_per_gpu_s", "offload_s", "mem_paged_out",
               "dequant_s", "adapter_s")
NP = len(PLAN_FIELDS)
NT = len(TERM_FIELDS)
NROW = NP + NT
(M_L, M_H, M_A, M_KV, M_HD, M_FFN, M_V, M_GATED, M_E, M_K, M_SHARED, M_MOE_FFN, M_NTOT, M_NACT, M_NEXP,
 M_NTRAIN, M_NODES) = range(len(MODEL_FIELDS))
(W_PEAK, W_FP8, W_MEM, W_HBM, W_INTRA, W_INTER, W_GPN, W_GEMM, W_ATTN, W_COLL, W_HALF, W_TRAFFIC, W_OVERLAP,
 W_BUFFER, W_FP8_EFF, W_GRAD_BYTES, W_CONTENTION, W_PCIE, W_CPU_BW, W_TP_OVERLAP, W_DUAL_SMS, W_LOGIT) = range(len(HW_FIELDS))
(J_SEQ, J_GB, J_G, J_METHOD, J_DEQ, J_MBS, J_EXTRA, J_FP8, J_FPT, J_TOKSEQ, J_OPT, J_OFFLOAD, J_ACCUM,
 J_BASE_BYTES, J_MEDIA_ACT, J_ACTX, J_DUAL, J_QBASE) = range(len(JOB_FIELDS))
P_TP, P_PP, P_DP, P_CP, P_EP, P_MB, P_RC, P_ZERO, P_V, P_SP, P_DUAL = range(NP)
# job[J_DUAL], the pipeline schedules a stage may run (stages.*.schedule): 1F1B (interleaved as searched) only,
# DualPipe only, or either (the search keeps the faster)
SCHED_1F1B, SCHED_DUALPIPE, SCHED_EITHER = 0.0, 1.0, 2.0
(T_STEP, T_COMPUTE, T_COMM, T_BUBBLE, T_RECOMP, T_OPT, T_TP, T_DP, T_ZERO, T_CP, T_EP, T_P2P, T_WEIGHTS,
 T_GRADS, T_OPTIM, T_ACT, T_BUF, T_MEM, T_MFU, T_MICRO, T_FITS, T_USED, T_TOKS, T_OFFLOAD, T_PAGED, T_DEQUANT,
 T_ADAPTER) = range(NP, NROW)

RC_NONE, RC_SELECTIVE, RC_FULL = RECOMPUTE_MODE_NONE, RECOMPUTE_MODE_SELECTIVE, RECOMPUTE_MODE_FULL
# Candidate degrees the search tries (each also capped by the job: heads, layers, GPUs, batch).
TP_CHOICES = np.array([1.0, 2.0, 4.0, 8.0, 16.0, 32.0])
CP_CHOICES = np.array([1.0, 2.0, 4.0, 8.0, 16.0, 32.0])
MB_CHOICES = np.array([1.0, 2.0, 4.0, 8.0, 16.0])
V_CHOICES = np.array([1.0, 2.0, 3.0, 4.0])
MIN_CP_TOKENS = 2048.0  # context parallelism splits a sequence into chunks of at least this many tokens
PP_MAX = 128


@njit(cache=True)
def gemm_efficiency(m, n, k, eff_max, half_dim):
    """Achieved fraction of peak of an (m x k) @ (k x n) matrix multiply, dimensionless.

    eff = eff_max / (1 + half_dim * (1/m + 1/n + 1/k))

    eff_max is the best measured dense matmul of the GPU (stas00/ml-engineering
    ``compute/accelerator/benchmarks/mamf-finder.py`` results: ~0.86 of peak on A100, ~0.80 on
    H100); small matrices lose to tile and wave quantization and to memory-bound prologues
    (NVIDIA Deep Learning Performance guide, "Matrix Multiplication Background": efficiency
    climbs with each dimension and saturates past a few thousand). ``half_dim`` (elements) sets
    how fast: one fitted knob (data/schema.yaml efficiency.gemm_half_dim, docs/validation.md), scaled
    to each GPU by :func:`gemm_half_dim_for`.
    """
    if m <= 0.0 or n <= 0.0 or k <= 0.0:
        return eff_max
    return eff_max / (1.0 + half_dim * (1.0 / m + 1.0 / n + 1.0 / k))


# Ops:byte ratio of the GPU gemm_half_dim is fitted on: the A100 80GB SXM of Selene (312 TFLOP/s BF16 over
# 2.0 TB/s HBM; Narayanan et al. 2021 Sec. 5 and Korthikanti et al. 2022 Sec. 6 ran on it).
HALF_DIM_REF_FLOP_PER_BYTE = 312.0 / 2.0


@njit(cache=True, inline='always')
def gemm_half_dim_for(half_dim_ref, peak_tflops, hbm_tbs):
    """The GPU's ``half_dim`` of :func:`gemm_efficiency`, elements: the fitted one scaled by its ops:byte ratio.

    half_dim = half_dim_ref x (peak / HBM bandwidth) / (312 TFLOP/s / 2.0 TB/s).

    An (m x k) @ (k x n) matmul does 2 m n k FLOPs on 2 (m n + n k + m k) bytes (BF16); its time against
    the peak-rate time is 1 + (peak / bandwidth) (1/m + 1/n + 1/k) when the traffic does not hide, so the
    size at which a GEMM loses its efficiency grows with the GPU's ops:byte ratio (NVIDIA Deep Learning
    Performance guide, "Matrix Multiplication Background": a GEMM is memory-limited while its
    arithmetic intensity is below the GPU's ops:byte ratio). ``half_dim_ref`` is fitted on the Selene
    A100 80GB (data/schema.yaml efficiency.gemm_half_dim); an H100 SXM (989 / 3.35 = 295 FLOP/byte)
    needs matrices 1.9x larger for the same share of its peak. FP8 halves the bytes and doubles the
    peak, so the ratio in elements is the BF16 one.
    """
    return half_dim_ref * (peak_tflops / hbm_tbs) / HALF_DIM_REF_FLOP_PER_BYTE


@njit(cache=True)
def ring_seconds(bytes_per_gpu, n, bw, coll_eff):
    """Seconds of a ring reduce-scatter or all-gather of ``bytes_per_gpu`` over n ranks.

    (n - 1) / n of the buffer crosses each GPU's link (NCCL ring algorithm; nccl-tests
    PERFORMANCE.md "bus bandwidth"); ``coll_eff`` is the achieved share of the link bandwidth.
    An all-reduce is two of these.
    """
    if n <= 1.0:
        return 0.0
    return (n - 1.0) / n * bytes_per_gpu / (bw * coll_eff)


@njit(cache=True)
def overlapped_seconds(comm_s, window_s, contention):
    """Step seconds a collective adds when it runs behind ``window_s`` of compute.

    The part that does not fit in the window is exposed; the part that overlaps still slows the
    compute it shares the GPU with by ``contention`` (NCCL kernels occupy SMs and HBM bandwidth:
    Wang et al. 2023, "Overlap communication with dependent computation", arXiv:2305.06942; Jangda
    et al. 2022, CoCoNet). contention is a fitted knob (data/schema.yaml efficiency.overlap_contention).
    """
    hidden = min(comm_s, max(window_s, 0.0))
    return comm_s - hidden + contention * hidden


@njit(cache=True)
def _link(group, inner, hw):
    """Bandwidth (bytes/s per GPU) of a group of ``group`` ranks spaced ``inner`` GPUs apart.

    Inside one node (group x inner <= GPUs per node): NVLink / Infinity Fabric; otherwise the
    scale-out network (InfiniBand / RoCE) per GPU (hardware.yaml, with sources).
    """
    if group * inner <= hw[W_GPN]:
        return hw[W_INTRA]
    return hw[W_INTER]


@njit(cache=True)
def micro_batches(job, dp, mb):
    """Micro-batches per optimizer step on each data-parallel rank: the gradient accumulation steps
    when given, else global batch / (dp x micro-batch), rounded up (Narayanan et al. 2021 Sec. 2.2: m)."""
    if job[J_ACCUM] > 0.0:
        return job[J_ACCUM]
    return math.ceil(job[J_GB] / (dp * mb))


@njit(cache=True)
def layer_params(model):
    """(attention, dense MLP, one routed expert) parameters of one layer, counts.

    q and o are h x (a d_head); k and v are h x (kv_heads d_head) (GQA, Ainslie et al. 2023);
    an MLP has 3 matrices when gated (SwiGLU, Shazeer 2020) else 2.
    """
    h = model[M_H]
    q = model[M_A] * model[M_HD]
    kv = model[M_KV] * model[M_HD]
    attn = h * q + 2.0 * h * kv + q * h
    nmat = 3.0 if model[M_GATED] > 0.5 else 2.0
    return attn, nmat * h * model[M_FFN], nmat * h * model[M_MOE_FFN]


@njit(cache=True, inline='always')
def _local_layer_weights(model, plan):
    """Weights of one layer a GPU holds (count): attention and MLP over tp; an MoE layer's shared experts
    and its E/ep local routed experts over tp."""
    attn_p, mlp_p, exp_p = layer_params(model)
    if model[M_E] > 0.0:
        return (attn_p + (model[M_SHARED] + model[M_E] / plan[P_EP]) * exp_p) / plan[P_TP]
    return (attn_p + mlp_p) / plan[P_TP]


@njit(cache=True)
def _attn_span(job):
    """The attention context of the job (tokens): ``attn_ctx`` when set (sliding-window layers), else the sequence."""
    return job[J_ACTX] if job[J_ACTX] > 0.0 else job[J_SEQ]


@njit(cache=True)
def _activation_bytes(model, job, plan):
    """Activation bytes the first pipeline stage holds (Korthikanti et al. 2022 Table 2; see _memory)."""
    tp, pp, dp, cp = plan[P_TP], plan[P_PP], plan[P_DP], plan[P_CP]
    mb, rc, v, sp = plan[P_MB], plan[P_RC], plan[P_V], plan[P_SP]
    h = model[M_H]
    s = job[J_SEQ] / cp
    sbh = s * mb * job[J_MBS] * h
    mlp_width = model[M_FFN] if model[M_E] <= 0.0 else (model[M_K] + model[M_SHARED]) * model[M_MOE_FFN]
    mlp = 19.0 * mlp_width / (4.0 * h)
    fp8_save = 7.0 if job[J_FP8] > 0.5 else 0.0
    if sp > 0.5 or tp <= 1.0:
        per_layer = sbh * (15.0 + mlp - fp8_save) / tp
    else:
        per_layer = sbh * (10.0 + (5.0 + mlp - fp8_save) / tp)
    if rc == RC_NONE:  # the scores of the keys each query sees: fewer in sliding-window layers
        per_layer += 5.0 * model[M_A] * s * sbh / h / tp * (_attn_span(job) / job[J_SEQ])
    layers_local = math.ceil(model[M_L] / pp)
    m = micro_batches(job, dp, mb)
    in_flight = min(pp, m)
    if _dualpipe(plan):  # DualPipe holds PP + 1 micro-batches (DeepSeek-V3 report Table 2)
        in_flight = min(pp + 1.0, m)
    elif v > 1.0:
        in_flight *= 1.0 + (pp - 1.0) / (pp * v)
    if rc == RC_FULL:
        act = in_flight * layers_local * 2.0 * sbh / tp + per_layer
    else:
        act = in_flight * layers_local * per_layer
    if job[J_MEDIA_ACT] > 0.0:  # a trained media encoder on the first stage: its activations per sequence
        media = job[J_MEDIA_ACT] * mb * job[J_MBS] * in_flight
        act += media * (2.0 / 34.0) if rc == RC_FULL else media  # full recompute keeps layer inputs only
    return act


@njit(cache=True, inline='always')
def _dualpipe(plan):
    """True when the plan runs DualPipe (its ``dualpipe`` field) on a pipeline of 2+ stages."""
    return plan[P_DUAL] > 0.5 and plan[P_PP] > 1.0


@njit(cache=True)
def _dual_choices(model, job, pins):
    """(first, last) of the plan's ``dualpipe`` field the search tries: 0 = 1F1B, 1 = DualPipe.

    A pinned schedule is kept; ``search`` tries both (DualPipe never with a pinned interleave above 1).
    The default stays 1F1B: DualPipe hides the expert all-to-all behind compute (DeepSeek-V3 report,
    arXiv:2412.19437 Sec. 3.2.1), which the DeepSeek runs did, but letting the search pick it for every
    mixture of experts moves the other public MoE runs from about right to 10-25% too fast
    (docs/validation.md), so it is the user's choice.
    """
    if job[J_DUAL] == SCHED_DUALPIPE:
        return 1, 1
    if job[J_DUAL] == SCHED_EITHER and pins[P_V] <= 1.0:
        return 0, 1
    return 0, 0


@njit(cache=True)
def held_params(model, plan):
    """Parameters one GPU holds (count): 1/(tp pp) of the dense ones, 1/(tp pp ep) of the experts'."""
    tp, pp, ep = plan[P_TP], plan[P_PP], plan[P_EP]
    n_exp = model[M_NEXP]
    return (model[M_NTOT] - n_exp) / (tp * pp) + n_exp / (tp * pp * ep)


@njit(cache=True)
def sharded_params(model, plan):
    """Parameters one GPU keeps of a state ZeRO shards over the dp x cp replicas (count).

    The dense parameters a GPU holds are replicated on all dp x cp ranks, so ZeRO splits them dp x cp
    ways; an expert shard is already split ep ways among those ranks, so only dp x cp / ep of them
    hold it and ZeRO splits it that many ways (Megatron-Core's expert data-parallel group; DeepSpeed
    MoE's expert-data-parallel ZeRO groups). Either way a GPU keeps 1/(tp pp dp cp) of the model.
    """
    tp, pp, ep = plan[P_TP], plan[P_PP], plan[P_EP]
    n_exp = model[M_NEXP]
    dense = (model[M_NTOT] - n_exp) / (tp * pp * plan[P_DP] * plan[P_CP])
    return dense + n_exp / (tp * pp * ep * _expert_replicas(plan))


@njit(cache=True, inline='always')
def _expert_replicas(plan):
    """How many of the dp x cp replicas hold the same experts: dp x cp / ep (at least 1)."""
    return max(plan[P_DP] * plan[P_CP] / plan[P_EP], 1.0)


@njit(cache=True)
def model_state_bytes(model, job, plan):
    """(weights, gradients, optimizer) bytes per GPU of the model states, before any paging.

    Full fine-tuning with BF16 mixed precision (DeepSpeed estimators ``stage_1_and_2.py``
    ``estimate_zero2_model_states_mem_needs`` / ``stage3.py`` ``estimate_zero3_...``): weights 2
    bytes, gradients 2 (BF16) + 4 (FP32 main grads), optimizer the FP32 master 4 plus the
    optimizer's states (:func:`~costcore.engine.formulas.optimizer_state_bytes`: 8 for AdamW, so
    16 + 4 = 20 in all), per parameter the GPU holds. ZeRO-1 shards the optimizer, ZeRO-2 the FP32
    gradients too (4 N + 16 N / G for AdamW), ZeRO-3 everything (18 N / G), over the dp x cp
    ranks that replicate the model. A GPU holds 1/(tp pp) of the dense parameters and
    1/(tp pp ep) of the experts'; ZeRO shards an expert shard over the dp x cp / ep ranks that
    hold it (:func:`sharded_params`). CPU offload of the optimizer (ZeRO-Offload) keeps only the BF16
    weights on the GPU (the estimators' 2 N with ZeRO-2, 2 N / G with ZeRO-3; gradients stream to
    the CPU in buckets); of the weights too (ZeRO-Infinity) nothing but the working layers.
    LoRA / QLoRA: the frozen base at ``base_bytes`` per parameter (2 BF16, 1 FP8 or LLM.int8, 0.516
    NF4), and per adapter parameter 2 (BF16 weight) + 2 (gradient) + master 4 + states.
    """
    tp, pp, dp, cp, zero = plan[P_TP], plan[P_PP], plan[P_DP], plan[P_CP], plan[P_ZERO]
    local = held_params(model, plan)
    part = sharded_params(model, plan)  # what ZeRO leaves of ``local`` (experts shard over dp x cp / ep)
    shard = dp * cp
    off = job[J_OFFLOAD]
    opt_bpp = MASTER_BYTES_PER_PARAM + optimizer_state_bytes(job[J_OPT], model[M_H])
    if job[J_METHOD] == METHOD_FULL:
        w_b = 2.0 * local
        g_b = 2.0 * local + 4.0 * local
        o_b = opt_bpp * local
        if zero >= 0.5:
            o_b = opt_bpp * part
        if zero >= 1.5:
            g_b = 2.0 * local + 4.0 * part
        if zero >= 2.5:
            w_b = 2.0 * part
            g_b = 4.0 * part
    else:
        w_b = job[J_BASE_BYTES] * local
        if zero >= 2.5:
            w_b = job[J_BASE_BYTES] * part
        n_tr = model[M_NTRAIN] / (tp * pp)
        w_b += 2.0 * n_tr
        g_b = 2.0 * n_tr
        o_b = opt_bpp * n_tr
    if _dualpipe(plan):  # each GPU holds a chunk of each direction: two copies of its weights (Table 2)
        w_b *= 2.0
    if job[J_EXTRA] > 0.0:  # a frozen copy of another model (DPO live reference), bf16
        extra = 2.0 * job[J_EXTRA] / (tp * pp)
        w_b += extra / shard if zero >= 2.5 else extra
    if off >= OFFLOAD_OPTIMIZER:
        o_b = 0.0
        g_b = 0.0
    if off >= OFFLOAD_OPTIMIZER_AND_PARAMS:
        w_b = 0.0
    return w_b, g_b, o_b


@njit(cache=True)
def _buffer_bytes(model, hw, job, plan):
    """Buffers per GPU (bytes; see :func:`_memory`): the loss's logits (``logit_bytes`` per token and vocabulary
    entry: 4 for one FP32 copy), ZeRO-3's two prefetched layers, buckets, and
    for a quantized base the BF16 copy of its largest weight matrix, which bitsandbytes allocates to dequantize
    into before each matmul and frees after it (functional.py dequantize_4bit: ``out = torch.empty(shape,
    dtype=quant_state.dtype)``; autograd/_functions.py MatMul4Bit, forward and backward)."""
    tp, cp, mb, zero = plan[P_TP], plan[P_CP], plan[P_MB], plan[P_ZERO]
    s = job[J_SEQ] / cp
    buf = hw[W_LOGIT] * s * mb * job[J_MBS] * model[M_V] / tp + hw[W_BUFFER]
    if zero >= 2.5 and (job[J_METHOD] == METHOD_FULL or job[J_OFFLOAD] >= OFFLOAD_OPTIMIZER_AND_PARAMS):
        attn_p, mlp_p, exp_p = layer_params(model)
        buf += 2.0 * 2.0 * (attn_p + max(mlp_p, exp_p)) / tp
    if job[J_QBASE] > 0.5:  # the BF16 copy of the one weight matrix being dequantized for its matmul
        buf += 2.0 * model[M_H] * max(model[M_FFN], model[M_MOE_FFN], model[M_A] * model[M_HD]) / tp
    return buf


@njit(cache=True)
def _memory(model, hw, job, plan, out):
    """Memory per GPU by kind into ``out`` (bytes); returns the total.

    Model states: :func:`model_state_bytes`. Paged 8-bit AdamW keeps its states in unified memory
    that the driver pages to the CPU when the GPU runs out (Dettmers et al. 2023, arXiv:2305.14314
    Sec. 2): what does not fit is paged out (``mem_paged_out``; :func:`plan_terms` charges the
    page traffic) rather than failing. Activations (Korthikanti et al. 2022, arXiv:2205.05198
    Sec. 4, Table 2), per layer and micro-batch of b sequences of s/cp tokens: selective
    recompute with sequence parallelism 34 s b h / t (no SP: s b h (10 + 24 / t)); none adds the
    attention scores 5 a s^2 b / t; full keeps only the layer input 2 s b h / t plus one layer's
    working set. The MLP's share (19 of the 34) scales with its width (MoE: top-k experts). FP8
    stores the linear layers' inputs (14 of the 34) in one byte. With 1F1B the first stage holds
    min(p, m) micro-batches of L/p layers (Narayanan et al. 2021 Sec. 2.2); interleaving adds
    (p - 1)/(p v) of that. Buffers: the loss's logits, ``logit_bytes`` x s b V / t (4: one FP32
    copy), ZeRO-3's two prefetched layers (also with offloaded weights: the layers being computed),
    communication buckets, a quantized base's dequantized matrix (:func:`_buffer_bytes`).
    """
    tp, cp, mb, zero = plan[P_TP], plan[P_CP], plan[P_MB], plan[P_ZERO]
    w_b, g_b, o_b = model_state_bytes(model, job, plan)
    s = job[J_SEQ] / cp
    act = _activation_bytes(model, job, plan)
    buf = _buffer_bytes(model, hw, job, plan)
    total = w_b + g_b + o_b + act + buf
    paged = 0.0
    if job[J_OPT] == OPT_PAGED_ADAMW_8BIT and total > hw[W_MEM]:
        paged = min(o_b, total - hw[W_MEM])
        o_b -= paged
        total -= paged
    out[T_WEIGHTS] = w_b
    out[T_GRADS] = g_b
    out[T_OPTIM] = o_b
    out[T_ACT] = act
    out[T_BUF] = buf
    out[T_PAGED] = paged
    out[T_MEM] = total
    return total


@njit(cache=True)
def _layer_forward(model, hw, job, plan):
    """Forward seconds of one layer for one micro-batch: (linear, attention, memory-bound, TP, EP, CP exposed,
    and of the linear: the quantized base's dequantization, the LoRA adapters).

    Linear: 2 FLOPs per parameter per token (Kaplan et al. 2020 Sec. 2.1) of the attention, MLP and top-k +
    shared experts, over tp x cp GPUs, at the GEMM efficiency of their shapes and the BF16 or FP8 peak; a
    quantized base adds its dequantization (formulas.dequant_seconds); LoRA adds its adapters' 2 FLOPs per
    parameter and token, times 1.5 (their backward is 2x, the frozen base's 1x, which is how the backward
    counts this term), at the attention projection's efficiency (the recompute of a forward then counts the
    adapters 1.5x: an over-count of half their forward). Attention core: causal FlashAttention does 2 s
    d_head a FLOPs per token (half of 4 s h: masked blocks skipped; Dao 2023, arXiv:2307.08691 Sec. 3) at
    the GPU's attention efficiency. Memory-bound work (norms, activations, dropout, residuals): the 34 s b h
    activation bytes of Korthikanti et al. 2022 Table 2, times the traffic knob, read and written at HBM
    bandwidth. Tensor parallelism: 2 all-gathers and 2 reduce-scatters of s b h bf16 values per layer with
    sequence parallelism (2 all-reduces without: the same bytes; Korthikanti et al. Sec. 4.2.2); the
    ``tp_overlap`` share of them runs behind the layer's own matmuls, at most their time, slowed by
    ``overlap_contention`` (chunked collective-matmul overlap: Wang et al. 2023, arXiv:2305.06942;
    Transformer Engine / Megatron-Core tp-comm-overlap; 0 for Megatron-LM 2021-22). Expert parallelism:
    dispatch and combine all-to-all of the top-k copies of each token (Lepikhin et al. 2020, GShard), fewer
    with node-limited routing (:func:`_a2a_copies`). Context parallelism: ring attention passes K and V to
    cp - 1 neighbours, hidden behind the attention compute (Liu et al. 2023, arXiv:2310.01889).
    """
    tp, cp, ep, mb = plan[P_TP], plan[P_CP], plan[P_EP], plan[P_MB]
    h = model[M_H]
    tokens = job[J_SEQ] / cp * mb * job[J_MBS]
    attn_p, mlp_p, exp_p = layer_params(model)
    peak_lin = hw[W_PEAK]
    eff_max = hw[W_GEMM]
    if job[J_FP8] > 0.5 and hw[W_FP8] > hw[W_PEAK]:
        peak_lin = hw[W_FP8]
        eff_max = hw[W_GEMM] * hw[W_FP8_EFF]
    half = hw[W_HALF]
    q = model[M_A] * model[M_HD]
    e_attn_proj = gemm_efficiency(tokens, q / tp, h, eff_max, half)
    t_lin = 2.0 * tokens * attn_p / tp / (peak_lin * e_attn_proj)
    if model[M_E] > 0.0:
        e_dense = gemm_efficiency(tokens, model[M_MOE_FFN] / tp, h, eff_max, half)
        t_lin += 2.0 * tokens * model[M_SHARED] * exp_p / tp / (peak_lin * e_dense)
        per_expert = tokens * ep * model[M_K] / model[M_E]  # tokens one local expert sees
        e_exp = gemm_efficiency(per_expert, model[M_MOE_FFN] / tp, h, eff_max, half)
        t_lin += 2.0 * tokens * model[M_K] * exp_p / tp / (peak_lin * e_exp)
    else:
        e_mlp = gemm_efficiency(tokens, model[M_FFN] / tp, h, eff_max, half)
        t_lin += 2.0 * tokens * mlp_p / tp / (peak_lin * e_mlp)
    t_deq, t_ad = 0.0, 0.0
    if job[J_QBASE] > 0.5:  # QLoRA's NF4 (or an 8-bit base) dequantized to BF16 before every matmul
        t_deq = t_lin * job[J_DEQ] + dequant_seconds(_local_layer_weights(model, plan), job[J_BASE_BYTES], hw[W_HBM])
    if job[J_METHOD] != METHOD_FULL:  # LoRA adapters: 2 FLOPs per adapter parameter and token forward, 4 backward
        # (input and weight gradients), so 1.5x their forward here: the backward counts t_lin once for a frozen base
        t_ad = 1.5 * 2.0 * tokens * model[M_NTRAIN] / model[M_L] / tp / (peak_lin * e_attn_proj)
    t_lin += t_deq + t_ad
    # keys per query: the causal context, or less where layers attend in a sliding window (formulas.attention_context)
    t_attn = 2.0 * tokens * _attn_span(job) * q / tp / (hw[W_PEAK] * hw[W_ATTN] * hw[W_GEMM])
    sp_div = tp if (plan[P_SP] > 0.5 or tp <= 1.0) else 1.0
    t_mem = hw[W_TRAFFIC] * tokens * h * (24.0 / tp + 10.0 / sp_div) / hw[W_HBM]
    coll = hw[W_COLL]
    t_tp = 4.0 * ring_seconds(2.0 * tokens * h, tp, _link(tp, 1.0, hw), coll)
    if hw[W_TP_OVERLAP] > 0.0:  # the share hidden behind the layer's own GEMMs (chunked all-gather/reduce-scatter)
        hidden = min(hw[W_TP_OVERLAP] * t_tp, t_lin)
        t_tp -= hidden * (1.0 - hw[W_CONTENTION])
    t_ep = 0.0
    if model[M_E] > 0.0 and ep > 1.0:
        a2a_bytes = 2.0 * tokens * _a2a_copies(model, hw, ep, tp) * h / tp
        t_ep = 2.0 * (ep - 1.0) / ep * a2a_bytes / (_link(ep, tp, hw) * coll)
    t_cp = 0.0
    if cp > 1.0:
        kv_bytes = 2.0 * 2.0 * tokens * model[M_KV] * model[M_HD] / tp
        t_cp = max(0.0, (cp - 1.0) * kv_bytes / (_link(cp, tp, hw) * coll) - t_attn)
    return t_lin, t_attn, t_mem, t_tp, t_ep, t_cp, t_deq, t_ad


@njit(cache=True, inline='always')
def _a2a_copies(model, hw, ep, tp):
    """Copies of a token the expert all-to-all sends: one per routed expert (GShard), or, when the
    expert-parallel group spans nodes and routing is node-limited (``model.expert_node_limit``), one
    per node it reaches, at most that limit, forwarded inside the node over NVLink (DeepSeek-V3
    report, arXiv:2412.19437 Sec. 2.1.2 and 3.2.2)."""
    k = model[M_K]
    if model[M_NODES] > 0.0 and ep * tp > hw[W_GPN]:
        return min(k, model[M_NODES], ep * tp / hw[W_GPN])
    return k


@njit(cache=True)
def _compute_seconds(model, hw, job, plan, t_lin, t_attn, t_mem):
    """Compute seconds of one micro-batch on the busiest pipeline stage: its L/p layers forward and
    backward (from :func:`_layer_forward`'s terms) plus the LM head (2 s b h V FLOPs, x3). No
    communication, bubble or recompute: :func:`plan_terms` adds those, and the search bounds a
    plan's step from below by micro-batches x this (:func:`_rate_bound`)."""
    lin_bwd = 2.0 if job[J_METHOD] == METHOD_FULL else 1.0
    compute_l = t_lin * (1.0 + lin_bwd) + t_attn * 3.0 + t_mem * 3.0
    tp = plan[P_TP]
    nl = math.ceil(model[M_L] / plan[P_PP])
    tokens = job[J_SEQ] / plan[P_CP] * plan[P_MB] * job[J_MBS]
    h, V = model[M_H], model[M_V]
    head = 3.0 * 2.0 * tokens * h * V / tp / (hw[W_PEAK] * gemm_efficiency(tokens, V / tp, h, hw[W_GEMM],
                                                                            hw[W_HALF]))
    return nl * compute_l + head


@njit(cache=True)
def _comm_layer_seconds(t_tp, t_ep, t_cp):
    """Exposed collectives of one layer, forward and backward: 2 TP, 2 EP all-to-all, 3 CP passes (seconds)."""
    return 2.0 * t_tp + 2.0 * t_ep + 3.0 * t_cp


@njit(cache=True)
def _recompute_layer_seconds(rc, t_lin, t_attn, t_mem, t_tp, t_ep, t_cp):
    """Recompute of one layer (seconds): full reruns its forward, selective the attention core, none nothing
    (Korthikanti et al. 2022 Sec. 5); rc < 0 (not pinned) counts as none."""
    if rc == RC_FULL:
        return t_lin + t_attn + t_mem + t_tp + t_ep + t_cp
    if rc == RC_SELECTIVE:
        return t_attn
    return 0.0


@njit(cache=True)
def _p2p_seconds(model, hw, job, plan, v):
    """Pipeline point-to-point sends of one micro-batch with v interleaved chunks (seconds; 0 without a
    pipeline): scatter-gather, each TP rank sends 1/t of the s b h activations (Narayanan et al. 2021)."""
    if plan[P_PP] <= 1.0:
        return 0.0
    tokens = job[J_SEQ] / plan[P_CP] * plan[P_MB] * job[J_MBS]
    return 2.0 * v * 2.0 * tokens * model[M_H] / plan[P_TP] / (hw[W_INTER] * hw[W_COLL])


@njit(cache=True)
def plan_terms(model, hw, job, plan, out):
    """Evaluate one plan: the step's named terms and memory into ``out`` (TERM_FIELDS); returns step seconds.

    Per micro-batch, the busiest pipeline stage runs L/p layers forward and backward (backward =
    2x forward for the linear layers of a full fine-tune, 1x for a frozen LoRA base: input
    gradients only; 2x for attention) plus the LM head on the last stage (2 s b h V FLOPs, x3).
    Recompute: full reruns the forward, selective the attention core (Korthikanti et al. 2022
    Sec. 5). 1F1B pipeline with v interleaved chunks: step = (m + (p - 1)/v) micro-batch times
    (Narayanan et al. 2021, arXiv:2104.04473 Sec. 2.2), plus point-to-point sends between stages;
    a DualPipe plan times its micro-batches, sends and bubble by :func:`_dualpipe_terms`.
    Data parallelism: the gradient reduce-scatter / all-reduce over dp x cp replicas (2 ring
    passes of 2 bytes per local trainable parameter) overlaps the last micro-batch's backward up to
    the ``dp_overlap`` share (PyTorch DDP / Megatron bucketing); ZeRO-3 also all-gathers the
    weights twice per micro-batch, hidden behind that micro-batch's compute. The optimizer step
    reads and writes its states at HBM bandwidth. MFU = model FLOPs of the step / (step x G x BF16
    peak), model FLOPs = the stage's FLOPs per token (PaLM App. B) x tokens per step.
    """
    tp, pp, dp, cp = plan[P_TP], plan[P_PP], plan[P_DP], plan[P_CP]
    mb, rc, v = plan[P_MB], plan[P_RC], plan[P_V]
    mem = _memory(model, hw, job, plan, out)
    out[T_FITS] = 1.0 if mem <= hw[W_MEM] else 0.0
    t_lin, t_attn, t_mem, t_tp, t_ep, t_cp, t_deq, t_ad = _layer_forward(model, hw, job, plan)
    lin_bwd = 2.0 if job[J_METHOD] == METHOD_FULL else 1.0
    comm_l = _comm_layer_seconds(t_tp, t_ep, t_cp)
    recomp_l = _recompute_layer_seconds(rc, t_lin, t_attn, t_mem, t_tp, t_ep, t_cp)
    nl = math.ceil(model[M_L] / pp)
    p2p = _p2p_seconds(model, hw, job, plan, v)
    t_compute = _compute_seconds(model, hw, job, plan, t_lin, t_attn, t_mem)
    t_recomp = nl * recomp_l
    t_ep_mb, t_p2p_mb = nl * 2.0 * t_ep, p2p
    m = micro_batches(job, dp, mb)
    if _dualpipe(plan):
        t_compute, t_recomp, t_ep_mb, t_p2p_mb, bubble_mb = _dualpipe_terms(hw, job, nl, pp, t_lin, t_attn, t_mem,
                                                                            t_compute, t_recomp, t_ep_mb, p2p)
        t_comm = nl * (2.0 * t_tp + 3.0 * t_cp) + t_ep_mb + t_p2p_mb
        t_mb = t_compute + t_comm + t_recomp
        bubble = bubble_mb
    else:
        t_comm = nl * comm_l + p2p
        t_mb = t_compute + t_comm + t_recomp
        bubble = (pp - 1.0) / v * t_mb
    local = held_params(model, plan)
    if job[J_METHOD] != METHOD_FULL:
        local = model[M_NTRAIN] / (tp * pp)
    replicas = dp * cp
    bwd_last = nl * (t_lin * lin_bwd + t_attn * 2.0 + t_mem * 2.0)
    dp_exposed, zero_exposed = _replica_seconds(model, hw, job, plan, local, bwd_last, t_compute, m)
    t_opt, t_off = _optimizer_seconds(model, hw, job, plan, out, local, replicas, m, t_compute)
    step = m * t_mb + bubble + dp_exposed + zero_exposed + t_opt + t_off
    out[T_STEP] = step
    out[T_OFFLOAD] = t_off
    out[T_COMPUTE] = m * t_compute
    out[T_COMM] = m * t_comm + dp_exposed + zero_exposed
    out[T_BUBBLE] = bubble
    out[T_RECOMP] = m * t_recomp
    out[T_OPT] = t_opt
    out[T_TP] = m * nl * 2.0 * t_tp
    out[T_DP] = dp_exposed
    out[T_ZERO] = zero_exposed
    out[T_CP] = m * nl * 3.0 * t_cp
    out[T_EP] = m * t_ep_mb
    out[T_P2P] = m * t_p2p_mb
    out[T_MICRO] = m
    # of the compute: the dequantization and the adapters, forward and backward (recompute repeats them in its term)
    out[T_DEQUANT] = m * nl * t_deq * (1.0 + lin_bwd)
    out[T_ADAPTER] = m * nl * t_ad * (1.0 + lin_bwd)
    used = tp * pp * dp * cp
    out[T_USED] = used
    step_tokens = m * dp * mb * job[J_TOKSEQ]
    # per GPU of the job (idle ones billed too); a fallback plan shown when none fits may use more GPUs
    # than the job has, and is then rated on its own (an MFU over 100% otherwise: 803% for a 70B on 1 GPU)
    billed = max(job[J_G], used)
    out[T_MFU] = job[J_FPT] * step_tokens / (step * billed * hw[W_PEAK])
    out[T_TOKS] = step_tokens / (step * billed)
    return step


@njit(cache=True)
def _replica_seconds(model, hw, job, plan, local, bwd_last, t_compute, m):
    """(exposed gradient reduction, exposed ZeRO-3 gathers) of one step, seconds (see :func:`plan_terms`).

    The gradients of the ``local`` trained parameters reduce over the dp x cp replicas behind the last
    micro-batch's backward, up to the ``dp_overlap`` share of it; ZeRO-3 gathers the weights twice per
    micro-batch behind its compute (Rajbhandari et al. 2020, arXiv:1910.02054 Sec. 7.2.2: forward and
    backward), in BF16 for a full fine-tune and at the base's own bytes per parameter for LoRA and QLoRA,
    whose frozen base ZeRO-3 shards all the same (:func:`_memory`; FSDP with QLoRA, Answer.AI 2024). An expert
    shard is held by dp x cp / ep of the replicas only, so its part reduces and gathers over those
    (:func:`sharded_params`).
    """
    tp, pp, ep = plan[P_TP], plan[P_PP], plan[P_EP]
    replicas = plan[P_DP] * plan[P_CP]
    bw = _link(replicas, tp * pp, hw)
    full = job[J_METHOD] == METHOD_FULL
    e_held = model[M_NEXP] / (tp * pp * ep)  # the expert weights a GPU holds
    e_local = e_held if full else 0.0  # of them, trained
    e_replicas = _expert_replicas(plan)
    t_dp = 2.0 * (ring_seconds(hw[W_GRAD_BYTES] * (local - e_local), replicas, bw, hw[W_COLL])
                  + ring_seconds(hw[W_GRAD_BYTES] * e_local, e_replicas, bw, hw[W_COLL]))
    dp_exposed = overlapped_seconds(t_dp, hw[W_OVERLAP] * bwd_last, hw[W_CONTENTION])
    zero_exposed = 0.0
    if plan[P_ZERO] >= 2.5:
        w_bytes = 2.0 if full else job[J_BASE_BYTES]
        dense = (local if full else held_params(model, plan)) - e_held
        gather = 2.0 * (ring_seconds(w_bytes * dense, replicas, bw, hw[W_COLL])
                        + ring_seconds(w_bytes * e_held, e_replicas, bw, hw[W_COLL]))
        zero_exposed = m * overlapped_seconds(gather, t_compute, hw[W_CONTENTION])
    return dp_exposed, zero_exposed


@njit(cache=True)
def _dualpipe_terms(hw, job, nl, pp, t_lin, t_attn, t_mem, t_compute, t_recomp, t_ep, p2p):
    """One micro-batch under DualPipe: (compute, recompute, exposed all-to-all, exposed sends, the step's bubble), s.

    DualPipe (DeepSeek-V3 report, arXiv:2412.19437 Sec. 3.2.1, Table 2) pairs each forward chunk
    with another micro-batch's backward chunk, so the expert all-to-all (dispatch and combine) and
    the pipeline sends of one run behind the other's compute: they are exposed only where they
    outlast it (:func:`overlapped_seconds`). The communication kernels run on their own SMs
    (Sec. 3.2.2: 20 of 132), so the matmuls run on the rest: compute and recompute take
    1 / (1 - ``dualpipe_comm_sm_share``) as long. Bubble: (PP/2 - 1)(F&B + B - 3W) micro-batch
    chunk times (Table 2), with F the forward, B the backward (recompute included), W its
    weight-gradient half (the linear layers' weight gradients of a full fine-tune; none for a frozen
    base) and F&B = F + B, the paired chunk once its communication is hidden.
    """
    slow = 1.0 / (1.0 - hw[W_DUAL_SMS])
    t_compute *= slow
    t_recomp *= slow
    comm = t_ep + p2p
    exposed = overlapped_seconds(comm, t_compute + t_recomp, hw[W_CONTENTION])
    share = exposed / comm if comm > 0.0 else 0.0
    lin_bwd = 2.0 if job[J_METHOD] == METHOD_FULL else 1.0
    layers_fwd = nl * (t_lin + t_attn + t_mem) * slow
    per_layer = nl * (t_lin * (1.0 + lin_bwd) + 3.0 * (t_attn + t_mem)) * slow
    fwd = layers_fwd + (t_compute - per_layer) / 3.0  # the LM head's forward is a third of its three passes
    wgrad = nl * t_lin * (lin_bwd - 1.0) * slow
    bwd = t_compute + t_recomp - fwd
    bubble = max(pp / 2.0 - 1.0, 0.0) * max(fwd + 2.0 * bwd - 3.0 * wgrad, 0.0)
    return t_compute, t_recomp, t_ep * share, p2p * share, bubble


@njit(cache=True)
def _optimizer_seconds(model, hw, job, plan, out, local, replicas, m, t_compute):
    """(optimizer step on the GPU, CPU offload and paging) seconds of one step.

    On the GPU the step reads and writes the trained parameters' weights, gradients, master copy
    and states at HBM bandwidth (2 x (2 + 2 + 4 + states) bytes per parameter it holds; sharded
    by ZeRO-1 and up). Offloaded optimizer (ZeRO-Offload, Ren et al. 2021, arXiv:2101.06840
    Sec. 4): the BF16 gradients go to the CPU and the updated BF16 weights come back over PCIe
    (2 + 2 bytes per parameter of the GPU's shard), and the CPU Adam step streams
    CPU_ADAM_BYTES_PER_PARAM per parameter through host memory; neither overlaps (no delayed
    update). Offloaded weights (ZeRO-Infinity, Rajbhandari et al. 2021, arXiv:2104.07857 Sec. 5):
    each micro-batch fetches the GPU's shard of the weights over PCIe for the forward and the
    backward pass, prefetched behind that micro-batch's compute. Paged optimizer states that do
    not fit cross PCIe twice per step (paged out, paged back for the update).
    """
    n = local
    if plan[P_ZERO] >= 0.5:
        n = sharded_params(model, plan) if job[J_METHOD] == METHOD_FULL else local / replicas
    states = MASTER_BYTES_PER_PARAM + optimizer_state_bytes(job[J_OPT], model[M_H])
    t_opt = 0.0
    t_off = 0.0
    if job[J_OFFLOAD] >= OFFLOAD_OPTIMIZER:
        t_off = 4.0 * n / hw[W_PCIE] + CPU_ADAM_BYTES_PER_PARAM * n / hw[W_CPU_BW]
    else:
        t_opt = 2.0 * (4.0 + states) * n / hw[W_HBM]
    if job[J_OFFLOAD] >= OFFLOAD_OPTIMIZER_AND_PARAMS:
        bpp = 2.0 if job[J_METHOD] == METHOD_FULL else job[J_BASE_BYTES]
        fetch = 2.0 * bpp * sharded_params(model, plan) / hw[W_PCIE]
        t_off += m * overlapped_seconds(fetch, t_compute, hw[W_CONTENTION])
    t_off += 2.0 * out[T_PAGED] / hw[W_PCIE]
    return t_opt, t_off


@njit(cache=True)
def _pp_ok(pp, L):
    """Pipeline degrees tried (pp an int): every divisor of L up to PP_MAX, and powers of two below L."""
    if pp > L or pp > PP_MAX:
        return False
    if L % pp == 0.0:
        return True
    return (pp & (pp - 1)) == 0


@njit(cache=True)
def _fill_plan(plan, tp, pp, dp, cp, ep, mb, rc, zero, v, sp, dual):
    plan[P_TP] = tp
    plan[P_PP] = pp
    plan[P_DP] = dp
    plan[P_CP] = cp
    plan[P_EP] = ep
    plan[P_MB] = mb
    plan[P_RC] = rc
    plan[P_ZERO] = zero
    plan[P_V] = v
    plan[P_SP] = sp
    plan[P_DUAL] = dual


@njit(cache=True)
def _insert(top, n_kept, row):
    """Keep ``top`` (k x NROW) sorted fastest first; returns the new count.

    Fastest = most tokens per GPU-second: plans round the global batch to whole micro-batches
    differently, so their steps hold different numbers of tokens and step time alone misranks them.
    """
    k = top.shape[0]
    rate = row[T_TOKS]
    if n_kept == k and rate <= top[k - 1, T_TOKS]:
        return n_kept
    i = min(n_kept, k - 1)
    while i > 0 and top[i - 1, T_TOKS] < rate:
        for c in range(NROW):
            top[i, c] = top[i - 1, c]
        i -= 1
    for c in range(NROW):
        top[i, c] = row[c]
    return min(n_kept + 1, k)


@njit(cache=True)
def _degree_ok(val, pin):
    return pin <= 0.0 or val == pin


@njit(cache=True)
def _cand(choices, i, pin):
    """Candidate i of a degree: the pinned value alone when pinned (i = 0), else choices[i - 1]; -1 = skip."""
    if pin > 0.0:
        return pin if i == 0 else -1.0
    return -1.0 if i == 0 else choices[i - 1]


@njit(cache=True)
def _tp_ok(tp, model, pins):
    """A tensor degree tried: one that splits the attention heads and the key/value heads, pinned or not
    (formulas.tp_splits_heads: Megatron-LM asserts num_attention_heads % tensor_model_parallel_size == 0, a head
    is not split; a pinned TP 3 on 64 heads, and TP 7 on 28 heads with 4 key/value heads, were costed as if
    they ran)."""
    return tp > 0.0 and tp <= model[M_A] and not tp_splits_heads(tp, model[M_A], model[M_KV])


@njit(cache=True)
def _pp_try(ipp, model, pins, dual):
    """A pipeline degree tried: see :func:`_pp_ok`; DualPipe runs only on an even pipeline of 2 or more stages."""
    pp = float(ipp)
    if dual > 0 and (ipp < 2 or ipp % 2 != 0):
        return False
    return _degree_ok(pp, pins[P_PP]) and pp <= model[M_L] and (_pp_ok(ipp, model[M_L]) or pp == pins[P_PP])


@njit(cache=True)
def _cp_ok(cp, job, pins):
    """A context degree tried: chunks of at least MIN_CP_TOKENS unless pinned."""
    return cp > 0.0 and not (cp > 1.0 and job[J_SEQ] / cp < MIN_CP_TOKENS and pins[P_CP] <= 0.0)


@njit(cache=True)
def _dp_cap(job, pins, mb):
    """The most data-parallel ranks a micro-batch size allows: global batch / micro-batch (or the
    pinned dp); -1 when the micro-batch exceeds the global batch (a searched micro-batch above 1).
    With gradient accumulation given, the global batch follows the plan, so only the pin caps dp."""
    if job[J_ACCUM] > 0.0:
        return pins[P_DP] if pins[P_DP] > 0.0 else 1e9
    cap = max(1.0, math.floor(job[J_GB] / mb))
    if pins[P_DP] > 0.0:
        cap = pins[P_DP]
    if mb > job[J_GB] / cap and mb > 1.0 and pins[P_MB] <= 0.0:
        return -1.0
    return cap


@njit(cache=True)
def _ep_ok(ep, replicas, ep_max):
    """Expert parallelism splits the experts (ep divides them) over the dp x cp ranks (ep divides those)."""
    return ep == 1.0 or (replicas % ep == 0.0 and ep_max % ep == 0.0)


@njit(cache=True)
def _zero_ok(zero, replicas, pins, job):
    """A searched ZeRO stage above 0 needs more than one replica to shard over; CPU offload needs
    ZeRO-2 (the optimizer) or ZeRO-3 (and the weights), on one GPU too (DeepSpeed ZeRO-Offload)."""
    need = 0.0
    if job[J_OFFLOAD] >= OFFLOAD_OPTIMIZER_AND_PARAMS:
        need = 3.0
    elif job[J_OFFLOAD] >= OFFLOAD_OPTIMIZER:
        need = 2.0
    if pins[P_ZERO] >= 0.0:
        return zero == pins[P_ZERO] and zero >= need
    if need > 0.0:
        return zero >= need
    return zero == 0.0 or replicas > 1.0


@njit(cache=True)
def _v_ok(v, pp, model, pins, dual):
    """Interleaved chunks: v > 1 only with a pipeline whose stages hold a multiple of v layers (unless pinned);
    never under DualPipe, which runs its own two chunks per GPU."""
    if v < 0.0 or (dual > 0 and v > 1.0):
        return False
    return not (v > 1.0 and pins[P_V] <= 0.0 and (pp <= 1.0 or math.ceil(model[M_L] / pp) % v != 0.0))


@njit(cache=True)
def _sp_for(tp, pins):
    """Sequence parallelism: on with tensor parallelism unless pinned."""
    if pins[P_SP] >= 0.0:
        return pins[P_SP]
    return 1.0 if tp > 1.0 else 0.0


@njit(cache=True)
def _rc_ok(rc, pins):
    return pins[P_RC] < 0.0 or rc == pins[P_RC]


@njit(cache=True)
def _rate_bound(model, hw, job, pins, row, tp, pp, cp, dp, mb, ep_max, dual):
    """The most tokens per GPU-second any plan with these (tp, pp, cp, dp, micro-batch) can reach.

    A step of :func:`plan_terms` is m micro-batch times plus the bubble plus terms >= 0 (exposed
    gradient reduction, ZeRO gathers, optimizer, offload). A micro-batch's compute and its TP and CP
    collectives do not depend on the recompute, ZeRO and interleave choices; its recompute is at
    least the pinned mode's (none when not pinned); the point-to-point sends grow with the
    interleave v and the bubble (p - 1) / v shrinks with it, so the bound takes the smallest v for
    the one and the largest for the other. Expert parallelism only adds all-to-all time and raises
    a local expert's tokens (its GEMM efficiency), so the bound takes the largest ep and no
    all-to-all. Under DualPipe the sends can hide and the bubble is never negative, and its compute only
    slows (:func:`_dualpipe_terms`), so the bound is the micro-batches' compute and collectives alone.
    A 1e-9 margin keeps float rounding on the safe side.
    """
    ep = pins[P_EP] if pins[P_EP] > 0.0 else ep_max
    _fill_plan(row, tp, pp, dp, cp, ep, mb, 0.0, 0.0, 1.0, _sp_for(tp, pins), float(dual))
    t_lin, t_attn, t_mem, t_tp, _t_ep, t_cp, _t_deq, _t_ad = _layer_forward(model, hw, job, row)
    nl = math.ceil(model[M_L] / pp)
    t_mb = _compute_seconds(model, hw, job, row, t_lin, t_attn, t_mem) + nl * _comm_layer_seconds(t_tp, 0.0, t_cp)
    t_mb += nl * _recompute_layer_seconds(pins[P_RC], t_lin, t_attn, t_mem, t_tp, 0.0, t_cp)
    v_lo, v_hi = 1.0, V_CHOICES[V_CHOICES.shape[0] - 1]
    if pins[P_V] > 0.0:
        v_lo, v_hi = pins[P_V], pins[P_V]
    m = micro_batches(job, dp, mb)
    if _dualpipe(row):  # the sends can hide behind compute and the bubble is smaller: micro-batches alone
        step_low = m * t_mb
    else:
        t_mb += _p2p_seconds(model, hw, job, row, v_lo)
        step_low = m * t_mb + (pp - 1.0) / v_hi * t_mb
    step_tokens = m * dp * mb * job[J_TOKSEQ]
    return step_tokens / (step_low * (1.0 - 1e-9) * job[J_G])


@njit(cache=True)
def search(model, hw, job, pins, top, row, prune):
    """Every plan of the job that fits, fastest first, into ``top`` (k x NROW); returns how many fit.

    Tries tp (dividing the heads), pp (see :func:`_pp_ok`), cp (chunks of at least
    MIN_CP_TOKENS), ep (dividing the experts and the dp x cp ranks), micro-batch, recompute, ZeRO
    stage and interleaving; dp is the most the GPUs and the global batch allow (or the pinned
    value). Pinned fields (``pins`` > 0; recompute, zero and sp >= 0) are kept. No plan uses more
    GPUs than the job has (tp x pp x cp x dp <= G). :func:`min_gpus` walks the same candidates
    (the ``_*_ok`` rules below are shared).
    """
    G = job[J_G]
    top[:, :] = 0.0
    fits = 0
    ep_max = max(1.0, model[M_E])
    d_lo, d_hi = _dual_choices(model, job, pins)
    for itp in range(TP_CHOICES.shape[0] + 1):
        tp = _cand(TP_CHOICES, itp, pins[P_TP])
        if not _tp_ok(tp, model, pins) or tp > G:
            continue
        for ipp in range(1, max(PP_MAX, int(pins[P_PP])) + 1):
            for dual in range(d_lo, d_hi + 1):
                pp = float(ipp)
                if not _pp_try(ipp, model, pins, dual) or tp * pp > G:
                    continue
                fits += _search_pp(model, hw, job, pins, top, row, prune, tp, pp, ep_max, dual)
    return fits


@njit(cache=True)
def _search_pp(model, hw, job, pins, top, row, prune, tp, pp, ep_max, dual):
    """:func:`search` under one (tp, pp, schedule): the cp x micro-batch choices; returns how many plans fit."""
    G = job[J_G]
    fits = 0
    for icp in range(CP_CHOICES.shape[0] + 1):
        cp = _cand(CP_CHOICES, icp, pins[P_CP])
        if not _cp_ok(cp, job, pins) or tp * pp * cp > G:
            continue
        dp_max = math.floor(G / (tp * pp * cp))
        for imb in range(MB_CHOICES.shape[0] + 1):
            mb = _cand(MB_CHOICES, imb, pins[P_MB])
            if mb < 0.0:
                continue
            cap = _dp_cap(job, pins, mb)
            if cap < 0.0 or (pins[P_DP] > 0.0 and cap > dp_max):
                continue
            dp = min(dp_max, cap)
            if mb > job[J_GB] / dp and mb > 1.0 and pins[P_MB] <= 0.0 and job[J_ACCUM] <= 0.0:
                continue
            # branch and bound: once ``top`` is full, a (tp, pp, cp, dp, mb) whose best possible
            # rate cannot enter it only has its fitting plans counted (same plans, same count)
            if prune and top[top.shape[0] - 1, T_STEP] > 0.0 and \
                    _rate_bound(model, hw, job, pins, row, tp, pp, cp, dp, mb, ep_max, dual) <= \
                    top[top.shape[0] - 1, T_TOKS]:
                fits += _count_inner(model, hw, job, pins, top, row, tp, pp, cp, dp, mb, ep_max, dual)
            else:
                fits += _search_inner(model, hw, job, pins, top, row, tp, pp, cp, dp, mb, ep_max, True, dual)
    return fits


@njit(cache=True)
def _count_inner(model, hw, job, pins, top, row, tp, pp, cp, dp, mb, ep_max, dual):
    """How many of :func:`_search_inner`'s plans fit in memory, without timing them.

    :func:`_memory`'s total is states (ep, ZeRO) + activations (recompute, interleave) + buffers
    (ZeRO), added in the same order from the same functions, so each part is computed once and
    the count is exactly the one a plan-by-plan walk gives. Paged optimizer states make the total
    depend on all three at once: those jobs walk plan by plan (:func:`_search_inner`, untimed).
    """
    if job[J_OPT] == OPT_PAGED_ADAMW_8BIT:
        return _search_inner(model, hw, job, pins, top, row, tp, pp, cp, dp, mb, ep_max, False, dual)
    nv = V_CHOICES.shape[0] + 1
    # activations of each allowed (recompute, interleave), nan where not tried, kept in the row's term
    # slots (the state and buffer functions read only its plan fields): the kernel allocates nothing
    for k in range(3 * nv):
        row[NP + k] = np.nan
    sp = _sp_for(tp, pins)
    for irc in range(3):
        rc = float(irc)
        if not _rc_ok(rc, pins):
            continue
        for iv in range(nv):
            v = _cand(V_CHOICES, iv, pins[P_V])
            if _v_ok(v, pp, model, pins, dual):
                _fill_plan(row, tp, pp, dp, cp, 1.0, mb, rc, 0.0, v, sp, float(dual))
                row[NP + irc * nv + iv] = _activation_bytes(model, job, row)
    cap = hw[W_MEM]
    fits = 0
    ep = pins[P_EP] if pins[P_EP] > 0.0 else 1.0
    while ep <= ep_max or ep == pins[P_EP]:
        if _ep_ok(ep, dp * cp, ep_max):
            for iz in range(4):
                zero = float(iz)
                if not _zero_ok(zero, dp * cp, pins, job):
                    continue
                _fill_plan(row, tp, pp, dp, cp, ep, mb, 0.0, zero, 1.0, sp, float(dual))
                w_b, g_b, o_b = model_state_bytes(model, job, row)
                buf = _buffer_bytes(model, hw, job, row)
                for k in range(3 * nv):
                    act = row[NP + k]
                    if not math.isnan(act) and w_b + g_b + o_b + act + buf <= cap:
                        fits += 1
        if pins[P_EP] > 0.0:
            break
        ep *= 2.0
    return fits


@njit(cache=True)
def _search_inner(model, hw, job, pins, top, row, tp, pp, cp, dp, mb, ep_max, timed, dual):
    """The ep x recompute x ZeRO x interleave x sp choices of one (tp, pp, cp, dp, micro-batch): how many
    fit; ``timed``: each one that fits is timed and kept in ``top`` if fast enough (else only counted)."""
    fits = 0
    n_kept = 0
    while n_kept < top.shape[0] and top[n_kept, T_STEP] > 0.0:
        n_kept += 1
    ep = pins[P_EP] if pins[P_EP] > 0.0 else 1.0
    while ep <= ep_max or ep == pins[P_EP]:
        if _ep_ok(ep, dp * cp, ep_max):
            for irc in range(3):
                rc = float(irc)
                if not _rc_ok(rc, pins):
                    continue
                for iz in range(4):
                    zero = float(iz)
                    if not _zero_ok(zero, dp * cp, pins, job):
                        continue
                    for iv in range(V_CHOICES.shape[0] + 1):
                        v = _cand(V_CHOICES, iv, pins[P_V])
                        if not _v_ok(v, pp, model, pins, dual):
                            continue
                        _fill_plan(row, tp, pp, dp, cp, ep, mb, rc, zero, v, _sp_for(tp, pins), float(dual))
                        if _memory(model, hw, job, row, row) > hw[W_MEM]:
                            continue
                        fits += 1
                        if timed:
                            plan_terms(model, hw, job, row, row)
                            n_kept = _insert(top, n_kept, row)
        if pins[P_EP] > 0.0:
            break
        ep *= 2.0
    return fits


@njit(cache=True)
def _gcd(a, b):
    a, b = int(a), int(b)
    while b:
        a, b = b, a % b
    return float(a)


@njit(cache=True)
def min_gpus(model, hw, job, pins, row, known):
    """The fewest GPUs on which :func:`search` finds a plan that fits (0 when none fits on any number).

    The search on G GPUs gives each (tp, pp, cp, micro-batch, ep, recompute, ZeRO, interleave)
    candidate dp = min(G / (tp pp cp), its cap). Micro-batch 1 and no interleaving need the least
    memory (unless pinned), so only they are tried here, and a candidate's fewest GPUs is tp pp cp
    times the smallest dp in [1, cap] that fits and obeys the dp rules (ep divides dp x cp, ZeRO needs
    two replicas). Memory never grows with dp (ZeRO shards over more ranks, fewer micro-batches
    are in flight: see _memory), so that dp is found by bisection over the multiples of
    ep / gcd(ep, cp). The same candidate rules as the search; equal to estimating on 1, 2, 3, ...
    GPUs and taking the first that fits (tests/test_layout_reference.py). ``known``: a GPU count
    on which a plan is known to fit (the GPUs the search's best plan uses; inf when none): only
    smaller counts are looked for, which prunes most candidates after one memory evaluation.
    """
    best = known if known > 0.0 else math.inf
    ep_max = max(1.0, model[M_E])
    cap_mem = hw[W_MEM]
    # DualPipe only when pinned: it holds two copies of the weights and one more micro-batch than 1F1B
    # on the same degrees, so where the search may take either, 1F1B fits on the fewest GPUs
    dual = 1 if job[J_DUAL] == SCHED_DUALPIPE else 0
    for itp in range(TP_CHOICES.shape[0] + 1):
        tp = _cand(TP_CHOICES, itp, pins[P_TP])
        if not _tp_ok(tp, model, pins) or tp >= best:
            continue
        for ipp in range(1, max(PP_MAX, int(pins[P_PP])) + 1):
            pp = float(ipp)
            if not _pp_try(ipp, model, pins, dual) or tp * pp >= best:
                continue
            for icp in range(CP_CHOICES.shape[0] + 1):
                cp = _cand(CP_CHOICES, icp, pins[P_CP])
                if not _cp_ok(cp, job, pins) or tp * pp * cp >= best:
                    continue
                # micro-batch 1 holds the least (mb x min(pp, ceil(GB / (dp mb))) sequences in flight
                # and logits grow with mb) and allows the most dp: it fits wherever a larger one does
                mb = pins[P_MB] if pins[P_MB] > 0.0 else 1.0
                cap = _dp_cap(job, pins, mb)
                if cap < 0.0:
                    continue
                g = _min_dp_gpus(model, hw, job, pins, row, tp, pp, cp, mb, cap, ep_max, cap_mem, best, dual)
                best = min(best, g)
    return best if best < math.inf else 0.0


@njit(cache=True)
def _min_dp_gpus(model, hw, job, pins, row, tp, pp, cp, mb, cap, ep_max, cap_mem, best, dual):
    """Fewest GPUs of one (tp, pp, cp, micro-batch) over ep x recompute x ZeRO x interleave (inf: none below best)."""
    tpc = tp * pp * cp
    ep = pins[P_EP] if pins[P_EP] > 0.0 else 1.0
    while ep <= ep_max or ep == pins[P_EP]:
        q = 1.0 if ep == 1.0 else ep / _gcd(ep, cp)  # dp must be a multiple of q for ep to divide dp x cp
        ep_fine = ep == 1.0 or ep_max % ep == 0.0
        for irc in range(3):
            rc = float(irc)
            if not ep_fine or not _rc_ok(rc, pins):
                continue
            for iz in range(4):
                zero = float(iz)
                if not _zero_ok(zero, 2.0, pins, job):  # the stage rule; the one-replica rule is lo_dp
                    continue
                lo_dp = 2.0 if (zero > 0.0 and pins[P_ZERO] < 0.0 and cp <= 1.0 and job[J_OFFLOAD] <= 0.0) else 1.0
                # interleaving only adds micro-batches in flight: v = 1 unless pinned
                v = pins[P_V] if pins[P_V] > 0.0 else 1.0
                if not _v_ok(v, pp, model, pins, dual):
                    continue
                if pins[P_DP] > 0.0:  # the one dp allowed
                    k_lo = cap / q
                    if k_lo != math.floor(k_lo) or cap < lo_dp:
                        continue
                    k_hi = k_lo
                else:
                    k_lo = math.ceil(lo_dp / q)
                    k_hi = math.floor(cap / q)
                if best < math.inf:  # only counts below the best so far
                    k_hi = min(k_hi, math.floor((best - 1.0) / (tpc * q)))
                if k_lo > k_hi:
                    continue
                _fill_plan(row, tp, pp, q * k_hi, cp, ep, mb, rc, zero, v, _sp_for(tp, pins), float(dual))
                if _memory(model, hw, job, row, row) > cap_mem:
                    continue
                while k_lo < k_hi:  # smallest k that fits; memory does not grow with dp
                    k_mid = math.floor((k_lo + k_hi) / 2.0)
                    row[P_DP] = q * k_mid
                    if _memory(model, hw, job, row, row) <= cap_mem:
                        k_hi = k_mid
                    else:
                        k_lo = k_mid + 1.0
                best = min(best, tpc * q * k_hi)
        if pins[P_EP] > 0.0:
            break
        ep *= 2.0
    return best
