"""Checkpoints and reliability: interval U-curve, retention policies, storage held over time."""
import altair as alt
import numpy as np
import pandas as pd
import streamlit as st

import costcore
from costcore import fmt
from costcore.scenario import schema
from costcore.engine.formulas import DAYS_PER_MONTH, held_checkpoints
from costcore.scenario.schema import STAGE_LABELS
from pages import common

res = common.frame(
    "Checkpoints and reliability",
    "Large jobs are interrupted: about one unexpected interruption per 50,000 GPU-hours (Llama 3). Each "
    "one loses the work since the last checkpoint plus the restart; each checkpoint stalls training "
    "while it is written. Checkpointing too often wastes write time, too rarely wastes recomputation: "
    "the **Young/Daly** interval √(2δM) balances the two. What you keep, and on which tier, sets the "
    "storage bill.")

train = [s for s in res.stages if s != "eval"]
if not train:
    st.info("No training stage is switched on.")
    st.stop()
common.view_seed("stage", train)  # a link's stage, if this plan trains it
stage = st.selectbox("Stage", train, format_func=lambda s: STAGE_LABELS[s], key="ckpt_stage")
p = f"stages.{stage}."
c1, c2, c3 = st.columns(3)
with c1:
    common.knob(p + "ckpt_interval_h", "Hours between checkpoints (0 = Young/Daly)", 0.0, 24.0, 0.05)
    common.knob(p + "ckpt_type", "Checkpoint contents")
    common.knob("reliability.ckpt_write_gbps_per_gpu", "Checkpoint write speed per GPU (GB/s)", 0.01, 10.0, 0.01)
with c2:
    common.knob(p + "keep_last", "Keep last K (0 = all)", 0, 50, 1)
    common.knob(p + "milestone_every", "Keep every M-th forever (0 = none)", 0, 100, 1)
with c3:
    common.knob("reliability.failures_per_gpu_hour", "Interruptions per GPU-hour", 0.0, 0.0002, 0.000001,
                fmt_str="%.6f")
    common.knob("storage.retention_months", "Keep after the stage (months)", 0.0, 60.0, 1.0)
res = common.result()
i = costcore.STAGES.index(stage)
yd = res.stat(stage, "young_daly_h")
tau = res.stat(stage, "ckpt_interval_h")
m = common.metric_row(4)
# durations in words at 3 digits: "0.05 h" was a 3.02-minute optimum shown with one digit
m[0].metric("Interval used", fmt.duration_s(tau * 3600.0), help=f"{tau:,.4g} h")
m[1].metric("Young/Daly optimum", fmt.duration_s(yd * 3600.0) if yd > 0 else "n/a",
            help=f"tau = sqrt(2 delta M) - delta = {yd:,.4g} h" if yd > 0 else "tau = sqrt(2 delta M) - delta")
m[2].metric("Checkpoint size", fmt.gb(res.stat(stage, "ckpt_gb")),
            help=f"written in {fmt.duration_s(res.stat(stage, 'ckpt_write_s'))}")
m[3].metric("Expected interruptions", fmt.num(res.stat(stage, 'interruptions')))

st.subheader("Cost against checkpoint interval")
write_h = res.stat(stage, "ckpt_write_s") / 3600
center = yd if yd > 0 else max(tau, 0.1)
# around the optimum: from just above the write time (all stall) to far past it (all lost work)
# within what the setting takes (0.001 h up): an optimum under 2.4 min put the curve's start below it, and the
# batch refused the whole curve with a traceback
f = schema.BY_PATH[p + "ckpt_interval_h"]
lo = max(center / 40, write_h * 1.2, f.min_nonzero)
taus = np.geomspace(lo, max(min(center * 40, 1000.0, f.hi), lo * 10), 120)
out = costcore.batch(res.scenario, {p + "ckpt_interval_h": taus}, full=True, vector=res.vector)
rs = list(costcore.RESOURCES)
PARTS = {"total": "Total", "hidden": schema.RESOURCE_LABELS["hidden"], "storage": schema.RESOURCE_LABELS["storage"]}
curve_long = pd.DataFrame({  # one row per interval and part (DataFrame.melt took 3 ms of a 53 ms rerun)
    "interval_h": np.tile(taus, 3), "part": np.repeat(list(PARTS.values()), len(taus)),
    "usd": np.concatenate([out[:, i, :len(rs)].sum(axis=1), out[:, i, rs.index("hidden")],
                           out[:, i, rs.index("storage")]])})
base = alt.Chart(curve_long).mark_line().encode(
    # the curve's own span: a "nice" log scale ran the axis 0.001-100 h around a curve from 0.007 to 10
    x=alt.X("interval_h:Q", scale=alt.Scale(type="log", domain=[float(taus[0]), float(taus[-1])], nice=False),
            title="Checkpoint interval (hours, log scale)"),
    y=alt.Y("usd:Q", title=f"{STAGE_LABELS[stage]} cost ($)", axis=common.usd_axis(),
            scale=alt.Scale(zero=False)),
    color=alt.Color("part:N", title="Cost", scale=alt.Scale(domain=list(PARTS.values()),
                                                            range=["#333333", "#E45756", "#F58518"])),
    tooltip=[alt.Tooltip("interval_h:Q", format=".2f", title="Interval (hours)"), alt.Tooltip("part:N", title="Cost"),
             alt.Tooltip("usd:Q", format="$,.0f", title="Dollars")])
marks = pd.DataFrame({"interval_h": [max(yd, 1e-4), max(tau, 1e-4)], "what": ["Young/Daly optimum", "current"]})
rules = alt.Chart(marks).mark_rule(strokeDash=[5, 3]).encode(
    x=alt.X("interval_h:Q", title="Checkpoint interval (hours, log scale)"),
    color=alt.Color("what:N", scale=alt.Scale(domain=["Young/Daly optimum", "current"],
                                              range=["#2ca02c", "#1f77b4"]), title="Interval"),
    tooltip=[alt.Tooltip("what:N", title="Interval"), alt.Tooltip("interval_h:Q", format=".2f", title="Hours")])
