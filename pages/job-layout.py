"""Job layout: how a training stage is split over its GPUs, its memory per GPU and its step time."""
import altair as alt
import pandas as pd
import streamlit as st

from costcore import api, fmt
from costcore.scenario import schema
from costcore.engine.feasibility import fp8_timed_as_bf16
from costcore.scenario.schema import STAGE_LABELS, STAGES, ScenarioError
from costcore.scenario.yamlio import dump_yaml
from pages import common

res = common.frame(
    "Job layout",
    "How a training stage is laid out on its GPUs: tensor (TP), pipeline (PP), data (DP) and context (CP) "
    "parallelism, the micro-batch, ZeRO sharding and activation recompute. The planner searches every layout "
    "that fits in GPU memory and keeps the fastest; pin any part of it below to see what it costs.")

MEMORY_KINDS = {"weights": "Weights", "grads": "Gradients", "optimizer": "Optimizer states",
                "activations": "Activations", "buffers": "Buffers"}
MEMORY_COLORS = common.MEMORY_COLORS
TIME_KINDS = {"compute": "Compute", "communication": "Communication", "bubble": "Pipeline bubble",
              "recompute": "Recompute", "optimizer": "Optimizer step"}
TIME_COLORS = ["#4C78A8", "#72B7B2", "#EECA3B", "#B279A2", "#9D755D"]
RECOMPUTE_WORDS = common.CHOICE_WORDS["recompute"]
ZERO_WORDS = common.CHOICE_WORDS["zero_stage"]
PRECISION_WORDS = common.CHOICE_WORDS["precision"]
POWERS = [1, 2, 4, 8, 16, 32, 64]


@st.cache_data(show_spinner=False, max_entries=64)
def _top_plans(scenario_yaml: str, stage: str, _scn) -> list[dict]:
    """api.plans once per scenario and stage (keyed by the scenario's YAML; ``_scn`` is not hashed)."""
    return api.plans(_scn, stage, top=10)


def pin(path: str, label: str, options: list, words, help: str) -> None:
    """A selectbox bound to one scenario path, its choices shown in words (common.apply on change)."""
    ss = common.state()
    cur = schema.effective_value(ss.scenario, path)
    if cur not in options:  # a value pinned elsewhere (the link, a file) stays selectable
        options = sorted(options + [cur], key=lambda v: (not isinstance(v, (int, float)), v))
    key = f"k:{path}:{ss.rev}"

    def changed():
        common.apply(path, st.session_state[key])

    st.selectbox(label, options, index=options.index(cur), key=key, on_change=changed, help=help,
                 format_func=words)


def _count(v: int) -> str:
    return "Searched" if v == 0 else f"{v:,}"


def _same_layout(a: dict, b: dict) -> bool:
    keys = ("tp", "pp", "dp", "cp", "ep", "micro_batch", "recompute", "zero", "interleave", "sequence_parallel",
            "schedule")
    return all(a[k] == b[k] for k in keys)


def _pct(v: float) -> str:
    return fmt.share(v)  # 24.0%, not 24% next to 24.1%


def _one_bar(df: pd.DataFrame, field: str, x_title: str, legend_title: str, words: list, colors: list,
             row: str, x_scale=None, x_axis=None) -> alt.Chart:
    """One horizontal bar stacked by kind (memory or step time): the page's two breakdowns."""
    x = alt.X(f"{field}:Q", stack=True, title=x_title, scale=x_scale or alt.Undefined, axis=x_axis or alt.Undefined)
    return alt.Chart(df).mark_bar(height=46).encode(
        x=x, y=alt.Y("row:N", title=row, axis=None),
        color=alt.Color("kind:N", title=legend_title, sort=words, scale=alt.Scale(domain=words, range=colors),
                        legend=alt.Legend(orient="right")),
        order=alt.Order("order:Q"),
        tooltip=[alt.Tooltip("kind:N", title=legend_title), alt.Tooltip("shown:N", title=x_title)])


