"""Review: plan vs actual. Bills and job records against the session's plan (costcore.actuals)."""
import datetime as dt
import hashlib
import tempfile
import uuid
from pathlib import Path

import altair as alt
import pandas as pd
import streamlit as st

from costcore import api, fmt
from costcore.actuals import efficiency, importers, report, sample, store
from costcore.actuals.columns import UNATTRIBUTED
from costcore.errors import ScenarioError
from costcore.scenario.schema import STAGE_LABELS
from pages import common

STAGE_WORDS = {**STAGE_LABELS, UNATTRIBUTED: "Not attributed to a stage"}

res = common.frame(
    "Review: plan vs actual",
    "Bills and job records against the plan: upload a FOCUS billing export, Slurm `sacct --parsable2` output or a "
    "CSV of runs (or load the sample data), then slice by project, team, model version, task type, stage and "
    "resource type. The plan is the scenario in the sidebar; its billed resources (compute, storage, network, "
    "operations and hidden losses) are compared, since labor and bought data never reach a cloud bill.")

WORK = Path(tempfile.gettempdir()) / "costcore-review"
MAX_UPLOAD_MB = int(st.get_option("server.maxUploadSize"))  # the server refuses more, whatever a widget says


@st.cache_resource(show_spinner="Generating the sample data...")
def _sample_files() -> tuple:
    """The sample data set, written once per server process (fixed seed)."""
    out = WORK / "sample"
    truth = sample.write_sample(out, seed=7)
    return tuple(truth["files"])


@st.cache_data(show_spinner="Importing...", max_entries=8)
def _load(key: str, files: tuple) -> tuple[report.Data, list[str]]:
    """Import the files into a DuckDB store of this call's own, read the cube, and remove the store (cached per
    content key: a rerun, or a refused upload falling back to the last good files, imports nothing again). Two
    sessions or servers loading the same files at once shared one store file, and one's unlink pulled it from
    under the other's import. Returns the data and the import's notes (importers.import_notes)."""
    db = WORK / f"{key}-{uuid.uuid4().hex}.duckdb"
    st_ = store.open_store(db)
    try:
        summary = importers.import_files(st_, [Path(f) for f in files])
        return report.load(st_), importers.import_notes(summary)
    finally:
        st_.close()
        for leftover in (db, db.with_name(db.name + ".wal")):
            leftover.unlink(missing_ok=True)


def _uploaded_files(uploads) -> tuple[str, tuple]:
    folder = WORK / "uploads"
    folder.mkdir(parents=True, exist_ok=True)
    digests, paths = [], []
    for up in uploads:
        data = up.getvalue()
        h = hashlib.sha256(data).hexdigest()[:16]
        name = Path(up.name).name or "upload.csv"
        p = folder / h / name
        p.parent.mkdir(exist_ok=True)
        if not p.exists():
            p.write_bytes(data)
        digests.append(h)
        paths.append(str(p))
    return "u-" + hashlib.sha256("".join(sorted(digests)).encode()).hexdigest()[:16], tuple(paths)


@st.cache_data(show_spinner="Fitting the efficiency factor...", max_entries=8)
def _fit(key: str, _data) -> dict:
    return efficiency.fit(_data.runs)


@st.cache_data(show_spinner=False, max_entries=64)
def _view(key: str, plan_key: str, _plan, filters: tuple, since, until, budget, _data) -> dict:
    return report.view(_data, _plan, dict(filters), since, until, budget)


ss = st.session_state
c1, c2 = st.columns([3, 1])
uploads = c1.file_uploader("Bills and job records (FOCUS CSV, sacct --parsable2 output, run CSV)",
                           accept_multiple_files=True, key="review_upload", max_upload_size=MAX_UPLOAD_MB,
                           help=f"Up to {MAX_UPLOAD_MB} MB a file; bigger files go through the command line "
                                "(python -m costcore actuals import FILE).")


def _use_sample() -> None:
    """The sample's bills, and its plan (a preset) as the session's scenario; the plan it replaces is kept for
    "Back to your plan" (a user's own changes were lost without a word)."""
    ss["review_source"] = "sample"
    if ss.get("preset") != sample.PLAN_PRESET or ss.scenario != api.load_preset(sample.PLAN_PRESET):
        ss["review_previous"] = (ss.get("preset"), ss.scenario)
        common.load_preset(sample.PLAN_PRESET)


def _back_to_previous() -> None:
    """The plan the sample replaced, with the sample's bills still loaded."""
    preset, scn = ss.pop("review_previous")
    if common.apply_scenario(scn):
        ss.preset = preset


c2.button("Load the sample data", icon=":material/science:", key="review_sample", on_click=_use_sample)
c2.caption(f"Sample: four projects of a shared cluster over {sample.DAYS} days, with known anomalies, reviewed "
           f"against the `{sample.PLAN_PRESET}` preset's one plan: their repeated runs bill far more than one pass "
           "of it, so its large variances are the sample's, not the planner's error. Filter a project to review it.")

