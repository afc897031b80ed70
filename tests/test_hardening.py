"""Hardening: property-based fuzzing of every input path of the planner.

    python -m pytest tests/test_hardening.py -q

Input paths and their contract:

* scenario YAML files given to the CLI (``python -m costcore estimate FILE``),
* ``--set dotted.key=value`` overrides,
* URL query parameters (``costcore.scenario.share.decode``),
* uploaded scenarios (``costcore.load_yaml_text(bytes, what="upload")``),
* the app rendering a user-chosen scenario name (streamlit AppTest).

Every bad input gives ONE plain message naming the field (CLI: exit code 2,
exactly one line on stderr, no traceback); every valid input is estimated and no
NaN/inf reaches a displayed number (an infeasible plan exits with code 3 and
says so). How fast a refusal comes is measured by benchmarks/bench_refusal.py,
not asserted here: a wall-clock limit in a test fails on a loaded machine. Export then import (YAML download/upload,
share link) reproduces the scenario and its total exactly.

Most CLI cases call ``costcore.cli.main.main([...])`` in-process (fast); a few run
``python -m costcore`` as a real subprocess to check the process contract.
"""
from __future__ import annotations

import builtins
import contextlib
import io
import json
import logging
import math
import os
import pathlib
import re
import subprocess
import sys
import traceback
import unicodedata
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import costcore
from shared import _short, assert_finite, open_tab, page_views, run_cli  # noqa: F401
from costcore import api, fmt
from costcore.cli import main as cli
from costcore.scenario import schema
from costcore.scenario import share
from costcore.scenario import yamlio
from costcore.scenario.schema import BY_PATH, FIELDS, MM_STAGES, PLAN_FIELDS, STAGE_KEYS, STAGES, TOP_LEVEL_KEYS, ScenarioError
from server_support import NEVER_S  # the one wait limit of the suite (not a speed)

ROOT = Path(__file__).resolve().parent.parent
PRESET_DIR = (ROOT / "presets").resolve()
PRESETS = api.preset_names()
DEFAULT_PRESET = "pipeline-70b"

MAX_MESSAGE_CHARS = 1000       # "one plain message": a sentence, not an echo of the input
FIFTY_MB = 50 * 1024 * 1024

FUZZ = settings(max_examples=150, deadline=None, derandomize=True, database=None, report_multiple_bugs=False,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                       HealthCheck.data_too_large, HealthCheck.filter_too_much])
FUZZ_SMALL = settings(FUZZ, max_examples=60)


@pytest.fixture(scope="module", autouse=True)
def _warm(warm_kernels):
    """The kernels are compiled (or loaded from the cache) before the first case (conftest.py)."""


# ---------------------------------------------------------------------------
# Helpers: timing, messages, finiteness
# ---------------------------------------------------------------------------
def assert_plain_message(msg: str, what: str) -> None:
    """One line of printable text of sentence length."""
    assert msg.strip(), f"{what}: empty message"
    lines = msg.splitlines()
    assert len(lines) == 1, f"{what}: the message spans {len(lines)} lines: {msg[:300]!r}"
    ctrl = sorted({c for c in msg if unicodedata.category(c) == "Cc"})
    assert not ctrl, f"{what}: the message contains control characters {ctrl!r}: {msg[:300]!r}"
    assert len(msg) <= MAX_MESSAGE_CHARS, f"{what}: the message is {len(msg):,} characters: {msg[:200]!r}..."
    assert "Traceback" not in msg, f"{what}: {msg[:300]!r}"


def assert_scenario_error(err: ScenarioError, what: str, names=()) -> None:
    assert isinstance(err, ScenarioError)
    assert err.path, f"{what}: ScenarioError without a field: {err}"
    assert_plain_message(str(err), what)
    if names:
        assert any(n in str(err) for n in names), f"{what}: the message names none of {names!r}: {err}"


def assert_estimates_finite(scn: dict, what: str) -> float:
    res = costcore.estimate(scn)
    d = res.to_dict()
    assert_finite(d)
    assert fmt.usd(d["total_usd"]) != "n/a", what
    return d["total_usd"]


def _reject_constant(name):
    raise AssertionError(f"JSON output contains {name}")


def assert_cli_refused(rc, out, err, what: str, names=()) -> str:
    assert rc == 2, f"{what}: exit code {rc!r}, expected 2; stderr={err[:300]!r}"
    assert out == "", f"{what}: printed to stdout on error: {out[:200]!r}"
    assert err.endswith("\n"), f"{what}: stderr={err[:300]!r}"
    line = err[:-1]
    assert line.startswith("error: "), f"{what}: stderr={err[:300]!r}"
    assert_plain_message(line, what)
    assert re.match(r"error: \S.*?: \S", line), f"{what}: the message names no field: {line}"
    if names:
        assert any(n in line for n in names), f"{what}: the message names none of {names!r}: {line}"
    return line


def assert_cli_ok(rc, out, err, what: str) -> dict:
    """Exit 0 with finite JSON, or exit 3 (infeasible plan) with the whole JSON marked infeasible."""
    assert rc in (0, 3), f"{what}: exit code {rc!r}; stderr={err[:300]!r}"
    assert err == "", f"{what}: stderr on success: {err[:300]!r}"
    d = json.loads(out, parse_constant=_reject_constant)
    assert_finite(d, "CLI JSON")
    assert d["feasible"] is (rc == 0), f"{what}: exit code {rc} but feasible={d['feasible']}"
    assert bool(d["infeasible"]) is (rc == 3), f"{what}: exit code {rc} but infeasible={d['infeasible']}"
    return d


def cli_file(capsys, path: Path, data, what: str, names=(), extra=()):
    """Write data (str or bytes) to path, run the CLI on it: refused (2) or finite JSON (0)."""
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass"))
    rc, out, err = run_cli(capsys, ["estimate", str(path), "--format", "json", *extra])
    if rc in (0, 3):
        assert_cli_ok(rc, out, err, what)
        return None
    return assert_cli_refused(rc, out, err, what, names=names)


# ---------------------------------------------------------------------------
# Strategies
# ---------------------------------------------------------------------------
YAML_TOKENS = [
    "\n", "\n  ", "\n    ", " ", ": ", ":", "- ", "-", "[", "]", "{", "}", ",", "?", "? ", "&a ", "*a", "&a", "!",
    "!!", "'", '"', "#", "|", ">", "%YAML 1.1\n", "---\n", "...\n", "\t", "\\", "\x00", "\ufeff", "\x1b[31m",
    "name", "model", "params_b", "hardware", "gpu", "stages", "sft", "pretrain", "epochs", "tokens_b", "schedule",
    "start_date", "tags", "project", "budget", "total_usd", "labor", "researcher.fte", "<<",
    "0", "1", "-5", "7.0", "1e308", "1.0e+308", "-1.0e+308", ".nan", ".inf", "-.inf", "NaN", "0x", "0o", "0b",
    "0x1F", "1_000", "190:20:30", "9" * 500, "true", "no", "~", "null", "2027-02-30", "2027-13-01",
    "2001-12-14t21:59:43.10-05:00", "2027-01-01 25:00:00",
    "!!int ", "!!float ", "!!bool ", "!!timestamp ", "!!set ", "!!map ", "!!seq ", "!!str ", "!!binary ",
    "!!omap ", "!!pairs ", "!!null ", "!!python/object:os.system ", "!!python/name:os.system ",
    "h100-80gb", "lora", "é", "日本", "\u2028", "\U0001F600",
]
yaml_garbage = st.lists(st.sampled_from(YAML_TOKENS), max_size=40).map("".join)

