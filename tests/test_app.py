"""AppTest (streamlit.testing.v1) for every page of the planner.

Each page: runs without exception; moving one of its knobs moves the
expected number in the right direction. The URL reproduces the CLI's total;
a bad URL parameter shows a warning and keeps the page alive.
"""
from __future__ import annotations

import html
import json
import subprocess
import sys
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import costcore
from costcore import fmt
from costcore.scenario import share

from shared import APP, LAZY_TABS, PAGES, ROOT, app_on, open_tab, page_views  # noqa: F401


def _app(page=None, **params) -> AppTest:
    return app_on(page, **params)


def _metric(at: AppTest, label: str, nth: int = 0) -> str:
    vals = [m.value for m in at.metric if m.label == label]
    assert vals, f"no metric {label!r}; have {[m.label for m in at.metric]}"
    return vals[nth]


def _total(at: AppTest) -> float:
    return costcore.estimate(at.session_state["scenario"]).total_usd


def _move(at: AppTest, path: str, value):
    key = f"k:{path}:{at.session_state['rev']}"
    widget = at.slider(key=key) if any(w.key == key for w in at.slider) else \
        at.select_slider(key=key) if any(w.key == key for w in at.select_slider) else \
        at.selectbox(key=key) if any(w.key == key for w in at.selectbox) else at.number_input(key=key)
    widget.set_value(value)
    at.run()
    assert not at.exception, [e.value for e in at.exception]


# every page of app.py's navigation (shared.PAGES may not list the newest yet)
ALL_PAGES = PAGES + [p for p in ("pages/job-layout.py",) if p not in PAGES]


@pytest.mark.parametrize("page,tab", page_views(ALL_PAGES))
def test_every_page_runs(page, tab):
    at = _app(page)
    open_tab(at, page, tab)
    assert not at.exception, [e.value for e in at.exception]
    assert at.title, "page has a title"
    assert _metric(at, "Total cost").startswith("$")
    assert not [w.value for w in at.warning if "URL parameter" in w.value]


@pytest.mark.parametrize("preset", costcore.preset_names())
def test_every_preset_renders_overview(preset):
    at = _app(p=preset)
    assert at.session_state["preset"] == preset
    assert _metric(at, "Total cost") == fmt.usd(costcore.estimate(preset).total_usd)


def _size_slider(at: AppTest):
    return at.select_slider(key=f"k:model.params_b:{at.session_state['rev']}")


def test_overview_model_size_slider_raises_total():
    """The size slider is a log ladder (pages/common.log_ladder over the input's 0.01-5,000 B): 70B
    sits about two thirds along, and one step right is the next round size."""
    from pages.common import log_ladder
    at = _app(p="pipeline-70b")
    before = _total(at)
    shown = _metric(at, "Total cost")
    size = float(costcore.scenario.schema.effective_value(at.session_state["scenario"], "model.params_b"))
    ladder = log_ladder(0.01, 5000.0, size, False)  # the preset's own 70.6 B is a rung too
    assert _size_slider(at).options == [costcore.fmt.num(v) for v in ladder] and _size_slider(at).value == size
    assert 0.6 < ladder.index(size) / (len(ladder) - 1) < 0.75
    _move(at, "model.params_b", ladder[ladder.index(size) + 1])
    assert at.session_state["scenario"]["model"]["params_b"] == 80.0
    assert _total(at) > before
    assert _metric(at, "Total cost") != shown
    assert at.query_params["model.params_b"] == "80"


def test_overview_model_size_can_be_typed_off_the_ladder():
    """A typed size (not a rung) is applied, put on the slider's ladder (until the next typed value or
    preset) and carried in the link; a bad one is refused with a message like a bad URL value, and the last good size is kept."""
    at = _app(p="pipeline-70b")
    before = _total(at)
    box = at.number_input(key=f"t:model.params_b:{at.session_state['rev']}")
    assert box.value == costcore.scenario.schema.effective_value(at.session_state["scenario"], "model.params_b")
    box.set_value(65.5)
    at.run()
    assert not at.exception
    assert at.session_state["scenario"]["model"]["params_b"] == 65.5
    assert at.query_params["model.params_b"] == "65.5"
    assert _size_slider(at).value == 65.5 and "65.5" in _size_slider(at).options
    assert _total(at) < before
    _move(at, "model.params_b", 80.0)  # the slider moves on; the box follows it
    assert at.number_input(key=f"t:model.params_b:{at.session_state['rev']}").value == 80.0
    # the rungs stay put while the slider moves (the browser would redraw the thumb if they changed)
    assert "65.5" in _size_slider(at).options
    box = at.number_input(key=f"t:model.params_b:{at.session_state['rev']}")
    box.set_value(33.3)  # a new typed value rebuilds the slider on a ladder with it, without 65.5
    at.run()
    assert "33.3" in _size_slider(at).options and "65.5" not in _size_slider(at).options


def test_a_slider_value_whose_callback_was_lost_is_still_applied():
    """An interrupted rerun can drop a widget's on_change callback (fast key presses); the next
    rerun applies the value the widget holds, so numbers and share link follow the slider."""
    at = _app(p="llama3-8b")
    key = f"k:model.params_b:{at.session_state['rev']}"
    at.session_state[key] = 4.0  # the widget's value (a rung of its log ladder) changes without its callback
    at.run()
    assert not at.exception
    assert at.session_state["scenario"]["model"]["params_b"] == 4.0
    assert at.query_params["model.params_b"] == "4"
    assert _metric(at, "Total cost") == fmt.usd(_total(at))
    # (a value off the slider never reaches the app: Streamlit sets the widget back to its ladder, so a
    # refused value is tested with a rule between settings, tests/test_readability.py)


def test_overview_shows_the_p10_p90_band():
    at = _app(p="pipeline-70b")
    res = costcore.estimate(at.session_state["scenario"])
    lines = [m.value.replace("\\$", "$") for m in list(at.markdown) + list(at.caption) if "P10–P90" in m.value]
    assert lines and fmt.usd(res.total_usd_p10) in lines[0] and fmt.usd(res.total_usd_p90) in lines[0], lines


def _plan_text(at: AppTest) -> str:
    lines = [m.value for m in at.markdown if m.value.startswith("**Plan:**")]
    assert len(lines) == 1, [m.value for m in at.markdown]
    return lines[0]


