"""DualPipe (stages.*.schedule: dualpipe) and node-limited expert routing (model.expert_node_limit).

Sources: DeepSeek-V3 report (arXiv:2412.19437) Sec. 2.1.2 (node-limited routing: each token to at most
4 nodes), Sec. 3.2.1 and Table 2 (DualPipe: bubble (PP/2 - 1)(F&B + B - 3W), parameters 2x, PP + 1
micro-batches of activations, the all-to-all and the pipeline sends hidden behind the paired chunk),
Sec. 3.2.2 (20 of the H800's 132 SMs run the communication). The step model's formulas are in
costcore/engine/layout.py (``_dualpipe_terms``, ``_a2a_copies``); tests/reference_model.py mirrors
them and tests/test_reference_parity.py compares the two on random scenarios.
"""
from __future__ import annotations

import copy
import json

import pytest

from costcore import api
from costcore.scenario import hfconfig
from costcore.scenario.schema import ScenarioError

SM_SHARE = 20.0 / 132.0  # DeepSeek-V3 report Sec. 3.2.2 (schema default 0.1515)


def _dense(plan: dict) -> dict:
    """A 13B dense pre-training on 64 H100s with a pinned plan (the schedule is the variable)."""
    return {"model": {"params_b": 13}, "hardware": {"gpu": "h100-80gb", "num_gpus": 64},
            "stages": {"pretrain": {"tokens_b": 100, "seq_len": 4096, "global_batch": 512,
                                    "plan": dict({"tp": 2, "cp": 1, "ep": 1, "micro_batch": 1, "zero": 1,
                                                  "recompute": "selective", "interleave": 1}, **plan)}}}


def _plan(scn: dict) -> dict:
    return api.estimate(scn).plan("pretrain")


def test_the_default_search_never_picks_dualpipe_and_the_json_says_which_schedule_ran():
    d = json.loads(json.dumps(api.estimate(_dense({"pp": 4})).to_dict()))
    assert d["stages"]["pretrain"]["plan"]["schedule"] == "1f1b"
    p = _plan(_dense({"pp": 4, "schedule": "dualpipe"}))
    assert p["schedule"] == "dualpipe"


def _fine_moe(stage: dict) -> dict:
    """A fine-grained MoE (64 experts, top-6) pre-training on 128 H800s, plan searched."""
    return {"model": {"params_b": 60, "active_params_b": 6, "experts": 64, "experts_active": 6},
            "hardware": {"gpu": "h800", "num_gpus": 128},
            "stages": {"pretrain": dict({"tokens_b": 100, "seq_len": 4096}, **stage)}}


@pytest.mark.parametrize("scn", [_fine_moe({}), _dense({"pp": 4}), _dense({"pp": 0})], ids=["moe", "dense pp 4", "dense"])
def test_schedule_search_keeps_the_faster_of_1f1b_and_dualpipe(scn):
    """schedule: search = the fastest plan over both schedules: the faster of the two searches run apart."""
    def rate(schedule):
        stage = dict(scn["stages"]["pretrain"], schedule=schedule)
        return api.estimate(dict(scn, stages={"pretrain": stage})).stat("pretrain", "plan_tokens_per_gpu_s")
    assert rate("search") == pytest.approx(max(rate("auto"), rate("dualpipe")), rel=1e-12)


def test_schedule_search_picks_dualpipe_where_it_hides_the_expert_all_to_all():
    one, searched = _plan(_fine_moe({})), _plan(_fine_moe({"schedule": "search"}))
    assert one["schedule"] == "1f1b" and one["communication_s"]["ep"] > 0.0
    assert searched["schedule"] == "dualpipe" and searched["pp"] % 2 == 0
    assert searched["benchmark_mfu"] > one["benchmark_mfu"]  # the same FLOPs per token, more tokens per GPU-second
    assert searched["communication_s"]["ep"] < one["communication_s"]["ep"]


def test_schedule_search_with_interleaving_pinned_stays_1f1b():
    p = _plan(_fine_moe({"schedule": "search", "pp": 4, "interleave": 2}))
    assert p["schedule"] == "1f1b" and p["interleave"] == 2


def test_dualpipe_slows_compute_by_the_sms_its_communication_takes():
    one = _plan(_dense({"pp": 4}))
    dual = _plan(_dense({"pp": 4, "schedule": "dualpipe"}))
    assert dual["time_s"]["compute"] == pytest.approx(one["time_s"]["compute"] / (1.0 - SM_SHARE), rel=1e-3)
    assert dual["time_s"]["recompute"] == pytest.approx(one["time_s"]["recompute"] / (1.0 - SM_SHARE), rel=1e-3)


