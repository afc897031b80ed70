"""The shared cluster end to end: portfolio checks, money to the cent, GPU-hours, the single-project
identity with ``api.estimate``, the CLI's JSON contract and the FOCUS export.

The shipped quarter is estimated once per session (fixture ``quarter``); small portfolios use the
one-GPU QLoRA and the 8-GPU Alpaca presets, so every case costs milliseconds after the warm-up.
"""
from __future__ import annotations

import copy
import csv
import io
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from costcore import api
from costcore.cluster import focus, portfolio, results
from costcore.errors import ScenarioError

SMALL = {
    "name": "two teams",
    "horizon_days": 10,
    "pools": {"a100": {"gpu": "a100-80gb", "gpus": 16, "reserved_usd_per_gpu_hour": 1.2,
                       "burst": {"usd_per_gpu_hour": 2.5, "max_gpus": 8}}},
    "teams": {"red": {"quota_gpus": 8, "borrowing_limit_gpus": 8, "priority": 1},
              "blue": {"quota_gpus": 8, "priority": 5}},
    "projects": {
        "sft-a": {"team": "red", "preset": "alpaca-7b-sft", "set": {"stages.sft.samples": 400000}},
        "sft-b": {"team": "red", "preset": "alpaca-7b-sft", "start_day": 0.5},
        "qlora": {"team": "blue", "preset": "qlora-single-gpu", "start_day": 1, "deadline_day": 3},
        "lora": {"team": "blue", "preset": "vertical-7b-lora", "after": ["qlora"], "task_type": "lora",
                 "model_version": "v7"},
    },
}


@pytest.fixture(scope="session")
def quarter(warm_kernels):
    model = results.ClusterModel(portfolio.load("cluster-quarter"))
    return model, model.run()


@pytest.fixture(scope="session")
def small(warm_kernels):
    model = results.ClusterModel(portfolio.load(copy.deepcopy(SMALL)))
    return model, model.run()


# ---------------------------------------------------------------------------
# Conservation
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("rule", portfolio.IDLE_RULES)
def test_every_dollar_is_attributed_to_the_cent_under_every_idle_rule(quarter, small, rule):
    for _, res in (quarter, small):
        rows = res.attribution_rows(rule)
        assert rows["cents"].sum() == res.total_cents
        assert abs(res.total_cents / 100 - res.total_usd) <= 0.005
        for dim in results.ATTR_DIMS:
            assert res.attribute(dim, rule)["cents"].sum() == res.total_cents
        idle = rows[rows["resource"] == results.IDLE]
        assert abs(idle["cents"].sum() / 100 - res.idle_usd_by_pool.sum()) <= 0.01 * max(len(idle), 1)
        teams = set(idle["team"])
        assert (teams == {results.UNALLOCATED}) if rule == "unallocated" else (results.UNALLOCATED not in teams)


def test_the_bill_is_the_reserved_pools_plus_burst_plus_everything_else(quarter):
    _, res = quarter
    jt = res.jobs
    non_gpu = jt.items_reserved.sum() - jt.items_reserved[:, results._GPU_MASK].sum()
    assert res.total_usd >= res.reserved_usd_by_pool.sum() + non_gpu - 1e-6
    by_res = res.attribute("resource").set_index("resource")["cents"]
    assert abs(by_res.get(results.IDLE, 0) / 100 - res.idle_usd_by_pool.sum()) < 1.0


def test_used_plus_idle_gpu_hours_is_the_pool_times_the_horizon(quarter, small):
    for _, res in (quarter, small):
        used = res.reserved_gpu_hours.sum()  # from the job totals; idle is from the run segments
        cap = sum(p.gpus for p in res.portfolio.pools.values()) * res.horizon_h
        assert used + res.idle_gpu_hours == pytest.approx(cap, rel=1e-12)
        assert 0 < res.utilization <= 1
        usage = res.usage_over_time()
        assert usage["gpus"].sum() * 24 == pytest.approx(used, rel=1e-9)