def test_job_layout_searched_schedule_lists_dualpipe_plans_for_a_mixture_of_experts():
    """Pipeline schedule "Searched" lets the search take DualPipe: on a fine-grained MoE the plan and the
    table say which schedule each plan runs, and the table still has one column per kind of setting."""
    at = _app("pages/job-layout.py", p="moe-deepseek-v3", **{f"stages.pretrain.{k}": "0" for k in ("tp", "pp", "ep")})
    _move(at, "stages.pretrain.schedule", "search")
    plan = costcore.estimate(at.session_state["scenario"]).plan("pretrain")
    assert plan["schedule"] == "dualpipe"
    assert "DualPipe schedule" in _plan_text(at)
    top = at.dataframe[0].value
    assert top["Schedule"].iloc[0] == "DualPipe" and top["Layout"].str.contains("· EP ").all()


def test_job_layout_shows_the_plan_and_pinning_tp_changes_it():
    at = _app("pages/job-layout.py", p="pipeline-70b")
    assert at.title[0].value == "Job layout"
    res = costcore.estimate(at.session_state["scenario"])
    plan = res.plan("pretrain")
    shown = _plan_text(at)
    assert f"TP {plan['tp']} × PP {plan['pp']} × DP {plan['dp']} × CP {plan['cp']}" in shown, shown
    assert f"micro-batch {plan['micro_batch']}" in shown and "BF16" in shown
    assert _metric(at, "Step time") == fmt.duration_s(plan["step_time_s"])
    assert len(at.get("vega_lite_chart")) == 2  # memory by kind, step time by part
    band = res.band[costcore.STAGES.index("pretrain")]
    captions = [c.value.replace("\\$", "$") for c in at.caption]
    assert f"P10–P90: {fmt.usd(band[2])} – {fmt.usd(band[3])}" in captions, captions
    gh = [fmt.gpu_hours(b).replace(" GPU-h", "") for b in band[:2]]
    assert f"P10–P90: {gh[0]} – {gh[1]}" in captions, captions
    top = at.dataframe[0].value
    assert 1 <= len(top) <= 10
    assert {"Layout", "Micro-batch", "Recompute", "ZeRO", "Step time", "MFU", "Memory"} <= set(top.columns)
    sp = " (SP)" if plan["sequence_parallel"] else ""
    assert top["Layout"].iloc[0] == f"TP {plan['tp']}{sp} · PP {plan['pp']} · DP {plan['dp']:,} · CP {plan['cp']}"
    # numbers underneath (a header click sorts them as numbers), the chosen plan first and marked
    assert top["Step time"].iloc[0] == pytest.approx(plan["step_time_s"])
    # the plans' modelled step times (kernel numbers, no clock) come fastest first
    # the planner's modelled step times (its output, no clock is read), listed fastest first
    assert list(top["Step time"]) == sorted(top["Step time"]) and top["Rank"].iloc[0] == "1 ✓"

    if "Schedule" in top.columns:  # shown when some plan interleaves (or runs DualPipe)
        v = plan["interleave"]
        assert top["Schedule"].iloc[0] == (f"1F1B, {v} chunks" if v > 1 else "1F1B")

    _move(at, "stages.pretrain.tp", 4)
    assert at.session_state["scenario"]["stages"]["pretrain"]["tp"] == 4
    assert at.query_params["stages.pretrain.tp"] == "4"  # the share link carries the pin
    pinned = _plan_text(at)
    assert pinned != shown and pinned.startswith("**Plan:** TP 4 ×"), pinned
    assert at.dataframe[0].value["Layout"].str.startswith("TP 4").all()
    assert costcore.estimate(at.session_state["scenario"]).plan("pretrain")["tp"] == 4


def test_job_layout_shows_why_a_pinned_plan_does_not_fit():
    at = _app("pages/job-layout.py", p="pipeline-70b")
    at.selectbox(key="job-layout:stage").set_value("sft")
    at.run()
    for path, value in (("stages.sft.tp", 1), ("stages.sft.pp", 1), ("stages.sft.zero_stage", 0)):
        _move(at, path, value)
    res = costcore.estimate(at.session_state["scenario"])
    assert not res.feasible
    errors = [e.value for e in at.error]
    assert any(res.infeasible[0] in e and "Choose Searched" in e for e in errors), errors
    # the plan as it stands is drawn: its memory (model states unsharded on each GPU) beyond what a plan may use
    assert len(at.get("vega_lite_chart")) == 2
    assert res.plan("sft")["memory_per_gpu_gb"] > res.stat("sft", "usable_memory_gb")


def test_job_layout_of_rl_names_the_rollout_replica_whose_memory_the_stage_reports():
    at = _app("pages/job-layout.py", p="pipeline-70b")
    at.selectbox(key="job-layout:stage").set_value("rl")
    at.run()
    res = costcore.estimate(at.session_state["scenario"])
    caption = [c.value for c in at.caption if c.value.startswith("Rollouts run apart")]
    assert caption and fmt.gb(res.stat("rl", "memory_per_gpu_gb")) in caption[0], caption
    assert fmt.gb(res.stat("rl", "rollout_kv_gb")) in caption[0] and not at.exception


def test_pretraining_tokens_slider_raises_pretrain_cost():
    at = _app("pages/pretraining.py", p="scratch-7b")
    res0 = costcore.estimate(at.session_state["scenario"])
    _move(at, "stages.pretrain.tokens_b", res0.stat("pretrain", "tokens") / 1e9 * 2)
    res1 = costcore.estimate(at.session_state["scenario"])
    assert res1.stat("pretrain", "usd_total") > res0.stat("pretrain", "usd_total")
    assert _metric(at, "Pre-training cost") == fmt.usd(res1.stat("pretrain", "usd_total"))


def test_post_training_lora_lowers_sft_gpu_hours():
    at = _app("pages/post-training.py", p="pipeline-70b")
    assert at.session_state["scenario"]["stages"]["sft"].get("method", "full") == "full"
    h0 = costcore.estimate(at.session_state["scenario"]).stat("sft", "gpu_hours")
    _move(at, "stages.sft.method", "lora")
    h1 = costcore.estimate(at.session_state["scenario"]).stat("sft", "gpu_hours")
    assert h1 < h0


