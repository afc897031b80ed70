"""Validation: predicted vs published GPU-hours of public pre-training runs, times of fine-tuning and
vision-language runs, and latencies of generation benchmarks."""
import math

import altair as alt
import numpy as np
import pandas as pd
import streamlit as st

from costcore import fmt
from costcore.scenario.schema import BY_PATH
from costcore.validation import calibration, decode, finetune, multimodal
from costcore.validation import runs as validation
from pages import common

common.frame(
    "Validation",
    "Predicted against published: how far can the defaults be trusted? Pick a set of public runs. Each "
    "pre-training run is re-estimated from its parameters, tokens, sequence length, GPU type and count "
    "only (no MFU, no throughput) and compared with the GPU-hours (or days) its authors published; switch "
    "on **published throughput** to feed each run's measured tokens/s, MFU or TFLOP/s instead, which "
    "checks the rest of the arithmetic (attention FLOPs, recompute, goodput). Each fine-tuning and "
    "preference run, and each vision-language training phase, is the scenario its source describes, "
    "compared with its published training time; each generation benchmark, a batch of prompts decoded as "
    "published, with its latency.")


@st.cache_data(show_spinner=False)
def _table(throughput: bool, dataset: str) -> pd.DataFrame:
    return validation.validation_table(throughput=throughput, dataset=dataset)


@st.cache_data(show_spinner=False)
def _baseline(dataset: str) -> pd.DataFrame:
    return validation.baseline_table(dataset=dataset)


@st.cache_data(show_spinner=False)
def _finetune() -> pd.DataFrame:
    return finetune.finetune_table()


@st.cache_data(show_spinner=False)
def _multimodal() -> pd.DataFrame:
    return multimodal.multimodal_table()


@st.cache_data(show_spinner=False)
def _decode() -> pd.DataFrame:
    return decode.decode_table()


TRAINING_TIME = ("one pass at the stage's sustained rate times the epochs; for RL the whole stage (rollouts, reward, "
                 "reference and critic passes, updates)")


def _band_sentence(family: str, stages: str) -> str:
    """What these runs give the estimates: their P10-P90 band (costcore/data/calibration.yaml stage_bands)."""
    b = validation.calibration_summary()["stage_bands"][family]
    return (f"\n\nThese runs are the track record of {stages}: every estimate of those stages carries their "
            f"P10–P90 band, the model value × {math.exp(b['band_log_p10']):.2f} to × {math.exp(b['band_log_p90']):.2f} "
            f"(the 10th and 90th percentiles of published / predicted over the {b['runs']} runs; leaving each run "
            f"out, the band of the others holds {b['loo_coverage']:.0%} of them), wider than pre-training's.")


def _time_view(df: pd.DataFrame, s: dict, intro: str, extra: dict, notes, predicted_help: str = TRAINING_TIME) -> None:
    """Runs compared on their published training time: the metrics, one table row a run, then each run's
    source in full, one run a paragraph (a table cut these long texts off at its column edge).
    ``extra``: more number columns, column -> (header, formatter)."""
    st.markdown(intro)
    m = st.columns(4)
    m[0].metric("Runs", s["runs"])
    m[1].metric("Median error", f"{s['median_error_x']:.2f}x")
    m[2].metric("Worst", f"{s['worst_error_x']:.2f}x", help=s.get("worst_run"))
    m[3].metric("Within ±25%", f"{s['within_25pct']} of {s['runs']}")
    # the ratio at 3 decimals and a yes/no column: at 2 decimals 1.254 reads "1.25x" next to "missed"
    shown = df[["label", "published_hours", "predicted_hours", "ratio"]].assign(
        within=np.where(multimodal.within_25pct(df["ratio"]), "yes", "no")).join(df[list(extra)])
    common.number_table(
        shown, {"published_hours": lambda v: fmt.duration_s(v * 3600.0),
                "predicted_hours": lambda v: fmt.duration_s(v * 3600.0), "ratio": lambda v: f"{v:.3f}x",
                **{k: f for k, (_, f) in extra.items()}},
        {"label": "Run", "published_hours": "Published time", "predicted_hours": "Predicted time",
         "ratio": "Predicted / published", "within": "Within ±25%",
         **{k: label for k, (label, _) in extra.items()}},
        {"predicted_hours": predicted_help},
        height=35 * (len(shown) + 1) + 3)
    st.subheader("Each run's source")
    st.markdown("\n".join(f"- **{common.md_escape(r.label)}.** {notes(r)}" for r in df.itertuples()))