def memory_chart(plan: dict, usable_gb: float) -> alt.Chart:
    df = pd.DataFrame([{"kind": MEMORY_KINDS[k], "gb": float(plan["memory_gb"][k]),
                        "shown": fmt.gb(float(plan["memory_gb"][k])), "row": "per GPU", "order": i}
                       for i, k in enumerate(MEMORY_KINDS)])
    top = max(usable_gb, float(plan["memory_per_gpu_gb"])) * 1.08
    bars = _one_bar(df, "gb", "Memory per GPU (GB)", "Kind", list(MEMORY_KINDS.values()), MEMORY_COLORS,
                    "per GPU", x_scale=alt.Scale(domain=[0, top], nice=False))
    limit = pd.DataFrame({"gb": [usable_gb], "label": [f"usable: {fmt.gb(usable_gb)}"]})
    rule = alt.Chart(limit).mark_rule(color="#B22222", strokeDash=[6, 3], strokeWidth=2.5).encode(
        x=alt.X("gb:Q", title="Memory per GPU (GB)"), tooltip=[alt.Tooltip("label:N", title="GPU memory a plan may use")])
    text = alt.Chart(limit.assign(row="per GPU")).mark_text(
        align="right", baseline="bottom", dx=-4, dy=-27, fontSize=12, color="#B22222").encode(
        x=alt.X("gb:Q", title="Memory per GPU (GB)"), y=alt.Y("row:N", axis=None), text=alt.Text("label:N"))
    out = common.layer(bars, rule, text)
    out.height = 190  # on the chart itself, not a deep copy (common.layer)
    return out


def time_chart(plan: dict) -> alt.Chart:
    df = pd.DataFrame([{"kind": TIME_KINDS[k], "s": float(plan["time_s"][k]),
                        "shown": fmt.duration_s(float(plan['time_s'][k])), "row": "per step", "order": i}
                       for i, k in enumerate(TIME_KINDS)])
    return _one_bar(df, "s", "Step time (seconds)", "Part of the step", list(TIME_KINDS.values()), TIME_COLORS,
                    "per step", x_axis=alt.Axis(tickCount=8)).properties(height=190)


def plans_table(rows: list[dict], chosen: dict) -> tuple[pd.DataFrame, dict]:
    """The ten fastest plans as numbers (so a click on a header sorts 9.8 s before 12 s) and the
    formatter of each measured column. The degrees share one column (with SP marking sequence
    parallelism) so that the table fits the page without a sideways scroll."""
    moe = any(r["ep"] > 1 for r in rows)
    df = pd.DataFrame([{
        "Rank": f"{i + 1} ✓" if _same_layout(p, chosen) else str(i + 1),
        "Step time": p["step_time_s"], "MFU": p["mfu"], "Memory": p["memory_per_gpu_gb"],
        "Layout": f"TP {p['tp']}{' (SP)' if p['sequence_parallel'] else ''} · PP {p['pp']} · DP {p['dp']:,} · "
                  f"CP {p['cp']}" + (f" · EP {p['ep']}" if moe else ""),
        "Micro-batch": p["micro_batch"], "Per step": p["micro_batches"],
        "Recompute": p["recompute"].capitalize(), "ZeRO": f"ZeRO-{p['zero']}" if p["zero"] else "Off",
        "Schedule": fmt.schedule(p),
    } for i, p in enumerate(rows)])
    if (df["Schedule"] == "1F1B").all():  # nothing to tell apart
        df = df.drop(columns="Schedule")
    formats = {"Step time": fmt.duration_s, "MFU": _pct, "Memory": fmt.gb,
               "Per step": fmt.num}
    return df, formats


training = [s for s in res.stages if s in api.TRAINING_STAGES]
if not training:
    st.info("This scenario has no training stage (pre-training, CPT, SFT, DPO or RL), so there is no job "
            "layout to show. Switch one on in the Pre-training or Post-training pages.")
    st.stop()

misfits = [s for s in training if res.stat(s, "fits") < 0.5]  # open on a stage that does not fit, if one does not
seeded = common.view_seed("stage", training)  # a link's stage, if it names one this plan trains
stage = st.selectbox("Training stage", training, format_func=lambda s: STAGE_LABELS[s], key="job-layout:stage",
                     **({} if seeded else {"index": training.index(misfits[0]) if misfits else 0}))
p = f"stages.{stage}."
st.subheader(f"Pin the layout of {STAGE_LABELS[stage].lower()}")
st.caption("Searched = the planner picks the fastest value that fits. Precision applies to every stage.")
cols = st.columns(4)  # four a row: six squeezed "ZeRO-3 (FSDP)" and "Searched" into "ZeRO-3 (FSD" and "Se"
with cols[0]:
    pin(p + "tp", "Tensor parallel (TP)", [0] + POWERS, _count,
        "GPUs that split every layer's matrices (Megatron-LM); best kept inside one node.")
with cols[1]:
    pin(p + "pp", "Pipeline parallel (PP)", [0] + POWERS, _count,
        "Groups of consecutive layers on different GPUs; costs a pipeline bubble.")
with cols[2]:
    pin(p + "micro_batch", "Micro-batch", [0] + POWERS, _count,
        "Sequences each GPU processes at once; more uses the GPU better but holds more activations.")