def test_a_project_alone_on_an_ample_cluster_costs_what_the_estimate_says(warm_kernels):
    pf = copy.deepcopy(SMALL)
    pf["pools"]["a100"]["gpus"] = 512
    pf["projects"] = {"only": {"team": "red", "preset": "vertical-7b-lora"}}
    p = portfolio.load(pf)
    res = results.ClusterModel(p).run()
    alone = api.estimate(p.projects["only"].scenario)
    row = res.project_table.set_index("project").loc["only"]
    assert row["usd"] == pytest.approx(alone.total_usd, abs=0.01)
    assert row["gpu_hours"] == pytest.approx(alone.gpu_hours, rel=1e-12)
    assert row["wait_days"] == 0 and row["preempted_gpu_hours"] == 0
    assert res.total_usd == pytest.approx(alone.total_usd + res.idle_usd_by_pool.sum(), abs=0.01)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(preset=st.sampled_from(["qlora-single-gpu", "alpaca-7b-sft", "vertical-7b-lora", "scratch-7b"]),
       start=st.integers(0, 30), price=st.sampled_from([0.8, 1.5, 2.6]), rule=st.sampled_from(portfolio.IDLE_RULES),
       others=st.integers(0, 2))
def test_any_project_alone_costs_its_estimate_whatever_the_pool_and_the_idle_rule(warm_kernels, preset, start,
                                                                                 price, rule, others):
    # an ample pool (4,096 GPUs), the project's team owns it all; `others` idle teams without quota
    pf = {"horizon_days": 60, "idle_rule": rule,
          "pools": {"p": {"gpu": "h100-80gb", "gpus": 4096, "reserved_usd_per_gpu_hour": price}},
          "teams": {"t": {"quota_gpus": 4096}, **{f"idle{k}": {"quota_gpus": 0} for k in range(others)}},
          "projects": {"x": {"team": "t", "preset": preset, "start_day": start, "pool": "p"}}}
    p = portfolio.load(pf)
    res = results.ClusterModel(p).run()
    alone = api.estimate(p.projects["x"].scenario)
    row = res.project_table.iloc[0]
    assert row["usd"] == pytest.approx(alone.total_usd, abs=0.01)
    assert row["start_day"] == start and row["wait_days"] == 0
    assert res.attribution["cents"].sum() == res.total_cents


def test_a_sweep_runs_its_chains_side_by_side_and_buys_its_data_once(warm_kernels):
    # 3 runs of the LoRA scenario (CPT, SFT, eval on 8 GPUs each) on 32 GPUs: the runs start together;
    # the first carries the whole estimate, the other two only what a run repeats (by hand below)
    pf = {"horizon_days": 30,
          "pools": {"a": {"gpu": "a100-80gb", "gpus": 32, "reserved_usd_per_gpu_hour": 1.2}},
          "teams": {"t": {"quota_gpus": 32}},
          "projects": {"sweep": {"team": "t", "preset": "vertical-7b-lora", "runs": 3, "deadline_day": 20},
                       "next": {"team": "t", "preset": "qlora-single-gpu", "after": ["sweep"]}}}
    p = portfolio.load(pf)
    res = results.ClusterModel(p).run()
    alone = api.estimate(p.projects["sweep"].scenario)
    jobs = res.job_table[res.job_table["project"] == "sweep"]
    assert sorted(jobs["run"].unique()) == [1, 2, 3] and len(jobs) == 3 * len(alone.stages)
    firsts = jobs.groupby("run")["start_day"].min()
    assert (firsts == 0.0).all()  # 24 of 32 GPUs: all three chains run at once
    data_once = ("data.acquisition", "data.cleaning", "data.labeling", "labor.team", "ops.platform",
                 "storage.dataset", "storage.media")
    keys = [k for k, *_ in api.LINE_ITEMS]
    repeat = np.array([0.0 if k in data_once or k.startswith("data.") and k != "data.human_eval" else 1.0
                       for k in keys])
    repeat[keys.index("compute.media_preprocessing")] = 0.0
    by_hand = alone.total_usd + 2 * float((alone.items * repeat).sum())
    row = res.project_table.set_index("project").loc["sweep"]
    assert row["runs"] == 3 and row["usd"] == pytest.approx(by_hand, abs=0.02)
    assert row["gpu_hours"] == pytest.approx(3 * alone.gpu_hours, rel=1e-12)
    assert row["usd"] < 3 * alone.total_usd  # the data and the team are not bought three times
    # `next` waits for every run of the sweep
    nxt = res.job_table[res.job_table["project"] == "next"]["start_day"].min()
    assert nxt == pytest.approx(jobs["finish_day"].max())
    assert res.attribution["cents"].sum() == res.total_cents
    ids = focus.focus_frame(res)["ResourceId"]
    assert any("/sweep/run-3/" in i for i in ids) and not any("/next/run-" in i for i in ids)


