"""Sensitivity and uncertainty: tornado, sweep, heatmap, Monte Carlo, budget solver."""
import json
import math

import altair as alt
import numpy as np
import pandas as pd
import streamlit as st

import costcore
from costcore import fmt
from costcore.scenario import schema
from costcore.analysis import sensitivity as sens
from costcore.scenario.schema import BY_PATH, STAGE_LABELS
from pages import common

res = common.frame(
    "Sensitivity and uncertainty",
    "A single number hides how fragile it is. The **tornado** moves every input up and down one at a "
    "time and ranks them by how much the total swings; the **sweep** and **heatmap** show the cost "
    "surface along one or two inputs; **Monte Carlo** draws the uncertain inputs together and gives "
    "the P10/P50/P90 and the chance of going over budget; the **budget solver** finds the largest "
    "plan a budget buys. Each is one call of the parallel kernel.")
scn = common.current()  # validated once; every sensitivity call below reuses its vector
if not res.stages:
    st.info("Switch on at least one stage.")
    st.stop()


def label(path: str) -> str:
    f = BY_PATH[path]  # the unit once: not "Global batch (tokens) (tokens)" or "Layers (layers)"
    return f"{f.label} ({f.unit})" if f.unit and f.unit.lower() not in f.label.lower() else f.label


@st.cache_data(show_spinner=False, max_entries=64)
def _monte_carlo(scn_json: str, n: int, seed: int, budget: float):
    """Monte Carlo of a scenario (cached per process: pure function of its arguments)."""
    scn = json.loads(scn_json)
    return sens.monte_carlo(scn, n=n, seed=seed, dists=sens.default_distributions(scn), budget_usd=budget)


# Each analysis once per (scenario, settings) per process: a slider moved back to a value, or one that
# only changes what is drawn ("Inputs shown"), costs no kernel call. ``_scn`` (not hashed) is the
# validated scenario that SCN_JSON spells.
@st.cache_data(show_spinner=False, max_entries=64)
def _tornado(scn_json: str, rel: float, _scn):
    return sens.tornado(_scn, rel=rel)


@st.cache_data(show_spinner=False, max_entries=64)
def _sweep(scn_json: str, key: str, xs: np.ndarray, _scn):
    return sens.sweep(_scn, key, xs)


@st.cache_data(show_spinner=False, max_entries=64)
def _sweep_jumps(scn_json: str, key: str, xs: np.ndarray, _scn, _sw):
    return sens.sweep_jumps(_scn, key, _sw)


@st.cache_data(show_spinner=False, max_entries=32)
def _heatmap(scn_json: str, kx: str, xs: np.ndarray, ky: str, ys: np.ndarray, _scn):
    return sens.heatmap(_scn, kx, xs, ky, ys, feasible=True)


SCN_JSON = json.dumps(scn.data, sort_keys=True)
# the budget the user set (Budget page), else none: the budget boxes below start from it, not from the plan's total
SET_BUDGET = float(schema.effective_value(scn.data, "budget.total_usd") or 0.0)
BUDGET_HELP = ("Starts at your total budget (Budget page)." if SET_BUDGET > 0 else
               "No total budget is set (Budget page); this starts at {}.")
inputs = sens.numeric_inputs(scn)


BUDGET_MAX = BY_PATH["budget.total_usd"].hi  # $10 trillion, the largest budget a scenario states


def _in_range(what: str, v: float, lo: float, hi: float, whole: bool = False) -> bool:
    """A box's value within [lo, hi] (and whole), else a sentence naming it and its range, as every other page
    refuses (the browser's own min/max drew a red border alone and kept using the old value)."""
    ok = math.isfinite(v) and lo <= v <= hi and (not whole or float(v).is_integer())
    if not ok:
        kind = "a whole number" if whole else "a number"
        money = what.lower().startswith("budget")
        ends = (fmt.usd(lo), fmt.usd(hi)) if money else (fmt.num(lo), fmt.num(hi))
        st.warning(common.md_escape(f"{what}: must be {kind} from {ends[0]} to {ends[1]} (got {v:,.6g}); "
                                    "nothing was computed with it."))
    return ok


