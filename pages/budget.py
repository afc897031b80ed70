"""Budget and timeline: budget lines and alerts, fixed vs elastic, calendar, lifecycle, attribution."""
import altair as alt
import pandas as pd
import streamlit as st

from costcore.analysis import budget as bud
from costcore import fmt
from costcore.scenario import schema as costcore_schema
from costcore.scenario.schema import RESOURCE_LABELS, RESOURCES, STAGE_LABELS
from pages import common

res = common.frame(
    "Budget and timeline",
    "Teams do not only ask *how much* but *when, against which budget, and what recurs*. Set budget and "
    "warning lines per stage, per resource and in total; see which part of the cost is fixed (people, "
    "platform, datasets bought outright) and which elastic (GPU time, tokens, samples, labels bought per sample); lay the stages on a calendar; "
    "and repeat post-training as a lifecycle of iterations.")
scn = common.scenario()


def budget_and_fixed() -> None:
    """Budget and warning lines with their status; the fixed and elastic split."""
    res = common.result()
    st.subheader("Budget lines")
    c1, c2 = st.columns(2)
    with c1:
        common.knob("budget.total_usd", "Total budget ($, 0 = none)", widget="number", step=100000.0, fmt_str="%.0f")
    with c2:
        common.knob("budget.warn_at", "Warning line (share of each budget)", 0.5, 1.0, 0.05)
    # three boxes a row: six in one row left each ~100 px, which cut $30,000,000 to "300000(" (and "3000000" at
    # 800 px, a tenth of it); boxes aligned at the bottom when a long stage name wraps its label
    stages = list(res.stages)
    for row in range(0, len(stages), 3):
        cols = st.columns(3, vertical_alignment="bottom")
        for col, s in zip(cols, stages[row:row + 3]):
            with col:
                common.knob(f"budget.{s}_usd", f"{common.STAGE_LABELS[s]} budget ($)", widget="number",
                            step=10000.0, fmt_str="%.0f")
    per_resource = common.lazy_expander("Budgets per resource", "budget:per_resource")
    if per_resource.open:
        with per_resource:
            rcols = st.columns(len(RESOURCES))
            for col, r in zip(rcols, RESOURCES):
                with col:
                    common.knob(f"budget.{r}_usd", f"{RESOURCE_LABELS[r]} ($)", widget="number", step=10000.0,
                                fmt_str="%.0f")
    res = common.result()
    lines = bud.budget_lines(res)
    if lines.empty:
        st.info("No budget is set: enter one above to get status and alerts on every page.")
    else:
        show = lines.copy()
        show["name"] = [STAGE_LABELS.get(n, RESOURCE_LABELS.get(n, n)) for n in show.name]
        show["scope"] = show.scope.str.capitalize()
        # a resource's name ("compute") gets its capital; a stage's label keeps its own ("Preference alignment (DPO)")
        show["name"] = [n[:1].upper() + n[1:] for n in show.name]
        show["status"] = show.status.map({"ok": "Within budget", "warning": "Past the warning line", "over": "Over budget",
                                          "unchecked": "Not checked: cannot run"})
        show["share_used"] = 100 * show.share_used  # percent, shown to 3 significant digits
        common.money_table(show[["scope", "name", "budget_usd", "warning_usd", "actual_usd", "share_used", "status"]],
                           ["budget_usd", "warning_usd", "actual_usd"],
                           {"scope": "Scope", "name": "Budget for", "budget_usd": "Budget", "warning_usd": "Warning line",
                            "actual_usd": "Planned cost", "status": "Status"},
                           column_config={"share_used": st.column_config.ProgressColumn(
                               "Share of the budget used", format="%.3g%%", min_value=0, max_value=150)})

    st.subheader("Fixed and elastic cost")
    common.knob("hardware.reserved", "GPUs on a reserved commitment (their time is then fixed cost)")
    if costcore_schema.effective_value(common.scenario(), "hardware.reserved"):
        common.knob_columns([("hardware.reserved_months", "Reservation term (months)", 1, 60, 1)],
                            [("hardware.reserved_gpus", "Reserved GPUs (0 = the plan's GPU count)", None, None, 8,
                              "number")])
    res = common.result()  # the toggle above may have changed it
    li = res.line_items()
    idle = li.loc[li.item == "hidden.reserved_idle", "usd"].sum() if not li.empty else 0.0
    if costcore_schema.effective_value(res.scenario, "hardware.reserved"):
        st.caption(f"The reservation is billed for its whole term: the hours the plan leaves unused cost "
                   f"{common.md_escape(fmt.usd(idle))} (Idle reserved capacity, a hidden cost shared among the stages "
                   "by their GPU-hours). A reservation pays off only when the plan keeps its GPUs busy.")
    if not li.empty:
        fe = li.groupby(["stage", "kind"], as_index=False).usd.sum()
        fe["stage_short"] = fe.stage.map(common.STAGE_SHORT)
        m = common.metric_row(3)
        m[0].metric("Fixed", fmt.usd(res.fixed_usd), help="committed: team, platform, datasets and media licences bought outright and kept (labels and captions bought per sample are elastic)"
                    + (", and the reserved GPUs' time" if costcore_schema.effective_value(res.scenario, "hardware.reserved")
                       else ""))
        m[1].metric("Elastic", fmt.usd(res.elastic_usd), help="scales with GPU time, tokens and samples: GPU time on "
                    "demand, labels and captions bought per sample, transfers, storage")
        m[2].metric("Fixed share", fmt.share(res.fixed_share))  # 20.2%, three digits as elsewhere
        fe["stage_name"] = fe.stage.map(STAGE_LABELS)
        fe["kind"] = fe.kind.str.capitalize()  # the legend in words: Fixed, Elastic
        common.show_chart(alt.Chart(fe).mark_bar().encode(
            x=alt.X("stage_short:N", sort=[common.STAGE_SHORT[s] for s in common.STAGES], title="Stage",
                    axis=common.stage_axis()),
            y=alt.Y("usd:Q", title="Cost ($)", axis=common.usd_axis()),
            color=alt.Color("kind:N", title="Fixed or elastic",
                            scale=alt.Scale(domain=["Fixed", "Elastic"], range=["#B279A2", "#4C78A8"])),
            tooltip=[alt.Tooltip("stage_name:N", title="Stage"), alt.Tooltip("kind:N", title="Fixed or elastic"),
                     alt.Tooltip("usd:Q", format="$,.0f", title="Cost")]).properties(height=240),
            "Fixed and elastic cost of each stage")


