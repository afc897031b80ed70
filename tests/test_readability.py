"""Numbers and words a person reads (the product manager's issue): labels for every input, charts
with titles, axis titles and legends in words, tables without raw keys or cents.

The chart checks read the Vega-Lite spec of every chart on every page (AppTest), so they cover
what the browser draws without parsing pixels; tests/test_readability_browser.py checks the
visible text in Chromium.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from costcore.scenario.schema import FIELDS, PLAN_FIELDS, STAGES
from shared import APP, open_tab, page_views
from server_support import NEVER_S  # the one wait limit of the suite (not a speed)

ALL_FIELDS = FIELDS + PLAN_FIELDS
RAW_KEYS = {f.path for f in ALL_FIELDS} | set(STAGES)


def test_every_input_has_words_and_help():
    for f in ALL_FIELDS:
        assert f.label and f.label != f.path and "." not in f.label.split(": ")[-1].replace("/s", ""), f.path
        assert f.doc, f"{f.path} has no help text"
    labels = [f.label for f in ALL_FIELDS]
    assert len(set(labels)) == len(labels), "two inputs share a label"


# ---------------------------------------------------------------------------
# Charts: every chart on every page says what it shows in words
# ---------------------------------------------------------------------------
PAGES = ["pages/overview.py", "pages/pretraining.py", "pages/job-layout.py", "pages/post-training.py",
         "pages/fine-tuning.py", "pages/checkpoints.py", "pages/data-people.py", "pages/budget.py",
         "pages/multimodal.py",
         "pages/compare.py", "pages/sensitivity.py", "pages/validation.py", "pages/glossary.py"]
POSITIONAL = ("x", "y")


def _datasets(proto) -> dict:
    from streamlit import dataframe_util
    out = {}
    for d in proto.datasets:
        out[d.name] = dataframe_util.convert_arrow_bytes_to_pandas_df(d.data.data)
    return out


def _views(spec: dict):
    """The spec and every nested layer / concat view."""
    yield spec
    for key in ("layer", "hconcat", "vconcat", "concat"):
        for sub in spec.get(key, []) or []:
            yield from _views(sub)
    if "spec" in spec:
        yield from _views(spec["spec"])


def _title_text(t) -> str:
    if isinstance(t, dict):
        t = t.get("text", "")
    if isinstance(t, list):
        t = " ".join(map(str, t))
    return str(t or "").strip()


def chart_problems(proto) -> list[str]:
    spec = json.loads(proto.spec)
    data = _datasets(proto)
    name = _title_text(spec.get("title")) or "(untitled chart)"
    out = [] if _title_text(spec.get("title")) else [f"{name}: no chart title"]
    for view in _views(spec):
        ds = (view.get("data") or {}).get("name")
        frame = data.get(ds)
        for ch, enc in (view.get("encoding") or {}).items():
            if not isinstance(enc, dict) or "field" not in enc:
                continue
            field = enc["field"]
            if ch in POSITIONAL and enc.get("axis", {}) is not None:
                if not _title_text(enc.get("title")):
                    out.append(f"{name}: {ch} axis ({field}) has no title")
            if ch in ("color", "fill", "shape", "strokeDash") and enc.get("legend", {}) is not None:
                if not _title_text(enc.get("title")):
                    out.append(f"{name}: {ch} legend ({field}) has no title")
            if ch in POSITIONAL + ("color", "fill", "shape", "strokeDash") and enc.get("type") == "nominal":
                values = set(map(str, (enc.get("scale") or {}).get("domain") or []))
                if frame is not None and field in frame:
                    values |= set(map(str, frame[field].dropna().unique()))
                raw = sorted(values & RAW_KEYS)
                if raw:
                    out.append(f"{name}: {ch} ({field}) shows raw keys {raw[:4]}")
    return out


@pytest.mark.parametrize("page,tab", page_views(PAGES))
def test_every_chart_has_a_title_axis_titles_and_legend_words(page, tab):
    at = AppTest.from_file(APP, default_timeout=NEVER_S)
    at.run()
    at.switch_page(page)
    at.run()
    open_tab(at, page, tab)
    assert not at.exception, [e.value for e in at.exception]
    charts = at.get("vega_lite_chart")
    problems = [p for c in charts for p in chart_problems(c.proto)]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("page,tab", page_views(PAGES + ["pages/cluster.py", "pages/review.py"]))
def test_every_picker_shows_words_not_keys(page, tab):
    """Select boxes and radios show presets, portfolios, stages and settings in words: the Compare page's B
    picker read "pipeline-70b" and the cluster's portfolio picker "cluster-quarter" beside the sidebar's
    "70B full pipeline (...)"."""
    import costcore
    from costcore.cluster import portfolio
    keys = RAW_KEYS | set(costcore.preset_names()) | set(portfolio.portfolio_names())
    at = AppTest.from_file(APP, default_timeout=NEVER_S)
    at.run()
    at.switch_page(page)
    at.run()
    open_tab(at, page, tab)
    shown = [(w.label, o) for kind in ("selectbox", "radio", "multiselect") for w in at.get(kind)
             for o in (w.options or [])]
    raw = [(label, o) for label, o in shown if o in keys]
    assert not raw, raw


# ---------------------------------------------------------------------------
# Warnings a planner needs, and no warning that contradicts its own numbers
# ---------------------------------------------------------------------------
def _warned(scn) -> tuple:
    import costcore
    res = costcore.estimate(scn)
    return res, res.warnings


def _with(preset: str, **paths):
    from costcore import api
    from costcore.scenario import schema
    scn = api.load_preset(preset)
    for k, v in paths.items():
        scn = schema.set_path(scn, k.replace("__", "."), v)
    return schema.validate(scn)


@pytest.mark.parametrize("speed", [0.0001, 0.0003, 0.001, 0.01, 2.0])
def test_checkpoint_warnings_say_what_the_stats_say(speed):
    from costcore import fmt
    res, warns = _warned(_with("pipeline-70b", reliability__ckpt_write_gbps_per_gpu=speed))
    for s in res.stages:
        from costcore.scenario.schema import STAGE_LABELS
        write_s, spacing_s = res.stat(s, "ckpt_write_s"), res.stat(s, "ckpt_spacing_h") * 3600
        mine = [w for w in warns if w.startswith(STAGE_LABELS[s] + ": ") and "checkpoint" in w]
        if write_s <= 0 or spacing_s <= 0 or write_s / spacing_s <= 0.10:
            assert not mine, mine
            continue
        assert len(mine) == 1, (s, warns)
        w = mine[0]
        assert fmt.duration_s(write_s) in w and fmt.duration_s(spacing_s) in w
        if res.stat(s, "ckpt_count") <= 1:  # only the final save: a longer interval would not spare it
            assert "one checkpoint" in w and "Hours between checkpoints" not in w and "Checkpoint write speed" in w
            continue
        if write_s >= spacing_s:
            assert "no less than" in w
        else:
            assert f"{fmt.num(write_s / spacing_s * 100)}%" in w
            assert float(fmt.num(write_s / spacing_s * 100)) > 10.0 - 0.05  # never "stalls 9.8%" as a >10% warning
        assert "Hours between checkpoints" in w and "Checkpoint write speed per GPU" in w  # the knobs, in words


def test_a_run_shorter_than_its_checkpoint_interval_is_not_told_to_raise_the_interval():
    """50 samples of SFT train for seconds, within the default hour between checkpoints: the stage writes one
    checkpoint, its final save. Before, the warning told the user to raise Hours between checkpoints, which
    cannot spare that save; it now names the write speed and the weights-only type."""
    res, warns = _warned(_with("llama3-8b", stages__sft__samples=50))
    assert res.stat("sft", "ckpt_count") == 1 and res.stat("sft", "ckpt_interval_h") < 1.0
    mine = [w for w in warns if w.startswith("Supervised fine-tuning: ") and "checkpoint" in w]
    assert len(mine) == 1 and "one checkpoint, the final save" in mine[0], warns
    assert "Hours between checkpoints" not in mine[0] and "save weights only" in mine[0]
    res, warns = _warned(_with("llama3-8b", stages__sft__samples=50, stages__sft__ckpt_type="weights"))
    mine = [w for w in warns if w.startswith("Supervised fine-tuning: ") and "checkpoint" in w]  # already weights only: not offered
    assert all("save weights only" not in w for w in mine), warns


@pytest.mark.parametrize("stage, unit", [("sft", "sequences"), ("dpo", "preference pairs")])
def test_a_batch_thinner_than_the_gpus_is_named_with_the_mfu_it_leaves(stage, unit):
    """128 sequences (the SFT and DPO default) on 4,096 H100s: the search fills the GPUs with tensor and
    pipeline parallelism on tiny micro-batches. The warning quotes the MFU the hours use, and its advice
    holds: a quarter of the GPUs gives a higher MFU and fewer GPU-hours. On 64 GPUs nothing is said."""
    from costcore import fmt
    from costcore.scenario.schema import STAGE_LABELS

    def run(g):
        return _warned({"model": {"params_b": 7}, "hardware": {"gpu": "h100-80gb", "num_gpus": g},
                        "stages": {stage: {}}})
    res, warns = run(4096)
    mine = [w for w in warns if w.startswith(STAGE_LABELS[stage] + ": ")]
    assert len(mine) == 1, warns
    assert f"a global batch of 128 {unit} spread over 4,096 GPUs" in mine[0]
    assert f"MFU at {fmt.num(res.stat(stage, 'mfu') * 100)}%" in mine[0] and "Global batch" in mine[0]
    fewer, _ = run(1024)
    assert fewer.stat(stage, "mfu") > res.stat(stage, "mfu")
    assert fewer.stat(stage, "gpu_hours") < res.stat(stage, "gpu_hours")
    _, warns = run(64)
    assert not [w for w in warns if w.startswith(STAGE_LABELS[stage] + ": ")], warns
    # an MFU set by hand is the user's figure: nothing to say about the plan's
    pinned, warns = _warned({"model": {"params_b": 7}, "hardware": {"gpu": "h100-80gb", "num_gpus": 4096},
                             "stages": {stage: {"mfu": 0.3}}})
    assert not [w for w in warns if "global batch" in w], warns


@pytest.mark.parametrize("stage, key, unit, words", [("sft", "samples", "sequences", "samples"),
                                                     ("dpo", "pairs", "preference pairs", "preference pairs"),
                                                     ("mm_tune", "samples", "sequences", "samples")])
def test_a_global_batch_larger_than_the_data_is_named(stage, key, unit, words):
    """A global batch of 4,096 over 1,000 examples makes an epoch a quarter of one optimizer step, which
    the planner times pro rata but no run can take: one sentence names both numbers and the knob. At a
    batch no larger than the data, nothing is said."""
    from costcore.scenario.schema import STAGE_LABELS

    def run(gb):
        return _warned({"model": {"params_b": 7}, "hardware": {"gpu": "h100-80gb", "num_gpus": 8},
                        "stages": {stage: {key: 1000, "global_batch": gb}}})
    res, warns = run(4096)
    mine = [w for w in warns if w.startswith(STAGE_LABELS[stage] + ": ") and "larger than" in w]
    assert res.stat(stage, "global_batch") == 4096
    assert mine == [f"{STAGE_LABELS[stage]}: the global batch of 4,096 {unit} is larger than its 1,000 {words}, "
                    "so an epoch is less than one optimizer step (timed pro rata); set the Global batch to at "
                    "most 1,000."], warns
    for gb in (1000, 128):
        _, warns = run(gb)
        assert not [w for w in warns if "larger than" in w], (gb, warns)


@pytest.mark.parametrize("efficiency", [0.01, 0.02, 0.05, 0.5])
def test_rollout_warning_says_what_the_stats_say(efficiency):
    from costcore import fmt
    res, warns = _warned(_with("reasoning-grpo-32b", stages__rl__rollout_efficiency=efficiency,
                               stages__rl__samples_per_prompt=64))
    from costcore.analysis.warnings import ROLLOUT_WARN
    # of the productive GPU-hours, as the Post-training page's caption says it
    share = res.stat("rl", "rollout_gpu_hours") / res.stat("rl", "productive_gpu_hours")
    mine = [w for w in warns if "rollouts take" in w]
    assert bool(mine) == (share > ROLLOUT_WARN), (share, warns)
    if mine:
        assert f"{fmt.num(share * 100)}% of the stage's productive GPU-hours" in mine[0]
        assert "Rollout efficiency" in mine[0] and "Completions per prompt" in mine[0]


def test_no_preset_warns_on_its_own_defaults():
    import costcore
    for name in costcore.preset_names():
        assert not [w for w in costcore.estimate(name).warnings if "checkpoint" in w or "rollouts" in w], name


def test_glossary_explains_each_term_with_a_formula_and_a_source():
    from costcore import glossary
    terms = glossary.terms()
    assert len(terms) >= 15
    for t in terms:
        assert set(t) == {"term", "means", "formula", "source"} and all(str(v).strip() for v in t.values()), t
    at = AppTest.from_file(APP, default_timeout=NEVER_S)
    at.run()
    at.switch_page("pages/glossary.py")
    at.run()
    assert not at.exception
    assert [h.value for h in at.subheader] == [t["term"] for t in terms]
    assert [c.value for c in at.code if c.value in {t["formula"] for t in terms}] == [t["formula"] for t in terms]
    for word in ("MFU", "ZeRO", "Young/Daly", "Goodput", "Fixed and elastic", "Tensor parallelism"):
        assert any(word in t["term"] for t in terms), word


def test_common_layer_is_altairs_layer_without_its_copies():
    """pages/common.layer builds the spec alt.layer would (its charts have no selection parameters);
    a chart with one goes through alt.layer itself."""
    import altair as alt
    import pandas as pd
    from pages import common
    line = alt.Chart(pd.DataFrame({"x": [1.0, 2.0], "y": [3.0, 4.0], "c": ["a", "b"]})).mark_line().encode(
        x=alt.X("x:Q", title="X"), y=alt.Y("y:Q", title="Y"), color=alt.Color("c:N", title="C"))
    rule = alt.Chart(pd.DataFrame({"x": [1.5], "w": ["now"]})).mark_rule().encode(
        x="x:Q", color=alt.Color("w:N", title="W"))
    for kw, resolved in (({}, alt.layer(line, rule)),
                         ({"independent_colors": True}, alt.layer(line, rule).resolve_scale(color="independent"))):
        assert common.layer(line, rule, **kw).to_dict() == resolved.to_dict()
    picked = line.add_params(alt.selection_point(name="pick", fields=["c"]))
    def views_unnamed(chart):  # Altair names each view from a process-wide counter
        return re.sub(r"view_\d+", "view", json.dumps(chart.to_dict(), sort_keys=True))
    assert views_unnamed(common.layer(picked, rule)) == views_unnamed(alt.layer(picked, rule))
    assert "params" in common.layer(picked, rule).to_dict()


def test_a_refusal_in_the_app_names_its_settings_in_words():
    """A value the rules refuse, set at a widget: the warning names the settings by their labels (the
    dotted keys are for programs and links), and the last good scenario stays."""
    from costcore.scenario import schema
    key_pattern = re.compile(r"(?<![\w.=/])(" + "|".join(map(re.escape, sorted(RAW_KEYS - set(STAGES), key=len,
                                                                              reverse=True))) + r")(?![\w])")
    at = AppTest.from_file(APP, default_timeout=NEVER_S)
    at.query_params["p"] = "llava-1.5-7b"
    at.run()
    at.switch_page("pages/multimodal.py")
    at.run()
    before = at.session_state["scenario"]
    # the images slider stops at what the sequence holds (3.5 x 576 tokens in 2,048 with the text): a sequence too
    # short for one image is refused, named as the page's own box names it (the phase had no such box before)
    assert [s.max for s in at.slider if s.label == "Images per sample"][0] == 3.5
    at.session_state[f"k:stages.mm_align.seq_len:{at.session_state['rev']}"] = 512
    at.run()
    assert not at.exception
    said = [w.value for w in at.warning if "more than the sequence length" in w.value]
    assert len(said) == 1, [w.value for w in at.warning]
    assert said[0].startswith("Sequence length (tokens) (512): Multimodal alignment: Images per sample: 1 image x 576 "
                              "tokens + 20 text tokens = 596 tokens"), said
    assert "“Multimodal alignment: Sequence length (tokens)”" in said[0], said
    assert not key_pattern.search(said[0]), said
    assert said[0].endswith("or a longer sequence; not applied, the last good value stays."), said
    assert at.session_state["scenario"] == before
    at.run()  # refused once, then left alone: no message on every rerun
    assert not [w.value for w in at.warning if "more than the sequence length" in w.value]
    assert at.session_state["scenario"] == before
    # the API keeps the keys: a program (and a link) names settings by them
    try:
        schema.validate(schema.set_path(before, "stages.mm_align.seq_len", 512))
    except schema.ScenarioError as err:
        assert str(err).startswith("stages.mm_align.items_per_sample: ") and "(stages.mm_align.seq_len)" in str(err)
        words = {"stages.mm_align.items_per_sample": "Images per sample",
                 "stages.mm_align.seq_len": "Multimodal alignment: Sequence length (tokens)"}
        assert ("Sequence length (tokens) (512): " + schema.error_in_words(err, words)
                + "; not applied, the last good value stays.") == said[0].replace("\\", "")
        plain = schema.error_in_words(err)  # no form's words: the schema's labels
        assert plain.startswith("Multimodal alignment: Media items per sample: ") and \
            "“Multimodal alignment: Sequence length”" in plain, plain
    else:
        raise AssertionError("8 images of 576 tokens fit a 2,048-token sequence")
    # a change the rule blames on another setting says first which change it refused: typing 2,880 media tokens per
    # item read "Images per sample: 1 image x 2,880 tokens ..." about a box the user had not touched
    at.session_state[f"k:multimodal.tokens_per_item:{at.session_state['rev']}"] = 2880
    at.run()
    said = [w.value for w in at.warning if "more than the sequence length" in w.value]
    assert len(said) == 1 and said[0].startswith("Media tokens per item (0 = from the encoder) (2,880): Multimodal "
                                                 "alignment: Images per sample: 1 image x 2,880 tokens"), said
    assert at.session_state["scenario"] == before


# ---------------------------------------------------------------------------
# The README matches the app
# ---------------------------------------------------------------------------
def test_readme_lists_the_apps_pages_and_its_two_commands():
    from shared import ROOT
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    from shared import app_pages
    titles = [pg["title"] for pg in app_pages() if not pg["hidden"]]  # a hidden alias (/overview) is no page of its own
    listed = re.findall(r"^\| ([A-Z][^|]+?) \| ", readme.split("| page | what it answers |")[1].split("\n\n")[0], re.M)
    assert listed == titles, (listed, titles)
    first_screen = readme.split("---")[0]
    assert re.findall(r"```bash\n(.+?)\n```", first_screen) == [
        "pip install -r requirements.txt && python -m costcore warm && streamlit run app.py", "bash scripts/test.sh"]
    for path in ("requirements.txt", "scripts/test.sh", "app.py"):
        assert (ROOT / path).exists(), path
    assert "exec bash scripts/test.sh" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "_page.py" not in readme  # pages are named after their URL paths


def test_readme_tornado_count_is_the_benchmarks():
    """The README quotes the tornado's input count of benchmarks/bench_core.py's scenario."""
    import importlib.util
    from costcore.analysis import sensitivity
    from shared import ROOT
    spec = importlib.util.spec_from_file_location("bench_core", ROOT / "benchmarks" / "bench_core.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    quoted = int(re.search(r"tornado over (\d+) inputs", readme).group(1))
    assert quoted == len(sensitivity.tornado(bench.SCENARIO).table)


@pytest.mark.parametrize("value, money, hours", [
    (31.8e6, "$31.8M", "31.8M GPU-h"), (1.9e6, "$1.90M", "1.90M GPU-h"), (48_000, "$48.0k", "48.0k GPU-h"),
    (1_643.187, "$1.64k", "1.64k GPU-h"), (612.4, "$612", "612 GPU-h"), (4.567, "$4.57", "4.57 GPU-h"),
    (999.7, "$1.00k", "1.00k GPU-h"), (999_960.0, "$1.00M", "1.00M GPU-h"), (30e6, "$30.0M", "30.0M GPU-h"),
    (-2.5e6, "-$2.50M", "-2.50M GPU-h"), (15_969_781.06, "$16.0M", "16.0M GPU-h"), (0.0, "$0", "0 GPU-h"),
    (28.29, "$28.3", "28.3 GPU-h"), (10.57, "$10.6", "10.6 GPU-h"), (99.96, "$100", "100 GPU-h"),
    (0.1623, "$0.162", "0.162 GPU-h"), (0.042, "$0.0420", "0.042 GPU-h"), (0.99996, "$1.00", "1.00 GPU-h")])
def test_money_and_gpu_hours_read_at_three_significant_digits(value, money, hours):
    # $28.3, not $28 (two digits): the small items of a plan (a network line, an evaluation's storage) too
    """The card's rule ($31.8M, 1.64k GPU-h): three significant digits, trailing zeros kept ($1.90M says
    it is not $1.9M give or take 50k), a value that rounds up moves to the next unit, never 1.00e+03."""
    from costcore import fmt
    assert fmt.usd(value) == money
    assert fmt.gpu_hours(value) == hours


def test_readme_shows_three_pages_and_the_images_exist():
    """Issue 16: the README shows the overview, the fine-tuning methods and the sensitivity pages."""
    from shared import ROOT
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    images = re.findall(r"!\[[^\]]*\]\(([^)]+\.png)\)", readme)
    assert {Path(i).stem for i in images} >= {"overview", "fine-tuning", "sensitivity"}, images
    for i in images:
        assert (ROOT / i).is_file() and (ROOT / i).stat().st_size > 20_000, i


def test_charts_are_schema_checked_in_tests_and_drawn_without_the_check_when_served(monkeypatch):
    """Tests check every chart against the Vega-Lite schema (conftest); a served page skips the check
    (pages/common.CHECK_CHART_SCHEMA) and must still draw the same chart."""
    import pages.common as common
    from streamlit.testing.v1 import AppTest
    assert common.CHECK_CHART_SCHEMA
    specs = []
    for check in (True, False):
        monkeypatch.setattr(common, "CHECK_CHART_SCHEMA", check)

        def app():
            import altair as alt
            import pandas as pd
            import pages.common as common
            common.show_chart(alt.Chart(pd.DataFrame({"x": [1, 2], "y": [3, 4]})).mark_bar().encode(x="x:Q", y="y:Q"),
                              "A chart")
        at = AppTest.from_function(app).run()
        assert not at.exception
        specs.append(at.get("vega_lite_chart")[0].proto.spec)
    assert specs[0] == specs[1] and '"A chart"' in specs[0]


@pytest.mark.parametrize("gb, shown", [(0.0965, "96.5 MB"), (0.9996, "1.00 GB"), (63.5, "63.5 GB"), (999.7, "1.00 TB"),
                                       (1234.0, "1.23 TB"), (3.4e6, "3.40 PB"), (72.0, "72.0 GB"), (0.5, "500 MB")])
def test_sizes_read_in_the_unit_that_fits(gb, shown):
    """Issue 16: "0.0965 GB" reads as 96.5 MB; a size that rounds up moves to the next unit. Three significant
    digits with their trailing zeros, as money and GPU-hours show them: 72.0 GB, not 72 GB."""
    from costcore import fmt
    assert fmt.gb(gb) == shown


def test_a_share_is_shown_to_three_significant_digits_not_as_zero():
    """The compare page's lever deltas: a $7.25k saving on $43.2M read "-0.0%" (fmt.share)."""
    from costcore import fmt
    assert fmt.share(7.25e3 / 43.2e6) == "0.0168%"
    assert fmt.share(0.263) == "26.3%" and fmt.share(-0.0352, signed=True) == "-3.52%"
    assert fmt.share(0.35, signed=True) == "+35.0%" and fmt.share(0.0099999) == "1.00%"
    assert fmt.share(0.0) == "0%" and fmt.share(1e-9) == "<0.001%" and fmt.share(float("nan")) == "n/a"
    # a tiny signed delta (the Young/Daly lever on a MoE plan read "-<0.001%")
    assert fmt.share(-1e-9, signed=True) == "-0.001% or less" and fmt.share(1e-9, signed=True) == "+0.001% or less"