common.show_chart(common.layer(base, rules, independent_colors=True),
                  f"{STAGE_LABELS[stage]}: cost against the checkpoint interval", height=300)

st.subheader("Retention policies compared")
keep_now = int(schema.effective_value(res.scenario, p + "keep_last"))
mile_now = int(schema.effective_value(res.scenario, p + "milestone_every"))
weights_now = schema.effective_value(res.scenario, p + "ckpt_type") == "weights"
now = ("keep all" if keep_now == 0 else f"last {keep_now}" + (f" + every {mile_now}th" if mile_now else "")
       + (", weights only" if weights_now else ""))
policies = {f"this plan: {now}": {},
            "keep all": {"keep_last": 0, "milestone_every": 0},
            "keep last 3": {"keep_last": 3, "milestone_every": 0},
            "last 3 + every 10th": {"keep_last": 3, "milestone_every": 10},
            "last 3, weights only": {"keep_last": 3, "milestone_every": 0, "ckpt_type": "weights"}}
rows = []
for name, pol in policies.items():
    s2 = res.scenario
    for k, v in pol.items():
        s2 = schema.set_path(s2, p + k, v)
    if "ckpt_type" not in pol:
        s2 = schema.set_path(s2, p + "ckpt_type", schema.effective_value(res.scenario, p + "ckpt_type"))
    r2 = costcore.estimate(s2) if pol else res  # this plan's own row is the estimate already on screen
    # the checkpoints' own line items: the stage's whole storage hid them behind a multimodal stage's $123k of
    # media, the same in every row
    rows.append({"policy": name, "storage_usd": r2.item_usd(stage, "storage.ckpt_hot", "storage.ckpt_cold"),
                 "network_usd": r2.item_usd(stage, "network.ckpt_replication"), "kept_gb": r2.stat(stage, "ckpt_held_gb"),
                 "held_gb": r2.stat(stage, "storage_peak_gb")})
pol_df = pd.DataFrame(rows)
common.money_table(pol_df[["policy", "storage_usd", "network_usd", "kept_gb", "held_gb"]], ["storage_usd", "network_usd"],
                   {"policy": "Retention policy", "storage_usd": "Checkpoint storage", "network_usd": "Checkpoint replication",
                    "kept_gb": "Checkpoints kept", "held_gb": "All storage at the end"},
                   {"kept_gb": fmt.gb, "held_gb": fmt.gb},
                   {"kept_gb": "checkpoints retained after the stage, by the policy",
                    "held_gb": "everything the stage holds as it ends: checkpoints, datasets and media"},
                   widths={"policy": "medium"})

st.subheader("Checkpoint storage held over time")
# Everything below is the kernel's own numbers (stats): checkpoints written every ckpt_spacing_h,
# ckpt_held of ckpt_kept_gb each kept after the stage, ckpt_hot_months on the hot tier, then
# ckpt_cold_months on the cold one. The in-run curve counts held checkpoints with the kernel's rule.
n = int(res.stat(stage, "ckpt_count"))
spacing_d = res.stat(stage, "ckpt_spacing_h") / 24.0
keep = float(schema.effective_value(res.scenario, p + "keep_last"))
mile = float(schema.effective_value(res.scenario, p + "milestone_every"))
gb = res.stat(stage, "ckpt_gb")
ks = np.unique(np.linspace(1, max(n, 1), min(max(n, 1), 200)).round())
end_d = n * spacing_d
hot_d = res.stat(stage, "ckpt_hot_months") * DAYS_PER_MONTH
cold_d = res.stat(stage, "ckpt_cold_months") * DAYS_PER_MONTH
final = res.stat(stage, "ckpt_held_gb")
held = pd.DataFrame({"day": ks * spacing_d, "gb": [held_checkpoints(k, keep, mile) * gb for k in ks],
                     "tier": "hot (during run)"})
after = pd.DataFrame({"day": [end_d, end_d + hot_d, end_d + hot_d, end_d + hot_d + cold_d],
                      "gb": [final, final, final, final],
                      "tier": ["hot (retained)", "hot (retained)", "cold", "cold"]})
hist = pd.concat([held, after])
tiers = [t for t, c in (("hot (during run)", "#F58518"), ("hot (retained)", "#d62728"), ("cold", "#4C78A8"))
         if t != "hot (retained)" or hot_d > 0]  # a tier the policy never uses gets no legend entry
colors = {"hot (during run)": "#F58518", "hot (retained)": "#d62728", "cold": "#4C78A8"}
in_tb = float(hist.gb.max()) >= 10_000  # 45,000 GB reads as 45 TB
hist = hist.assign(shown=hist.gb / 1000.0 if in_tb else hist.gb)
unit = "TB" if in_tb else "GB"
common.show_chart(alt.Chart(hist).mark_line(interpolate="step-after").encode(
    x=alt.X("day:Q", title="Days from the stage start"), y=alt.Y("shown:Q", title=f"Checkpoints held ({unit})"),
    color=alt.Color("tier:N", title="Storage tier", scale=alt.Scale(domain=tiers, range=[colors[t] for t in tiers])),
    tooltip=[alt.Tooltip("day:Q", format=".1f", title="Day"), alt.Tooltip("shown:Q", format=",.3s", title=f"{unit} held"),
             alt.Tooltip("tier:N", title="Storage tier")],
), f"{STAGE_LABELS[stage]}: checkpoint storage held over time", height=260)
common.how_computed(res, stage)