def _finetune_view() -> None:
    """Public fine-tuning and preference runs, each as its source describes it; nothing fitted on them."""
    df = _finetune()
    # each run's label names its method (full fine-tune, QLoRA, PPO): no stage column, so the table fits
    _time_view(df, finetune.summary(df),
               "Each run is the scenario its source describes (model shape, GPUs, method, data, batch), estimated "
               "with the defaults; nothing is fitted on these runs. The bar of the fine-tuning workbench (Stanford "
               "Alpaca 7B and Guanaco 65B within 25% of their published time) is **missed**: 2023 Hugging Face "
               "Trainer and FSDP stacks ran far below the step model's rate for full fine-tunes, and token counts "
               "are assumed where the sources give none (community reruns of the Alpaca script on transformers main "
               "two weeks later took 4.5x fewer GPU-hours than the published 3 h, and the planner comes within 10% "
               "of them). DeepSpeed-Chat's PPO runs publish every token count; "
               "decoded at their scripts' generation batch, those that decode in tensor-parallel groups (13B, 66B, "
               "175B) come out 2-3x faster than published, those decoded a GPU at a time (6.7B, 30B) are closer, "
               "off in both directions; vLLM's tensor-parallel decoding does reach the modelled rate (the "
               "generation benchmarks)." + _band_sentence("post_training", "SFT, DPO and RL"),
               {"tokens_per_s_per_gpu": ("Tokens/s per GPU", fmt.num), "mfu": ("MFU", lambda v: f"{v:.1%}")},
               lambda r: f"Source: {common.md_escape(r.source)}. "
                         f"Assumed where the source is silent: {common.md_escape(r.assumptions)}.")
    _steps_view()


@st.cache_data(show_spinner=False)
def _steps() -> pd.DataFrame:
    return finetune.step_table()


def _steps_view() -> None:
    """Qwen's LoRA / Q-LoRA profiling: the plan's step time and memory against the published ones."""
    df = _steps()
    s = finetune.step_summary(df)
    st.subheader("Step time and memory of LoRA and Q-LoRA on one A100")
    slow = "; ".join(f"{p['model']} at {p['tokens']:,} tokens: {p['published']:.2f}x "
                     f"published, {p['predicted']:.2f}x predicted" for p in s["qlora_over_lora"])
    st.markdown(
        "Qwen's README profiles one optimizer step (8 micro-batches of one padded sequence) and its memory. The "
        "planner's figure is the plan's step at the modelled rate, without the production losses a profiled "
        f"iteration does not have; nothing is fitted on these. Step time, predicted / published: LoRA median "
        f"{s['lora']['step_ratio'][0]:.2f}, Q-LoRA median {s['qlora']['step_ratio'][0]:.2f}. Memory: LoRA median "
        f"{s['lora']['memory_ratio'][0]:.2f}, Q-LoRA median {s['qlora']['memory_ratio'][0]:.2f}. How much slower "
        f"Q-LoRA's step is than LoRA's: {slow}. Qwen's Q-LoRA dequantizes a GPTQ int4 checkpoint with AutoGPTQ, "
        "not bitsandbytes' NF4 (docs/validation.md discusses both gaps).")
    common.number_table(
        df[["label", "published_step_s", "predicted_step_s", "step_ratio", "published_memory_gb",
            "predicted_memory_gb", "memory_ratio"]],
        {"published_step_s": fmt.duration_s, "predicted_step_s": fmt.duration_s, "step_ratio": lambda v: f"{v:.2f}x",
         "published_memory_gb": fmt.gb, "predicted_memory_gb": fmt.gb, "memory_ratio": lambda v: f"{v:.2f}x"},
        {"label": "Measurement", "published_step_s": "Published step", "predicted_step_s": "Predicted step",
         "step_ratio": "Step ratio", "published_memory_gb": "Published memory",
         "predicted_memory_gb": "Predicted memory", "memory_ratio": "Memory ratio"},
        {"published_memory_gb": "per GPU (the 72B LoRA row: its 4 GPUs' total over 4)",
         "step_ratio": "predicted / published step time", "memory_ratio": "predicted / published memory per GPU"},
        height=35 * (len(df) + 1) + 3)
    st.caption(f"Source: {common.md_escape(df['source'].iloc[0])}.")


