"""Cost formulas, one function each, numba-jitted.

Every function takes plain floats, states its units, and cites its source:
the physics (FLOPs, memory, utilization, decode roofline, checkpoint interval
and retention counts) first, then the money (every dollar a line item holds
is one of the ``*_usd`` functions at the end).
The kernel (:mod:`costcore.kernel`) composes them; the slow reference
implementations in ``tests/reference_model.py`` re-derive the same numbers
independently. Symbols: N parameters (active for MoE), L layers, d hidden
size, s sequence length, a heads, V vocabulary, b micro-batch, G GPUs.
"""
from __future__ import annotations

import math

from numba import njit

HOURS_PER_MONTH = 730.0  # 8760 h / 12
DAYS_PER_MONTH = 30.4167
NF4_BYTES_PER_PARAM = 4.127 / 8.0  # QLoRA (arXiv:2305.14314) Sec. 3: NF4 + double quantization
KV_BYTES_PER_VALUE = 2.0  # bf16 KV cache
# Hardware to model FLOPs with full activation recompute: a token costs 8N instead of 6N
# (forward recomputed once; Narayanan et al. 2021: 96 instead of 72 in the per-iteration formula).
MODEL_PER_HARDWARE_FLOPS_FULL_RECOMPUTE = 6.0 / 8.0

# Codes the formulas compare against, as floats (the scenario vector holds floats). The method and
# LoRA-target codes are the positions in data/schema.yaml's choices (tests/test_structure.py checks);
# the recompute modes are the kernel's resolved mode ('auto' already decided).
METHOD_FULL, METHOD_LORA, METHOD_QLORA = 0.0, 1.0, 2.0
LORA_QV, LORA_ATTN, LORA_ALL = 0.0, 1.0, 2.0
RECOMPUTE_MODE_NONE, RECOMPUTE_MODE_SELECTIVE, RECOMPUTE_MODE_FULL = 0.0, 1.0, 2.0
# Optimizer and CPU-offload codes (positions in data/schema.yaml's choices).
OPT_ADAMW, OPT_ADAMW_8BIT, OPT_PAGED_ADAMW_8BIT, OPT_ADAFACTOR, OPT_SGD = 0.0, 1.0, 2.0, 3.0, 4.0
OFFLOAD_NONE, OFFLOAD_OPTIMIZER, OFFLOAD_OPTIMIZER_AND_PARAMS = 0.0, 1.0, 2.0
MASTER_BYTES_PER_PARAM = 4.0  # FP32 master copy of each trained weight under BF16 mixed precision (ZeRO Sec. 3.1)
# Bytes a CPU Adam step streams per parameter: reads FP32 master, m, v and the BF16 gradient (14), writes
# master, m, v and the BF16 weight sent back (14). ZeRO-Offload (arXiv:2101.06840) Sec. 4.2: memory bound.
CPU_ADAM_BYTES_PER_PARAM = 28.0
# Media: modality and connector codes (positions in data/schema.yaml's multimodal choices).
MODALITY_IMAGE, MODALITY_VIDEO, MODALITY_AUDIO = 0.0, 1.0, 2.0
CONN_MLP2X, CONN_LINEAR, CONN_QFORMER, CONN_RESAMPLER, CONN_PIXEL_SHUFFLE = 0.0, 1.0, 2.0, 3.0, 4.0
QFORMER_QUERIES = 32.0  # BLIP-2 (arXiv:2301.12597) Sec. 3.1: 32 learned queries
RESAMPLER_QUERIES = 256.0  # Qwen-VL (arXiv:2308.12966) Sec. 2.1: 256 queries
QFORMER_PARAMS = 0.188e9  # BLIP-2 Sec. 3.1: "Q-Former ... 188M parameters"
RESAMPLER_PARAMS = 0.08e9  # Qwen-VL Table 1: VL adapter 0.08B
PIXEL_SHUFFLE_COMPRESSION = 4.0  # InternVL 1.5 (arXiv:2404.16821) Sec. 3.1: 2 x 2 tokens merged into one
# Encoder activations kept per token and layer for its backward pass, in units of the width (bytes):
# the 34 s b h of Korthikanti et al. 2022 (arXiv:2205.05198) Table 2 with FlashAttention (no scores kept).
ENCODER_ACT_BYTES_PER_TOKEN_WIDTH = 34.0
INT8_BYTES_PER_PARAM = 1.0  # LLM.int8 base weights (Dettmers et al. 2022, arXiv:2208.07339); scales ignored


@njit(cache=True)
def optimizer_state_bytes(optimizer, hidden):
    """Optimizer state bytes per trained parameter, besides the FP32 master copy (bytes/parameter).

    AdamW: m and v in FP32, 8 (Loshchilov & Hutter 2019; ZeRO arXiv:1910.02054 Sec. 3.1 K = 12
    with the master copy). 8-bit AdamW and paged 8-bit AdamW: block-wise quantized m and v, 1 byte
    each, 2 (Dettmers et al. 2022, arXiv:2110.02861 Sec. 2: 75% less than 32-bit states).
    Adafactor without momentum (its default, beta1 = None): a factored second moment of
    rows + columns values per matrix, 4 (rows + cols) / (rows cols) ~ 8 / hidden in FP32
    (Shazeer & Stern 2018, arXiv:1804.04235 Sec. 3). SGD with momentum: one FP32 buffer, 4.
    """
    if optimizer == OPT_ADAMW_8BIT or optimizer == OPT_PAGED_ADAMW_8BIT:
        return 2.0
    if optimizer == OPT_ADAFACTOR:
        return 8.0 / max(hidden, 1.0)
    if optimizer == OPT_SGD:
        return 4.0
    return 8.0


