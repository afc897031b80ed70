"""Can the plan run as described? Sentences for plans that cannot, and for GPUs a batch cannot use.

Reads the kernel's stats (memory per GPU, fits, min GPUs) and the scenario;
computes no cost. An infeasible plan (a stage that does not fit in GPU memory
on the GPUs it has) has no headline total: the CLI prints the sentence where the
total would be and exits with code 3, the JSON says ``"feasible": false``, and
the app shows the sentence in place of the total.
"""
from __future__ import annotations

from costcore.fmt import words_list
from costcore.scenario.schema import (BY_PATH, CATALOG, STAGE_LABELS, effective_value, global_batch_unit,
                                     pinned_layout_words, refused_pins)

TRAINING_STAGES = ("pretrain", "cpt", "mm_align", "mm_cpt", "mm_tune", "sft", "dpo", "rl")


def infeasible(res, fewest_any_layout=None) -> list[str]:
    """One sentence per stage that does not fit in memory on its GPUs (empty when the plan is feasible).

    ``fewest_any_layout(stage)``: the fewest GPUs over every layout (api.Result.fewest_gpus_any_layout), for
    the sentence of a stage that a pinned layout keeps from fitting; None: not said."""
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
        searched = _any_layout(res, s, need, fewest_any_layout) if 0 < need and need > have else None
        impossible = _impossible_pin(res, s, name) or _replica_splits_heads(res, s)
        if impossible:
            out.append(impossible)
        elif searched:
            pinned, fewest = searched
            enough = f"{fewest:,.0f} GPU{'s' if fewest != 1 else ''} " + ("are" if fewest != 1 else "is")
            out.append(f"{name} does not fit on its {have:,.0f} GPU{'s' if have != 1 else ''}: with its pinned "
                       f"{pinned}, it needs at least {need:,.0f} GPUs of this type ({gpu_label}); with the layout "
                       f"searched, {enough} enough.")
        elif need > 0 and need > have:
            out.append(f"{name} does not fit: needs at least {need:,.0f} GPUs of this type ({gpu_label}); "
                       f"the plan gives it {have:,.0f}.{_fewer_bits(scn, s)}")
        elif need > 0:
            pin = _pinned_replica(scn, s)
            setting = BY_PATH[PIN_KEYS[s]].label.split(": ", 1)[-1] if pin else ""  # without the stage's name
            hint = (f" (its decoding replica is pinned at {pin:,.0f} GPU{'s' if pin != 1 else ''}: set \u201c{setting}"
                    f"\u201d to 0 for the fewest that hold the weights)") if pin else ""
            out.append(f"{name} does not fit: an inference replica or the activations need "
                       f"{mem:,.1f} GB per {gpu_label}; use more tensor parallelism or a larger GPU{hint}.")
        elif mem <= res.stat(s, "usable_memory_gb"):
            out.append(_cannot_lay_out(res, s, name, mem))
        else:
            out.append(f"{name} does not fit at any GPU count with this parallelism: as planned it needs "
                       f"{mem:,.1f} GB on each {gpu_label}; {_memory_fix(res, s)}.")
    return out


def _fewer_bits(scn, stage: str) -> str:
    """For an evaluation whose replica needs more GPUs than it has: the weight bits that would shrink it (a QLoRA
    run's 70B on one GPU was told only that evaluation needs 4)."""
    if stage != "eval":
        return ""
    bits = float(effective_value(scn, "stages.eval.weight_bits"))
    fewer = [f"{b}" for b in (8, 4) if b < bits]
    if not fewer:
        return ""
    label = BY_PATH["stages.eval.weight_bits"].label.split(": ", 1)[-1].lower()
    return f" Weights of {' or '.join(fewer)} bits ({label}: {bits:g} now) would need fewer GPUs."


def _memory_fix(res, stage: str) -> str:
    """What would shrink the plan's memory, from its largest part: activations (a smaller micro-batch, recompute)
    or the model's states (more tensor or pipeline parallelism, ZeRO-3; LoRA or QLoRA where a stage offers them).
    A pre-training plan whose activations were 90% of its 814 GB was told to use ZeRO-3 or LoRA."""
    parts = res.plan(stage)["memory_gb"]
    if parts["activations"] >= max(parts["weights"] + parts["grads"] + parts["optimizer"], parts["buffers"]):
        return ("its activations are the largest part: use a smaller micro-batch, activation recompute (selective "
                "or full), or more tensor, pipeline or context parallelism")
    lora = " or LoRA/QLoRA" if f"stages.{stage}.method" in BY_PATH else ""
    return f"use more tensor or pipeline parallelism, ZeRO-3{lora}"