@pytest.mark.parametrize("runs", [0, 2.5, "3", 1001])
def test_a_bad_number_of_runs_is_named(runs):
    pf = copy.deepcopy(SMALL)
    pf["projects"]["lora"]["runs"] = runs
    with pytest.raises(ScenarioError, match=r"1 to 1,000 runs") as err:
        portfolio.load(pf)
    assert err.value.path == "projects.lora.runs"


def test_nodes_give_the_gpus_and_the_cluster_storage_prices_reach_every_project():
    pf = copy.deepcopy(SMALL)
    pf["pools"]["a100"] = {"gpu": "a100-80gb", "nodes": 2}
    pf["storage"] = {"hot_usd_per_gb_month": 0.05}
    p = portfolio.load(pf)
    assert p.pools["a100"].gpus == 16 and p.pools["a100"].nodes == 2
    assert all(q.scenario["storage"]["hot_usd_per_gb_month"] == 0.05 for q in p.projects.values())
    pf["pools"]["a100"]["gpus"] = 12
    with pytest.raises(ScenarioError, match=r"pools\.a100\.gpus.*2 nodes"):
        portfolio.load(pf)


# ---------------------------------------------------------------------------
# A small portfolio by hand
# ---------------------------------------------------------------------------
def test_small_portfolio_schedule(small):
    model, res = small
    pt = res.project_table.set_index("project")
    # qlora starts at day 1 and lora waits for it to end (after:)
    assert pt.loc["qlora", "start_day"] == 1.0
    assert pt.loc["lora", "start_day"] == pytest.approx(pt.loc["qlora", "finish_day"])
    # the two red SFT jobs (8 GPUs each) run together: red borrows 8 of blue's idle quota
    jobs = res.job_table.set_index("project")
    assert jobs.loc["sft-b", "start_day"] == 0.5
    est = model.estimates["qlora"].reserved
    assert pt.loc["qlora", "gpu_hours"] == pytest.approx(est.gpu_hours)
    tt = res.team_table.set_index("team")
    assert tt.loc["red", "quota_gpus"] == 8 and tt["usd"].sum() == pytest.approx(res.total_cents / 100, abs=1e-6)


def test_what_if_reruns_only_the_scheduler_and_changes_the_schedule(small):
    model, base = small
    calls = []
    real = results.cj.estimate_project
    results.cj.estimate_project = lambda *a: calls.append(a) or real(*a)
    try:
        tight = model.run(pool_gpus={"a100": 8}, team_quota={"red": {"a100": 0}}, burst=False)
    finally:
        results.cj.estimate_project = real
    assert not calls
    assert tight.project_table["wait_days"].sum() > base.project_table["wait_days"].sum()
    with pytest.raises(ScenarioError, match=r"teams\.\w+\.quota_gpus"):
        model.run(pool_gpus={"a100": 4})


# ---------------------------------------------------------------------------
# Bad portfolios: one sentence naming the entry
# ---------------------------------------------------------------------------
def _bad(change):
    pf = copy.deepcopy(SMALL)
    change(pf)
    return pf