data, key, notes, budget = None, None, [], 0.0
try:
    if uploads:
        key, files = _uploaded_files(uploads)
        data, notes = _load(key, files)
    elif ss.get("review_source") == "sample":
        key, files = "sample-7", _sample_files()
        data, notes = _load(key, files)
    if data is not None:
        ss["review_good"] = (key, files)  # the last import that went in whole
except ScenarioError as err:  # an import is all or nothing: the data shown before stays (it was dropped)
    good = ss.get("review_good")
    st.error(f"Not imported: {common.md_escape(err)}" + ("; the data shown before stays." if good else ""),
             icon=":material/error:")
    if good:
        key, (data, _) = good[0], _load(*good)
for note in notes:
    st.info(common.md_escape(note), icon=":material/info:")
if ss.get("review_previous") and ss.get("preset") == sample.PLAN_PRESET:
    n1, n2 = st.columns([3, 1])
    n1.info(f"The sample's bills belong to the `{sample.PLAN_PRESET}` preset, so it is the plan now; yours is kept.",
            icon=":material/info:")
    n2.button("Back to your plan", key="review_back", icon=":material/undo:", on_click=_back_to_previous,
              help="The plan you had before loading the sample; the sample's bills stay loaded.")

runs_only = data is not None and data.cube.empty and len(data.runs) > 0
if data is None or data.cube.empty:
    v = report.view(report.empty_data(), res if res.feasible else None)
    st.info((f"Read {fmt.count(len(data.runs), 'job record')} and no bills: plan vs actual needs the bills (a FOCUS CSV); "
             "job records add efficiency and cost per result to them." if runs_only else
             "No bills yet: upload files or load the sample data.") + " The chart shows the plan's cumulative spend.")
    data = None
else:
    cube = data.cube
    words = report.DIMENSION_WORDS
    cols = st.columns(6)
    filters = []
    for col, dim in zip(cols, report.DIMENSION_WORDS):
        options = sorted(set(cube[dim]))
        label = (lambda s: STAGE_WORDS.get(s, s)) if dim == "stage" else str
        chosen = col.multiselect(words[dim], options, format_func=label, key=f"review_{dim}",
                                 placeholder="All")
        if chosen:
            filters.append((dim, tuple(chosen)))
    first, last = min(cube["day"]), max(cube["day"])
    d1, d2 = st.columns([2, 1])
    span = d1.date_input("Dates", value=(first, last), min_value=first, max_value=last, key="review_dates")
    since, until = (span[0], span[1]) if isinstance(span, (tuple, list)) and len(span) == 2 else (first, last)
    budget = d2.number_input("Budget for the review ($, 0 = the plan's)", min_value=0.0, value=0.0, step=10000.0,
                             key="review_budget")
    plan_key = str(hash(str(common.scenario())))
    v = _view(key, plan_key, res if res.feasible else None, tuple(filters), since, until, budget or None, data)

b = v["burn"]
m = st.columns(5)
# short labels and values: in five columns at 1280 px "Plan (billed resources)" and "no bills yet" were cut
to_date = data is not None and v["plan_usd"] < v["plan_total_usd"]  # the bills end before the plan does
m[1].metric("Plan to date" if to_date else "Billed plan", fmt.usd(float(v["plan_usd"])),
            help=(f"The plan's billed resources (compute, storage, network) up to {v['last_day']}, the last day "
                  f"billed: {fmt.usd_exact(float(v['plan_usd']))} of the whole plan's "
                  f"{fmt.usd_exact(float(v['plan_total_usd']))}" if to_date else
                  f"The plan's billed resources (compute, storage, network): {fmt.usd_exact(float(v['plan_usd']))}"))
if data is None:  # no bills: no actual, so no variance, anomaly or waste to show (not "-$33.6M")
    for col, label in zip((m[0], m[2], m[3], m[4]), ("Actual spend", "Variance", "Anomalous days", "Waste")):
        col.metric(label, "–", help="No bills yet: upload bills or job records, or load the sample data.")
    st.caption("No bills yet: upload bills or job records, or load the sample data, to see the actual spend.")
else:
    m[0].metric("Actual spend", fmt.usd(float(v["actual_usd"])), help=fmt.usd_exact(float(v["actual_usd"])))
    m[2].metric("Variance", fmt.usd(float(v["variance_usd"])),
                help="Actual spend minus the plan " + (f"to {v['last_day']}" if to_date else "(its whole run)"))
    found = v["anomalies"]  # one row per anomalous day of one project's resource type: days are the distinct dates
    n_days = int(found["day"].nunique()) if len(found) else 0
    m[3].metric("Anomalous days", f"{n_days:,}",
                help=f"{len(found):,} anomalies (a project's spend on one resource type on one day) on {n_days:,} "
                     "distinct days; the Anomalies tab lists each.")
    m[4].metric("Waste", fmt.usd(float(sum(w["usd"] for w in v["waste"]))))
