"""Post-training: SFT, DPO, RL."""
import streamlit as st

from costcore import fmt
from costcore.scenario import schema
from costcore.scenario.schema import STAGE_LABELS
from pages import common

res = common.frame(
    "Post-training",
    "Post-training turns a base model into a useful one. **SFT** trains on curated examples (full "
    "fine-tuning, LoRA or QLoRA); **DPO** trains on preference pairs against a frozen reference; **RL** "
    "(PPO or GRPO) generates answers, scores them and updates the policy. SFT and DPO are cheap in GPUs "
    "but dear in labeled data; in RL, generating the rollouts is often the largest part, and it is bound by "
    "memory bandwidth rather than FLOPs (the RL section below gives its share for this plan).")

st.header(STAGE_LABELS["sft"])
if common.stage_toggle("sft"):
    p = "stages.sft."
    common.knob_columns(
        # the rank only where adapters are trained: under full fine-tuning the slider moved nothing
        [(p + "method", "Method")] + ([(p + "lora_rank", "LoRA rank", 1, 256, 1)]
                                      if schema.effective_value(common.scenario(), p + "method") != "full" else []),
        [(p + "samples", "Samples", 1000, 5_000_000, 1000, "log"), (p + "tokens_per_sample", "Tokens per sample", 64, 32768, 64, "pow2")],
        # long chain-of-thought samples were cut into the stage's 4,096-token sequences with no way to say otherwise
        [(p + "epochs", "Epochs", 0.5, 10.0, 0.5), (p + "labels", "Human-labeled samples", 0, 1_000_000, 1000, "log"),
         (p + "seq_len", "Sequence length (tokens)", 512, 131072, 512, "pow2")])
    common.stage_results("sft")

st.header(STAGE_LABELS["dpo"])
if common.stage_toggle("dpo"):
    p = "stages.dpo."
    common.knob_columns(
        [(p + "pairs", "Preference pairs", 1000, 2_000_000, 1000, "log"), (p + "method", "Method")],
        [(p + "chosen_tokens", "Chosen tokens", 64, 16384, 64, "pow2"), (p + "rejected_tokens", "Rejected tokens", 64, 16384, 64, "pow2")],
        [(p + "epochs", "Epochs", 0.5, 10.0, 0.5), (p + "reference", "Reference log-probs"),
         (p + "seq_len", "Sequence length (tokens)", 512, 131072, 512, "pow2")])
    common.stage_results("dpo")

st.header(STAGE_LABELS["rl"])
if common.stage_toggle("rl"):
    p = "stages.rl."
    common.knob_columns(
        [(p + "algorithm", "Algorithm"), (p + "steps", "Steps", 10, 5000, 10), (p + "reward", "Reward"),
         (p + "prompt_tokens", "Prompt tokens", 64, 32768, 64, "pow2")],
        [(p + "prompts_per_step", "Prompts per step", 8, 4096, 8),
         (p + "samples_per_prompt", "Completions per prompt", 1, 64, 1),
         (p + "num_gpus", "GPUs for RL (0 = sidebar value)", None, None, 1, "number"),
         (p + "rollout_batch", "Rollout batch (sequences at once per replica)", None, None, 1, "number")],
        [(p + "response_tokens", "Response tokens (average)", 128, 32768, 128, "pow2"),
         (p + "rollout_efficiency", "Rollout efficiency (of roofline)", 0.05, 1.0, 0.05),
         (p + "rollout_tp", "GPUs per rollout replica (0 = searched)", None, None, 1, "number")])
    # the models beside the policy: a GRPO user could not drop the KL reference or size the reward model and critic
    common.knob_columns([(p + "reference", "Reference model (KL term)"),
                         (p + "update_epochs", "Policy updates per batch of rollouts", 1, 8, 1)],
                        [(p + "reward_params_b", "Reward model size (billion parameters; 0 = the policy's)", None, None,
                          0.5, "number")],
                        [(p + "critic_params_b", "Critic size, PPO (billion parameters; 0 = the policy's)", None, None,
                          0.5, "number")])
    res = common.result()
    roll = res.stat("rl", "rollout_gpu_hours")
    prod = max(res.stat("rl", "productive_gpu_hours"), 1e-9)
    common.stage_results("rl", bar=False, explain=False)
    tp_dec, b_dec = res.stat("rl", "decode_replica_gpus"), res.stat("rl", "decode_batch_used")
    st.caption(f"Rollout generation takes {fmt.gpu_hours(roll)} of {fmt.gpu_hours(prod)} productive "
               f"({fmt.share(roll / prod)}): decoding reads all weights and the KV cache every token, here on replicas of "
               f"{fmt.num(tp_dec)} GPU{'s' if tp_dec != 1 else ''} generating {fmt.num(b_dec)} answers at once "
               f"(as many as the KV cache holds, up to the rollout batch).")
    common.stacked_bar(res, ["rl"], height=220)
    common.how_computed(res, "rl")
