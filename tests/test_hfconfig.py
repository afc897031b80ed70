"""Model shapes from Hugging Face config.json files, shipped configs and family tables.

- Every shipped config parses, and its computed size is within 3% of the published one.
- The key spellings of GPT-2, GPT-NeoX, Falcon, OPT and multimodal wrappers are read.
- family_shape gives Llama-like shapes (7-8B: 32 x 4096; 70B: 80 x 8192) within 5% of the
  request over 0.1-2,000 B, and consistent MoE shapes.
- read_hf_config gives one answer for a path, a directory, pasted text and a shipped name,
  and never fetches a link.
- Bad input only ever raises ScenarioError, whose sentence names the key.
- The module stays light: no numpy, numba or pandas.
"""
from __future__ import annotations

import copy
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from costcore.errors import ScenarioError
from costcore.scenario import hfconfig as H
from costcore.scenario.hfconfig import (MODEL_KEYS, family_shape, parse_hf_config, read_hf_config,
                                        shape_params, shipped_configs)
from server_support import NEVER_S  # the one wait limit of the suite (not a speed)

try:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st
except ImportError:  # the fuzz tests below need hypothesis (requirements-dev.txt)
    st = None

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = ROOT / "costcore" / "data" / "hf_configs"
SOURCES = yaml.safe_load((CONFIGS / "SOURCES.yaml").read_text(encoding="utf-8"))["configs"]
NAMES = sorted(SOURCES)
MOE = [n for n in NAMES if "active_b" in SOURCES[n]]


def _cfg(name: str) -> dict:
    return json.loads((CONFIGS / f"{name}.json").read_text(encoding="utf-8"))


def _rel(a: float, b: float) -> float:
    return abs(a / b - 1.0)


# ----------------------------------------------------------------------------------------------
# Shipped configs
# ----------------------------------------------------------------------------------------------

def test_sources_list_exactly_the_shipped_files():
    files = sorted(p.stem for p in CONFIGS.glob("*.json"))
    assert files == NAMES
    assert 20 <= len(NAMES) <= 40  # issue 14 asked for about 15, issue 15 for about 20 fine-tuning targets
    for name, row in SOURCES.items():
        assert re.fullmatch(r"[a-z0-9][a-z0-9.-]*", name), name
        assert row["label"] and re.fullmatch(r"[\w.-]+/[\w.-]+", row["repo"]), name
        assert row["params_b"] > 0 and row["published"], name
        assert str(row["checked"]) in ("2026-12-01", "2026-12-02", "2026-12-06"), name  # the dates the configs were copied


def test_data_files_read_the_same_with_pyyaml_and_with_the_stdlib_reader():
    """The data files are YAML's JSON subset, so the light module reads them without PyYAML."""
    for path in (CONFIGS / "SOURCES.yaml", H.FAMILIES_FILE):
        assert H._data_json(str(path)) == yaml.safe_load(path.read_text(encoding="utf-8")), path.name


@pytest.mark.parametrize("name", NAMES)
def test_shipped_config_is_within_3_percent_of_its_published_size(name):
    model = parse_hf_config((CONFIGS / f"{name}.json").read_text(encoding="utf-8"))
    assert list(model) == list(MODEL_KEYS + H.ATTENTION_KEYS + H.ROUTING_KEYS)
    assert all(type(model[k]) is int for k in MODEL_KEYS[2:]) and type(model["sliding_window_share"]) is float
    assert isinstance(model["params_b"], float) and isinstance(model["active_params_b"], float)
    row = SOURCES[name]
    assert _rel(model["params_b"], row["params_b"]) <= 0.03, (model["params_b"], row["params_b"])
    if "active_b" in row:
        assert model["experts"] >= 2 and 0 < model["experts_active"] <= model["experts"]
        assert _rel(model["active_params_b"], row["active_b"]) <= 0.03, (model["active_params_b"], row["active_b"])
        assert model["active_params_b"] < model["params_b"]
    else:
        assert model["experts"] == model["moe_ffn"] == 0
        assert model["active_params_b"] == model["params_b"]