# The budget line is the review's own budget, else the scenario's total budget, else (none set) the plan's
# billed total (report.burn): a line drawn from the plan is named as such, not called a budget.
own_budget = b["budget_set"]
BUDGET_WORDS = "Budget" if own_budget else "Plan's billed total (no budget set)"
for name, usd, cross in (("budget" if own_budget else "plan's billed total", b["budget_usd"], b["budget_crossing"]),
                         ("warning line", b["warning_usd"], b["warning_crossing"])):
    if cross:  # "Billed spend will reach the plan's billed total of $2.73M (no budget is set) about 2027-03-02 at ..."
        st.caption(f"Billed spend {'will reach' if cross['forecast'] else 'reached'} the {name} of {fmt.usd(float(usd))}"
                   + (" (no budget is set)" if not own_budget and name != "warning line" else "")
                   + f" {'about' if cross['forecast'] else 'on'} {cross['date']}"
                   + (f" at the last {report.BURN_RATE_DAYS} days' rate of {fmt.usd(float(b['rate_usd_per_day']))} a day"
                      if cross["forecast"] else "")
                   + (f"; the plan's total against the same budget also counts labor and bought data, which no "
                      f"bill carries" if own_budget and not budget else "") + ".")

# Cumulative burn, plan vs actual, budget and warning lines
days = b["days"]
long = pd.concat([days.assign(series="Actual spend", usd=days["actual_usd"]),
                  days.assign(series="Plan", usd=days["plan_usd"])])[["day", "series", "usd"]]
if data is None:
    long = long[long.series == "Plan"]
long["day"] = pd.to_datetime(long["day"])
lines = pd.DataFrame({"line": [BUDGET_WORDS, "Warning line"], "usd": [float(b["budget_usd"]), float(b["warning_usd"])]})
series = (["Actual spend"] if data is not None else []) + ["Plan", BUDGET_WORDS, "Warning line"]  # only lines drawn
scale = alt.Scale(domain=series, range=(["#E45756"] if data is not None else []) + ["#4C78A8", "#222222", "#F58518"])
burn = alt.Chart(long).mark_line().encode(
    x=alt.X("day:T", title="Day"), y=alt.Y("usd:Q", title="Cumulative spend ($)", axis=common.usd_axis()),
    color=alt.Color("series:N", title="Line", scale=scale),
    tooltip=[alt.Tooltip("day:T", title="day"), alt.Tooltip("series:N", title="line"),
             alt.Tooltip("usd:Q", title="cumulative $", format="$,.3s")])
rules = alt.Chart(lines).mark_rule(strokeDash=[6, 4]).encode(
    y=alt.Y("usd:Q", title="Cumulative spend ($)"), color=alt.Color("line:N", title="Line", scale=scale),
    tooltip=[alt.Tooltip("line:N", title="line"), alt.Tooltip("usd:Q", title="$", format="$,.3s")])
common.show_chart(common.layer(burn, rules), ("Cumulative spend: actual vs plan" if data is not None else
                                             "Cumulative spend of the plan")
                  + (", with the budget and warning lines" if own_budget else ", its billed total and a warning line"),
                  height=320)

if data is None:
    st.stop()

# one above the other, each the page's width: side by side at 1280 px the waterfall kept 5 of its 10 labels and
# cut its legend, and the table cut its last column
wf = v["waterfall"]
colors = alt.Scale(domain=["Plan", "Adds to the plan", "Saves against the plan", "Actual"],
                   range=["#4C78A8", "#E45756", "#54A24B", "#222222"])
chart = alt.Chart(wf).mark_bar().encode(
    y=alt.Y("label:N", sort=list(wf["label"]), title="From plan to actual", axis=alt.Axis(labelLimit=320)),
    x=alt.X("start:Q", title="Dollars ($)", axis=common.usd_axis()), x2=alt.X2("end:Q"),
    color=alt.Color("direction:N", title="Step", scale=colors, legend=alt.Legend(orient="right")),
    tooltip=[alt.Tooltip("label:N", title="step"), alt.Tooltip("usd:Q", title="$", format="$,.3s")])
common.show_chart(chart, "Variance waterfall: from plan to actual"
                  + (f" (the plan to {v['last_day']}, the last day billed)" if to_date else ""),
                  height=28 * len(wf) + 80)
pva = pd.DataFrame([{"stage": STAGE_WORDS.get(s, s), "plan": float(x["plan_usd"]),
                     "actual": float(x["actual_usd"]), "variance": float(x["variance_usd"]), "cause": x["cause"]}
                    for s, x in v["plan_vs_actual"].items()])