def _multimodal_view() -> None:
    """Public vision-language training phases, each from its published recipe; nothing fitted on them."""
    df = _multimodal()
    _time_view(df, multimodal.summary(df),
               "Each phase is its published recipe (language model, encoder, connector, media tokens, samples, "
               "what is trained, GPUs, batch, ZeRO stage), estimated with the defaults; nothing is fitted on "
               "these runs, and text tokens per sample are assumed for every one of them (no data set publishes "
               "them). " + multimodal.bar_text(df) + _band_sentence("multimodal", "the multimodal phases"),
               {"memory_per_gpu_gb": ("Memory per GPU", fmt.gb),
                "mfu": ("MFU", lambda v: f"{v:.1%}")},
               lambda r: f"On {common.md_escape(r.gpus)}. Source: {common.md_escape(r.source)}."
                         + (f" In its words: \u201c{common.md_escape(r.quote)}\u201d" if r.quote else ""))


def _decode_view() -> None:
    """Public batched-generation measurements: the decoding roofline RL rollouts and evaluation use."""
    df = _decode()
    _time_view(df, decode.summary(df),
               "RL rollouts and evaluation generate text; the planner times it with a roofline (each step reads the "
               "weights and the KV cache at memory bandwidth, or does the batch's FLOPs at peak, whichever is longer) "
               f"at the default share of it ({fmt.num(BY_PATH['stages.eval.decode_efficiency'].default)}), and "
               f"prefills prompts at the default inference utilization "
               f"({fmt.share(BY_PATH['efficiency.inference_mfu'].default)}). "
               "Each measurement is a fixed batch of prompts generated to a fixed length on the GPUs its label "
               "names, its whole latency published; nothing is fitted on them. Two patterns stand out: one GPU "
               "decoding a 7B model runs faster than modelled in the tuned engines (TensorRT-LLM, LMDeploy), and "
               f"long prompts prefill faster than {fmt.share(BY_PATH['efficiency.inference_mfu'].default)} of peak.",
               {},
               lambda r: f"{common.md_escape(r.engine)}. Source: {common.md_escape(r.source)}. In its table: "
                         f"\u201c{common.md_escape(r.quote)}\u201d. Assumed: {common.md_escape(r.assumptions)}.",
               predicted_help="the prompts' prefill plus the generated tokens at the decoding roofline, on the "
                              "measured number of GPUs")


DATASETS = {"reference": "Reference runs",
            "extra": "Other public runs",
            "finetune": "Fine-tuning and preference runs",
            "multimodal": "Vision-language runs",
            "decode": "Generation benchmarks"}
c1, c2 = st.columns([3, 2])
dataset = c1.radio("Runs", list(DATASETS), format_func=DATASETS.get, horizontal=True, key="val_runs",
                   help="Reference runs: the pre-training set the planner's accuracy target is scored on. Other "
                        "public runs: more pre-training runs, never used to set that target. Fine-tuning and "
                        "preference runs: SFT, QLoRA and PPO runs as published. Vision-language runs: "
                        "alignment and instruction-tuning phases of LLaVA-style models as published. Generation "
                        "benchmarks: batched decoding latencies, the rollout and evaluation model's check.")
if dataset in ("finetune", "multimodal", "decode"):
    {"finetune": _finetune_view, "multimodal": _multimodal_view, "decode": _decode_view}[dataset]()
    st.stop()
tp = c2.toggle("Use each run's published throughput", value=False, key="val_tp")
df = _table(tp, dataset)
if df.empty:
    st.info("None of these runs publishes a throughput; switch the toggle off to compare the defaults.")
    st.stop()