def test_levers_name_stages_in_words():
    from costcore.analysis import levers
    titles = [lv.title for lv in levers.levers("pipeline-70b")]
    lora = next(t for t in titles if t.startswith("LoRA instead of full fine-tuning"))
    assert lora == "LoRA instead of full fine-tuning in supervised fine-tuning and preference alignment (DPO)"


def test_point_labels_are_spread_so_no_two_overlap():
    """Validation's run names: points that sit together (LLaMA-65B, BLOOM-176B, OPT-175B, Megatron near
    1M GPU-hours) get label rows at least a line apart; a lone point keeps its label beside it."""
    import math
    from pages import common
    x = np.array([1e6, 1.05e6, 0.95e6, 1.1e6, 1e3])
    names = ["LLaMA-65B", "BLOOM-176B", "OPT-175B", "Megatron-GPT-175B", "Pythia-1B"]
    ys = common.spread_labels(x, x, names, 650.0, 460.0, (1e2, 1e9))
    px = (np.log10(ys) - 2) / 7 * 460
    crowd = np.sort(px[:4])
    assert np.all(np.diff(crowd) >= 12.0 - 1e-9), crowd
    lone = (math.log10(1e3) - 2) / 7 * 460 + 6.0
    assert px[4] == pytest.approx(lone), "a label with room stays a little above its point"
    assert np.all(np.abs(px[:4] - ((np.log10(x[:4]) - 2) / 7 * 460)) < 60), "labels stay next to their points"


