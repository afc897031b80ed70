"""Warnings a planner should see about a plan that fits but is doubtful (the readability issue).

Each sentence names the knob that fixes it, in the words of the schema's labels, and carries the
numbers of the stats it speaks of (tests/test_readability.py checks every claim).
"""
from __future__ import annotations

from costcore import fmt
from costcore.scenario.schema import STAGE_LABELS, effective_value


CKPT_STALL_WARN = 0.10  # checkpoint writes above this share of the run's wall time are flagged
ROLLOUT_WARN = 0.50  # an RL stage whose rollouts take more than half of its GPU-hours is flagged


def planning_warnings(res) -> list[str]:
    """What a planner should catch, each naming the knob that fixes it (the issue on readability):
    checkpoint writes as long as their interval or above 10% of the run (a run shorter than the
    interval writes one checkpoint, which a longer interval cannot spare); rollouts that take most
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
                               "per GPU" + (", or save weights only (Checkpoint type)." if full else "."))
            elif write_s >= spacing_s:
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