s = validation.summary(df)
base = _baseline(dataset)
m = st.columns(4)
m[0].metric("Runs", s["runs"])
m[1].metric("Median error", f"{s['median_error']:.1%}",
            help=f"the plain rule 6ND / (peak x 30%): {base['error'].median():.1%}")
m[2].metric("Worst", f"{s['worst_fold']:.2f}x", help=s["worst_run"])
m[3].metric("Within ±25%", f"{s['within_25']} of {s['runs']}")  # a count of a dozen runs, not "58%"
# said on the page, not in a tooltip: on the reference runs the plain rule beats the step model
rule = float(base["error"].median())
st.caption(f"For comparison, the plain rule 6ND / (peak × 30%) misses these runs by a median of {rule:.1%}"
           + (", less than the planner's layout model; the planner earns its keep where a rule has no answer (a "
              "given GPU count, layout, precision, fine-tuning method or memory limit), and its error band comes from "
              "its own misses." if rule < s["median_error"] else ", more than the planner's layout model."))

plot = df.copy()
plot["label"] = plot.run
lo = float(min(plot.published_gpu_hours.min(), plot.predicted_gpu_hours.min()) / 2)
hi = float(max(plot.published_gpu_hours.max(), plot.predicted_gpu_hours.max()) * 2)
line = pd.DataFrame({"x": np.geomspace(lo, hi, 50)})
GPU_H_AXIS = alt.Axis(format="~s", labelExpr=common.LOG_LABEL_EXPR)  # 1B, not 1G
line["y"], line["lo"], line["hi"] = line.x, line.x * 0.75, line.x * 1.25
band = alt.Chart(line).mark_area(opacity=0.15, color="#54A24B").encode(
    x=alt.X("x:Q", scale=alt.Scale(type="log", domain=[lo, hi]), title="Published GPU-hours", axis=GPU_H_AXIS),
    y=alt.Y("lo:Q", scale=alt.Scale(type="log", domain=[lo, hi]), title="Predicted GPU-hours", axis=GPU_H_AXIS),
    y2=alt.Y2("hi:Q"))
X_AXIS, Y_AXIS = "Published GPU-hours", "Predicted GPU-hours"
diag = alt.Chart(line).mark_line(color="#333", strokeDash=[4, 3]).encode(x=alt.X("x:Q", title=X_AXIS),
                                                                        y=alt.Y("y:Q", title=Y_AXIS))
pts = alt.Chart(plot).mark_circle(size=90).encode(
    x=alt.X("published_gpu_hours:Q", title=X_AXIS), y=alt.Y("predicted_gpu_hours:Q", title=Y_AXIS),
    color=alt.Color("gpu:N", title="GPU"),
    tooltip=[alt.Tooltip("run:N", title="Run"), alt.Tooltip("gpu:N", title="GPU"),
             alt.Tooltip("num_gpus:Q", format=",", title="GPUs"), alt.Tooltip("basis:N", title="Compared on"),
             alt.Tooltip("published:Q", format=",.3s", title="Published"),
             alt.Tooltip("predicted:Q", format=",.3s", title="Predicted"),
             alt.Tooltip("ratio:Q", format=".2f", title="Predicted / published"),
             alt.Tooltip("mfu:Q", format=".1%", title="Utilization used (MFU)"), alt.Tooltip("notes:N", title="Notes")])
# Names beside their points, moved a line down or up where they would cover each other (the chart's plot
# area is about 620 x 330 px on a laptop screen; narrower, labels can still touch). With more than 20 runs
# the names of those inside the ±25% band covered each other (39 runs), so only the misses are named
# there; every point still names its run on hover.
FEW_RUNS = 20
named = plot if len(plot) <= FEW_RUNS else plot[plot.error > 0.25].copy()  # as the "Within ±25%" metric
# the plot area, not the chart: of the 460 px the title and the x axis take about 125 (a 1280 px window drew the
# plot 627 x 333 px, and labels spread on 460 px came 9 px apart at a 10 px font: OPT-175B over BloombergGPT)
named["label_y"] = common.spread_labels(named.published_gpu_hours, named.predicted_gpu_hours, list(named.label),
                                        620.0, 330.0, (lo, hi))