def _impossible_pin(res, stage: str, name: str) -> str | None:
    """The sentence of a pinned degree no layout can take, whatever the memory (None: none is): more pipeline
    stages than layers, a tensor degree that splits an attention head, an expert degree that splits the experts
    unevenly. Megatron-LM refuses each (its arguments check); the planner used to price the fallback plan, or
    blame memory."""
    scn = res.scenario
    pin = {k: float(effective_value(scn, f"stages.{stage}.{k}") or 0) for k in ("pp", "tp", "ep")
           if f"stages.{stage}.{k}" in BY_PATH}
    layers, (heads, kv) = res.stat(stage, "model_layers"), _heads(res, stage)
    experts = float(effective_value(scn, "model.experts") or 0)
    gpus = float(res.stat(stage, "num_gpus"))
    need = max(pin.get("tp", 0), 1.0) * max(pin.get("pp", 0), 1.0)
    refused = refused_pins(pin, heads, layers, experts, kv)
    if need > gpus:  # TP 64 on 8 GPUs was blamed on the heads, offering TP 16 and 32 (more GPUs than it has): the
        if not refused:  # GPU count is the first thing wrong; a pin the model takes has its own sentence (it sets
            return None  # the GPU count, and the layout searched may need fewer)
        named = [f"{words} {pin[k]:,.0f}" for k, words in (("tp", "tensor parallelism"), ("pp", "pipeline parallelism"))
                 if pin.get(k, 0) > 1]
        one = len(named) == 1
        return (f"{name} cannot be laid out: its pinned {' x '.join(named)} needs {need:,.0f} GPUs and it has "
                f"{gpus:,.0f}; pin {'a smaller degree' if one else 'smaller degrees'}, give the stage more GPUs, or "
                f"set {'it' if one else 'them'} to 0 (searched).")
    if not refused:
        return None
    if refused[0] == "pp":
        return (f"{name} cannot be laid out: its pinned pipeline parallelism of {pin['pp']:,.0f} stages needs at "
                f"least {pin['pp']:,.0f} layers and this model has {layers:,.0f}; pin fewer pipeline stages or set it "
                "to 0 (searched).")
    if refused[0] == "tp":
        return (f"{name} cannot be laid out: its pinned tensor parallelism of {pin['tp']:,.0f} "
                f"{_split_words(pin['tp'], heads, kv)}; pin {_tp_choices(heads, kv, gpus)}, or set it to 0 (searched).")
    return (f"{name} cannot be laid out: its pinned expert parallelism of {pin['ep']:,.0f} does not divide the "
            f"model's {experts:,.0f} experts evenly; pin a divisor of {experts:,.0f}, or set it to 0 (searched).")


def _heads(res, stage: str) -> tuple[float, float]:
    """(attention heads, key/value heads) of the stage's model: as stated, else as formulas.model_shape derives
    them."""
    from costcore.engine.formulas import model_shape
    heads, kv = (float(effective_value(res.scenario, f"model.{k}") or 0) for k in ("heads", "kv_heads"))
    shape = model_shape(0.0, res.stat(stage, "model_layers"), res.stat(stage, "model_hidden"), heads, kv, 0.0)
    return float(shape[2]), float(shape[3])


def _split_words(tp: float, heads: float, kv: float) -> str:
    """Why a tensor-parallel degree cannot split this attention (formulas.tp_splits_heads), in words."""
    if heads % tp:
        return f"does not divide the model's {heads:,.0f} attention heads (a head is not split across GPUs)"
    return (f"neither divides the model's {kv:,.0f} key/value heads nor is a multiple of them (grouped-query "
            "attention splits or copies whole key/value heads)")


def _tp_choices(heads: float, kv: float, gpus: float) -> str:
    """The tensor-parallel degrees up to 64 and the GPUs that split this attention, as "1, 2 or 4"."""
    from costcore.engine.formulas import tp_splits_heads
    fits = [f"{d}" for d in range(1, int(min(heads, 64, max(gpus, 1))) + 1) if not tp_splits_heads(d, heads, kv)]
    return f"{', '.join(fits[:-1])} or {fits[-1]}" if len(fits) > 1 else fits[0]


def _replica_splits_heads(res, stage: str) -> str | None:
    """The sentence of a pinned decoding replica (RL rollouts, evaluation) whose tensor-parallel part splits the
    attention heads (formulas.replica_tp, tp_splits_heads): the kernel marks the stage as not runnable."""
    from costcore.engine.formulas import replica_tp, tp_splits_heads
    pin = _pinned_replica(res.scenario, stage)
    if pin <= 0:
        return None
    heads, kv = _heads(res, stage)
    tp = float(replica_tp(pin, float(effective_value(res.scenario, "hardware.gpus_per_node"))))
    if not tp_splits_heads(tp, heads, kv):
        return None
    setting = BY_PATH[PIN_KEYS[stage]].label.split(": ", 1)[-1]
    return (f"{STAGE_LABELS[stage]} cannot decode on its pinned replica of {pin:,.0f} GPUs: tensor parallelism of "
            f"{tp:,.0f} {_split_words(tp, heads, kv)}; set “{setting}” to "
            f"{_tp_choices(heads, kv, res.stat(stage, 'num_gpus'))}, or to 0 for the fewest that hold the weights.")


