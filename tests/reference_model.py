"""Slow, plain-Python reference implementation of the whole cost model.

Written from the documentation (``costcore/data/schema.yaml`` field docs and
the docstrings of ``costcore/formulas.py``), not from the kernel's code: no
vector, no numba, no index constants. Every quantity is a named local
variable, enums are compared as their text, and the checkpoint bookkeeping is
done by brute force (walking over the checkpoints one by one) instead of the
closed forms the core uses. The test-suite checks the fast kernel against
this file (stumpy's ``naive.py`` pattern).

Only the *defaults* and the GPU catalog come from :mod:`costcore.schema`
(``effective_value``), so nothing here re-types a default number. The few
documented physical constants (730 h per month, NF4 bytes ...) are imported
from :mod:`costcore.formulas` by name.

``reference_estimate(scenario) -> {stage: {line item key: $, stat: value}}``
for every enabled stage. Line item keys are those of ``kernel.LINE_ITEMS``;
stat names are those of ``kernel.STATS``.

Where no docstring or schema doc says how the pieces compose, this model
takes the product decisions of the core as given (they are choices, not
derivations) and writes them out plainly:

- GPU time: productive + failures (interruptions x (interval/2 + restart)) +
  checkpoint write stalls + idle + failed runs = the main run; experiments
  add ``experiments x experiment_size`` main runs; labor and ops are billed
  for ``setup_months`` + the billed GPU time on the stage's GPUs.
- A measured ``tokens_per_gpu_s`` replaces the *training* part only (DPO's
  reference forward passes, RL rollouts and scoring are still added).
- LoRA/QLoRA memory: frozen base weights (bf16 / NF4, sharded by ZeRO-3),
  adapter states at formulas.LORA_/QLORA_TRAINABLE_BYTES; a live DPO
  reference is a second bf16 copy only with full fine-tuning.
- RL and eval must hold one inference replica (``inference_tp`` GPUs) to fit.
- In-run checkpoint storage: see the switch below.
"""
from __future__ import annotations

import math

from costcore.engine.formulas import (
    DAYS_PER_MONTH,
    HOURS_PER_MONTH,
    KV_BYTES_PER_VALUE,
    LORA_TRAINABLE_BYTES,
    NF4_BYTES_PER_PARAM,
    QLORA_TRAINABLE_BYTES,
)
from costcore.scenario.schema import STAGES, effective_value, validate

# The in-run checkpoint storage: the documented quantity is "checkpoint-hours
# stored during a run". Checkpoint k is written at the end of interval k, so
# during interval k only checkpoints 1..k-1 exist: the integral over the run is
# sum_{k=1}^{n-1} held(k) * spacing (the n-th checkpoint is written when the run
# ends and from then on is billed by the retention term).

TRAIN_STAGES = ("pretrain", "cpt", "sft", "dpo", "rl")
PEFT_STAGES = ("sft", "dpo", "rl")
SECONDS_PER_HOUR = 3600.0
HOURS_PER_DAY = 24.0


# ---------------------------------------------------------------------------
# Model shape
# ---------------------------------------------------------------------------
def model_shape(shape_params: float, layers: float, hidden: float, heads: float, kv_heads: float,
                ffn: float) -> dict:
    """Transformer shape (Kaplan et al. 2020: N ~ 12 L d^2, aspect ratio d = 128 L).

    12 L d^2 = N with d = 128 L  =>  L^3 = N / (12 * 128^2), L rounded to the
    nearest whole layer (at least 1); d = sqrt(N / (12 L)); heads of 128;
    kv heads = heads; FFN = 4 d. A given (non-zero) value is used as is.
    """
    if layers > 0:
        L = float(layers)
    else:
        exact = (shape_params / (12.0 * 128.0 ** 2)) ** (1.0 / 3.0)
        L = float(max(1, math.floor(exact + 0.5)))
    d = float(hidden) if hidden > 0 else math.sqrt(shape_params / (12.0 * L))
    a = float(heads) if heads > 0 else max(1.0, d / 128.0)
    kv = float(kv_heads) if kv_heads > 0 else a
    f = float(ffn) if ffn > 0 else 4.0 * d
    head_dim = d / a
    return {"L": L, "d": d, "heads": a, "kv_heads": kv, "ffn": f, "head_dim": head_dim,
            "kv_dim": kv * head_dim}