labels = alt.Chart(named).mark_text(align="left", dx=7, baseline="middle", fontSize=10, color="#333").encode(
    x=alt.X("published_gpu_hours:Q", title=X_AXIS), y=alt.Y("label_y:Q", title=Y_AXIS), text=alt.Text("label:N"))
common.show_chart(common.layer(band, diag, pts, labels),
                  "Predicted against published training time, one point per public run", height=460)
st.caption("Dashed: predicted = published. Green band: ±25%. Runs published in days are compared in days and "
           "drawn at days x GPUs x 24." + (" Named: the runs outside the band (hover a point for any run)."
                                           if len(plot) > FEW_RUNS else ""))
# Two tables that each fit the page (one of 15 columns was cut off at the right): how close each estimate
# is, on the figure the authors published; then what each run is, in GPU-hours for all of them.
st.subheader("How close each estimate is")
in_days = df["basis"] == "days"  # each run on the figure its authors published: days or GPU-hours
close = df[["run", "gpu", "num_gpus", "basis"]].assign(
    published=[fmt.days(d) if t else fmt.gpu_hours(h) for t, d, h in zip(in_days, df.published_days, df.published_gpu_hours)],
    predicted=[fmt.days(d) if t else fmt.gpu_hours(h) for t, d, h in zip(in_days, df.predicted_days, df.predicted_gpu_hours)],
    ratio=df.ratio, error=df.error, mfu=df.mfu)
common.number_table(
    close, {"num_gpus": lambda v: f"{v:,.0f}", "ratio": lambda v: f"{v:.2f}x", "error": lambda v: f"{v:.1%}",
            "mfu": lambda v: f"{v:.1%}"},
    {"run": "Run", "gpu": "GPU", "num_gpus": "GPUs", "basis": "Compared on", "published": "Published",
     "predicted": "Predicted", "ratio": "Predicted / published", "error": "Error", "mfu": "MFU used"},
    {"basis": "the figure the authors published: training days or GPU-hours",
     "mfu": "model FLOPs utilization of the searched plan, goodput losses included"},
    height=35 * (len(close) + 1) + 3)
st.subheader("The runs")
# the sources are long: in a table they were cut off at its right edge, so they follow it in full
# a static table that wraps: as a dataframe the assumptions (or, with narrow columns, the headers) were cut off
st.table(pd.DataFrame({
    "Run": df["run"], "Active parameters (billions)": df["params_b"].map(fmt.num),
    "Tokens (billions)": df["tokens_b"].map(fmt.num), "Published GPU-hours": df["published_gpu_hours"].map(fmt.gpu_hours),
    "Predicted GPU-hours": df["predicted_gpu_hours"].map(fmt.gpu_hours),
    "Assumed by the planner": df["notes"].fillna("")}).set_index("Run"))
st.caption("Published GPU-hours: days x GPUs x 24 where days were published. Active parameters: a mixture of "
           "experts' parameters per token (all of a dense model's).")
with st.expander(f"Each run's source ({len(df)})"):
    st.markdown("\n".join(f"- **{common.md_escape(r.run)}.** {common.md_escape(r.source)}" for r in df.itertuples()))
loo = validation.calibration_summary()
fit = loo["best_fit"]
st.markdown(
    "**The model behind these numbers.** No run here is given an MFU: each one's plan (tensor, pipeline, data, "
    "context and expert parallelism, micro-batch, recompute, ZeRO) is searched on its GPUs, and its step time is "
    "built from named terms — matmuls at a size-dependent fraction of peak, attention, tensor- and "
    "pipeline-parallel communication, the pipeline bubble, data-parallel gradient reduction and recompute "
    "(the Job layout page shows them). Three of the step model's knobs are fitted on 18 published Megatron-LM "
    "iteration times and throughputs on Selene (Narayanan et al. 2021, Korthikanti et al. 2022); three production "
    f"knobs are fitted on the calibration runs of these tables: the share of the benchmark step rate a run sustains ({fit['sustained_fraction']:.2f}), the "
    f"share of the tensor-parallel collectives hidden behind the layer's matmuls ({fit.get('tp_overlap', 0.0):.2f}) and the "
    f"slowdown of compute while a collective runs behind it ({fit['overlap_contention']:.2f}). On top come the "
    "goodput losses: interruptions at the Llama 3 rate with Young/Daly checkpointing, checkpoint stalls, idle "
    "and rolled-back work. `costcore/validation/calibration.py` does the fit (`python benchmarks/calibrate.py`); "
    "`python -m costcore validate [--runs extra | FILE.csv]` prints these tables.")