@njit(cache=True)
def data_stall_gpu_hours(productive_gpu_hours, consumed_tokens_per_s_per_node, loader_tokens_per_s_per_node):
    """GPU-hours spent waiting for the data pipeline (GPU-hours).

    When the loader delivers fewer tokens per second to a node than its GPUs consume, every step
    waits for data: the run stretches by consumed / delivered, and the extra time is idle GPU
    time that is still billed (the source articles' "data-pipeline stalls"). 0 when the loader
    keeps up or is not given (0).
    """
    if loader_tokens_per_s_per_node <= 0.0 or consumed_tokens_per_s_per_node <= loader_tokens_per_s_per_node:
        return 0.0
    return productive_gpu_hours * (consumed_tokens_per_s_per_node / loader_tokens_per_s_per_node - 1.0)


@njit(cache=True)
def model_shape(params_b, layers, hidden, heads, kv_heads, ffn):
    """Transformer shape from the parameter count when not given.

    Parameters
    ----------
    params_b : float
        Parameters that set the shape, billions (active ones for MoE).
    layers, hidden, heads, kv_heads, ffn : float
        Given values; 0 means "derive".

    Returns
    -------
    (L, d, a, kv_heads, ffn) : floats

    Notes
    -----
    N ~ 12 L d^2 (Kaplan et al. 2020, Eq. 2.1, embeddings excluded) with the
    aspect ratio d/L = 128 of LLaMA-7B/13B and GPT-3 175B, so
    L = (N / (12 * 128^2))^(1/3) (a multiple of 8 above 16) and d = sqrt(N / (12 L)) (a multiple of 128, of
    1024 from 1024 up so that the heads of size 128 come in multiples of 8, which tensor
    parallelism up to 8 divides: Llama-3.2 3B 28 x 3072, Llama-3 8B 32 x 4096, 405B 128 x 16384);
    FFN 4d (Vaswani et al. 2017). The rounding makes L and d coarse; kernel._model then solves
    a dense model's FFN for the parameter count (formulas.dense_ffn), so the shape's size follows N.
    """
    n = params_b * 1e9
    L = layers
    if L <= 0.0:  # rounded to a multiple of 8 above 16 layers (pipeline stages split layers evenly)
        L = max(1.0, math.floor((n / (12.0 * 128.0 * 128.0)) ** (1.0 / 3.0) + 0.5))
        if L > 16.0:
            L = 8.0 * math.floor(L / 8.0 + 0.5)
    d = hidden
    if d <= 0.0:  # whole heads of 128, a multiple of 8 heads from 1024 up (tensor parallelism splits heads)
        d = math.sqrt(n / (12.0 * L))
        step = 1024.0 if d >= 1024.0 else 128.0
        d = step * max(1.0, math.floor(d / step + 0.5))
    a = heads
    if a <= 0.0:
        a = max(1.0, math.floor(d / 128.0 + 0.5))
    kv = kv_heads
    if kv <= 0.0:
        kv = a
    f = ffn
    if f <= 0.0:
        f = 4.0 * d
    return L, d, a, kv, f


@njit(cache=True)
def dense_ffn(n_params, L, d, q_dim, kv_dim, vocab, n_matrices):
    """MLP inner size (FFN) that makes a dense shape hold ``n_params`` parameters.

    A Llama-style dense model holds, per layer, q and o (d x q_dim), k and v (d x kv_dim) and an
    MLP of ``n_matrices`` d x f matrices (3 gated, SwiGLU; 2 GELU), plus untied input and output
    embeddings 2 V d (Touvron et al. 2023, Llama 2, Table 1 shapes; Hugging Face
    ``modeling_llama.py``). Solving N = L (2 d q_dim + 2 d kv_dim + n_matrices d f) + 2 V d for f:
    Llama-2-7B (6,738,415,616, 32 x 4096, V 32000, gated) gives 11,008.6 (config: 11,008). The layers and
    width come from formulas.model_shape in coarse steps; solving for the FFN keeps the shape's
    parameters, and so its step time, equal to the size the user gave (a 7.5B shape is not a 6.7B
    one). Floored at d (an MLP no narrower than the model) when the embeddings and attention
    alone exceed N; the shape then holds more than N.

    Returns
    -------
    float
        FFN inner size, units (not rounded: the step time is continuous in it).
    """
    per_layer_fixed = 2.0 * d * q_dim + 2.0 * d * kv_dim
    f = (n_params - 2.0 * vocab * d - L * per_layer_fixed) / (L * n_matrices * d)
    return max(d, f)