def lora_params(shape: dict, rank: float, targets: str) -> float:
    """LoRA adds A (d_in x r) and B (r x d_out) to every adapted matrix: r (d_in + d_out)."""
    d, kv_dim, ffn, L = shape["d"], shape["kv_dim"], shape["ffn"], shape["L"]
    matrices = {  # name: (d_in, d_out)
        "q": (d, d), "k": (d, kv_dim), "v": (d, kv_dim), "o": (d, d),
        "gate": (d, ffn), "up": (d, ffn), "down": (ffn, d),
    }
    adapted = {"qv": ["q", "v"], "attn": ["q", "k", "v", "o"],
               "all": ["q", "k", "v", "o", "gate", "up", "down"]}[targets]
    per_layer = 0.0
    for name in adapted:
        d_in, d_out = matrices[name]
        per_layer += rank * (d_in + d_out)
    return L * per_layer


# ---------------------------------------------------------------------------
# FLOPs and utilization
# ---------------------------------------------------------------------------
def attention_flops_train(shape: dict, ctx: float) -> float:
    return 12.0 * shape["L"] * shape["d"] * ctx  # PaLM App. B: 12 L H Q T (H Q = d)


def train_flops_per_token(n: float, shape: dict, ctx: float, method: str = "full",
                          n_lora: float = 0.0, dequant: float = 0.0) -> float:
    """full 6N + 12Lds; LoRA 4N + 12Lds + 6 N_lora; QLoRA: 4N * (1 + dequant_overhead)."""
    if method == "full":
        return 6.0 * n + attention_flops_train(shape, ctx)
    frozen_base = 4.0 * n  # forward 2N + backward (input gradients only) 2N
    if method == "qlora":
        frozen_base = frozen_base * (1.0 + dequant)
    return frozen_base + attention_flops_train(shape, ctx) + 6.0 * n_lora


def forward_flops_per_token(n: float, shape: dict, ctx: float) -> float:
    """A third of training: 2N + 4Lds."""
    return 2.0 * n + 4.0 * shape["L"] * shape["d"] * ctx


def default_mfu(mfu_base, n_active_b, gpus, size_exponent, small_model_b, cluster_ref, cluster_slope,
                mfu_min) -> float:
    n_b = max(n_active_b, 0.001)
    mfu = mfu_base
    mfu = mfu * (n_b / 10.0) ** (-size_exponent)
    mfu = mfu * (n_b / (n_b + small_model_b))
    if gpus > cluster_ref:
        doublings = math.log2(gpus / cluster_ref)
        mfu = mfu * max(0.2, 1.0 - cluster_slope * doublings)
    # "Clipped to [mfu_min, 0.75]" with np.clip semantics: the 0.75 ceiling wins
    # if a user sets mfu_min above it (the schema allows mfu_min up to 1).
    mfu = max(mfu, mfu_min)
    mfu = min(mfu, 0.75)
    return mfu


def hours_at(flops: float, peak_tflops: float, utilization: float) -> float:
    achieved_flops_per_second = peak_tflops * 1e12 * utilization
    return flops / achieved_flops_per_second / SECONDS_PER_HOUR


# ---------------------------------------------------------------------------
# Memory
# ---------------------------------------------------------------------------
def zero_model_state_bytes(n: float, zero: int, dp: float) -> float:
    """Mixed-precision AdamW states of one model replica's shard before model parallelism.

    Returned as (replicated bytes, bytes divided over data parallelism); the
    DeepSpeed estimators for ZeRO-2 (4N + 16N/dp) and ZeRO-3 (18N/dp + 4
    largest layer, the largest layer added by the caller).
    """
    if zero == 0:
        return 20.0 * n, 0.0
    if zero == 1:
        return 8.0 * n, 12.0 * n
    if zero == 2:
        return 4.0 * n, 16.0 * n
    return 0.0, 18.0 * n