@pytest.mark.parametrize("name, total, active", [
    ("llama-3.1-8b", 8.03, None), ("llama-3.1-70b", 70.6, None), ("llama-3.1-405b", 405.9, None),
    ("mixtral-8x7b", 46.7, 12.9), ("deepseek-v3", 671.0, 37.0), ("qwen3-30b-a3b", 30.5, 3.3),
])
def test_headline_sizes(name, total, active):
    model = shipped_configs()[name]["model"]
    assert _rel(model["params_b"], total) <= 0.03
    if active:
        assert _rel(model["active_params_b"], active) <= 0.03


def test_shipped_shapes_use_the_planner_keys():
    got = {n: v["model"] for n, v in shipped_configs().items()}
    assert {k: got["llama-3.1-8b"][k] for k in ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "gated")} \
        == {"layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "ffn": 14336, "vocab": 128256, "gated": 1}
    mix = got["mixtral-8x7b"]
    assert (mix["experts"], mix["experts_active"], mix["shared_experts"], mix["moe_ffn"]) == (8, 2, 0, 14336)
    ds = got["deepseek-v3"]
    assert (ds["experts"], ds["experts_active"], ds["shared_experts"], ds["moe_ffn"], ds["ffn"]) \
        == (256, 8, 1, 2048, 18432)
    assert got["qwen1.5-moe-a2.7b"]["shared_experts"] == 4  # shared_expert_intermediate_size 5632 = 4 x 1408
    assert got["gemma-2-9b"]["gated"] == 1 and got["gemma-2-9b"]["heads"] == 16  # GeGLU, head_dim 256
    assert got["gpt2"]["gated"] == got["pythia-6.9b"]["gated"] == got["opt-1.3b"]["gated"] == 0
    assert got["gpt2"]["ffn"] == 4 * 768  # n_inner null = 4 x n_embd
    assert got["llama-2-7b"]["kv_heads"] == 32 and got["qwen2.5-7b"]["kv_heads"] == 4


def test_shipped_configs_carry_label_and_source_and_are_copies():
    a = shipped_configs()
    assert set(a) == set(NAMES)
    for name, v in a.items():
        assert v["label"] == SOURCES[name]["label"]
        assert SOURCES[name]["repo"] in v["source"] and f"checked {SOURCES[name]['checked']}" in v["source"]
    a["llama-3.1-8b"]["model"]["layers"] = 1
    assert shipped_configs()["llama-3.1-8b"]["model"]["layers"] == 32


def test_shape_params_of_an_untied_dense_model_matches_the_parse():
    """The 13 keys alone reproduce the count when the config needs no extra detail."""
    for name in ("llama-3.1-8b", "llama-3.1-70b", "mistral-7b-v0.1", "mixtral-8x7b"):
        m = shipped_configs()[name]["model"]
        total, active = shape_params(m)
        assert _rel(total, m["params_b"]) < 1e-4 and _rel(active, m["active_params_b"]) < 1e-4, name


def test_shape_params_details_refine_the_count():
    base = {"layers": 16, "hidden": 2048, "heads": 32, "kv_heads": 8, "ffn": 8192, "vocab": 128256, "gated": 1}
    untied, _ = shape_params(base)
    tied, _ = shape_params({**base, "tie_embeddings": 1})
    assert math.isclose(untied - tied, 128256 * 2048 / 1e9)
    assert math.isclose(tied, 1.2358144, rel_tol=1e-6)  # Llama-3.2-1B: 1,235,814,400
    two, _ = shape_params({**base, "gated": 0})
    assert math.isclose(untied - two, 16 * 2048 * 8192 / 1e9)


# ----------------------------------------------------------------------------------------------
# Key spellings
# ----------------------------------------------------------------------------------------------

def test_gpt_neox_falcon_and_opt_spellings():
    falcon = {"model_type": "falcon", "hidden_size": 4544, "num_attention_heads": 71, "num_hidden_layers": 32,
              "multi_query": True, "parallel_attn": True, "bias": False, "vocab_size": 65024}
    m = parse_hf_config(falcon)
    assert m["kv_heads"] == 1 and m["gated"] == 0 and m["ffn"] == 4 * 4544
    assert _rel(m["params_b"], 6.92) < 0.03  # Falcon-7B
    old = {"model_type": "RefinedWebModel", "n_embd": 4544, "n_head": 71, "n_layer": 32, "multi_query": True,
           "vocab_size": 65024}
    assert parse_hf_config(old)["params_b"] == m["params_b"]
    neo = parse_hf_config({"model_type": "gpt_neox", "num_layers": 32, "hidden_size": 4096, "n_head": 32,
                           "intermediate_size": 16384, "vocab_size": 50432, "tie_word_embeddings": False})
    assert neo == shipped_configs()["pythia-6.9b"]["model"]
    opt350 = parse_hf_config({"model_type": "opt", "hidden_size": 1024, "ffn_dim": 4096, "num_hidden_layers": 24,
                              "num_attention_heads": 16, "vocab_size": 50272, "max_position_embeddings": 2048,
                              "word_embed_proj_dim": 512, "do_layer_norm_before": False})
    assert _rel(opt350["params_b"], 0.331) < 0.03  # OPT-350m: 331,196,416
    gqa = parse_hf_config({"model_type": "falcon", "hidden_size": 8192, "num_attention_heads": 128,
                           "num_kv_heads": 8, "num_hidden_layers": 60, "new_decoder_architecture": True,
                           "vocab_size": 65024})
    assert gqa["kv_heads"] == 8 and _rel(gqa["params_b"], 41.8) < 0.03  # Falcon-40B


def test_multimodal_wrappers_read_the_language_model():
    llama = _cfg("llama-2-7b")
    llava = {"model_type": "llava", "architectures": ["LlavaForConditionalGeneration"],
             "vision_config": {"hidden_size": 1024, "num_hidden_layers": 24, "model_type": "clip_vision_model"},
             "text_config": llama}
    assert parse_hf_config(llava) == parse_hf_config(llama)
    qwen = _cfg("qwen2.5-7b")
    qwen_vl = {**qwen, "model_type": "qwen2_vl", "vision_config": {"embed_dim": 1280, "depth": 32}}
    assert parse_hf_config(qwen_vl) == parse_hf_config(qwen)
    nested_vl = {"model_type": "qwen2_vl", "vision_config": {"depth": 32}, "text_config": qwen}
    assert parse_hf_config(nested_vl) == parse_hf_config(qwen)
    with pytest.raises(ScenarioError, match=r"text_config\.hidden_size is missing"):
        parse_hf_config({"model_type": "llava", "text_config": {"model_type": "llama", "vocab_size": 32064,
                                                                "num_hidden_layers": 32}})


def test_moe_layer_layouts():
    ds = _cfg("deepseek-v3")
    all_moe = parse_hf_config({**ds, "first_k_dense_replace": 0})
    every_other = parse_hf_config({**ds, "moe_layer_freq": 2})
    full = parse_hf_config(ds)
    assert all_moe["params_b"] > full["params_b"] > every_other["params_b"]
    q3 = _cfg("qwen3-30b-a3b")
    sparse2 = parse_hf_config({**q3, "decoder_sparse_step": 2})
    only = parse_hf_config({**q3, "mlp_only_layers": list(range(24))})
    assert math.isclose(sparse2["params_b"], only["params_b"], rel_tol=1e-9)  # 24 MoE layers either way
    assert sparse2["params_b"] < parse_hf_config(q3)["params_b"]


# ----------------------------------------------------------------------------------------------
# family_shape
# ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("size", [6.74, 7.0, 7.5, 8.0])
def test_dense_7_to_8b_is_llama3_8b_like(size):
    s = family_shape(size)
    assert (s["layers"], s["hidden"], s["heads"], s["kv_heads"], s["vocab"], s["gated"]) == (32, 4096, 32, 8, 128256, 1)
    assert s["ffn"] % 256 == 0 and 2.5 <= s["ffn"] / s["hidden"] <= 4.0


def test_dense_70b_is_llama31_70b_like():
    s = family_shape(70)
    assert (s["layers"], s["hidden"], s["heads"], s["kv_heads"]) == (80, 8192, 64, 8)
    assert abs(s["ffn"] - 28672) <= 1024
    assert family_shape(405)["layers"] == 126 and family_shape(405)["hidden"] == 16384


def test_dense_family_is_within_5_percent_over_0_1_to_2000b():
    for i in range(121):
        size = 0.1 * 20000 ** (i / 120)
        s = family_shape(size)
        assert list(s) == list(MODEL_KEYS)
        assert s["params_b"] == s["active_params_b"] == size and s["experts"] == 0
        total, active = shape_params(s)
        assert _rel(total, size) <= 0.05 and total == active, (size, total, s)
        assert s["hidden"] % s["heads"] == 0 and s["heads"] % s["kv_heads"] == 0 and s["kv_heads"] <= 8
        assert 1.5 <= s["ffn"] / s["hidden"] <= 6.5, (size, s)
    big = [family_shape(x) for x in (1, 3, 8, 30, 70, 400, 2000)]
    assert [b["hidden"] for b in big] == sorted(b["hidden"] for b in big)


def test_moe_family_active_and_total_are_consistent():
    for i in range(41):
        total = 2000 ** (i / 40)
        for active in (0.0, max(0.1, total / 32), total / 10, total / 3, total / 1.25):
            if active and not max(0.1, total / 32) <= active <= total / 1.25:
                continue
            s = family_shape(total, "moe", active)
            assert s["params_b"] == total and 0 < s["active_params_b"] < total
            if active:
                assert s["active_params_b"] == active
            t, a = shape_params(s)
            assert _rel(t, total) <= 0.05 and _rel(a, s["active_params_b"]) <= 0.05, (total, active, s)
            assert s["experts"] > s["experts_active"] == 8 and s["shared_experts"] == 1 and s["moe_ffn"] > 0
    ds = family_shape(671, "moe")
    assert _rel(ds["active_params_b"], 37) < 0.01  # the DeepSeek-V3 anchor
    assert family_shape(100, "moe", 10)["hidden"] == family_shape(100, "moe", 10.0)["hidden"]
    assert family_shape(671, "moe", 37)["hidden"] <= family_shape(671, "moe", 100)["hidden"]  # active drives width


@pytest.mark.parametrize("args, field", [
    ((0.05,), "params_b"), ((2500,), "params_b"), ((True,), "params_b"), (("7",), "params_b"),
    ((math.nan,), "params_b"), ((math.inf,), "params_b"), ((7, "sparse"), "family"), ((7, None), "family"),
    ((7, "dense", 3.0), "active_params_b"), ((0.5, "moe"), "params_b"), ((100, "moe", 1.0), "active_params_b"),
    ((100, "moe", 100.0), "active_params_b"), ((100, "moe", -1.0), "active_params_b"),
])
def test_family_shape_refusals(args, field):
    with pytest.raises(ScenarioError) as err:
        family_shape(*args)
    assert err.value.field == field and str(err.value).startswith(field)


# ----------------------------------------------------------------------------------------------
# read_hf_config
# ----------------------------------------------------------------------------------------------

def test_path_directory_text_and_name_give_the_same_dict(tmp_path):
    text = (CONFIGS / "mixtral-8x7b.json").read_text(encoding="utf-8")
    (tmp_path / "config.json").write_text(text, encoding="utf-8")
    want = shipped_configs()["mixtral-8x7b"]["model"]
    for source in (str(tmp_path / "config.json"), str(tmp_path), tmp_path, "  \n" + text, text,
                   "mixtral-8x7b", "Mixtral-8x7B", "mistralai/Mixtral-8x7B-v0.1"):
        assert read_hf_config(source) == want, source


@pytest.mark.parametrize("url", ["https://huggingface.co/meta-llama/Llama-3.1-8B/resolve/main/config.json",
                                 "http://example.com/config.json", "  HTTPS://x.y/z", "hf://meta-llama/Llama-3.1-8B"])
def test_links_are_refused_not_fetched(url):
    with pytest.raises(ScenarioError, match="not fetched.*paste"):
        read_hf_config(url)


@pytest.mark.parametrize("source, words", [
    ("", "empty"), ("no-such-model", "shipped"), ("someorg/some-model", "not fetched"), ("/dev/null", "not a config"),
    ("a\x00b", "not a config"), ("x" * 2_000_000, "1 MB"), (None, "must be"), (12, "must be"),
    (" [1, 2]", "JSON object"), ("{oops", "not valid JSON"),
])
def test_read_refusals(source, words):
    with pytest.raises(ScenarioError, match=words) as err:
        read_hf_config(source)
    assert err.value.field == "model.hf_config"


def test_read_refusals_of_files(tmp_path):
    with pytest.raises(ScenarioError, match="holds no config.json"):
        read_hf_config(str(tmp_path))
    big = tmp_path / "big.json"
    big.write_bytes(b"{" + b" " * 1_100_000 + b"}")
    with pytest.raises(ScenarioError, match="1 MB"):
        read_hf_config(str(big))
    bad = tmp_path / "bad.json"
    bad.write_bytes(b"\xff\xfe{}")
    with pytest.raises(ScenarioError, match="UTF-8"):
        read_hf_config(str(bad))


# ----------------------------------------------------------------------------------------------
# Malformed input
# ----------------------------------------------------------------------------------------------

LLAMA = _cfg("llama-3.1-8b")


def _without(key):
    return {k: v for k, v in LLAMA.items() if k != key}


MALFORMED = [
    ("invalid JSON", '{"hidden_size": 4096,', "not valid JSON"),
    ("a list", "[1, 2, 3]", "JSON object"),
    ("a number", "4096", "JSON object"),
    ("missing hidden size", _without("hidden_size"), "hidden_size"),
    ("missing layers", _without("num_hidden_layers"), "num_hidden_layers"),
    ("missing heads", _without("num_attention_heads"), "num_attention_heads"),
    ("missing vocab", _without("vocab_size"), "vocab_size"),
    ("hidden_size -1", {**LLAMA, "hidden_size": -1}, "hidden_size"),
    ("hidden_size 0", {**LLAMA, "hidden_size": 0}, "hidden_size"),
    ("1e30 layers", {**LLAMA, "num_hidden_layers": 1e30}, "num_hidden_layers"),
    ("1e30 layers as text", json.dumps({**LLAMA, "num_hidden_layers": 1}).replace(
        '"num_hidden_layers": 1', '"num_hidden_layers": 1e30'), "num_hidden_layers"),
    ("true as a number", {**LLAMA, "num_hidden_layers": True}, "num_hidden_layers"),
    ("false as heads", {**LLAMA, "num_attention_heads": False}, "num_attention_heads"),
    ("text as a number", {**LLAMA, "intermediate_size": "14336"}, "intermediate_size"),
    ("fractional", {**LLAMA, "hidden_size": 4096.5}, "hidden_size"),
    ("NaN", json.dumps(LLAMA)[:-1] + ', "rope_theta": NaN}', "rope_theta"),
    ("Infinity", json.dumps(LLAMA).replace('"vocab_size": 128256', '"vocab_size": Infinity'), "vocab_size"),
    ("nan in a dict", {**LLAMA, "hidden_size": math.nan}, "hidden_size"),
    ("1e400", json.dumps(LLAMA).replace('"hidden_size": 4096', '"hidden_size": 1e400'), "hidden_size"),
    ("huge integer", json.dumps(LLAMA).replace('"hidden_size": 4096', '"hidden_size": ' + "9" * 5000), "number"),
    ("deep nesting", json.dumps({**LLAMA, "rope_scaling": json.loads('{"a":' * 25 + "1" + "}" * 25)}),
     "rope_scaling"),
    ("very deep nesting", "[" * 50_000 + "]" * 50_000, "20 levels"),
    ("2 MB text", json.dumps({**LLAMA, "pad": "x" * 2_000_000}), "1 MB"),
    ("2 MB bytes", json.dumps({**LLAMA, "pad": "x" * 2_000_000}).encode(), "1 MB"),
    ("duplicate key", '{"hidden_size": 1, "hidden_size": 2}', "hidden_size"),
    ("kv heads above heads", {**LLAMA, "num_key_value_heads": 64}, "num_key_value_heads"),
    ("experts without top-k", {**LLAMA, "num_local_experts": 8}, "num_experts_per_tok"),
    ("top-k above experts", {**LLAMA, "num_local_experts": 8, "num_experts_per_tok": 9}, "num_experts_per_tok"),
    ("tie as text", {**LLAMA, "tie_word_embeddings": "yes"}, "tie_word_embeddings"),
    ("activation as a number", {**LLAMA, "hidden_act": 3}, "hidden_act"),
    ("mlp_only_layers not a list", {**_cfg("qwen3-30b-a3b"), "mlp_only_layers": 3}, "mlp_only_layers"),
    ("absurd size", {**LLAMA, "num_hidden_layers": 1000, "hidden_size": 100_000, "num_attention_heads": 1000,
                     "num_key_value_heads": 8}, "num_hidden_layers"),
    ("not UTF-8", b"\xff\xfe\x00", "UTF-8"),
    ("None", None, "must be"),
    ("a set", {1, 2}, "must be"),
]


@pytest.mark.parametrize("label, value, key", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_input_is_refused_naming_the_key(label, value, key):
    with pytest.raises(ScenarioError) as err:
        parse_hf_config(value)
    msg = str(err.value)
    assert msg.startswith("model.hf_config: ") and key in msg, msg
    assert "\n" not in msg and len(msg) < 400, msg


def test_numpy_integers_count_but_numpy_bools_and_durations_do_not():
    np = pytest.importorskip("numpy")
    assert parse_hf_config({**LLAMA, "hidden_size": np.int64(4096)}) == parse_hf_config(LLAMA)
    assert family_shape(np.float32(70.0)) == family_shape(70)
    for bad in (np.bool_(True), np.timedelta64(4096), np.datetime64(4096, "s")):
        with pytest.raises(ScenarioError, match="hidden_size"):
            parse_hf_config({**LLAMA, "hidden_size": bad})
        with pytest.raises(ScenarioError, match="params_b"):
            family_shape(bad)


def test_a_dict_that_contains_itself_is_refused():
    cfg = dict(LLAMA)
    cfg["self"] = cfg
    with pytest.raises(ScenarioError, match="20 levels"):
        parse_hf_config(cfg)


def test_messages_show_odd_keys_safely():
    with pytest.raises(ScenarioError) as err:
        parse_hf_config({**LLAMA, "a\nb\u202e": math.inf})
    assert str(err.value).isprintable() and "a\\nb" in str(err.value)


def test_error_names_the_caller_field():
    with pytest.raises(ScenarioError) as err:
        parse_hf_config("[]", what="upload")
    assert err.value.field == "upload" and str(err.value).startswith("upload: ")


def test_shape_params_refusals():
    for bad in ({}, {"layers": 2, "hidden": 64}, {"layers": True, "hidden": 64, "vocab": 1000},
                {"layers": 2, "hidden": 64, "vocab": 1000, "heads": 4, "kv_heads": 8},
                {"layers": 2, "hidden": 64, "vocab": 1000, "experts": 8}, [1, 2]):
        with pytest.raises(ScenarioError):
            shape_params(bad)


# ----------------------------------------------------------------------------------------------
# Fuzz: arbitrary JSON-ish input only ever raises ScenarioError
# ----------------------------------------------------------------------------------------------

if st is not None:
    FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    _KEYS = sorted({k for n in NAMES for k in _cfg(n)} | {"text_config", "n_layer", "n_embd", "n_head", "ffn_dim",
                                                           "multi_query", "num_kv_heads", "word_embed_proj_dim"})
    _leaf = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**7), st.integers(),
                      st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=20))
    _json = st.recursive(_leaf, lambda kids: st.one_of(st.lists(kids, max_size=4),
                                                       st.dictionaries(st.text(max_size=8), kids, max_size=4)),
                         max_leaves=20)

    def _check(value):
        try:
            out = parse_hf_config(value)
        except ScenarioError as err:
            assert str(err).startswith("model.hf_config: ") and str(err).isprintable(), str(err)
            return
        assert list(out) == list(MODEL_KEYS + H.ATTENTION_KEYS + H.ROUTING_KEYS)
        assert 0.01 <= out["params_b"] <= 5000 and 0 < out["active_params_b"] <= out["params_b"] * (1 + 1e-9)
        assert all(type(out[k]) is int and out[k] >= 0 for k in MODEL_KEYS[2:])

    @FUZZ
    @given(base=st.sampled_from(NAMES), edits=st.dictionaries(st.sampled_from(_KEYS), _json, max_size=4),
           drop=st.lists(st.sampled_from(_KEYS), max_size=3))
    def test_fuzz_edited_real_configs(base, edits, drop):
        cfg = {k: v for k, v in copy.deepcopy(_cfg(base)).items() if k not in drop}
        cfg.update(edits)
        _check(cfg)
        try:
            text = json.dumps(cfg)
        except (ValueError, TypeError):
            return
        _check(text)
        _check(text.encode())

    @FUZZ
    @given(value=st.one_of(_json, st.dictionaries(st.sampled_from(_KEYS), _json, max_size=10)))
    def test_fuzz_arbitrary_json_values(value):
        _check(value)
        _check(json.dumps(value))

    @FUZZ
    @given(text=st.one_of(st.text(max_size=200), st.binary(max_size=200).map(lambda b: b"{" + b)))
    def test_fuzz_arbitrary_text(text):
        _check(text)
        if isinstance(text, str) and "\x00" not in text:
            try:
                read_hf_config(text)
            except ScenarioError:
                pass