@st.fragment
def tornado_section():
    st.header("Tornado: which knob moves the total most")
    c1, c2 = st.columns(2)
    rel = c1.slider("Move each input by ±", 0.05, 0.5, 0.2, 0.05, format="%.2f", key="tor_rel")
    top = c2.slider("Inputs shown", 5, 60, 25, 1, key="tor_top")
    # off by default: TP halved and doubled ($42M to $149M on the 70B plan: TP 16 spans two 8-GPU nodes) led the
    # chart above the uncertain inputs (MFU, prices, tokens) a budget asks about
    choices = st.toggle("Include layout and shape choices (parallel degrees, GPUs per node, the model's widths and "
                        "layers)", value=False, key="tor_choices")
    tor = _tornado(SCN_JSON, rel, scn)
    moved = tor.table[tor.table.abs_swing > 0]
    left_out = moved[moved.choice] if not choices else moved.iloc[0:0]
    t = (moved if choices else moved[~moved.choice]).head(top).copy()
    if t.empty:
        st.info("No input moves the total." if moved.empty else "Only layout and shape choices move the total here: "
                "switch them on above.")
        return
    t["label"] = [label(p) for p in t.input]
    t["lo_usd"] = np.minimum(t.total_low, t.total_high)
    t["hi_usd"] = np.maximum(t.total_low, t.total_high)
    t["direction"] = np.where(t.swing >= 0, "cost rises with the input", "cost falls as the input rises")
    order = list(t.label)
    bars = alt.Chart(t).mark_bar().encode(
        # the axis title sits above the labels (an upright title beside 360-px labels ran into them)
        y=alt.Y("label:N", sort=order, title="Input",
                axis=alt.Axis(labelLimit=360, labelOverlap=False, labelFontSize=12, titleAngle=0,
                              titleAlign="right", titleBaseline="bottom", titleX=-4, titleY=-6)),
        x=alt.X("lo_usd:Q", title="Total cost ($)", axis=common.usd_axis(), scale=alt.Scale(zero=False)),
        x2=alt.X2("hi_usd:Q"),
        color=alt.Color("direction:N", scale=alt.Scale(range=["#E45756", "#4C78A8"]), title="Direction",
                        legend=alt.Legend(orient="top")),
        tooltip=[alt.Tooltip("label:N", title="Input"), alt.Tooltip("value:Q", format=",.4g", title="current"),
                 alt.Tooltip("low:Q", format=",.4g", title="low"), alt.Tooltip("high:Q", format=",.4g", title="high"),
                 alt.Tooltip("total_low:Q", format="$,.0f", title="total at low"),
                 alt.Tooltip("total_high:Q", format="$,.0f", title="total at high")])
    base_rule = alt.Chart(pd.DataFrame({"x": [tor.base_total]})).mark_rule(color="black").encode(
        x=alt.X("x:Q", title="Total cost ($)"))
    common.show_chart(common.layer(bars, base_rule),
                      f"Total cost with each input {rel:.0%} lower and higher"
                      + (", parallel degrees halved and doubled" if choices else "") + " (black: today's total)",
                      height=max(200, 26 * len(t) + 40))
    if len(left_out):
        big = left_out.iloc[0]
        st.caption(f"{len(left_out)} layout and shape choices are left out; the largest, {label(big.input).lower()}, "
                   f"swings the total from {fmt.usd(min(big.total_low, big.total_high))} to "
                   f"{fmt.usd(max(big.total_low, big.total_high))} (the toggle above shows them).")
    st.caption(f"{len(tor.table)} numeric inputs moved; the black line is the current total "
               f"{fmt.usd(tor.base_total)}. \"auto\" MFU and checkpoint intervals are moved around the value the core "
               "resolved. Parallel degrees (tensor, pipeline, context, expert parallelism, micro-batch), GPUs per "
               "node and the model's attention heads and experts are halved and doubled instead: a layout splits them "
               "evenly. Widths move to a multiple of 128. A change of the model's size or shape is costed as a model "
               "of that shape: the layers follow the size, the parameter count follows the layers and widths.")


