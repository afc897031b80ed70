"""Shared cluster: many projects on pools of reserved GPUs, with quotas, priorities, preemption and attribution.

Thin: every number comes from costcore.cluster (ClusterModel.run); this page arranges knobs, charts and tables.
"""
import hashlib
import math
import json

import altair as alt
import pandas as pd
import streamlit as st

import costcore
from costcore import fmt
from costcore.cluster import focus, portfolio, results, rules, share
from costcore.errors import ScenarioError
from costcore.scenario.yamlio import dump_yaml
from costcore.scenario.schema import STAGE_LABELS
from pages import common

DEFAULT = "cluster-quarter"
IDLE_WORDS = {"quota": "By guaranteed quota", "use": "By GPU-hours used", "unallocated": "Left unallocated"}
# common.RESOURCE_COLORS for the planner's resources, then preemption and idle capacity
RESOURCE_COLORS = [common.RESOURCE_COLORS[r] for r in results.RESOURCE_TYPES[:-2]] + ["#FF9DA6", "#BAB0AC"]
BY_WORDS = {"team": "Team", "project": "Project", "model_version": "Model version", "task_type": "Task type",
            "stage": "Stage", "resource": "Resource type", "pool": "Pool"}


@st.cache_resource(show_spinner=False)
def _warm() -> bool:
    costcore.warm_up()
    return True


@st.cache_data(show_spinner=False)
def _portfolio_titles() -> dict:
    return portfolio.portfolio_titles()


@st.cache_resource(show_spinner="Estimating every project once...", max_entries=8)
def _model(key: str, text: str | None) -> results.ClusterModel:
    """One ClusterModel per shipped name or uploaded file content (estimates cached across reruns)."""
    pf = portfolio.load(key) if text is None else portfolio.load_text(text)
    return results.ClusterModel(pf)


def _state():
    ss = st.session_state
    if "cluster_name" not in ss:
        try:
            params = {k: st.query_params.get_all(k) for k in st.query_params.keys()}
        except Exception:  # noqa: BLE001 - a malformed query string must not crash the page
            params = {}
        ss.cluster_name, ss.cluster_knobs, ss.cluster_msgs = share.decode(params, DEFAULT)
        ss.cluster_upload = None
    return ss


def _source(ss) -> results.ClusterModel:
    """The shipped portfolio or an uploaded file; a bad upload keeps the current portfolio and says why."""
    c1, c2 = st.columns([1, 2])
    names = portfolio.portfolio_names()
    titles = _portfolio_titles()
    name = c1.selectbox("Shipped portfolio", names, index=names.index(ss.cluster_name)
                        if ss.cluster_name in names else 0, format_func=lambda n: titles.get(n, n))
    if name != ss.cluster_name:
        ss.cluster_name, ss.cluster_knobs, ss.cluster_upload = name, {}, None
        ss.cluster_rev = ss.get("cluster_rev", 0) + 1  # the controls are drawn afresh at the new portfolio's values
    up = c2.file_uploader("Or upload a portfolio (YAML)", type=["yaml", "yml"], key="cluster_file",
                         max_upload_size=common.SMALL_UPLOAD_MB)
    if up is not None:
        text = up.getvalue()
        key = hashlib.sha256(text).hexdigest()
        if ss.get("cluster_upload_seen") != key:  # each file once: a shipped portfolio picked after it wins
            ss.cluster_upload_seen = key
            try:
                _model("upload:" + key, text.decode("utf-8", "replace"))
                ss.cluster_upload, ss.cluster_knobs = key, {}
                ss.cluster_upload_text = text
                ss.cluster_rev = ss.get("cluster_rev", 0) + 1
            except ScenarioError as err:  # named by its file, as the uploader shows it (it said "upload: ...")
                said = str(err)
                named = fmt.one_line(up.name or "the upload", 80)
                said = named + said[len("upload"):] if said.startswith("upload:") else said
                kept = "the portfolio uploaded before stays" if ss.cluster_upload else "the shipped portfolio stays"
                st.error(f"The upload was not used: {common.md_escape(fmt.one_line(said, 400))} ({kept}).")
    _add_plan(ss, c2)
    if ss.cluster_upload is not None and ss.get("cluster_upload_text") is not None:
        # the last good upload, also after a bad one (which brought the shipped portfolio back, unsaid) and while
        # the uploader swaps files (a rerun with none); a shipped portfolio picked above leaves it
        return _model("upload:" + ss.cluster_upload, ss.cluster_upload_text.decode("utf-8", "replace"))
    return _model(ss.cluster_name, None)


