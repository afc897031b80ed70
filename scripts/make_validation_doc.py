"""Regenerate docs/validation.md from the core (tests check it is current)."""
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from costcore.validation import runs as validation  # noqa: E402
from costcore.validation import calibration, megatron  # noqa: E402
from costcore.cli.validate_levers import markdown_table  # noqa: E402
from costcore.scenario.schema import BY_PATH  # noqa: E402


def megatron_text() -> str:
    df = megatron.table()
    lines = ["| run | published | predicted | ratio | micro-batch | interleave | source |", "|---|---|---|---|---|---|---|"]
    for _, r in df.iterrows():
        unit = "s/iteration" if r["metric"] == "iteration_s" else "TFLOP/s/GPU"
        lines.append(f"| {r['name']} | {r['published']:.4g} {unit} | {r['predicted']:.4g} | {r['ratio']:.3f} | "
                     f"{r['micro_batch']} | {r['interleave']} | {r['source']} |")
    return ("\n".join(lines) + f"\n\nWorst error **{df.error.max():.1%}**, median {df.error.median():.1%} "
            "(tests/test_megatron.py holds each row within 10%). In-sample: these 18 rows fit "
            + ", ".join(f"`efficiency.{k}` = {BY_PATH['efficiency.' + k].default:g}"
                        for k in ("gemm_half_dim", "memory_traffic", "collective_efficiency"))
            + f", with the 2021-22 stack pinned in each scenario (attention at {megatron.ATTENTION_EFFICIENCY} "
              "of the matmul efficiency: no FlashAttention; gradient reduction not overlapped; no ZeRO). "
              "The GEMM half-efficiency size holds on Selene's A100 80GB; on other GPUs it scales with their "
              "ops:byte ratio (peak / HBM bandwidth; costcore/engine/layout.py gemm_half_dim_for: 606 on an H100 SXM).")


def far_text(fold: float = 1.4) -> str:
    """The out-of-sample runs (leave-one-out and holdout) off by more than ``fold``, from the fit itself."""
    loo = calibration.leave_one_out()
    r = {**loo["ratios"], **loo["holdout"]}
    far = sorted((k for k, v in r.items() if max(v, 1 / v) > fold), key=lambda k: r[k])
    fast = [f"{k} {r[k]:.2f}" for k in far if r[k] < 1]
    slow = [f"{k} {r[k]:.2f}" for k in far if r[k] > 1]
    return (f"Out of sample, {len(far)} of {len(r)} runs are off by more than {fold:g}x: predicted too fast "
            f"{', '.join(fast) or 'none'}; too slow {', '.join(slow) or 'none'}.")


def guanaco_dequant_share() -> float:
    """Share of the Guanaco 65B run's step compute (forward and backward, recompute apart) that is the NF4
    dequantization (layout terms ``dequant_s`` / ``compute_s``)."""
    from costcore import api
    from costcore.validation import finetune
    plan = api.estimate(finetune.finetune_runs()["guanaco-65b"]["scenario"]).plan("sft")
    return plan["compute_s"]["dequantization"] / plan["time_s"]["compute"]


def deepseek_preset_plan_ratio() -> float:
    """Predicted / published of the DeepSeek-V3 run with the pre-training plan of presets/moe-deepseek-v3.yaml
    pinned (the report's TP 1, PP 16, EP 64, DualPipe), under the fitted knobs."""
    import copy

    import yaml

    from costcore import api
    plan = yaml.safe_load((ROOT / "presets" / "moe-deepseek-v3.yaml").read_text())["stages"]["pretrain"]["plan"]
    name, scn, basis, pub, _ = next(r for r in calibration.runs() if r[0] == "DeepSeek-V3")
    scn = copy.deepcopy(scn)
    scn["stages"]["pretrain"]["plan"] = plan
    scn["efficiency"] = dict(calibration.fit()[0][1])
    return validation.predicted_figure(api.estimate(scn), basis) / pub


def schedule_search_text() -> str:
    """How the MoE runs move when the search may take DualPipe (``schedule: search``), from the fit itself."""
    r = calibration.schedule_search_summary()
    moved = [f"{n} {a:.2f} to {b:.2f}" for n, a, b in r["moved"]]
    return (f"With `schedule: search` the plan search may take DualPipe; on the {r['runs']} public MoE runs it "
            f"does so for {len(moved)} ({', '.join(moved)}; predicted / published, default to searched) and keeps "
            f"1F1B for {', '.join(r['kept']) or 'none'}. Closer to the published time: "
            f"{', '.join(r['closer']) or 'none'} (DeepSeek used DualPipe for V3 and its own all-to-all overlap for "
            f"V2); further: {', '.join(r['further']) or 'none'}. The default stays 1F1B; a stage opts in.")