@st.fragment
def sweep_section():
    st.header("Sweep one input")
    default_key = "model.params_b"
    c1, c2, c3 = st.columns([2, 1, 1])
    key = c1.selectbox("Input", inputs, index=inputs.index(default_key) if default_key in inputs else 0, key="sw_key",
                       format_func=label)
    cur = float(sens.current_values([key], scn, res)[0])
    f = BY_PATH[key]
    lo_default = max(f.lo, cur / 4 if cur > 0 else 0.0)
    hi_default = min(f.hi, cur * 4 if cur > 0 else 1.0)
    lo = c2.number_input("from", value=float(lo_default), key=f"sw_lo:{key}")
    hi = c3.number_input("to", value=float(hi_default), key=f"sw_hi:{key}")
    if not (_in_range(f"{label(key)}, from", lo, f.lo, f.hi) and _in_range(f"{label(key)}, to", hi, f.lo, f.hi)):
        pass
    elif hi <= lo:
        st.warning(f"{label(key)}: 'to' must be larger than 'from' ({f.allowed()}).")
    else:
        xs = np.linspace(lo, hi, 80)
        if f.kind == "int":
            xs = np.unique(np.round(xs))
        sw = _sweep(SCN_JSON, key, xs, scn)
        sw = sw[sw.stage.isin(res.stages)]  # the legend lists the scenario's stages, not every stage there is
        jumps = _sweep_jumps(SCN_JSON, key, xs, scn, sw)
        sw["stage"] = sw.stage.map(STAGE_LABELS)
        area = alt.Chart(sw).mark_area().encode(
            x=alt.X("value:Q", title=label(key)), y=alt.Y("usd:Q", stack=True, title="Cost ($)", axis=common.usd_axis()),
            color=alt.Color("stage:N", title="Stage", sort=[STAGE_LABELS[s] for s in costcore.STAGES],
                            scale=alt.Scale(domain=[STAGE_LABELS[s] for s in common.STAGE_COLORS if s in res.stages],
                                            range=[c for s, c in common.STAGE_COLORS.items() if s in res.stages])),
            tooltip=[alt.Tooltip("stage:N", title="Stage"), alt.Tooltip("value:Q", format=",.4g", title=label(key)),
                     alt.Tooltip("usd:Q", format="$,.0f", title="Cost")])
        now = alt.Chart(pd.DataFrame({"value": [cur], "what": [f"current: {fmt.num(cur)}"]})).mark_rule(
            strokeDash=[4, 3], color="black").encode(x=alt.X("value:Q", title=label(key)),
                                                     tooltip=[alt.Tooltip("what:N", title="Now")])
        layers = [area, now]
        bad = sw.drop_duplicates("value")
        bad = bad[~bad.feasible]
        if len(bad):  # computed, but marked: a plan there does not fit in GPU memory
            bad = bad.assign(what="does not fit in GPU memory")
            layers.append(alt.Chart(bad).mark_tick(color="#d62728", thickness=3, size=14).encode(
                x=alt.X("value:Q", title=label(key)), y=alt.datum(0),  # on the $0 line, inside the plot
                tooltip=[alt.Tooltip("what:N", title="Plan"), alt.Tooltip("value:Q", format=",.4g", title=label(key))]))
        if len(jumps):  # where a stage's cost steps because its searched job layout changes
            layers.append(alt.Chart(_jump_marks(jumps)).mark_rule(strokeDash=[1, 3], color="#555555",
                                                                  strokeWidth=1.5).encode(
                x=alt.X("value:Q", title=label(key)),
                tooltip=[alt.Tooltip("value:Q", format=",.4g", title=label(key)),
                         alt.Tooltip("said:N", title="Layout change")]))
        common.show_chart(common.layer(*layers),
                          f"Cost by stage as {BY_PATH[key].label.lower()} changes (dashed: today)", height=300)
        if len(jumps):
            st.caption(_jump_words(jumps, key))
        if len(bad):
            st.caption(f"Red ticks: {len(bad)} of {sw.value.nunique()} values give a plan that does not fit in GPU "
                       f"memory ({fmt.num(bad.value.min())} to {fmt.num(bad.value.max())}); their cost is drawn "
                       "but such a plan cannot run as set.")