with cols[3]:
    pin(p + "recompute", "Recompute", list(RECOMPUTE_WORDS), RECOMPUTE_WORDS.get,
        "Activation recompute: recompute activations in the backward pass instead of storing them; selective "
        "recomputes only attention (Korthikanti et al. 2022), full every layer.")
cols = st.columns(4)
with cols[0]:
    pin(p + "zero_stage", "ZeRO stage", list(ZERO_WORDS), lambda v: ZERO_WORDS.get(v, f"ZeRO-{v}"),
        "Shard model states across data-parallel GPUs: optimizer states (ZeRO-1), gradients too (ZeRO-2), "
        "weights too (ZeRO-3 / FSDP); Off = plain data parallel (Rajbhandari et al. 2020).")
with cols[1]:
    pin("hardware.precision", "Precision", list(PRECISION_WORDS), PRECISION_WORDS.get,
        "Precision of the training matmuls; FP8 uses the GPU's FP8 peak where it has one.")
with cols[2]:
    pin(p + "schedule", "Pipeline schedule", list(common.CHOICE_WORDS["schedule"]), common.CHOICE_WORDS["schedule"].get,
        "How the pipeline runs its micro-batches. 1F1B: one forward, one backward, each stage holding one chunk of "
        "layers or several interleaved ones (Narayanan et al. 2021 Sec. 2.2; the plan search picks how many). DualPipe (DeepSeek-V3 report Sec. 3.2.1) hides the expert "
        "all-to-all and the pipeline sends behind another micro-batch's compute and shrinks the bubble, at the "
        "cost of the SMs its communication takes and a second copy of the weights; it needs an even pipeline. "
        "Searched tries 1F1B and DualPipe and keeps the faster.")
if res.stat(stage, "plan_ep") > 1 or schema.effective_value(res.scenario, "model.experts") > 0 or \
        schema.effective_value(res.scenario, p + "ep") > 0:
    with cols[3]:
        pin(p + "ep", "Expert parallel (EP)", [0] + POWERS, _count,
            "GPUs the routed experts are spread over (mixture of experts); each token's hidden state travels to "
            "its experts and back (all-to-all), over the network once the group spans nodes.")

scn = common.current()  # the pins above changed it (if they did) before this rerun began
i = STAGES.index(stage)
plan = res.plan(stage)
precision = str(schema.effective_value(res.scenario, "hardware.precision"))
PRECISION_SHOWN = PRECISION_WORDS.get(precision, precision.upper())
if fp8_timed_as_bf16(res.scenario):  # the plan line said "FP8" on an A100
    PRECISION_SHOWN = "FP8 chosen, timed at BF16 speed (this GPU has no FP8 tensor cores)"

st.subheader(STAGE_LABELS[stage])
if plan["plans_fitting"] > 0:
    st.markdown(f"**Plan:** {fmt.plan_words(plan, PRECISION_SHOWN)}")
else:  # the fallback the kernel prices is no plan: "DP 2 × CP 1 (EP 8)" read as one that ran
    st.markdown(f"**No plan fits** on {fmt.gpus(res.stat(stage, 'num_gpus'))} as pinned; the numbers below are "
                f"those of the nearest layout ({fmt.plan_words(plan)}), which cannot run. The message above says why.")
if not res.uses_layout(stage):
    st.info("This stage's speed is set by hand (an MFU, a throughput or TFLOP/s per GPU in its settings), so "
            "its hours do not come from this layout; the layout still decides whether it fits in memory.",
            icon=":material/info:")

band = res.band[i]
c = common.metric_row(5)
c[0].metric("Step time", fmt.duration_s(plan['step_time_s']), help=f"{plan['micro_batches']:,} micro-batches "
            f"per optimizer step, at the layout's own MFU of {_pct(plan['benchmark_mfu'])}")
c[1].metric("MFU (sustained)" if res.uses_layout(stage) else "MFU", _pct(plan["mfu"]), help=(
    f"the MFU the stage's hours use: the layout's own ({_pct(plan['benchmark_mfu'])}) times the share a "
    "production run sustains" if res.uses_layout(stage) else "the MFU the stage's hours use (set by hand)"))
c[2].metric("Memory per GPU", fmt.gb(plan["memory_per_gpu_gb"]),
            help=f"of {fmt.gb(res.stat(stage, 'usable_memory_gb'))} usable; "
                 f"{plan['plans_fitting']:,} plans fit")
with c[3].container():  # one slot of the row: metric and its band stacked, not side by side
    st.metric("GPU-hours (billed)", fmt.gpu_hours(res.stat(stage, "gpu_hours")).replace(" GPU-h", ""),
              help=f"{res.stat(stage, 'gpu_hours'):,.0f} GPU-hours on {fmt.gpus(res.stat(stage, 'num_gpus'))}")
    st.caption("P10–P90: " + " – ".join(fmt.gpu_hours(b).replace(" GPU-h", "") for b in band[:2]))  # as the metric