def dense_params(L, d, q_dim, kv_dim, ffn, vocab, n_matrices):
    """Parameters (count) of a Llama-style dense shape: the sum :func:`dense_ffn` solves for the FFN.

    Per layer q and o (d x q_dim), k and v (d x kv_dim) and ``n_matrices`` d x ffn MLP matrices, plus
    untied input and output embeddings 2 V d (Touvron et al. 2023, Table 1 shapes; Hugging Face
    ``modeling_llama.py``). Llama-2-7B's shape gives 6,738,149,376 (its 6,738,415,616 adds the norms'
    266,240). Read by the scenario check that a
    stated shape and size agree (costcore/scenario/schema.py _shape_rules); not jitted (no kernel reads it).
    """
    return L * (2.0 * d * q_dim + 2.0 * d * kv_dim + n_matrices * d * ffn) + 2.0 * vocab * d


@njit(cache=True)
def moe_expert_ffn(n_total, n_active, experts, top_k, L, d, n_matrices, dense_ffn):
    """Inner size of one routed expert's MLP when a config gives only total and active parameters.

    The parameters only some tokens use, n_total - n_active, are the (experts - top_k) unused
    experts of every layer, each n_matrices x d x f (Fedus et al. 2021; DeepSeek-V3 Sec. 2):
    f = (n_total - n_active) / ((experts - top_k) x L x n_matrices x d). Falls back to the
    dense FFN size when that is not positive.
    """
    spare = experts - top_k
    if spare <= 0.0 or n_total <= n_active:
        return dense_ffn
    return (n_total - n_active) / (spare * L * n_matrices * d)


@njit(cache=True)
def lora_trainable_params(L, d, kv_dim, ffn, rank, targets, mlp_matrices, mlp_copies=1.0):
    """Trainable LoRA parameters (count).

    r * (d_in + d_out) per adapted matrix (peft ``src/peft/tuners/lora/layer.py``:
    A = Linear(in, r), B = Linear(r, out)), times L layers.
    targets: 0 = q,v; 1 = q,k,v,o; 2 = q,k,v,o + the MLP's ``mlp_matrices`` (3 for a gated
    SwiGLU MLP: gate, up, down; 2 for GELU: up, down) of inner width ``ffn``, in ``mlp_copies``
    copies: 1 for a dense model; a MoE's routed plus shared experts, each an MLP of its own width
    whose matrices peft adapts one by one ("all-linear" targets every expert's linear layers:
    Mixtral-8x7B at rank 16 holds 226M adapter parameters in its experts, not the 42M of one MLP).
    The step's FLOPs count every adapter (6 per parameter per token, kernel): an upper bound for a
    MoE, whose tokens pass through k of the experts' adapters, by under 2% of a step at rank 16.
    """
    qv = rank * (d + d) + rank * (d + kv_dim)
    attn = qv + rank * (d + kv_dim) + rank * (d + d)
    per_layer = qv
    if targets >= LORA_ATTN:
        per_layer = attn
    if targets >= LORA_ALL:
        per_layer = attn + mlp_copies * mlp_matrices * rank * (d + ffn)
    return L * per_layer


@njit(cache=True)
def attention_context(ctx, window, share):
    """The full-causal context that costs what a model with sliding-window layers costs (tokens).

    The attention FLOPs and time of a causal layer follow the keys each query sees: i for query i,
    on average ctx / 2, which the formulas count as ``ctx`` (12 L d ctx, Kaplan et al. 2020 Table 1
    with the causal half). A sliding-window layer sees min(i, w): on average w - w^2 / (2 ctx) for
    w < ctx, i.e. the full-causal cost of a context of 2 w - w^2 / ctx. With a share ``share`` of the
    layers windowed::

        ctx_eff = (1 - share) ctx + share (2 w - w^2 / ctx)     (w < ctx; else ctx)

    Sources: Beltagy et al. 2020 (Longformer) Sec. 3.1; Jiang et al. 2023 (Mistral 7B) Sec. 2.
    ``window`` <= 0: no sliding window (ctx unchanged).
    """
    if window <= 0.0 or window >= ctx or share <= 0.0:
        return ctx
    return (1.0 - share) * ctx + share * (2.0 * window - window * window / ctx)


@njit(cache=True)
def kv_context(ctx, window, share):
    """Tokens of K and V a decoding sequence holds per layer, averaged over the layers (tokens).

    A full-attention layer keeps all ``ctx`` tokens of the sequence; a sliding-window layer only the last
    ``window`` (the rest are never attended again and are evicted: transformers' sliding-window cache,
    vLLM's hybrid KV manager), so with a share ``share`` of the layers windowed::

        kv_ctx = (1 - share) ctx + share min(ctx, window)

    It scales the KV bytes decoding reads per step and the KV room a batch needs (Beltagy et al. 2020;
    Mistral 7B Sec. 2, "rolling buffer cache"). ``window`` <= 0: ctx.
    """
    if window <= 0.0 or share <= 0.0:
        return ctx
    return (1.0 - share) * ctx + share * min(ctx, window)


@njit(cache=True)
def train_flops_per_token(n_active, L, d, ctx, method, n_trainable):
    """Training FLOPs per token (model FLOPs).

    full       : 6N + 12 L d s            (PaLM arXiv:2204.02311 App. B; nanoGPT estimate_mfu)
    LoRA, QLoRA: 4N + 12 L d s + 6 N_lora (frozen base: forward 2N, backward input
                                           gradients only 2N; model assumption, docs/reference/cost-model-notes.md Sec. 1)

    A quantized base does the same model FLOPs; its dequantization is time, not FLOPs
    (:func:`dequant_seconds`, added to the step by the job layout).
    method: 0 full, 1 LoRA, 2 QLoRA. ctx is the attention context in tokens.
    """
    attn = 12.0 * L * d * ctx
    if method == METHOD_FULL:
        return 6.0 * n_active + attn
    return 4.0 * n_active + attn + 6.0 * n_trainable