def _cannot_lay_out(res, stage: str, name: str, mem: float) -> str:
    """The sentence of a stage that memory does not stop but its pinned layout does: a 168B sweep point of the
    DeepSeek-V3 preset has 15 layers for its 16 pinned pipeline stages, and was told it "needs 9.4 GB on each
    H800 80GB; use more ... pipeline parallelism"."""
    scn = res.scenario
    said = words_list(pinned_layout_words(scn, stage)) or "layout"
    return (f"{name} cannot be laid out with its pinned {said} on these GPUs (memory is not the limit: "
            f"{mem:,.1f} of {res.stat(stage, 'usable_memory_gb'):,.1f} GB); unpin it to let the planner search.")


PIN_KEYS = {"rl": "stages.rl.rollout_tp", "eval": "stages.eval.decode_tp"}


def _pinned_replica(scn, stage: str) -> float:
    """The GPUs a user pinned for the stage's decoding replica (0: not pinned, or not a decoding stage)."""
    return float(effective_value(scn, PIN_KEYS[stage])) if stage in PIN_KEYS else 0.0


def _any_layout(res, stage: str, need: float, fewest_any_layout):
    """(pinned layout in words, fewest GPUs over every layout) when the stage pins part of its layout and
    another layout needs fewer GPUs than ``need``; else None. A pinned TP 8 made a 70B QLoRA that fits one
    GPU read "needs at least 8 GPUs" (issue 14: the minimum is the true one over all plans)."""
    said = pinned_layout_words(res.scenario, stage)
    if not said or fewest_any_layout is None:
        return None
    fewest = fewest_any_layout(stage)
    if not 0 < fewest < need:
        return None
    return words_list(said), fewest


# What one epoch of a fine-tuning or multimodal stage holds: (input key, its name in a sentence).
_DATA_KEYS = {"sft": ("samples", "samples"), "dpo": ("pairs", "preference pairs"), "mm_align": ("samples", "samples"),
              "mm_tune": ("samples", "samples"), "mm_cpt": ("samples", "samples")}


def _batch_over_data(res, stage: str) -> list[str]:
    """A global batch larger than the stage's data: an epoch is then a fraction of one optimizer step,
    which the planner times pro rata (the tokens at the plan's rate) but no run can take."""
    if stage not in _DATA_KEYS:
        return []
    key, words = _DATA_KEYS[stage]
    n, gb = float(effective_value(res.scenario, f"stages.{stage}.{key}")), res.stat(stage, "global_batch")
    if gb <= n:
        return []
    return [f"{STAGE_LABELS[stage]}: the global batch of {gb:,.0f} {global_batch_unit(stage)} is larger than its "
            f"{n:,.0f} {words}, so an epoch is less than one optimizer step (timed pro "
            f"rata); set the Global batch to at most {n:,.0f}."]


def fp8_timed_as_bf16(scn: dict) -> bool:
    """FP8 chosen on a GPU without FP8 tensor cores (its FP8 peak no higher than its BF16 one): the step is timed
    at BF16 speed."""
    return effective_value(scn, "hardware.precision") == "fp8" and \
        float(effective_value(scn, "hardware.fp8_peak_tflops")) <= float(effective_value(scn, "hardware.peak_tflops"))


def batch_warnings(res) -> list[str]:
    """Stages whose best plan leaves GPUs idle (the global batch or the layout cannot use them all),
    and FP8 asked of a GPU without FP8 tensor cores (a batch too thin for busy GPUs: analysis.warnings)."""
    scn = res.scenario
    out = []
    for s in res.stages:
        if s not in TRAINING_STAGES or res.stat(s, "fits") < 0.5:
            continue
        g = res.stat(s, "num_gpus")
        used = res.stat(s, "plan_gpus_used")
        if 0 < used < g:
            out.append(f"{STAGE_LABELS[s]}: the best plan uses {used:,.0f} of the {g:,.0f} GPUs (a global batch of "
                       f"{res.stat(s, 'global_batch'):,.0f} {global_batch_unit(s)} and the layout leave the rest "
                       "idle); they are billed all the same.")
        out += _batch_over_data(res, s)
    gpu = effective_value(scn, "hardware.gpu")
    if fp8_timed_as_bf16(scn):
        out.append(f"FP8 was chosen, but the {CATALOG[gpu].get('label', gpu)} has no FP8 tensor cores: "
                   "step times are the BF16 ones.")
    return out