def loo_text() -> str:
    loo = calibration.leave_one_out()
    worst = sorted(loo["ratios"].items(), key=lambda kv: -abs(math.log(kv[1])))[:6]
    best = calibration.fit()[0][1]
    hold = ", ".join(f"{n} {r:.2f}" for n, r in loo["holdout"].items())
    return (f"Fitted on the {loo['runs']} runs of the calibration split: "
            + ", ".join(f"`efficiency.{k}` = {v:g}" for k, v in best.items())
            + f" (grid in costcore/validation/calibration.py). Leave-one-out (refit without the run, predict it): "
            f"median error **{loo['median_error']:.1%}**, worst **{loo['worst_fold']:.2f}x**; largest misses: "
            + ", ".join(f"{n} {r:.2f}" for n, r in worst)
            + f". Holdout split (never fitted on): {hold}; median {loo.get('holdout_median_error', 0):.1%}, worst "
            f"{loo.get('holdout_worst_fold', 0):.2f}x. The issue's bar (median 10%, worst 1.4x) is "
            f"**{'met' if loo['median_error'] <= 0.10 and loo['worst_fold'] <= 1.4 else 'missed'}** (leave-one-out). "
            + residual_text() + "\n\n"
            f"Error band: P10 = model x {math.exp(loo['band_log_p10']):.2f}, P90 = model x "
            f"{math.exp(loo['band_log_p90']):.2f} (the 10th/90th percentiles of ln(published / predicted) over the "
            f"leave-one-out predictions; costcore/data/calibration.yaml). On the holdout runs it holds "
            f"{loo.get('holdout_band_coverage', 0):.0%} (target 70-90%; {len(loo.get('holdout', {}))} runs). "
            + stage_bands_text())


def residual_text() -> str:
    """What the out-of-sample residuals follow: each input's correlation, and the scatter within families."""
    r = calibration.residual_structure()
    n_in, chance = len(r["features"]), r["chance_r"]
    passing = [f"{k} ({v:+.2f})" for k, v in r["features"] if abs(v) > chance]
    corr = ", ".join(f"{k} {v:+.2f}" for k, v in r["features"])
    verdict = (f"{len(passing)} of them {'passes' if len(passing) == 1 else 'pass'} it: {', '.join(passing)}"
               if passing else "none of them passes it")
    above = r["family_median_error"] > 0.10
    return (f"What is left follows the inputs weakly: over the {r['runs']} out-of-sample residuals "
            f"ln(published / predicted) (positive: the planner comes out faster than the published time), the "
            f"correlation with each of {n_in} inputs ({corr}; "
            f"calibration.residual_structure) is set against the |r| = {chance:.2f} that chance alone passes 1 time "
            f"in 20 with {r['runs']} runs, which about {n_in / 20:.1f} of {n_in} unrelated inputs would pass; "
            f"{verdict}. Nor is it one efficiency per team: in the "
            f"{r['families']} families of runs one team published together ({r['family_runs']} runs; "
            "costcore/data/run_families.yaml), the residuals scatter around their family's mean by a median of "
            f"{r['family_median_error']:.0%} (worst {r['family_worst_fold']:.2f}x), so a per-team efficiency, could "
            f"the planner know it, would still leave a median error {'above' if above else 'within'} the bar's 10%.")


def stage_bands_text() -> str:
    """The bands of the stages the pre-training runs do not speak for, from their own runs (sections 4, 5)."""
    words = {"post_training": "SFT, DPO and RL", "multimodal": "the multimodal phases"}
    runs = {"post_training": "fine-tuning, preference and RL runs of section 4",
            "multimodal": "vision-language runs of section 5"}
    parts = [f"{words[f]} carry P10 = model x {math.exp(b['band_log_p10']):.2f}, P90 = model x "
             f"{math.exp(b['band_log_p90']):.2f}, the same percentiles over the {b['runs']} {runs[f]} (none fitted "
             f"on; by leave-one-out the band holds {b['loo_coverage']:.0%} of them)"
             for f, b in calibration.stage_bands().items()]
    return "The pre-training runs do not speak for the other stages: " + "; ".join(parts) + "."