@njit(cache=True)
def frozen_base_bytes(method, base_bits, fp8):
    """Bytes per frozen base weight of a LoRA-family stage, and whether it is dequantized before each matmul.

    QLoRA stores NF4 with double-quantized scales (4.127 bits, QLoRA arXiv:2305.14314 Sec. 3) whatever
    ``base_bits`` says; LoRA on an 8-bit base stores LLM.int8 (1 byte, arXiv:2208.07339); otherwise the
    base is held as the job runs, FP8 (1 byte) or BF16 (2). Returns (bytes per parameter, 1.0 when the base
    is quantized and so dequantized, :func:`dequant_seconds`, else 0.0). A full fine-tune's weights are
    trained: they are not a frozen base, and the returned pair is (2 or 1, 0.0).
    """
    if method == METHOD_QLORA:
        return NF4_BYTES_PER_PARAM, 1.0
    if method != METHOD_FULL and base_bits == 8.0:
        return INT8_BYTES_PER_PARAM, 1.0
    return (1.0 if fp8 else 2.0), 0.0


@njit(cache=True)
def dequant_seconds(params, packed_bytes_per_param, hbm_bytes_per_s):
    """Seconds to dequantize ``params`` quantized base weights to BF16 once (memory-bound).

    bitsandbytes runs a dequantize kernel before every matmul of a 4-bit layer, in the forward and again
    in the backward (bitsandbytes/autograd/_functions.py, MatMul4Bit: ``F.dequantize_4bit(B,
    quant_state)`` then a BF16 ``linear`` / ``matmul``; QLoRA, arXiv:2305.14314 Sec. 3: "we dequantize the
    storage data type to the computation data type to perform the forward and backward pass"). The kernel
    reads the packed blocks (``packed_bytes_per_param``: NF4 with double-quantized scales, 4.127 bits)
    and writes 2 bytes of BF16 per weight, at HBM bandwidth (``hbm_bytes_per_s``, bytes/s). An 8-bit
    (LLM.int8) base is counted the same way with 1 byte read (its backward dequantizes ``CB`` the same
    way; its int8 forward is taken at the BF16 rate: assumption).
    """
    return params * (packed_bytes_per_param + 2.0) / hbm_bytes_per_s


@njit(cache=True)
def forward_flops_per_token(n_params, L, d, ctx):
    """Inference (forward-only) FLOPs per token: 2N + 4 L d s.

    One third of the training cost of PaLM App. B (6N + 12 L d s): used for
    reference, reward, critic-value and old-log-prob passes and prefill.
    """
    return 2.0 * n_params + 4.0 * L * d * ctx


@njit(cache=True)
def gpu_hours_for_flops(flops, peak_tflops, mfu):
    """GPU-hours to execute ``flops`` at ``mfu`` of ``peak_tflops`` (TFLOP/s per GPU)."""
    return flops / (peak_tflops * 1e12 * mfu) / 3600.0


@njit(cache=True)
def kv_cache_bytes_per_token(L, kv_heads, head_dim):
    """KV-cache bytes per token: 2 (K and V) * L * n_kv_heads * d_head * 2 bytes (bf16).

    docs/reference/cost-model-notes.md Sec. 1 (gpu_poor src/App.js; LLM-Viewer).
    """
    return 2.0 * L * kv_heads * head_dim * KV_BYTES_PER_VALUE


@njit(cache=True, inline='always')
def tp_splits_heads(tp, heads, kv_heads):
    """True when a tensor-parallel degree ``tp`` cannot split this attention: it does not divide the query
    heads, or the key/value heads (GQA) neither divide evenly among the ``tp`` GPUs nor are replicated evenly
    (kv_heads % tp and tp % kv_heads both nonzero). A count of 0 is unknown and refuses nothing; so does a
    key/value count that does not divide the query heads, which is no GQA grouping but a stand-in for a KV
    cache's size (the DeepSeek-V3 preset's 5 for multi-head latent attention, whose one latent is copied to
    every tensor-parallel GPU).

    Sources: Megatron-LM asserts num_attention_heads % tensor_model_parallel_size == 0 (megatron/training/
    arguments.py) and splits the query groups with core.utils.divide; vLLM's Attention layers assert
    total_num_heads % tp_size == 0 and, for key/value heads, total_num_kv_heads % tp_size == 0 when there are
    at least as many as GPUs, else tp_size % total_num_kv_heads == 0 (vllm/model_executor/models/llama.py,
    LlamaAttention). So TP 7 on Qwen2.5-7B (28 heads, 4 key/value heads) and TP 8 on its 28 heads are refused.
    """
    if tp == 1.0:  # the common case, without a division (the kernel asks per replica and per plan)
        return False
    if tp <= 0.0:
        return True
    if heads > 0.0 and heads % tp != 0.0:
        return True
    grouped = kv_heads > 0.0 and (heads <= 0.0 or heads % kv_heads == 0.0)
    return grouped and kv_heads % tp != 0.0 and tp % kv_heads != 0.0


