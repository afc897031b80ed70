"""Compare scenarios and apply optimization levers."""
import re

import altair as alt
import streamlit as st

import costcore
from costcore.analysis import budget as bud
from costcore import fmt
from costcore.analysis import levers
from costcore.scenario import schema
from costcore.scenario.schema import STAGE_LABELS, ScenarioError
from pages import common

res = common.frame(
    "Compare and optimize",
    "Put the current plan next to another one (a preset, a saved snapshot or an uploaded file) to see which "
    "inputs differ and what that does to every stage and resource. Below, the **levers**: concrete what-ifs "
    "computed by the core on the current plan, sorted by what they save, each with the risk it carries. "
    "One click applies a lever.")
ss = common.state()

st.header("Side by side")
c1, c2, c3 = st.columns(3)
def _save_b():
    ss["saved_b"] = ss.scenario
    st.session_state["cmp_b"] = "saved snapshot"  # B is what was just saved (it stayed on the preset picked before)


c1.button("Save the current plan as B", width="stretch", on_click=_save_b)
presets = costcore.preset_names()
options = (["saved snapshot"] if "saved_b" in ss else []) + presets
default_b = "saved snapshot" if "saved snapshot" in options else (ss.preset if ss.preset in options else options[0])
titles = common.preset_titles()  # presets in words, as the sidebar's picker shows them
choice = c2.selectbox("Compare with (B)", options, key="cmp_b", index=options.index(default_b),
                      format_func=lambda n: "Saved snapshot" if n == "saved snapshot" else titles.get(n, n),
                      help="By default B is the preset the current plan started from: the diff shows your changes.")
up = c3.file_uploader("or upload B (YAML)", type=["yaml", "yml"], key="cmp_upload",
                      max_upload_size=common.SMALL_UPLOAD_MB)
b_scn = None
if up is not None:
    try:
        b_scn = costcore.load_yaml_text(up.getvalue(), what=fmt.one_line(up.name or "the upload", 80))  # the file named
    except ScenarioError as err:
        st.warning(common.md_escape(f"{err}. Comparing with the selection instead."))
if b_scn is None:
    b_scn = ss["saved_b"] if choice == "saved snapshot" else costcore.load_preset(choice)
b = costcore.estimate(b_scn)
m = common.metric_row(3)
# a plan that cannot run has no total, here as on every page ($25.8B beside "No total", and a green -100%)
m[0].metric("A: current", fmt.usd(res.total_usd) if res.feasible else "No total",
            help=None if res.feasible else "A cannot run as planned: the message above says why.")
m[1].metric("B", fmt.usd(b.total_usd) if b.feasible else "No total",
            help=None if b.feasible else "B cannot run as planned: the line below says why.")
if res.feasible and b.feasible:
    same = fmt.usd(b.total_usd) == fmt.usd(res.total_usd)  # equal as shown: no red or green arrow for "+0.0%"
    m[2].metric("B - A", fmt.usd(b.total_usd - res.total_usd),
                delta="no change" if same else ("from nothing" if res.total_usd <= 0
                                                else fmt.share(res.share_of_total(b.total_usd) - 1, signed=True)),
                delta_color="off" if same else "inverse", delta_arrow="off" if same else "auto")
else:
    m[2].metric("B - A", "n/a", help="No difference: a plan that cannot run has no total.")
if not b.feasible:
    st.warning("B cannot run as planned: " + common.md_escape(" ".join(b.infeasible)), icon=":material/block:")
def _value_words(path: str, v) -> str:
    """A scenario value as the widgets show it: a choice in words, yes or no, a number at 3 significant digits
    ("0 (auto)" where 0 asks the model: an MFU of 0 read as zero utilization)."""
    f = schema.BY_PATH.get(path)
    if f is None:  # a stage switched on or off
        return str(v)
    if f.kind == "enum":
        return common.choice_words(path, v)
    if f.kind == "bool":
        return "yes" if v else "no"
    if isinstance(v, (int, float)):
        if v in (0, -1):  # what 0 or -1 means, as the setting's doc says it ("0 = searched", "-1 = searched")
            said = re.search(r"(?:^|[\s;(])" + ("-1" if v == -1 else "0") + r" = ([^.;,(]+)", f.doc or "")
            if said or (v == 0 and f.min_nonzero and f.default == 0):
                short = said.group(1).strip() if said and len(said.group(1).split()) <= 3 else "auto"
                return f"{int(v)} ({short})"  # a budget of 0 is "none", an MFU of 0 asks the layout model: "auto"
        if f.kind == "int":  # a count as typed: 6,144 GPUs, not 6.14k
            return f"{int(v):,}"
        if str(f.unit or "").startswith("$"):  # $2.99/GPU-hour, $35.0M
            return fmt.usd(float(v)) + str(f.unit)[1:]
        return fmt.num(float(v))
    return str(v)