def test_dualpipe_bubble_is_smaller_than_1f1b_and_none_on_two_stages():
    for pp in (4, 8):
        one = _plan(_dense({"pp": pp}))
        dual = _plan(_dense({"pp": pp, "schedule": "dualpipe"}))
        assert 0.0 < dual["time_s"]["bubble"] < one["time_s"]["bubble"], pp
    assert _plan(_dense({"pp": 2, "schedule": "dualpipe"}))["time_s"]["bubble"] == 0.0  # PP/2 - 1 = 0
    assert _plan(_dense({"pp": 2}))["time_s"]["bubble"] > 0.0


def test_dualpipe_bubble_follows_table_2_by_hand():
    """(PP/2 - 1)(F&B + B - 3W) with F&B = F + B, from the micro-batch's compute C (no recompute, TP 1).

    Every part of a full fine-tune's step (linear layers, attention, memory-bound work, LM head) runs
    its backward at twice its forward, so F = C/3 and B = 2C/3, and F + 2B - 3W = 5C/3 - 3W with the
    weight gradients W between 0 (none) and the forward F: the bubble lies between (PP/2 - 1) 2C/3
    and (PP/2 - 1) 5C/3. 1F1B's (PP - 1) C would be above that for PP = 8."""
    for pp in (4, 8):
        dual = _plan(_dense({"pp": pp, "tp": 1, "schedule": "dualpipe", "recompute": "none"}))
        c = dual["time_s"]["compute"] / dual["micro_batches"]
        assert (pp / 2 - 1) * 2 * c / 3 < dual["time_s"]["bubble"] < (pp / 2 - 1) * 5 * c / 3, pp
    assert dual["time_s"]["bubble"] < (pp - 1) * c / 2


def test_dualpipe_holds_the_weights_twice_and_one_more_micro_batch():
    one = _plan(_dense({"pp": 4}))
    dual = _plan(_dense({"pp": 4, "schedule": "dualpipe"}))
    assert dual["memory_gb"]["weights"] == pytest.approx(2.0 * one["memory_gb"]["weights"], rel=1e-9)
    assert dual["memory_gb"]["activations"] == pytest.approx(one["memory_gb"]["activations"] * 5.0 / 4.0, rel=1e-9)


def test_dualpipe_hides_the_expert_all_to_all_behind_compute():
    scn = api.load_preset("moe-deepseek-v3")
    dual = api.estimate(scn).plan("pretrain")
    assert (dual["schedule"], dual["pp"], dual["ep"], dual["interleave"]) == ("dualpipe", 16, 64, 1)
    assert dual["communication_s"]["ep"] == 0.0  # smaller than the paired chunk's compute
    one = copy.deepcopy(scn)
    one["stages"]["pretrain"].update(schedule="auto", interleave=1)  # the preset's plan keys, unfolded
    p = api.estimate(one).plan("pretrain")
    assert p["communication_s"]["ep"] > 0.3 * p["step_time_s"]
    assert dual["step_time_s"] < p["step_time_s"]


@pytest.mark.parametrize("plan, field", [
    ({"pp": 3}, "stages.pretrain.pp"), ({"pp": 1}, "stages.pretrain.pp"),
    ({"pp": 4, "interleave": 2}, "stages.pretrain.interleave"),
])
def test_dualpipe_refuses_an_odd_pipeline_or_interleaving_in_one_sentence(plan, field):
    with pytest.raises(ScenarioError) as err:
        api.estimate(_dense(dict(plan, schedule="dualpipe")))
    assert str(err.value).startswith(field + ": DualPipe ")
    assert str(err.value).count(". ") == 0


def test_a_searched_pipeline_under_dualpipe_is_even():
    scn = _dense({"schedule": "dualpipe"})
    del scn["stages"]["pretrain"]["plan"]["interleave"]
    scn["stages"]["pretrain"]["plan"].pop("tp")
    for p in api.plans(scn, "pretrain", top=10):
        assert p["pp"] >= 2 and p["pp"] % 2 == 0 and p["interleave"] == 1 and p["schedule"] == "dualpipe"


def _moe(limit: int, ep: int) -> dict:
    return {"model": {"params_b": 100, "active_params_b": 12, "experts": 64, "experts_active": 8,
                      "shared_experts": 1, "expert_node_limit": limit},
            "hardware": {"gpu": "h100-80gb", "num_gpus": 256},
            "stages": {"pretrain": {"tokens_b": 100, "seq_len": 4096, "global_batch": 1024,
                                    "plan": {"tp": 1, "pp": 1, "cp": 1, "ep": ep, "micro_batch": 1, "zero": 1,
                                             "recompute": "selective"}}}}