@njit(cache=True)
def replica_tp(t, gpus_per_node):
    """The tensor-parallel part of an inference replica of ``t`` GPUs: all of it within a node, else the largest
    divisor of ``t`` that fits a node (the rest is pipeline parallel across nodes; vLLM documentation,
    "Distributed inference and serving"). 16 GPUs on nodes of 8: 8; a pinned 12 on nodes of 8: 6."""
    if t <= gpus_per_node:
        return t
    d = math.floor(gpus_per_node)
    while d > 1.0 and t % d != 0.0:
        d -= 1.0
    return max(d, 1.0)


# Share of a decoding replica's memory the weights and the KV cache may fill (the rest for activations and the
# engine's buffers; vLLM's gpu_memory_utilization defaults to 0.9)
DECODE_MEM_SHARE = 0.9


@njit(cache=True, inline='always')
def _node_tp(gpus_per_node):
    """The largest power of two no larger than a node's GPUs: the widest tensor-parallel group inside one node."""
    t = 1.0
    while t * 2.0 <= max(gpus_per_node, 1.0):
        t *= 2.0
    return t


@njit(cache=True)
def inference_tp(weights_bytes, mem_gb, gpus_per_node=8.0, heads=0.0, kv_heads=0.0):
    """GPUs per inference replica, as a serving engine lays one out: tensor parallel inside a node, pipeline
    parallel across nodes.

    n = ceil(weights / (half a GPU's memory)) GPUs hold the weights in half their memory (the other half for
    the KV cache). The tensor-parallel size is a power of two that splits the attention heads
    (:func:`tp_splits_heads`; 0 heads = unknown): the smallest one >= n, at most the largest power of two
    <= gpus_per_node, else the largest that splits them; the pipeline-parallel size is then ceil(n / tp), and
    the replica is tp x pp GPUs. So 3 GPUs' worth becomes 4 and 34 (a 671B model's BF16 weights on 80 GB
    GPUs) becomes 5 nodes of 8 = 40, not 34 GPUs no engine would run; 3 GPUs' worth of a model with 28 heads
    and 4 key/value heads is TP 4, and 5 GPUs' worth is TP 4 x PP 2 = 8 (TP 8 would split its heads).
    Source: vLLM documentation, "Distributed inference and serving" (tensor_parallel_size = GPUs per node,
    pipeline_parallel_size = nodes; the tensor-parallel size must divide the attention heads).
    """
    n = max(1.0, math.ceil(weights_bytes / (0.5 * mem_gb * 1e9)))
    node_tp = _node_tp(gpus_per_node)
    tp, c = 1.0, 1.0
    while c <= node_tp:
        if not tp_splits_heads(c, heads, kv_heads):
            tp = c
            if c >= n:
                break
        c *= 2.0
    return tp * math.ceil(n / tp)


@njit(cache=True)
def fitting_replica(weights_bytes, seq_kv_bytes, mem_gb, gpus_per_node=8.0, heads=0.0, kv_heads=0.0, max_gpus=0.0):
    """The fewest GPUs of an inference replica that hold its weights and one sequence's KV cache in 90% of their
    memory (the room :func:`decode_gpu_seconds_per_token` decodes in): a power of two within a node that splits
    the heads (:func:`tp_splits_heads`), at most ``max_gpus`` (0 = no cap); 0 when none does.

    What a stage must have, where :func:`inference_tp`'s half-memory replica is what a serving engine would pick
    given the GPUs: an 8B model's 16 GB of BF16 weights on one 24 GB GPU (vLLM serves it so) was refused as
    "needs at least 2 GPUs", while a replica pinned at 1 GPU fit.
    """
    node_tp = _node_tp(gpus_per_node)
    t = 1.0
    while t <= node_tp and (max_gpus <= 0.0 or t <= max_gpus):
        room = DECODE_MEM_SHARE * t * mem_gb * 1e9
        if not tp_splits_heads(t, heads, kv_heads) and weights_bytes + seq_kv_bytes <= room:
            return t
        t *= 2.0
    return 0.0


# A larger decoding replica is taken only when it saves at least this share of the GPU-seconds per token: its
# tensor-parallel all-reduces, which the roofline does not count, cost a few percent over NVLink (assumption), so
# a 0.04% saving (255 sequences on 4 GPUs, 256 on 8) does not double the replica.
DECODE_TP_MIN_SAVING = 0.05


@njit(cache=True)
def _decode_at(n_total, n_active, kv_bytes_per_tok, ctx_avg, ctx_max, batch, peak_tflops, bw_tbs, mem_gb,
               efficiency, t, bytes_per_param=2.0):
    """(GPU-seconds per generated token, sequences decoded at once) on replicas of ``t`` GPUs: the roofline of
    :func:`decode_gpu_seconds_per_token`."""
    weights = bytes_per_param * n_total
    free = DECODE_MEM_SHARE * t * mem_gb * 1e9 - weights
    b_max = max(1.0, math.floor(free / max(kv_bytes_per_tok * ctx_max, 1.0)))
    b = max(1.0, min(batch, b_max))
    t_mem = (weights + b * kv_bytes_per_tok * ctx_avg) / (t * bw_tbs * 1e12)
    t_cmp = 2.0 * n_active * b / (t * peak_tflops * 1e12)
    step = max(t_mem, t_cmp) / efficiency
    return step * t / b, b