_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.integers(min_value=-10**30, max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=20),
    st.sampled_from([10**400, -10**400, 1e308, -1e308, 5e-324, float("nan"), float("inf"), -float("inf"),
                     -5, 0, "", "2027-02-30", "1e999"]),
    st.dates(),
)
_keys = st.one_of(
    st.text(max_size=12),
    st.sampled_from(list(TOP_LEVEL_KEYS) + ["params_b", "gpu", "num_gpus", "sft", "pretrain", "rl", "epochs",
                                             "tokens_b", "researcher", "fte", "start_date", "enabled"]),
)
nested = st.recursive(_scalars, lambda ch: st.one_of(st.lists(ch, max_size=4),
                                                     st.dictionaries(_keys, ch, max_size=4)), max_leaves=25)

WEIRD_VALUES = st.one_of(
    _scalars, st.lists(_scalars, max_size=3), st.dictionaries(st.text(max_size=8), _scalars, max_size=3),
    st.sampled_from([-1, -1e-9, 1e6, 10**19, 2**63, 1e15, 12.5, 0.0, 1, "abc", "lora", "h100-80gb", True]),
)
ALL_PATHS = sorted(BY_PATH)
RANDOM_PATHS = st.one_of(
    st.sampled_from(ALL_PATHS), st.sampled_from(["name", "description"]),
    st.lists(st.one_of(st.sampled_from(["model", "stages", "sft", "rl", "params_b", "x", "budget", "labor"]),
                       st.text(min_size=1, max_size=8).filter(lambda s: "." not in s)),
             min_size=1, max_size=4).map(".".join),
)


def _field_value_text(f) -> st.SearchStrategy:
    """Text of a value inside the field's range (what a share link or --set carries)."""
    if f.kind == "enum":
        return st.sampled_from(f.choices)
    if f.kind == "bool":
        return st.sampled_from(["true", "false"])
    if f.kind == "str":
        return st.text(alphabet=st.characters(min_codepoint=97, max_codepoint=122), max_size=20)
    if f.kind == "date":
        return st.dates(min_value=__import__("datetime").date(2000, 1, 1),
                        max_value=__import__("datetime").date(2100, 12, 31)).map(str)
    return _in_range(f).map(share._fmt_value)


def _in_range(f) -> st.SearchStrategy:
    lo, hi = f.lo, f.hi
    if f.kind == "int":
        vals = st.one_of(st.just(int(lo)), st.just(int(hi)), st.integers(int(lo), int(hi)))
    else:
        parts = [st.just(lo), st.just(hi), st.floats(lo, hi)]
        low = max(lo, hi * 1e-9, 1e-12)
        if hi / low > 1000:
            parts.append(st.floats(math.log(low), math.log(hi)).map(lambda v: min(hi, max(lo, math.exp(v)))))
        vals = st.one_of(*parts)
    if f.min_nonzero:
        cast = int if f.kind == "int" else float
        vals = vals.map(lambda v: v if v == 0 or v >= f.min_nonzero else cast(f.min_nonzero))
    return vals


# Fields whose in-range values are refused by a rule that reads other settings too (base bits of a
# full fine-tune, ZeRO stage with CPU offload): tests/test_finetune.py checks those sentences; the
# pipeline degree and interleaving of a DualPipe stage (even, not interleaved): tests/test_dualpipe.py.
# the third: at most the GPU's peak; the last: at most model.params_b (schema._active_rule)
CROSS_FIELD_RULES = ("base_bits", "zero_stage", "tflops_per_gpu", "active_params_b")
DUALPIPE_RULED = ("pp", "interleave")
FP8_RULED = ("hardware.peak_tflops", "hardware.fp8_peak_tflops")
MM_RULED = ("items_per_sample", "text_tokens_per_sample", "tokens_per_item", "seq_len", "resolution_px")
# a dense model's size and whole shape, both given, must agree (schema._shape_rules: 1.5x above, 3x below)
SHAPE_RULED = ("params_b", "active_params_b", "layers", "hidden", "heads", "kv_heads", "ffn", "vocab")


def _settable_fields(scn: dict) -> list:
    """Numeric kernel fields of the sections and of the stages this scenario enables."""
    enabled = set(scn.get("stages", {}))
    shaped = bool(schema.validate(scn).get("model", {}).get("ffn"))  # a whole dense shape given (or named)
    out = []
    for f in FIELDS:
        if f.kind not in ("float", "int"):
            continue
        parts = f.path.split(".")
        if parts[0] == "stages" and (parts[1] not in enabled or parts[2] not in STAGE_KEYS[parts[1]]):
            continue
        if parts[-1] in CROSS_FIELD_RULES:  # allowed only with other settings (schema._stage_rules)
            continue
        if f.path in FP8_RULED and schema.effective_value(scn, "hardware.precision") == "fp8":
            continue  # in FP8, the FP8 peak at most 2x the BF16 one (schema._throughput_rules)
        if parts[0] == "stages" and parts[-1] in DUALPIPE_RULED and \
                schema.effective_value(scn, f"stages.{parts[1]}.schedule") == "dualpipe":
            continue
        if parts[0] == "model" and parts[-1] in SHAPE_RULED and (shaped or parts[-1] == "ffn"):  # ffn states it
            continue
        if parts[0] == "multimodal" or (parts[0] == "stages" and parts[1] in MM_STAGES and parts[-1] in MM_RULED):
            continue  # media tokens must fit the sequence, the resolution the encoder (scenario.media rules)
        out.append(f)
    return out


@st.composite
def valid_scenarios(draw):
    """(preset, scenario): a preset plus 1-4 in-range overrides of its numeric fields, validated."""
    preset = draw(st.sampled_from(PRESETS), label="preset")
    scn = api.load_preset(preset)
    fields = draw(st.lists(st.sampled_from(_settable_fields(scn)), min_size=1, max_size=4,
                           unique_by=lambda f: f.path), label="fields")
    for f in fields:
        scn = schema.set_path(scn, f.path, draw(_in_range(f), label=f.path))
    try:
        return preset, schema.validate(scn)
    except ScenarioError as err:  # an in-range value must be accepted
        raise AssertionError(f"in-range overrides were refused: {err}") from None


# ---------------------------------------------------------------------------
# 1. YAML files through the CLI
# ---------------------------------------------------------------------------
@FUZZ
@given(text=st.one_of(yaml_garbage, st.text(max_size=300)))
def test_cli_garbage_yaml_text(capsys, tmp_path, text):
    cli_file(capsys, tmp_path / "garbage.yaml", text, "garbage YAML")


@FUZZ_SMALL
@given(data=st.binary(max_size=400))
def test_cli_binary_file(capsys, tmp_path, data):
    cli_file(capsys, tmp_path / "binary.yaml", data, "binary file")


