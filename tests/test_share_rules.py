"""Share links follow the rules of a YAML file (issue 20, "URLs and values are handled unevenly").

* a name over 200 characters is refused with a warning, not cut;
* a link with many bad parameters gives one warning that lists them (the first ten, then a count);
* a parameter given more than once is refused (the app passes every value of a key);
* numbers written as text are ASCII only, one rule (``schema.parse_number_text``) for the URL and
  ``--set``; exponent notation (``1e3``, ``3e-5``) is a number in a YAML file, on ``--set`` and in a link;
* ``encode`` -> ``decode`` gives back every preset unchanged.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import costcore
from costcore import api
from costcore.cli import main as cli
from costcore.scenario import schema
from costcore.scenario import share
from costcore.scenario.schema import ScenarioError
from server_support import NEVER_S  # the one wait limit of the suite (not a speed)

ROOT = Path(__file__).resolve().parent.parent
PRESET = "pipeline-70b"
PRESETS = api.preset_names()
BAD_NUMBERS = ["٣", "６", "1_000", "inf", "nan", "-inf", ".inf", "0x10", "1e", "1,5", "٣.٥", "７e1", " 1 2 "]


def _decode(params: dict, default: str = PRESET):
    scn, preset, warnings = share.decode(params, default)
    assert schema.validate(scn) == scn
    return scn, preset, warnings


# --- length -------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [201, 300, 100_000])
def test_long_name_is_refused_not_cut(n):
    base = api.load_preset(PRESET)
    scn, preset, warnings = _decode({"p": PRESET, "name": "n" * n, "model.params_b": "8"})
    assert preset == PRESET
    assert scn["name"] == base["name"], "the preset's name must be kept, not a cut version of the link's"
    assert scn["model"]["params_b"] == 8.0, "the other parameters are still read"
    assert len(warnings) == 1, warnings
    assert "name" in warnings[0] and "200" in warnings[0], warnings


def test_name_of_exactly_200_characters_is_accepted():
    scn, _, warnings = _decode({"p": PRESET, "name": "n" * 200})
    assert scn["name"] == "n" * 200 and warnings == []


def test_long_value_is_refused():
    scn, _, warnings = _decode({"p": PRESET, "tags.team": "t" * (share.MAX_VALUE_CHARS + 1)})
    assert scn == api.load_preset(PRESET)
    assert len(warnings) == 1 and "tags.team" in warnings[0], warnings


# --- many bad parameters: one warning -----------------------------------------------------------
def test_thousand_parameters_give_exactly_one_warning_that_names_some():
    params = {f"x{i}": str(i) for i in range(1000)}
    scn, preset, warnings = _decode(params)
    assert preset == PRESET and scn == api.load_preset(PRESET)
    assert len(warnings) == 1, f"{len(warnings)} warnings: {warnings[:3]}"
    w = warnings[0]
    assert "1,000 parameters" in w and str(share.MAX_PARAMS) in w, w
    assert all(f"x{i} " in w for i in range(share.MAX_LISTED)), w
    assert f"x{share.MAX_LISTED} " not in w, "only the first names are listed"
    assert "more" in w, w


def test_many_bad_parameters_under_the_cap_give_one_warning():
    params = {"p": PRESET, "model.params_b": "9", **{f"bad{i}": "1" for i in range(12)}, "hardware.gpu": "tpu-v9"}
    scn, _, warnings = _decode(params)
    assert scn["model"]["params_b"] == 9.0, "good parameters among bad ones are still read"
    assert len(warnings) == 1, warnings
    w = warnings[0]
    assert w.startswith("13 URL parameters"), w
    assert "bad0" in w and "bad9" in w and "and 3 more" in w, w
    assert "bad11" not in w, w


def test_a_few_bad_parameters_are_each_given_with_their_reason():
    _, _, warnings = _decode({"p": PRESET, "model.params_b": "-5", "nonsense.key": "1"})
    assert len(warnings) == 1, warnings
    assert "model.params_b: must be" in warnings[0] and "nonsense.key: unknown setting" in warnings[0], warnings


def test_one_bad_parameter_keeps_the_usual_sentence():
    _, _, warnings = _decode({"p": PRESET, "model.params_b": "-5"})
    assert len(warnings) == 1 and warnings[0].startswith("URL parameter model.params_b: must be"), warnings


# --- repeated parameters ------------------------------------------------------------------------
@pytest.mark.parametrize("values", [["7", "8"], ["7", "7"], ["1", "2", "3"]])
def test_repeated_parameter_is_refused_with_one_warning(values):
    scn, _, warnings = _decode({"p": [PRESET], "model.params_b": values})
    assert scn == api.load_preset(PRESET), "a repeated parameter keeps the default"
    assert len(warnings) == 1, warnings
    assert "model.params_b" in warnings[0] and f"given {len(values)} times" in warnings[0], warnings


def test_repeated_preset_is_refused():
    _, preset, warnings = _decode({"p": ["llama3-8b", "scratch-7b"]})
    assert preset == PRESET
    assert len(warnings) == 1 and "URL parameter p" in warnings[0] and "given 2 times" in warnings[0], warnings


def test_lists_of_one_value_and_plain_text_decode_alike():
    text = {"p": "llama3-8b", "model.params_b": "9", "stages.sft": "on", "name": "x"}
    lists = {k: [v] for k, v in text.items()}
    assert _decode(text) == _decode(lists)
    assert _decode(text)[2] == []


def test_app_refuses_a_repeated_parameter():
    from streamlit.testing.v1 import AppTest
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=NEVER_S)
    at.query_params["p"] = PRESET
    at.query_params["model.params_b"] = ["7", "8"]
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    warnings = [w.value for w in at.warning if "URL parameter" in w.value]
    assert len(warnings) == 1 and "given 2 times" in warnings[0], warnings
    assert costcore.estimate(PRESET).total_usd > 0


# --- numbers: ASCII digits only, one rule for --set and the URL ---------------------------------
@pytest.mark.parametrize("text", BAD_NUMBERS)
def test_parse_number_text_refuses(text):
    with pytest.raises(ScenarioError) as err:
        schema.parse_number_text("model.params_b", text)
    assert err.value.path == "model.params_b"
    assert "0-9" in str(err.value)


@pytest.mark.parametrize("text", BAD_NUMBERS)
def test_bad_number_is_refused_on_the_url(text):
    scn, _, warnings = _decode({"p": PRESET, "model.params_b": text})
    assert scn == api.load_preset(PRESET)
    assert len(warnings) == 1 and "model.params_b" in warnings[0], warnings


@pytest.mark.parametrize("text", BAD_NUMBERS)
def test_bad_number_is_refused_on_set(capsys, text):
    rc = cli.main(["estimate", PRESET, "--set", f"model.params_b={text}"])
    out, err = capsys.readouterr()
    assert rc == 2, (rc, err)
    assert out == "" and err.startswith("error: model.params_b: ") and err.count("\n") == 1, err


@pytest.mark.parametrize("path", ["model.layers", "stages.sft.samples"])
def test_bad_number_is_refused_for_int_fields(capsys, path):
    for text in ("٣", "1_0"):
        assert cli.main(["estimate", PRESET, "--set", f"{path}={text}"]) == 2
        _, _, warnings = _decode({"p": PRESET, path: text})
        assert len(warnings) == 1 and path in warnings[0], warnings
    capsys.readouterr()


@pytest.mark.parametrize("path,text,expected", [
    ("model.params_b", "1e1", 10.0), ("model.params_b", "1.5E+1", 15.0), ("model.params_b", "5e-1", 0.5),
    ("model.params_b", "+2e1", 20.0), ("model.params_b", ".5e2", 50.0),
    ("reliability.failures_per_gpu_hour", "3e-5", 3e-5), ("model.layers", "8e1", 80),
    ("model.params_b", "7", 7.0), ("model.params_b", "0.25", 0.25),
])
def test_exponent_notation_is_a_number_in_yaml_set_and_url(capsys, path, text, expected):
    section, key = path.split(".")
    from_yaml = costcore.load_yaml_text(f"name: t\n{section}:\n  {key}: {text}\nstages: {{sft: {{}}}}\n")
    assert schema.get_path(from_yaml, path) == expected
    assert type(schema.get_path(from_yaml, path)) is type(expected)

    base = api.load_preset(PRESET)
    from_set = cli.apply_sets(base, [f"{path}={text}"])
    from_url, _, warnings = _decode({"p": PRESET, path: text})
    assert warnings == []
    # a size alone on the 70B preset (whole shape stated) takes the shape of that size, as the size slider does
    # (50B too: a size the 70B shape could hold kept that shape in a link and not on the slider)
    moved = schema.resize_model(base, expected) if path == "model.params_b" else schema.set_path(base, path, expected)
    assert from_set == from_url == schema.validate(moved)

    res = costcore.estimate(from_url)
    # 3: the number was read, and the plan it gives cannot run (the preset's pinned TP 8 does not divide a 0.5B
    # shape's heads); the JSON is printed all the same
    assert cli.main(["estimate", PRESET, "--set", f"{path}={text}", "--format", "json"]) == (0 if res.feasible else 3)
    total = json.loads(capsys.readouterr().out)["total_usd"]
    assert total == res.total_usd


def test_yaml_exponent_resolver_leaves_text_alone():
    from costcore.scenario.yamlio import parse_yaml
    assert parse_yaml("a: 1e3") == {"a": 1000.0}
    assert parse_yaml("a: '1e3'") == {"a": "1e3"}
    for text in ("1e", "e3", "1e3x", "1e3.5", "٣e3"):
        assert parse_yaml(f"a: {text}") == {"a": text}


# --- round trip -------------------------------------------------------------------------------
@pytest.mark.parametrize("preset", PRESETS)
def test_encode_decode_round_trip_for_every_preset(preset):
    scn = api.load_preset(preset)
    other = next(p for p in PRESETS if p != preset)
    params = share.encode(scn, preset)
    back, got, warnings = _decode(params, other)
    assert (back, got, warnings) == (scn, preset, [])
    # the same link opened in the app arrives as lists of one value
    assert _decode({k: [v] for k, v in params.items()}, other) == (scn, preset, [])


@pytest.mark.parametrize("preset", PRESETS)
def test_round_trip_of_an_edited_preset_is_exact(preset):
    """Changed values, including ones _fmt_value writes with an exponent (3e-05), come back as they were."""
    scn = api.load_preset(preset)
    for path, value in {"name": "Ünïcode name, 200 max", "model.params_b": 12.5,
                        "reliability.failures_per_gpu_hour": 3e-5, "hardware.num_gpus": 24}.items():
        # a size the preset's stated shape cannot hold moves the shape with it (as the size slider does)
        scn = schema.size_alone(scn, value) if path == "model.params_b" else schema.set_path(scn, path, value)
    scn = schema.validate(scn)
    params = share.encode(scn, preset)
    assert params["reliability.failures_per_gpu_hour"] == "3e-05"
    back, got, warnings = _decode(params, PRESET if preset != PRESET else PRESETS[0])
    assert (got, warnings) == (preset, [])
    # a model resized from a named config drops keys the preset states at their defaults (sliding_window 0,
    # expert_node_limit 0): the link states them, at those defaults; every other key is exact
    assert _model_defaults_dropped(back) == _model_defaults_dropped(scn)


def _model_defaults_dropped(scn: dict) -> dict:
    model = {k: v for k, v in scn.get("model", {}).items()
             if not (f"model.{k}" in schema.BY_PATH and v == schema.BY_PATH[f"model.{k}"].default)}
    return {**scn, "model": model}


@pytest.mark.parametrize("preset", PRESETS)
def test_link_from_another_preset_gives_the_same_estimate(preset):
    """A scenario encoded against another preset carries the defaults it relies on explicitly, so
    the dicts may differ (the description is not carried either) but every cost is the same."""
    scn = api.load_preset(preset)
    for base in PRESETS:
        back, got, warnings = _decode(share.encode(scn, base), preset)
        assert got == base and warnings == [], (base, warnings)
        assert costcore.estimate(back).total_usd == costcore.estimate(scn).total_usd, base


# --- the defaults a link leaves out ---------------------------------------------------------------
def test_link_carries_the_defaults_stamp_and_a_matching_stamp_says_nothing():
    params = share.encode(api.load_preset(PRESET), PRESET)
    assert params[share.STAMP_KEY] == share.defaults_stamp()
    assert len(share.defaults_stamp()) == 12 and int(share.defaults_stamp(), 16) >= 0
    scn, _, warnings = _decode(params)
    assert warnings == [] and scn == api.load_preset(PRESET)


@pytest.mark.parametrize("stamp", ["000000000000", "<b>x</b>", ""])
def test_link_from_other_defaults_says_its_numbers_may_differ_and_keeps_its_settings(stamp):
    scn = schema.set_path(api.load_preset(PRESET), "hardware.usd_per_gpu_hour", 2.5)
    params = dict(share.encode(schema.validate(scn), PRESET), **{share.STAMP_KEY: stamp})
    back, _, warnings = _decode(params)
    assert warnings == [share.STAMP_WARNING]  # one sentence, the tampered text not echoed
    assert back["hardware"]["usd_per_gpu_hour"] == 2.5


def test_old_link_without_a_stamp_is_read_as_before():
    params = share.encode(api.load_preset(PRESET), PRESET)
    del params[share.STAMP_KEY]
    assert _decode(params)[2] == []


def test_stamp_follows_the_defaults_files_not_their_line_endings(tmp_path, monkeypatch):
    data, presets = tmp_path / "data", tmp_path / "presets"
    data.mkdir(), presets.mkdir()
    (data / "hardware.yaml").write_bytes(b"h100:\n  usd_per_gpu_hour: 2.0\n")
    (presets / "a.yaml").write_bytes(b"name: a\n")
    monkeypatch.setattr(share, "_DEFAULT_DIRS", (data, presets))

    def stamp():
        share.defaults_stamp.cache_clear()
        return share.defaults_stamp()

    try:
        first = stamp()
        (data / "hardware.yaml").write_bytes(b"h100:\r\n  usd_per_gpu_hour: 2.0\r\n")  # a Windows checkout
        assert stamp() == first
        (data / "hardware.yaml").write_bytes(b"h100:\n  usd_per_gpu_hour: 2.5\n")  # a price changed
        assert stamp() != first
        (data / "hardware.yaml").write_bytes(b"h100:\n  usd_per_gpu_hour: 2.0\n")
        (presets / "a.yaml").rename(presets / "b.yaml")  # a preset renamed
        assert stamp() != first
    finally:
        monkeypatch.undo()
        share.defaults_stamp.cache_clear()


@pytest.mark.parametrize("size", [20.0, 35.0, 50.0, 65.0, 100.0])
def test_a_size_in_a_link_is_the_model_the_size_slider_gives(size):
    """``model.params_b=35`` on the 70B preset kept its 80 x 8,192 shape (a size that shape could hold) while the
    slider's 35B took the 35B shape: $37.9M by link against $26.4M by slider. Link, --set and slider are one model."""
    base = api.load_preset("pipeline-70b-lora-grpo")
    slider = schema.validate(schema.resize_model(base, size))  # pages/common.apply
    from_url, _, warnings = _decode({"p": "pipeline-70b-lora-grpo", "model.params_b": _fmt(size)})
    assert warnings == [] and from_url == slider
    assert cli.apply_sets(base, [f"model.params_b={_fmt(size)}"]) == slider
    assert costcore.estimate(from_url).total_usd == costcore.estimate(slider).total_usd


