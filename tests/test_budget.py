"""Budget governance: lines and alerts, fixed/elastic, timeline, lifecycle, attribution, levers."""
from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

import costcore
from costcore.analysis import budget as bud
from costcore.analysis import levers
from costcore.scenario import schema

ROOT = Path(__file__).resolve().parent.parent


def _with(preset, **paths):
    scn = costcore.load_preset(preset)
    for k, v in paths.items():
        scn = schema.set_path(scn, k.replace("__", "."), v)
    return schema.validate(scn)


def test_over_sft_budget_raises_exactly_that_alert():
    base = costcore.estimate("pipeline-70b")
    sft = base.stat("sft", "usd_total")
    res = costcore.estimate(_with("pipeline-70b", budget__sft_usd=sft * 0.5,
                                  budget__total_usd=base.total_usd * 10, budget__dpo_usd=base.total_usd))
    st = bud.budget_status(res)
    assert st["status"] == "over"
    assert len(st["alerts"]) == 1
    a = st["alerts"][0]
    assert (a["scope"], a["name"], a["status"]) == ("stage", "sft", "over")
    assert a["over_usd"] == pytest.approx(sft * 0.5)
    assert a["share_over"] == pytest.approx(1.0)
    assert res.to_dict()["budget"] == st


def test_warning_line_and_no_budget():
    base = costcore.estimate("pipeline-70b")
    assert "budget" not in base.to_dict() and bud.budget_status(base) is None
    res = costcore.estimate(_with("pipeline-70b", budget__total_usd=base.total_usd / 0.9, budget__warn_at=0.85))
    st = bud.budget_status(res)
    assert st["status"] == "warning" and st["alerts"][0]["name"] == "total"
    ok = costcore.estimate(_with("pipeline-70b", budget__total_usd=base.total_usd * 2))
    assert bud.budget_status(ok) == {"status": "ok", "alerts": []}


def test_resource_budget():
    base = costcore.estimate("pipeline-70b")
    compute = base.to_dict()["resources"]["compute"]
    res = costcore.estimate(_with("pipeline-70b", budget__compute_usd=compute * 0.99))
    a = bud.budget_status(res)["alerts"]
    assert [(x["scope"], x["name"], x["status"]) for x in a] == [("resource", "compute", "over")]


@pytest.mark.parametrize("preset", costcore.preset_names())
def test_fixed_plus_elastic_is_total(preset):
    res = costcore.estimate(preset)
    d = res.to_dict()
    assert d["fixed_usd"] + d["elastic_usd"] == pytest.approx(d["total_usd"], rel=1e-12)
    li = res.line_items()
    assert li[li.kind == "fixed"].usd.sum() == pytest.approx(d["fixed_usd"], rel=1e-12)
    for s, v in d["stages"].items():
        assert 0 <= v["fixed_usd"] <= v["usd_total"] * (1 + 1e-12)


@pytest.mark.parametrize("preset", costcore.preset_names())
def test_monthly_spend_sums_to_total(preset):
    res = costcore.estimate(preset)
    tl = bud.timeline(res)
    assert tl.monthly.usd.sum() == pytest.approx(res.total_usd, rel=1e-9)
    assert tl.peak_gpus >= max(res.stat(s, "num_gpus") for s in res.stages)
    assert tl.peak_gpus == res.peak_gpus == res.to_dict()["peak_gpus"]
    seq = costcore.estimate(schema.set_path(res.scenario, "schedule.eval_overlap", 0.0))
    assert seq.peak_gpus == max(seq.stat(s, "num_gpus") for s in seq.stages)


def test_monthly_spend_with_lifecycle_sums_to_lifecycle_total():
    res = costcore.estimate(_with("pipeline-70b", lifecycle__iterations=12, lifecycle__every_months=1,
                                  lifecycle__data_reuse=0.7))
    tl = bud.timeline(res)
    life = bud.lifecycle(res)
    assert tl.monthly.usd.sum() == pytest.approx(life.total_usd, rel=1e-9)
    assert life.total_usd == pytest.approx(res.total_usd + 11 * life.per_iteration_usd, rel=1e-12)
    assert (tl.schedule.iteration.max(), len(tl.schedule[tl.schedule.stage == "sft"])) == (12, 12)
    assert res.to_dict()["lifecycle"]["iterations"] == 12