def render() -> str:
    from costcore.validation.multimodal import bar_text, multimodal_table
    mm = multimodal_table()
    parts = ["# Validation", "",
             "Generated by `python scripts/make_validation_doc.py`. The compute model is the job layout of "
             "`costcore/engine/layout.py`: each training stage's step time is built from named terms "
             "(matmuls at a size-dependent GEMM efficiency, attention, memory-bound work, TP/CP/EP/DP/ZeRO "
             "collectives, pipeline bubble, recompute, optimizer step) for the fastest plan that fits, searched.",
             "",
             "## 1. Megatron-LM on Selene, plans pinned as published", "",
             megatron_text(), "",
             "## 2. Public production runs, defaults only (parameters, tokens, sequence length, GPU type and count)",
             "",
             "A production run sustains less than the modelled step rate of the best plan (stragglers, data "
             "loading, evaluation pauses, power-capped clocks, less tuned plans). `efficiency.sustained_fraction` "
             "says how much. Modern stacks also hide the tensor-parallel collectives behind the layer's matmuls, "
             "which Megatron-LM 2021-22 did not: `efficiency.tp_overlap` says what share. Both are fitted on these "
             "runs (`overlap_contention` is searched too).", "",
             loo_text(), "",
             "### Reference runs (`costcore/data/published_runs.csv`)", "",
             markdown_table(validation.validation_table()), "",
             "### Other public runs (`costcore/data/extra_runs.csv`, with the split column)", "",
             markdown_table(validation.validation_table(dataset="extra"), dataset="extra"), "",
             "Known gaps: small dense models on Hopper at large scale are predicted too fast (Llama-3-8B, "
             "Llama-3.1-8B: the model-card hours imply ~20% MFU, the model ~35%; Phi-3-small and Phi-3.5-mini, "
             "whose card times may include post-training); fine-grained MoE (DeepSeek-V2, V3) is predicted too "
             "slow: their rows carry the published node- and device-limited routing (at most 4 and 3 nodes or "
             "devices per token), but defaults only means no DualPipe (a stage may pin `schedule: dualpipe`; "
             f"the DeepSeek-V3 preset pins it with the report's plan, which puts the run at "
             f"{deepseek_preset_plan_ratio():.2f}x), and the "
             "expert GEMMs run at the efficiency of their small token counts. " + schedule_search_text() + " "
             + far_text(), "",
             "## 3. With each run's published throughput", "",
             "Tokens/s/GPU when published, else MFU, else hardware TFLOP/s/GPU (recomputation included, "
             "converted with the stage's recompute mode): checks the arithmetic around the compute model.", "",
             markdown_table(validation.validation_table(throughput=True), throughput=True), "",
             "## 4. Public fine-tuning and preference runs (`costcore/data/finetune_runs.yaml`), defaults only", "",
             "Each run as its source describes it (model, GPUs, method, data, batch); the planner's training "
             "time is one epoch at the sustained step rate times the epochs (SFT), or the whole RL stage: "
             "rollouts, reward, reference and critic passes and policy updates (PPO). Nothing is fitted on them. "
             "Issue 15's bar is Alpaca 7B and Guanaco 65B within 25% of their published time: **missed**. "
             "The 2023 stacks behind the full fine-tunes (Hugging Face Trainer with FSDP, no FlashAttention) "
             "ran far below the step model's tuned Megatron-style rate, and the token counts are assumptions "
             "where the sources give none. Guanaco 65B misses the other way, predicted too slow: its 24 h "
             "covers about 30,000 sequences of unpublished length (400 tokens assumed), the step model puts "
             "a one-sequence micro-batch of 400 tokens at about a third of the A6000's peak (the GEMM "
             "efficiency curve, fitted on Selene's large matmuls, penalises a short dimension), and the NF4 "
             f"dequantization, timed from its bytes, is {guanaco_dequant_share():.0%} of the step's compute. Three community "
             "reruns of the Alpaca script (tatsu-lab/stanford_alpaca issues #168, #170 and #32) show how much "
             "the stack of the day weighed: with Hugging Face transformers main two weeks after the release, "
             "the README's command took 1.32 h on 4 A100 80GB and about 40 min for 3 epochs on 8, both about "
             "4.5x fewer GPU-hours than the published 3 h on 8, and the planner comes within 10% of both with the Alpaca "
             "row's token assumption; a rerun on the early fork (batch 1 per GPU, FP16, 8 A100 40GB) took "
             "4 h, which the planner, like the published 3 h, puts 3-5x too fast. The DPO paper's reference code "
             "(Pythia-2.8B, FSDP, 4 A100 80GB) runs SFT and DPO 2-3x slower than the planner's rate too; the "
             "Olmo 3 7B instruction SFT (OLMo-core, 32K packed sequences, three of four layers in a sliding "
             "window) is predicted 1.6x too slow. The nine "
             "DeepSpeed-Chat PPO runs (OPT-6.7B to 175B, 8 and 64 A100s; every token count published) are "
             "decoded at their release scripts' own generation batch: the runs that decode 4 sequences a GPU "
             "(6.7B, 30B) come out closer, off in both directions, those that decode in tensor-parallel groups "
             "of 2 or 8 GPUs (13B, 66B, 175B) 2-3x too fast: the planner times tensor-parallel decoding at the same share of the "
             "memory roofline as one GPU's, which DeepSpeed-HE likely did not reach: vLLM reaches it on the "
             "same A100s in tensor-parallel groups of 2 to 8 (section 6).", "",
             finetune_text(), "",
             "### Step time and memory of LoRA and QLoRA (`costcore/data/finetune_steps.yaml`)", "",
             finetune_steps_text(), "",
             "## 5. Public vision-language runs (`costcore/data/multimodal_runs.yaml`), recipes as published", "",
             "Each phase as its recipe says (language model, encoder, connector, media tokens, samples, what "
             "is trained, GPUs, global and micro-batch, ZeRO stage, gradient checkpointing; data-parallel "
             "jobs: tensor and pipeline parallelism pinned to 1); the planner's time is one epoch at the "
             "sustained step rate times the epochs. Nothing is fitted on these runs, and text tokens per "
             "sample are assumptions for every one of them (no data set publishes them). " + bar_text(mm) + " "
             "Small language models (MobileVLM 1.4B/2.7B) and "
             "the 2023 V100 run are predicted 2-3x too fast: their image decoding and per-sample "
             "preprocessing on the CPU, which the planner bills but does not put in the step, likely bound "
             "them.", "",
             multimodal_text(mm), "",
             "## 6. Public generation benchmarks (`costcore/data/decode_runs.yaml`): the decoding roofline", "",
             "RL rollouts and evaluation time generated tokens with a roofline (each step reads the bf16 weights "
             "and the batch's KV cache at HBM bandwidth, or does its FLOPs at peak, whichever is longer; "
             "`costcore.engine.formulas.decode_gpu_seconds_per_token`) at a default share of 0.5 "
             "(`stages.rl.rollout_efficiency`, `stages.eval.decode_efficiency`), and prefill prompts at 35% of "
             "peak (`efficiency.inference_mfu`). Each measurement is a fixed batch of prompts generated to a fixed "
             "length with its whole latency published (or its output throughput, from which latency = batch x "
             "output tokens / throughput), scored as one evaluation run on the measured number of GPUs "
             "(`stages.eval.decode_tp`). Nothing is fitted on them. One GPU decoding a 7B model runs 1.5x faster "
             "than modelled in the tuned engines (TensorRT-LLM, LMDeploy), the 70B on 4 A100s generating 2,048 "
             "tokens a little slower, and a 2,048-token prompt prefills faster than 35% of peak: the single "
             "0.5 share is an average over engines and tensor-parallel sizes, not a per-engine figure.", "",
             decode_text(), "", decode_refit_text(), ""]
    return "\n".join(parts)