def test_durations_read_in_the_unit_that_fits_and_never_60_of_one():
    """A 1.9-minute phase read '0.0313 h'; 59.99 s read '60.0 s' and 0.99999 h a bare '1 h'."""
    from costcore import fmt
    assert fmt.days(0.0313 / 24) == "1.88 min"
    assert fmt.days(2.64 / 24) == "2.64 h" and fmt.days(3.9) == "3.90 days"
    assert fmt.days(0.99999 / 24) == "1.00 h" and fmt.days(0.9994 / 24) == "0.999 h"
    assert fmt.duration_s(59.9999) == "1.00 min" and fmt.duration_s(59.9) == "59.9 s"
    assert fmt.duration_s(3599.9) == "1.00 h"


def test_a_gpu_count_reads_as_a_person_writes_it():
    from costcore import fmt
    assert [fmt.gpus(n) for n in (1, 1.0, 8, 8192)] == ["1 GPU", "1 GPU", "8 GPUs", "8,192 GPUs"]


def test_the_fine_tuning_warning_on_one_gpu_says_one_gpu():
    """'needs 262 GB per GPU, more than the usable 72.0 GB on 1 GPUs' read on the QLoRA preset's full
    fine-tuning row (one A100): the count is now written in the singular."""
    from streamlit.testing.v1 import AppTest
    from shared import ROOT
    from server_support import NEVER_S
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=NEVER_S)
    at.query_params["p"] = "qlora-single-gpu"
    at.switch_page("pages/fine-tuning.py")
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    warnings = " ".join(w.value for w in at.warning)
    assert "on 1 GPU;" in warnings and "1 GPUs" not in warnings, warnings