# ----------------------------------------------------------------------------------------------
# Light import
# ----------------------------------------------------------------------------------------------

def test_module_imports_no_heavy_library():
    code = ("import sys, costcore.scenario.hfconfig as h; h.shipped_configs(); h.family_shape(70); "
            "print(sorted(m for m in ('numpy', 'numba', 'pandas', 'streamlit', 'yaml') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=NEVER_S,
                         check=True)
    assert out.stdout.strip() == "[]", out.stdout


_DENSE_7B = {"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "intermediate_size": 11008,
             "vocab_size": 32000}


@pytest.mark.parametrize("extra,want", [
    ({"model_type": "mistral", "sliding_window": 4096}, (4096, 1.0)),  # Mistral 7B v0.1: every layer
    ({"model_type": "mistral", "sliding_window": None}, None),  # Mistral v0.2+: no window
    ({"model_type": "qwen2", "sliding_window": 131072, "use_sliding_window": False}, None),  # carried, unused
    ({"model_type": "olmo3", "sliding_window": 4096,
      "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention", "full_attention"] * 8},
     (4096, 0.75)),
    ({"model_type": "gemma2", "sliding_window": 4096}, (4096, 0.5)),  # every other layer (modeling_gemma2)
    ({"model_type": "gemma3_text", "sliding_window": 1024, "sliding_window_pattern": 6}, (1024, 0.8333)),
    ({"model_type": "llama"}, None),
])
def test_sliding_window_and_its_share_of_layers_are_read(extra, want):
    got = parse_hf_config(dict(_DENSE_7B, **extra))
    if want is None:
        assert got["sliding_window"] == 0 and got["sliding_window_share"] == 1.0
    else:
        assert (got["sliding_window"], got["sliding_window_share"]) == want