@st.cache_data(show_spinner=False, max_entries=16)
def _raw(name: str) -> dict:
    """A shipped portfolio's mapping (portfolio.raw_of), read and parsed once per process, not on every rerun."""
    return portfolio.raw_of(name)


def _add_plan(ss, col) -> None:
    """The plan on the other pages added to the shipped portfolio as one project (portfolio.with_plan), so it is
    budgeted beside the others on the cluster; shown like an upload. A plan the cluster cannot hold is refused in
    words and the portfolio shown stays."""
    team_names = portfolio.teams_for(_raw(ss.cluster_name), common.scenario()) \
        if ss.cluster_upload is None else []
    if not team_names:
        return
    c1, c2 = col.columns([3, 2], vertical_alignment="bottom")
    if st.session_state.get("cluster_plan_team") not in team_names:  # another portfolio's team
        st.session_state.pop("cluster_plan_team", None)
    c2.selectbox("The plan's team", team_names, key="cluster_plan_team",
                 help="Teams with the most quota on the pool of the plan's GPU come first.")

    def add() -> None:
        try:
            raw = portfolio.with_plan(_raw(ss.cluster_name), common.scenario(),
                                      st.session_state.get("cluster_plan_team"))
            raw["name"] = f"{raw.get('name', ss.cluster_name)} + this plan"
            text = dump_yaml(raw).encode("utf-8")
            key = hashlib.sha256(text).hexdigest()
            _model("upload:" + key, text.decode("utf-8"))
        except ScenarioError as err:
            ss.cluster_msgs = ["The plan was not added: " + fmt.one_line(share.error_in_words(err), 400)]
            return
        ss.cluster_upload, ss.cluster_upload_text, ss.cluster_knobs = key, text, {}
        ss.cluster_rev = ss.get("cluster_rev", 0) + 1

    c1.button("Add the current plan as a project", key="cluster_add_plan", on_click=add,
              help="The scenario of the other pages (its preset and every change) runs once on this cluster, from "
                   "day 0, on the pool with its GPU, for the team chosen.")


def _knobs(ss, base) -> dict:
    """What-if controls; returns results.what_if keywords (only the changed values)."""
    k = {key: (dict(v) if isinstance(v, dict) else v) for key, v in ss.cluster_knobs.items()}
    rev = ss.get("cluster_rev", 0)  # a refused what-if redraws the controls at the last one that ran
    cols = st.columns(len(base.pools) + 2)
    for i, (name, pool) in enumerate(base.pools.items()):
        cur = k.get("pool_gpus", {}).get(name, pool.gpus)
        # no browser-side range (a red box alone, the old results beside it): the portfolio refuses in a sentence
        v = cols[i].number_input(f"{pool.name} pool: GPUs ({pool.gpu})", value=float(cur), step=8.0, format="%.0f",
                                 key=f"cl:pool:{name}:{rev}")
        k.setdefault("pool_gpus", {})[name] = _whole(v)
    burst = cols[-2].toggle("Burst for deadlines", value=k.get("burst", base.burst),  # longer was cut at 1280 px
                            help="When a project's deadline is at risk, rent on-demand or spot GPUs beyond the pools.",
                            key=f"cl:burst:{rev}")
    k["burst"] = burst
    rule = cols[-1].selectbox("Idle capacity is paid", list(IDLE_WORDS), format_func=IDLE_WORDS.get,
                              index=list(IDLE_WORDS).index(k.get("idle_rule", base.idle_rule)), key=f"cl:idle:{rev}")
    k["idle_rule"] = rule
    c1, c2, c3, c4, c5 = st.columns([2, 1, 1, 2, 1])
    team = c1.selectbox("Team", list(base.teams))
    pool = c2.selectbox("Pool", list(base.pools))
    q = k.get("team_quota", {}).get(team, {}).get(pool, base.teams[team].quota_gpus[pool])
    qv = c3.number_input("Its quota (GPUs)", value=float(q), step=8.0, format="%.0f",
                         key=f"cl:quota:{team}:{pool}:{rev}")
    k.setdefault("team_quota", {}).setdefault(team, {})[pool] = _whole(qv)
    proj = c4.selectbox("Project", list(base.projects))
    pv = c5.number_input("Its priority",
                         value=float(k.get("project_priority", {}).get(proj, base.project_priority(proj))),
                         step=1.0, format="%.0f", key=f"cl:priority:{proj}:{rev}")
    k.setdefault("project_priority", {})[proj] = _whole(pv)
    return k


