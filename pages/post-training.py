"""Post-training: SFT, DPO, RL."""
import streamlit as st

from costcore import fmt
from costcore.schema import STAGE_LABELS
from pages import common

res = common.frame(
    "Post-training",
    "Post-training turns a base model into a useful one. **SFT** trains on curated examples (full "
    "fine-tuning, LoRA or QLoRA); **DPO** trains on preference pairs against a frozen reference; **RL** "
    "(PPO or GRPO) generates answers, scores them and updates the policy. SFT and DPO are cheap in GPUs "
    "but dear in labeled data; RL is dominated by generating rollouts, which is bound by memory "
    "bandwidth rather than FLOPs.")

st.header(STAGE_LABELS["sft"])
if common.stage_toggle("sft"):
    p = "stages.sft."
    c1, c2, c3 = st.columns(3)
    with c1:
        common.knob(p + "method", "Method")
        common.knob(p + "lora_rank", "LoRA rank", 1, 256, 1)
    with c2:
        common.knob(p + "samples", "Samples", 1000, 5_000_000, 1000)
        common.knob(p + "tokens_per_sample", "Tokens per sample", 64, 32768, 64)
    with c3:
        common.knob(p + "epochs", "Epochs", 0.5, 10.0, 0.5)
        common.knob(p + "labels", "Human-labeled samples", 0, 1_000_000, 1000)
    res = common.result()
    common.stage_metrics(res, "sft")
    common.show_checks(res, ["sft"])
    common.stacked_bar(res, ["sft"], height=220)
    common.how_computed(res, "sft")

st.header(STAGE_LABELS["dpo"])
if common.stage_toggle("dpo"):
    p = "stages.dpo."
    c1, c2, c3 = st.columns(3)
    with c1:
        common.knob(p + "pairs", "Preference pairs", 1000, 2_000_000, 1000)
        common.knob(p + "method", "Method")
    with c2:
        common.knob(p + "chosen_tokens", "Chosen tokens", 64, 16384, 64)
        common.knob(p + "rejected_tokens", "Rejected tokens", 64, 16384, 64)
    with c3:
        common.knob(p + "epochs", "Epochs", 0.5, 10.0, 0.5)
        common.knob(p + "reference", "Reference log-probs")
    res = common.result()
    common.stage_metrics(res, "dpo")
    common.show_checks(res, ["dpo"])
    common.stacked_bar(res, ["dpo"], height=220)
    common.how_computed(res, "dpo")

st.header(STAGE_LABELS["rl"])
if common.stage_toggle("rl"):
    p = "stages.rl."
    c1, c2, c3 = st.columns(3)
    with c1:
        common.knob(p + "algorithm", "Algorithm")
        common.knob(p + "steps", "Steps", 10, 5000, 10)
        common.knob(p + "reward", "Reward")
    with c2:
        common.knob(p + "prompts_per_step", "Prompts per step", 8, 4096, 8)
        common.knob(p + "samples_per_prompt", "Samples per prompt", 1, 64, 1)
        common.knob(p + "num_gpus", "GPUs for RL (0 = sidebar value)", widget="number", step=1)
    with c3:
        common.knob(p + "response_tokens", "Response tokens", 128, 32768, 128)
        common.knob(p + "rollout_efficiency", "Rollout efficiency (of roofline)", 0.05, 1.0, 0.05)
    res = common.result()
    common.stage_metrics(res, "rl")
    common.show_checks(res, ["rl"])
    roll = res.stat("rl", "rollout_gpu_hours")
    prod = max(res.stat("rl", "productive_gpu_hours"), 1e-9)
    st.caption(f"Rollout generation takes {fmt.gpu_hours(roll)} of {fmt.gpu_hours(prod)} productive "
               f"({roll / prod:.0%}): decoding reads all weights and the KV cache every token.")
    common.stacked_bar(res, ["rl"], height=220)
    common.how_computed(res, "rl")