JUMP_LINES = 8  # at most this many dotted lines: twenty between 218B and 280B on the 70B preset hid the curve


def _jump_marks(jumps: pd.DataFrame) -> pd.DataFrame:
    """One dotted line per swept value (its stages' changes together), the largest JUMP_LINES steps."""
    rows = []
    for value, g in jumps.groupby("value", sort=False):
        said = "; ".join(f"{STAGE_LABELS[r.stage]} {fmt.usd(r.usd_before)} to {fmt.usd(r.usd_after)}: {r.change}"
                         for r in g.itertuples())
        rows.append({"value": value, "said": said, "size": float((g.usd_after - g.usd_before).abs().sum())})
    return pd.DataFrame(rows).nlargest(JUMP_LINES, "size")


def _jump_words(jumps: pd.DataFrame, key: str) -> str:
    """The largest two steps of a sweep that a layout change explains, in words, and how many more."""
    big = jumps.assign(size=(jumps.usd_after - jumps.usd_before).abs()).sort_values("size", ascending=False)
    said = [f"At {fmt.num(r.value)}, {STAGE_LABELS[r.stage].lower()} goes from {fmt.usd(r.usd_before)} to "
            f"{fmt.usd(r.usd_after)}: {r.change}." for r in big.head(2).itertuples()]
    more = len(big) - len(said)
    lines = min(jumps.value.nunique(), JUMP_LINES)
    return (f"Grey dotted lines mark where a stage's cost steps because its searched job layout changes "
            f"({label(key).lower()}; the {lines} largest drawn). " + " ".join(said)
            + (f" And {more} more such steps; hover a line for its change." if more else ""))


def _lower_first(text: str) -> str:
    """A label inside a sentence: its first letter in lower case, unless it starts an acronym ("GPU type",
    "MFU" stay; "Total budget" becomes "total budget")."""
    return text if len(text) > 1 and text[1].isupper() else text[:1].lower() + text[1:]