def test_post_training_names_the_rollout_replica_and_a_pin_moves_it():
    """The RL caption says on how many GPUs a rollout replica decodes and how many answers at once (the
    kernel's stats), and pinning the replica on the page changes both."""
    at = _app("pages/post-training.py", p="reasoning-grpo-32b")

    def caption() -> str:
        return next(c.value for c in at.caption if "replicas of" in c.value)

    res = costcore.estimate(at.session_state["scenario"])
    t, b = res.stat("rl", "decode_replica_gpus"), res.stat("rl", "decode_batch_used")
    assert f"replicas of {fmt.num(t)} GPUs generating {fmt.num(b)} answers at once" in caption()
    assert t == 8  # unpinned: the cheapest replica within a node, 8 GPUs for these 32B rollouts
    _move(at, "stages.rl.rollout_tp", 2)
    res = costcore.estimate(at.session_state["scenario"])
    assert res.stat("rl", "decode_replica_gpus") == 2 and res.stat("rl", "decode_batch_used") < b
    assert f"replicas of 2 GPUs generating {fmt.num(res.stat('rl', 'decode_batch_used'))} answers" in caption()


def test_finetune_methods_table_and_samples():
    at = _app("pages/fine-tuning.py", p="vertical-7b-lora")
    df = at.dataframe[0].value
    assert list(df["Method"]) == ["Full fine-tuning", "LoRA", "QLoRA"]
    scn = at.session_state["scenario"]
    hours = {m: costcore.estimate(costcore.scenario.schema.set_path(scn, "stages.sft.method", m)).stat("sft", "gpu_hours")
             for m in ("full", "lora")}
    assert hours["lora"] < hours["full"]
    assert list(df["GPU-hours"])[:2] == [fmt.gpu_hours(hours["full"]), fmt.gpu_hours(hours["lora"])]
    before = _total(at)
    samples = at.session_state["scenario"]["stages"]["sft"].get("samples", 100000)
    from pages.common import log_ladder  # the page's samples slider: round values on a log scale
    _move(at, "stages.sft.samples", next(v for v in log_ladder(1000, 5_000_000, samples, True) if v >= 2 * samples))
    assert _total(at) > before


def test_workbench_says_each_methods_layout_under_the_memory_bars():
    """On the 70B pipeline's 64 fine-tuning GPUs, QLoRA's bar stands above LoRA's (its searched plan keeps the
    4-bit weights whole with ZeRO-1 where LoRA shards its 16-bit ones with ZeRO-3): the caption under the bars
    names each method's layout as the Job layout page writes it, so the taller bar of the lighter method reads."""
    from costcore.scenario import schema
    at = _app("pages/fine-tuning.py", p="pipeline-70b-lora-grpo")
    scn = at.session_state["scenario"]
    said = next(c.value for c in at.caption if c.value.startswith("Each method runs the fastest layout"))
    for m, label in (("full", "Full fine-tuning"), ("lora", "LoRA"), ("qlora", "QLoRA")):
        res = costcore.estimate(schema.set_path(scn, "stages.sft.method", m))
        assert f"{label}: {fmt.plan_words(res.plan('sft'))}" in said, said
    assert "on 64 GPUs" in said


def test_workbench_global_batch_sets_the_step():
    """The workbench's global batch box (SFT default 128, Tulu 3's) sets how many micro-batches one optimizer
    step holds on the QLoRA preset's one GPU: 128 sequences at micro-batch 2 are 64, 512 are 256."""
    at = _app("pages/fine-tuning.py", p="qlora-single-gpu")
    steps = {}
    for gb in (128, 512):
        if gb != 128:
            _move(at, "stages.sft.global_batch", gb)
        res = costcore.estimate(at.session_state["scenario"])
        steps[gb] = res.stat("sft", "micro_batches")
    assert steps == {128: 64, 512: 256}


@pytest.mark.parametrize("rate", [3.4e-5, 1e-3, 0.1])
def test_the_checkpoint_curve_stays_within_the_interval_setting(rate):
    """At 3.4e-5 interruptions per GPU-hour and up, the 70B pre-training's Young/Daly optimum falls under 2.4 minutes
    and the curve's first interval (the optimum / 40) under the setting's 0.001 h: the page stopped on a traceback.
    The curve starts at the setting's least, and the page draws it."""
    at = _app("pages/checkpoints.py", p="pipeline-70b", **{"reliability.failures_per_gpu_hour": str(rate)})
    assert not at.exception
    assert len(at.get("vega_lite_chart")) >= 1


def test_saving_the_plan_as_b_compares_with_it():
    """Save the current plan as B, then change A: B is the snapshot (it stayed on the preset until picked by hand)."""
    at = _app("pages/compare.py", p="pipeline-70b")
    _move(at, "hardware.usd_per_gpu_hour", 2.0)
    saved = _total(at)
    next(b for b in at.button if b.label == "Save the current plan as B").click().run()
    assert at.selectbox(key="cmp_b").value == "saved snapshot"
    _move(at, "hardware.usd_per_gpu_hour", 4.0)
    assert not at.exception
    assert [m.value for m in at.metric if m.label == "B"] == [fmt.usd(saved)]


@pytest.mark.parametrize("method, shown", [("full", False), ("lora", True), ("qlora", True)])
def test_the_lora_rank_is_offered_only_where_adapters_are_trained(method, shown):
    """Under full fine-tuning the LoRA rank slider moved nothing (the cost stayed): it is shown for LoRA and QLoRA."""
    at = _app("pages/post-training.py", p="pipeline-70b-lora-grpo", **{"stages.sft.method": method})
    assert any(s.key and s.key.startswith("k:stages.sft.lora_rank:") for s in at.slider) == shown


def test_checkpoints_keep_all_costs_more_storage():
    at = _app("pages/checkpoints.py", p="pipeline-70b")
    res = costcore.estimate(at.session_state["scenario"])  # the intervals in words at 3 digits, not "0.05 h"
    assert _metric(at, "Interval used") == fmt.duration_s(res.stat("pretrain", "ckpt_interval_h") * 3600.0)
    assert _metric(at, "Young/Daly optimum") == fmt.duration_s(res.stat("pretrain", "young_daly_h") * 3600.0)
    s0 = costcore.estimate(at.session_state["scenario"]).stage_usd("pretrain")["storage"]
    _move(at, "stages.pretrain.keep_last", 0)
    s1 = costcore.estimate(at.session_state["scenario"]).stage_usd("pretrain")["storage"]
    assert s1 > s0