def timeline() -> None:
    """The stages on a calendar, monthly and cumulative spend, GPUs and storage held."""
    res = common.result()
    c1, c2, c3 = st.columns(3)
    with c1:
        common.knob("schedule.start_date", "Start date")
    with c2:
        later = [s for s in res.stages[1:]]
        if later:
            which = st.selectbox("Overlap of", later, format_func=lambda s: STAGE_LABELS[s], key="ov_stage")
    with c3:
        if later:
            common.knob(f"schedule.{which}_overlap", "with the stage before (share of its span)", 0.0, 1.0, 0.05)
    res = common.result()
    tl = bud.timeline(res)
    sched = tl.schedule.copy()
    sched["label"] = [f"{common.STAGE_SHORT[s]}" + (f" #{k}" if k > 1 else "") for s, k in zip(sched.stage, sched.iteration)]
    sched["stage_short"] = sched.stage.map(common.STAGE_SHORT)
    # setup (preparation, no GPUs) and run drawn as separate segments: a 2.6 h run is not two weeks long
    seg = pd.concat([sched.assign(part="setup (no GPUs)", seg_start=sched.start, seg_end=sched.run_start),
                     sched.assign(part="run on GPUs", seg_start=sched.run_start, seg_end=sched.end)])
    seg = seg[seg.seg_end > seg.seg_start]
    gantt = alt.Chart(seg).mark_bar(cornerRadius=3).encode(
        x=alt.X("seg_start:T", title="Date"), x2=alt.X2("seg_end:T"),
        y=alt.Y("stage_short:N", sort=[common.STAGE_SHORT[s] for s in common.STAGES], title="Stage"),
        color=alt.Color("stage_short:N", legend=None, scale=alt.Scale(domain=list(common.STAGE_SHORT_COLORS),
                                                                      range=list(common.STAGE_SHORT_COLORS.values()))),
        opacity=alt.Opacity("part:N", title="Part", scale=alt.Scale(domain=["setup (no GPUs)", "run on GPUs"],
                                                                     range=[0.3, 1.0])),
        tooltip=[alt.Tooltip("label:N", title="Stage"), alt.Tooltip("part:N", title="Part"),
                 alt.Tooltip("seg_start:T", title="from"), alt.Tooltip("seg_end:T", title="to"),
                 alt.Tooltip("gpus:Q", format=",.0f", title="GPUs")])
    common.show_chart(gantt,
                      "When each stage runs (faint: preparation; solid: the run on GPUs)",
                      # a band of 34 px a stage: a pixel height counts the title and the axes, and with two
                      # stages 124 px left the bars none (the labels printed over each other)
                      height=alt.Step(34))
    last_end = sched.end.max()
    show_retention = retention_toggle()

    mon = tl.monthly.copy()
    after_usd = float(mon[mon.month > last_end].usd.sum()) if not mon.empty else 0.0
    if not show_retention and not mon.empty:
        mon = mon[mon.month <= last_end]
    if not mon.empty:
        mon["stage_short"] = mon.stage.map(common.STAGE_SHORT)
        mon["stage_name"] = mon.stage.map(STAGE_LABELS)
        common.show_chart(alt.Chart(mon).mark_bar().encode(
            x=alt.X("yearmonth(month):T", title="Month"),
            y=alt.Y("sum(usd):Q", title="Spend per month ($)", axis=common.usd_axis()),
            color=alt.Color("stage_name:N", title="Stage", scale=common.stage_color_scale(mon.stage_name)),
            tooltip=[alt.Tooltip("stage_name:N", title="Stage"), alt.Tooltip("yearmonth(month):T", title="Month"),
                     alt.Tooltip("sum(usd):Q", format="$,.0f", title="Spend")]
        ).properties(height=260), "Monthly spend by stage")
        # Each month's spend is reached at the month's end (the last stage's end when the retention period is
        # not drawn), starting from nothing at the start date: a point at the month's start would show July's
        # spend as spent on July 1.
        cum = mon.groupby("month", as_index=False).usd.sum().sort_values("month")
        ends = cum.month + pd.offsets.MonthBegin(1)
        cum["through"] = ends.where(ends <= last_end, last_end) if not show_retention else ends
        cum["cumulative"] = cum.usd.cumsum()
        cum = pd.concat([pd.DataFrame({"through": [sched.start.min()], "cumulative": [0.0]}),
                         cum[["through", "cumulative"]]], ignore_index=True)
        layers = [alt.Chart(cum).mark_line(point=True, color="#333").encode(
            x=alt.X("through:T", title="Date"), y=alt.Y("cumulative:Q", title="Cumulative spend ($)", axis=common.usd_axis()),
            tooltip=[alt.Tooltip("through:T", title="Spent by"), alt.Tooltip("cumulative:Q", format="$,.0f", title="Cumulative")])]
        lines = bud.budget_lines(res)
        total_budget = [r for r in lines.itertuples() if r.scope == "total"] if not lines.empty else []
        if total_budget:
            b = total_budget[0]
            layers.append(alt.Chart(pd.DataFrame({"y": [b.budget_usd, b.warning_usd], "line": ["budget", "warning"]}))
                          .mark_rule(strokeDash=[6, 3]).encode(y=alt.Y("y:Q", title="Cumulative spend ($)"), color=alt.Color(
                              "line:N", title="Line", scale=alt.Scale(domain=["budget", "warning"], range=["#E45756", "#F58518"]))))
        common.show_chart(common.layer(*layers), "Cumulative spend against the budget" if total_budget else
                          "Cumulative spend (no total budget set, so no budget line)", height=240)
        life_n = int(costcore_schema.effective_value(scn, "lifecycle.iterations"))
        if not show_retention and after_usd > 0:
            st.caption(f"After the last stage, keeping checkpoints and data through the retention period costs a "
                       f"further {fmt.usd(after_usd)} (switch on the retention period above to draw it).")
        st.caption(("Spend includes storage kept through the retention period" if show_retention else
                    "Spend up to the end of the last stage")
                   + (f" and the {life_n - 1} further post-training iterations of the lifecycle; the budget lines "
                      "above apply to the plan's first pass" if life_n > 1 else "") + ".")