@pytest.mark.parametrize("plan, shown", [({"schedule": "dualpipe", "interleave": 1}, "DualPipe"),
                                         ({"schedule": "1f1b", "interleave": 1}, "1F1B"),
                                         ({"schedule": "1f1b", "interleave": 4}, "1F1B, 4 chunks")])
def test_the_cli_and_the_job_layout_page_name_a_schedule_alike(plan, shown):
    """One wording of a plan's pipeline schedule (fmt.schedule) for the CLI's plan table and the page's."""
    from costcore import fmt
    from costcore.cli import main
    assert fmt.schedule(plan) == shown
    plans = [dict(plan, tp=1, pp=4, dp=2, cp=1, ep=1, micro_batch=1, recompute="none", zero=1, step_time_s=1.0,
                  mfu=0.4, memory_per_gpu_gb=40.0)]
    table = main.render_plans("pretrain", plans)
    assert (shown in table) == (shown != "1F1B"), table


@pytest.mark.parametrize("preset", ["pipeline-70b", "qwen-vl-style-7b", "llama3-8b"])
def test_how_it_was_computed_reads_at_three_significant_digits(preset):
    """Every GPU-hour, duration and count of interruptions in the explanations is at three significant digits in
    the unit that fits (16.6k GPU-h, 26.2 min); before, they read 16,598 and 5,997.2 GPU-h, "0.0 days on 32
    GPUs" and "0.0 interruptions"."""
    import costcore
    from costcore import fmt
    from costcore.analysis import explain
    res = costcore.estimate(preset)
    for stage in res.stages:
        for title, latex, _ in explain.stage_explanation(res, stage):
            for number in re.findall(r"\\text\{(-?[\d.,]+)[kMB]? GPU-h\}", latex):
                assert len(number.replace(",", "").replace(".", "").lstrip("-0")) <= 3, (stage, title, latex)
            assert not re.search(r"\d,\d{3}(\.\d+)?\\? ?\\text\{(GPU-h|days)", latex), (stage, title, latex)
            assert not re.search(r"\b0\.0(?!\d)", latex), (stage, title, latex)
            assert not re.search(r"\de[-+]\d", latex), (stage, title, latex)  # 8.2e-05 is a printf's, not a reader's
            if title == "Billed GPU-hours and money":
                assert fmt.days(res.stat(stage, "wall_days")) in latex and fmt.gpu_hours(res.stat(stage, "gpu_hours")) in latex