def test_data_people_labels_and_team_raise_total():
    at = _app("pages/data-people.py", p="pipeline-70b")
    before = _total(at)
    fte = costcore.scenario.schema.effective_value(at.session_state["scenario"], "labor.researcher.fte")
    _move(at, "labor.researcher.fte", float(fte) + 5.0)
    assert _total(at) > before
    if "sft" in at.session_state["scenario"]["stages"]:
        before = _total(at)
        labels = costcore.scenario.schema.effective_value(at.session_state["scenario"], "stages.sft.labels")
        _move(at, "stages.sft.labels", float(labels) + 10000)
        assert _total(at) > before


def test_sidebar_gpu_price_moves_total():
    at = _app(p="scratch-7b")
    before = _total(at)
    _move(at, "hardware.usd_per_gpu_hour", 5.0)
    assert _total(at) > before


@pytest.mark.parametrize("preset, shown", [("pipeline-70b-lora-grpo", True), ("scratch-7b", True),
                                            ("llama2-7b-pretrain", False)])
def test_a_long_preset_title_is_written_out_under_its_box(preset, shown):
    """The sidebar's preset box cuts a title past about 30 characters ("70B pipeline with LoRA SFT and G"): the
    whole title then follows as a caption; a short one is not said twice."""
    at = _app(p=preset)
    title = costcore.preset_titles()[preset]
    said = [html.unescape(c.value).replace("\\", "") for c in at.sidebar.caption]  # as the browser renders it
    assert (title in said) == shown, said


def test_a_custom_gpu_opens_its_figures_on_the_workbench_without_a_second_price_box():
    """Custom GPU in the sidebar opens its figures on the fine-tuning workbench. The workbench drew a second
    price box bound to the sidebar's setting and Streamlit stopped the page on the duplicate key; the price is
    the sidebar's alone, and a link with a custom GPU opens the page whole."""
    at = _app("pages/fine-tuning.py", p="alpaca-7b-sft", **{"hardware.gpu": "custom"})
    keys = [w.key for w in at.number_input if w.key and w.key.startswith("k:hardware.")]
    assert len(keys) == len(set(keys)) and any(k.startswith("k:hardware.peak_tflops:") for k in keys), keys
    assert any(k.startswith("k:hardware.usd_per_gpu_hour:") for k in keys)  # the sidebar's, once
    assert at.subheader and any(h.value == "Methods side by side" for h in at.subheader)


def test_the_sidebar_price_follows_a_new_gpu_default():
    """A new GPU brings its catalog price: the sidebar's price box showed the old GPU's 2.99 while the costs used
    the RTX 4090's 0.50. The widgets are drawn afresh when a change moves another widget's value."""
    at = _app(p="pipeline-70b")
    _move(at, "hardware.gpu", "rtx-4090")
    price = float(costcore.scenario.schema.effective_value(at.session_state["scenario"], "hardware.usd_per_gpu_hour"))
    assert at.number_input(key=f"k:hardware.usd_per_gpu_hour:{at.session_state['rev']}").value == pytest.approx(price)
    assert price == pytest.approx(costcore.scenario.schema.CATALOG["rtx-4090"]["usd_per_gpu_hour"])


def test_a_refused_value_does_not_stay_in_its_widget():
    """A value the scenario refuses leaves the last good scenario in place, and the widget shows that value again
    (it kept the refused one, so the box and the numbers disagreed), with the refusal said once."""
    at = _app("pages/multimodal.py", p="llava-1.5-7b")
    path = "multimodal.tokens_per_item"
    before = costcore.scenario.schema.effective_value(at.session_state["scenario"], path)
    key = f"k:{path}:{at.session_state['rev']}"
    box = next(w for w in list(at.number_input) + list(at.slider) + list(at.select_slider) if w.key == key)
    box.set_value(2880).run()  # 2,880 tokens of one image and the text: more than the 2,048-token sequence
    assert not at.exception
    assert costcore.scenario.schema.effective_value(at.session_state["scenario"], path) == before
    key = f"k:{path}:{at.session_state['rev']}"
    shown = [w.value for w in list(at.number_input) + list(at.slider) + list(at.select_slider) if w.key == key]
    assert shown == [before], shown
    assert any("2,880" in w.value or "2880" in w.value for w in at.warning), [w.value for w in at.warning]


def _cli_total(preset: str, sets: list[str]) -> float:
    cmd = [sys.executable, "-m", "costcore", "estimate", preset, "--format", "json"]
    for s in sets:
        cmd += ["--set", s]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)["total_usd"]


def test_query_parameters_reproduce_cli_total():
    params = {"p": "pipeline-70b", "model.params_b": "65", "stages.sft.method": "lora",
              "hardware.usd_per_gpu_hour": "2.25", "stages.rl": "off"}
    at = _app(**params)
    # The CLI has no "stage off" switch: compare against the same scenario written out.
    scn = at.session_state["scenario"]
    assert "rl" not in scn["stages"]
    tmp = ROOT / "artifacts" / "url_scenario.yaml"
    tmp.parent.mkdir(exist_ok=True)
    tmp.write_text(costcore.scenario.yamlio.dump_yaml(scn))
    out = subprocess.run([sys.executable, "-m", "costcore", "estimate", str(tmp), "--format", "json"], cwd=ROOT,
                         capture_output=True, text=True, check=True)
    cli = json.loads(out.stdout)["total_usd"]
    assert _total(at) == pytest.approx(cli, rel=1e-12)
    assert _metric(at, "Total cost") == fmt.usd(cli)
    # and with plain --set overrides
    at2 = _app(p="scratch-7b", **{"model.params_b": "8", "stages.pretrain.tokens_b": "3000"})
    cli2 = _cli_total("scratch-7b", ["model.params_b=8", "stages.pretrain.tokens_b=3000"])
    assert _total(at2) == pytest.approx(cli2, rel=1e-12)