def korthikanti_activation_bytes(shape: dict, seq: float, micro_batch: float, vocab: float, mode: str,
                                 tp: float) -> float:
    """Korthikanti et al. 2022 Table 2, with sequence parallelism (everything / tp)."""
    s, b, d, a, L = seq, micro_batch, shape["d"], shape["heads"], shape["L"]
    selective_layer = s * b * d * 34.0
    if mode == "none":
        layers = L * s * b * d * (34.0 + 5.0 * a * s / d)
    elif mode == "selective":
        layers = L * selective_layer
    else:  # full: every layer keeps its input (2 s b d), one layer at a time is recomputed
        layers = L * 2.0 * s * b * d + selective_layer
    logits = 4.0 * s * b * vocab  # fp32 logits
    return (layers + logits) / tp


def training_memory(v, stage: str, shape: dict, n_total: float, n_lora: float, method: str, gpus: float,
                    seqs_per_micro_batch: float, reference_copy_params: float, mode: str):
    """(bytes per GPU, fewest GPUs that fit or 0) of a training stage with a recompute mode."""
    tp = float(v(f"stages.{stage}.tp"))
    pp = float(v(f"stages.{stage}.pp"))
    zero = int(v(f"stages.{stage}.zero_stage"))
    mp = tp * pp
    dp = max(1.0, math.floor(gpus / mp))
    vocab = float(v("model.vocab"))
    largest_layer = max(vocab * shape["d"], shape["ffn"] * shape["d"])

    replicated = 0.0  # bytes per GPU whatever the data-parallel degree
    divisible = 0.0   # bytes per GPU before division by dp
    if method == "full":
        rep, div = zero_model_state_bytes(n_total, zero, dp)
        if zero == 3:
            rep += 4.0 * largest_layer
        replicated += rep / mp
        divisible += div / mp
    else:
        bytes_per_base_param = NF4_BYTES_PER_PARAM if method == "qlora" else 2.0
        base_weights = bytes_per_base_param * n_total / mp
        # adapters: LoRA fp32 weights + grads + Adam m, v (16 B); QLoRA bf16 weights + grads with
        # the Adam states paged to CPU (4 B) -- formulas.LORA_/QLORA_TRAINABLE_BYTES
        per_adapter_param = QLORA_TRAINABLE_BYTES if method == "qlora" else LORA_TRAINABLE_BYTES
        adapters = per_adapter_param * n_lora / mp
        replicated += adapters
        if zero == 3:
            divisible += base_weights
        else:
            replicated += base_weights
    if reference_copy_params > 0:
        ref = 2.0 * reference_copy_params / mp  # frozen bf16 reference model
        if zero == 3:
            divisible += ref
        else:
            replicated += ref
    replicated += korthikanti_activation_bytes(shape, float(v(f"stages.{stage}.seq_len")),
                                               float(v(f"stages.{stage}.micro_batch")) * seqs_per_micro_batch,
                                               vocab, mode, tp)
    per_gpu = replicated + divisible / dp
    capacity = float(v("hardware.memory_gb")) * 1e9 * float(v("efficiency.usable_memory_fraction"))
    if replicated >= capacity:
        fewest = 0.0
    elif divisible <= 0:
        fewest = mp
    else:
        fewest = math.ceil(divisible / (capacity - replicated)) * mp
    return per_gpu, fewest


# ---------------------------------------------------------------------------
# Decoding (roofline)
# ---------------------------------------------------------------------------
def kv_bytes_per_token(shape: dict) -> float:
    return 2.0 * shape["L"] * shape["kv_heads"] * shape["head_dim"] * KV_BYTES_PER_VALUE  # K and V, bf16