def _whole(v: float):
    """A typed count as the what-if rules read it: an int when whole, else the number, for them to refuse in words.
    The boxes take floats: an integer box read "1e30" as 1 (the browser's parseInt) and set a 1-GPU pool."""
    return int(v) if math.isfinite(v) and float(v).is_integer() else v


def _row(project: str, run: int, runs: int) -> str:
    return project if runs == 1 else f"{project}, run {run} of {runs}"


def _gantt(res) -> None:
    seg = res.segment_table
    projects = res.portfolio.projects
    seg = seg.assign(stage_name=[STAGE_LABELS[s] for s in seg["stage"]],
                     start=[fmt.days(v) for v in seg["start_day"]], end=[fmt.days(v) for v in seg["end_day"]],
                     row=[_row(p, r, projects[p].runs) for p, r in zip(seg["project"], seg["run"])])
    order = [_row(p, r, n) for p, n in res.project_table.sort_values(["team", "start_day"])[["project", "runs"]]
             .itertuples(index=False) for r in range(1, n + 1)]
    base = alt.Chart(seg).encode(y=alt.Y("row:N", sort=order, title="Project (a sweep: one row per run)",
                                         axis=alt.Axis(labelOverlap=False, labelLimit=220)))
    bars = base.mark_bar(height=10, strokeWidth=2).encode(
        x=alt.X("start_day:Q", title="Day of the horizon", scale=alt.Scale(domain=[0, res.horizon_h / 24.0])),
        x2=alt.X2("end_day:Q"),
        color=alt.Color("team:N", title="Team", legend=alt.Legend(symbolOpacity=1)),
        opacity=alt.Opacity("how:N", title="Segment", scale=alt.Scale(
            domain=["Ran to the end", "Preempted", "Burst (on-demand or spot)"], range=[1.0, 0.45, 0.7])),
        stroke=alt.condition(alt.datum.preempted, alt.value("#d62728"), alt.value(None)),
        tooltip=[alt.Tooltip("row:N", title="Project"), alt.Tooltip("stage_name:N", title="Stage"),
                 alt.Tooltip("gpus:Q", title="GPUs"), alt.Tooltip("start:N", title="Start"),
                 alt.Tooltip("end:N", title="End"), alt.Tooltip("how:N", title="Ended")])
    # the day axis above the rows as well as below them: a portfolio has a row per run (204 in the quarter)
    days = [0.0, res.horizon_h / 24.0]
    top = alt.Chart(pd.DataFrame({"day": days})).mark_point(opacity=0).encode(
        x=alt.X("day:Q", title="Day of the horizon", scale=alt.Scale(domain=days), axis=alt.Axis(orient="top")))
    chart = common.layer(bars, top)
    chart.resolve = alt.Resolve(axis=alt.AxisResolveMap(x="independent"))
    common.show_chart(chart,
                      "Jobs by team over the horizon (outlined in red: runs cut by a preemption)", height=alt.Step(18))


def _usage(res) -> None:
    u = res.usage_over_time()
    pools = list(res.portfolio.pools)
    pool = st.radio("Pool", pools, horizontal=True, key="cluster_usage_pool") if len(pools) > 1 else pools[0]
    cap = res.portfolio.pools[pool].gpus
    p = u[u["pool"] == pool]
    area = alt.Chart(p).mark_area().encode(
        x=alt.X("day:Q", title="Day of the horizon"), y=alt.Y("sum(gpus):Q", title="GPUs held (daily average)"),
        color=alt.Color("team:N", title="Team"), tooltip=[alt.Tooltip("team:N", title="Team"),
                                                          alt.Tooltip("gpus:Q", title="GPUs", format=",.0f")])
    rule = alt.Chart(pd.DataFrame({"y": [cap]})).mark_rule(strokeDash=[6, 3], color="black").encode(
        y=alt.Y("y:Q", title="GPUs held (daily average)"))
    common.show_chart(common.layer(area, rule),
                      f"Reserved GPUs in use on the {pool} pool by team (dashed: its {cap:,} GPUs)", height=280)
    team = st.selectbox("Team's use against its quota", list(res.portfolio.teams), key="cluster_usage_team")
    t = p[p["team"] == team].melt(id_vars=["day"], value_vars=["gpus", "quota_gpus", "burst_gpus"],
                                  var_name="series", value_name="value")
    t["series"] = t["series"].map({"gpus": "Reserved GPUs held", "quota_gpus": "Guaranteed quota",
                                   "burst_gpus": "Burst GPUs"})
    line = alt.Chart(t).mark_line().encode(
        x=alt.X("day:Q", title="Day of the horizon"), y=alt.Y("value:Q", title="GPUs"),
        color=alt.Color("series:N", title="Series"),
        strokeDash=alt.StrokeDash("series:N", title="Series", scale=alt.Scale(
            domain=["Reserved GPUs held", "Guaranteed quota", "Burst GPUs"], range=[[1, 0], [6, 3], [2, 2]])))
    common.show_chart(line, f"{team} on the {pool} pool: GPUs held against its quota", height=220)