inputs, costs = bud.compare(res, b)
left, right = st.columns([2, 3])
with left:
    st.subheader(f"Inputs that differ ({len(inputs)})")
    shown = inputs.assign(input=[schema.BY_PATH[k].label if k in schema.BY_PATH else
                                 STAGE_LABELS.get(k.split(".")[-1], k) for k in inputs["input"]],
                          A=[_value_words(k, v) for k, v in zip(inputs["input"], inputs["A"])],
                          B=[_value_words(k, v) for k, v in zip(inputs["input"], inputs["B"])])
    if shown.empty:  # not an empty grid of blank rows
        st.info("None: B is the same plan as A.")
    else:
        st.dataframe(shown, hide_index=True, width="stretch", height=min(320, 38 + 35 * len(shown)),
                     column_config={"input": st.column_config.Column("Input", width="medium",
                                                                     help="the scenario field (exports keep its key)")})
with right:
    st.subheader("Cost by stage")
    by_stage = costs.groupby("stage", as_index=False)[["A", "B"]].sum().melt("stage", var_name="scenario", value_name="usd")
    by_stage["stage"] = by_stage.stage.map(common.STAGE_SHORT)
    common.show_chart(alt.Chart(by_stage).mark_bar().encode(
        x=alt.X("stage:N", sort=[common.STAGE_SHORT[s] for s in common.STAGES], title="Stage", axis=common.stage_axis()),
        xOffset=alt.XOffset("scenario:N"),
        y=alt.Y("usd:Q", title="Cost ($)", axis=common.usd_axis()),
        color=alt.Color("scenario:N", title="Scenario", scale=alt.Scale(domain=["A", "B"], range=["#4C78A8", "#F58518"])),
        tooltip=[alt.Tooltip("stage:N", title="Stage"), alt.Tooltip("scenario:N", title="Scenario"),
                 alt.Tooltip("usd:Q", format="$,.0f", title="Cost")]).properties(height=300),
        "Cost of each stage in scenario A and B")
    if not (res.feasible and b.feasible):
        st.caption("A stage that cannot run is drawn at the cost of the nearest layout the planner found, which "
                   "no run could take: " + " and ".join(n for n, r in (("A", res), ("B", b)) if not r.feasible)
                   + " has no total.")
by_resource = common.lazy_expander("Costs by stage and resource", "compare:by_resource")
if by_resource.open:
    with by_resource:
        common.money_table(common.in_words(costs),
                           ["A", "B", "B_minus_A"], {"B_minus_A": "B minus A", "stage": "Stage",
                                                     "resource": "Resource"})

st.header("Optimization levers")
lv = levers.levers(ss.scenario)
if not lv:
    st.info("No lever saves anything on this plan.")
for i, x in enumerate(lv):
    c1, c2, c3 = st.columns([5, 2, 1])
    c1.markdown(f"**{x.title}**  \nRisk: {x.risk}")
    if levers.source_text(x):
        c1.caption(f"Figures: {levers.source_text(x)}")
    c2.metric("saves", fmt.usd(x.saving_usd), delta="-" + fmt.share(res.share_of_total(x.saving_usd)),
              delta_color="inverse", help=f"new total {fmt.usd_exact(x.new_total_usd)}")

    def _apply(lever=x):
        ss.scenario = levers.apply(ss.scenario, lever)
        ss.rev += 1
        ss.setdefault("notes", []).append(f"Applied: {lever.title}. Saved {fmt.usd(lever.saving_usd)}.")

    c3.button("Apply", key=f"lever:{x.key}", on_click=_apply, width="stretch")