@FUZZ
@given(tree=nested)
def test_cli_random_nested_structures(capsys, tmp_path, tree):
    text = yaml.safe_dump(tree, allow_unicode=True)
    cli_file(capsys, tmp_path / "nested.yaml", text, "random nested YAML")


@FUZZ
@given(preset=st.sampled_from(PRESETS), path=RANDOM_PATHS, value=WEIRD_VALUES)
def test_cli_preset_with_one_weird_value(capsys, tmp_path, preset, path, value):
    """A real scenario with one value replaced: refused naming that setting, or estimated finitely."""
    scn = schema.set_path(api.load_preset(preset), path, value)
    text = yaml.safe_dump(scn, allow_unicode=True, sort_keys=False)
    top = path.split(".")[0]
    sane = top.isascii() and top.isprintable() and top.strip() == top and top != ""  # YAML keeps it as typed
    line = cli_file(capsys, tmp_path / "weird.yaml", text, f"{preset} with {path}={value!r:.60}",
                    names=(top, str(tmp_path / "weird.yaml")) if sane else ())
    if line is not None and path in BY_PATH and not isinstance(value, (dict, list)):
        assert path in line, f"{path}={value!r:.60} refused without naming {path}: {line}"


NUMBER_CASES = {
    # name: (YAML value of model.params_b, the field the message must name)
    "nan": ".nan", "NaN": ".NaN", "inf": ".inf", "minus_inf": "-.inf",
    "e308_plain": "1e308", "e308_float": "1.0e+308", "minus_e308": "-1.0e+308", "e999": "1.0e+999",
    "int_400_digits": "1" + "0" * 400, "negative": "-5", "negative_tiny": "-1.0e-300", "zero": "0",
    "int_5000_digits": "9" * 5000, "hex_5000_digits": "0x" + "f" * 5000, "bool": "true", "null": "null",
    "list": "[1, 2]", "map": "{a: 1}", "date": "2027-01-01", "text": "seven", "tagged_str": "!!str 7",
}


@pytest.mark.parametrize("case", list(NUMBER_CASES))
def test_cli_bad_numbers(capsys, tmp_path, case):
    text = f"name: numbers\nmodel:\n  params_b: {NUMBER_CASES[case]}\n"
    p = tmp_path / f"{case}.yaml"
    p.write_text(text)
    rc, out, err = run_cli(capsys, ["estimate", str(p), "--format", "json"])
    assert_cli_refused(rc, out, err, f"model.params_b: {NUMBER_CASES[case][:40]}",
                       names=("model.params_b", str(p)))


def _deep_mapping(depth: int, under: str = "") -> str:
    lines = [f"{'  ' * i}k{i}:" for i in range(depth)]
    text = "\n".join(lines) + " 1\n"
    return f"{under}:\n" + "\n".join("  " + ln for ln in text.splitlines()) + "\n" if under else text


STRUCTURE_CASES = {
    "depth_50_mapping": (_deep_mapping(50), ()),
    "depth_50_under_model": (_deep_mapping(50, "model"), ("model",)),
    "depth_5000_flow": ("model: " + "[" * 5000 + "]" * 5000 + "\n", ()),
    "duplicate_top_key": ("name: a\nname: b\n", ("name",)),
    "duplicate_nested_key": ("model:\n  params_b: 7\n  params_b: 8\n", ("params_b",)),
    "duplicate_dotted_and_nested": ("labor:\n  researcher.fte: 1\n  researcher:\n    fte: 2\n", ("researcher.fte",)),
    "alias": ("model: &m\n  params_b: 7\nhardware: *m\n", ()),
    "billion_laughs": (("a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
                        "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n"), ()),
    "merge_key": ("model:\n  <<: {params_b: 7}\n", ()),
    "python_tag": ("name: !!python/object/apply:os.system ['true']\n", ()),
    "python_name": ("name: !!python/name:os.system\n", ()),
    "two_documents": ("name: a\n---\nname: b\n", ()),
    "top_level_list": ("- name\n- model\n", ("scenario",)),
    "top_level_scalar": ("just text\n", ("scenario",)),
    "empty_file": ("", ("scenario",)),
    "only_comments": ("# nothing here\n", ("scenario",)),
    "unknown_section": ("modle:\n  params_b: 7\n", ("modle",)),
    "unknown_stage": ("stages:\n  pretraining: {}\n", ("stages.pretraining",)),
    "unknown_stage_key": ("stages:\n  sft:\n    lora_rnak: 8\n", ("stages.sft.lora_rnak",)),
    "non_text_key": ("model:\n  1: 2\n", ("model",)),
    "null_key": ("model:\n  ~: 2\n", ("model",)),
    "complex_key": ("? [a, b]\n: 1\n", ()),
    "set_key": ("? !!set {a}\n: 1\n", ()),
    "bad_gpu": ("hardware:\n  gpu: h100\n", ("hardware.gpu",)),
    "name_too_long": ("name: " + "x" * 300 + "\n", ("name",)),
    "tab_indent": ("model:\n\tparams_b: 7\n", ()),
    "nul_byte": ("name: a\x00b\n", ()),
    # PyYAML constructors that raise something other than a YAMLError
    "date_day_out_of_range": ("schedule:\n  start_date: 2027-02-30\n", ("schedule.start_date", "start_date")),
    "date_month_13": ("schedule:\n  start_date: 2027-13-01\n", ("schedule.start_date", "start_date")),
    "timestamp_hour_25": ("tags:\n  team: 2027-01-01 25:00:00\n", ("tags.team", "team")),
    "tag_timestamp_garbage": ("tags:\n  team: !!timestamp soon\n", ("tags.team", "team")),
    "tag_bool_maybe": ("storage:\n  finished_weights_only: !!bool maybe\n", ("finished_weights_only",)),
    "tag_int_empty": ("model:\n  layers: !!int ''\n", ("model.layers", "layers")),
    "tag_int_bad_hex": ("model:\n  layers: !!int 0x\n", ("model.layers", "layers")),
    "tag_int_bad_binary": ("model:\n  layers: !!int 0b2\n", ("model.layers", "layers")),
    "tag_float_text": ("model:\n  params_b: !!float seven\n", ("model.params_b", "params_b")),
    "tag_float_empty": ("model:\n  params_b: !!float ''\n", ("model.params_b", "params_b")),
    "tag_set_of_scalar": ("tags: !!set [1]\n", ("tags",)),
    "tag_map_of_scalar": ("model: !!map x\n", ("model",)),
    # what the user typed comes back in the message: it must stay one plain line
    "key_with_newline": ('"mod\\nel": {}\n', ()),
    "key_with_carriage_return": ('stages:\n  sft:\n    "epo\\rchs": 1\n', ()),
    "key_with_escape_sequence": ('"\\e[31mred": 1\n', ()),
    "stage_with_line_separator": ('stages:\n  "s\\u2028ft": {}\n', ()),
    "very_long_explicit_key": ("? " + "k" * 200_000 + "\n: 1\n", ()),
}


@pytest.mark.parametrize("case", list(STRUCTURE_CASES))
def test_cli_bad_structures(capsys, tmp_path, case):
    text, names = STRUCTURE_CASES[case]
    p = tmp_path / f"{case}.yaml"
    p.write_bytes(text.encode("utf-8", "surrogatepass"))
    rc, out, err = run_cli(capsys, ["estimate", str(p), "--format", "json"])
    assert_cli_refused(rc, out, err, case, names=tuple(names) + (str(p),) if names else ())