def test_a_link_restating_the_size_keeps_the_stated_shape():
    base = api.load_preset("pipeline-70b")
    size = schema.effective_value(base, "model.params_b")
    from_url, _, _ = _decode({"p": "pipeline-70b", "model.params_b": _fmt(size)})
    assert from_url == base and base["model"]["ffn"] == 28672
    # a model stating no shape takes a new size alone (the core derives its shape), in a link as in a file
    shapeless = api.load_preset("llama2-7b-pretrain")
    from_url, _, _ = _decode({"p": "llama2-7b-pretrain", "model.params_b": "13"})
    assert from_url == schema.validate(schema.set_path(shapeless, "model.params_b", 13))


def _fmt(v: float) -> str:
    return str(int(v)) if v == int(v) else repr(v)


def test_refusals_give_ranges_a_person_reads():
    """"from 0 to 10,000,000,000,000 $" and "from 0.01 to 1 of each budget" read as money and shares now; a whole
    number is not offered "0.5" as an example of how to write it."""
    assert schema.BY_PATH["budget.total_usd"].allowed() == "a number from $0 to $10 trillion"
    assert schema.BY_PATH["hardware.usd_per_gpu_hour"].allowed() == "a number from $0 to $1,000/GPU-hour"
    assert schema.BY_PATH["budget.warn_at"].allowed() == "a number from 0.01 to 1 (1% to 100% of each budget)"
    with pytest.raises(ScenarioError) as err:
        schema.parse_number_text("hardware.num_gpus", "eight")
    assert "such as 7 or 1e3" in str(err.value) and "0.5" not in str(err.value)
    with pytest.raises(ScenarioError) as err:
        schema.parse_number_text("model.params_b", "seven")
    assert "such as 7, 0.5 or 3e-5" in str(err.value)
