"""Can the plan run as described? Sentences for plans that cannot, and for GPUs a batch cannot use.

Reads the kernel's stats (memory per GPU, fits, min GPUs) and the scenario;
computes no cost. An infeasible plan (a stage that does not fit in GPU memory
on the GPUs it has) has no headline total: the CLI prints the sentence where the
total would be and exits with code 3, the JSON says ``"feasible": false``, and
the app shows the sentence in place of the total.
"""
from __future__ import annotations

import math

from costcore.scenario.schema import CATALOG, STAGE_LABELS, effective_value

TRAINING_STAGES = ("pretrain", "cpt", "sft", "dpo", "rl")


def max_data_parallel_gpus(global_batch_tokens: float, seq_len_tokens: float, micro_batch: float,
                           tp: float, pp: float) -> float:
    """Most GPUs a global batch can keep busy: replicas = global batch / (micro-batch x sequence), x TP x PP.

    Each data-parallel replica (TP x PP GPUs) needs at least one micro-batch of ``micro_batch``
    sequences of ``seq_len_tokens`` per optimizer step (Narayanan et al. 2021, "Efficient
    Large-Scale Language Model Training on GPU Clusters", Sec. 2: B = b x d x m with m >= 1).

    Returns GPUs (at least one replica, TP x PP).
    """
    replicas = math.floor(global_batch_tokens / max(seq_len_tokens * micro_batch, 1.0))
    return max(1.0, replicas) * tp * pp


def infeasible(res) -> list[str]:
    """One sentence per stage that does not fit in memory on its GPUs (empty when the plan is feasible)."""
    scn = res.scenario
    gpu = effective_value(scn, "hardware.gpu")
    gpu_label = CATALOG[gpu].get("label", gpu)
    out = []
    for s in res.stages:
        if res.stat(s, "fits") > 0.5:
            continue
        have = res.stat(s, "num_gpus")
        need = res.stat(s, "min_gpus")
        mem = res.stat(s, "memory_per_gpu_gb")
        name = STAGE_LABELS[s]
        if need > 0 and need > have:
            out.append(f"{name} does not fit: needs at least {need:,.0f} GPUs of this type ({gpu_label}); "
                       f"the plan gives it {have:,.0f}.")
        elif need > 0:
            out.append(f"{name} does not fit: an inference replica or the activations need "
                       f"{mem:,.1f} GB per {gpu_label}; use more tensor parallelism or a larger GPU.")
        else:
            out.append(f"{name} does not fit at any GPU count with this parallelism: as planned it needs "
                       f"{mem:,.1f} GB on each {gpu_label}; use more tensor or pipeline parallelism, ZeRO-3, "
                       f"or LoRA/QLoRA.")
    return out


def batch_warnings(res) -> list[str]:
    """Stages given more GPUs than their global batch can use (the time assumes they all work)."""
    scn = res.scenario
    out = []
    for s in res.stages:
        if s not in TRAINING_STAGES:
            continue
        g = res.stat(s, "num_gpus")
        gbt, seq, mb, tp, pp = (float(effective_value(scn, f"stages.{s}.{k}")) for k in
                                ("global_batch_tokens", "seq_len", "micro_batch", "tp", "pp"))
        most = max_data_parallel_gpus(gbt, seq, mb, tp, pp)
        if g > most:
            out.append(f"{STAGE_LABELS[s]}: {g:,.0f} GPUs are more than a global batch of {gbt:,.0f} tokens "
                       f"can use ({most:,.0f} at micro-batch {mb:,.0f} x {seq:,.0f} tokens, TP x PP "
                       f"{tp * pp:,.0f}); the time shown assumes every GPU works.")
    return out