def held() -> None:
    """GPUs and storage held on the calendar: a tab of its own, so a schedule slider redraws three charts, not five."""
    res = common.result()
    tl = bud.timeline(res)
    last_end = tl.schedule.end.max()
    show_retention = retention_toggle()
    m = common.metric_row(3)
    m[0].metric("Peak GPUs", f"{tl.peak_gpus:,.0f}")
    m[1].metric("Average GPUs while running", f"{tl.average_gpus:,.0f}")
    m[2].metric("Peak storage", fmt.gb(float(tl.usage.storage_gb.max())))
    usage = tl.usage if show_retention else tl.usage[tl.usage.date <= last_end]
    big = float(usage.storage_gb.max()) >= 1000.0 if not usage.empty else False
    held = usage.assign(storage=usage.storage_gb / (1000.0 if big else 1.0))
    unit = "TB" if big else "GB"
    g1, g2 = st.columns(2)
    with g1:
        area = alt.Chart(held).mark_area(opacity=0.7, interpolate="step-after", color="#4C78A8").encode(
            x=alt.X("date:T", title="Date"), y=alt.Y("gpus:Q", title="GPUs"),
            tooltip=[alt.Tooltip("date:T", title="Date"), alt.Tooltip("gpus:Q", format=",.0f", title="GPUs")])
        # the peak as a point: an overlap of an hour (a short SFT run beside evaluation) is narrower than a pixel
        # of a months-long calendar, and the area alone topped out below the Peak GPUs metric
        top = held.loc[[held.gpus.idxmax()]].assign(what=f"Peak: {tl.peak_gpus:,.0f} GPUs") if not held.empty else held
        peak = alt.Chart(top).mark_point(color="#d62728", filled=True, size=60).encode(
            x=alt.X("date:T", title="Date"), y=alt.Y("gpus:Q", title="GPUs"),
            tooltip=[alt.Tooltip("what:N", title="Peak"), alt.Tooltip("date:T", title="Date")])
        common.show_chart(common.layer(area, peak), "GPUs in use (red point: the peak)", height=240)
    with g2:
        common.show_chart(alt.Chart(held).mark_area(opacity=0.7, color="#F58518").encode(
            x=alt.X("date:T", title="Date"), y=alt.Y("storage:Q", title=unit),
            tooltip=[alt.Tooltip("date:T", title="Date"), alt.Tooltip("storage:Q", format=",.3~s", title=unit)]),
            f"Storage held: checkpoints, datasets, media ({unit})", height=240)