st.markdown("**Plan vs actual by stage**" + (f" (the plan to {v['last_day']})" if to_date else ""))
common.money_table(pva, ["plan", "actual", "variance"],
                   {"stage": "Stage", "plan": "Plan to date" if to_date else "Plan", "actual": "Actual",
                    "variance": "Variance",
                    "cause": "Largest cause"})

# Daily spend with the anomalies marked
daily = v["daily"].assign(day=lambda f: pd.to_datetime(f["day"]))
an = v["anomalies"].assign(day=lambda f: pd.to_datetime(f["day"]))
spend = alt.Chart(daily).mark_line().encode(
    x=alt.X("day:T", title="Day"), y=alt.Y("usd:Q", title="Daily spend ($)", axis=common.usd_axis()),
    color=alt.Color("project:N", title="Project"),
    tooltip=[alt.Tooltip("day:T", title="day"), alt.Tooltip("project:N", title="project"),
             alt.Tooltip("usd:Q", title="$", format="$,.3s")])
marks = alt.Chart(an).mark_rule(color="#d62728", strokeDash=[3, 3], size=2).encode(
    x=alt.X("day:T", title="Day"),
    tooltip=[alt.Tooltip("day:T", title="anomaly"), alt.Tooltip("project:N", title="project"),
             alt.Tooltip("resource_type:N", title="resource"), alt.Tooltip("usd:Q", title="spent", format="$,.3s"),
             alt.Tooltip("expected_usd:Q", title="expected", format="$,.3s")])
common.show_chart(common.layer(spend, marks),
                  "Daily spend by project; red dashed lines mark the anomalous days", height=300)
if len(an):
    st.markdown(f"**Anomalies** ({len(an)} days above the rolling 28-day median by more than 5 robust spreads)")
    common.money_table(an.assign(day=an["day"].dt.date)[["day", "project", "resource_type", "usd", "expected_usd"]],
                       ["usd", "expected_usd"], {"day": "Day", "project": "Project", "resource_type": "Resource type",
                                                 "usd": "Spent", "expected_usd": "Expected"})
else:
    st.caption("No anomalous day in this selection.")

st.markdown("**Waste**")
waste = pd.DataFrame([{"kind": report.WASTE_WORDS[w["kind"]], "usd": float(w["usd"]), "items": len(w["items"]),
                       "examples": ", ".join(w["items"][:6]) + (" ..." if len(w["items"]) > 6 else "")}
                      for w in v["waste"]])
common.money_table(waste, ["usd"], {"kind": "Kind", "usd": "Dollars", "items": "Runs or resources",
                                    "examples": "Which"})

st.markdown("**Cost per result**")
mv = v["per_model_version"].copy()  # the two tables one above the other: side by side, the runs' was cut
mv["usd"] = mv["usd"].map(float)
common.money_table(mv, ["usd", "usd_per_point"],
                   {"project": "Project", "model_version": "Model version", "usd": "Dollars", "runs": "Runs",
                    "eval_score": "Best evaluation score", "points_gained": "Points gained",
                    "usd_per_point": "Dollars per point gained"},
                   formats={"eval_score": fmt.sig3, "points_gained": fmt.sig3},
                   helps={"eval_score": "– where no run of the version was evaluated",
                          "usd_per_point": "– where no evaluation point was gained"})
runs = v["per_run"].copy()
runs["usd"] = runs["usd"].map(float)
runs["stage"] = runs["stage"].map(lambda s: STAGE_WORDS.get(s, s))
common.money_table(runs, ["usd"], formats={"gpu_hours": fmt.num, "eval_score": fmt.sig3}, headers={"run_id": "Run", "project": "Project", "model_version": "Model version",
                                   "stage": "Stage", "status": "Status", "usd": "Dollars",
                                   "gpu_hours": "GPU-hours billed", "eval_score": "Evaluation score"})

st.markdown("**Your organisation's efficiency**")
try:
    fit = _fit(key, data)
except ScenarioError as err:
    st.caption(common.md_escape(err))
else:
    st.caption(f"{len(fit['runs'])} completed pre-training runs carry model size, tokens and GPU type. The planner's "
               f"defaults are off by {fmt.pct(fit['default_median_error'])} (median); a factor of "
               f"{fit['factor']:.2f} on the sustained share of the modelled speed brings it to "
               f"{fmt.pct(fit['loo_median_error'])} out of sample (leave-one-out).")

    def _apply_factor(factor: float) -> None:
        applied = efficiency.apply(common.scenario(), factor)
        common.apply(efficiency.FIELD, applied["efficiency"]["sustained_fraction"])

    st.button(f"Apply the factor {fit['factor']:.2f} to the plan", key="review_apply_eff", on_click=_apply_factor,
              args=(fit["factor"],))