def test_share_link_round_trip_with_20_changes_is_short():
    scn = costcore.load_preset("pipeline-70b")
    changes = {"model.params_b": 65.5, "hardware.num_gpus": 4096, "hardware.usd_per_gpu_hour": 2.2,
               "stages.pretrain.tokens_b": 12000, "stages.pretrain.seq_len": 4096, "stages.pretrain.mfu": 0.41,
               "stages.cpt.tokens_b": 150, "stages.sft.method": "qlora", "stages.sft.lora_rank": 64,
               "stages.sft.samples": 250000, "stages.dpo.pairs": 80000, "stages.dpo.reference": "precomputed",
               "stages.rl.algorithm": "ppo", "stages.rl.steps": 800, "stages.rl.response_tokens": 4096,
               "stages.eval.runs": 40, "storage.retention_months": 6, "storage.cold_after_days": 14,
               "reliability.failures_per_gpu_hour": 3e-5, "labor.researcher.fte": 4}
    for k, v in changes.items():  # as the pages set them (a size brings the shape of that size)
        scn = costcore.scenario.schema.set_value(scn, k, v)
    scn = costcore.scenario.schema.validate(scn)
    params = share.encode(scn, "pipeline-70b")
    url = "http://localhost:8501/?" + share.query_string(params)
    assert len(url) < 2000, len(url)
    back, preset, warns = share.decode(params, "scratch-7b")
    assert not warns and preset == "pipeline-70b"
    assert costcore.estimate(back).total_usd == costcore.estimate(scn).total_usd
    at = _app(**params)
    assert _total(at) == costcore.estimate(scn).total_usd


def test_link_made_with_other_defaults_says_so_and_applies_its_settings():
    params = dict(share.encode(costcore.load_preset("pipeline-70b"), "pipeline-70b"), d="0123456789ab",
                  **{"hardware.usd_per_gpu_hour": "2.25"})
    at = _app(**params)
    assert [w.value for w in at.warning].count(share.STAMP_WARNING) == 1
    assert at.session_state["scenario"]["hardware"]["usd_per_gpu_hour"] == 2.25
    assert at.query_params[share.STAMP_KEY] == share.defaults_stamp()  # the link it now shows is this copy's
    assert share.STAMP_WARNING not in [w.value for w in _app(**share.encode(costcore.load_preset("pipeline-70b"),
                                                                            "pipeline-70b")).warning]


@pytest.mark.parametrize("params, name", [
    ({"p": "pipeline-70b", "model.params_b": "-5"}, "model.params_b"),
    ({"p": "pipeline-70b", "stages.sft.epochs": "abc"}, "stages.sft.epochs"),
    ({"p": "pipeline-70b", "hardware.gpu": "tpu-v9"}, "hardware.gpu"),
    ({"p": "pipeline-70b", "nonsense.key": "1"}, "nonsense.key"),
    ({"p": "../../etc/passwd"}, "p"),
    ({"p": "pipeline-70b", "stages.pretrain.tokens_b": ".nan"}, "stages.pretrain.tokens_b"),
])
def test_bad_query_parameter_warns_and_keeps_running(params, name):
    at = _app(**params)
    warnings = [w.value for w in at.warning]
    assert any(name in w for w in warnings), warnings
    assert _metric(at, "Total cost").startswith("$")



def test_budget_alert_shows_on_every_page():
    sft = costcore.estimate("pipeline-70b").stat("sft", "usd_total")
    for page in (None, "pages/checkpoints.py", "pages/budget.py"):
        at = _app(page, p="pipeline-70b", **{"budget.sft_usd": str(round(sft / 2))})
        errors = [e.value for e in at.error]
        assert any("Supervised fine-tuning is over budget" in e for e in errors), errors


def test_budget_page_sets_a_budget_and_the_lifecycle():
    at = _app("pages/budget.py", p="pipeline-70b")
    assert not at.error
    _move(at, "budget.total_usd", 1000.0)
    assert any("over budget" in e.value for e in at.error)
    assert at.query_params["budget.total_usd"] == "1000"
    open_tab(at, "pages/budget.py", "Iteration lifecycle")
    assert any("over budget" in e.value for e in at.error)  # the alert stands above every tab
    _move(at, "lifecycle.iterations", 6)
    labels = [m.label for m in at.metric]
    assert any(lbl.startswith("Lifecycle total (6") for lbl in labels)


def test_compare_page_lever_click_lowers_total():
    at = _app("pages/compare.py", p="pipeline-70b")
    before = _total(at)
    buttons = [b for b in at.button if b.key and b.key.startswith("lever:")]
    assert buttons
    buttons[0].click()
    at.run()
    assert not at.exception
    assert _total(at) < before
    assert any("Applied:" in w.value for w in at.success) and not any("Applied:" in w.value for w in at.warning)


def test_explanations_are_drawn_when_opened():
    """'How this was computed' draws its formulas and sources only while open (a closed one costs a rerun
    nothing); opened, every formula of the stage is there with its source."""
    at = _app("pages/pretraining.py")
    assert [e.label for e in at.expander][:1] == ["How this was computed — Pre-training"]
    assert len(at.latex) == 0
    at.session_state["how:pretrain"] = True  # what a click on the expander sets
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    res = costcore.estimate(at.session_state["scenario"])
    from costcore.analysis import explain
    want = explain.stage_explanation(res, "pretrain")
    assert len(at.latex) == len(want) > 0
    sources = [c.value for c in at.caption if c.value.startswith("Source: ")]
    assert len(sources) == len(want)


def _drawn(at) -> set:
    """What a page drew, by name: input keys, subheaders, chart titles and each table's columns."""
    import json
    out = {w.key for w in list(at.slider) + list(at.number_input) + list(at.text_input) + list(at.select_slider)
           if w.key and w.key.startswith("k:")}
    out |= {f"subheader:{h.value}" for h in at.subheader}
    out |= {f"chart:{json.loads(c.proto.spec).get('title')}" for c in at.get("vega_lite_chart")}
    out |= {f"table:{tuple(map(str, d.value.columns))}" for d in at.dataframe}
    return out


@pytest.mark.parametrize("page", sorted(LAZY_TABS))
def test_a_lazy_tab_draws_only_while_open(page):
    """The page's tabs are the ones tests/shared.LAZY_TABS names; only the open one is drawn: each tab
    draws inputs, charts or tables that no other tab draws (what a click on the tab sets opens it)."""
    key, labels = LAZY_TABS[page]
    at = _app(page, p="llava-1.5-7b" if "multimodal" in page else "pipeline-70b")
    assert [t.label for t in at.tabs] == labels
    seen = {}
    for tab in labels:
        open_tab(at, page, tab)
        assert not at.exception, [e.value for e in at.exception]
        assert at.session_state[key] == tab
        seen[tab] = _drawn(at)
    for tab in labels:
        others = set().union(*(v for t, v in seen.items() if t != tab))
        assert seen[tab] - others, f"{tab}: draws nothing of its own"
    if page == "pages/budget.py":
        rev = at.session_state["rev"]
        assert f"k:lifecycle.iterations:{rev}" in seen["Iteration lifecycle"]
        assert f"k:lifecycle.iterations:{rev}" not in seen["Budget and fixed cost"]


