"""Can the plan run as described? Sentences for plans that cannot, and for GPUs a batch cannot use.

Reads the kernel's stats (memory per GPU, fits, min GPUs) and the scenario;
computes no cost. An infeasible plan (a stage that does not fit in GPU memory
on the GPUs it has) has no headline total: the CLI prints the sentence where the
total would be and exits with code 3, the JSON says ``"feasible": false``, and
the app shows the sentence in place of the total.
"""
from __future__ import annotations

from costcore.scenario.schema import BY_PATH, CATALOG, STAGE_LABELS, effective_value

TRAINING_STAGES = ("pretrain", "cpt", "sft", "dpo", "rl")


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
    """Stages whose best plan leaves GPUs idle (the global batch or the layout cannot use them all),
    and FP8 asked of a GPU without FP8 tensor cores."""
    scn = res.scenario
    out = []
    for s in res.stages:
        if s not in TRAINING_STAGES or res.stat(s, "fits") < 0.5:
            continue
        g = res.stat(s, "num_gpus")
        used = res.stat(s, "plan_gpus_used")
        if 0 < used < g:
            gb = res.stat(s, "global_batch")
            out.append(f"{STAGE_LABELS[s]}: the best plan uses {used:,.0f} of the {g:,.0f} GPUs (a global batch of "
                       f"{gb:,.0f} sequences and the layout leave the rest idle); they are billed all the same.")
    out += planning_warnings(res)
    gpu = effective_value(scn, "hardware.gpu")
    if effective_value(scn, "hardware.precision") == "fp8" and \
            float(effective_value(scn, "hardware.fp8_peak_tflops")) <= float(effective_value(scn, "hardware.peak_tflops")):
        out.append(f"FP8 was chosen, but the {CATALOG[gpu].get('label', gpu)} has no FP8 tensor cores: "
                   "step times are the BF16 ones.")
    return out


CKPT_STALL_WARN = 0.10  # checkpoint writes above this share of the run's wall time are flagged
ROLLOUT_WARN = 0.50  # an RL stage whose rollouts take more than half of its GPU-hours is flagged


def planning_warnings(res) -> list[str]:
    """What a planner should catch, each naming the knob that fixes it (the issue on readability):
    checkpoint writes as long as their interval or above 10% of the run; rollouts that take most
    of an RL stage (evaluation is decoding by nature and is not flagged).

    Every number in a sentence is the stat it names (tests/test_readability.py checks each claim).
    """
    from costcore import fmt
    out = []
    for s in res.stages:
        name = STAGE_LABELS[s]
        write_s = res.stat(s, "ckpt_write_s")
        spacing_s = res.stat(s, "ckpt_spacing_h") * 3600.0
        if write_s > 0 and spacing_s > 0:
            share = write_s / spacing_s
            if write_s >= spacing_s:
                out.append(f"{name}: writing one checkpoint takes {fmt.duration_s(write_s)}, no less than the "
                           f"{fmt.duration_s(spacing_s)} between checkpoints; raise Hours between checkpoints "
                           "or the Checkpoint write speed per GPU.")
            elif share > CKPT_STALL_WARN:
                out.append(f"{name}: checkpoint writes stall the run {fmt.num(share * 100)}% of its time "
                           f"({fmt.duration_s(write_s)} every {fmt.duration_s(spacing_s)}); raise Hours between "
                           "checkpoints or the Checkpoint write speed per GPU.")
        rollout_h, total_h = res.stat(s, "rollout_gpu_hours"), res.stat(s, "gpu_hours")
        if s == "rl" and total_h > 0 and rollout_h / total_h > ROLLOUT_WARN:
            out.append(f"{name}: rollouts take {fmt.num(rollout_h / total_h * 100)}% of the stage's GPU-hours; raise the Rollout "
                       "batch or Rollout efficiency, or generate fewer Completions per prompt.")
    return out
