"""Slow, plain-Python reference implementation of the whole cost model.

Written from the documentation (``costcore/data/schema.yaml`` field docs and
the docstrings of ``costcore/engine/formulas.py`` and ``costcore/engine/layout.py``),
not from the kernel's code: no vector, no numba, no index constants. Every
quantity is a named local variable, enums are compared as their text, and the
checkpoint bookkeeping is done by brute force (walking over the checkpoints one
by one) instead of the closed forms the core uses. The test-suite checks the
fast kernel against this file (stumpy's ``naive.py`` pattern).

Only the *defaults* and the GPU catalog come from :mod:`costcore.schema`
(``effective_value``), so nothing here re-types a default number. The few
documented physical constants (730 h per month, NF4 bytes ...) are imported
from :mod:`costcore.formulas` by name.

``reference_estimate(scenario, plans) -> {stage: {line item key: $, stat: value}}``
for every enabled stage. Line item keys are those of ``kernel.LINE_ITEMS``;
stat names are those of ``kernel.STATS``.

The job layout: the reference does not search. ``plans`` gives each training
stage's plan (tp, pp, dp, cp, ep, micro-batch, recompute, ZeRO stage, interleave,
sequence parallelism) and the fewest GPUs any plan fits on -- the kernel's
choice, read by :func:`kernel_plans` -- and the reference re-derives that plan's
step time (every named term), memory per GPU by kind and MFU from
``layout.plan_terms`` / ``layout._memory``'s docstrings. Whether the kernel's
choice is the fastest plan that fits, and whether its GPU minimum is the true
one, is checked separately by enumeration and brute force
(``tests/test_layout_reference.py``).

Where no docstring or schema doc says how the pieces compose, this model
takes the product decisions of the core as given (they are choices, not
derivations) and writes them out plainly:

- GPU time: productive + failures (interruptions x (interval/2 + restart)) +
  checkpoint write stalls + idle + failed runs = the main run; experiments
  add ``experiments x experiment_size`` main runs; labor and ops are billed
  for ``setup_months`` + the billed GPU time on the stage's GPUs.
- A measured ``tokens_per_gpu_s`` replaces the *training* part only (DPO's
  reference forward passes, RL rollouts and scoring are still added).
- The stage's MFU: its own, else its measured TFLOP/s (6/8 of them with full
  recompute), else the plan's MFU x efficiency.sustained_fraction; productive
  GPU-hours are FLOPs / (peak x MFU) on all the stage's GPUs.
- A live DPO reference is a second bf16 copy only with full fine-tuning; an RL
  stage holds its live reference, reward model (bf16) and PPO critic (16 bytes
  per parameter) next to the policy.
- RL and eval must hold one inference replica (``inference_tp`` GPUs) to fit.
- In-run checkpoint storage: see the switch below.
"""
from __future__ import annotations

import math

from costcore.engine.formulas import (
    DAYS_PER_MONTH,
    HOURS_PER_MONTH,
    KV_BYTES_PER_VALUE,
    NF4_BYTES_PER_PARAM,
)

# Optimizer state bytes per trained parameter besides the FP32 master copy (schema.yaml's optimizer doc):
# AdamW m + v in FP32; 8-bit (and paged 8-bit) AdamW one byte each; SGD one FP32 momentum buffer;
# Adafactor a factored second moment, 4 (rows + cols) / (rows x cols) ~ 8 / hidden.
STATE_BYTES = {"adamw": 8.0, "adamw_8bit": 2.0, "paged_adamw_8bit": 2.0, "sgd": 4.0}
MASTER_BYTES = 4.0
CPU_ADAM_BYTES = 28.0  # read master, m, v, grad (4 + 4 + 4 + 2); write master, m, v, weight (4 + 4 + 4 + 2)


def state_bytes(optimizer: str, hidden: float) -> float:
    return 8.0 / max(hidden, 1.0) if optimizer == "adafactor" else STATE_BYTES[optimizer]
from costcore.scenario.schema import STAGES, effective_value, validate

# The in-run checkpoint storage: the documented quantity is "checkpoint-hours
# stored during a run". Checkpoint k is written at the end of interval k, so
# during interval k only checkpoints 1..k-1 exist: the integral over the run is
# sum_{k=1}^{n-1} held(k) * spacing (the n-th checkpoint is written when the run
# ends and from then on is billed by the retention term).

MM_STAGES = ("mm_align", "mm_cpt", "mm_tune")
TRAIN_STAGES = ("pretrain", "cpt", "sft", "dpo", "rl") + MM_STAGES
PEFT_STAGES = ("sft", "dpo", "rl") + MM_STAGES
SECONDS_PER_HOUR = 3600.0
HOURS_PER_DAY = 24.0


# ---------------------------------------------------------------------------
# Model shape
# ---------------------------------------------------------------------------
def model_shape(shape_params: float, layers: float, hidden: float, heads: float, kv_heads: float,
                ffn: float, gated: bool = True) -> dict:
    """Transformer shape (Kaplan et al. 2020: N ~ 12 L d^2, aspect ratio d = 128 L).

    12 L d^2 = N with d = 128 L  =>  L^3 = N / (12 * 128^2), L rounded to the nearest whole
    layer (at least 1) and, above 16 layers, to the nearest multiple of 8; d = sqrt(N / (12 L))
    rounded to the nearest multiple of 128 (of 1024 from 1024 up; at least one step); heads of
    128 (the nearest whole number); kv heads = heads; FFN = 4 d, or 8 d / 3 for a gated MLP
    (kernel._model: the same 8 d^2 parameters). A given (non-zero) value is used as is.
    """
    if layers > 0:
        L = float(layers)
    else:
        exact = (shape_params / (12.0 * 128.0 ** 2)) ** (1.0 / 3.0)
        L = float(max(1, round_half_up(exact)))
        if L > 16:
            L = 8.0 * round_half_up(L / 8.0)
    if hidden > 0:
        d = float(hidden)
    else:
        exact_d = math.sqrt(shape_params / (12.0 * L))
        step = 1024.0 if exact_d >= 1024.0 else 128.0
        d = step * max(1, round_half_up(exact_d / step))
    a = float(heads) if heads > 0 else float(max(1, round_half_up(d / 128.0)))
    kv = float(kv_heads) if kv_heads > 0 else a
    if ffn > 0:
        f = float(ffn)
    else:
        f = 8.0 * d / 3.0 if gated else 4.0 * d
    head_dim = d / a
    return {"L": L, "d": d, "heads": a, "kv_heads": kv, "ffn": f, "head_dim": head_dim,
            "kv_dim": kv * head_dim}


def ffn_for_size(n_params: float, shape: dict, vocab: float, gated: bool) -> float:
    """The MLP width at which a dense shape holds n_params parameters (kernel._model, formulas.dense_ffn).

    Count the layer by its matrices: q (d x heads*head_dim), k and v (d x kv_dim each), o
    (heads*head_dim x d), then the MLP's 3 (gated) or 2 matrices of d x ffn; plus the input
    embedding and the untied LM head, vocab x d each. Whatever the attention and embeddings
    leave of n_params goes to the MLPs; never narrower than d.
    """
    d, L = shape["d"], shape["L"]
    q_dim = shape["heads"] * shape["head_dim"]
    attention = d * q_dim + d * shape["kv_dim"] + d * shape["kv_dim"] + q_dim * d
    embeddings = vocab * d + vocab * d
    left_for_mlps = n_params - embeddings - L * attention
    matrices = 3 if gated else 2
    return max(d, left_for_mlps / (L * matrices * d))


def round_half_up(x: float) -> int:
    """Nearest whole number, halves up (floor(x + 1/2))."""
    return math.floor(x + 0.5)


def lora_params(shape: dict, rank: float, targets: str, gated: bool = True, mlps: float = 1.0,
                mlp_width: float | None = None) -> float:
    """LoRA adds A (d_in x r) and B (r x d_out) to every adapted matrix: r (d_in + d_out).
    A GELU MLP (not gated) has no gate matrix to adapt. A MoE has ``mlps`` MLPs a layer (its routed and
    shared experts) of width ``mlp_width``, each adapted on its own (peft all-linear)."""
    d, kv_dim, L = shape["d"], shape["kv_dim"], shape["L"]
    ffn = shape["ffn"] if mlp_width is None else mlp_width
    matrices = {  # name: (d_in, d_out, copies)
        "q": (d, d, 1), "k": (d, kv_dim, 1), "v": (d, kv_dim, 1), "o": (d, d, 1),
        "gate": (d, ffn, mlps), "up": (d, ffn, mlps), "down": (ffn, d, mlps),
    }
    adapted = {"qv": ["q", "v"], "attn": ["q", "k", "v", "o"],
               "all": ["q", "k", "v", "o", "gate", "up", "down"] if gated else ["q", "k", "v", "o", "up", "down"]}[targets]
    per_layer = 0.0
    for name in adapted:
        d_in, d_out, copies = matrices[name]
        per_layer += copies * rank * (d_in + d_out)
    return L * per_layer


# ---------------------------------------------------------------------------
# FLOPs and utilization
# ---------------------------------------------------------------------------
def attended_context(window: float, share: float, ctx: float) -> float:
    """The causal context whose attention costs what the model's does: a query at position i of a full layer
    sees i keys (ctx / 2 on average), of a sliding-window layer min(i, w) (w - w^2 / (2 ctx) on average for
    w < ctx); ``share`` of the layers are windowed. Scaled so that full attention gives ctx."""
    if window <= 0 or window >= ctx or share <= 0:
        return ctx
    full_mean = ctx / 2.0
    window_mean = (window * ctx - window * window / 2.0) / ctx
    return ctx * ((1.0 - share) + share * window_mean / full_mean)


def attention_flops_train(shape: dict, ctx: float) -> float:
    ctx = attended_context(shape.get("window", 0.0), shape.get("window_share", 1.0), ctx)
    return 12.0 * shape["L"] * shape["d"] * ctx  # PaLM App. B: 12 L H Q T (H Q = d)


def train_flops_per_token(n: float, shape: dict, ctx: float, method: str = "full",
                          n_lora: float = 0.0) -> float:
    """full 6N + 12Lds; LoRA and QLoRA 4N + 12Lds + 6 N_lora (QLoRA's dequantization is time: layer_forward_s)."""
    if method == "full":
        return 6.0 * n + attention_flops_train(shape, ctx)
    frozen_base = 4.0 * n  # forward 2N + backward (input gradients only) 2N
    return frozen_base + attention_flops_train(shape, ctx) + 6.0 * n_lora


def forward_flops_per_token(n: float, shape: dict, ctx: float) -> float:
    """A third of training: 2N + 4Lds."""
    ctx = attended_context(shape.get("window", 0.0), shape.get("window_share", 1.0), ctx)
    return 2.0 * n + 4.0 * shape["L"] * shape["d"] * ctx


# ---------------------------------------------------------------------------
# The job layout (costcore/engine/layout.py), re-derived from its docstrings
# ---------------------------------------------------------------------------
# One *plan* is a dict: tp, pp, dp, cp, ep, micro_batch, recompute ("none" / "selective" /
# "full"), zero (0-3), interleave, sp (sequence parallelism, True / False). The reference
# evaluates a plan it is given (the one the kernel chose, or one it enumerates itself in
# tests/test_layout_reference.py); it does not search. Everything is per GPU, in bytes, seconds,
# FLOPs and bytes/s.
RECOMPUTE_NAMES = ("none", "selective", "full")