def test_retention_switch_is_one_choice_for_the_timeline_and_the_held_tabs():
    at = _app("pages/budget.py", p="pipeline-70b")
    open_tab(at, "pages/budget.py", "Timeline")
    caps = lambda: " ".join(c.value for c in at.caption)  # noqa: E731
    assert "Spend up to the end of the last stage" in caps()
    at.toggle(key="show_retention").set_value(True).run()
    assert "Spend includes storage kept through the retention period" in caps()
    open_tab(at, "pages/budget.py", "Iteration lifecycle")  # no switch here: Streamlit drops the widget's state
    open_tab(at, "pages/budget.py", "GPUs and storage held")
    assert at.toggle(key="show_retention").value is True
    at.toggle(key="show_retention").set_value(False).run()
    open_tab(at, "pages/budget.py", "Timeline")
    assert at.toggle(key="show_retention").value is False
    assert "Spend up to the end of the last stage" in caps()


def test_budgets_per_resource_are_drawn_when_opened():
    at = _app("pages/budget.py")
    key = f"k:budget.compute_usd:{at.session_state['rev']}"
    assert not any(w.key == key for w in at.number_input)
    at.session_state["budget:per_resource"] = True
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    at.number_input(key=key).set_value(1_000_000.0)
    at.run()
    assert at.session_state["scenario"]["budget"]["compute_usd"] == 1_000_000.0


@pytest.mark.parametrize("preset, says", [("pipeline-70b", True), ("qlora-single-gpu", False)])
def test_workbench_says_when_a_pinned_parallel_degree_sets_the_gpu_counts(preset, says):
    """The 70B preset's SFT stage pins TP 8, so its fewest GPUs come in eights and the page says why; a preset
    that pins no parallel degree gets no such caption."""
    at = _app("pages/fine-tuning.py", p=preset)
    assert any("pinned tensor parallelism" in c.value for c in at.caption) is says


def test_budget_fixed_share_reads_at_three_digits():
    """The Fixed share metric is the result's fixed_share (fixed over total) at three significant digits, as
    every share on the other pages: 20.2% on the 70B pipeline, where it read 20%."""
    at = _app("pages/budget.py", p="pipeline-70b-lora-grpo")
    res = costcore.estimate(at.session_state["scenario"])
    assert abs(res.fixed_share - res.fixed_usd / res.total_usd) < 1e-12 and 0 < res.fixed_share < 1
    assert _metric(at, "Fixed share") == fmt.share(res.fixed_share)
    assert len(_metric(at, "Fixed share").rstrip("%").replace(".", "")) == 3


@pytest.mark.parametrize("page, label", [("pages/budget.py", "Warning line"),
                                         ("pages/post-training.py", "Rollout efficiency"),
                                         ("pages/multimodal.py", "Share of samples with media")])
def test_a_share_slider_shows_a_percent(page, label):
    """Sliders of a share (an input whose unit is "of" something, at most 1) show 80% on the thumb, not 0.8;
    the value they set stays the fraction."""
    at = _app(page, p="llava-1.5-7b" if page == "pages/multimodal.py" else "pipeline-70b-lora-grpo")
    shown = [s for s in at.slider if s.label.startswith(label)]
    assert shown and all(s.proto.format == "percent" and 0 < s.value <= 1 for s in shown)
    assert all(s.proto.format != "percent" for s in at.slider if not s.label.startswith(label)
               and not (s.min >= 0 and s.max <= 1))


def test_checkpoint_policies_compare_the_checkpoints_own_costs():
    """On a multimodal stage, the stage's storage is mostly media (the same under every policy): the retention table
    shows the checkpoints' own storage and replication items, which differ by policy, and the storage held at the
    stage's end counts the media too (raw, shard copies and features), as the kernel's storage_peak_gb does."""
    from costcore.scenario import schema
    at = _app("pages/checkpoints.py", p="qwen-vl-style-7b")
    res = costcore.estimate(at.session_state["scenario"])
    table = next(d.value for d in at.dataframe if "policy" in d.value.columns)
    stage = res.stages[0]
    assert list(table["storage_usd"])[0] == res.item_usd(stage, "storage.ckpt_hot", "storage.ckpt_cold")
    assert table["storage_usd"].nunique() > 1 and table["storage_usd"].max() < res.stage_usd(stage)["storage"] / 10
    media = res.stat(stage, "media_raw_gb") * (1 + float(schema.effective_value(res.scenario, "multimodal.shard_copies")))
    assert media > 0 and list(table["held_gb"])[0] >= media + res.stat(stage, "ckpt_held_gb")


def test_overview_line_items_leave_out_the_zero_rows_and_say_so():
    """Opened, the line items list the non-zero items (a pre-training row of the RL reward verifier at $0 was
    noise) and say how many are left out; the header counts stages in plain words."""
    at = _app("pages/overview.py", p="pipeline-70b-lora-grpo")
    assert any(" 6 stages · " in c.value for c in at.caption)
    at.session_state["overview:items"] = True
    at.run()
    res = costcore.estimate(at.session_state["scenario"])
    li = res.line_items()
    shown = next(d.value for d in at.dataframe if "label" in d.value.columns)
    assert len(shown) == (li.usd != 0).sum() < len(li) and (shown["usd"] != 0).all()
    assert any(c.value == f"{(li.usd == 0).sum()} items at $0 are left out here; the CSV lists all {len(li)}."
               for c in at.caption)


def test_the_lora_base_choice_says_fp8_in_an_fp8_job():
    """DeepSeek-V3's preset runs in FP8, where an unquantized frozen base is held in FP8 (1 byte, the kernel's
    base_bytes_per_param): the workbench's choice says so instead of "16-bit (BF16)", which its memory contradicted."""
    at = _app("pages/fine-tuning.py", p="moe-deepseek-v3", **{"stages.sft.method": "lora"})
    lora = costcore.estimate(at.session_state["scenario"])
    assert lora.stat("sft", "base_bytes_per_param") == 1.0
    options = next(w.options for w in at.selectbox if w.label == "Frozen base weights (LoRA)")
    assert "Unquantized (FP8, as the job runs)" in options and "16-bit (BF16)" not in options
    at = _app("pages/fine-tuning.py", p="llama3-8b", **{"stages.sft.method": "lora"})
    assert "16-bit (BF16)" in next(w.options for w in at.selectbox if w.label == "Frozen base weights (LoRA)")