@st.fragment
def heatmap_section():
    st.header("Two inputs: cost surface")
    c1, c2, c3 = st.columns(3)
    kx = c1.selectbox("x", inputs, index=inputs.index("model.params_b") if "model.params_b" in inputs else 0, key="hm_x",
                      format_func=label)
    ydef = next((k for k in ("stages.pretrain.tokens_b", "hardware.num_gpus") if k in inputs),
                inputs[min(1, len(inputs) - 1)])
    ky = c2.selectbox("y", inputs, index=inputs.index(ydef), key="hm_y", format_func=label)
    budget = c3.number_input("Budget line ($)",
                             value=SET_BUDGET or float(round(res.total_usd, -3) or 1000.0), step=1e5, key="hm_budget",
                             format="%.0f", help=BUDGET_HELP.format("the plan's total"))
    if not _in_range("Budget line", budget, 1.0, BUDGET_MAX):
        pass
    elif kx == ky:
        st.warning("Choose two different inputs.")
    else:
        vx, vy = sens.current_values([kx, ky], scn, res)
        fx, fy = BY_PATH[kx], BY_PATH[ky]
        nx = ny = 60
        xs = np.geomspace(max(fx.lo, vx / 8, 1e-6), min(fx.hi, max(vx, 1e-6) * 8), nx) if vx > 0 else np.linspace(fx.lo, min(fx.hi, 1), nx)
        ys = np.geomspace(max(fy.lo, vy / 8, 1e-6), min(fy.hi, max(vy, 1e-6) * 8), ny) if vy > 0 else np.linspace(fy.lo, min(fy.hi, 1), ny)
        if fx.kind == "int":
            xs = np.unique(np.round(xs))
        if fy.kind == "int":
            ys = np.unique(np.round(ys))
        grid, fits = _heatmap(SCN_JSON, kx, xs, ky, ys, scn)
        gx, gy = np.meshgrid(xs, ys)
        hm = pd.DataFrame({"x": gx.ravel(), "y": gy.ravel(), "usd": grid.ravel(),
                           "fits": np.where(fits.ravel(), "yes", "no: does not fit in GPU memory")})
        # cell edges for rect marks on log axes
        def edges(v):
            mids = np.sqrt(v[1:] * v[:-1]) if np.all(v > 0) else (v[1:] + v[:-1]) / 2
            return np.concatenate([[v[0]], mids]), np.concatenate([mids, [v[-1]]])
        x0, x1 = edges(xs)
        y0, y1 = edges(ys)
        hm["x0"], hm["x1"] = np.tile(x0, len(ys)), np.tile(x1, len(ys))
        hm["y0"], hm["y1"] = np.repeat(y0, len(xs)), np.repeat(y1, len(xs))
        scale_x = alt.Scale(type="log" if np.all(xs > 0) else "linear", domain=[float(xs[0]), float(xs[-1])], nice=False)
        scale_y = alt.Scale(type="log" if np.all(ys > 0) else "linear", domain=[float(ys[0]), float(ys[-1])], nice=False)
        rect = alt.Chart(hm).mark_rect().encode(
            x=alt.X("x0:Q", title=label(kx), scale=scale_x), x2=alt.X2("x1:Q"),
            y=alt.Y("y0:Q", title=label(ky), scale=scale_y), y2=alt.Y2("y1:Q"),
            color=alt.Color("usd:Q", title="Total ($)", scale=alt.Scale(type="log", scheme="viridis"),
                            legend=common.usd_legend(log=True)),
            opacity=alt.condition(alt.datum.fits == "yes", alt.value(1.0), alt.value(0.25)),
            tooltip=[alt.Tooltip("x:Q", format=",.4g", title=label(kx)), alt.Tooltip("y:Q", format=",.4g", title=label(ky)),
                     alt.Tooltip("usd:Q", format="$,.0f", title="total"), alt.Tooltip("fits:N", title="fits")])
        layers = [rect]
        # iso-budget contour: for each x, the y where the total crosses the budget
        iso = []
        for i, xv in enumerate(xs):
            col = grid[:, i]
            j = np.nonzero((col[:-1] - budget) * (col[1:] - budget) <= 0)[0]
            if len(j):
                j = j[0]
                a, b = col[j], col[j + 1]
                w = 0.0 if b == a else (budget - a) / (b - a)
                iso.append({"x": xv, "y": ys[j] + w * (ys[j + 1] - ys[j]), "line": f"budget {fmt.usd(budget)}"})
        if iso:
            layers.append(alt.Chart(pd.DataFrame(iso)).mark_line(color="white", strokeWidth=2.5).encode(
                x=alt.X("x:Q", title=label(kx)), y=alt.Y("y:Q", title=label(ky)),
                tooltip=[alt.Tooltip("line:N", title="Line")]))
        co = pd.DataFrame({"x": xs, "y": xs * sens.TOKENS_PER_PARAM})
        co = co[(co.y >= ys[0]) & (co.y <= ys[-1])] if kx == "model.params_b" and ky.endswith(".tokens_b") else co[:0]
        if len(co):
            co["line"] = "compute-optimal: 20 tokens per parameter (Hoffmann et al. 2022)"
            layers.append(alt.Chart(co).mark_line(color="#ff7f0e", strokeDash=[6, 3], strokeWidth=2.5).encode(
                x=alt.X("x:Q", title=label(kx)), y=alt.Y("y:Q", title=label(ky)),
                tooltip=[alt.Tooltip("line:N", title="Line")]))
        layers.append(alt.Chart(pd.DataFrame({"x": [vx], "y": [vy], "what": ["current plan"]})).mark_point(
            shape="diamond", size=160, color="red", filled=True).encode(
                x=alt.X("x:Q", title=label(kx)), y=alt.Y("y:Q", title=label(ky)),
                tooltip=[alt.Tooltip("what:N", title="Point")]))
        common.show_chart(common.layer(*layers),
                          f"Total cost over {_lower_first(BY_PATH[kx].label)} and {_lower_first(BY_PATH[ky].label)}",
                          height=420)
        n_bad = int((~fits).sum())
        # each line named only when drawn: the caption explained orange dashes no chart without tokens had
        st.caption(("White: the iso-budget contour (plans costing exactly the budget). " if iso else
                    f"No plan on this surface costs exactly the budget line of {fmt.usd(budget)}. ")
                   + ("Orange dashes: compute-optimal tokens = 20 x parameters. " if len(co) else "")
                   + "Red diamond: the current plan."
                   + (f" Faded cells ({n_bad:,} of {fits.size:,}): plans that do not fit in GPU memory." if n_bad else ""))