@pytest.mark.parametrize("extra,key", [({"sliding_window": -5}, "sliding_window"),
                                       ({"sliding_window": 4096, "layer_types": ["sliding_attention", 3]}, "layer_types"),
                                       ({"sliding_window": 4096, "sliding_window_pattern": 0}, "sliding_window_pattern")])
def test_a_bad_window_gets_one_sentence_naming_its_key(extra, key):
    with pytest.raises(ScenarioError) as e:
        parse_hf_config(dict(_DENSE_7B, model_type="mistral", **extra))
    assert key in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("text, words", [
    ('{"hidden_size": 4096,}', "line 1, column 22 needs a key in double quotes (or has a comma too many)"),
    ('{"hidden_size" 4096}', "needs a colon after the key"),
    ('{"hidden_size": 4096 "num_hidden_layers": 32}', "needs a comma between two entries"),
    ('{"model_type": "llama', "has text whose closing double quote is missing"),
])
def test_a_malformed_config_is_named_in_words_not_in_the_parsers(text, words):
    """json's own message ("Expecting property name enclosed in double quotes") is parser jargon; the sentence
    says where and what is wrong in words."""
    with pytest.raises(ScenarioError) as err:
        H._loads(text, "config.json")
    assert str(err.value).startswith("config.json: is not valid JSON: line 1, column ") and words in str(err.value)
    assert "Expecting" not in str(err.value)


def test_a_model_name_in_a_link_or_set_brings_its_size_and_shape():
    """model.name=llama-2-70b in a link or --set on the 13B QLoRA preset was refused for the preset's 13B
    "active parameters", which the user never gave: a name brings its model, as the picker does."""
    import costcore
    from costcore.scenario import loaders, schema
    scn = loaders.apply_sets(costcore.load_preset("qlora-single-gpu"), ["model.name=llama-2-70b"])
    v = schema.validate(scn)
    assert schema.effective_value(v, "model.layers") == 80 and schema.effective_value(v, "model.hidden") == 8192
    assert 68 < schema.effective_value(v, "model.params_b") < 70
