"""Overview: total cost, stage x resource, line items, top drivers, stage shares."""
import altair as alt
import pandas as pd
import streamlit as st

from costcore import fmt
from costcore.scenario.schema import RESOURCE_LABELS, STAGE_LABELS
from pages import common

res = common.frame(
    "Overview",
    "The whole plan at a glance: what every stage costs, in which resource, and which line items "
    "drive the total. Change the model, tokens or hardware below or in the sidebar and every number "
    "on every page recomputes at once.")

# The knobs that move this plan most: model size, then the main stage's volume and context.
MAIN_VOLUME = {"pretrain": ("tokens_b", "Pre-training tokens (billions)", 1.0, 30000.0, 1.0),
               "cpt": ("tokens_b", "CPT tokens (billions)", 1.0, 2000.0, 1.0),
               "mm_align": ("samples", "Alignment samples", 1000, 100_000_000, 1000),
               "mm_cpt": ("samples", "Multimodal pre-training samples", 1000, 100_000_000, 1000),
               "mm_tune": ("samples", "Multimodal tuning samples", 1000, 100_000_000, 1000),
               "sft": ("samples", "SFT samples", 1000, 5_000_000, 1000),
               "dpo": ("pairs", "DPO preference pairs", 1000, 2_000_000, 1000),
               "rl": ("steps", "RL steps", 10, 5000, 10),
               "eval": ("runs", "Evaluation runs", 1, 500, 1)}
main = next((s for s in MAIN_VOLUME if s in res.stages), None)
c1, c2, c3 = st.columns(3)
with c1:
    # 0.01 B to 5,000 B on a log ladder (70B sits two thirds along); any other size can be typed
    common.knob("model.params_b", "Model size (billion parameters)", widget="log",
                typed="Or type a model size (billion parameters)")
if main:
    key, label, lo, hi, step = MAIN_VOLUME[main]
    with c2:
        common.knob(f"stages.{main}.{key}", label, lo, hi, step, "log")
    if main == "rl":  # an RL sequence is its prompt and response: stages.rl.seq_len is read by nothing
        with c3:
            common.knob("stages.rl.response_tokens", f"{STAGE_LABELS[main]}: response tokens (average)", 128, 32768,
                        128, "pow2")
    elif main != "eval":
        with c3:
            common.knob(f"stages.{main}.seq_len", f"{STAGE_LABELS[main]}: sequence length", 512, 131072, 512, "pow2")

res = common.result()
common.show_checks(res)

st.subheader("Cost by stage and resource")
common.stacked_bar(res)


def stages_table() -> None:
    tbl = res.stage_table()
    if tbl.empty:
        st.info("No stage is switched on.")
        return
    tbl["stage"] = tbl.stage.map(STAGE_LABELS)
    # Two tables: eleven columns in one were wider than the page (the last scrolled out of sight and
    # "Hidden costs" lost its end); the total, GPU-hours and time first, each resource after them.
    common.money_table(tbl[["stage", "total", "gpu_hours", "wall_days"]], ["total"],
                       {"total": "Total cost", "gpu_hours": "GPU-hours", "wall_days": "Wall-clock time"},
                       {"gpu_hours": fmt.gpu_hours, "wall_days": fmt.days},
                       {"gpu_hours": "Billed: the run with its failures, restarts and stalls, plus repeated "
                                     "experiments",
                        "wall_days": "The run's length on its GPUs, failures and stalls included; setup and "
                                     "repeated experiments not"})
    money = list(RESOURCE_LABELS)  # in the order of the bar chart's legend
    st.markdown("**Each stage's cost by resource**")
    common.money_table(tbl[["stage", *money]], money, {r: RESOURCE_LABELS[r] for r in money})


def top_drivers() -> None:
    items = res.line_items()
    top = items[items.usd > 0].sort_values("usd", ascending=False).head(8).copy() if not items.empty else items
    if top.empty:
        st.info("No line item costs anything.")
        return
    top["share"] = res.share_of_total(top.usd)
    top = common.in_words(top)
    # the share as text at 3 significant digits (a progress bar's printf format wrote 5.1% for 5.097%), and no bar:
    # it took the width the line item's words needed ("Media storage (raw, shar")
    common.number_table(top[["stage", "label", "resource", "kind", "usd", "share"]], {"usd": fmt.usd, "share": fmt.share},
                        {"stage": "Stage", "label": "Line item", "resource": "Resource",
                         "kind": "Fixed or elastic", "usd": "Cost", "share": "Share of total"}, {"usd": common.MONEY_HELP})


def stage_shares() -> None:
    shares = pd.DataFrame([{"stage": STAGE_LABELS[s], "key": s, "usd": res.stat(s, "usd_total"),
                            "cost": fmt.usd(res.stat(s, "usd_total")),
                            "of_total": res.share_of_total(res.stat(s, "usd_total"))} for s in res.stages])
    if shares.empty:
        st.info("No stage is switched on.")
        return
    shares["share"] = shares.of_total.map(fmt.share)
    shares["on_arc"] = shares.share.where(shares.of_total >= 0.04, "")  # slivers under 4%: in the tooltip only
    base = alt.Chart(shares).encode(theta=alt.Theta("usd:Q", stack=True), order=alt.Order("key:N"))
    donut = base.mark_arc(innerRadius=55, outerRadius=105).encode(
        color=alt.Color("stage:N", title="Stage", scale=common.stage_color_scale(shares.stage),
                        legend=alt.Legend(labelLimit=220)),
        tooltip=[alt.Tooltip("stage:N", title="Stage"), alt.Tooltip("cost:N", title="Cost"),
                 alt.Tooltip("share:N", title="Share")])
    labels = base.mark_text(radius=128, fontSize=12).encode(text=alt.Text("on_arc:N"))
    common.show_chart((donut + labels).properties(height=300), "Share of the total by stage")


# One of these is drawn at a time (a slider move redraws the open one only, not two more tables and a chart)
common.lazy_tabs({"Stages: cost, GPU-hours and time": stages_table, "Top cost drivers": top_drivers,
                  "Each stage's share": stage_shares}, "overview:tab")

all_items = common.lazy_expander("All line items (stage × resource × item, fixed or elastic)", "overview:items")
if all_items.open:
    with all_items:
        li = res.line_items()
        # the items at $0 are left out on screen (every stage listed the reward verifier of RL, the media of the
        # multimodal phases...); the CSV keeps every row
        shown = li[li.usd != 0].drop(columns=["item", "stage_name", "resource_name"])  # in words below; the CSV has both
        common.money_table(common.in_words(shown), ["usd"],
                           {"usd": "Cost", "label": "Line item", "kind": "Fixed or elastic"})
        st.caption(f"{(li.usd == 0).sum()} items at $0 are left out here; the CSV lists all {len(li)}.")
        st.download_button("Download line items (CSV)", lambda: fmt.to_csv(li), "line_items.csv", "text/csv")