def decode(n_total, n_active, kv_per_token, ctx_avg, ctx_max, batch, peak_tflops, bandwidth_tbs, mem_gb,
           efficiency):
    """Return (GPU-seconds per generated token, GPUs per replica, sequences decoded at once)."""
    weight_bytes = 2.0 * n_total
    replica = 1
    while weight_bytes > replica * 0.5 * mem_gb * 1e9:  # fewest GPUs holding weights in half their HBM
        replica += 1
    kv_room = 0.9 * replica * mem_gb * 1e9 - weight_bytes
    fit = math.floor(kv_room / max(kv_per_token * ctx_max, 1.0))
    sequences = max(1.0, min(float(batch), max(1.0, fit)))
    memory_time = (weight_bytes + sequences * kv_per_token * ctx_avg) / (replica * bandwidth_tbs * 1e12)
    compute_time = 2.0 * n_active * sequences / (replica * peak_tflops * 1e12)
    step_seconds = max(memory_time, compute_time) / efficiency
    return step_seconds * replica / sequences, float(replica), sequences


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


def reference_estimate(scenario: dict) -> dict:
    """{stage: {line item: $, stat: value}} for every enabled stage (see module doc)."""
    scn = validate(scenario)

    def v(path):
        return effective_value(scn, path)

    def f(path):
        return float(v(path))

    n_total = f("model.params_b") * 1e9
    active_b = f("model.active_params_b") if f("model.active_params_b") > 0 else f("model.params_b")
    n_act = active_b * 1e9
    shape = model_shape(n_act, f("model.layers"), f("model.hidden"), f("model.heads"), f("model.kv_heads"),
                        f("model.ffn"))
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
        n_lora = lora_params(shape, sf("lora_rank"), sv("lora_targets")) if method != "full" else 0.0
        tps = sf("tokens_per_gpu_s")
        dequant = sf("qlora_dequant_overhead")
        seq = sf("seq_len")
        items = {key: 0.0 for key in ITEM_KEYS}
        mode = "none"
        mem = 0.0
        fewest = 0.0
        rollout_h = 0.0
        replica_gpus = 0.0  # GPUs of one inference replica (RL rollouts, eval decoding)

        def resolve_memory(seqs_per_mb, reference_copy, stage=stage, n_lora=n_lora, method=method, gpus=gpus):
            """Recompute 'auto' = selective if that fits in usable memory, else full."""
            wanted = sv("recompute")
            m = "selective" if wanted == "auto" else wanted
            mem_, fewest_ = training_memory(v, stage, shape, n_total, n_lora, method, gpus, seqs_per_mb,
                                            reference_copy, m)
            if wanted == "auto" and mem_ > usable:
                m = "full"
                mem_, fewest_ = training_memory(v, stage, shape, n_total, n_lora, method, gpus, seqs_per_mb,
                                                reference_copy, m)
            return mem_, fewest_, m

        def training_mfu(m, ctx, method=method, gpus=gpus, sf=sf):
            given = sf("mfu")
            if given > 0:
                return given
            measured_tflops = sf("tflops_per_gpu")
            if measured_tflops > 0:
                # Megatron/BLOOM report hardware FLOP/s: with full recompute a token costs
                # 8N instead of 6N hardware FLOPs, so model FLOP/s are 6/8 of them.
                hardware_utilization = measured_tflops / peak
                if m == "full":
                    return hardware_utilization * 6.0 / 8.0
                return hardware_utilization
            u = default_mfu(f("hardware.mfu_base"), active_b, gpus, f("hardware.size_exponent"),
                            f("efficiency.small_model_b"), f("efficiency.cluster_ref_gpus"),
                            f("efficiency.cluster_slope"), f("efficiency.mfu_min"))
            # attention (12 L d s of 6N + 12 L d s FLOPs per token) runs at attn_efficiency of matmul speed
            attention = 12.0 * shape["L"] * shape["d"] * ctx
            share = attention / (6.0 * n_act + attention)
            u /= (1.0 - share) + share / f("hardware.attn_efficiency")
            u *= {"none": 1.0, "selective": f("efficiency.recompute_selective_factor"),
                  "full": f("efficiency.recompute_full_factor")}[m]
            if method != "full":
                u *= f("efficiency.peft_mfu_factor")
            return u

        if stage in ("pretrain", "cpt"):
            tokens = sf("tokens_b") * 1e9
            unique_tokens = tokens / sf("epochs")
            flops = tokens * train_flops_per_token(n_act, shape, seq)
            mem, fewest, mode = resolve_memory(1.0, 0.0)
            mfu = training_mfu(mode, seq)
            productive_h = tokens / tps / SECONDS_PER_HOUR if tps > 0 else hours_at(flops, peak, mfu)

        elif stage == "sft":
            per_sample = sf("tokens_per_sample")
            unique_tokens = sf("samples") * per_sample
            tokens = unique_tokens * sf("epochs")
            ctx = min(seq, per_sample)  # a sample never attends past its own length
            flops = tokens * train_flops_per_token(n_act, shape, ctx, method, n_lora, dequant)
            mem, fewest, mode = resolve_memory(1.0, 0.0)
            mfu = training_mfu(mode, ctx)
            productive_h = tokens / tps / SECONDS_PER_HOUR if tps > 0 else hours_at(flops, peak, mfu)

        elif stage == "dpo":
            chosen, rejected = sf("chosen_tokens"), sf("rejected_tokens")
            unique_tokens = sf("pairs") * (chosen + rejected)
            tokens = unique_tokens * sf("epochs")
            ctx = min(seq, max(chosen, rejected))
            policy_flops = tokens * train_flops_per_token(n_act, shape, ctx, method, n_lora, dequant)
            precomputed = sv("reference") == "precomputed"
            reference_passes = 1.0 if precomputed else sf("epochs")
            reference_flops = unique_tokens * reference_passes * forward_flops_per_token(n_act, shape, ctx)
            flops = policy_flops + reference_flops
            # a live reference with full fine-tuning is a second (frozen) model in memory;
            # with LoRA the reference is the base with adapters off (no copy)
            reference_copy = n_total if (not precomputed and method == "full") else 0.0
            mem, fewest, mode = resolve_memory(2.0, reference_copy)  # chosen + rejected per micro-batch
            mfu = training_mfu(mode, ctx)
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
            gpu_s_per_tok, replica, seqs = decode(n_total, n_act, kv_tok, p_tok + r_tok / 2.0, ctx,
                                                  sf("rollout_batch"), peak, f("hardware.mem_bandwidth_tbs"),
                                                  hbm_gb, sf("rollout_efficiency"))
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
            learn_flops = tokens * passes * train_flops_per_token(n_act, shape, ctx, method, n_lora, dequant)
            if sv("algorithm") == "ppo":
                n_critic = sf("critic_params_b") * 1e9 if sf("critic_params_b") > 0 else n_act
                scoring_flops += tokens * forward_flops_per_token(n_critic, shape, ctx)
                learn_flops += tokens * passes * train_flops_per_token(n_critic, shape, ctx)
            flops = learn_flops + scoring_flops
            mem, fewest, mode = resolve_memory(1.0, 0.0)
            mfu = training_mfu(mode, ctx)
            if tps > 0:
                learn_h = tokens * passes / tps / SECONDS_PER_HOUR
            else:
                learn_h = hours_at(learn_flops, peak, mfu)
            productive_h = rollout_h + learn_h + hours_at(scoring_flops, peak, infer_mfu)
            rollout_mem = (2.0 * n_total + seqs * kv_tok * ctx) / replica
            mem = max(mem, rollout_mem)
            # the stage must also hold one inference replica for the rollouts
            replica_gpus = replica
            if fewest > 0:
                fewest = max(fewest, replica)

        else:  # eval
            runs = sf("runs")
            ctx = sf("context_tokens")
            prompt_tok = sf("benchmark_tokens_m") * 1e6
            gen_tok = sf("generated_tokens_m") * 1e6
            unique_tokens = prompt_tok + gen_tok
            tokens = runs * unique_tokens
            gpu_s_per_tok, replica, seqs = decode(n_total, n_act, kv_tok, ctx, ctx, sf("decode_batch"), peak,
                                                  f("hardware.mem_bandwidth_tbs"), hbm_gb,
                                                  sf("decode_efficiency"))
            prefill_flops = runs * prompt_tok * forward_flops_per_token(n_act, shape, ctx)
            flops = prefill_flops + runs * gen_tok * 2.0 * n_act
            rollout_h = runs * gen_tok * gpu_s_per_tok / SECONDS_PER_HOUR
            productive_h = rollout_h + hours_at(prefill_flops, peak, infer_mfu)
            mfu = infer_mfu
            mem = (2.0 * n_total + seqs * kv_tok * ctx) / replica
            fewest = replica
            replica_gpus = replica
            items["data.human_eval"] = runs * sf("human_samples") * sf("usd_per_human_sample")

        # ---- reliability: checkpoints, interruptions, idle, failed runs, experiments
        run_hours = productive_h / gpus  # wall-clock hours of productive work
        trains = stage in TRAIN_STAGES
        saved_params = n_total if method == "full" else n_lora
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
        main_h = productive_h + lost_h + stall_h + idle_h + failed_h
        experiments_h = sf("experiments") * sf("experiment_size") * main_h
        billed_h = main_h + experiments_h
        months = sf("setup_months") + billed_h / gpus / HOURS_PER_DAY / DAYS_PER_MONTH

        items["compute.gpu"] = productive_h * price
        items["hidden.failures"] = lost_h * price
        items["hidden.ckpt_stalls"] = stall_h * price
        items["hidden.idle"] = idle_h * price
        items["hidden.failed_runs"] = failed_h * price
        items["hidden.experiments"] = experiments_h * price

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
            "fits": 1.0 if (mem <= usable and replica_gpus <= gpus) else 0.0,
            "min_gpus": float(fewest),
            "rollout_gpu_hours": rollout_h,
            "trainable_params_b": saved_params / 1e9,
            "usd_total": sum(items.values()),
            "fixed_usd": sum(items[k] for k in FIXED_ITEM_KEYS),
            "recompute_mode": {"none": 0.0, "selective": 1.0, "full": 2.0}[mode],
        })
        out[stage] = row
    return out


# The line items and which of them are fixed, as documented in kernel.LINE_ITEMS
# (re-typed on purpose: a test checks the two lists agree).
ITEM_KEYS = (
    "compute.gpu", "compute.verifier", "storage.dataset", "storage.ckpt_hot", "storage.ckpt_cold",
    "network.dataset", "network.ckpt_replication", "network.model_export", "data.acquisition",
    "data.cleaning", "data.labeling", "data.synthetic", "data.human_eval", "labor.team", "ops.platform",
    "hidden.failures", "hidden.ckpt_stalls", "hidden.idle", "hidden.experiments", "hidden.failed_runs",
)
FIXED_ITEM_KEYS = ("storage.dataset", "data.acquisition", "labor.team", "ops.platform")
STAT_KEYS = ("num_gpus", "productive_gpu_hours", "gpu_hours", "wall_days", "months", "flops", "mfu", "tokens",
             "interruptions", "ckpt_interval_h", "young_daly_h", "ckpt_count", "ckpt_gb", "ckpt_write_s",
             "dataset_gb", "storage_peak_gb", "memory_per_gpu_gb", "fits", "min_gpus", "rollout_gpu_hours",
             "trainable_params_b", "usd_total", "fixed_usd", "recompute_mode")