def test_lifecycle_data_reuse_removes_data_costs():
    full = bud.lifecycle(costcore.estimate(_with("pipeline-70b", lifecycle__iterations=3, lifecycle__data_reuse=0.0)))
    reuse = bud.lifecycle(costcore.estimate(_with("pipeline-70b", lifecycle__iterations=3, lifecycle__data_reuse=1.0)))
    res = costcore.estimate("pipeline-70b")
    data = sum(res.stage_usd(s)["data"] - res.items[costcore.STAGES.index(s)][12] for s in full.stages)
    assert full.per_iteration_usd - reuse.per_iteration_usd == pytest.approx(data, rel=1e-9)
    assert full.per_iteration_usd == pytest.approx(sum(res.stat(s, "usd_total") for s in full.stages), rel=1e-12)


def test_sequence_and_overlap():
    res = costcore.estimate(_with("pipeline-70b", schedule__eval_overlap=0.0))
    s = bud.timeline(res).schedule.set_index("stage")
    order = res.stages
    for a, b in zip(order, order[1:]):
        assert s.loc[b, "start"] == s.loc[a, "end"]
    res2 = costcore.estimate(_with("pipeline-70b", schedule__sft_overlap=0.5))
    s2 = bud.timeline(res2).schedule.set_index("stage")
    # an overlap is a share of the previous stage's run (after its setup): SFT starts halfway through CPT's run
    mid = s2.loc["cpt", "run_start"] + (s2.loc["cpt", "end"] - s2.loc["cpt", "run_start"]) / 2
    assert abs((s2.loc["sft", "start"] - mid).total_seconds()) < 1
    # CPT overlapping half of pre-training starts within the pre-training run, never before it (it did: the span
    # counted pre-training's setup months)
    res3 = costcore.estimate(_with("pipeline-70b-lora-grpo", schedule__cpt_overlap=0.5))
    s3 = bud.timeline(res3).schedule.set_index("stage")
    assert s3.loc["cpt", "start"] > s3.loc["pretrain", "run_start"]
    assert all(s3.loc[st, "start"] >= s3.loc["pretrain", "run_start"] for st in res3.stages if st != "pretrain")
    assert str(s2.loc["pretrain", "start"].date()) == schema.effective_value(res2.scenario, "schedule.start_date")


def test_attribution_csv_and_yaml():
    res = costcore.estimate(_with("pipeline-70b", tags__project="atlas", tags__team="ml-platform"))
    df = bud.attribution(res)
    back = pd.read_csv(io.StringIO(df.to_csv(index=False)))
    assert back.usd.sum() == pytest.approx(res.total_usd, rel=1e-9)
    assert set(back.project) == {"atlas"} and set(back.kind) == {"fixed", "elastic"}
    y = yaml.safe_load(bud.attribution_yaml(res))
    assert y["project"] == "atlas" and sum(i["usd"] for i in y["line_items"]) == pytest.approx(res.total_usd)


def test_compare_lists_differences():
    a = costcore.estimate("pipeline-70b")
    b = costcore.estimate(_with("pipeline-70b", model__params_b=65.0, stages__sft__method="lora"))
    inputs, costs = bud.compare(a, b)
    assert set(inputs.input) == {"model.params_b", "stages.sft.method"}
    assert costs.B.sum() == pytest.approx(b.total_usd) and costs.A.sum() == pytest.approx(a.total_usd)


def test_dualpipe_lever_is_offered_for_a_mixture_of_experts_only():
    """A MoE's stages on the 1F1B default get the lever that lets the search run DualPipe; a stage that
    pins DualPipe already (the DeepSeek-V3 preset's pre-training) and dense models do not."""
    lv = {x.key: x for x in levers.levers("moe-deepseek-v3")}
    assert set(lv["dualpipe"].changes) == {"stages.cpt.schedule", "stages.sft.schedule"}
    assert set(lv["dualpipe"].changes.values()) == {"search"}
    assert "continued pre-training and supervised fine-tuning" in lv["dualpipe"].title
    assert "dualpipe" not in {x.key for x in levers.levers("pipeline-70b")}


@pytest.mark.parametrize("preset", ["pipeline-70b", "vertical-7b-lora", "reasoning-grpo-32b", "scratch-7b",
                                    "moe-deepseek-v3"])
def test_each_lever_saving_is_the_difference_of_two_estimates(preset):
    base = costcore.estimate(preset)
    lv = levers.levers(preset)
    assert lv, "at least one lever applies"
    assert [x.saving_usd for x in lv] == sorted((x.saving_usd for x in lv), reverse=True)
    for x in lv:
        changed = costcore.estimate(levers.apply(base.scenario, x))
        assert x.saving_usd == pytest.approx(base.total_usd - changed.total_usd, rel=1e-12, abs=1e-6)
        assert x.saving_usd > 0 and x.risk