def test_cli_fifty_megabyte_file_refused_by_size(capsys, tmp_path):
    p = tmp_path / "huge.yaml"
    with open(p, "wb") as fh:
        fh.write(b"name: big\ndescription: ")
        fh.truncate(FIFTY_MB)  # sparse: 50 MB of NUL bytes after a valid start
    rc, out, err = run_cli(capsys, ["estimate", str(p)])
    line = assert_cli_refused(rc, out, err, "50 MB file", names=(str(p),))
    assert "limit" in line, line


ODD_FILE_ARGS = ["/dev/zero", "/nonexistent/scenario.yaml", "no-such-preset", "../../etc/passwd", "/etc/passwd", ".",
                 "", "x" * 5000, "pipeline-70b.yaml"]


@pytest.mark.parametrize("arg", ODD_FILE_ARGS, ids=[a[:20] or "empty" for a in ODD_FILE_ARGS])
def test_cli_odd_file_arguments(capsys, arg):
    rc, out, err = run_cli(capsys, ["estimate", arg, "--format", "json"])
    if rc == 0:
        assert_cli_ok(rc, out, err, arg)
        return
    line = assert_cli_refused(rc, out, err, f"FILE={arg[:40]!r}")
    assert "root:x:0:0" not in line, "file contents echoed"


def test_cli_bad_arguments(capsys):
    for argv in (["estimate"], ["estimate", DEFAULT_PRESET, "--format", "xml"], ["nope"], [],
                 ["estimate", DEFAULT_PRESET, "--set"], ["estimate", DEFAULT_PRESET, "--bogus"]):
        rc, out, err = run_cli(capsys, argv)
        assert_cli_refused(rc, out, err, f"argv={argv}")


@FUZZ_SMALL
@given(scn_preset=valid_scenarios())
def test_cli_valid_files_estimate_finitely(capsys, tmp_path, scn_preset):
    preset, scn = scn_preset
    p = tmp_path / "valid.yaml"
    p.write_text(yamlio.dump_yaml(scn))
    rc, out, err = run_cli(capsys, ["estimate", str(p), "--format", "json"])
    d = assert_cli_ok(rc, out, err, f"valid scenario from {preset}")
    assert d["total_usd"] == costcore.estimate(scn).total_usd


@FUZZ
@given(tree=st.one_of(nested, st.dictionaries(st.sampled_from(TOP_LEVEL_KEYS), nested, max_size=4)))
def test_validate_python_objects(tree):
    """schema.validate on any Python structure: a ScenarioError naming a field, or an idempotent result."""
    try:
        out = schema.validate(tree)
    except ScenarioError as err:
        assert err.path, f"ScenarioError without a field: {err}"
        return
    except Exception as exc:  # noqa: BLE001 - validate promises to raise nothing else
        raise AssertionError(f"schema.validate raised {type(exc).__name__}: {str(exc)[:200]}") from None
    assert schema.validate(out) == out
    assert_estimates_finite(out, "validated structure")


@pytest.mark.parametrize("value", [10**400, 10**5000, -10**5000, 2**20000], ids=["1e400", "1e5000", "-1e5000", "2^20000"])
def test_validate_huge_python_ints(value):
    with pytest.raises(ScenarioError) as info:
        schema.validate({"model": {"params_b": value}})
    assert_scenario_error(info.value, "huge int", names=("model.params_b",))


# ---------------------------------------------------------------------------
# 2. --set values
# ---------------------------------------------------------------------------
SET_VALUE_TEXT = st.one_of(
    st.text(max_size=30), yaml_garbage,
    st.sampled_from(["nan", ".nan", "inf", "-inf", ".inf", "1e999", "-1e999", "1e308", "-1", "0", "-0", "1e-400",
                     "", " ", "[1, 2]", "{a: 1}", "true", "null", "~", "2027-02-30", "2027-01-01", "lora", "h100-80gb",
                     "9" * 5000, "0x" + "f" * 5000, "!!int abc", "!!float x", "!!python/object:os.system x",
                     "&a 1", "*a", "1_000", "190:20:30", "0b101", "'7'", "7 # comment", "a\nb", "\x1b[2J"]),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers().map(str),
)


def _set_names(key: str) -> tuple:
    k = key.partition("=")[0].strip()  # the CLI splits the item at its first "="
    first = k.split(".")[0]
    return tuple(x for x in ("--set", k, first, repr(k)[1:-1], repr(first)[1:-1]) if x)


@FUZZ
@given(key=RANDOM_PATHS, value=SET_VALUE_TEXT)
def test_cli_set_random_keys_and_values(capsys, key, value):
    rc, out, err = run_cli(capsys, ["estimate", DEFAULT_PRESET, "--set", f"{key}={value}",
                                             "--format", "json"])
    if rc in (0, 3):
        assert_cli_ok(rc, out, err, f"--set {key}={value!r:.60}")
    else:
        assert_cli_refused(rc, out, err, f"--set {key}={value!r:.60}", names=_set_names(key))


@FUZZ
@given(data=st.data())
def test_cli_set_valid_keys_with_in_range_values(capsys, data):
    """--set on a real field with an in-range value always succeeds and matches the API."""
    preset = data.draw(st.sampled_from(PRESETS), label="preset")
    base = api.load_preset(preset)
    f = data.draw(st.sampled_from(_settable_fields(base)), label="field")
    text = data.draw(_field_value_text(f), label="value")
    rc, out, err = run_cli(capsys, ["estimate", preset, "--set", f"{f.path}={text}", "--format", "json"])
    d = assert_cli_ok(rc, out, err, f"{preset} --set {f.path}={text}")
    expected = costcore.estimate(schema.validate(schema.set_value(base, f.path, schema.coerce_text(
        f.path, yamlio.parse_yaml(text)))))  # the one rule of --set, links and the pages (a size brings its shape)
    assert d["total_usd"] == expected.total_usd


SET_CASES = [
    ("model.params_b", ".nan"), ("model.params_b", "inf"), ("model.params_b", "1e999"), ("model.params_b", "-5"),
    ("model.params_b", "1" + "0" * 400), ("model.layers", "9" * 5000), ("model.layers", "nan"),
    ("model.layers", "1.5"), ("hardware.gpu", "h100"), ("stages.sft.method", "lorax"),
    ("schedule.start_date", "2027-02-30"), ("schedule.start_date", "2027-13-01"), ("model.layers", "!!int abc"),
    ("model.params_b", "!!float seven"), ("storage.finished_weights_only", "!!bool maybe"),
    ("stages.sft", "1"), ("stages.nope.epochs", "1"), ("nope", "1"), ("model.params_b.x", "1"),
    ("model", "[1]"), ("name", "x" * 300), ("name.x", "1"), ("model.params_b", ""), ("model.params_b", "*a"),
    ("mod\nel.params_b", "7"), ("stages.sft.epo\rchs", "1"), ("\x1b[31mmodel", "1"),
]