def layout_model(v, shape: dict, n_total: float, n_act: float, method: str, n_lora: float) -> dict:
    """The transformer as the layout sees it: shape, experts, parameter counts.

    Experts (data/schema.yaml model.experts ...; kernel ``_fill_model``): top-k defaults to 2;
    a model given only by total and active size (total > 1.05 x active) is a fine-grained
    DeepSeek-style MoE with top-8 of 8 x round(total / active) experts. An expert's inner size
    is model.moe_ffn, or (total - active) / ((experts - top-k) x L x matrices x d)
    (formulas.moe_expert_ffn), or the dense FFN when that is not positive. The routed experts
    hold experts x L x matrices x d x f parameters, at most 98% of the model.
    """
    gated = bool(v("model.gated"))
    matrices = 3.0 if gated else 2.0
    L, d = shape["L"], shape["d"]
    experts = float(v("model.experts"))
    top_k = float(v("model.experts_active")) if float(v("model.experts_active")) > 0 else 2.0
    if experts <= 0 and n_total > 1.05 * n_act:
        top_k = 8.0
        experts = 8.0 * math.floor(n_total / n_act + 0.5)
    moe = experts > 0
    expert_ffn = 0.0
    routed_params = 0.0
    if moe:
        expert_ffn = float(v("model.moe_ffn"))
        if expert_ffn <= 0:
            unused_experts = experts - top_k
            if unused_experts > 0 and n_total > n_act:
                expert_ffn = (n_total - n_act) / (unused_experts * L * matrices * d)
            else:
                expert_ffn = shape["ffn"]
        routed_params = min(0.98 * n_total, experts * L * matrices * d * expert_ffn)
    return {"L": L, "h": d, "heads": shape["heads"], "kv_heads": shape["kv_heads"], "head_dim": shape["head_dim"],
            "ffn": shape["ffn"], "V": float(v("model.vocab")), "matrices": matrices, "moe": moe,
            "experts": experts, "top_k": top_k if moe else 0.0,
            "shared": float(v("model.shared_experts")) if moe else 0.0, "expert_ffn": expert_ffn,
            "n_total": n_total, "n_routed": routed_params, "n_dense": n_total - routed_params,
            "n_trainable": n_total if method == "full" else n_lora,
            "node_limit": float(v("model.expert_node_limit")) if moe else 0.0}


def layer_parameter_counts(model: dict) -> tuple[float, float, float]:
    """(attention, dense MLP, one expert) parameters of a layer: q, o are h x (heads d_head), k, v are
    h x (kv heads d_head); an MLP is 3 (gated) or 2 matrices of h x its inner size."""
    h = model["h"]
    q_width = model["heads"] * model["head_dim"]
    kv_width = model["kv_heads"] * model["head_dim"]
    attention = 2.0 * h * q_width + 2.0 * h * kv_width
    return attention, model["matrices"] * h * model["ffn"], model["matrices"] * h * model["expert_ffn"]


def layout_hardware(f) -> dict:
    """The accelerator and the step model's knobs (hardware.yaml, schema.yaml efficiency), SI units.
    The GEMM half-efficiency size is the knob's (fitted on Selene's A100 80GB, 312 TFLOP/s over 2.0 TB/s =
    156 FLOP/byte) times this GPU's ops:byte ratio over 156."""
    return {"peak": f("hardware.peak_tflops") * 1e12, "fp8_peak": f("hardware.fp8_peak_tflops") * 1e12,
            "capacity": f("hardware.memory_gb") * 1e9 * f("efficiency.usable_memory_fraction"),
            "hbm": f("hardware.mem_bandwidth_tbs") * 1e12, "intra": f("hardware.intra_node_gbs") * 1e9,
            "inter": f("hardware.inter_node_gbs") * 1e9, "gpus_per_node": f("hardware.gpus_per_node"),
            "gemm": f("hardware.gemm_efficiency"), "attention": f("hardware.attn_efficiency"),
            "collective": f("efficiency.collective_efficiency"), "half_dim": f("efficiency.gemm_half_dim") * f("hardware.peak_tflops") / f("hardware.mem_bandwidth_tbs") / 156.0,
            "traffic": f("efficiency.memory_traffic"), "dp_overlap": f("efficiency.dp_overlap"),
            "buffers": f("efficiency.comm_buffer_gb") * 1e9, "logit_bytes": f("efficiency.logit_bytes"), "fp8_gemm": f("efficiency.fp8_gemm_efficiency"),
            "grad_bytes": f("efficiency.grad_reduce_bytes"), "contention": f("efficiency.overlap_contention"),
            "pcie": f("hardware.pcie_gbs") * 1e9, "cpu_bw": f("efficiency.cpu_optimizer_gbs") * 1e9,
            "tp_overlap": f("efficiency.tp_overlap"), "dualpipe_sms": f("efficiency.dualpipe_comm_sm_share")}


def gemm_efficiency(m: float, n: float, k: float, best: float, half_dim: float) -> float:
    """best / (1 + half_dim (1/m + 1/n + 1/k)); a degenerate matrix gets the best."""
    if min(m, n, k) <= 0:
        return best
    return best / (1.0 + half_dim * (1.0 / m + 1.0 / n + 1.0 / k))


def ring_collective_s(buffer_bytes: float, ranks: float, link_bytes_s: float, efficiency: float) -> float:
    """A ring reduce-scatter or all-gather: (n - 1)/n of the buffer crosses each link."""
    if ranks <= 1:
        return 0.0
    return buffer_bytes * (ranks - 1.0) / ranks / (link_bytes_s * efficiency)


def exposed_s(comm_s: float, window_s: float, contention: float) -> float:
    """What a collective behind window_s of compute adds: the part sticking out, plus contention x the hidden part."""
    hidden = min(comm_s, max(0.0, window_s))
    return (comm_s - hidden) + contention * hidden


def link_bytes_s(hw: dict, ranks: float, spacing: float) -> float:
    """NVLink when the group's ranks (spaced ``spacing`` GPUs apart) sit in one node, else the network."""
    return hw["intra"] if ranks * spacing <= hw["gpus_per_node"] else hw["inter"]


def dualpipe(job: dict, plan: dict) -> bool:
    """The plan runs DeepSeek's DualPipe schedule (its ``dualpipe`` field) on a pipeline of 2 or more stages."""
    return bool(plan.get("dualpipe", False)) and plan["pp"] > 1


def frozen_base_bytes(job: dict) -> float:
    """Bytes per parameter of a LoRA or QLoRA job's frozen base: NF4 for QLoRA, 1 for an 8-bit (or FP8) base, else 2."""
    if job["method"] == "qlora":
        return NF4_BYTES_PER_PARAM
    if job["int8_base"]:
        return 1.0
    return 1.0 if job["fp8"] else 2.0


def plan_memory(model: dict, hw: dict, job: dict, plan: dict) -> dict:
    """Bytes per GPU by kind (weights, grads, optimizer, activations, buffers, total) of one plan.

    layout._memory's docstring: mixed-precision AdamW 2 + (2 + 4) + 12 bytes per parameter held
    (1/(tp pp) of the dense, 1/(tp pp ep) of the experts'), ZeRO-1/2/3 sharding optimizer /
    fp32 gradients / everything over dp x cp; LoRA: frozen base 2 bytes (1 in FP8, NF4 for QLoRA)
    plus 2 (BF16 weight) + 2 (gradient) + 4 (master) + the optimizer's state bytes per adapter parameter;
    frozen extra models 2 bytes (sharded by ZeRO-3). Activations per layer and micro-batch
    (Korthikanti et al. 2022 Table 2): 34 s b h / t with SP (s b h (10 + 24/t) without), the
    MLP's 19 scaled by its width / 4h, 7 bytes fewer in FP8; no recompute adds 5 a s^2 b / t;
    full keeps 2 s b h / t per layer plus one layer. The first stage holds min(p, m)
    micro-batches of ceil(L/p) layers, x (1 + (p-1)/(p v)) interleaved. Buffers: the loss's logits
    logit_bytes x s b V / t, the communication buffers, with ZeRO-3 two prefetched bf16 layers, and a quantized
    base's largest matrix dequantized to bf16.
    """
    tp, pp, dp, cp, ep = plan["tp"], plan["pp"], plan["dp"], plan["cp"], plan["ep"]
    zero = plan["zero"]
    replicas = dp * cp
    held_params = model["n_dense"] / (tp * pp) + model["n_routed"] / (tp * pp * ep)
    # ZeRO shards what a GPU holds over the ranks holding the same: all dp x cp for the dense part,
    # the dp x cp / ep that hold the same experts for the experts' part
    zero_part = model["n_dense"] / (tp * pp) / replicas + model["n_routed"] / (tp * pp * ep) / max(replicas / ep, 1.0)
    per_trained_optimizer = MASTER_BYTES + state_bytes(job["optimizer"], model["h"])
    if job["method"] == "full":
        weights = 2.0 * held_params
        bf16_grads, fp32_grads = 2.0 * held_params, 4.0 * held_params
        optimizer = per_trained_optimizer * held_params
        if zero >= 1:
            optimizer = per_trained_optimizer * zero_part
        if zero >= 2:
            fp32_grads = 4.0 * zero_part
        if zero >= 3:
            weights = 2.0 * zero_part
            bf16_grads = 0.0
        grads = bf16_grads + fp32_grads
    else:
        base_bytes = frozen_base_bytes(job)
        weights = base_bytes * held_params
        if zero >= 3:
            weights = base_bytes * zero_part
        adapters = model["n_trainable"] / (tp * pp)
        weights += 2.0 * adapters  # the adapters' BF16 weights
        grads = 2.0 * adapters
        optimizer = per_trained_optimizer * adapters
    if dualpipe(job, plan):  # a chunk of each direction per GPU: its weights twice (DeepSeek-V3 Table 2)
        weights *= 2.0
    if job["extra_params"] > 0:
        frozen = 2.0 * job["extra_params"] / (tp * pp)
        weights += frozen / replicas if zero >= 3 else frozen
    s = job["seq"] / cp
    b = plan["micro_batch"] * job["seqs_per_sample"]
    h = model["h"]
    sbh = s * b * h
    width = model["ffn"] if not model["moe"] else (model["top_k"] + model["shared"]) * model["expert_ffn"]
    mlp_bytes = 19.0 * width / (4.0 * h)
    fp8_saving = 7.0 if job["fp8"] else 0.0
    if plan["sp"] or tp <= 1:
        layer = sbh * (34.0 - 19.0 + mlp_bytes - fp8_saving) / tp
    else:
        layer = sbh * 10.0 + sbh * (24.0 - 19.0 + mlp_bytes - fp8_saving) / tp
    if plan["recompute"] == "none":  # scores of the keys each query sees
        layer += 5.0 * model["heads"] * s * (s * job["attn_ctx"] / job["seq"]) * b / tp
    stage_layers = math.ceil(model["L"] / pp)
    micro_batches = step_micro_batches(job, dp, plan["micro_batch"])
    in_flight = float(min(pp, micro_batches))
    if dualpipe(job, plan):  # PP + 1 micro-batches in flight (Table 2)
        in_flight = float(min(pp + 1, micro_batches))
    elif plan["interleave"] > 1:
        in_flight = in_flight * (1.0 + (pp - 1.0) / (pp * plan["interleave"]))
    if plan["recompute"] == "full":
        activations = in_flight * stage_layers * (2.0 * sbh / tp) + layer
    else:
        activations = in_flight * stage_layers * layer
    # a trained media encoder (first pipeline stage): 34 bytes per token and width per layer for each
    # sequence in flight; full recompute keeps only each layer's input (2 of the 34)
    encoder_share = 2.0 / 34.0 if plan["recompute"] == "full" else 1.0
    activations += job.get("media_act", 0.0) * b * in_flight * encoder_share
    if job["offload"] != "none":  # ZeRO-Offload: states and gradients live in CPU memory
        optimizer = grads = 0.0
    if job["offload"] == "optimizer_and_params":  # ZeRO-Infinity: the weights too
        weights = 0.0
    buffers = hw["logit_bytes"] * s * b * model["V"] / tp + hw["buffers"]
    if zero >= 3 and (job["method"] == "full" or job["offload"] == "optimizer_and_params"):
        attention, mlp, expert = layer_parameter_counts(model)
        buffers += 2.0 * 2.0 * (attention + max(mlp, expert)) / tp
    if job["method"] == "qlora" or job["int8_base"]:  # the largest weight matrix dequantized to BF16, one at a time
        widest = max(model["ffn"], model["expert_ffn"] if model["moe"] else 0.0, model["heads"] * model["head_dim"])
        buffers += 2.0 * model["h"] * widest / tp
    out = {"weights": weights, "grads": grads, "optimizer": optimizer, "activations": activations,
           "buffers": buffers}
    total = sum(out.values())
    paged = 0.0
    if job["optimizer"] == "paged_adamw_8bit" and total > hw["capacity"]:  # pages out what does not fit
        paged = min(optimizer, total - hw["capacity"])
        out["optimizer"] = optimizer - paged
    out["total"] = total - paged
    out["paged"] = paged
    return out