def test_the_lora_base_choice_is_not_offered_where_the_scenario_would_refuse_it():
    """A plan whose own fine-tuning is full refuses an 8- or 4-bit base ("full fine-tuning trains 16-bit weights"):
    the workbench offered the choice there and refused every pick. It now says how to compare a lower base."""
    at = _app("pages/fine-tuning.py", p="llama3-8b")
    assert at.session_state["scenario"]["stages"]["sft"].get("method", "full") == "full"
    assert not [w for w in at.selectbox if w.label == "Frozen base weights (LoRA)"]
    assert any("LoRA on an 8-bit base" in c.value for c in at.caption)


def test_compare_lists_the_inputs_that_differ_in_words():
    """B with the reserved price lever and an MFU: the table showed "1.9435", "45000000.0" and an MFU of "0" (which
    asks the layout model, read as zero utilization); it shows the values as the widgets do."""
    at = _app("pages/compare.py", p="pipeline-70b")
    scn = dict(at.session_state["scenario"])
    scn["hardware"] = dict(scn["hardware"], usd_per_gpu_hour=1.9435)
    scn["budget"] = dict(scn.get("budget", {}), total_usd=45_000_000.0)
    scn["hardware"]["num_gpus"] = 6144
    scn["stages"] = dict(scn["stages"], sft=dict(scn["stages"]["sft"], mfu=0.3254, tp=0, zero_stage=-1))
    at.session_state["scenario"] = scn
    at.run()
    table = next(d.value for d in at.dataframe if "input" in d.value.columns)
    rows = {r.input: (r.A, r.B) for r in table.itertuples()}  # A: the plan as changed; B: its preset
    assert rows["Price per GPU-hour"][0] == "$1.94/GPU-hour" and rows["Total budget"][0] == "$45.0M"
    assert rows["Supervised fine-tuning: Model FLOPs utilization (MFU)"] == ("0.325", "0 (auto)")
    assert rows["GPUs"] == ("6,144", "8,192")  # a count as typed, not 6.14k
    sft_tp = next(v for k, v in rows.items() if k.startswith("Supervised fine-tuning: Tensor"))
    sft_zero = next(v for k, v in rows.items() if k.startswith("Supervised fine-tuning: ZeRO"))
    assert sft_tp[0] == "0 (searched)" and sft_zero[0] == "-1 (searched)"


def test_a_link_keeps_the_stage_and_the_methods_a_page_shows():
    """The share link of the Job layout page on its RL stage opened on pre-training, and the workbench's six methods
    on three: the link now carries the page's view (view.stage, view.methods) beside the scenario, and a value the
    page does not offer is dropped, not an error."""
    at = _app("pages/job-layout.py", p="pipeline-70b-lora-grpo", **{"view.stage": "rl"})
    assert next(w for w in at.selectbox if w.label == "Training stage").value == "rl"
    assert at.query_params["view.stage"] in (["rl"], "rl")
    assert not at.warning or not any("view" in w.value for w in at.warning)
    at = _app("pages/job-layout.py", p="pipeline-70b-lora-grpo", **{"view.stage": "<b>nope</b>"})
    assert next(w for w in at.selectbox if w.label == "Training stage").value == "pretrain"
    assert not any("view" in w.value for w in at.warning)
    methods = "full,lora,qlora,lora_int8,full_adamw_8bit,full_offload"
    from costcore.analysis import finetune
    assert set(methods.split(",")) == set(finetune.methods())
    at = _app("pages/fine-tuning.py", p="qlora-single-gpu", **{"view.methods": methods})
    assert next(w for w in at.multiselect if w.label == "Methods").value == methods.split(",")
    at.multiselect(key="ft:methods").set_value(["full", "qlora"])
    at.run()
    assert not at.exception
    got = at.query_params["view.methods"]
    assert (got[0] if isinstance(got, list) else got) == "full,qlora"


def test_a_typed_number_out_of_range_is_refused_in_words_and_its_box_shows_the_kept_value():
    """-4 GPUs for fine-tuning: Streamlit's own range check kept -4 in the box with a red icon and no sentence, next
    to results for the old value. The schema now refuses it naming the setting and its range, and the box is drawn
    again at the value kept."""
    at = _app("pages/fine-tuning.py", p="llama3-8b")
    label = "GPUs for fine-tuning (0 = the sidebar's count)"
    box = next(n for n in at.number_input if n.label == label)
    before, old = at.session_state["scenario"], box.value
    box.set_value(-4)
    at.run()
    assert not at.exception
    said = [w.value for w in at.warning if "not applied" in w.value]
    assert len(said) == 1 and "GPUs" in said[0] and "from 0 to 1,000,000" in said[0] and "-4" in said[0], said
    assert at.session_state["scenario"] == before
    assert next(n for n in at.number_input if n.label == label).value == old


def test_the_header_names_the_model_a_pick_set():
    """Picking Qwen2.5 32B on the Llama-3-8B preset kept the header's "Llama-3-8B-like" title alone while every figure
    was the 32B's: the header now names the model (a shipped model by its name, else its size)."""
    from costcore.scenario import schema
    at = _app("pages/fine-tuning.py", p="llama3-8b")
    assert any("Scenario: **" in c.value and "B model" in c.value for c in at.caption)
    at.session_state["scenario"] = schema.pick_model(at.session_state["scenario"], "qwen2.5-32b")
    at.run()
    assert not at.exception
    assert any("Scenario: **" in c.value and "Qwen2.5 32B" in c.value for c in at.caption), \
        [c.value for c in at.caption if "Scenario" in c.value]


def test_an_unknown_preset_in_a_link_points_to_the_sidebar_not_a_command():
    """The link's unknown preset was answered with "python -m costcore presets lists all 14", a command-line hint
    in a web page; the app points to its own Preset box (the API and the CLI keep the command)."""
    at = _app(None, p="no-such-presetxx")
    said = [w.value for w in at.warning if "unknown preset" in w.value]
    assert len(said) == 1 and "the sidebar's Preset box lists all" in said[0] and "python -m" not in said[0], said