def test_the_checkpoint_row_says_why_its_interval_is_shorter_than_asked():
    """A stage shorter than the hour set between checkpoints checkpoints once, at its end: the row says the
    interval is the whole run, names the hour set and still shows the Young/Daly optimum; a long stage says
    "as set"; with the interval left at 0, the Young/Daly optimum is the one used."""
    import costcore
    from costcore import fmt
    from costcore.analysis import explain
    from costcore.scenario import schema

    def row(scn, stage):
        res = costcore.estimate(scn)
        return res, dict((t, f) for t, f, _ in explain.stage_explanation(res, stage))["Checkpoint interval and failures"]

    res, short = row(_with("llama3-8b", stages__sft__samples=50), "sft")
    assert r"\text{all the training, shorter than the}\ \text{1.00 h}\ \text{set}" in short
    assert fmt.duration_s(res.stat("sft", "young_daly_h") * 3600) in short
    _, long = row("pipeline-70b", "pretrain")  # every 30 min over 43 days
    assert r"\text{30.0 min}\ (\text{as set}" in long and "all the training" not in long
    res, free = row(schema.set_path(costcore.load_preset("pipeline-70b"), "stages.pretrain.ckpt_interval_h", 0), "pretrain")
    assert r"(\text{Young/Daly})" in free and fmt.duration_s(res.stat("pretrain", "ckpt_interval_h") * 3600) in free