def layer_forward_s(model: dict, hw: dict, job: dict, plan: dict) -> dict:
    """Forward seconds of one layer and micro-batch by kind (layout._layer_forward's docstring)."""
    tp, cp, ep = plan["tp"], plan["cp"], plan["ep"]
    h = model["h"]
    tokens = job["seq"] / cp * plan["micro_batch"] * job["seqs_per_sample"]
    attention_p, mlp_p, expert_p = layer_parameter_counts(model)
    fp8 = job["fp8"] and hw["fp8_peak"] > hw["peak"]
    linear_peak = hw["fp8_peak"] if fp8 else hw["peak"]
    best = hw["gemm"] * hw["fp8_gemm"] if fp8 else hw["gemm"]

    def matmul_s(params, m, n):  # 2 FLOPs per parameter per token over tp GPUs
        return 2.0 * tokens * params / tp / (linear_peak * gemm_efficiency(m, n, h, best, hw["half_dim"]))

    q_width = model["heads"] * model["head_dim"]
    linear = matmul_s(attention_p, tokens, q_width / tp)
    if model["moe"]:
        linear += matmul_s(model["shared"] * expert_p, tokens, model["expert_ffn"] / tp)
        tokens_per_expert = tokens * ep * model["top_k"] / model["experts"]
        linear += matmul_s(model["top_k"] * expert_p, tokens_per_expert, model["expert_ffn"] / tp)
    else:
        linear += matmul_s(mlp_p, tokens, model["ffn"] / tp)
    dequant = adapters = 0.0  # parts of `linear`, named apart (the step reports them)
    if job["method"] == "qlora" or job["int8_base"]:
        # bitsandbytes dequantizes the layer's weights to BF16 before every matmul (forward and backward):
        # the packed bytes read and 2 bytes written per weight, at HBM bandwidth; plus the knob's extra share
        packed = NF4_BYTES_PER_PARAM if job["method"] == "qlora" else 1.0
        if model["moe"]:
            held = (attention_p + (model["shared"] + model["experts"] / ep) * expert_p) / tp
        else:
            held = (attention_p + mlp_p) / tp
        dequant = linear * job["dequant"] + held * (packed + 2.0) / hw["hbm"]
    if job["method"] != "full":  # adapters: forward 2 FLOPs per parameter and token, backward 4 -> 1.5x in `linear`
        adapters = 1.5 * matmul_s(model["n_trainable"] / model["L"], tokens, q_width / tp)
    linear += dequant + adapters
    # causal FlashAttention: 2 s d_head a FLOPs per token, BF16, at the attention efficiency
    attention = 2.0 * tokens * job["attn_ctx"] * q_width / tp / (hw["peak"] * hw["attention"] * hw["gemm"])
    norm_shard = tp if (plan["sp"] or tp <= 1) else 1.0
    memory_bound = hw["traffic"] * tokens * h * (24.0 / tp + 10.0 / norm_shard) / hw["hbm"]
    coll = hw["collective"]
    # 2 all-gathers + 2 reduce-scatters of s b h bf16 values
    tensor_parallel = 4.0 * ring_collective_s(2.0 * tokens * h, tp, link_bytes_s(hw, tp, 1.0), coll)
    # tp_overlap of it runs behind the layer's own matmuls (at most their time); the hidden part still
    # slows them by the contention share
    hidden = min(hw["tp_overlap"] * tensor_parallel, linear)
    tensor_parallel -= hidden * (1.0 - hw["contention"])
    expert_parallel = 0.0
    if model["moe"] and ep > 1:
        copies = model["top_k"]
        nodes = ep * tp / hw["gpus_per_node"]
        if model["node_limit"] > 0 and nodes > 1:  # node-limited routing: one copy per node reached, over the network
            copies = min(copies, model["node_limit"], nodes)
        dispatched = 2.0 * tokens * copies * h / tp
        expert_parallel = 2.0 * dispatched * (ep - 1.0) / ep / (link_bytes_s(hw, ep, tp) * coll)
    context_parallel = 0.0
    if cp > 1:
        kv = 2.0 * 2.0 * tokens * model["kv_heads"] * model["head_dim"] / tp
        context_parallel = max(0.0, kv * (cp - 1.0) / (link_bytes_s(hw, cp, tp) * coll) - attention)
    return {"linear": linear, "attention": attention, "memory": memory_bound, "tp": tensor_parallel,
            "ep": expert_parallel, "cp": context_parallel, "of_linear": {"dequant": dequant, "adapters": adapters}}


def plan_step(model: dict, hw: dict, job: dict, plan: dict) -> dict:
    """One optimizer step of a plan by named term, its memory and MFU (layout.plan_terms' docstring)."""
    tp, pp, dp, cp, ep, v = plan["tp"], plan["pp"], plan["dp"], plan["cp"], plan["ep"], plan["interleave"]
    mem = plan_memory(model, hw, job, plan)
    fwd = layer_forward_s(model, hw, job, plan)
    linear_backward = 2.0 if job["method"] == "full" else 1.0  # a frozen base: input gradients only
    layer_compute = fwd["linear"] * (1.0 + linear_backward) + 3.0 * fwd["attention"] + 3.0 * fwd["memory"]
    layer_comm = 2.0 * fwd["tp"] + 2.0 * fwd["ep"] + 3.0 * fwd["cp"]
    if plan["recompute"] == "full":
        layer_recompute = sum(fwd[k] for k in ("linear", "attention", "memory", "tp", "ep", "cp"))
    elif plan["recompute"] == "selective":
        layer_recompute = fwd["attention"]
    else:
        layer_recompute = 0.0
    layers = math.ceil(model["L"] / pp)
    tokens = job["seq"] / cp * plan["micro_batch"] * job["seqs_per_sample"]
    h, V = model["h"], model["V"]
    lm_head = 3.0 * 2.0 * tokens * h * V / tp / (hw["peak"] * gemm_efficiency(tokens, V / tp, h, hw["gemm"],
                                                                               hw["half_dim"]))
    p2p = 0.0
    if pp > 1:
        p2p = 2.0 * v * (2.0 * tokens * h / tp) / (hw["inter"] * hw["collective"])
    compute = layers * layer_compute + lm_head
    comm = layers * layer_comm + p2p
    recompute = layers * layer_recompute
    ep_s, p2p_s = layers * 2.0 * fwd["ep"], p2p
    m = step_micro_batches(job, dp, plan["micro_batch"])
    if dualpipe(job, plan):
        # DeepSeek-V3 report Sec. 3.2.1-3.2.2, Table 2: the communication kernels take their own SMs (compute
        # slower by 1/(1 - share)); the all-to-all and the sends hide behind the paired chunk's compute;
        # bubble (PP/2 - 1)(F&B + B - 3W) with F&B = F + B
        slow = 1.0 / (1.0 - hw["dualpipe_sms"])
        compute, recompute = compute * slow, recompute * slow
        hidden = ep_s + p2p_s
        exposed = exposed_s(hidden, compute + recompute, hw["contention"])
        ep_s, p2p_s = (ep_s * exposed / hidden, p2p_s * exposed / hidden) if hidden > 0 else (0.0, 0.0)
        comm = layers * (2.0 * fwd["tp"] + 3.0 * fwd["cp"]) + ep_s + p2p_s
        forward = (layers * (fwd["linear"] + fwd["attention"] + fwd["memory"]) + lm_head / 3.0) * slow
        weight_grads = layers * fwd["linear"] * (linear_backward - 1.0) * slow
        backward = compute + recompute - forward
        micro_batch_s = compute + comm + recompute
        bubble = max(pp / 2.0 - 1.0, 0.0) * max(forward + 2.0 * backward - 3.0 * weight_grads, 0.0)
    else:
        micro_batch_s = compute + comm + recompute
        bubble = (pp - 1.0) / v * micro_batch_s
    replicas = dp * cp
    expert_replicas = max(replicas / ep, 1.0)  # the replicas holding the same experts
    if job["method"] == "full":
        dense, experts = model["n_dense"] / (tp * pp), model["n_routed"] / (tp * pp * ep)
    else:
        dense, experts = model["n_trainable"] / (tp * pp), 0.0
    held = dense + experts
    dp_link = link_bytes_s(hw, replicas, tp * pp)
    grad_reduce = 2.0 * (ring_collective_s(hw["grad_bytes"] * dense, replicas, dp_link, hw["collective"])
                         + ring_collective_s(hw["grad_bytes"] * experts, expert_replicas, dp_link, hw["collective"]))
    last_backward = layers * (fwd["linear"] * linear_backward + 2.0 * fwd["attention"] + 2.0 * fwd["memory"])
    dp_exposed = exposed_s(grad_reduce, hw["dp_overlap"] * last_backward, hw["contention"])
    zero_exposed = 0.0
    if plan["zero"] >= 3:  # ZeRO-3 shards a LoRA job's frozen base too, and gathers it as it does full weights
        w_bytes = 2.0 if job["method"] == "full" else frozen_base_bytes(job)
        base = model["n_dense"] / (tp * pp)
        routed = model["n_routed"] / (tp * pp * ep)
        gathers = 2.0 * (ring_collective_s(w_bytes * base, replicas, dp_link, hw["collective"])
                         + ring_collective_s(w_bytes * routed, expert_replicas, dp_link, hw["collective"]))
        zero_exposed = m * exposed_s(gathers, compute, hw["contention"])
    shard_params = held
    if plan["zero"] >= 1:
        shard_params = dense / replicas + experts / expert_replicas
    per_param = 2.0 + 2.0 + MASTER_BYTES + state_bytes(job["optimizer"], model["h"])
    optimizer, offload = 2.0 * per_param * shard_params / hw["hbm"], 0.0
    if job["offload"] != "none":  # gradients down, weights up over PCIe; the Adam step on the CPU
        optimizer = 0.0
        offload = 4.0 * shard_params / hw["pcie"] + CPU_ADAM_BYTES * shard_params / hw["cpu_bw"]
    if job["offload"] == "optimizer_and_params":  # each micro-batch fetches its weights, fwd + bwd
        every = model["n_dense"] / (tp * pp) / replicas + model["n_routed"] / (tp * pp * ep) / expert_replicas
        base = 2.0 if job["method"] == "full" else (NF4_BYTES_PER_PARAM if job["method"] == "qlora"
                                                   else (1.0 if job["int8_base"] or job["fp8"] else 2.0))
        offload += m * exposed_s(2.0 * base * every / hw["pcie"], compute, hw["contention"])
    offload += 2.0 * mem["paged"] / hw["pcie"]
    step = m * micro_batch_s + bubble + dp_exposed + zero_exposed + optimizer + offload
    step_tokens = m * dp * plan["micro_batch"] * job["tokens_per_sample"]
    return {"step_time_s": step, "compute_s": m * compute, "communication_s": m * comm + dp_exposed + zero_exposed,
            "bubble_s": bubble, "recompute_s": m * recompute, "optimizer_s": optimizer, "offload_s": offload,
            # of the compute, forward and backward of the linear layers
            "dequant_s": m * layers * fwd["of_linear"]["dequant"] * (1.0 + linear_backward),
            "adapter_s": m * layers * fwd["of_linear"]["adapters"] * (1.0 + linear_backward),
            "micro_batches": float(m), "memory": mem,
            "fits": mem["total"] <= hw["capacity"] and plan_runs(model, job, plan),
            "gpus_used": tp * pp * dp * cp,
            "mfu": job["flops_per_token"] * step_tokens / (step * max(job["gpus"], tp * pp * dp * cp) * hw["peak"]),
            "tokens_per_gpu_s": step_tokens / (step * max(job["gpus"], tp * pp * dp * cp))}


