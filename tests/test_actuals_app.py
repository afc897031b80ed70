"""The Review page (pages/review.py) in AppTest: the sample loads with its plan, the figures are
the core's, a slicer narrows them, and every chart is titled with axis titles in words."""
from __future__ import annotations

import json

from streamlit.testing.v1 import AppTest

from costcore import fmt
from shared import APP
from server_support import NEVER_S  # the one wait limit of the suite (not a speed)


def _metric(at, label):
    return next(m.value for m in at.metric if m.label == label)


def test_review_page_sample_slicers_and_charts(warm_kernels):
    from costcore.actuals import report, sample
    at = AppTest.from_file(APP, default_timeout=NEVER_S)
    at.run()
    at.switch_page("pages/review.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert _metric(at, "Total cost").startswith("$")
    assert len(at.get("vega_lite_chart")) == 1  # the plan's burn, before any bill
    # before any bill there is no actual: no "$0.00" spend and no "-$33.6M" variance
    assert all(_metric(at, k) == "–" for k in ("Actual spend", "Variance", "Anomalous days", "Waste"))
    assert any(c.value.startswith("No bills yet") for c in at.caption)
    assert _metric(at, "Billed plan").startswith("$")
    at.button(key="review_sample").click()
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state["preset"] == sample.PLAN_PRESET
    import costcore
    from actuals_support import sample_files
    _, truth = sample_files(7)
    assert _metric(at, "Actual spend") == fmt.usd(float(truth["billed_usd"]))
    plan = costcore.estimate(sample.PLAN_PRESET)
    billed = sum(plan.stage_usd(s)[r] for s in plan.stages for r in report.BILLED_RESOURCES)
    assert _metric(at, "Billed plan") == fmt.usd(billed)
    # distinct days: the sample's 26 anomalies fall on 21 (the metric counted rows)
    assert int(_metric(at, "Anomalous days")) == len({a["date"] for a in truth["anomalies"]}) < len(truth["anomalies"])
    charts = at.get("vega_lite_chart")
    assert len(charts) == 3
    for c in charts:
        spec = json.loads(c.proto.spec)
        assert spec.get("title"), spec
        for view in [spec] + spec.get("layer", []):
            for ch in ("x", "y"):
                enc = (view.get("encoding") or {}).get(ch)
                if enc and "field" in enc:
                    assert enc.get("title"), (spec["title"], ch)
    at.multiselect(key="review_project").set_value(["atlas"])
    at.run()
    assert not at.exception
    assert _metric(at, "Actual spend") == fmt.usd(float(truth["by_project_usd"]["atlas"]))
    assert int(_metric(at, "Anomalous days")) == len({a["date"] for a in truth["anomalies"] if a["project"] == "atlas"}) > 0
    at.button(key="review_apply_eff").click()
    at.run()
    assert at.session_state["scenario"]["efficiency"]["sustained_fraction"] < 0.6


def _legend_words(chart) -> list[str]:
    spec = json.loads(chart.proto.spec)
    words = []
    for view in spec.get("layer", [spec]):
        color = (view.get("encoding") or {}).get("color") or {}
        words += [w for w in (color.get("scale") or {}).get("domain", []) if w not in words]
    return words


def test_the_burn_chart_calls_a_line_a_budget_only_when_one_is_set(warm_kernels):
    """No budget set anywhere: the line drawn is the plan's billed total and is named so; no legend entry
    for actual spend before any bill. With the scenario's total budget set, the line is the budget."""
    at = AppTest.from_file(APP, default_timeout=NEVER_S)
    at.run()
    at.switch_page("pages/review.py")
    at.run()
    assert float(at.session_state["scenario"].get("budget", {}).get("total_usd", 0) or 0) == 0
    assert _legend_words(at.get("vega_lite_chart")[0]) == ["Plan", "Plan's billed total (no budget set)",
                                                            "Warning line"]
    scn = dict(at.session_state["scenario"])
    scn["budget"] = dict(scn.get("budget", {}), total_usd=40e6)
    at.session_state["scenario"] = scn
    at.run()
    assert not at.exception
    assert _legend_words(at.get("vega_lite_chart")[0]) == ["Plan", "Budget", "Warning line"]
    at.button(key="review_sample").click()
    at.run()
    assert "Actual spend" in _legend_words(at.get("vega_lite_chart")[0])


def test_review_tables_name_every_stage_and_show_a_dash_for_no_value(warm_kernels):
    """With the sample's bills: the plan-vs-actual table names the support line's stage in words (it read the raw
    key "unattributed"), the waterfall has a row of height for each of its steps (half-width at 1280 px, Vega kept
    5 of 10 labels), a cost-per-result cell without a score is a dash, not Streamlit's grey "None", and the
    burn caption names the plan's total once, without two parentheses in a row."""
    at = AppTest.from_file(APP, default_timeout=NEVER_S)
    at.run()
    at.switch_page("pages/review.py")
    at.run()
    at.button(key="review_sample").click()
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    stages = [list(d.value["stage"]) for d in at.dataframe if "cause" in d.value.columns]
    assert stages and "Not attributed to a stage" in stages[0] and "unattributed" not in stages[0]
    waterfall = next(json.loads(c.proto.spec) for c in at.get("vega_lite_chart")
                     if str(json.loads(c.proto.spec)["title"]).startswith("Variance waterfall"))
    assert waterfall["height"] >= 24 * 10  # the sample's ten steps, plan to actual
    per_version = next(d for d in at.dataframe if "points_gained" in d.value.columns)
    assert per_version.value["eval_score"].isna().any() and per_version.proto.placeholder == "–"
    said = " ".join(c.value for c in at.caption)
    assert ") (" not in said


def test_the_sample_keeps_your_plan_one_click_away_and_compares_with_the_plan_to_date(warm_kernels):
    """Loading the sample swaps the plan for the sample's preset; the plan it replaced (the 70B pipeline with its
    GPU count changed) is kept and "Back to your plan" brings it back exactly, the bills still loaded. Against that
    plan, months longer than the bills, the page shows the plan to the last day billed and the variance to it."""
    import costcore
    from costcore.actuals import report, sample
    at = AppTest.from_file(APP, default_timeout=NEVER_S)
    at.run()
    at.switch_page("pages/review.py")
    at.run()
    scn = dict(at.session_state["scenario"])
    scn["hardware"] = dict(scn["hardware"], num_gpus=4096)
    at.session_state["scenario"] = scn
    at.run()
    mine = at.session_state["scenario"]
    at.button(key="review_sample").click()
    at.run()
    assert at.session_state["preset"] == sample.PLAN_PRESET
    assert any("yours is kept" in i.value for i in at.info)
    at.button(key="review_back").click()
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state["scenario"] == mine and at.session_state["preset"] != sample.PLAN_PRESET
    assert _metric(at, "Actual spend") != "–"  # the sample's bills stay
    assert not any("yours is kept" in i.value for i in at.info)
    plan = costcore.estimate(mine)
    assert _metric(at, "Plan to date").startswith("$")
    whole = sum(plan.stage_usd(s)[r] for s in plan.stages for r in report.BILLED_RESOURCES)
    assert _metric(at, "Plan to date") != fmt.usd(whole)
    assert _metric(at, "Variance").startswith("-$")