def _attribution(res) -> None:
    by = st.selectbox("Attribute every dollar by", list(BY_WORDS), format_func=BY_WORDS.get, key="cluster_by")
    g = res.attribute(by)
    if by == "resource":
        g[by] = g[by].map(results.RESOURCE_WORDS)
    if by == "stage":
        g[by] = [STAGE_LABELS.get(s, "Idle share") if s else "Idle share" for s in g[by]]
    common.money_table(g[[by, "usd"]], ["usd"], {by: BY_WORDS[by], "usd": "Cost"})
    a = res.attribute(["team", "resource"])
    a["resource"] = a["resource"].map(results.RESOURCE_WORDS)
    a["exact"] = [fmt.usd_exact(v) for v in a["usd"]]
    words = [results.RESOURCE_WORDS[r] for r in results.RESOURCE_TYPES]
    bar = alt.Chart(a).mark_bar().encode(
        y=alt.Y("team:N", title="Team", sort="-x", axis=alt.Axis(labelOverlap=False, labelLimit=220)),
        x=alt.X("sum(usd):Q", title="Cost ($)", axis=common.usd_axis()),
        color=alt.Color("resource:N", title="Resource type", legend=alt.Legend(labelLimit=320),
                        scale=alt.Scale(domain=words, range=RESOURCE_COLORS)),
        tooltip=[alt.Tooltip("team:N", title="Team"), alt.Tooltip("resource:N", title="Resource type"),
                 alt.Tooltip("exact:N", title="Cost")])
    common.show_chart(bar, "Cost of each team by resource type", height=alt.Step(28))


def deadline_sentence(missed: int, at_risk: int) -> str:
    """The banner over the deadline table, each count under its own word: a missed deadline is not "at risk"
    (the banner said "2 projects with a deadline at risk" over a table whose first row said Missed)."""
    def n(k: int) -> str:
        return f"{k} project{'s' if k != 1 else ''}"
    parts = []
    if missed:
        parts.append(f"{n(missed)} miss{'es' if missed == 1 else ''} {'its' if missed == 1 else 'their'} deadline")
    if at_risk:
        parts.append(f"{n(at_risk)} {'is' if at_risk == 1 else 'are'} at risk (under 3 days of slack)")
    return "; ".join(parts) + "."


def _deadlines(res, pf) -> None:
    pt = res.project_table
    risk = pt[~pt["deadline_met"] | pt["at_risk"]].copy()
    # what a bigger pool cannot change: a million GPUs left a team capped by its borrowing limit still bursting
    risk["ceiling"] = [f"{rules.team_ceiling_gpus(pf, t, pf.projects[p].pool):,} of {pf.pools[pf.projects[p].pool].gpus:,}"
                       for p, t in zip(risk["project"], risk["team"])]
    if risk.empty:
        st.success("Every project with a deadline meets it with at least three days to spare.")
        return
    # short: the banner above says what at risk means (the long words pushed the Cost column out at 1280 px)
    risk["status"] = ["Missed" if not m else "At risk" for m in risk["deadline_met"]]
    for c in ("finish_day", "deadline_day", "wait_days"):
        risk[c] = [fmt.days(v) if pd.notna(v) else "not finished" for v in risk[c]]
    shown = risk[["project", "team", "status", "finish_day", "deadline_day", "wait_days", "ceiling", "usd"]]
    st.warning(deadline_sentence(int((~risk["deadline_met"]).sum()), int(risk["deadline_met"].sum())))
    common.money_table(shown, ["usd"], {"project": "Project", "team": "Team", "status": "Status",
                                        "finish_day": "Finishes after", "deadline_day": "Deadline after",
                                        "wait_days": "Waited", "ceiling": "Most GPUs its team holds", "usd": "Cost"},
                       helps={"status": "At risk: met with under 3 days of slack",
                              "ceiling": "the team's quota plus its borrowing limit on the project's pool, of the "
                                         "pool's GPUs: a larger pool does not reach past it; raise the quota or "
                                         "the limit"})