def step_micro_batches(job: dict, dp: float, micro_batch: float) -> float:
    """Micro-batches per step: the gradient accumulation steps when set, else global batch / (dp x mb) up."""
    if job["grad_accum"] > 0:
        return job["grad_accum"]
    return float(math.ceil(job["global_batch"] / (dp * micro_batch)))


def attention_splits(tp: float, heads: float, kv_heads: float) -> bool:
    """A tensor-parallel degree this attention takes: it divides the query heads, and the key/value heads
    divide among the GPUs or are copied evenly onto them (vLLM's LlamaAttention asserts; Megatron-LM's head
    check). An unknown count (0) refuses nothing."""
    if heads > 0 and heads % tp != 0:
        return False
    if kv_heads <= 0 or (heads > 0 and heads % kv_heads != 0):  # no GQA grouping: a KV cache's stand-in (MLA)
        return True
    return kv_heads % tp == 0 if kv_heads >= tp else tp % kv_heads == 0


def plan_runs(model: dict, job: dict, plan: dict) -> bool:
    """A plan a job can run (layout.search's docstring): no more GPUs than the job has (tp x pp x cp x dp
    <= G), no more tensor-parallel ranks than heads nor pipeline stages than layers, and an
    expert-parallel degree that divides the experts (a dense model has one "expert") and the dp x cp ranks."""
    if plan["tp"] * plan["pp"] * plan["cp"] * plan["dp"] > job["gpus"]:
        return False
    if plan["tp"] > model["heads"] or plan["pp"] > model["L"]:
        return False
    if not attention_splits(plan["tp"], model["heads"], model["kv_heads"]):
        return False
    ep = plan["ep"]
    experts = max(1.0, model["experts"])
    return ep == 1 or (experts % ep == 0 and (plan["dp"] * plan["cp"]) % ep == 0)


def stage_job(v, stage: str, gpus: float, method: str, ctx: float, seqs_per_sample: float, extra_params: float,
              flops_per_token: float, media_act: float = 0.0) -> dict:
    """What one training stage asks of its layout: context, global batch (sequences), GPUs, method, precision."""
    ctx = max(ctx, 1.0)
    global_batch = float(v(f"stages.{stage}.global_batch"))
    if global_batch <= 0:
        global_batch = max(1.0, math.floor(float(v(f"stages.{stage}.global_batch_tokens")) / (ctx * seqs_per_sample)))
    int8_base = method == "lora" and float(v(f"stages.{stage}.base_bits")) == 8
    return {"seq": ctx, "global_batch": global_batch, "gpus": gpus, "method": method,
            "dequant": float(v(f"stages.{stage}.qlora_dequant_overhead")) if (method == "qlora" or int8_base) else 0.0,
            "seqs_per_sample": seqs_per_sample, "extra_params": extra_params,
            "fp8": v("hardware.precision") == "fp8" and float(v("hardware.fp8_peak_tflops")) > float(v("hardware.peak_tflops")),
            "flops_per_token": flops_per_token,
            "tokens_per_sample": ctx * seqs_per_sample, "optimizer": v(f"stages.{stage}.optimizer"),
            "offload": v(f"stages.{stage}.offload"), "grad_accum": float(v(f"stages.{stage}.grad_accum")),
            "int8_base": int8_base, "media_act": media_act, "schedule": v(f"stages.{stage}.schedule"),
            "attn_ctx": attended_context(float(v("model.sliding_window")), float(v("model.sliding_window_share")), ctx)}


def hours_at(flops: float, peak_tflops: float, utilization: float) -> float:
    achieved_flops_per_second = peak_tflops * 1e12 * utilization
    return flops / achieved_flops_per_second / SECONDS_PER_HOUR


# ---------------------------------------------------------------------------
# Decoding (roofline)
# ---------------------------------------------------------------------------
def kv_tokens_held(shape: dict, ctx: float) -> float:
    """KV tokens a sequence of ctx tokens keeps, averaged over the layers: all in a full layer, the last w in a
    sliding-window one."""
    window, share = shape.get("window", 0.0), shape.get("window_share", 1.0)
    if window <= 0 or share <= 0:
        return ctx
    return share * min(ctx, window) + (1.0 - share) * ctx


def kv_bytes_per_token(shape: dict) -> float:
    return 2.0 * shape["L"] * shape["kv_heads"] * shape["head_dim"] * KV_BYTES_PER_VALUE  # K and V, bf16


def _decode_on(replica, n_total, n_active, kv_per_token, ctx_avg, ctx_max, batch, peak_tflops, bandwidth_tbs, mem_gb,
               efficiency, bytes_per_weight=2.0):
    """(GPU-seconds per generated token, sequences at once) on replicas of ``replica`` GPUs."""
    weight_bytes = bytes_per_weight * n_total
    kv_room = 0.9 * replica * mem_gb * 1e9 - weight_bytes
    fit = math.floor(kv_room / max(kv_per_token * ctx_max, 1.0))
    sequences = max(1.0, min(float(batch), max(1.0, fit)))
    memory_time = (weight_bytes + sequences * kv_per_token * ctx_avg) / (replica * bandwidth_tbs * 1e12)
    compute_time = 2.0 * n_active * sequences / (replica * peak_tflops * 1e12)
    step_seconds = max(memory_time, compute_time) / efficiency
    return step_seconds * replica / sequences, sequences