def decode_refit_text() -> str:
    from costcore.validation.decode import decode_table, leave_one_out_refit, summary
    s, r = summary(decode_table()), leave_one_out_refit()
    worse = r["median_error_x"] >= s["median_error_x"]
    verdict = "no better than" if worse else "better than"
    return (f"Fitting the two defaults on these measurements instead (a grid over 0.2-1.0, scored leave-one-out) "
            f"would give a median error of {r['median_error_x']:.2f}x and a worst of {r['worst_error_x']:.2f}x "
            f"(fitted on all of them: inference utilization {r['inference_mfu']:.2f}, decoding share "
            f"{r['decode_efficiency']:.2f}), {verdict} the defaults' {s['median_error_x']:.2f}x median"
            + ("; the defaults stay." if worse else ": the defaults should move to the fit."))


def decode_text() -> str:
    from costcore.validation.decode import decode_table
    df = decode_table()
    return _summary_table(df, "measurements", ["run", "engine", "GPUs", "published s", "predicted s", "predicted / published",
                                               "assumptions"],
                          lambda r: [r.label, r.engine, r.tp, f"{r.published_hours * 3600:.3g}",
                                     f"{r.predicted_hours * 3600:.3g}", f"{r.ratio:.2f}", r.assumptions])


def _summary_table(df, what: str, header: list, cells) -> str:
    """The set's summary sentence (median and worst error, runs within 25%) and its table, a row a run."""
    from costcore.validation.multimodal import summary
    s = summary(df)
    lines = [f"{s['runs']} {what}: median error {s['median_error_x']:.2f}x, worst {s['worst_error_x']:.2f}x, "
             f"{s['within_25pct']} within 25%.", "", "| " + " | ".join(header) + " |",
             "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in cells(r)) + " |" for r in df.itertuples()]
    return "\n".join(lines)


def multimodal_text(df) -> str:
    return _summary_table(df, "runs", ["run", "phase", "GPUs", "published h", "predicted h", "predicted / published",
                                       "memory/GPU GB", "MFU"],
                          lambda r: [r.label, r.phase, r.gpus, f"{r.published_hours:.3g}", f"{r.predicted_hours:.3g}",
                                     f"{r.ratio:.2f}", f"{r.memory_per_gpu_gb:.1f}", f"{r.mfu:.1%}"])


def finetune_text() -> str:
    from costcore.validation.finetune import finetune_table
    df = finetune_table()
    lines = ["| run | stage | split | published h | predicted h | predicted / published | tokens/s/GPU | MFU | "
             "assumptions |", "|---|---|---|---|---|---|---|---|---|"]
    for r in df.itertuples():
        lines.append(f"| {r.label} | {r.stage.upper()} | {r.split} | {r.published_hours:.3g} | "
                     f"{r.predicted_hours:.3g} | {r.ratio:.2f} | {r.tokens_per_s_per_gpu:,.0f} | {r.mfu:.1%} | "
                     f"{r.assumptions} |")
    return "\n".join(lines)


def finetune_steps_text() -> str:
    """Qwen's published LoRA / Q-LoRA profiling against the plan's step time and memory (nothing fitted)."""
    from costcore.validation.finetune import hf_logit_bytes, step_summary, step_table
    df = step_table()
    s = step_summary(df)
    hf_bytes = hf_logit_bytes(df)
    s_hf = step_summary(step_table({"logit_bytes": hf_bytes}))

    def span_hf(method):
        med, lo, hi = s_hf[method]["memory_ratio"]
        return f"{lo:.2f}-{hi:.2f}x"

    def span(method, key):
        med, lo, hi = s[method][key]
        return f"{lo:.2f}-{hi:.2f} (median {med:.2f})"
    pairs = "; ".join(f"{p['model']} at {p['tokens']:,} tokens {p['published']:.2f}x published, "
                      f"{p['predicted']:.2f}x predicted" for p in s["qlora_over_lora"])
    lines = [f"Qwen's README profiles one optimizer step (8 micro-batches of one padded sequence) and the memory of "
             f"LoRA and Q-LoRA on one A100 80GB, {len(df)} measurements. The planner's step time is the plan's, at "
             "the modelled rate with no production losses (a profiled iteration has none). Nothing is fitted on them. "
             f"Predicted / published step time: LoRA {span('lora', 'step_ratio')}, Q-LoRA "
             f"{span('qlora', 'step_ratio')}; memory per GPU: LoRA {span('lora', 'memory_ratio')}, Q-LoRA "
             f"{span('qlora', 'memory_ratio')}. The 4-bit base slows a step more than the planner says: Q-LoRA over "
             f"LoRA, {pairs}. The published slowdown is about the same number of seconds at every length (a cost "
             "per pass over the weights, not per token), far more than dequantizing at the memory bandwidth, as the "
             "planner times it; Qwen's Q-LoRA runs a GPTQ int4 checkpoint through AutoGPTQ's kernels (exllama off), "
             "not bitsandbytes' NF4, so the gap may be that library's. The LoRA memory the planner leaves out "
             "grows with the length: its logits term is one FP32 copy of the vocabulary's scores per token, while "
             "a Hugging Face model of 2023 holds about three (the BF16 logits cast to FP32, the shifted copy, the "
             f"log-softmax) at a vocabulary of 152k. With `efficiency.logit_bytes` at {hf_bytes:.1f} (the 7B LoRA "
             "rows' growth from 2,048 to 8,192 tokens beyond the planner's, per token and vocabulary entry, plus "
             f"the default 4: finetune.hf_logit_bytes), LoRA's memory comes out {span_hf('lora')} of the published and Q-LoRA's {span_hf('qlora')}.",
             "",
             "| run | published | predicted step | step ratio | published memory | predicted memory | memory ratio |",
             "|---|---|---|---|---|---|---|"]
    for r in df.itertuples():
        lines.append(f"| {r.label} | {r.quote} | {r.predicted_step_s:.3g} s | {r.step_ratio:.2f} | "
                     f"{r.published_memory_gb:.3g} GB | {r.predicted_memory_gb:.3g} GB | {r.memory_ratio:.2f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    (ROOT / "docs" / "validation.md").write_text(render())
    print("wrote docs/validation.md")