@pytest.mark.parametrize("key,value", SET_CASES, ids=[f"{k[:20]}={v[:12]}" for k, v in SET_CASES])
def test_cli_set_bad_values(capsys, key, value):
    rc, out, err = run_cli(capsys, ["estimate", DEFAULT_PRESET, "--set", f"{key}={value}"])
    assert_cli_refused(rc, out, err, f"--set {key!r}={value[:40]!r}", names=_set_names(key))


def test_cli_set_malformed(capsys):
    for item in ("noequals", "=5", ".=5", "a..b=1", "model.=1", " =1"):
        rc, out, err = run_cli(capsys, ["estimate", DEFAULT_PRESET, "--set", item])
        assert_cli_refused(rc, out, err, f"--set {item!r}", names=("--set",))


# ---------------------------------------------------------------------------
# 3. The process-level contract (real subprocesses)
# ---------------------------------------------------------------------------
def _run_process(args, timeout=NEVER_S):
    """python -m costcore ARGS; the timeout only stops a hang (speed is benchmarks/bench_refusal.py's job)."""
    proc = subprocess.run([sys.executable, "-m", "costcore", *args], cwd=ROOT, capture_output=True, check=False,
                          timeout=timeout, env=dict(os.environ, PYTHONWARNINGS="ignore"))
    return proc


@pytest.mark.parametrize("case", ["nan", "date_day_out_of_range", "int_5000_digits", "key_with_newline",
                                  "fifty_mb", "binary", "set_nan", "set_bad_date", "unknown_preset"])
def test_subprocess_contract(tmp_path, case):
    p = tmp_path / "scenario.yaml"
    args = ["estimate", str(p)]
    if case == "nan":
        p.write_text("model:\n  params_b: .nan\n")
    elif case == "date_day_out_of_range":
        p.write_text(STRUCTURE_CASES["date_day_out_of_range"][0])
    elif case == "int_5000_digits":
        p.write_text("model:\n  params_b: " + "9" * 5000 + "\n")
    elif case == "key_with_newline":
        p.write_text(STRUCTURE_CASES["key_with_newline"][0])
    elif case == "fifty_mb":
        with open(p, "wb") as fh:
            fh.write(b"name: big\n")
            fh.truncate(FIFTY_MB)
    elif case == "binary":
        p.write_bytes(bytes(range(256)) * 4)
    elif case == "set_nan":
        args = ["estimate", DEFAULT_PRESET, "--set", "model.params_b=nan"]
    elif case == "set_bad_date":
        args = ["estimate", DEFAULT_PRESET, "--set", "schedule.start_date=2027-02-30"]
    elif case == "unknown_preset":
        args = ["estimate", "../../etc/passwd-preset"]
    proc = _run_process(args)
    err = proc.stderr.decode("utf-8", "replace")
    assert proc.returncode == 2, f"{case}: exit code {proc.returncode}; stderr tail: {err[-600:]!r}"
    assert "Traceback" not in err, f"{case}: traceback on stderr: {err[-600:]}"
    assert proc.stdout == b"", proc.stdout[:200]
    assert err.endswith("\n") and err.count("\n") == 1, f"{case}: stderr is not one line: {err[:400]!r}"
    assert_plain_message(err[:-1], case)


def test_subprocess_valid_file_succeeds(tmp_path):
    p = tmp_path / "ok.yaml"
    p.write_text(yamlio.dump_yaml(api.load_preset("llama3-8b")))
    proc = _run_process(["estimate", str(p), "--format", "json"], timeout=NEVER_S)
    assert proc.returncode == 0, proc.stderr.decode()[-600:]
    assert_finite(json.loads(proc.stdout, parse_constant=_reject_constant))


@pytest.mark.parametrize("fmt_", ["table", "csv", "json"])
def test_subprocess_name_with_lone_surrogate(tmp_path, fmt_):
    """YAML can spell a lone surrogate ("\\ud800"); it cannot be printed as UTF-8. Either the name
    is refused (exit 2, one line) or every output format prints (exit 0); never a traceback."""
    p = tmp_path / "surrogate.yaml"
    p.write_text('name: "half \\ud800 a pair"\nmodel: {params_b: 7}\nstages: {sft: {}}\n')
    proc = _run_process(["estimate", str(p), "--format", fmt_], timeout=NEVER_S)
    err = proc.stderr.decode("utf-8", "replace")
    assert "Traceback" not in err, f"--format {fmt_}: {err[-500:]}"
    assert proc.returncode in (0, 2), f"--format {fmt_}: exit code {proc.returncode}: {err[-500:]}"
    if proc.returncode == 2:
        assert err.count("\n") == 1 and "name" in err, err


# ---------------------------------------------------------------------------
# 4. URL query parameters
# ---------------------------------------------------------------------------
URL_KEYS = st.one_of(
    st.sampled_from(ALL_PATHS), st.sampled_from(ALL_PATHS).map(lambda p: p + ".x"),
    st.sampled_from(["p", "name", "description", "stages.sft", "stages.pretrain", "stages.nope", "stages.sft.enabled",
                     "model", "stages", "", ".", "..", "p ", "P", "__proto__", "constructor"]),
    st.sampled_from([f"stages.{s}" for s in STAGES]),
    st.text(max_size=30), st.text(min_size=61, max_size=200),
)
URL_VALUES = st.one_of(
    st.text(max_size=40), yaml_garbage, st.text(min_size=201, max_size=2000),
    st.sampled_from(["on", "off", "ON", "", " ", "nan", "inf", "-1", "0", "1e999", "1" + "0" * 400, "9" * 199,
                     "../../etc/passwd", "/etc/passwd", "..\\..\\windows\\win.ini", "file:///etc/passwd",
                     "pipeline-70b", "llama3-8b", "PIPELINE-70B", "pipeline-70b\x00", "presets/pipeline-70b.yaml",
                     "2027-02-30", "2027-13-01", "!!int abc", "!!float x", "!!bool maybe", "!!timestamp x",
                     "!!python/object:os.system x", "&a [*a]", "<script>alert(1)</script>", "\u202e", "x" * 100_000]),
    st.floats(allow_nan=True, allow_infinity=True).map(repr), st.integers().map(str),
)


@st.composite
def url_params(draw):
    params: dict[str, str] = {}
    n = draw(st.integers(0, 12), label="n")
    for _ in range(n):
        key = draw(URL_KEYS, label="key")
        if key in BY_PATH and draw(st.booleans(), label="in range"):
            value = draw(_field_value_text(BY_PATH[key]), label="value")
        else:
            value = draw(URL_VALUES, label="value")
        params[key] = value
    return params


def _check_decoded(params: dict, default: str = DEFAULT_PRESET):
    try:
        out = share.decode(params, default)
    except Exception as exc:  # noqa: BLE001 - decode must never raise
        bad = {k[:40]: v[:40] for k, v in params.items()}
        raise AssertionError(f"share.decode raised {type(exc).__name__}: {exc} for {bad}") from None
    assert isinstance(out, tuple) and len(out) == 3, out
    scn, preset, warnings = out
    assert preset in PRESETS, f"decoded preset {preset!r} is not a preset name"
    assert schema.validate(scn) == scn, "decode returned a scenario that validate() changes"
    assert schema.validate(schema.validate(scn)) == schema.validate(scn)
    assert isinstance(warnings, list) and all(isinstance(w, str) for w in warnings), warnings
    for w in warnings:
        if w.startswith("The link has "):  # the only warning about the link as a whole
            continue
        assert any(k[:60] in w for k in params), f"the warning {w[:200]!r} names no parameter of the link"
    assert_estimates_finite(scn, "decoded link")
    return scn, preset, warnings


