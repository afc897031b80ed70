"""Pre-training and continued pre-training."""
import altair as alt
import numpy as np
import pandas as pd
import streamlit as st

import costcore
from costcore import fmt
from costcore.scenario.schema import RESOURCE_LABELS, STAGE_LABELS
from pages import common

res = common.frame(
    "Pre-training and CPT",
    "Pre-training teaches the model from raw text; continued pre-training (CPT) extends a trained model "
    "with new domain or language data. Both cost about **6 N FLOPs per token** plus attention "
    "(12·L·d·s), so compute grows with model size × tokens; how fast the GPUs turn FLOPs into progress "
    "(MFU) and how much time failures and checkpoints steal decide the rest.")



@st.cache_data(max_entries=64, show_spinner=False)
def tokens_curve(stage: str, xs: np.ndarray, usd: np.ndarray, cur: float) -> None:
    """The stage's cost by resource against its training tokens (``usd``: the kernel's cost of each resource
    at each of ``xs`` billion tokens), the current plan dashed. Cached on the kernel's numbers: a slider that
    moves one stage leaves the other's chart as it was, and its melt, Altair build and chart key (about
    10 ms of a 45 ms rerun) are skipped."""
    n, k = usd.shape
    long = pd.DataFrame({"tokens_b": np.repeat(xs, k), "usd": usd.reshape(-1),
                         "resource": np.tile([RESOURCE_LABELS[r] for r in costcore.RESOURCES], n)})
    area = alt.Chart(long).mark_area().encode(
        x=alt.X("tokens_b:Q", title="Tokens (billions)",
                scale=alt.Scale(type="log", domain=[float(xs[0]), float(xs[-1])], nice=False)),
        y=alt.Y("usd:Q", stack=True, title=f"{STAGE_LABELS[stage]} cost ($)", axis=common.usd_axis()),
        color=alt.Color("resource:N", title="Resource", scale=common.resource_scale()),
        tooltip=[alt.Tooltip("resource:N", title="Resource"),
                 alt.Tooltip("tokens_b:Q", format=",.0f", title="Tokens (billions)"),
                 alt.Tooltip("usd:Q", format="$,.0f", title="Cost")])
    rule = alt.Chart(pd.DataFrame({"tokens_b": [cur], "label": [f"now: {fmt.num(cur * 1e9)}"]})).mark_rule(
        color="black", strokeDash=[4, 3]).encode(x=alt.X("tokens_b:Q", title="Tokens (billions)"),
                                                 tooltip=[alt.Tooltip("label:N", title="Current plan")])
    common.show_chart(common.layer(area, rule),
                      f"{STAGE_LABELS[stage]}: cost as the training tokens change (dashed: the current plan)",
                      height=280)


for stage in ("pretrain", "cpt"):
    st.header(STAGE_LABELS[stage])
    on = common.stage_toggle(stage)
    if not on:
        st.caption("Switched off: switch it on to plan it with the defaults.")
        continue
    p = f"stages.{stage}."
    common.knob_columns(
        [(p + "tokens_b", "Tokens (billions)", 1.0, 30000.0 if stage == "pretrain" else 2000.0, 1.0, "log"),
         (p + "seq_len", "Sequence length", 512, 131072, 512, "pow2")],
        [(p + "num_gpus", "GPUs for this stage (0 = sidebar value)", None, None, 1, "number"),
         (p + "mfu", "MFU (0 = calibrated default)", 0.0, 0.75, 0.01)],
        [(p + "recompute", "Activation recompute"), (p + "tp", "Tensor parallel", 1, 16, 1)])
    res = common.stage_results(stage, bar=False, explain=False)
    st.caption(f"MFU used: {res.stat(stage, 'mfu'):.1%} · recompute: "
               f"{['none', 'selective', 'full'][int(res.stat(stage, 'recompute_mode'))]} · "
               f"{fmt.num(res.stat(stage, 'interruptions'))} expected interruptions · "  # 3 digits, as everywhere
               f"checkpoint {fmt.gb(res.stat(stage, 'ckpt_gb'))} every "
               f"{fmt.duration_s(res.stat(stage, 'ckpt_interval_h') * 3600.0)}")

    # Cost against tokens: one batch call of the kernel, current value marked.
    cur = res.stat(stage, "tokens") / 1e9
    xs = np.unique(np.concatenate([np.geomspace(max(cur / 10, 0.01), cur * 3, 60), [cur]]))
    out = costcore.batch(res.scenario, {p + "tokens_b": xs}, full=True, vector=res.vector)
    tokens_curve(stage, xs, np.ascontiguousarray(out[:, costcore.STAGES.index(stage), :len(costcore.RESOURCES)]), cur)
    common.how_computed(res, stage)