@pytest.mark.parametrize("value, shown", [(0.53, "0.530"), (0.698, "0.698"), (12, "12.0"), (612.4, "612"),
                                          (1234, "1,230"), (76.8e6, "76.8M"), (-3.2, "-3.20"), (0, "0")])
def test_a_measured_quantity_keeps_its_trailing_zeros(value, shown):
    """fmt.sig3 for columns of measured values (months billed, evaluation scores): 0.530 next to 0.698, 60.0 next to
    61.8, where fmt.num wrote 0.53 and 60 as if less precise."""
    from costcore import fmt
    assert fmt.sig3(value) == shown


def test_a_pinned_layout_that_cannot_be_laid_out_says_why_not_memory():
    """At 168B the DeepSeek-V3 preset's depth follows its size to 15 layers, fewer than its 16 pinned pipeline
    stages: no GPU count fits, but not for memory. The sentence said it "needs 9.4 GB on each H800 80GB; use more
    ... pipeline parallelism", which contradicted itself; it now names the stages and the layers."""
    import costcore
    from costcore.api import load_preset
    from costcore.scenario import schema
    res = costcore.estimate(schema.with_size(schema.validate(load_preset("moe-deepseek-v3")), 168))
    assert res.stat("pretrain", "fits") < 0.5 and res.stat("pretrain", "memory_per_gpu_gb") < res.stat("pretrain", "usable_memory_gb")
    said = [w for w in res.infeasible if w.startswith("Pre-training")]
    assert said == ["Pre-training cannot be laid out: its pinned pipeline parallelism of 16 stages needs at least 16 "
                    "layers and this model has 15; pin fewer pipeline stages or set it to 0 (searched)."]