MC_SAMPLES, MC_DEFAULT_SAMPLES = (1_000, 5_000, 10_000, 20_000, 50_000), 10_000


@st.fragment
def monte_carlo_section():
    st.header("Monte Carlo: how sure is the total?")
    st.markdown("Uncertain inputs are sampled together and every sample is costed in one batch call. A stage "
                "on the default MFU gets the spread the default model has shown on published runs (the "
                "validation page); prices, failures, rework and experiment counts get the spreads listed under "
                "*Distributions used*.")
    c1, c2, c3 = st.columns(3)
    # Stratified draws (Latin hypercube): 10k samples put P10, P50 and P90 within about 0.5% of a
    # million-sample run, the third significant digit shown, as 20k independent draws did; 20k within
    # 0.4% (benchmarks/bench_mc_precision.py, 2026-12-06). 10k runs in ~25 ms on pipeline-70b, 20k in
    # ~60-80 ms: the rerun after a sidebar change stays under 100 ms. More is for the API and CLI.
    n = int(c1.select_slider("Samples", MC_SAMPLES, value=MC_DEFAULT_SAMPLES, key="mc_n",
                             format_func=lambda v: f"{v:,}",
                             help="Stratified (Latin hypercube) draws: P10, P50 and P90 move by about 0.5% between seeds at "
                                  "10,000 samples and 0.4% at 20,000 (against a million samples): the third "
                                  "digit shown. "
                                  "costcore.api.monte_carlo takes any count."))
    seed = c2.number_input("Seed", value=0.0, step=1.0, format="%.0f", key="mc_seed")
    mc_budget = c3.number_input("Budget ($)",
                                value=SET_BUDGET or float(round(res.total_usd * 1.1, -3) or 1000.0), step=1e5,
                                key="mc_budget", format="%.0f", help=BUDGET_HELP.format("the plan's total plus 10%"))
    if not (_in_range("Seed", seed, 0, 10_000, whole=True) and _in_range("Budget", mc_budget, 1.0, BUDGET_MAX)):
        return
    seed = int(seed)
    dists = sens.default_distributions(scn)
    mc = _monte_carlo(SCN_JSON, n, seed, float(mc_budget))
    m = st.columns(4)
    p = mc.percentiles.loc["total"]
    m[0].metric("P10", fmt.usd(p.P10))
    m[1].metric("P50", fmt.usd(p.P50))
    m[2].metric("P90", fmt.usd(p.P90))
    m[3].metric("P(over budget)", fmt.share(mc.p_over_budget))
    if mc.p_relaid > 0:
        why = f", from the draws of “{label(mc.relaid_driver)}”," if mc.relaid_driver else ""
        st.info(f"{fmt.share(mc.p_relaid)} of the samples do not fit in GPU memory on the layout kept from the "
                f"plan{why} so each is costed on a layout searched for it, as a team would lay the job out "
                "again (one search for each sixteenth of those draws, at its upper end).", icon="ℹ️")
    if mc.p_infeasible > 0:
        why = (f" They go with the draws of “{label(mc.infeasible_driver)}”." if mc.infeasible_driver else "")
        st.warning(f"{fmt.share(mc.p_infeasible)} of the samples do not fit in GPU memory even on a searched "
                   f"layout; they are costed and counted above, but such a plan cannot run as set.{why}", icon="⚠️")
    hist_counts, hist_edges = np.histogram(mc.totals, bins=60)
    hist = pd.DataFrame({"lo": hist_edges[:-1], "hi": hist_edges[1:], "count": hist_counts})
    h = alt.Chart(hist).mark_bar(color="#4C78A8").encode(
        x=alt.X("lo:Q", bin="binned", title="Total cost ($)", axis=common.usd_axis(), scale=alt.Scale(zero=False)),
        x2=alt.X2("hi:Q"),
        y=alt.Y("count:Q", title="Samples"), tooltip=[alt.Tooltip("lo:Q", format="$,.0f", title="From"),
                                                      alt.Tooltip("count:Q", title="Samples")])
    # P10 and P90 are the band's two ends: one legend entry, one grey (two entries of one grey read as a mistake)
    marks = pd.DataFrame({"x": [p.P10, p.P90, p.P50, mc_budget, mc.deterministic_total],
                          "what": ["P10 and P90", "P10 and P90", "P50", "Budget", "Deterministic estimate"],
                          "which": ["P10", "P90", "P50", "Budget", "Deterministic estimate"]})
    rules = alt.Chart(marks).mark_rule(strokeWidth=2).encode(
        x=alt.X("x:Q", title="Total cost ($)"),
        color=alt.Color("what:N", scale=alt.Scale(domain=list(dict.fromkeys(marks.what)),
                                                  range=["#999999", "#333333", "#E45756", "#2ca02c"]),
                        title="Line"), tooltip=[alt.Tooltip("which:N", title="Line"),
                                                alt.Tooltip("x:Q", format="$,.0f", title="Total")])
    common.show_chart(common.layer(h, rules), "Monte Carlo: how the total is spread", height=260)
    pct = mc.percentiles.copy()
    pct.index = [STAGE_LABELS.get(i, "Total") for i in pct.index]
    common.money_table(pct.reset_index(names="stage"), list(pct.columns), {"stage": "Stage"})
    with st.expander("Distributions used"):  # a static table: it wraps the reasons instead of cutting them off
        st.table(pd.DataFrame([{"Input": label(k), "Distribution": d.kind.capitalize(),
                                    "Parameters": ((f"sigma {d.a:.3g} around current" if d.b == 1.0 else
                                                    f"sigma {d.a:.3g} around x{d.b:.3g} of current")
                                                   if d.kind == "lognormal"
                                                   else f"x{d.a:g} .. x{d.b:g}" + (f" .. x{d.c:g}" if d.kind == "triangular" else "")),
                                    "Why": d.why or "assumption"}
                                   for k, d in dists.items()]).set_index("Input"))