@njit(cache=True)
def decode_gpu_seconds_per_token(n_total, n_active, kv_bytes_per_tok, ctx_avg, ctx_max,
                                 batch, peak_tflops, bw_tbs, mem_gb, efficiency, tp_pinned=0.0,
                                 gpus_per_node=8.0, max_gpus=0.0, heads=0.0, kv_heads=0.0, bytes_per_param=2.0):
    """GPU-seconds per generated token of batched decoding (roofline).

    Per replica of t GPUs decoding B sequences at once, one step takes
        max((weights + B * kv_bytes_per_tok * ctx_avg) / (t * bandwidth),
            2 N_active B / (t * peak)) / efficiency
    and yields B tokens, so GPU-seconds per token = step * t / B.
    B is capped by the KV cache that fits in 90% of the replica's memory
    after the weights. Sources: docs/reference/cost-model-notes.md Sec. 1 (gpu_poor, LLM-Viewer
    roofline); weights read are all parameters (MoE experts included) at ``bytes_per_param`` (2: BF16; 0.5: a
    4-bit weight-only checkpoint).

    t is ``tp_pinned`` when > 0; else the cheapest per token of :func:`inference_tp`'s fewest GPUs
    (``gpus_per_node`` a node; :func:`fitting_replica`'s when the stage has fewer than that) and, for a replica inside one node, its tensor-parallel doublings up to
    the node and to ``max_gpus`` (the stage's GPUs; 0 = no cap) that split the ``heads`` and ``kv_heads``
    (:func:`tp_splits_heads`), each taken only if it saves at least ``DECODE_TP_MIN_SAVING`` on the one
    before. A larger replica
    holds more sequences' KV cache, so each step's read of the weights serves more tokens: the 32B GRPO
    preset's rollouts decode 35 sequences at once on the 2 H100s that hold its weights and 230 on a node of
    8, and its RL stage costs $212k instead of $282k (serving engines raise tensor_parallel_size for this;
    vLLM documentation, "Distributed inference and serving"). Communication between the tensor-parallel
    GPUs is not counted.

    Returns (gpu_seconds_per_token, t, batch_used).
    """
    weights = bytes_per_param * n_total
    if tp_pinned > 0.0:
        dps, b = _decode_at(n_total, n_active, kv_bytes_per_tok, ctx_avg, ctx_max, batch, peak_tflops, bw_tbs,
                            mem_gb, efficiency, tp_pinned, bytes_per_param)
        return dps, tp_pinned, b
    t = inference_tp(weights, mem_gb, gpus_per_node, heads, kv_heads)
    if max_gpus > 0.0 and t > max_gpus:  # fewer GPUs than the half-memory replica: the fewest that hold it
        fit = fitting_replica(weights, kv_bytes_per_tok * ctx_max, mem_gb, gpus_per_node, heads, kv_heads, max_gpus)
        if fit > 0.0:
            t = fit
    best, best_b = _decode_at(n_total, n_active, kv_bytes_per_tok, ctx_avg, ctx_max, batch, peak_tflops, bw_tbs,
                              mem_gb, efficiency, t, bytes_per_param)
    best_t = t
    node_tp = _node_tp(gpus_per_node)
    while t * 2.0 <= node_tp and (max_gpus <= 0.0 or t * 2.0 <= max_gpus):
        t *= 2.0
        if tp_splits_heads(t, heads, kv_heads):
            continue
        dps, b = _decode_at(n_total, n_active, kv_bytes_per_tok, ctx_avg, ctx_max, batch, peak_tflops, bw_tbs,
                            mem_gb, efficiency, t, bytes_per_param)
        if dps < best * (1.0 - DECODE_TP_MIN_SAVING):
            best, best_b, best_t = dps, b, t
    return best, best_t, best_b


@njit(cache=True)
def young_daly_interval_h(write_h, mtbi_h):
    """Optimal checkpoint interval, hours (Young 1974; Daly 2006).

    tau = sqrt(2 delta M) [1 + 1/3 sqrt(delta/2M) + 1/9 (delta/2M)] - delta for
    delta < 2M, else M (LLNL/scr scripts/common/scr_ckpt_interval.py).
    delta: time to write one checkpoint; M: mean time between interruptions of the job.
    """
    if mtbi_h <= 0.0 or not math.isfinite(mtbi_h):
        return math.inf
    if write_h >= 2.0 * mtbi_h:
        return mtbi_h
    r = write_h / (2.0 * mtbi_h)
    return math.sqrt(2.0 * write_h * mtbi_h) * (1.0 + math.sqrt(r) / 3.0 + r / 9.0) - write_h


@njit(cache=True)
def held_checkpoints(k, keep_last, milestone_every):
    """Checkpoints held after the k-th is written: keep-last-K plus every M-th.

    keep_last = 0 keeps all. Milestones are counted among those older than
    the last K.
    """
    if keep_last <= 0.0:
        return k
    held = min(k, keep_last)
    if milestone_every > 0.0 and k > keep_last:
        held += math.floor((k - keep_last) / milestone_every)
    return held