@FUZZ
@given(params=url_params(), default=st.sampled_from(PRESETS))
def test_url_decode_random_params(params, default):
    _check_decoded(params, default)


@FUZZ_SMALL
@given(params=st.dictionaries(st.text(max_size=20), st.text(max_size=50), max_size=20))
def test_url_decode_random_text_dicts(params):
    _check_decoded(params)


URL_CASES = {
    "traversal_preset": {"p": "../../etc/passwd"},
    "absolute_preset": {"p": "/etc/passwd"},
    "preset_file_path": {"p": "presets/pipeline-70b.yaml"},
    "preset_with_nul": {"p": "pipeline-70b\x00"},
    "long_preset": {"p": "a" * 100_000},
    "long_value": {"model.params_b": "7" * 100_000},
    "long_name": {"name": "n" * 100_000},
    "long_key": {"k" * 100_000: "1"},
    "unicode": {"name": "名前 \U0001F600 \u202e", "model.params_b": "７"},
    "nan": {"model.params_b": "nan", "hardware.num_gpus": ".inf"},
    "negative": {"model.params_b": "-5", "stages.sft.epochs": "-1"},
    "huge_int": {"model.params_b": "1" + "0" * 190},
    "bad_stage_switch": {"stages.sft": "maybe", "stages.nope": "on", "stages.sft.enabled": "false"},
    "date_day_out_of_range": {"schedule.start_date": "2027-02-30"},
    "timestamp_hour_25": {"tags.team": "2027-01-01 25:00:00"},
    "tag_int_garbage": {"stages.sft.epochs": "!!int abc"},
    "tag_float_garbage": {"model.params_b": "!!float seven"},
    "tag_bool_garbage": {"storage.finished_weights_only": "!!bool maybe"},
    "tag_set_scalar": {"tags.team": "!!set [1]"},
    "tag_timestamp_garbage": {"schedule.start_date": "!!timestamp soon"},
    "alias": {"model.params_b": "&a 1"},
    "thousand_params": {f"x{i}": str(i) for i in range(1000)},
    "thousand_valid_params": {"p": "llama3-8b", **{f"model.params_b{'' if i == 0 else '.' + str(i)}": "8"
                                                   for i in range(1000)}},
}


@pytest.mark.parametrize("case", list(URL_CASES))
def test_url_decode_cases(case):
    params = URL_CASES[case]
    _, preset, warnings = _check_decoded(params)
    if case in ("traversal_preset", "absolute_preset", "preset_file_path", "preset_with_nul", "long_preset"):
        assert preset == DEFAULT_PRESET
        assert any("URL parameter p" in w for w in warnings), warnings
    if case.startswith("thousand"):
        assert any(w.startswith("The link has 1") for w in warnings), warnings[:3]


@pytest.mark.parametrize("preset_param", ["../../etc/passwd", "/etc/passwd", "..%2F..%2Fetc%2Fpasswd",
                                          "presets/../../etc/passwd", "~/.ssh/id_rsa"])
def test_url_decode_opens_no_file_outside_presets(monkeypatch, preset_param):
    opened: list[str] = []

    def recorder(orig, label):
        def wrapper(file, *args, **kwargs):
            if isinstance(file, (str, bytes, os.PathLike)):
                opened.append(f"{label}:{os.fsdecode(file)}")
            return orig(file, *args, **kwargs)
        return wrapper

    def path_recorder(orig, label):
        def wrapper(self, *args, **kwargs):
            opened.append(f"{label}:{self}")
            return orig(self, *args, **kwargs)
        return wrapper

    from costcore.scenario import loaders
    monkeypatch.setattr(loaders, "_PRESET_MEMO", {})  # the preset file is read now, not served from memory
    monkeypatch.setattr(builtins, "open", recorder(builtins.open, "open"))
    monkeypatch.setattr(io, "open", recorder(io.open, "io.open"))
    monkeypatch.setattr(os, "open", recorder(os.open, "os.open"))
    for name in ("read_bytes", "read_text", "open"):
        monkeypatch.setattr(pathlib.Path, name, path_recorder(getattr(pathlib.Path, name), f"Path.{name}"))
    _, preset, warnings = share.decode({"p": preset_param}, DEFAULT_PRESET)
    monkeypatch.undo()
    assert preset == DEFAULT_PRESET
    assert any("URL parameter p" in w for w in warnings), warnings
    outside = [o for o in opened if not Path(o.split(":", 1)[1]).resolve().is_relative_to(PRESET_DIR)]
    assert not outside, f"decode of p={preset_param!r} opened files outside presets/: {outside}"
    assert opened, "the recorder saw no file at all (the default preset must have been read)"


# ---------------------------------------------------------------------------
# 5. Uploaded scenarios
# ---------------------------------------------------------------------------
def _load_upload(data, what: str):
    try:
        scn = costcore.load_yaml_text(data, what="upload")
    except ScenarioError as err:
        assert_scenario_error(err, what)
        return None
    except Exception as exc:  # noqa: BLE001 - the app only catches ScenarioError
        raise AssertionError(f"{what}: load_yaml_text raised {type(exc).__name__}: {exc}") from None
    assert_estimates_finite(scn, what)
    return scn


@FUZZ
@given(data=st.one_of(st.binary(max_size=600), yaml_garbage.map(lambda s: s.encode("utf-8", "surrogatepass")),
                      nested.map(lambda t: yaml.safe_dump(t, allow_unicode=True).encode())))
def test_upload_random_bytes(data):
    _load_upload(data, "upload of random bytes")


@pytest.mark.parametrize("case", list(STRUCTURE_CASES))
def test_upload_bad_structures(case):
    _load_upload(STRUCTURE_CASES[case][0].encode("utf-8", "surrogatepass"), f"upload {case}")


@pytest.mark.parametrize("kind", ["bytes", "str"])
def test_upload_fifty_megabytes_refused_fast(kind):
    blob = b"name: big\ndescription: " + b"x" * (FIFTY_MB - 23)
    data = blob if kind == "bytes" else blob.decode()
    with pytest.raises(ScenarioError) as info:
        costcore.load_yaml_text(data, what="upload")
    assert_scenario_error(info.value, "50 MB upload", names=("upload",))
    assert "limit" in str(info.value)