def retention_toggle() -> bool:
    """One switch for the Timeline and the GPUs-and-storage tabs. Streamlit forgets a widget's value while
    it is not drawn (another tab is open), so the choice is kept under a key of its own as well."""
    def keep():
        st.session_state["budget:show_retention"] = st.session_state["show_retention"]
    return st.toggle("Show the retention period after the last stage",
                     value=bool(st.session_state.get("budget:show_retention", False)), key="show_retention",
                     on_change=keep,
                     help="Storage kept after the plan (Months kept after the project) is spend too; "
                          "off, the charts end with the last stage and the caption gives that spend.")


def lifecycle() -> None:
    """Post-training repeated as iterations."""
    res = common.result()
    st.markdown("Post-training is rarely done once: models are refreshed as data and requirements change. "
                "Repeat the chosen stages every few months; data reused between iterations is not bought again.")
    common.knob_columns([("lifecycle.iterations", "Iterations", 1, 36, 1)],
                        [("lifecycle.every_months", "Every (months)", 0.25, 12.0, 0.25)],
                        [("lifecycle.data_reuse", "Data reused between iterations", 0.0, 1.0, 0.05)])
    lc = st.columns(4)
    for col, s in zip(lc, ("sft", "dpo", "rl", "eval")):
        with col:
            common.knob(f"lifecycle.{s}", f"repeat {common.STAGE_SHORT[s]}")
    res = common.result()
    life = bud.lifecycle(res)
    m = common.metric_row(3)
    m[0].metric("First pass (the plan)", fmt.usd(life.first_pass_usd))
    m[1].metric("Each further iteration", fmt.usd(life.per_iteration_usd))
    span = f"{fmt.num(life.horizon_months)} month" + ("" if life.horizon_months == 1 else "s")
    asked = float(costcore_schema.effective_value(res.scenario, "lifecycle.every_months"))
    if life.iterations > 1 and life.every_months > asked:  # the lifecycle ran iterations on top of each other
        st.caption(f"Every {fmt.num(asked)} months is shorter than one iteration ({fmt.num(life.every_months)} "
                   "months from the first repeated stage's start to the last one's end): the iterations run back to "
                   "back, one after the other.")
    m[2].metric("Lifecycle total" if life.iterations == 1 else f"Lifecycle total ({life.iterations} iterations over {span})",
                fmt.usd(life.total_usd))
    if life.iterations > 1 and not life.table.empty:
        t = life.table.copy()
        t["stage_name"] = t.stage.map(STAGE_LABELS)
        common.show_chart(alt.Chart(t).mark_bar().encode(
            x=alt.X("iteration:O", title="Iteration", axis=alt.Axis(labelAngle=0)),
            y=alt.Y("usd:Q", title="Cost ($)", axis=common.usd_axis()),
            color=alt.Color("stage_name:N", title="Stage", scale=common.stage_color_scale(t.stage_name)),
            tooltip=[alt.Tooltip("iteration:O", title="Iteration"), alt.Tooltip("stage_name:N", title="Stage"),
                     alt.Tooltip("usd:Q", format="$,.0f", title="Cost")]
        ).properties(height=220), "Cost of each iteration by stage")