@njit(cache=True)
def held_checkpoint_sum(n, keep_last, milestone_every):
    """Sum over k = 1..n of :func:`held_checkpoints` (closed form).

    Multiplied by the interval and the checkpoint size it gives the
    checkpoint-hours stored during a run.
    """
    if n <= 0.0:
        return 0.0
    if keep_last <= 0.0:
        return n * (n + 1.0) / 2.0
    K = keep_last
    if n <= K:
        total = n * (n + 1.0) / 2.0
    else:
        total = K * (K + 1.0) / 2.0 + (n - K) * K
    if milestone_every > 0.0 and n > K:
        m = n - K  # sum_{j=1..m} floor(j / M)
        M = milestone_every
        q = math.floor(m / M)
        r = m - q * M
        total += M * q * (q - 1.0) / 2.0 + q * (r + 1.0)
    return total


@njit(cache=True)
def reserved_idle_gpu_hours(reserved_gpus, term_months, used_gpu_hours):
    """GPU-hours of a reservation the plan leaves unused: reserved_gpus x term_months x 730 h, less the GPU-hours
    the plan bills (productive and hidden), at least 0.

    A reservation (committed use) is billed for every hour of its term whether the GPUs run or not (AWS EC2
    Reserved Instances and Savings Plans; Google Cloud committed use discounts; FinOps Foundation FOCUS 1.1,
    PricingCategory "Committed"). So 8,192 H100s reserved for 12 months hold 71.8M GPU-hours: a plan that uses
    9.74M of them pays for 62.0M idle ones, and its reserved price only pays off when it keeps them busy. Hours
    beyond the reservation are billed at the same price (the reservation sized to the plan).
    """
    return max(0.0, reserved_gpus * term_months * HOURS_PER_MONTH - used_gpu_hours)


@njit(cache=True)
def gpu_time_usd(gpu_hours, usd_per_gpu_hour):
    """GPU time billed, $: GPU-hours x $/GPU-hour.

    Used for productive time and for each hidden-time item (failures, checkpoint
    stalls, idle, failed runs, repeated experiments). Price: hardware.usd_per_gpu_hour
    (catalog list prices, data/hardware.yaml).
    """
    return gpu_hours * usd_per_gpu_hour


@njit(cache=True)
def checkpoint_storage_usd(hot_usd_gb_month, cold_usd_gb_month, in_run_gb_months, held, kept_gb,
                           hot_months, retention_months):
    """Checkpoint storage, $ as (hot tier, cold tier).

    hot  = p_hot * (GB-months held during the run + held * kept_gb * hot_months)
    cold = p_cold * held * kept_gb * (retention_months - hot_months)

    in_run_gb_months: checkpoint size x sum of checkpoints held after each write x
    spacing (held_checkpoint_sum); held: checkpoints kept after the stage
    (held_checkpoints); kept_gb: size of each kept one (weights only when
    storage.finished_weights_only); hot_months: months on the hot tier after the
    stage (cold_after_days, capped by the retention). Tiering: docs/reference/cost-model-notes.md Sec. 3;
    prices storage.hot/cold_usd_per_gb_month.
    """
    hot = hot_usd_gb_month * (in_run_gb_months + held * kept_gb * hot_months)
    cold = cold_usd_gb_month * held * kept_gb * (retention_months - hot_months)
    return hot, cold


@njit(cache=True)
def dataset_storage_usd(usd_gb_month, dataset_gb, months, retention_months):
    """Dataset object storage, $: p_object * GB (all versions) * (stage months + retention months).

    Price storage.object_usd_per_gb_month (S3 Standard list price, docs/reference/cost-model-notes.md Sec. 6).
    """
    return usd_gb_month * dataset_gb * (months + retention_months)


@njit(cache=True)
def transfer_usd(gb, copies, usd_per_gb):
    """Billed network transfer, $: GB x copies x $/GB (network.usd_per_gb, inter-region list price).

    Used for dataset moves, checkpoint replication and model exports.
    """
    return gb * copies * usd_per_gb


@njit(cache=True)
def per_token_usd(tokens_b, usd_per_b_tokens):
    """Data bought or cleaned, $: billion unique tokens x $ per billion tokens (stage inputs)."""
    return tokens_b * usd_per_b_tokens


@njit(cache=True)
def labeling_usd(labels, usd_per_label, review_fraction):
    """Human labels, $: labels x $/label x (1 + share re-reviewed) (data.review_fraction)."""
    return labels * usd_per_label * (1.0 + review_fraction)


@njit(cache=True)
def per_sample_usd(samples, usd_per_sample):
    """Priced samples, $: count x $ each (RL verifier sandbox runs, human evaluation samples)."""
    return samples * usd_per_sample


@njit(cache=True)
def synthetic_usd(tokens_m, usd_per_m_tokens):
    """Synthetic data, $: million generated tokens x $ per million (data.usd_per_m_synthetic_tokens)."""
    return tokens_m * usd_per_m_tokens


@njit(cache=True)
def monthly_usd(usd_per_month, months):
    """A monthly bill, $: $/month x months (team payroll, platform and operations)."""
    return usd_per_month * months


@njit(cache=True)
def staff_usd_per_month(fte, usd_per_fte_month):
    """One role's payroll, $/month: full-time equivalents x loaded $ per FTE-month (labor.*)."""
    return fte * usd_per_fte_month