BAD = {
    "unknown team": (lambda pf: pf["projects"]["qlora"].update(team="green"), r"projects\.qlora\.team", "green"),
    "circular": (lambda pf: pf["projects"]["qlora"].update(after=["lora"]), r"projects\.\w+\.after", "circular"),
    "quota above the pool": (lambda pf: pf["teams"]["red"].update(quota_gpus=12), r"teams\.\w+\.quota_gpus", "16"),
    "never fits": (lambda pf: pf["teams"]["blue"].update(quota_gpus=2, borrowing_limit_gpus=0),
                   r"projects\.lora", "can never fit"),
    "unknown key": (lambda pf: pf["projects"]["lora"].update(colour="red"), r"projects\.lora\.colour", "unknown"),
    "bad override": (lambda pf: pf["projects"]["lora"].update(set={"stages.cpt.tokens_b": -1}),
                     r"projects\.lora\.set", "tokens"),
    "unknown preset": (lambda pf: pf["projects"]["lora"].update(preset="nope"), r"projects\.lora\.preset", "nope"),
    "no pool for the GPU": (lambda pf: pf["projects"]["lora"].update(set={}, pool="h100"), r"projects\.lora\.pool",
                            "no pool"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_portfolio_gets_one_sentence_naming_the_entry(case, warm_kernels):
    change, path, word = BAD[case]
    with pytest.raises(ScenarioError) as err:
        results.ClusterModel(portfolio.load(_bad(change)))
    text = str(err.value)
    assert "\n" not in text and len(text) < 300
    import re
    assert re.match(path, err.value.path), (err.value.path, text)
    assert word.lower() in text.lower()


def test_the_original_portfolio_is_not_changed_by_a_refusal():
    pf = copy.deepcopy(SMALL)
    before = copy.deepcopy(pf)
    with pytest.raises(ScenarioError):
        portfolio.load(_bad(BAD["unknown team"][0]))
    assert pf == before and portfolio.load(pf).projects.keys() == SMALL["projects"].keys()


def test_a_yaml_alias_and_a_huge_file_are_refused(tmp_path):
    with pytest.raises(ScenarioError, match="alias"):
        portfolio.load_text("a: &x 1\nb: *x\n")
    p = tmp_path / "big.yaml"
    p.write_text("#" * 200_000)
    with pytest.raises(ScenarioError, match="limit"):
        portfolio.load(p)


# ---------------------------------------------------------------------------
# The CLI and the exports
# ---------------------------------------------------------------------------
def test_cli_json_contract(cli, quarter):
    rc, out, err = cli("cluster", "cluster-quarter", "--format", "json")
    assert rc == 0, err
    d = json.loads(out)
    assert set(d) == {"total_usd", "idle_gpu_hours", "utilization", "projects", "teams", "warnings"}
    assert d["warnings"] == []  # the quarter ends within its horizon
    assert len(d["projects"]) >= 40 and len(d["teams"]) == 10
    for p in d["projects"].values():
        assert set(p) == {"team", "start_day", "finish_day", "wait_days", "deadline_met", "gpu_hours",
                          "preempted_gpu_hours", "usd"}
    for t in d["teams"].values():
        assert set(t) == {"usd", "gpu_hours", "quota_gpus"}
    assert round(sum(t["usd"] for t in d["teams"].values()) * 100) == round(d["total_usd"] * 100)
    assert d["total_usd"] == quarter[1].to_json()["total_usd"]
    assert any(p["preempted_gpu_hours"] > 0 for p in d["projects"].values())
    assert not all(p["deadline_met"] for p in d["projects"].values())


def test_cli_refuses_a_bad_portfolio_in_one_line(cli, tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text(json.dumps(_bad(BAD["unknown team"][0])))
    rc, out, err = cli("cluster", str(p))
    assert rc == 2 and out == "" and err.count("\n") == 1 and "projects.qlora.team" in err


def test_focus_export_has_the_columns_and_sums_to_the_total(quarter):
    _, res = quarter
    text = focus.focus_csv(res)
    rows = list(csv.DictReader(io.StringIO(text)))
    assert tuple(rows[0]) == focus.FOCUS_COLUMNS
    assert round(sum(float(r["BilledCost"]) for r in rows) * 100) == res.total_cents
    burst = set(res.project_table.query("burst_gpu_hours > 0")["project"])
    assert burst, "the shipped quarter bursts one project"
    for r in rows:
        tags = json.loads(r["Tags"])
        assert set(tags) >= {"project", "team", "model_version", "task_type", "stage"}
        assert r["ChargePeriodStart"] <= r["ChargePeriodEnd"]
        billed, listed = float(r["BilledCost"]), float(r["ListCost"])
        if r["ServiceCategory"] != "Compute":
            assert listed == billed
        elif tags["project"] not in burst:  # reserved is below the catalog price
            assert listed >= billed - 0.01
    # the burst pretraining run paid the on-demand burst price, above the catalog's
    assert any(float(r["ListCost"]) < float(r["BilledCost"]) for r in rows if json.loads(r["Tags"])["project"] in burst)
    plain = list(csv.DictReader(io.StringIO(focus.plain_csv(res))))
    assert round(sum(float(r["usd"]) for r in plain) * 100) == res.total_cents


def test_names_from_the_portfolio_cannot_forge_csv_cells(warm_kernels):
    pf = copy.deepcopy(SMALL)
    pf["projects"]["qlora"]["model_version"] = '=HYPERLINK("x")'
    pf["projects"]["qlora"]["task_type"] = '@SUM(1) "quoted", comma'
    res = results.ClusterModel(portfolio.load(pf)).run()
    for text in (focus.focus_csv(res), focus.plain_csv(res)):
        rows = list(csv.reader(io.StringIO(text)))
        assert len({len(r) for r in rows}) == 1
        assert not any(c.startswith(("=", "@", "+")) for r in rows for c in r)
    tags = [json.loads(r["Tags"]) for r in csv.DictReader(io.StringIO(focus.focus_csv(res)))]
    assert any(t["model_version"] == '=HYPERLINK("x")' for t in tags)


def test_cluster_cli_register_imports_nothing_heavy():
    import subprocess
    import sys
    code = ("import sys, argparse; from costcore.cluster import cli; p = argparse.ArgumentParser(); "
            "cli.register(p.add_subparsers()); print(any(m in sys.modules for m in ('numba', 'pandas')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=str(__import__("shared").ROOT)).stdout.strip()
    assert out == "False"


def test_usage_over_time_has_every_team_and_pool(quarter):
    _, res = quarter
    u = res.usage_over_time()
    assert set(u["team"]) == set(res.portfolio.teams) and set(u["pool"]) == set(res.portfolio.pools)
    assert (u["gpus"] >= -1e-9).all()
    days = int(np.ceil(res.horizon_h / 24))
    assert len(u) == days * len(res.portfolio.teams) * len(res.portfolio.pools)


def test_work_past_the_horizon_is_said():
    """1,000 runs of 16 GPUs on a 64-GPU pool ran to about day 2,650 of a 91-day quarter: the caption said "over 91
    days", the page "every deadline met", and the JSON nothing. The result says how far past the horizon it runs."""
    from cluster_reference import one_team_portfolio
    from costcore.cluster import portfolio, results
    few = results.ClusterModel(portfolio.load_text(one_team_portfolio(1, quota=64))).run()
    assert few.warnings == [] and few.to_json()["warnings"] == []
    many = results.ClusterModel(portfolio.load_text(one_team_portfolio(200, quota=64))).run()
    end = many.horizon_h / 24.0
    assert end > 91
    assert many.warnings == [f"The work runs to day {end:,.0f}, past the 91-day horizon: the pools are paid until "
                             f"then ({end / 91:,.3g} times the horizon); give them more GPUs, or plan fewer runs."]
    assert many.to_json()["warnings"] == many.warnings


def test_a_project_on_a_pool_has_no_reservation_of_its_own():
    """The pool is the reservation, billed for the horizon: a project scenario stating hardware.reserved would add a
    second term's idle hours on top (the plan-level Idle reserved capacity). Its own is switched off, and a set:
    of the reservation is refused like the GPU and its price."""
    import costcore
    from cluster_reference import one_team_portfolio
    from costcore.cluster import portfolio
    text = one_team_portfolio().replace("    preset: llama2-7b-pretrain\n", "    scenario:\n      name: inline\n"
                                        "      hardware: {gpu: h100-80gb, reserved: true}\n"
                                        "      stages: {pretrain: {tokens_b: 100}}\n")
    pf = portfolio.load_text(text)
    scn = pf.projects["proj-1"].scenario
    assert scn["hardware"]["reserved"] is False
    li = costcore.estimate(scn).line_items()
    assert li.loc[li.item == "hidden.reserved_idle", "usd"].sum() == 0
    with pytest.raises(costcore.ScenarioError, match="its reservation come from the pool"):
        portfolio.load_text(one_team_portfolio().replace("hardware.num_gpus: 16}", "hardware.num_gpus: 16, "
                                                         "hardware.reserved: true}"))