_CAP = yamlio.MAX_YAML_BYTES
UNDER_CAP_CASES = {
    "flow_list": b"[" + b"1," * (_CAP // 2 - 2) + b"1]",
    "block_list": b"- 1\n" * (_CAP // 4 - 1),
    "many_keys": "".join(f"k{i}: 1\n" for i in range(_CAP // 10)).encode()[: _CAP - 200].rsplit(b"\n", 1)[0] + b"\n",
}


@pytest.fixture
def no_parser(monkeypatch):
    """Make any YAML parse fail loudly: what is refused under this fixture was refused before parsing."""
    def refuse(*_a, **_k):
        raise AssertionError("the YAML parser was started; the limits must refuse this text before parsing")
    monkeypatch.setattr(yamlio, "_StrictLoader", refuse)


@pytest.mark.parametrize("case", list(UNDER_CAP_CASES))
def test_upload_just_under_the_size_cap_is_refused_before_parsing(case, no_parser):
    """A file just under MAX_YAML_BYTES made of many small tokens is not a scenario; the line and item
    limits refuse it on the raw text, so its refusal costs no parse (timings: bench_refusal.py)."""
    data = UNDER_CAP_CASES[case]
    assert len(data) <= _CAP
    with pytest.raises(ScenarioError) as info:
        costcore.load_yaml_text(data, what="upload")
    assert_scenario_error(info.value, case, names=("upload",))


@pytest.mark.parametrize("depth", [13, 100, 5_000])
def test_deep_flow_is_refused_before_parsing(depth, no_parser):
    with pytest.raises(ScenarioError) as info:
        costcore.load_yaml_text("model: " + "[" * depth + "1" + "]" * depth, what="upload")
    assert "nested" in str(info.value)


@pytest.mark.parametrize("text", ["name: '[[[[[[[[[[[[[[[['\n", "# [[[[[[[[[[[[[[[[[[[[\nname: x\n",
                                  'name: "{{{{{{{{{{{{{{{{{{{{{{"\n'])
def test_brackets_in_quotes_and_comments_do_not_count_as_depth(text):
    assert costcore.load_yaml_text(text.encode())["name"] in ("x", "[" * 16, "{" * 22)


# ---------------------------------------------------------------------------
# 6. Export then import is exact
# ---------------------------------------------------------------------------
@FUZZ
@given(scn_preset=valid_scenarios(), other=st.sampled_from(PRESETS))
def test_yaml_and_share_link_round_trips_are_exact(scn_preset, other):
    preset, scn = scn_preset
    total = costcore.estimate(scn).total_usd
    assert math.isfinite(total)
    # YAML download -> upload
    back = costcore.load_yaml_text(yamlio.dump_yaml(scn).encode("utf-8"), what="upload")
    assert back == scn, "YAML export/import changed the scenario"
    assert costcore.estimate(back).total_usd == total
    assert costcore.estimate(back).to_dict() == costcore.estimate(scn).to_dict()
    # share link -> opened in a session whose default preset is another one
    params = share.encode(scn, preset)
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in params.items())
    scn2, preset2, warnings = share.decode(params, other)
    assert warnings == [], warnings
    assert preset2 == preset
    assert costcore.estimate(scn2).total_usd == total, f"share link total differs: {params}"
    assert scn2 == scn, f"share link changed the scenario: {params}"
    # ... and through a real query string
    from urllib.parse import parse_qsl
    scn3, _, warnings3 = share.decode(dict(parse_qsl(share.query_string(params), keep_blank_values=True)), other)
    assert warnings3 == [] and costcore.estimate(scn3).total_usd == total


TEXT_FIELD_VALUES = ["123", "1.5", "yes", "no", "on", "null", "~", "", "2026-01-01", "[a]", "a: b", "#x", "  padded ",
                     "x" * 100]


@pytest.mark.parametrize("path", [f.path for f in PLAN_FIELDS if f.kind == "str"] + ["name"])
def test_share_link_round_trips_text_fields(path):
    """Text settings (tags, the name) survive the share link whatever they look like."""
    base = api.load_preset(DEFAULT_PRESET)
    lost = []
    for text in TEXT_FIELD_VALUES:
        scn = schema.validate(schema.set_path(base, path, text))
        back, _, warnings = share.decode(share.encode(scn, DEFAULT_PRESET), "llama3-8b")
        if back != scn or warnings:
            lost.append((text, schema.get_path(back, path), warnings[:1]))
        yback = costcore.load_yaml_text(yamlio.dump_yaml(scn))
        assert yback == scn, f"YAML round trip of {path}={text!r} gave {schema.get_path(yback, path)!r}"
    assert not lost, f"{path}: values the share link does not reproduce (sent, received, warning): {lost}"


# ---------------------------------------------------------------------------
# 7. Escaping in the app
# ---------------------------------------------------------------------------
EVIL_NAME = "<script>alert(1)</script> ![x](http://example.invalid/a.png) **bold**"
EVIL_KEY = "![y](http://example.invalid/b.png)"
MARKDOWN_KINDS = ("markdown", "caption", "warning", "error", "info", "success", "title", "header", "subheader",
                  "latex", "text")
APP_PAGES = ["pages/overview.py", "pages/budget.py", "pages/compare.py", "pages/sensitivity.py"]


@pytest.fixture(scope="module")
def _quiet_apptest():
    logging.getLogger("streamlit.runtime.scriptrunner_utils.script_run_context").setLevel(logging.ERROR)


def _markdown_bodies(at) -> list[tuple[str, str]]:
    out = []
    for kind in MARKDOWN_KINDS:
        for el in at.get(kind):
            for attr in ("value", "body", "label"):
                v = getattr(el, attr, None)
                if isinstance(v, str) and v:
                    out.append((kind, v))
                    break
    return out


@pytest.mark.parametrize("page,tab", page_views(APP_PAGES))
def test_app_shows_a_hostile_name_inert(_quiet_apptest, page, tab):
    from streamlit.testing.v1 import AppTest
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=NEVER_S)
    at.query_params["name"] = EVIL_NAME
    at.query_params[EVIL_KEY] = "1"
    at.run()
    if page == APP_PAGES[0]:  # messages are shown once, on the first run of the first page a session opens
        warned = [v for k, v in _markdown_bodies(at) if k == "warning" and "example.invalid/b.png" in v]
        assert warned, "the unknown URL parameter is not reported"
    else:
        at.switch_page(page)
        at.run()
    open_tab(at, page, tab)
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state["scenario"]["name"] == EVIL_NAME
    bodies = _markdown_bodies(at)
    raw = [(k, v[:160]) for k, v in bodies if "<script" in v.lower() or "![x](" in v or "![y](" in v]
    assert not raw, f"unescaped HTML/markdown from the URL reaches markdown elements on {page}: {raw}"
    shown = [k for k, v in bodies if "alert" in v and "example.invalid/a.png" in v]
    assert shown, f"the scenario name is not shown at all on {page}"


@pytest.mark.parametrize("query", [{"schedule.start_date": "2027-02-30"}, {"stages.sft.epochs": "!!int abc"}],
                         ids=["bad-date", "bad-int-tag"])
def test_app_survives_bad_url_values(_quiet_apptest, query):
    """The app, opened with such a link, warns and renders (share.decode must not raise)."""
    from streamlit.testing.v1 import AppTest
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=NEVER_S)
    for k, v in query.items():
        at.query_params[k] = v
    at.run()
    assert not at.exception, f"{query}: the app shows an exception: {[e.value[:200] for e in at.exception]}"
    key = next(iter(query))
    assert any(key in w.value.replace("\\", "") for w in at.warning), [w.value for w in at.warning]


def test_a_size_column_beyond_the_shapes_depth_limit_names_the_size_not_the_layers():
    """A size column on a stated shape moves its depth (80 layers at 70.6B); past the schema's 1,000 layers a
    sweep evaluated 5,666 layers silently and an estimate at that size blamed model.layers, which the user never
    set. Both now name model.params_b and the largest size the shape reaches; the solver stops there."""
    import numpy as np

    from costcore import api
    from costcore.scenario import schema
    scn = schema.validate(api.load_preset("pipeline-70b"))
    top = schema.largest_size_for_depth(80, 70.6)
    assert schema.layers_for_size(80, 70.6, top) == 1000
    api.batch(scn, {"model.params_b": np.array([70.6, top])})  # at the edge: evaluated
    for call in (lambda: api.batch(scn, {"model.params_b": np.array([70.6, 5000.0])}),
                 lambda: schema.with_size(scn, 5000.0)):
        with pytest.raises(ScenarioError) as e:
            call()
        assert e.value.field == "model.params_b" and f"{top:,.4g} billion" in str(e.value)
    assert schema.largest_size_for_depth(0, 70.6) == schema.BY_PATH["model.params_b"].hi  # no shape stated


@pytest.mark.parametrize("preset, change", [("vertical-7b-lora", {"params_b": 500}),
                                            ("pipeline-70b", {"hidden": 100000}),
                                            ("pipeline-70b", {"ffn": 1000})])
def test_a_size_the_given_shape_cannot_hold_gets_one_sentence(preset, change):
    """A dense model's size and whole shape, both given, must agree (1.5x above the shape, a third below): the
    FLOPs follow the size and the step the shape, so a 7B shape called 500B printed an MFU of 2,941%. The
    sentence names model.params_b and the shape's own count; the shipped presets and configs all agree."""
    from costcore.scenario import schema
    scn = costcore.load_preset(preset)
    scn["model"].update(change)
    with pytest.raises(costcore.ScenarioError) as err:
        costcore.estimate(scn)
    assert err.value.field == "model.params_b" and "the shape given" in str(err.value)
    assert "B parameters, not" in str(err.value) or "T parameters, not" in str(err.value)
    ok = costcore.load_preset(preset)
    assert schema.validate(schema.resize_model(ok, 500.0))  # the size slider drops the shape: never refused


def test_a_measured_rate_above_the_gpus_peak_gets_one_sentence():
    """A stage's tflops_per_gpu sets its MFU (tflops / peak): 5,000 on an H100 (989 BF16, 1,979 FP8) gave 505%."""
    scn = {"hardware": {"gpu": "h100-80gb"}, "stages": {"dpo": {"tflops_per_gpu": 5000}}}
    with pytest.raises(costcore.ScenarioError) as err:
        costcore.estimate(scn)
    assert err.value.field == "stages.dpo.tflops_per_gpu" and "989" in str(err.value)
    fp8 = {"hardware": {"gpu": "h100-80gb", "precision": "fp8"}, "stages": {"dpo": {"tflops_per_gpu": 1500}}}
    # accepted up to the FP8 peak; the MFU stays quoted against the BF16 peak, as every stage's is
    assert costcore.estimate(fp8).stat("dpo", "mfu") == pytest.approx(1500 / 989)


@pytest.mark.parametrize("preset", ["vertical-7b-lora", "scratch-7b"])
def test_more_active_parameters_than_the_model_has_get_one_sentence(preset):
    """FLOPs follow model.active_params_b and the step the model's shape: 20B active on the 6.74B shape of the
    vertical preset printed an MFU of 119% (a random sweep of three fields found it). Refused, naming the field
    and the size; all active is accepted, and a batch column asking for more counts all of them."""
    from costcore.scenario import schema
    scn = costcore.load_preset(preset)
    size = float(schema.effective_value(scn, "model.params_b"))
    scn["model"]["active_params_b"] = 3 * size
    with pytest.raises(costcore.ScenarioError) as err:
        costcore.estimate(scn)
    assert err.value.field == "model.active_params_b" and "cannot exceed" in str(err.value)
    assert f"{size:g}B" in str(err.value)
    scn["model"]["active_params_b"] = size
    every = costcore.estimate(scn)
    scn["model"].pop("active_params_b")
    assert every.total_usd == costcore.estimate(scn).total_usd
    rows = costcore.batch(scn, {"model.active_params_b": [3 * size, size]})  # per row: stage totals
    assert rows[0].sum() == rows[1].sum() == pytest.approx(every.total_usd, rel=1e-9)


def test_an_fp8_peak_above_twice_the_bf16_one_gets_one_sentence():
    """An FP8 job runs its matmuls at the FP8 peak and quotes its MFU against the BF16 one: an H100 with its BF16
    peak lowered to 100 TFLOP/s and its FP8 peak left at 1,979 printed an MFU of 370% (a random sweep found it).
    Refused in FP8, naming the FP8 peak and the limit; in BF16 the FP8 peak is not used and nothing is refused."""
    scn = {"hardware": {"gpu": "h100-80gb", "precision": "fp8", "peak_tflops": 100}, "stages": {"pretrain": {}}}
    with pytest.raises(costcore.ScenarioError) as err:
        costcore.estimate(scn)
    assert err.value.field == "hardware.fp8_peak_tflops" and "more than twice the BF16 peak of 100" in str(err.value)
    scn["hardware"]["fp8_peak_tflops"] = 200
    assert costcore.estimate(scn).stat("pretrain", "mfu") < 2.0 * 0.9
    scn["hardware"].update(precision="bf16", fp8_peak_tflops=1979)
    assert costcore.estimate(scn).stat("pretrain", "mfu") < 1.0


@pytest.mark.parametrize("key", ["0\n", "model\n", "pipeline-70b\n"])
def test_a_key_ending_in_a_newline_is_quoted_on_one_line(key):
    """A regex "$" matches before a final newline: "0\\n" passed as a plain key and split the message over two lines."""
    with pytest.raises(ScenarioError) as err:
        schema.validate({key: 1})
    assert "\n" not in str(err.value) and repr(key)[1:-1] in str(err.value)
    with pytest.raises(ScenarioError):
        costcore.load_preset(key)


def test_a_whole_number_box_refuses_a_huge_or_fractional_value_in_words():
    """"GPUs for this stage" read 1e30 as 1 GPU and 2e3 as 2 (the browser's integer box parses with parseInt), made
    the plan infeasible and put num_gpus=1 in the link, without a word. The box takes any number: 2e3 is 2,000,
    1e30 and 2.5 are refused in a sentence naming the range, and the last good value stays."""
    from shared import app_on
    at = app_on("pages/pretraining.py", p="pipeline-70b")
    box = next(n for n in at.number_input if n.label == "GPUs for this stage (0 = sidebar value)")
    assert isinstance(box.value, float)
    box.set_value(2e3).run()
    assert at.session_state["scenario"]["stages"]["pretrain"]["num_gpus"] == 2000
    for bad in (1e30, 2.5):
        box = next(n for n in at.number_input if n.label == "GPUs for this stage (0 = sidebar value)")
        box.set_value(bad).run()
        assert not at.exception
        assert at.session_state["scenario"]["stages"]["pretrain"]["num_gpus"] == 2000
        said = " ".join(w.value for w in at.warning) + " ".join(e.value for e in at.error)
        assert "must be a whole number from 0 to 1,000,000" in said and "the last good value stays" in said, said