# ---------------------------------------------------------------------------
# Media (multimodal phases)
# ---------------------------------------------------------------------------
@njit(cache=True)
def encoder_tokens_per_pass(modality, resolution_px, patch_px, encoder_tokens, audio_tokens_per_s, max_seconds):
    """Tokens one encoder pass outputs (one image, tile or frame; one audio window), count.

    Images and frames: ``encoder_tokens`` when given, else floor(r / p)^2 patch tokens for an r-pixel
    square input and p-pixel patches (Dosovitskiy et al. 2020, arXiv:2010.11929 Sec. 3.1; 576 for
    CLIP ViT-L/14 at 336 px, LLaVA-1.5 arXiv:2310.03744 Sec. 3). Audio: frames per second x the
    window the encoder takes (Whisper: 50 x 30 s = 1,500; Radford et al. 2022 Sec. 2.3). An encoder
    without patches (an audio one, swapped in by a batch column of encoders) counts its windows too.
    """
    if encoder_tokens > 0.0:
        return encoder_tokens
    if modality == MODALITY_AUDIO or patch_px <= 0.0:
        return audio_tokens_per_s * max_seconds
    side = math.floor(resolution_px / patch_px)
    return side * side


@njit(cache=True)
def encoder_passes_per_item(modality, tiles, frames, seconds, max_seconds):
    """Encoder passes per media item, count: tiles per image (AnyRes / dynamic tiling), frames per
    clip (each through the image encoder), or audio windows per recording (ceil(seconds / window):
    Whisper pads every window to 30 s, so a short clip costs a whole one)."""
    if modality == MODALITY_VIDEO:
        return frames
    if modality == MODALITY_AUDIO:
        return math.ceil(seconds / max_seconds) if max_seconds > 0.0 else 1.0
    return tiles


@njit(cache=True)
def media_tokens_per_item(modality, passes, tokens_per_pass, seconds, max_seconds, connector, queries, compression):
    """Tokens one media item adds to the language model's sequence, count.

    A Q-Former or resampler emits its query tokens per pass (BLIP-2: 32; Qwen-VL: 256); an MLP,
    linear layer or pixel shuffle keeps the encoder's tokens, divided by the compression (pixel
    shuffle: 4, InternVL 1.5 Sec. 3.1; Qwen-Audio's pooling: 2). Audio keeps only the frames of
    the clip's own seconds (the window's padding is dropped before the LLM).
    """
    comp = compression if compression > 0.0 else (PIXEL_SHUFFLE_COMPRESSION if connector == CONN_PIXEL_SHUFFLE
                                                    else 1.0)
    if connector == CONN_QFORMER or connector == CONN_RESAMPLER:
        q = queries if queries > 0.0 else (QFORMER_QUERIES if connector == CONN_QFORMER else RESAMPLER_QUERIES)
        return passes * q
    per_pass = tokens_per_pass
    if modality == MODALITY_AUDIO and max_seconds > 0.0:
        per_pass = tokens_per_pass * min(1.0, seconds / (passes * max_seconds))
    return passes * per_pass / comp


@njit(cache=True)
def encoder_forward_flops(params, layers, hidden, tokens_per_pass, passes):
    """Forward FLOPs of the encoder over one item: passes x (2 N T + 4 L T^2 d).

    2 FLOPs per parameter per token (Kaplan et al. 2020 Sec. 2.1) plus bidirectional attention
    (QK^T and AV: 2 T^2 d each per layer). A trained encoder costs 3x this (backward = 2x forward).
    """
    t = tokens_per_pass
    return passes * (2.0 * params * t + 4.0 * layers * t * t * hidden)


@njit(cache=True)
def connector_params(connector, encoder_hidden, model_hidden, compression):
    """Connector parameters, count: mlp2x (d_in d + d d, LLaVA-1.5's two-layer GELU MLP), linear (d_in d,
    LLaVA-1 / MiniGPT-4), pixel shuffle + MLP with d_in = compression x encoder width (InternVL 1.5),
    Q-Former 188M (BLIP-2 Sec. 3.1), resampler 0.08B (Qwen-VL Table 1). d_in = encoder width."""
    if connector == CONN_QFORMER:
        return QFORMER_PARAMS
    if connector == CONN_RESAMPLER:
        return RESAMPLER_PARAMS
    d_in = encoder_hidden
    if connector == CONN_PIXEL_SHUFFLE:
        d_in = encoder_hidden * (compression if compression > 0.0 else PIXEL_SHUFFLE_COMPRESSION)
    if connector == CONN_LINEAR:
        return d_in * model_hidden
    return d_in * model_hidden + model_hidden * model_hidden


@njit(cache=True)
def encoder_activation_bytes(layers, hidden, tokens_per_pass, passes):
    """Activation bytes a trained encoder keeps for its backward pass per media item: passes x T x L x
    34 d (Korthikanti et al. 2022 Table 2, FlashAttention, no tensor parallelism); a frozen encoder
    runs without gradients and keeps none."""
    return passes * tokens_per_pass * layers * hidden * ENCODER_ACT_BYTES_PER_TOKEN_WIDTH


@njit(cache=True)
def cpu_hours_usd(cpu_hours, usd_per_cpu_hour):
    """CPU work, $: core-hours x $ per core-hour (media decoding, resizing, sharding)."""
    return cpu_hours * usd_per_cpu_hour