st.markdown(
    f"**Out of sample.** Refitting without one run and predicting it, for each of the {loo['runs']} calibration "
    f"runs in turn: median error {loo['loo_median_error']:.1%}, worst {loo['loo_worst_fold']:.2f}x. The "
    f"{loo['holdout_runs']} held-out runs, never fitted on: median error {loo['holdout_median_error']:.1%}, worst "
    f"{loo['holdout_worst_fold']:.2f}x, {loo['holdout_band_coverage']:.0%} of them inside their P10-P90 band. "
    "That is the error to expect for a run the model has not seen, and the spread the Monte Carlo gives a "
    "default MFU.")
rs = loo.get("residual_structure")
if rs:
    st.markdown(
        f"**What is left.** The residuals follow no input much more than chance would: of {rs['residual_inputs']} "
        f"inputs (size, GPU count, sequence length, the plan's MFU and parallel degrees, GPU generation, mixture of "
        f"experts, how the time was published), the closest correlation is {rs['max_abs_r']:.2f}, against "
        f"{rs['chance_r']:.2f} that chance passes 1 time in 20. Around the mean of each family of runs one team "
        f"published together ({rs['family_runs']} runs), they still scatter by a median of "
        f"{rs['family_median_error']:.0%} (worst {rs['family_worst_fold']:.2f}x): knowing each team's efficiency "
        "would not bring the median error under 10% either.")


@st.cache_data(show_spinner=False)
def _schedule_search() -> dict:
    return calibration.schedule_search_summary()


# dense runs of 100B and more on the stacks of 2020-22 and of 2023 (docs/validation.md, section 2)
OLD_STACK = ("GPT-3-175B", "OPT-175B", "BLOOM-176B", "Megatron-GPT-175B", "GLM-130B")
NEW_STACK = ("Falcon-180B", "Llama-2-70B")


def _ratios(names) -> dict:
    both = pd.concat([_table(False, "reference"), _table(False, "extra")]).set_index("run")["ratio"]
    return {n: float(both[n]) for n in names if n in both.index}


def _listed(r: dict) -> str:
    return ", ".join(f"{n} {v:.2f}" for n, v in r.items())


if dataset == "extra":
    old, new = _ratios(OLD_STACK), _ratios(NEW_STACK)
    if old and new and max(old.values()) < 1.0 < min(new.values()):
        st.markdown(
            f"The large dense runs of 2020-22 come out faster than published ({_listed(old)}; predicted / "
            f"published) and those of 2023 slower ({_listed(new)}): the stacks changed (FlashAttention, selective "
            "recomputation, overlapped communication), which no input of a defaults-only plan reveals.")
    moe = _schedule_search()
    moved = [f"{n} {a:.2f} to {b:.2f}" for n, a, b in moe["moved"]]
    st.markdown(
        f"**Mixture of experts and DualPipe.** With the pipeline schedule set to Searched, the plan "
        f"search takes DeepSeek's DualPipe on {len(moved)} of the {moe['runs']} MoE runs ({', '.join(moved) or 'none'};"
        f" predicted / published, 1F1B to searched). Closer to the published time: {', '.join(moe['closer']) or 'none'}"
        f"; further: {', '.join(moe['further']) or 'none'}. The default stays 1F1B; a stage opts in on the Job layout "
        "page.")
if tp and dataset == "reference":
    st.markdown(
        "PaLM's 64 days mix 6,144 chips for 1,200 h and 3,072 chips for 336 h \"including some downtime and "
        "repeated steps\" (PaLM App. B). At its steady-state 46.2% MFU the FLOPs take 5.6M chip-hours, against "
        "8.4M in that schedule; the paper does not say where the other third went.")