common._leave_legacy_router()  # a deep link to /cluster on a fresh server goes through app.py's navigation
st.title("Shared cluster")
st.markdown("Many projects on one pool of reserved GPUs: each team has a guaranteed quota, may borrow what "
            "others leave idle and is preempted when the owner needs it back (Kueue's ClusterQueues in a "
            "cohort). Every stage's GPUs, hours and dollars come from the planner's own estimate; the "
            "scheduler decides when each runs, and every dollar, idle capacity included, lands on a team.")
_warm()
ss = _state()
for m in ss.cluster_msgs:
    st.warning(common.md_escape(m))
ss.cluster_msgs = []  # said once, as the other pages' messages
model = _source(ss)
base = model.portfolio
st.caption(common.md_escape(f"{base.name}: {len(base.teams)} teams, {len(base.projects)} projects, "
                            f"{len(model.jobs.gpus)} jobs over {fmt.num(base.horizon_days)} days."))
try:
    changed = results.what_if(base, **_knobs(ss, base))
    res = model.run(changed)
    ss.cluster_knobs = share.knobs_of(base, changed)
except ScenarioError as err:  # the refused value must not stay in its box: every later change failed with it
    ss.cluster_msgs = [f"That what-if cannot run, so the last one that could is kept: "
                       f"{fmt.one_line(share.error_in_words(err), 400)}"]
    ss.cluster_rev = ss.get("cluster_rev", 0) + 1
    st.rerun()
if ss.cluster_upload is None:
    params = share.encode(ss.cluster_name, ss.cluster_knobs)
    if {k: st.query_params.get(k) for k in st.query_params.keys()} != params:
        st.query_params.from_dict(params)
s = res.summary
for w in res.warnings:  # work past the horizon: the chart ran to day 2,650 under "every deadline met"
    st.warning(common.md_escape(w), icon=":material/schedule:")
c = common.metric_row(5)
c[0].metric("Total cost", fmt.usd(s["total_usd"]), help=fmt.usd_exact(s["total_usd"]))
c[1].metric("Idle capacity", fmt.usd(s["idle_usd"]),
            help=f"Reserved GPUs nobody held: {fmt.gpu_hours(s['idle_gpu_hours'])} at the reserved price")
c[2].metric("Utilization", fmt.share(s["utilization"]), help="Reserved GPU-hours held / reserved GPU-hours paid for")
c[3].metric("Deadlines missed", f"{s['deadlines_missed']}", help=f"{s['deadlines_at_risk']} more at risk")
c[4].metric("Burst GPU-hours", fmt.gpu_hours(s["burst_gpu_hours"]),
            help=f"On-demand or spot GPU-hours; lost to preemption: {fmt.gpu_hours(s['lost_gpu_hours'])}")
_deadlines(res, changed)
_gantt(res)
_usage(res)
_attribution(res)
d1, d2, d3 = st.columns(3)
d1.download_button("FOCUS cost and usage (CSV)", lambda: focus.focus_csv(res), "cluster-focus.csv", "text/csv")
d2.download_button("Attribution (CSV)", lambda: focus.plain_csv(res), "cluster-attribution.csv", "text/csv")
d3.download_button("Summary (JSON)", lambda: json.dumps(res.to_json(), indent=2), "cluster.json", "application/json")
if ss.cluster_upload is None:
    st.caption("Share this view: the page's address carries the portfolio and every what-if change.")
else:
    st.caption("An uploaded portfolio, or one with the current plan added, has no share link (it stays in your "
               "browser session); download it as YAML to share it.")
    st.download_button("Portfolio (YAML)", ss.cluster_upload_text, "portfolio.yaml", "application/x-yaml")
