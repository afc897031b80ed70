"""Warnings a planner should see about a plan that fits but is doubtful (the readability issue).

Each sentence names the knob that fixes it, in the words of the schema's labels, and carries the
numbers of the stats it speaks of (tests/test_readability.py checks every claim).
"""
from __future__ import annotations

from costcore import fmt
from costcore.scenario.schema import STAGE_LABELS, effective_value, global_batch_unit


CKPT_STALL_WARN = 0.10  # checkpoint writes above this share of the run's wall time are flagged
# A stage whose best plan reaches less than this MFU (its own, before the sustained share) while its global
# batch holds fewer sequences than it has GPUs is told that its GPUs outnumber its batch: the plan fills
# them with tensor and pipeline parallelism on micro-batches too small to keep them busy.
THIN_BATCH_MFU = 0.15
# an RL stage whose rollouts take more than three quarters of its productive GPU-hours is flagged (a planning
# heuristic: a GRPO run's generation commonly takes over half its time, so half flagged the shipped presets)
ROLLOUT_WARN = 0.75


def _thin_batch(res, s: str) -> bool:
    """The stage's MFU comes from its plan (not set by hand), whose own MFU is below THIN_BATCH_MFU with fewer
    sequences per step than GPUs, and every GPU busy (idle ones have their own warning: engine.feasibility)."""
    mfu, gb, g = res.stat(s, "plan_mfu"), res.stat(s, "global_batch"), res.stat(s, "num_gpus")
    return (0 < mfu < THIN_BATCH_MFU and 0 < gb < g and res.stat(s, "plan_gpus_used") >= g
            and res.stat(s, "fits") > 0.5 and res.uses_layout(s))


# a fine-tuning stage's longest unit of data (tokens), as its sentence names it: SFT samples, DPO responses
_LONGEST = {"sft": (("tokens_per_sample",), "samples"), "dpo": (("chosen_tokens", "rejected_tokens"), "responses")}


def _longer_than_sequence(res, s: str) -> list[str]:
    """SFT samples (DPO responses) longer than the stage's sequence length: the kernel trains their tokens as
    pieces of that length (attention and activation memory at it), which cut a 16,000-token chain of thought
    into 4,096-token pieces and its SFT about 20% cheaper, with no word said."""
    if s not in _LONGEST:
        return []
    keys, words = _LONGEST[s]
    longest = max(float(effective_value(res.scenario, f"stages.{s}.{k}")) for k in keys)
    seq = float(effective_value(res.scenario, f"stages.{s}.seq_len"))
    if longest <= seq:
        return []
    return [f"{STAGE_LABELS[s]}: its {words} of {longest:,.0f} tokens are longer than its Sequence length of "
            f"{seq:,.0f} tokens, so they train as pieces of {seq:,.0f} (attention and activation memory at that "
            f"length); raise the Sequence length to {longest:,.0f} (Post-training page) to train them whole."]


def planning_warnings(res) -> list[str]:
    """What a planner should catch, each naming the knob that fixes it (the issue on readability):
    checkpoint writes as long as their interval or above 10% of the run (a run shorter than the
    interval writes one checkpoint, which a longer interval cannot spare); a global batch too thin for
    the stage's GPUs (MFU below 15% with fewer sequences than GPUs); rollouts that take most
    of an RL stage (evaluation is decoding by nature and is not flagged).

    Every number in a sentence is the stat it names (tests/test_readability.py checks each claim).
    """
    out = []
    for s in res.stages:
        name = STAGE_LABELS[s]
        write_s = res.stat(s, "ckpt_write_s")
        spacing_s = res.stat(s, "ckpt_spacing_h") * 3600.0
        if write_s > 0 and spacing_s > 0:
            share = write_s / spacing_s
            if res.stat(s, "ckpt_count") <= 1.0:  # a run no longer than the interval writes only its final save
                if share > CKPT_STALL_WARN:
                    full = effective_value(res.scenario, f"stages.{s}.ckpt_type") == "full"
                    out.append(f"{name}: writing its one checkpoint, the final save, takes {fmt.duration_s(write_s)} "
                               f"against {fmt.duration_s(spacing_s)} of training; raise the Checkpoint write speed "
                               "per GPU (Checkpoints page)"
                               + (", or save weights only (Checkpoint contents)." if full else "."))
            elif write_s >= spacing_s:
                out.append(f"{name}: writing one checkpoint takes {fmt.duration_s(write_s)}, no less than the "
                           f"{fmt.duration_s(spacing_s)} between checkpoints; raise Hours between checkpoints "
                           "or the Checkpoint write speed per GPU (Checkpoints page).")
            elif share > CKPT_STALL_WARN:
                out.append(f"{name}: checkpoint writes stall the run {fmt.num(share * 100)}% of its time "
                           f"({fmt.duration_s(write_s)} every {fmt.duration_s(spacing_s)}); raise Hours between "
                           "checkpoints or the Checkpoint write speed per GPU (Checkpoints page).")
        if _thin_batch(res, s):
            out.append(f"{name}: a global batch of {res.stat(s, 'global_batch'):,.0f} {global_batch_unit(s)} spread over "
                       f"{res.stat(s, 'num_gpus'):,.0f} GPUs keeps its MFU at {fmt.num(res.stat(s, 'mfu') * 100)}%; "
                       "fewer GPUs for this stage, or a larger Global batch, would raise it.")
        # of the productive GPU-hours, as the Post-training page's caption counts it (the billed hours add failures
        # and idle time to both sides: 60.4% there stood next to the caption's 95.7%)
        rollout_h, prod_h = res.stat(s, "rollout_gpu_hours"), res.stat(s, "productive_gpu_hours")
        if s == "rl" and prod_h > 0 and rollout_h / prod_h > ROLLOUT_WARN:
            out.append(f"{name}: rollouts take {fmt.num(rollout_h / prod_h * 100)}% of the stage's productive GPU-hours; "
                       "raise the Rollout batch, the Rollout efficiency or the GPUs per rollout replica, or generate "
                       "fewer Completions per prompt (Post-training page).")
        out += _longer_than_sequence(res, s)
        if s == "rl" and effective_value(res.scenario, "stages.rl.algorithm") == "grpo" \
                and float(effective_value(res.scenario, "stages.rl.samples_per_prompt")) < 2:
            # GRPO's advantage is a completion's reward against its group's mean (Shao et al. 2024, Sec. 4.1.2)
            out.append(f"{name}: GRPO with one completion per prompt has no group to compare it with, so every "
                       "advantage is zero and nothing is learned; use 2 or more Completions per prompt (DeepSeekMath "
                       "used 64), or PPO.")
    return out