def test_cli_json_governance_fields_and_levers_command():
    out = subprocess.run([sys.executable, "-m", "costcore", "estimate", "pipeline-70b", "--format", "json",
                          "--set", "budget.sft_usd=1000"], cwd=ROOT, capture_output=True, text=True, check=True)
    d = json.loads(out.stdout)
    for k in ("fixed_usd", "elastic_usd", "peak_gpus"):
        assert k in d
    assert d["budget"]["status"] == "over" and d["budget"]["alerts"][0]["name"] == "sft"
    out = subprocess.run([sys.executable, "-m", "costcore", "levers", "pipeline-70b", "--format", "json"], cwd=ROOT,
                         capture_output=True, text=True, check=True)
    j = json.loads(out.stdout)
    assert j["levers"] and all(x["saving_usd"] > 0 for x in j["levers"])
    txt = subprocess.run([sys.executable, "-m", "costcore", "levers", "pipeline-70b"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    assert "risk:" in txt and "Spot capacity" in txt  # reserved GPUs idle most of a 12-month term here: no saving


def test_planning_settings_round_trip_through_the_url():
    from costcore.scenario import share
    scn = _with("pipeline-70b", budget__sft_usd=123456.0, schedule__start_date="2027-06-01",
                lifecycle__iterations=4, tags__project="atlas")
    back, _, warns = share.decode(share.encode(scn, "pipeline-70b"), "scratch-7b")
    assert not warns and back == scn


def test_the_gpus_chart_marks_the_peak_the_metric_says():
    """DeepSeek-V3's one-hour SFT beside evaluation held 2,112 GPUs for less than a pixel of a months-long calendar:
    the area alone topped out at 2,048 under a "Peak GPUs 2,112" metric. A point marks the peak, at the metric's
    number. (Evaluation now overlaps half of SFT's run, not of its setup, so its own setup ends after that hour:
    2,048.)"""
    import json

    import costcore
    from costcore.analysis import budget as bud
    from shared import app_on
    at = app_on("pages/budget.py", "GPUs and storage held", p="moe-deepseek-v3")
    tl = bud.timeline(costcore.estimate(at.session_state["scenario"]))
    metric = next(m.value for m in at.metric if m.label == "Peak GPUs")
    assert metric == f"{tl.peak_gpus:,.0f}" == "2,048"
    spec = next(json.loads(c.proto.spec) for c in at.get("vega_lite_chart") if "GPUs in use" in str(json.loads(c.proto.spec)["title"]))
    marks = [layer["mark"]["type"] if isinstance(layer["mark"], dict) else layer["mark"] for layer in spec["layer"]]
    assert marks == ["area", "point"]


def test_a_pricing_lever_applied_is_not_offered_again():
    """Reserved capacity is 35% below the GPU's on-demand price. It was 35% below the current price, so each Apply
    cut the price again ($2.99, 1.94, 1.26, 0.82) and claimed a new saving each time."""
    import costcore
    from costcore.analysis import levers
    from costcore.scenario import schema
    # a one-month term the plan's 9.7M GPU-hours fill (a 12-month one would leave 62M idle: no saving, no lever)
    scn = schema.set_path(costcore.load_preset("pipeline-70b"), "hardware.reserved_months", 1)
    first = {x.key: x for x in levers.levers(scn)}["reserved"]
    on_demand = schema.CATALOG[schema.effective_value(scn, "hardware.gpu")]["usd_per_gpu_hour"]
    assert first.changes["hardware.usd_per_gpu_hour"] == pytest.approx(on_demand * 0.65, abs=1e-4)
    after = levers.apply(scn, first)
    assert "reserved" not in {x.key for x in levers.levers(after)}


def test_the_line_item_exports_name_stages_and_resources_in_words_beside_their_keys():
    """line_items.csv and attribution.csv had 'pretrain' and 'compute' where the screen says 'Pre-training' and
    'Compute': the keys stay (a join needs them) and the words come beside them."""
    from costcore.scenario.schema import RESOURCE_LABELS, STAGE_LABELS
    att = bud.attribution(costcore.estimate("pipeline-70b"))
    assert {"stage", "resource", "item", "stage_name", "resource_name", "label"} <= set(att.columns)
    assert (att.stage_name == att.stage.map(STAGE_LABELS)).all()
    assert (att.resource_name == att.resource.map(RESOURCE_LABELS)).all()
    assert "Pre-training" in set(att.stage_name) and "Compute" in set(att.resource_name)


def test_stage_budgets_adding_up_to_more_than_the_total_are_flagged():
    """$80M for pre-training and $30M for RL under a $100M total: nothing said the stage budgets could not all be
    kept. Within the total, no such alert."""
    from costcore.scenario import schema
    scn = costcore.load_preset("pipeline-70b-lora-grpo")
    for k, v in (("budget.total_usd", 100e6), ("budget.pretrain_usd", 80e6), ("budget.rl_usd", 30e6)):
        scn = schema.set_path(scn, k, v)
    status = bud.budget_status(costcore.estimate(scn))
    (alert,) = [a for a in status["alerts"] if a["scope"] == "budgets"]
    assert status["status"] == "warning" and alert["actual_usd"] == 110e6
    assert alert["message"].startswith("The stage budgets add up to $110M, more than the total budget of $100M")
    fine = bud.budget_status(costcore.estimate(schema.set_path(scn, "budget.rl_usd", 20e6)))
    assert not [a for a in fine["alerts"] if a["scope"] == "budgets"]


def test_a_plan_that_cannot_run_is_not_checked_against_its_budget():
    """On 3 GPUs the 70B pipeline cannot run ("No total" on every page), and the budget alert read "Total is over
    budget: $31.8B against $35.0M (909 times the budget)" beside it: the total's line, and the line of a stage that
    cannot run, are now "not checked"; a stage that runs keeps its check."""
    scn = costcore.load_preset("pipeline-70b")
    for path, usd in (("budget.total_usd", 35e6), ("budget.cpt_usd", 1.0), ("budget.pretrain_usd", 1.0)):
        scn = schema.set_path(scn, path, usd)
    res = costcore.estimate(schema.set_path(scn, "hardware.num_gpus", 3))
    assert not res.feasible and res.stat("cpt", "fits") > 0.5 and res.stat("pretrain", "fits") < 0.5
    lines = bud.budget_lines(res).set_index("name")
    assert list(lines.loc[["total", "pretrain", "cpt"], "status"]) == ["unchecked", "unchecked", "over"]
    status = bud.budget_status(res)
    assert status["status"] == "over"  # the stage that runs is over its budget
    total = next(a for a in status["alerts"] if a["scope"] == "total")
    assert total["status"] == "unchecked" and "not checked against its $35.0M budget" in total["message"]
    assert "times the budget" not in total["message"]
    assert bud.budget_status(costcore.estimate(schema.set_path(schema.set_path(
        scn, "budget.cpt_usd", 0), "hardware.num_gpus", 3)))["status"] == "unchecked"
    assert bud.budget_lines(costcore.estimate(scn)).set_index("name").loc["total", "status"] == "over"


def test_reserved_gpus_make_their_time_fixed_cost():
    """The Reserved capacity lever saved $5.03M, all off elastic cost, and left fixed at $8.03M: a 1-3 year
    commitment is billed whether used or not. GPU time (productive and hidden) is now fixed on reserved GPUs."""
    from costcore.analysis import levers
    from costcore.engine import kernel
    scn = schema.set_path(costcore.load_preset("pipeline-70b"), "hardware.reserved_months", 1)  # a term it fills
    on_demand = costcore.estimate(scn)
    reserved = costcore.estimate(schema.set_path(scn, "hardware.reserved", True))
    assert reserved.total_usd == on_demand.total_usd  # the price is what changes the total, not the flag
    li = reserved.line_items()
    gpu_time = li[(li.item == "compute.gpu") | li.item.str.startswith("hidden.")].usd.sum()
    assert reserved.fixed_usd == pytest.approx(on_demand.fixed_usd + gpu_time, rel=1e-12)
    assert li[li.kind == "fixed"].usd.sum() == pytest.approx(reserved.fixed_usd, rel=1e-12)
    assert sum(reserved.stat(s, "fixed_usd") for s in reserved.stages) == pytest.approx(reserved.fixed_usd, rel=1e-12)
    assert set(li[li.kind == "fixed"].item) >= {"compute.gpu", "hidden.failures", "labor.team"}
    lever = {x.key: x for x in levers.levers(scn)}["reserved"]
    assert lever.changes["hardware.reserved"] is True
    assert {x.key: x for x in levers.levers(scn)}["spot"].changes["hardware.reserved"] is False
    assert list(kernel.item_fixed(False)) == list(kernel.ITEM_FIXED)


def test_a_reservation_bills_its_whole_term():
    """The Reserved capacity lever claimed $10.2M saved on the 70B plan: 35% off the 9.74M GPU-hours it uses. A
    reservation is billed for its whole term whether the GPUs run or not (formulas.reserved_idle_gpu_hours): 8,192
    H100s for 12 months hold 71.8M GPU-hours, and the plan pays for the 62M it leaves idle. So the lever is not
    offered there, and it is where the plan fills the term."""
    from costcore.analysis import levers
    from costcore.engine import formulas
    scn = costcore.load_preset("pipeline-70b")
    assert "reserved" not in {x.key for x in levers.levers(scn)}
    price = 0.65 * schema.CATALOG["h100-80gb"]["usd_per_gpu_hour"]
    held = schema.set_path(schema.set_path(scn, "hardware.reserved", True), "hardware.usd_per_gpu_hour", price)
    res = costcore.estimate(held)
    used = sum(res.stat(s, "gpu_hours") for s in res.stages)
    gpus = schema.effective_value(scn, "hardware.num_gpus")
    li = res.line_items()
    idle_usd = li.loc[li.item == "hidden.reserved_idle", "usd"].sum()
    assert idle_usd == pytest.approx((gpus * 12 * 730.0 - used) * price, rel=1e-9)
    assert formulas.reserved_idle_gpu_hours(gpus, 12.0, used) == pytest.approx(gpus * 12 * 730.0 - used)
    assert formulas.reserved_idle_gpu_hours(8.0, 1.0, 1e9) == 0.0  # a plan past its term: no idle hours
    assert set(li.loc[li.item == "hidden.reserved_idle", "kind"]) == {"fixed"}
    assert res.total_usd > costcore.estimate(scn).total_usd  # 12 months of 8,192 GPUs cost more than 43 days'
    # each stage carries its share by GPU-hours
    per = li[li.item == "hidden.reserved_idle"].set_index("stage").usd
    for s in res.stages:
        assert per[s] == pytest.approx(idle_usd * res.stat(s, "gpu_hours") / used, rel=1e-9)
    # fewer reserved GPUs for the same term: less idle
    few = costcore.estimate(schema.set_path(held, "hardware.reserved_gpus", 1024)).line_items()
    assert few.loc[few.item == "hidden.reserved_idle", "usd"].sum() < idle_usd
    assert "reserved" in {x.key for x in levers.levers(schema.set_path(scn, "hardware.reserved_months", 1))}


def test_budget_page_switches_reserved_gpus_and_fixed_cost_follows():
    from costcore import fmt
    from shared import app_on
    at = app_on("pages/budget.py", p="pipeline-70b")
    before = next(m.value for m in at.metric if m.label == "Fixed")
    box = next(c for c in at.checkbox if c.label.startswith("GPUs on a reserved commitment"))
    box.check().run()
    assert not at.exception and at.session_state["scenario"]["hardware"]["reserved"] is True
    after = next(m.value for m in at.metric if m.label == "Fixed")
    res = costcore.estimate(at.session_state["scenario"])
    assert after == fmt.usd(res.fixed_usd) != before


def test_lifecycle_iterations_never_overlap_the_one_before():
    """Every 0.25 months, a 1.5-month iteration started while the one before it (and the first pass) still ran:
    "4 iterations over 1 month". An interval shorter than one iteration runs them back to back."""
    scn = costcore.load_preset("pipeline-70b")
    scn = schema.validate(schema.set_path(schema.set_path(scn, "lifecycle.iterations", 4), "lifecycle.every_months",
                                          0.25))
    res = costcore.estimate(scn)
    life = bud.lifecycle(res)
    sched = bud.timeline(res).schedule
    loop = set(life.stages)
    for k in range(2, 5):
        prev = sched[(sched.iteration == k - 1) & sched.stage.isin(loop)]
        this = sched[(sched.iteration == k) & sched.stage.isin(loop)]
        assert this.start.min() >= prev.end.max() - pd.Timedelta(seconds=1), k
    assert life.every_months > 0.25 and life.horizon_months == pytest.approx(4 * life.every_months)
    slow = bud.lifecycle(costcore.estimate(schema.set_path(scn, "lifecycle.every_months", 3.0)))
    assert slow.every_months == 3.0 and slow.horizon_months == 12.0


def test_repeated_iterations_do_not_bill_the_reservation_again():
    """Each post-training iteration repeated the first pass's items, its share of the reservation's idle hours too:
    a term billed once per iteration. A repeat carries none of them."""
    from costcore.engine import kernel
    scn = schema.set_path(schema.set_path(costcore.load_preset("pipeline-70b"), "hardware.reserved", True),
                          "lifecycle.iterations", 3)
    res = costcore.estimate(scn)
    it = bud.iteration_items(res)
    assert it[:, kernel.I_HID_RESERVED].sum() == 0.0
    assert res.items[:, kernel.I_HID_RESERVED].sum() > 0.0
    life = bud.lifecycle(res)
    assert life.total_usd == pytest.approx(res.total_usd + 2 * it.sum())
