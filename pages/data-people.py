"""Data, evaluation and people."""
import altair as alt
import pandas as pd
import streamlit as st

from costcore.scenario.schema import STAGE_LABELS
from costcore import fmt
from pages import common

res = common.frame(
    "Data, evaluation and people",
    "Outside the GPU bill: buying and cleaning data, human labels and their review, synthetic data, "
    "evaluation runs and human raters, the team, and the platform. Post-training is often cheaper in "
    "GPUs than in people and labels; labor and ops are billed for each stage's setup plus run time.")

st.header("Labeling and synthetic data")
post = [s for s in ("sft", "dpo", "rl") if s in res.stages]
if post:
    stage = st.selectbox("Stage", post, format_func=lambda s: STAGE_LABELS[s], key="data_stage")
    p = f"stages.{stage}."
    c1, c2, c3 = st.columns(3)
    with c1:
        common.knob(p + "labels", "Human-labeled samples", 0, 1_000_000, 500, "log")
    with c2:
        common.knob(p + "usd_per_label", "$ per label", 0.0, 100.0, 0.5)
        common.knob("data.review_fraction", "Review fraction", 0.0, 1.0, 0.05)
    with c3:
        common.knob(p + "synthetic_tokens_m", "Synthetic tokens (millions)", 0.0, 10000.0, 10.0, "log")
        common.knob("data.usd_per_m_synthetic_tokens", "$ per million synthetic tokens", 0.0, 60.0, 0.5)
else:
    st.caption("No post-training stage is on.")

st.header("Evaluation")
if common.stage_toggle("eval"):
    common.knob_columns([("stages.eval.runs", "Evaluation runs", 1, 500, 1),
                         ("stages.eval.benchmark_tokens_m", "Scored tokens per run (millions)", None, None, 1.0,
                          "number"),
                         ("stages.eval.decode_batch", "Sequences decoded at once", None, None, 16, "number")],
                        [("stages.eval.human_samples", "Human-rated samples per run", 0, 5000, 50),
                         ("stages.eval.generated_tokens_m", "Generated tokens per run (millions)", None, None, 1.0,
                          "number"),
                         ("stages.eval.decode_tp", "GPUs per decoding replica (0 = searched)", None, None, 1,
                          "number")],
                        [("stages.eval.usd_per_human_sample", "$ per human rating", 0.0, 50.0, 0.5),
                         ("stages.eval.context_tokens", "Context while decoding (tokens)", 512, 131072, 512, "pow2"),
                         ("stages.eval.media_items_k", "Media items scored per run (thousands; 0 = text only)", None,
                          None, 1.0, "number"),
                         ("stages.eval.weight_bits", "Bits per weight while decoding", None, None, None, "slider", None, None,
                          [16, 8, 4])])
    common.stage_results("eval", bar=False)

st.header("People and platform")
roles = [("researcher", "Researchers"), ("ml_engineer", "ML engineers"), ("data_engineer", "Data engineers"),
         ("infra_engineer", "Infra engineers")]
cols = st.columns(4)
for col, (role, label) in zip(cols, roles):
    with col:
        common.knob(f"labor.{role}.fte", f"{label} (FTE)", 0.0, 50.0, 0.5)
        common.knob(f"labor.{role}.usd_per_month", "$ per month", 0.0, 60000.0, 500.0)
common.knob("ops.usd_per_month", "Platform and operations, $ per month", 0.0, 200000.0, 1000.0)

res = common.result()
df = common.resource_frame(res)
if not df.empty:
    df = df[df.resource_key.isin(["data", "labor", "ops"])]
    st.subheader("Data, labor and ops by stage")
    common.show_chart(alt.Chart(df).mark_bar().encode(
        x=alt.X("stage:N", sort=[common.STAGE_SHORT[s] for s in common.STAGES], title="Stage",
                axis=common.stage_axis()),
        y=alt.Y("sum(usd):Q", title="Cost ($)", axis=common.usd_axis()),
        color=alt.Color("resource:N", title="Resource", scale=common.resource_scale(("data", "labor", "ops"))),
        tooltip=[alt.Tooltip("stage_name:N", title="Stage"), alt.Tooltip("resource:N", title="Resource"),
                 alt.Tooltip("exact:N", title="Cost")],
    ).properties(height=280), "Data, labor and operations cost of each stage")
    months = pd.DataFrame([{"Stage": STAGE_LABELS[s], "Months billed": res.stat(s, "months")} for s in res.stages])
    common.number_table(months, {"Months billed": fmt.sig3}, width="content")