@st.fragment
def solver_section():
    st.header("Budget solver: the largest plan a budget buys")
    amounts = sens.solver_amounts(scn)
    if not amounts:
        st.info("No stage is switched on: there is nothing for a budget to buy.")
        return
    c1, c2 = st.columns(2)
    b = c1.number_input("Budget for the whole plan ($)",
                        value=max(SET_BUDGET, 1000.0) if SET_BUDGET else float(round(res.total_usd, -3)),
                        step=1e6, key="solve_budget", format="%.0f", help=BUDGET_HELP.format("the plan's total"))
    if not _in_range("Budget for the whole plan", b, 1000.0, BUDGET_MAX):
        return
    modes = (["compute_optimal", "tokens"] if "pretrain" in res.stages else []) + ["amount"]
    for k, choices in (("solve_mode", modes), ("solve_key", amounts)):  # a choice the new scenario no longer has
        if k in st.session_state and st.session_state[k] not in choices:
            del st.session_state[k]
    mode = modes[0] if len(modes) == 1 else c2.radio(  # a one-option radio said nothing a label would not
        "Solve for", modes, horizontal=True, key="solve_mode",
        format_func={"compute_optimal": "model size and tokens (20 tokens/param)",
                     "tokens": "tokens for this model", "amount": "more of one stage"}.__getitem__)
    key = None
    if mode == "amount":
        key = st.selectbox("Amount to buy (everything else stays as planned)", amounts, key="solve_key",
                           format_func=lambda k: BY_PATH[k].label)
    try:
        sol = sens.solve_budget(scn, b, mode=mode, key=key)
        m = st.columns(4)
        if mode == "amount":
            f = BY_PATH[key]
            now = float(schema.effective_value(scn, key))
            unit = f" {f.unit}" if f.unit else ""
            scale = next((v for w, v in (("billion", 1e9), ("million", 1e6), ("thousand", 1e3))
                          if str(f.unit).startswith(w)), 1.0)  # 25.1T tokens, not 25.1k (billion tokens)
            m[0].metric(f.label.split(": ", 1)[-1], fmt.num(sol.value * scale),
                        help=f"{sol.value:,.6g}{unit}; planned now: {now:,.6g}{unit}")
            m[1].metric("Against the plan", f"{sol.value / now:.3g}x" if now > 0 else "n/a",
                        help="The amount the budget buys over the amount the scenario plans.")
        else:
            m[0].metric("Model size (parameters)", fmt.num(sol.params_b * 1e9), help=f"{sol.params_b:,.4f} billion")
            m[1].metric("Pre-training tokens", fmt.num(sol.tokens_b * 1e9), help=f"{sol.tokens_b:,.2f} billion")
        m[2].metric("Plan total", fmt.usd(sol.total_usd), help=fmt.usd_exact(sol.total_usd))
        what = "amount" if mode == "amount" else "size"
        if sol.limit == "memory":  # GPU memory, not the budget, stops it
            m[3].metric("One step larger", fmt.usd(sol.next_total_usd), delta_color="inverse",
                        delta="does not fit in GPU memory",
                        help=f"The next {what} the search tried ({sol.step:.2%} larger) costs "
                             f"{fmt.usd_exact(sol.next_total_usd)} but its plan does not fit the GPUs.")
            st.caption(f"GPU memory, not the budget, sets this {what}: the plan costs {fmt.usd(sol.total_usd)} of "
                       f"{fmt.usd(b)}, and one step larger no longer fits the GPUs with this layout. Unpin "
                       "tensor or pipeline parallelism on the Job layout page, or add GPUs, to buy more.")
        elif math.isfinite(sol.next_total_usd):  # both can read $43.2M: the difference is what it says
            m[3].metric("One step larger", fmt.usd(sol.next_total_usd), delta_color="inverse",
                        delta=f"{fmt.usd(sol.next_total_usd - b)} over the budget",
                        help=f"The next {what} the search tried ({sol.step:.2%} larger) costs "
                             f"{fmt.usd_exact(sol.next_total_usd)}, over the budget of {fmt.usd_exact(b)}.")
        else:
            m[3].metric("One step larger", "n/a", help=f"The search stopped at the largest {what} it can plan.")
        common.stacked_bar(sol.result, height=360)  # at 240 the seven-resource legend left the bars 120 px
    except schema.ScenarioError as err:  # the API's argument named as the box is ("budget_usd: even the cheapest")
        said = schema.error_in_words(err)
        if getattr(err, "path", "") == "budget_usd":
            said = "Budget for the whole plan" + said[len("budget_usd"):]
        st.warning(common.md_escape(said))


# One analysis at a time: a change of the scenario (the sidebar) reruns the open one, not all five, which
# took ~190 ms together on the 70B pipeline (AppTest; the open tab alone 55-120 ms).
common.lazy_tabs({"Tornado": tornado_section, "Sweep one input": sweep_section, "Cost surface": heatmap_section,
                  "Monte Carlo": monte_carlo_section, "Budget solver": solver_section}, "sensitivity:tab")