def test_grpo_with_a_group_of_one_is_warned():
    """GRPO scores a completion against its group's mean: with one completion per prompt every advantage is zero.
    The page took 1 and costed the stage ($622k) with nothing said; PPO with one completion is fine."""
    import costcore
    from costcore.scenario import schema
    scn = schema.set_path(costcore.load_preset("pipeline-70b-lora-grpo"), "stages.rl.samples_per_prompt", 1)
    said = [w for w in costcore.estimate(scn).warnings if "GRPO with one completion" in w]
    assert said == ["Reinforcement learning: GRPO with one completion per prompt has no group to compare it with, so "
                    "every advantage is zero and nothing is learned; use 2 or more Completions per prompt "
                    "(DeepSeekMath used 64), or PPO."]
    ppo = schema.set_path(scn, "stages.rl.algorithm", "ppo")
    assert not [w for w in costcore.estimate(ppo).warnings if "GRPO" in w]
    assert not [w for w in costcore.estimate("pipeline-70b-lora-grpo").warnings if "GRPO" in w]


def test_every_repository_file_a_source_cites_is_in_the_repository():
    """The RL explanation cited "cost-model-notes", a file the project did not ship (it lived beside the repository):
    every docs/reference/ or costcore/data/ path named in the core's code and data files exists in the tree (other
    docs/ paths there are other repositories' files, each after its repository's name)."""
    from shared import ROOT
    cited = set()
    for path in list((ROOT / "costcore").rglob("*.py")) + list((ROOT / "costcore" / "data").glob("*.yaml")):
        cited |= set(re.findall(r"\b((?:docs/reference|costcore/data)/[\w./-]+\.(?:md|yaml|csv|json))", path.read_text(encoding="utf-8")))
    assert "docs/reference/cost-model-notes.md" in cited
    missing = sorted(p for p in cited if not (ROOT / p).exists())
    assert not missing, missing