def test_node_limited_routing_sends_a_copy_per_node_over_the_network():
    """8 routed experts per token; with EP 32 over 4 nodes of 8 GPUs a token reaches at most 4 nodes, and at
    most the limit: its all-to-all crosses InfiniBand min(8, limit, 4) times instead of 8."""
    free = _plan(_moe(0, 32))["communication_s"]["ep"]
    assert free > 0.0
    assert _plan(_moe(2, 32))["communication_s"]["ep"] == pytest.approx(free * 2.0 / 8.0, rel=1e-9)
    assert _plan(_moe(6, 32))["communication_s"]["ep"] == pytest.approx(free * 4.0 / 8.0, rel=1e-9)


def test_node_limited_routing_changes_nothing_inside_one_node():
    assert _plan(_moe(2, 8))["communication_s"]["ep"] == _plan(_moe(0, 8))["communication_s"]["ep"] > 0.0


def test_config_json_group_limited_routing_is_read():
    v3 = hfconfig.shipped_configs()["deepseek-v3"]["model"]
    assert v3["expert_node_limit"] == 4  # config.json n_group 8, topk_group 4
    assert hfconfig.shipped_configs()["mixtral-8x7b"]["model"]["expert_node_limit"] == 0
    cfg = json.loads((hfconfig.CONFIG_DIR / "deepseek-v3.json").read_text())
    del cfg["topk_group"]
    assert hfconfig.parse_hf_config(cfg)["expert_node_limit"] == 8  # no limit given: every group
    cfg["topk_group"] = 9
    with pytest.raises(ScenarioError, match="topk_group"):
        hfconfig.parse_hf_config(cfg)


def test_the_plan_command_names_the_schedule_and_reads_at_three_digits(capsys):
    from shared import ROOT, run_cli
    from costcore import fmt
    rc, out, err = run_cli(capsys, ["plan", str(ROOT / "presets" / "moe-deepseek-v3.yaml"), "--top", "3"])
    assert rc == 0 and not err
    lines = out.splitlines()
    assert lines[0] == "Pre-training: the 3 fastest plans that fit, best first"
    assert lines[1].split()[-1] == "schedule"  # each plan says which schedule it runs
    best = api.plans(api.load_preset("moe-deepseek-v3"), "pretrain", top=1)[0]
    row = lines[2].split()
    assert row[:5] == [str(best[k]) for k in ("tp", "pp", "dp", "cp", "ep")]
    assert " ".join(row[8:10]) == fmt.duration_s(best["step_time_s"])  # e.g. "5.30 s", never "5.3 s"
    assert row[10] == fmt.share(best["mfu"]) and " ".join(row[11:13]) == fmt.gb(best["memory_per_gpu_gb"])
    assert all(line.split()[-1] == "DualPipe" for line in lines[2:5])
    rc, out, _ = run_cli(capsys, ["plan", "llama3-8b", "--top", "1"])
    assert rc == 0 and "DualPipe" not in out


def test_the_plan_command_lists_each_plans_schedule_when_the_schedule_is_searched(capsys):
    from shared import run_cli
    rc, out, _ = run_cli(capsys, ["plan", "moe-deepseek-v3", "--stage", "cpt", "--top", "40",
                                  "--set", "stages.cpt.schedule=search"])
    assert rc == 0
    plans = api.plans(api.load_preset("moe-deepseek-v3"), "cpt", top=1)  # default: 1F1B
    assert plans[0]["schedule"] == "1f1b"
    shown = [line.split()[-1] for line in out.splitlines()[2:]]
    assert shown and set(shown) <= {"DualPipe", "1F1B"} and shown[0] == "DualPipe"


def test_the_explanation_names_the_schedule_and_its_source():
    from costcore.analysis import explain
    name, latex, source = explain._default_mfu_row(api.estimate("moe-deepseek-v3"), "pretrain")
    assert "DualPipe" in latex and "DeepSeek-V3 report Sec. 3.2.1" in source
    name, latex, source = explain._default_mfu_row(api.estimate("llama3-8b"), "pretrain")
    assert "DualPipe" not in latex + source


def test_a_pinned_dualpipe_on_one_gpu_says_it_needs_two_in_words():
    scn = {"model": {"params_b": 1}, "hardware": {"num_gpus": 1},
           "stages": {"pretrain": {"tokens_b": 10, "schedule": "dualpipe"}}}
    d = api.estimate(scn).to_dict()
    assert not d["feasible"] and len(d["infeasible"]) == 1
    sentence = d["infeasible"][0]
    assert "pipeline schedule DualPipe" in sentence and "at least 2 GPUs" in sentence, sentence
    assert "with the layout searched, 1 GPU is enough" in sentence
    assert "dualpipe" not in sentence