def attribution() -> None:
    """Every line item with its tags, for the exports."""
    res = common.result()
    c1, c2 = st.columns(2)
    with c1:
        common.knob("tags.project", "Project tag")
    with c2:
        common.knob("tags.team", "Team / cost center")
    res = common.result()
    att = bud.attribution(res)
    c1, c2 = st.columns(2)
    # built on click (Streamlit runs a callable's export then): the YAML alone was 60 ms of every rerun
    c1.download_button("Download line items (CSV)", lambda: fmt.to_csv(att), "attribution.csv", "text/csv", width="stretch")
    c2.download_button("Download line items (YAML)", lambda: bud.attribution_yaml(res), "attribution.yaml",
                       "application/x-yaml", width="stretch")
    paid = att[att.usd != 0]  # the exports keep every line, the $0 ones too
    shown = common.in_words(paid)
    if len(paid) < len(att):
        st.caption(f"{len(paid):,} line items with a cost; the downloads list all {len(att):,}, "
                   f"the {len(att) - len(paid):,} at $0 too.")
    common.money_table(shown[["stage", "resource", "label", "kind", "usd", "project", "team"]], ["usd"],
                       {"stage": "Stage", "resource": "Resource", "label": "Line item", "kind": "Fixed or elastic",
                        "usd": "Cost", "project": "Project", "team": "Team / cost center"})


# One tab at a time: a slider moved in one redraws that tab, not the charts and tables of the others.
TABS = {"Budget and fixed cost": budget_and_fixed, "Timeline": timeline, "GPUs and storage held": held,
        "Iteration lifecycle": lifecycle, "Attribution export": attribution}
common.lazy_tabs(TABS, "budget:tab")