def test_stage_share_donut_names_each_visible_share_on_the_ring():
    at = _app(p="pipeline-70b")
    open_tab(at, "pages/overview.py", "Each stage's share")
    res = costcore.estimate("pipeline-70b")
    from streamlit import dataframe_util
    chart = next(c for c in at.get("vega_lite_chart") if "Share of the total by stage" in c.proto.spec)
    assert '"on_arc"' in chart.proto.spec  # the text layer reads the column checked below
    df = dataframe_util.convert_arrow_bytes_to_pandas_df(chart.proto.datasets[0].data.data)
    on_ring = dict(zip(df.key, df.on_arc))
    for s in res.stages:
        share_ = res.share_of_total(res.stat(s, "usd_total"))
        assert on_ring[s] == (fmt.share(share_) if share_ >= 0.04 else ""), s
    assert on_ring["pretrain"] and "" in on_ring.values()  # 82.9% named, the RL and evaluation slivers not


def test_fp8_on_a_gpu_without_fp8_is_not_called_fp8_in_the_plan_line():
    at = _app("pages/job-layout.py", p="vertical-7b-lora", **{"hardware.precision": "fp8"})
    plan = next(m.value for m in at.markdown if m.value.startswith("**Plan:**"))
    assert plan.endswith("FP8 chosen, timed at BF16 speed (this GPU has no FP8 tensor cores)"), plan
    plan = next(m.value for m in _app("pages/job-layout.py", p="pipeline-70b", **{"hardware.precision": "fp8"}).markdown
                if m.value.startswith("**Plan:**"))
    assert plan.endswith(", FP8"), plan  # an H100 has them


def test_memory_charts_give_each_kind_one_colour_on_every_page():
    """The workbench drew optimizer states red and the Job layout page activations."""
    ranges = []
    for page in ("pages/job-layout.py", "pages/fine-tuning.py"):
        at = _app(page, p="vertical-7b-lora")
        spec = next(json.loads(c.proto.spec) for c in at.get("vega_lite_chart") if "Memory" in c.proto.spec)
        scales = [v["encoding"]["color"]["scale"] for v in [spec, *spec.get("layer", [])]
                  if "color" in v.get("encoding", {}) and "scale" in v["encoding"]["color"]]
        ranges.append(dict(zip(scales[0]["domain"], scales[0]["range"])))
    assert ranges[0]["Optimizer states"] == ranges[1]["Optimizer states"]
    assert ranges[0]["Activations"] == ranges[1]["Activations"]


def test_a_stage_that_cannot_run_marks_its_figures():
    """RL on 4 GPUs read "$17.9M, 3,060 days, 300 GB per GPU" as plain figures beside a banner saying it cannot run."""
    at = _app("pages/post-training.py", p="reasoning-grpo-32b", **{"stages.rl.num_gpus": "4"})
    assert not at.exception
    rl = {m.label: m for m in at.metric if m.label in ("Reinforcement learning cost", "Memory per GPU")}
    assert rl["Reinforcement learning cost"].proto.delta == "cannot run as laid out"
    assert any(m.proto.delta == "does not fit" for m in at.metric if m.label == "Memory per GPU")
    fine = _app("pages/post-training.py", p="reasoning-grpo-32b")
    assert all(not m.proto.delta for m in fine.metric if m.label == "Reinforcement learning cost")


def test_an_uploaded_file_saved_from_a_preset_takes_that_preset_in_the_sidebar():
    """A YAML saved from the 70B LoRA + GRPO preset, uploaded on the 70B preset, left the sidebar on the 70B preset:
    its Reset went to $39.6M and the share link listed every default the file wrote out."""
    from pages.common import preset_named
    title = costcore.load_preset("pipeline-70b-lora-grpo")["name"]
    assert preset_named(title, "pipeline-70b") == "pipeline-70b-lora-grpo"
    assert preset_named("My own plan", "pipeline-70b") == "pipeline-70b"
    assert preset_named(None, "scratch-7b") == "scratch-7b"


def test_workbench_offers_the_zero_stage_offload_needs_and_post_training_the_rl_models():
    """CPU offload needs ZeRO-2 or 3 and its refusal sent the user to another page; the RL section had no control
    for the KL reference, the reward model or the critic."""
    at = _app("pages/fine-tuning.py", p="qlora-single-gpu")
    zero = next(s for s in at.selectbox if s.label == "ZeRO stage")
    assert zero.options == ["Searched", "Off", "ZeRO-1", "ZeRO-2", "ZeRO-3 (FSDP)"]
    zero.set_value(2).run()
    assert not at.exception and at.session_state["scenario"]["stages"]["sft"]["zero_stage"] == 2
    next(s for s in at.selectbox if s.label == "CPU offload (ZeRO-Offload)").set_value("optimizer").run()
    assert not at.exception and at.session_state["scenario"]["stages"]["sft"]["offload"] == "optimizer"
    pt = _app("pages/post-training.py", p="reasoning-grpo-32b")
    ref = next(s for s in pt.selectbox if s.label == "Reference model (KL term)")
    before = _total(pt)
    ref.set_value("live").run()
    assert not pt.exception and pt.session_state["scenario"]["stages"]["rl"]["reference"] == "live"
    assert _total(pt) > before  # a live reference adds its forward passes


def test_compare_shows_no_total_for_a_plan_that_cannot_run():
    """Under "No total: the plan is infeasible." the Compare page showed "A: current $25.8B" and "B - A -$25.8B,
    -100%" in green (a 405B on one GPU): a plan that cannot run has no total here too, and no difference."""
    from shared import app_on
    at = app_on("pages/compare.py", p="llama3-8b", **{"model.params_b": "405", "hardware.num_gpus": "1"})
    shown = {m.label: m.value for m in at.metric}
    assert shown["A: current"] == "No total" and shown["B - A"] == "n/a", shown
    assert shown["B"].startswith("$")  # B, the preset, runs


def test_a_stage_stopped_by_its_layout_not_its_memory_does_not_say_it_does_not_fit():
    """Pre-training of the 70B plan on 1 GPU (TP 8 pinned) read "Memory per GPU 47.3 GB, does not fit" on an 80 GB
    GPU: 47.3 GB is the nearest layout's memory, and memory is not what stops it."""
    at = _app("pages/pretraining.py", p="pipeline-70b", **{"stages.pretrain.num_gpus": "1"})
    mem = next(m for m in at.metric if m.label == "Memory per GPU")
    res = costcore.estimate(at.session_state["scenario"])
    assert res.stat("pretrain", "fits") == 0.0
    assert res.stat("pretrain", "memory_per_gpu_gb") < res.stat("pretrain", "usable_memory_gb")
    assert mem.proto.delta == "cannot run as laid out"