with c[4].container():
    st.metric("Stage cost", fmt.usd(res.stat(stage, "usd_total")),
              help=f"{STAGE_LABELS[stage]}: {fmt.usd_exact(res.stat(stage, 'usd_total'))}")
    st.caption(f"P10–P90: {common.md_escape(fmt.usd(band[2]))} – {common.md_escape(fmt.usd(band[3]))}")
if res.uses_layout(stage) and plan["benchmark_mfu"] > 0:  # 2.20 s a step read as 46% MFU beside "27.5%"
    st.caption(f"The step time is the layout's own, at {_pct(plan['benchmark_mfu'])} MFU; a production run sustains "
               f"less (slow nodes, stragglers, pauses the hidden costs do not count; fitted on public runs, the "
               f"Validation page has the record), so the stage's hours use {_pct(plan['mfu'])}.")

if stage == "rl" and res.stat(stage, "rollout_weights_gb") > 0:
    weights, kv = res.stat(stage, "rollout_weights_gb"), res.stat(stage, "rollout_kv_gb")
    st.caption(f"Rollouts run apart from this layout: replicas of {fmt.gpus(res.stat(stage, 'decode_replica_gpus'))}"
               f" decoding {res.stat(stage, 'decode_batch_used'):,.0f} sequences at once hold {fmt.gb(weights)} of "
               f"weights and {fmt.gb(kv)} of KV cache per GPU ({fmt.gb(weights + kv)}). The stage's memory per GPU "
               f"on the other pages, {fmt.gb(res.stat(stage, 'memory_per_gpu_gb'))}, is the larger of the two.")
if res.stat(stage, "fits") < 0.5:
    label = STAGE_LABELS[stage]
    reasons = [x for x in res.infeasible if x.startswith(label)] or res.infeasible
    st.error("\n".join(f"- {common.md_escape(x)}" for x in reasons) +
             "\n\nChoose Searched for a setting pinned above and the planner looks for a layout that fits. "
             "The charts show the plan as it stands.", icon=":material/block:")
common.show_chart(memory_chart(plan, res.stat(stage, "usable_memory_gb")),
                  "Memory per GPU, by kind (red: what a plan may use)")
common.show_chart(time_chart(plan), "One optimizer step, by part")
dequant_s, adapter_s = plan["compute_s"]["dequantization"], plan["compute_s"]["adapters"]
if dequant_s > 0 or adapter_s > 0:
    parts = ([f"{fmt.duration_s(dequant_s)} dequantizes the "
              f"{'4-bit' if res.stat(stage, 'base_bytes_per_param') < 0.9 else '8-bit'} base to BF16 before its "
              "matmuls"] if dequant_s > 0 else []) + \
            ([f"{fmt.duration_s(adapter_s)} runs the LoRA adapters"] if adapter_s > 0 else [])
    st.caption(f"Of the {fmt.duration_s(plan['time_s']['compute'])} of compute per step, " + " and ".join(parts)
               + ", forward and backward (a recompute repeats them in its own part).")

st.subheader("Fastest plans that fit")
try:
    top = _top_plans(dump_yaml(common.state().scenario), stage, scn)
except ScenarioError as err:
    top = []
    st.warning(common.md_escape(schema.error_in_words(err)), icon="⚠️")
if top:
    ten = len(top) >= 10  # fewer when fewer fit ("the ten fastest" over three rows contradicted the table)
    many = "The one layout" if len(top) == 1 else f"The {fmt.num(len(top))} layouts"  # not "The 1 layouts"
    st.caption(("The ten fastest layouts" if ten else many) + " that fit in memory "
               "with the settings pinned above" + ("" if ten else " (no more fit)") + ", fastest first; "
               "✓ marks the one the estimate uses. (SP): with sequence parallelism; chunks: model chunks per "
               "pipeline stage (interleaved schedule).")
    table, formats = plans_table(top, plan)
    # short headers, their words here: with a DualPipe column the table ran 77 px past the page at 1280 px
    helps = {"Per step": "micro-batches per optimizer step", "Memory": "memory per GPU",
             "MFU": "model FLOPs utilization the stage's hours use",
             "Layout": "tensor (TP), pipeline (PP), data (DP), context (CP) and expert (EP) parallel degrees; "
                       "(SP): sequence parallelism with the tensor parallelism",
             "Schedule": "pipeline schedule: 1F1B (with its model chunks per stage when interleaved) or DualPipe"}
    common.number_table(table, formats, {c: c for c in table.columns}, helps)
else:
    st.info("No layout fits in memory with the settings pinned above.")