def fewest_replica_gpus(n_total, mem_gb, gpus_per_node=8, heads=0.0, kv_heads=0.0, bytes_per_weight=2.0) -> float:
    """The fewest GPUs a replica takes, laid out as vLLM does: weights in half of each GPU's memory, tensor parallel
    a power of two within a node that splits the heads (the smallest holding the weights, else the largest),
    pipeline stages across nodes."""
    weight_bytes = bytes_per_weight * n_total
    needed = 1
    while weight_bytes > needed * 0.5 * mem_gb * 1e9:  # fewest GPUs holding weights in half their HBM
        needed += 1
    powers = [t for t in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
              if t <= max(gpus_per_node, 1) and attention_splits(t, heads, kv_heads)]
    holding = [t for t in powers if t >= needed]
    tp = holding[0] if holding else powers[-1]
    return float(tp * -(-needed // tp))


def fitting_gpus(weight_bytes, seq_kv_bytes, mem_gb, gpus_per_node=8, heads=0.0, kv_heads=0.0, max_gpus=0) -> float:
    """The fewest GPUs (a power of two within a node that splits the heads, at most max_gpus) holding the weights
    and one sequence's KV cache in 90% of their memory; 0 when none does."""
    for t in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024):
        if t > max(gpus_per_node, 1) or (max_gpus > 0 and t > max_gpus):
            break
        if attention_splits(t, heads, kv_heads) and weight_bytes + seq_kv_bytes <= 0.9 * t * mem_gb * 1e9:
            return float(t)
    return 0.0


def replica_tensor_part(replica: float, gpus_per_node: float) -> float:
    """A replica's tensor-parallel GPUs: all within a node, else the largest divisor of its GPUs a node holds."""
    if replica <= gpus_per_node:
        return replica
    return float(max(d for d in range(1, int(gpus_per_node) + 1) if replica % d == 0))


def decode(n_total, n_active, kv_per_token, ctx_avg, ctx_max, batch, peak_tflops, bandwidth_tbs, mem_gb,
           efficiency, pinned_replica=0, gpus_per_node=8, max_gpus=0, heads=0.0, kv_heads=0.0, bytes_per_weight=2.0):
    """Return (GPU-seconds per generated token, GPUs per replica, sequences decoded at once): on the pinned replica,
    else on the fewest GPUs or, inside one node, a power of two above it up to the node and the stage's GPUs
    (``max_gpus``; 0: no cap), each larger one taken when it saves 5% of the GPU-seconds per token on the best so far."""
    args = (n_total, n_active, kv_per_token, ctx_avg, ctx_max, batch, peak_tflops, bandwidth_tbs, mem_gb, efficiency,
            bytes_per_weight)
    if pinned_replica > 0:  # the user's tensor-parallel size for the inference engine
        cost, seqs = _decode_on(float(pinned_replica), *args)
        return cost, float(pinned_replica), seqs
    fewest = fewest_replica_gpus(n_total, mem_gb, gpus_per_node, heads, kv_heads, bytes_per_weight)
    if max_gpus > 0 and fewest > max_gpus:  # fewer GPUs than that replica: the fewest that hold the weights
        fewest = fitting_gpus(bytes_per_weight * n_total, kv_per_token * ctx_max, mem_gb, gpus_per_node, heads,
                              kv_heads, max_gpus) or fewest
    node = max(t for t in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024) if t <= max(gpus_per_node, 1))
    sizes = [fewest] + [float(t) for t in (2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
                        if fewest < t <= node and (max_gpus <= 0 or t <= max_gpus)
                        and attention_splits(t, heads, kv_heads)]
    best = None
    for replica in sizes:
        cost, seqs = _decode_on(replica, *args)
        if best is None or cost < best[0] * (1.0 - 0.05):  # a larger replica must save 5% (its TP all-reduces)
            best = (cost, replica, seqs)
    return best


# ---------------------------------------------------------------------------
# Checkpoints
# ---------------------------------------------------------------------------
def young_daly(write_h: float, mtbi_h: float) -> float:
    if not mtbi_h < math.inf:
        return math.inf
    if write_h >= 2.0 * mtbi_h:
        return mtbi_h
    x = write_h / (2.0 * mtbi_h)
    return math.sqrt(2.0 * write_h * mtbi_h) * (1.0 + math.sqrt(x) / 3.0 + x / 9.0) - write_h


def is_kept(j: int, k: int, keep_last: int, milestone_every: int) -> bool:
    """Is checkpoint j (1-based) still stored after checkpoint k was written?"""
    if j > k:
        return False
    if keep_last <= 0:
        return True
    if j > k - keep_last:
        return True
    return milestone_every > 0 and j % milestone_every == 0


def held_after(k: int, keep_last: int, milestone_every: int, loop_limit: int = 20000) -> int:
    """Checkpoints stored after the k-th write (counted one by one unless k > loop_limit)."""
    if k <= 0:
        return 0
    if k <= loop_limit:
        return sum(1 for j in range(1, k + 1) if is_kept(j, k, keep_last, milestone_every))
    if keep_last <= 0:
        return k
    old = k - keep_last  # checkpoints older than the window
    return min(k, keep_last) + (old // milestone_every if (milestone_every > 0 and old > 0) else 0)


def stored_checkpoint_intervals(n: int, keep_last: int, milestone_every: int, loop_limit: int = 200000) -> float:
    """Sum over the run's intervals of the checkpoints stored during each.

    Counted per checkpoint: checkpoint j exists from its write (end of
    interval j) on; it is dropped when K newer ones exist unless it is a
    milestone or keep-all. Intervals j+1 .. n are in the run.
    """
    last_interval = n
    total = 0
    if n <= loop_limit:
        for j in range(1, n + 1):
            remaining = last_interval - j  # intervals in the run after checkpoint j is written
            kept_forever = keep_last <= 0 or (milestone_every > 0 and j % milestone_every == 0)
            total += remaining if kept_forever else min(keep_last, remaining)
        return float(total)
    # Very long runs: the same count grouped by kind of checkpoint (no loop).
    R = last_interval - 1  # remaining(j) = R + 1 - j for j = 1..n
    if keep_last <= 0:
        return float(sum_range(R + 1 - n, R))
    K = keep_last
    # non-milestone: sum_j min(K, R + 1 - j), j = 1..n   (values r = R+1-n .. R)
    lo, hi = R + 1 - n, R
    total = sum_min(K, lo, hi)
    if milestone_every > 0:
        M = milestone_every
        count = n // M  # milestones j = M, 2M, ..., cM
        # each milestone keeps (R+1-j) instead of min(K, R+1-j): add the excess
        # sum over t=1..count of max(0, R + 1 - tM - K)
        t_max = min(count, (R - K) // M) if R - K > 0 else 0
        if t_max > 0:
            total += t_max * (R + 1 - K) - M * t_max * (t_max + 1) // 2
    return float(total)


def sum_range(lo: int, hi: int) -> int:
    return (lo + hi) * (hi - lo + 1) // 2 if hi >= lo else 0


def sum_min(K: int, lo: int, hi: int) -> int:
    """sum_{r=lo}^{hi} min(K, r) for 0 <= lo."""
    below = sum_range(lo, min(hi, K))
    above = K * max(0, hi - max(lo, K + 1) + 1)
    return below + above


# ---------------------------------------------------------------------------
# The estimate
# ---------------------------------------------------------------------------
def _stage_enabled(scn: dict, stage: str) -> bool:
    sdata = scn.get("stages", {})
    return stage in sdata and sdata[stage].get("enabled", True) is not False


def reference_estimate(scenario: dict, plans: dict, layout_inputs: dict | None = None) -> dict:
    """{stage: {line item: $, stat: value}} for every enabled stage (see module doc).

    plans: {training stage: plan dict (see the job-layout section) + "min_gpus"}, the layout the
    stage runs (the kernel's search result, :func:`kernel_plans`); the reference times it, sizes
    its memory and builds everything else from it. layout_inputs, when given, receives
    {training stage: (model, hardware, job)}: what any other plan of the stage would be timed with.
    """
    scn = validate(scenario)

    def v(path):
        return effective_value(scn, path)

    def f(path):
        return float(v(path))

    n_total = f("model.params_b") * 1e9
    active_b = min(f("model.active_params_b"), f("model.params_b")) if f("model.active_params_b") > 0 else f("model.params_b")
    n_act = active_b * 1e9
    shape = model_shape(n_act, f("model.layers"), f("model.hidden"), f("model.heads"), f("model.kv_heads"),
                        f("model.ffn"), bool(v("model.gated")))
    if f("model.ffn") <= 0 and f("model.experts") <= 0 and n_total <= 1.05 * n_act:
        shape["ffn"] = ffn_for_size(n_total, shape, f("model.vocab"), bool(v("model.gated")))
    shape["window"], shape["window_share"] = f("model.sliding_window"), f("model.sliding_window_share")
    hw = layout_hardware(f)
    kv_tok = kv_bytes_per_token(shape)
    peak = f("hardware.peak_tflops")
    hbm_gb = f("hardware.memory_gb")
    usable = hbm_gb * 1e9 * f("efficiency.usable_memory_fraction")
    price = f("hardware.usd_per_gpu_hour")
    infer_mfu = f("efficiency.inference_mfu")
    team_per_month = sum(f(f"labor.{role}.fte") * f(f"labor.{role}.usd_per_month")
                         for role in ("researcher", "ml_engineer", "data_engineer", "infra_engineer"))

    out = {}
    for stage in STAGES:
        if not _stage_enabled(scn, stage):
            continue

        def sv(key, _stage=stage):
            return v(f"stages.{_stage}.{key}")

        def sf(key, _stage=stage):
            return float(v(f"stages.{_stage}.{key}"))

        gpus = sf("num_gpus") if sf("num_gpus") > 0 else f("hardware.num_gpus")
        method = sv("method") if stage in PEFT_STAGES else "full"
        if method == "lora" and sf("base_bits") == 4:  # LoRA on an NF4 base is QLoRA
            method = "qlora"
        experts = layout_model(v, shape, n_total, n_act, "full", 0.0)  # a MoE adapts every expert's MLP
        n_lora = lora_params(shape, sf("lora_rank"), sv("lora_targets"), bool(v("model.gated")),
                             experts["experts"] + experts["shared"] if experts["moe"] else 1.0,
                             experts["expert_ffn"] if experts["moe"] else shape["ffn"]) if method != "full" else 0.0
        tps = sf("tokens_per_gpu_s")
        seq = sf("seq_len")
        items = {key: 0.0 for key in ITEM_KEYS}
        media_stored = None
        eval_media = {}  # a multimodal benchmark's media figures (eval)
        side_flops = 0.0
        mode = "none"
        mem = 0.0
        fewest = 0.0
        rollout_h = 0.0
        replica_gpus = 0.0  # GPUs of one inference replica (RL rollouts, eval decoding)
        pinned_replica = 0.0  # its GPUs when the user pinned them
        decoding_at_once = 0.0  # the sequences that replica decodes at once

        layout = {}  # the plan's step terms and memory (training stages)

        def resolve_layout(ctx, seqs_per_sample, extra_params, flops_per_token, stage=stage, method=method,
                           n_lora=n_lora, gpus=gpus, sf=sf, media_act=0.0):
            """(bytes per GPU, fewest GPUs, MFU, recompute mode) of the stage's given plan.

            The MFU is the stage's own, else its measured hardware TFLOP/s (x 6/8 with full
            recompute: 8N instead of 6N hardware FLOPs per token), else the plan's MFU at the
            share of the modelled step rate a production run sustains.
            """
            given = plans[stage]
            plan = {k: given[k] for k in ("tp", "pp", "dp", "cp", "ep", "micro_batch", "recompute", "zero",
                                          "interleave", "sp", "dualpipe")}
            model = layout_model(v, shape, n_total, n_act, method, n_lora)
            job = stage_job(v, stage, gpus, method, ctx, seqs_per_sample, extra_params, flops_per_token, media_act)
            # with gradient accumulation set, a step takes accum x dp x micro-batch sequences, whatever the global
            # batch says (the HF Trainer's effective batch)
            batch = (job["grad_accum"] * plan["dp"] * plan["micro_batch"] if job["grad_accum"] > 0
                     else job["global_batch"])
            layout.update(plan_step(model, hw, job, plan), plan=plan, global_batch=batch)
            if layout_inputs is not None:
                layout_inputs[stage] = (model, hw, job)
            if sf("mfu") > 0:
                u = sf("mfu")
            elif sf("tflops_per_gpu") > 0:
                u = sf("tflops_per_gpu") / peak
                if plan["recompute"] == "full":
                    u = u * 6.0 / 8.0
            else:
                u = layout["mfu"] * f("efficiency.sustained_fraction")
            # a plan that does not run is never reported as fitting, nor is the fallback shown when the search
            # found no plan that fits (kernel._stage_layout: it may lie outside the searched degrees); its
            # memory is reported as it is
            layout["runs"] = bool(layout["fits"] and given.get("searched_fit", True))
            return layout["memory"]["total"], float(given["min_gpus"]), u, plan["recompute"]

        if stage in ("pretrain", "cpt"):
            tokens = sf("tokens_b") * 1e9
            unique_tokens = tokens / sf("epochs")
            fpt = train_flops_per_token(n_act, shape, seq)
            flops = tokens * fpt
            mem, fewest, mfu, mode = resolve_layout(seq, 1.0, 0.0, fpt)
            productive_h = tokens / tps / SECONDS_PER_HOUR if tps > 0 else hours_at(flops, peak, mfu)

        elif stage == "sft":
            per_sample = sf("tokens_per_sample")
            unique_tokens = sf("samples") * per_sample
            tokens = unique_tokens * sf("epochs")
            ctx = min(seq, per_sample)  # a sample never attends past its own length
            fpt = train_flops_per_token(n_act, shape, ctx, method, n_lora)
            flops = tokens * fpt
            mem, fewest, mfu, mode = resolve_layout(ctx, 1.0, 0.0, fpt)
            productive_h = tokens / tps / SECONDS_PER_HOUR if tps > 0 else hours_at(flops, peak, mfu)

        elif stage == "dpo":
            chosen, rejected = sf("chosen_tokens"), sf("rejected_tokens")
            unique_tokens = sf("pairs") * (chosen + rejected)
            tokens = unique_tokens * sf("epochs")
            ctx = min(seq, max(chosen, rejected))
            fpt = train_flops_per_token(n_act, shape, ctx, method, n_lora)
            policy_flops = tokens * fpt
            precomputed = sv("reference") == "precomputed"
            reference_passes = 1.0 if precomputed else sf("epochs")
            reference_flops = unique_tokens * reference_passes * forward_flops_per_token(n_act, shape, ctx)
            flops = policy_flops + reference_flops
            # a live reference with full fine-tuning is a second (frozen) model in memory;
            # with LoRA the reference is the base with adapters off (no copy)
            reference_copy = n_total if (not precomputed and method == "full") else 0.0
            mem, fewest, mfu, mode = resolve_layout(ctx, 2.0, reference_copy, fpt)  # chosen + rejected per sample
            policy_h = tokens / tps / SECONDS_PER_HOUR if tps > 0 else hours_at(policy_flops, peak, mfu)
            productive_h = policy_h + hours_at(reference_flops, peak, infer_mfu)

        elif stage == "rl":
            prompts = sf("prompts_per_step")
            completions_per_step = prompts * sf("samples_per_prompt")
            steps = sf("steps")
            p_tok, r_tok = sf("prompt_tokens"), sf("response_tokens")
            ctx = p_tok + r_tok
            completions = steps * completions_per_step
            tokens = completions * ctx
            unique_tokens = steps * prompts * p_tok
            # rollouts: prefill (compute bound) + decode (roofline)
            gpu_s_per_tok, replica, seqs = decode(n_total, n_act, kv_tok, kv_tokens_held(shape, p_tok + r_tok / 2.0),
                                                  kv_tokens_held(shape, ctx),
                                                  sf("rollout_batch"), peak, f("hardware.mem_bandwidth_tbs"),
                                                  hbm_gb, sf("rollout_efficiency"), sf("rollout_tp"),
                                                  f("hardware.gpus_per_node"), gpus, shape["heads"], shape["kv_heads"])
            prefill_flops = completions * p_tok * forward_flops_per_token(n_act, shape, p_tok)
            rollout_h = completions * r_tok * gpu_s_per_tok / SECONDS_PER_HOUR + hours_at(prefill_flops, peak,
                                                                                           infer_mfu)
            # forward passes at inference utilization
            per_tok_fwd = forward_flops_per_token(n_act, shape, ctx)
            scoring_flops = tokens * per_tok_fwd  # old log-probs of the policy
            if sv("reference") == "live":
                scoring_flops += tokens * per_tok_fwd
            if sv("reward") == "model":
                n_reward = sf("reward_params_b") * 1e9 if sf("reward_params_b") > 0 else n_act
                scoring_flops += tokens * forward_flops_per_token(n_reward, shape, ctx)
            else:
                items["compute.verifier"] = completions * sf("verifier_usd_per_sample")
            passes = sf("update_epochs")
            fpt = train_flops_per_token(n_act, shape, ctx, method, n_lora)
            learn_flops = tokens * passes * fpt
            if sv("algorithm") == "ppo":
                n_critic = sf("critic_params_b") * 1e9 if sf("critic_params_b") > 0 else n_act
                scoring_flops += tokens * forward_flops_per_token(n_critic, shape, ctx)
                learn_flops += tokens * passes * train_flops_per_token(n_critic, shape, ctx)
            flops = learn_flops + scoring_flops
            # the policy's GPUs also hold the live reference and reward model (frozen bf16 copies) and a
            # PPO critic (trains: 16 bytes per parameter = 8 bf16 copies), colocated (kernel._rl_colocated_params)
            colocated = 0.0
            if sv("reference") == "live":
                colocated += n_total
            if sv("reward") == "model":
                colocated += sf("reward_params_b") * 1e9 if sf("reward_params_b") > 0 else n_act
            if sv("algorithm") == "ppo":
                colocated += 8.0 * (sf("critic_params_b") * 1e9 if sf("critic_params_b") > 0 else n_act)
            mem, fewest, mfu, mode = resolve_layout(ctx, 1.0, colocated, fpt)
            if tps > 0:
                learn_h = tokens * passes / tps / SECONDS_PER_HOUR
            else:
                learn_h = hours_at(learn_flops, peak, mfu)
            productive_h = rollout_h + learn_h + hours_at(scoring_flops, peak, infer_mfu)
            rollout_mem = (2.0 * n_total + seqs * kv_tok * kv_tokens_held(shape, ctx)) / replica
            mem = max(mem, rollout_mem)
            # the stage must also hold one inference replica for the rollouts
            replica_gpus, decoding_at_once = replica, seqs
            if fewest > 0:  # the fewest GPUs a replica takes, not the larger one the stage's GPUs make cheaper
                fewest = max(fewest, sf("rollout_tp") if sf("rollout_tp") > 0
                             else fitting_gpus(2.0 * n_total, kv_tok * kv_tokens_held(shape, ctx), hbm_gb,
                                               f("hardware.gpus_per_node"), shape["heads"], shape["kv_heads"])
                             or fewest_replica_gpus(n_total, hbm_gb, f("hardware.gpus_per_node"), shape["heads"],
                                                    shape["kv_heads"]))
            pinned_replica = sf("rollout_tp")

        elif stage in MM_STAGES:
            media = media_figures(v, stage, shape["d"])
            train_llm, train_conn, train_enc = bool(sv("train_llm")), bool(sv("train_connector")), bool(sv("train_encoder"))
            precomputed = bool(v("multimodal.precomputed_features"))
            llm_method = method if train_llm else "lora"  # a frozen LLM: a LoRA base without adapters
            adapters = n_lora if (train_llm and method != "full") else 0.0
            n_enc = f("multimodal.encoder_params_b") * 1e9
            n_conn = media["connector_params"]
            side = (n_conn if train_conn else 0.0) + (n_enc if train_enc else 0.0)
            frozen = (0.0 if train_conn else n_conn) + (0.0 if (train_enc or precomputed) else n_enc)
            extra = frozen + 8.0 * side if llm_method == "full" else frozen
            items_each, share, text = sf("items_per_sample"), sf("media_share"), sf("text_tokens_per_sample")
            samples, epochs = sf("samples"), sf("epochs")
            tok = media["tokens_per_item"]
            media_items = samples * share * items_each
            llm_unique = samples * (text + share * items_each * tok)
            tokens = llm_unique * epochs
            ctx = max(1.0, min(seq, text + items_each * tok))
            fpt = train_flops_per_token(n_act, shape, ctx, llm_method, adapters)
            encoder_runs = 3.0 * epochs if train_enc else (1.0 if precomputed else epochs)
            through = media["passes"] * media["tokens_per_pass"] if v("multimodal.connector") in (
                "qformer", "resampler") else tok
            connector_x = 3.0 if (train_conn or train_enc) else 1.0
            side_flops = media_items * (media["encoder_forward_flops"] * encoder_runs
                                        + 2.0 * n_conn * through * connector_x * epochs)
            flops = tokens * fpt + side_flops
            act = (items_each * media["passes"] * media["tokens_per_pass"] * f("multimodal.encoder_layers")
                   * f("multimodal.encoder_hidden") * 34.0) if train_enc else 0.0
            mem, fewest, mfu, mode = resolve_layout(ctx, 1.0, extra, fpt, method=llm_method, n_lora=adapters + side,
                                                    media_act=act)
            productive_h = tokens / tps / SECONDS_PER_HOUR if tps > 0 else hours_at(flops, peak, mfu)
            unique_tokens = samples * text  # the text stored, bought and cleaned; media is billed per item
            media_saved = (n_total if llm_method == "full" else adapters) + side
            media_stored = (media, media_items, precomputed and not train_enc)

        else:  # eval
            runs = sf("runs")
            ctx = sf("context_tokens")
            prompt_tok = sf("benchmark_tokens_m") * 1e6
            gen_tok = sf("generated_tokens_m") * 1e6
            unique_tokens = prompt_tok + gen_tok
            tokens = runs * unique_tokens
            gpu_s_per_tok, replica, seqs = decode(n_total, n_act, kv_tok, kv_tokens_held(shape, ctx),
                                                  kv_tokens_held(shape, ctx), sf("decode_batch"), peak,
                                                  f("hardware.mem_bandwidth_tbs"), hbm_gb,
                                                  sf("decode_efficiency"), sf("decode_tp"),
                                                  f("hardware.gpus_per_node"), gpus, shape["heads"], shape["kv_heads"],
                                                  sf("weight_bits") / 8.0)
            prefill_flops = runs * prompt_tok * forward_flops_per_token(n_act, shape, ctx)
            media_items = runs * sf("media_items_k") * 1e3  # a multimodal benchmark's images, clips or recordings
            if media_items > 0:
                media = media_figures(v, stage, shape["d"])
                through = (media["passes"] * media["tokens_per_pass"]
                           if v("multimodal.connector") in ("qformer", "resampler") else media["tokens_per_item"])
                side_flops = media_items * (media["encoder_forward_flops"] + 2.0 * media["connector_params"] * through)
                media_tokens = media_items * media["tokens_per_item"]
                prefill_flops += media_tokens * forward_flops_per_token(n_act, shape, ctx) + side_flops
                tokens += media_tokens
                eval_media = {"media_items": media_items, "media_tokens_per_item": media["tokens_per_item"],
                              "encoder_passes_per_item": media["passes"],
                              "media_token_share": media_tokens / (media_tokens + runs * prompt_tok),
                              "encoder_gpu_hours": hours_at(side_flops, peak, infer_mfu),
                              "connector_params": media["connector_params"],
                              "encoder_params": float(v("multimodal.encoder_params_b")) * 1e9}
            flops = prefill_flops + runs * gen_tok * 2.0 * n_act
            rollout_h = runs * gen_tok * gpu_s_per_tok / SECONDS_PER_HOUR
            productive_h = rollout_h + hours_at(prefill_flops, peak, infer_mfu)
            mfu = infer_mfu
            mem = (sf("weight_bits") / 8.0 * n_total + seqs * kv_tok * kv_tokens_held(shape, ctx)) / replica
            fewest = (sf("decode_tp") if sf("decode_tp") > 0
                      else fitting_gpus(sf("weight_bits") / 8.0 * n_total, kv_tok * kv_tokens_held(shape, ctx), hbm_gb,
                                        f("hardware.gpus_per_node"), shape["heads"], shape["kv_heads"])
                      or fewest_replica_gpus(n_total, hbm_gb, f("hardware.gpus_per_node"), shape["heads"],
                                             shape["kv_heads"], sf("weight_bits") / 8.0))
            pinned_replica = sf("decode_tp")
            replica_gpus, decoding_at_once = replica, seqs
            items["data.human_eval"] = runs * sf("human_samples") * sf("usd_per_human_sample")

        # ---- the data pipeline: a loader slower than the GPUs' appetite stretches the training
        data_h = 0.0
        loader = sf("loader_tokens_per_s_per_node") if stage in ("pretrain", "cpt", "sft", "dpo") + MM_STAGES else 0.0
        if loader > 0 and productive_h > 0:
            eaten_per_node = min(gpus, f("hardware.gpus_per_node")) * tokens / (productive_h * SECONDS_PER_HOUR)
            if eaten_per_node > loader:
                data_h = productive_h * (eaten_per_node / loader - 1.0)
        media_rates = (0.0, 0.0)  # media items per second per node: taken by the GPUs, decoded by the loader
        if media_stored is not None and media_online(v, media_stored) and productive_h > 0:
            taken = (min(gpus, f("hardware.gpus_per_node")) * media_stored[1] * sf("epochs")
                     / (productive_h * SECONDS_PER_HOUR))
            decoded = f("multimodal.loader_cores_per_node") / media_item_size_and_cpu(v)[1]
            media_rates = (taken, decoded)
            if taken > decoded:
                data_h = max(data_h, productive_h * (taken / decoded - 1.0))
        # ---- reliability: checkpoints, interruptions, idle, failed runs, experiments
        run_hours = (productive_h + data_h) / gpus  # wall-clock hours of training
        trains = stage in TRAIN_STAGES
        saved_params = n_total if method == "full" else n_lora
        if media_stored is not None:
            saved_params = media_saved
        if trains:
            per_param = (f("storage.weights_ckpt_bytes_per_param") if sv("ckpt_type") == "weights"
                         else f("storage.full_ckpt_bytes_per_param"))
            ckpt_bytes = saved_params * per_param
        else:
            ckpt_bytes = 0.0
        write_h = ckpt_bytes / (f("reliability.ckpt_write_gbps_per_gpu") * 1e9 * gpus) / SECONDS_PER_HOUR
        failures_per_h = f("reliability.failures_per_gpu_hour") * gpus
        mtbi = 1.0 / failures_per_h if failures_per_h > 0 else math.inf
        yd = young_daly(write_h, mtbi) if trains else 0.0
        interval = sf("ckpt_interval_h") if sf("ckpt_interval_h") > 0 else yd
        if not trains or not interval < run_hours:
            interval = run_hours  # one checkpoint at the end (or none for eval)
        if trains and run_hours > 0:
            n_ckpt = max(1, math.floor(run_hours / interval))
        else:
            n_ckpt = 0
        stall_h = n_ckpt * write_h * gpus
        interruptions = failures_per_h * run_hours
        lost_h = interruptions * gpus * (interval / 2.0 + f("reliability.restart_hours"))
        idle_h = productive_h * f("reliability.idle_fraction")
        failed_h = productive_h * f("reliability.failed_run_fraction")
        main_h = productive_h + data_h + lost_h + stall_h + idle_h + failed_h
        experiments_h = sf("experiments") * sf("experiment_size") * main_h
        billed_h = main_h + experiments_h
        months = sf("setup_months") + billed_h / gpus / HOURS_PER_DAY / DAYS_PER_MONTH

        items["compute.gpu"] = productive_h * price
        items["hidden.failures"] = lost_h * price
        items["hidden.ckpt_stalls"] = stall_h * price
        items["hidden.idle"] = idle_h * price
        items["hidden.failed_runs"] = failed_h * price
        items["hidden.experiments"] = experiments_h * price
        items["hidden.data_stalls"] = data_h * price

        # ---- storage
        ckpt_gb = ckpt_bytes / 1e9
        keep_last = int(sv("keep_last"))
        milestone = int(sv("milestone_every"))
        retention = f("storage.retention_months")
        hot_months_after = min(retention, f("storage.cold_after_days") / DAYS_PER_MONTH)
        final_kept = held_after(n_ckpt, keep_last, milestone)
        spacing = run_hours / n_ckpt if n_ckpt > 0 else 0.0
        in_run_gb_h = ckpt_gb * spacing * stored_checkpoint_intervals(n_ckpt, keep_last, milestone)
        # after the stage: optionally only the weights of each retained checkpoint are kept
        retained_gb = ckpt_gb
        if v("storage.finished_weights_only") and trains and sv("ckpt_type") == "full":
            retained_gb = saved_params * f("storage.weights_ckpt_bytes_per_param") / 1e9
        items["storage.ckpt_hot"] = f("storage.hot_usd_per_gb_month") * (
            in_run_gb_h / HOURS_PER_MONTH + final_kept * retained_gb * hot_months_after)
        items["storage.ckpt_cold"] = (f("storage.cold_usd_per_gb_month") * final_kept * retained_gb
                                      * (retention - hot_months_after))
        copy_gb = unique_tokens * f("storage.bytes_per_token") / 1e9
        dataset_gb = copy_gb * f("storage.dataset_versions")
        items["storage.dataset"] = f("storage.object_usd_per_gb_month") * dataset_gb * (months + retention)

        # ---- network
        usd_gb = f("network.usd_per_gb")
        items["network.dataset"] = copy_gb * f("network.dataset_transfers") * usd_gb
        items["network.ckpt_replication"] = final_kept * retained_gb * f("network.ckpt_replicas") * usd_gb
        if trains:
            export_gb = saved_params * f("storage.weights_ckpt_bytes_per_param") / 1e9
            items["network.model_export"] = export_gb * f("network.model_exports") * usd_gb

        # ---- data
        unique_b = unique_tokens / 1e9
        items["data.acquisition"] = unique_b * sf("acquisition_usd_per_b_tokens")
        items["data.cleaning"] = unique_b * sf("cleaning_usd_per_b_tokens")
        items["data.labeling"] = sf("labels") * sf("usd_per_label") * (1.0 + f("data.review_fraction"))
        items["data.synthetic"] = sf("synthetic_tokens_m") * f("data.usd_per_m_synthetic_tokens")

        # ---- people and platform
        items["labor.team"] = team_per_month * months
        items["ops.platform"] = f("ops.usd_per_month") * months
        if media_stored is not None:
            items.update(media_money(v, stage, *media_stored, months, billed_h / gpus / HOURS_PER_DAY / DAYS_PER_MONTH))

        row = dict(items)
        row.update({
            "num_gpus": gpus,
            "productive_gpu_hours": productive_h,
            "gpu_hours": billed_h,
            "wall_days": main_h / gpus / HOURS_PER_DAY,
            "months": months,
            "flops": flops,
            "mfu": mfu,
            "tokens": tokens,
            "interruptions": interruptions,
            "ckpt_interval_h": interval if trains else 0.0,
            "young_daly_h": yd if yd < math.inf else 0.0,
            "ckpt_count": float(n_ckpt),
            "ckpt_gb": ckpt_gb,
            "ckpt_write_s": write_h * SECONDS_PER_HOUR,
            "dataset_gb": dataset_gb,
            "storage_peak_gb": final_kept * ckpt_gb + dataset_gb,
            "memory_per_gpu_gb": mem / 1e9,
            "fits": 1.0 if (mem <= usable and replica_gpus <= gpus and layout.get("runs", True)
                            and not (pinned_replica > 0 and not attention_splits(
                                replica_tensor_part(pinned_replica, f("hardware.gpus_per_node")), shape["heads"],
                                shape["kv_heads"]))) else 0.0,
            "min_gpus": float(fewest),
            "rollout_gpu_hours": rollout_h,
            "trainable_params_b": saved_params / 1e9,
            "usd_total": sum(items.values()),
            # on reserved GPUs their time (productive and hidden) is a commitment: fixed cost
            "fixed_usd": sum(items[k] for k in items if k in FIXED_ITEM_KEYS or (
                v("hardware.reserved") and (k == "compute.gpu" or k.startswith("hidden.")))),
            "recompute_mode": float(RECOMPUTE_NAMES.index(mode)),
            "decode_replica_gpus": float(replica_gpus),
            "decode_batch_used": float(decoding_at_once),
        })
        row.update(layout_stats(layout))
        row.update(media_stats(v, stage, media_stored, productive_h, flops, side_flops if media_stored else 0.0,
                               media_rates))
        if media_stored is not None:  # held at the stage's end: its media too (raw, shard copies, features)
            row["storage_peak_gb"] += (row["media_raw_gb"] * (1.0 + float(v("multimodal.shard_copies")))
                                       + row["media_features_gb"])
        row.update(eval_media)
        out[stage] = row
    if v("hardware.reserved"):  # the reservation's unused hours, shared by billed GPU-hours
        used = sum(row["gpu_hours"] for row in out.values())
        gpus = f("hardware.reserved_gpus") or f("hardware.num_gpus")
        idle = max(0.0, gpus * f("hardware.reserved_months") * 730.0 - used)
        for row in out.values():
            usd = idle * row["gpu_hours"] / used * f("hardware.usd_per_gpu_hour") if used > 0 else 0.0
            row["hidden.reserved_idle"] = usd
            row["usd_total"] += usd
            row["fixed_usd"] += usd
    return out


# ---------------------------------------------------------------------------
# Media (multimodal phases), from the schema docs of the multimodal block and formulas' media docstrings
# ---------------------------------------------------------------------------
def media_figures(v, stage: str, model_width: float) -> dict:
    """Per item: encoder passes and tokens per pass, LLM tokens, encoder forward FLOPs; connector parameters."""
    modality = v("multimodal.modality")
    own = float(v(f"stages.{stage}.resolution_px")) if stage != "eval" else 0.0  # a phase's own resolution
    res, patch = own or float(v("multimodal.resolution_px")), float(v("multimodal.patch_px"))
    window = float(v("multimodal.max_seconds"))
    seconds = float(v("multimodal.seconds_per_item"))
    per_pass = float(v("multimodal.encoder_tokens"))
    if per_pass <= 0:
        per_pass = (float(v("multimodal.audio_tokens_per_second")) * window if modality == "audio" or patch <= 0
                    else float(int(res // patch) ** 2))
    if modality == "video":
        passes = float(v("multimodal.frames_per_item"))
    elif modality == "audio":
        passes = float(math.ceil(seconds / window)) if window > 0 else 1.0
    else:
        passes = float(v("multimodal.tiles_per_item"))
    connector = v("multimodal.connector")
    squeeze = float(v("multimodal.token_compression"))
    if squeeze <= 0:
        squeeze = 4.0 if connector == "pixel-shuffle" else 1.0
    own = float(v(f"stages.{stage}.tokens_per_item")) if stage != "eval" else 0.0
    tokens = own or float(v("multimodal.tokens_per_item"))
    if tokens <= 0:
        if connector in ("qformer", "resampler"):
            queries = float(v("multimodal.connector_queries")) or (32.0 if connector == "qformer" else 256.0)
            tokens = passes * queries
        else:
            kept = per_pass * min(1.0, seconds / (passes * window)) if (modality == "audio" and window > 0) else per_pass
            tokens = passes * kept / squeeze
    n = float(v("multimodal.encoder_params_b")) * 1e9
    layers, width = float(v("multimodal.encoder_layers")), float(v("multimodal.encoder_hidden"))
    forward = passes * (2.0 * n * per_pass + 4.0 * layers * per_pass ** 2 * width)
    conn = float(v("multimodal.connector_params_b")) * 1e9
    if conn <= 0:
        into = width * squeeze if connector == "pixel-shuffle" else width
        conn = {"qformer": 0.188e9, "resampler": 0.08e9, "linear": into * model_width}.get(
            connector, into * model_width + model_width * model_width)
    return {"passes": passes, "tokens_per_pass": per_pass, "tokens_per_item": tokens,
            "encoder_forward_flops": forward, "connector_params": conn}


def media_item_size_and_cpu(v) -> tuple[float, float]:
    """(MB stored, CPU-seconds to preprocess) per media item: given, else the schema docs' defaults per media type."""
    modality = v("multimodal.modality")
    seconds, frames = float(v("multimodal.seconds_per_item")), float(v("multimodal.frames_per_item"))
    mb = float(v("multimodal.raw_mb_per_item")) or {"video": 10.0, "audio": 0.032 * seconds}.get(modality, 0.15)
    cpu_s = float(v("multimodal.preprocess_cpu_s_per_item")) or {"video": 0.25 * frames,
                                                                 "audio": 0.01 * seconds}.get(modality, 0.02)
    return mb, cpu_s


def media_online(v, stored) -> bool:
    """The loader decodes every epoch: online preprocessing and no precomputed features of a frozen encoder."""
    return v("multimodal.preprocessing") == "online" and not stored[2]


def media_decodes(v, stage: str, stored) -> float:
    """Times each item is decoded and billed: the epochs when online, else once."""
    return float(v(f"stages.{stage}.epochs")) if media_online(v, stored) else 1.0


def media_money(v, stage: str, media: dict, n_items: float, features: bool, months: float, run_months: float) -> dict:
    """The media line items: CPU preprocessing, raw + preprocessed copies (object storage for the stage and its
    retention), precomputed BF16 features (hot tier for the run), transfers, licences, captions."""
    mb, cpu_s = media_item_size_and_cpu(v)
    raw_gb = n_items * mb / 1000.0
    feature_gb = (n_items * media["passes"] * media["tokens_per_pass"] * float(v("multimodal.encoder_hidden")) * 2.0
                  / 1e9) if features else 0.0
    retention = float(v("storage.retention_months"))
    copies = 1.0 + float(v("multimodal.shard_copies"))
    decodes = media_decodes(v, stage, (media, n_items, features))
    return {"compute.media_preprocessing": n_items * decodes * cpu_s / SECONDS_PER_HOUR
            * float(v("multimodal.usd_per_cpu_hour")),
            "storage.media": (float(v("storage.object_usd_per_gb_month")) * raw_gb * copies * (months + retention)
                              + float(v("storage.hot_usd_per_gb_month")) * feature_gb * run_months),
            "network.media": raw_gb * float(v("multimodal.media_transfers")) * float(v("network.usd_per_gb")),
            "data.media_license": n_items * float(v(f"stages.{stage}.license_usd_per_item")),
            "data.captioning": n_items * float(v(f"stages.{stage}.caption_usd_per_item"))}


MEDIA_STAT_KEYS = ("media_items", "media_tokens_per_item", "encoder_passes_per_item", "encoder_gpu_hours",
                   "media_token_share", "preprocess_cpu_hours", "media_raw_gb", "media_features_gb",
                   "connector_params", "encoder_params", "media_items_per_s_per_node",
                   "media_loader_items_per_s_per_node")


def media_stats(v, stage: str, stored, productive_h: float, flops: float, side_flops: float,
                rates=(0.0, 0.0)) -> dict:
    """The media figures of a multimodal phase as kernel.STATS names them (0 for other stages)."""
    if stored is None:
        return {k: 0.0 for k in MEDIA_STAT_KEYS}
    media, n_items, features = stored
    items_each, share = float(v(f"stages.{stage}.items_per_sample")), float(v(f"stages.{stage}.media_share"))
    text = float(v(f"stages.{stage}.text_tokens_per_sample"))
    media_tok = share * items_each * media["tokens_per_item"]
    mb, cpu_s = media_item_size_and_cpu(v)
    return {"media_items": n_items, "media_tokens_per_item": media["tokens_per_item"],
            "encoder_passes_per_item": media["passes"],
            "encoder_gpu_hours": productive_h * side_flops / flops if flops > 0 else 0.0,
            "media_token_share": media_tok / (text + media_tok) if (text + media_tok) > 0 else 0.0,
            "preprocess_cpu_hours": n_items * media_decodes(v, stage, stored) * cpu_s / SECONDS_PER_HOUR,
            "media_raw_gb": n_items * mb / 1000.0,
            "media_items_per_s_per_node": rates[0], "media_loader_items_per_s_per_node": rates[1],
            "media_features_gb": (n_items * media["passes"] * media["tokens_per_pass"]
                                  * float(v("multimodal.encoder_hidden")) * 2.0 / 1e9) if features else 0.0,
            "connector_params": media["connector_params"],
            "encoder_params": float(v("multimodal.encoder_params_b")) * 1e9}


def layout_stats(layout: dict) -> dict:
    """The plan and its step terms as kernel.STATS names them (all 0 for a stage without a layout)."""
    if not layout:
        return {k: 0.0 for k in LAYOUT_STAT_KEYS}
    plan, mem = layout["plan"], layout["memory"]
    out = {f"plan_{k}": float(plan[k]) for k in ("tp", "pp", "dp", "cp", "ep", "micro_batch", "zero", "interleave")}
    out["plan_sp"] = 1.0 if plan["sp"] else 0.0
    out["step_time_s"] = layout["step_time_s"]
    for k in ("compute", "communication", "bubble", "recompute", "optimizer"):
        out[f"step_{k}_s"] = layout[f"{k}_s"]
    for k in ("weights", "grads", "optimizer", "activations", "buffers"):
        out[f"mem_{k}_gb"] = mem[k] / 1e9
    out["step_dequant_s"], out["step_adapter_s"] = layout["dequant_s"], layout["adapter_s"]
    out["micro_batches"] = layout["micro_batches"]
    out["global_batch"] = layout["global_batch"]
    out["plan_mfu"] = layout["mfu"]
    out["plan_tokens_per_gpu_s"] = layout["tokens_per_gpu_s"]
    return out


def stage_pins(scenario: dict, stage: str) -> dict:
    """The plan fields a stage's scenario pins ({field: value}; a field searched is absent)."""
    scn = validate(scenario)

    def sv(key):
        return effective_value(scn, f"stages.{stage}.{key}")
    pins = {k: float(sv(k)) for k in ("tp", "pp", "dp", "cp", "ep", "micro_batch", "interleave") if float(sv(k)) > 0}
    if sv("schedule") == "dualpipe":  # DualPipe runs its own two chunks per GPU: no interleaving
        pins["interleave"] = 1.0
    if sv("recompute") != "auto":
        pins["recompute"] = sv("recompute")
    if int(sv("zero_stage")) >= 0:
        pins["zero"] = int(sv("zero_stage"))
    if sv("sequence_parallel") != "auto":
        pins["sp"] = sv("sequence_parallel") == "on"
    return pins


def candidate_plans(model: dict, job: dict, pins: dict, choices) -> list[dict]:
    """Every plan layout.search tries for a job, as its docstring (and _pp_ok's) describe it.

    tp from the candidate degrees, dividing the heads; pp every divisor of L up to PP_MAX and the
    powers of two below L; cp with chunks of at least MIN_CP_TOKENS; each micro-batch (none above
    the sequences one replica gets); dp the most the GPUs and the global batch allow; ep powers of
    two dividing the experts and dp x cp; every recompute mode; ZeRO 0-3 (above 0 only with more
    than one replica); interleaving that divides the layers of a stage; SP on with tp > 1. A pinned
    field is tried at its pinned value only. No plan uses more GPUs than the job has.
    ``choices``: the module holding the candidate lists (costcore.engine.layout: data, not code).
    """
    G, L = job["gpus"], model["L"]

    def options(name, default):
        return [pins[name]] if name in pins else list(default)
    out = []
    tps = options("tp", [t for t in choices.TP_CHOICES if attention_splits(t, model["heads"], model["kv_heads"])])
    pps = options("pp", [p for p in range(1, choices.PP_MAX + 1) if p <= L and (L % p == 0 or (p & (p - 1)) == 0)])
    # the schedules tried: auto 1F1B, dualpipe DualPipe, search both unless an interleave above 1 is
    # pinned; DualPipe on an even pipeline of 2 or more stages only
    scheds = {"dualpipe": [True]}.get(job["schedule"], [False])
    if job["schedule"] == "search" and pins.get("interleave", 0) <= 1:
        scheds = [False, True]
    cps = options("cp", [c for c in choices.CP_CHOICES if c == 1 or job["seq"] / c >= choices.MIN_CP_TOKENS])
    for tp in tps:
        if tp > G or tp > model["heads"]:
            continue
        for pp, dual in [(p, d) for p in pps for d in scheds if not d or (p >= 2 and p % 2 == 0)]:
            if tp * pp > G or pp > L:
                continue
            for cp in cps:
                if tp * pp * cp > G:
                    continue
                most = math.floor(G / (tp * pp * cp))
                for mb in options("micro_batch", choices.MB_CHOICES):
                    if job["grad_accum"] > 0:  # the global batch follows the plan: only the GPUs cap dp
                        dp = pins.get("dp", most)
                    else:
                        dp = pins.get("dp", min(most, max(1.0, math.floor(job["global_batch"] / mb))))
                    if dp > most or ("micro_batch" not in pins and mb > 1 and mb > job["global_batch"] / dp
                                     and job["grad_accum"] <= 0):
                        continue
                    out += _inner_candidates(model, job, pins, options, choices,
                                             dict(tp=tp, pp=pp, cp=cp, dp=dp, micro_batch=mb, dualpipe=dual))
    return out


def _inner_candidates(model, job, pins, options, choices, outer) -> list[dict]:
    out = []
    experts = max(1.0, model["experts"])
    eps = options("ep", [2.0 ** i for i in range(0, 64) if 2.0 ** i <= experts])
    replicas = outer["dp"] * outer["cp"]
    for ep in eps:
        if not (ep == 1 or (replicas % ep == 0 and experts % ep == 0)):
            continue
        for rc in options("recompute", RECOMPUTE_NAMES):
            # CPU offload needs ZeRO-2 (optimizer) or ZeRO-3 (and weights), on one GPU too
            need = {"none": 0, "optimizer": 2, "optimizer_and_params": 3}[job["offload"]]
            allowed = [z for z in range(4) if z >= need and (z == 0 or replicas > 1 or need > 0)]
            for zero in options("zero", allowed):
                if zero < need:
                    continue
                for v in options("interleave", choices.V_CHOICES):
                    if "interleave" not in pins and v > 1 and (outer["pp"] <= 1 or math.ceil(model["L"] / outer["pp"]) % v):
                        continue
                    if outer["dualpipe"] and v > 1:  # DualPipe runs its own two chunks per GPU
                        continue
                    out.append(dict(outer, ep=ep, recompute=rc, zero=zero, interleave=v,
                                    sp=pins.get("sp", outer["tp"] > 1)))
    return out


def kernel_plans(scenario: dict) -> dict:
    """{training stage: plan dict + min_gpus}: the layouts the kernel's search chose (its only input from the kernel).

    From ``kernel._single``'s third result, one row per stage: layout.PLAN_FIELDS then the fewest
    GPUs any plan fits on (before the RL/eval inference-replica minimum the reference adds itself).
    """
    from costcore.engine import kernel, layout
    from costcore.scenario.schema import to_vector
    x = to_vector(validate(scenario))
    _, stats, rows = kernel._single(x, 0.0)
    found = stats[:, kernel.STATS.index("plans_fitting")]
    out = {}
    for i, stage in enumerate(STAGES):
        g = dict(zip(layout.PLAN_FIELDS + ("min_gpus",), (float(c) for c in rows[i])))
        out[stage] = {"tp": g["tp"], "pp": g["pp"], "dp": g["dp"], "cp": g["cp"], "ep": g["ep"],
                      "micro_batch": g["micro_batch"], "recompute": RECOMPUTE_NAMES[int(g["recompute"])],
                      "zero": int(g["zero"]), "interleave": g["interleave"], "sp": g["sp"] > 0.5,
                      "dualpipe": g["dualpipe"] > 0.5, "min_gpus": g["min_gpus"], "searched_fit": found[i] > 0}
    return out


# The line items and which of them are fixed, as documented in kernel.LINE_ITEMS
# (re-typed on purpose: a test checks the two lists agree).
ITEM_KEYS = (
    "compute.gpu", "compute.verifier", "storage.dataset", "storage.ckpt_hot", "storage.ckpt_cold",
    "network.dataset", "network.ckpt_replication", "network.model_export", "data.acquisition",
    "data.cleaning", "data.labeling", "data.synthetic", "data.human_eval", "labor.team", "ops.platform",
    "hidden.failures", "hidden.ckpt_stalls", "hidden.idle", "hidden.experiments", "hidden.failed_runs",
    "hidden.data_stalls", "compute.media_preprocessing", "storage.media", "network.media", "data.media_license",
    "data.captioning", "hidden.reserved_idle",
)
FIXED_ITEM_KEYS = ("storage.dataset", "data.acquisition", "labor.team", "ops.platform", "storage.media",
                   "data.media_license")
STAT_KEYS = ("num_gpus", "productive_gpu_hours", "gpu_hours", "wall_days", "months", "flops", "mfu", "tokens",
             "interruptions", "ckpt_interval_h", "young_daly_h", "ckpt_count", "ckpt_gb", "ckpt_write_s",
             "dataset_gb", "storage_peak_gb", "memory_per_gpu_gb", "fits", "min_gpus", "rollout_gpu_hours",
             "trainable_params_b", "usd_total", "fixed_usd", "recompute_mode", "decode_replica_gpus", "decode_batch_used")
LAYOUT_STAT_KEYS = ("plan_tp", "plan_pp", "plan_dp", "plan_cp", "plan_ep", "plan_micro_batch", "plan_zero",
                    "plan_interleave", "plan_sp", "step_time_s", "step_compute_s", "step_communication_s",
                    "step_bubble_s", "step_recompute_s", "step_optimizer_s", "mem_weights_gb", "mem_grads_gb",
                    "mem_optimizer_gb", "mem_activations_gb", "mem_buffers_gb", "micro_batches", "global_batch",
                    "plan_mfu", "plan_tokens_per_gpu_s", "step_dequant_s", "step_adapter_s")
