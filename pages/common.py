"""Shared UI pieces for every page: scenario state, URL sync, sidebar, knobs, charts.

Pages stay thin: they arrange prose, knobs and results; every number comes
from costcore.
"""
from __future__ import annotations

import functools
import gc
import hashlib
import html
import os
import math
import re
import pickle
import types

import altair as alt
import numpy as np
import pandas as pd
import streamlit as st

import costcore
from costcore import api, fmt
from costcore.scenario.loaders import Scenario
from costcore.analysis import explain
from costcore.scenario import checks, schema
from costcore.scenario import share
from costcore.scenario.schema import (BY_PATH, RESOURCE_LABELS, RESOURCES, STAGE_LABELS, STAGE_SHORT,  # noqa: F401
                                      STAGES, ScenarioError)
from costcore.scenario.yamlio import MAX_YAML_BYTES, dump_yaml

DEFAULT_PRESET = "pipeline-70b"
SMALL_UPLOAD_MB = 1  # a scenario, portfolio or config.json: kilobytes; the server takes up to 200 MB for the bills
RESOURCE_COLORS = {"compute": "#4C78A8", "storage": "#F58518", "network": "#72B7B2", "data": "#54A24B",
                   "labor": "#B279A2", "ops": "#9D755D", "hidden": "#E45756"}


def resource_scale(keys=RESOURCES) -> alt.Scale:
    """The resources' colours for a chart whose data holds their labels (RESOURCE_LABELS), in the order given."""
    return alt.Scale(domain=[RESOURCE_LABELS[r] for r in keys], range=[RESOURCE_COLORS[r] for r in keys])


STAGE_COLORS = {"pretrain": "#1f77b4", "cpt": "#17becf", "mm_align": "#ff7f0e", "mm_cpt": "#8c564b",
                "mm_tune": "#e377c2", "sft": "#2ca02c", "dpo": "#bcbd22", "rl": "#d62728", "eval": "#9467bd"}


@st.cache_resource(show_spinner="Loading the cost kernels. The first start after an install compiles them, about a "
                                "minute on 2 cores; `python -m costcore warm` does it ahead.")
def _warm_up() -> bool:
    """Compile or load the numba kernels once per server process, then move everything loaded so far
    (numba, pandas, Altair's schema classes: most of the heap) out of the garbage collector's sight,
    so its full collections do not scan it again on every few reruns (gc.freeze, Python 3.7+)."""
    costcore.warm_up()
    gc.freeze()
    return True


_MD_SPECIAL = set("\\`*[]!|~$#")  # links, images, code, emphasis, tables, math; HTML goes through html.escape
# GitHub-flavoured markdown turns a bare http://..., www.host or name@host into a live link after parsing (no
# escape stops it; a shared link's name put one in every page's header): an invisible word joiner (U+2060) splits
# the scheme from its "://", "www" from its dot and "@" from the host
_MD_AUTOLINK = re.compile(r"(?i)\b(https?|ftp|mailto|www)(?=:|\.)|@")
_MD_UNDERSCORE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")  # an underscore that can open or close emphasis


def md_escape(text: str) -> str:
    """Text from users (names, URL values, messages quoting them) made inert for st.markdown:
    HTML is escaped and every markdown control character is backslash-escaped."""
    text = html.escape(str(text), quote=False)
    text = "".join("\\" + c if c in _MD_SPECIAL else c for c in text)
    text = _MD_AUTOLINK.sub(lambda m: m.group(0) + "\u2060", text)
    # an underscore that can open or close emphasis ("__main__" read as bold "main"); one inside a word (params_b)
    # cannot, and stays as it is so messages keep the settings' names
    return _MD_UNDERSCORE.sub(r"\\_", text)


def _default_preset() -> str:
    names = api.preset_names()
    return DEFAULT_PRESET if DEFAULT_PRESET in names else names[0]


@st.cache_data(show_spinner=False)
def preset_titles() -> dict:
    return api.preset_titles()


def preset_named(name, current: str) -> str:
    """The preset whose title is ``name`` (a scenario file saved from it keeps the title), else ``current``."""
    return next((p for p, t in preset_titles().items() if t == name), current)


_CLI_PRESETS = re.compile(r"python -m costcore presets lists all (\d+)")


def state():
    """Session state with a valid scenario; the first run of a session reads the URL."""
    _warm_up()
    ss = st.session_state
    if "scenario" not in ss:
        try:
            # every value of each key: share.decode refuses a key given twice instead of taking one
            params = {k: st.query_params.get_all(k) for k in st.query_params.keys()}
        except Exception:  # noqa: BLE001 - a malformed query string must not crash the page
            params = {}
        scn, preset, warns = share.decode(params, _default_preset())
        ss.scenario, ss.preset, ss.rev = scn, preset, 0
        # the API's hint for an unknown preset names a command; in the app the sidebar's box is where the list is
        ss.messages = [_CLI_PRESETS.sub(r"the sidebar's Preset box lists all \1", w) for w in warns]
        ss._view_in = share.view_params(params)  # each page takes its own (view_seed) when it draws that widget
    ss.setdefault("messages", [])
    ss.setdefault("handled", {})  # widget key -> the last value applied (_catch_up)
    ss.setdefault("labels", {})  # scenario key -> the label its widget shows (error_in_words)
    return ss


def scenario() -> dict:
    return state().scenario


def current() -> Scenario:
    """The session's scenario as a validated :class:`Scenario`, made once per change (not per rerun).

    Its provenance says where each value came from: the preset, the link the session opened, or
    "you" for values changed here since.
    """
    ss = state()
    if ss.get("_scn_of") is not ss.scenario:
        prev = ss.get("_scn")
        if prev is None:
            base = Scenario.of(ss.preset, origin=f"preset {ss.preset}")
            ss._scn = Scenario.of(ss.scenario, origin="the link", base=base)
        else:
            ss._scn = Scenario.of(ss.scenario, origin="you", base=prev)
        ss._scn_of = ss.scenario
    return ss._scn


def result() -> api.Result:
    """The estimate of the session's scenario, made once per change of it (a page asks several times a rerun)."""
    scn = current()
    ss = st.session_state
    if ss.get("_res_for") is not scn:
        ss._res, ss._res_for = api.estimate(scn), scn
    return ss._res


def _encoded() -> dict:
    """The scenario's query parameters (share.encode), made once per change of the scenario or preset."""
    ss = st.session_state
    key = (ss.scenario, ss.preset)
    got = ss.get("_enc")
    if got is None or got[0][0] is not key[0] or got[0][1] != key[1]:
        got = ss._enc = (key, share.encode(ss.scenario, ss.preset))
    return got[1]


# What a page shows beside the scenario, kept in its link: {page url path: {name in the link: widget key}}. A share
# link of the Job layout page on its RL stage opened on pre-training, and the workbench's six methods on three.
VIEWS = {"job-layout": {"stage": "job-layout:stage"}, "fine-tuning": {"methods": "ft:methods"},
         "checkpoints": {"stage": "ckpt_stage"}}


def _view_text(v) -> str:
    return ",".join(map(str, v)) if isinstance(v, (list, tuple)) else str(v)


def _view_query() -> dict:
    """The current page's view parameters (``view.NAME``) for its link, from its widgets' values."""
    ss = st.session_state
    pending = ss.get("_view_in") or {}  # given by the link, not yet taken by its widget (drawn after the sidebar)
    out = {}
    for name, key in VIEWS.get(ss.get("_page_url_path", ""), {}).items():
        if key in ss:
            out[share.VIEW_PREFIX + name] = _view_text(ss[key])
        elif name in pending:
            out[share.VIEW_PREFIX + name] = pending[name]
    return out


def view_seed(name: str, options, multi: bool = False) -> bool:
    """Before the current page draws its view widget ``name`` (VIEWS), set its value from the link the session
    opened with, if the link gave one the widget offers (every item, for a multiselect); a value it does not offer
    is dropped. True when the widget has a value in session state already (then draw it without a default:
    Streamlit warns of a widget given both)."""
    ss = st.session_state
    key = VIEWS.get(ss.get("_page_url_path", ""), {}).get(name)
    if key is None:
        return False
    text = (ss.get("_view_in") or {}).pop(name, None)
    if text is not None and key not in ss:
        shown = {str(o): o for o in options}
        if multi:
            picked = [shown[t] for t in text.split(",") if t in shown]
            if picked and len(picked) == len(text.split(",")):
                ss[key] = picked
        elif text in shown:
            ss[key] = shown[text]
    return key in ss


def _sync_url() -> None:
    ss = st.session_state
    params = dict(_encoded(), **_view_query())
    current = {k: st.query_params.get(k) for k in st.query_params.keys()}
    if current != params:
        st.query_params.from_dict(params)


def share_url() -> str:
    """Absolute link to the current page with the scenario in the query string.

    Built from the server's scheme and host and the current st.navigation
    page (not the URL the session started on, which may be stale).
    """
    from urllib.parse import urlsplit
    ss = st.session_state
    q = share.query_string(dict(_encoded(), **_view_query()))
    try:
        parts = urlsplit(st.context.url or "")
        origin = f"{parts.scheme}://{parts.netloc}" if parts.netloc else ""
    except Exception:  # noqa: BLE001
        origin = ""
    try:
        base_path = (st.get_option("server.baseUrlPath") or "").strip("/")
    except Exception:  # noqa: BLE001
        base_path = ""
    path = "/".join(p for p in (base_path, ss.get("_page_url_path", "")) if p)
    return f"{origin}/{path}?{q}"


# ---------------------------------------------------------------------------
# Changing the scenario
# ---------------------------------------------------------------------------
def apply(path: str, value) -> bool:
    """Set one value; on bad input keep the last good scenario and say why."""
    ss = st.session_state
    if path == "model.params_b":  # a new size takes the shape of that size, not the old one's
        cand = schema.resize_model(ss.scenario, value)
    else:
        cand = schema.set_path(ss.scenario, path, value)
    shown = _shown_values(ss)
    try:
        ss.scenario = schema.validate(cand)
    except ScenarioError as err:  # the settings in the form's words, and that nothing changed
        said = schema.error_in_words(err, ss.get("labels")).rstrip(". ")
        blamed = getattr(err, "path", "")
        if blamed != path and path in schema.BY_PATH:  # a rule of several settings names another one first: say
            # which change it refused ("Media tokens per item (2,880): ... Images per sample: 1 image x 2,880 ...")
            label = (ss.get("labels") or {}).get(path) or schema.BY_PATH[path].label
            said = f"{label} ({checks._shown(value)}): {said}"
        ss.messages.append(said + REFUSED)
        ss.rev += 1  # the refused widget is drawn again at the value kept, not at the one refused
        return False
    if any(v != schema.effective_value(ss.scenario, p) for p, v in shown.items() if p != path):
        ss.rev += 1  # another widget's value followed (a GPU's default price): widgets are drawn afresh at theirs
    return True


REFUSED = "; not applied, the last good value stays."  # the end of a widget's refusal: it read as if it took


def _shown_values(ss) -> dict:
    """The values of the settings a widget shows (those drawn in this session: ss.labels)."""
    return {p: schema.effective_value(ss.scenario, p) for p in ss.get("labels", {})}


def apply_scenario(cand: dict) -> bool:
    """Replace the scenario with ``cand`` (a model picked, a config read); on bad input keep the last good one."""
    ss = st.session_state
    try:
        ss.scenario = schema.validate(cand)
        ss.rev += 1  # widgets bound to the old model's values are rebuilt
        ss.labels = {}  # and draw their labels again (a modality's words may have changed)
        return True
    except ScenarioError as err:
        ss.messages.append(schema.error_in_words(err, ss.get("labels")))
        return False


def model_label(scn: dict) -> str:
    """The model in words: a shipped model's name, else its size ("70.6B model"). The scenario's title stays the
    user's, so after picking Qwen2.5 32B on the Llama-3-8B preset the header said only "Llama-3-8B-like"."""
    name = schema.effective_value(scn, "model.name")
    if name:
        from costcore.scenario import hfconfig
        shipped = hfconfig.shipped_configs().get(str(name))
        if shipped:
            return str(shipped["label"])
    return f"{fmt.num(float(schema.effective_value(scn, 'model.params_b')))}B model"


def gpu_label(scn: dict) -> str:
    """The GPU in words: its catalog name, or a custom GPU's own name."""
    gpu = schema.effective_value(scn, "hardware.gpu")
    if gpu == "custom" and schema.effective_value(scn, "hardware.gpu_name"):
        return f"Custom GPU: {schema.effective_value(scn, 'hardware.gpu_name')}"
    return str(schema.CATALOG[gpu]["label"])


def set_stage(stage: str, on: bool) -> None:
    ss = st.session_state
    stages = dict(ss.scenario.get("stages", {}))
    if on:
        stages.setdefault(stage, {})
    else:
        stages.pop(stage, None)
    ss.scenario = schema.validate(dict(ss.scenario, stages=stages))


def load_preset(name: str) -> None:
    ss = st.session_state
    try:
        ss.scenario = api.load_preset(name)
        ss.preset = name
    except ScenarioError as err:
        ss.messages.append(str(err))
    ss.rev += 1


def _num(v):
    return v if (isinstance(v, (int, float)) and math.isfinite(v)) else 0


# The options of each choice input in words, by the input's last key (the same key in every stage).
CHOICE_WORDS = {
    "method": {"full": "Full fine-tuning", "lora": "LoRA", "qlora": "QLoRA"},
    "recompute": {"auto": "Searched", "none": "None", "selective": "Selective", "full": "Full"},
    "precision": {"bf16": "BF16", "fp8": "FP8"},
    "sequence_parallel": {"auto": "Searched", "on": "On", "off": "Off"},
    "schedule": {"auto": "1F1B", "dualpipe": "DualPipe", "search": "Searched"},
    "ckpt_type": {"full": "Full (resumable, with optimizer state)", "weights": "Weights only"},
    "lora_targets": {"qv": "Query and value", "attn": "All attention", "all": "Attention and MLP"},
    "reference": {"live": "Live", "precomputed": "Precomputed", "none": "None"},
    "algorithm": {"grpo": "GRPO", "ppo": "PPO"},
    "reward": {"model": "Reward model", "rule": "Rule-based verifier"},
    "optimizer": {"adamw": "AdamW", "adamw_8bit": "8-bit AdamW", "paged_adamw_8bit": "Paged 8-bit AdamW",
                  "adafactor": "Adafactor", "sgd": "SGD with momentum"},
    "offload": {"none": "None", "optimizer": "Optimizer states", "optimizer_and_params": "Optimizer states and weights"},
    "base_bits": {16: "16-bit (BF16)", 8: "8-bit (LLM.int8)", 4: "4-bit (NF4)"},
    "weight_bits": {16: "16-bit (BF16)", 8: "8-bit", 4: "4-bit (AWQ, GPTQ or NF4)"},
    "zero_stage": {-1: "Searched", 0: "Off", 1: "ZeRO-1", 2: "ZeRO-2", 3: "ZeRO-3 (FSDP)"},
    "modality": {"image": "Images", "video": "Video clips", "audio": "Audio recordings"},
    "preprocessing": {"offline": "Offline, once before training", "online": "Online, by the data loader each epoch"},
    "connector": {"mlp2x": "Two-layer MLP (LLaVA-1.5)", "linear": "Linear layer (LLaVA)", "qformer": "Q-Former (BLIP-2)",
                  "resampler": "Resampler (Qwen-VL)", "pixel-shuffle": "Pixel shuffle + MLP (InternVL)"},
}


def choice_words(path: str, choice) -> str:
    """An option of a choice input in words: a GPU by its catalog name, other options by CHOICE_WORDS."""
    if path == "hardware.gpu":
        return str(schema.CATALOG.get(choice, {}).get("label", choice))
    if path.endswith(".base_bits") and choice == 16 and schema.effective_value(scenario(), "hardware.precision") == "fp8":
        return "Unquantized (FP8, as the job runs)"  # an FP8 job holds its unquantized base in FP8 (formulas.frozen_base_bytes)
    return CHOICE_WORDS.get(path.rsplit(".", 1)[-1], {}).get(choice, str(choice))


def _widget_value(f, v):
    """A widget's value as the scenario stores it (a date as ISO text)."""
    return v.isoformat() if f.kind == "date" and hasattr(v, "isoformat") else v


def _catch_up() -> None:
    """Before a rerun draws anything, apply the knob values whose on_change callback did not run.

    Keys pressed faster than the reruns finish interrupt them, and an interrupted rerun can lose
    the callback of the value that interrupted it: the slider then shows 4.2 while the scenario,
    the numbers and the share link stay at 3.3 (seen in tests/test_concurrency_browser.py). Each
    widget value is handled once (a refused one is not refused again on every rerun).
    """
    ss = st.session_state
    suffix = f":{ss.rev}"
    for key in [k for k in ss if isinstance(k, str) and k[:2] in ("k:", "t:") and k.endswith(suffix)]:
        f = BY_PATH.get(key[2:-len(suffix)])
        v = ss[key]
        if f is None or ss.handled.get(key, _UNSEEN) == v:
            continue
        ss.handled[key] = v
        value = _widget_value(f, v)
        if value != schema.effective_value(ss.scenario, f.path):
            if apply(f.path, value) and key.startswith("t:"):
                ss.rev += 1  # a typed value: the slider is drawn afresh at it (_typed_box)


_UNSEEN = object()


def knob(path: str, label: str, lo=None, hi=None, step=None, widget: str = "slider", fmt_str=None,
         help: str | None = None, options=None, typed: str | None = None):
    """A widget bound to one scenario path; its change recomputes everything.

    ``typed``: the label of a number box under the widget, for a value off the slider's ladder
    (a log slider's 70B can be typed as 65.5); it is checked like a URL value (schema.validate).
    """
    ss = state()
    key = f"k:{path}:{ss.rev}"
    ss.labels[path] = label  # a refusal names the setting as this widget does (apply)
    out = _knob_widget(ss, key, path, label, lo, hi, step, widget, fmt_str, help, options)
    ss.handled[key] = st.session_state.get(key, _UNSEEN)  # what it shows now is handled (_catch_up)
    if typed:
        _typed_box(ss, path, typed)
    return out


def _typed_box(ss, path: str, label: str) -> None:
    """A number box showing the scenario's value of ``path``; typing a value applies it.

    A typed value off the ladder makes the slider's ladder change: the widgets are rebuilt (ss.rev)
    so the slider shows it. The box follows the slider (or a link) by being set to the scenario's
    value before it is drawn.
    """
    f = BY_PATH[path]
    key = f"t:{path}:{ss.rev}"
    cast = float  # a whole number too: an integer box reads "1e30" as 1 (see _knob_widget)
    cur = cast(_num(schema.effective_value(ss.scenario, path)))

    def typed():
        ss.handled[key] = st.session_state[key]
        if apply(path, st.session_state[key]):
            ss.rev += 1  # the slider (keyed by rev) is drawn afresh at the typed value

    kwargs = {}
    if key in st.session_state and st.session_state[key] != cur:
        st.session_state[key] = cur  # the slider or a link moved the value: show it (no value= then)
    elif key not in st.session_state:
        kwargs["value"] = cur
    # no min_value / max_value: Streamlit refuses an out-of-range number in the browser with a red box alone and
    # leaves it shown beside results of the old value; the schema refuses it in a sentence naming the range
    st.number_input(label, key=key, on_change=typed,
                    help=f"Any value from {fmt.num(f.lo)} to {fmt.num(f.hi)}, checked like a value in a link.",
                    format="%.0f" if f.kind == "int" else "%g", **kwargs)
    ss.handled[key] = st.session_state.get(key, _UNSEEN)


def _knob_widget(ss, key, path, label, lo, hi, step, widget, fmt_str, help, options):
    f = BY_PATH[path]
    cur = schema.effective_value(ss.scenario, path)
    tip = help or f"{f.doc} ({f.allowed()}). Source of the default: {f.source}. Terms: the Glossary page."

    def changed():
        ss.handled[key] = st.session_state[key]
        apply(path, _widget_value(f, st.session_state[key]))

    if f.kind == "enum":
        choices = list(options or f.choices)
        return st.selectbox(label, choices, index=choices.index(cur) if cur in choices else 0, key=key,
                            on_change=changed, help=tip, format_func=lambda c: choice_words(path, c))
    if f.kind == "bool":
        return st.checkbox(label, value=bool(cur), key=key, on_change=changed, help=tip)
    if f.kind == "date":
        import datetime as _dt

        return st.date_input(label, value=_dt.date.fromisoformat(str(cur)), key=key, on_change=changed,
                             help=tip, min_value=_dt.date(2000, 1, 1), max_value=_dt.date(2100, 12, 31))
    if f.kind == "str":
        return st.text_input(label, value=str(cur), key=key, on_change=changed, help=tip, max_chars=100)
    if options is not None:  # a number from a short list (bits per weight): a choice in words
        choices = list(options)
        return st.selectbox(label, choices, index=choices.index(cur) if cur in choices else 0, key=key,
                            on_change=changed, help=tip, format_func=lambda c: choice_words(path, c))
    is_int = f.kind == "int"
    cast = int if is_int else float
    lo = cast(f.lo if lo is None else lo)
    hi = cast(f.hi if hi is None else hi)
    cur = cast(_num(cur))
    lo, hi = min(lo, cur), max(hi, cur)
    if fmt_str is None and not is_int and step is not None and float(step) >= 1:
        fmt_str = "%.0f"
    elif fmt_str is None and not is_int and step is not None:
        fmt_str = "%g"  # a half-step slider shows 15 and 15.5, not Streamlit's default 15.00 and 15.50
    if widget in ("log", "pow2"):  # quantities spanning orders of magnitude: a ladder of round values
        # The browser redraws a select slider's thumb from its last sent value whenever the options
        # change, so they must not change while the user moves it: an off-ladder value the slider was
        # drawn at (a preset's 6.74B) stays a rung for the life of this key. Dropping it on the first
        # move let presses made during that rerun leave the thumb at 3 while the scenario was at 4
        # (tests/test_concurrency_browser.py). The key changes (ss.rev) when a preset, a link or a
        # typed value brings a new off-ladder value.
        pin = cast(ss.setdefault("ladder_pins", {}).setdefault(key, cur))
        words = _ladder(min(lo, pin), max(hi, pin), pin, cur, is_int, widget)
        return st.select_slider(label, options=list(words), value=cur, key=key, on_change=changed, help=tip,
                                format_func=words.__getitem__)
    if widget == "slider":
        if fmt_str in (None, "%g") and not is_int and hi <= 1 and str(f.unit).startswith("of "):
            fmt_str = "percent"  # a share of something (of each budget, of peak): 80% on the thumb, not 0.8
        elif fmt_str in (None, "%.0f", "%d") and (is_int or fmt_str) and hi >= 1000:
            fmt_str = "localized"  # whole numbers with thousands separators on the thumb: 25,000, not 25000
        return st.slider(label, min_value=lo, max_value=hi, value=cur,
                         step=cast(step) if step is not None else None, key=key, on_change=changed,
                         help=tip, format=fmt_str)
    if is_int:  # a whole-number box takes any number and the schema refuses what is not whole, in words: the
        # browser's integer box read "1e30" as 1 and "2e3" as 2 (parseInt), and set 1 GPU in silence
        return st.number_input(label, value=float(cur), step=float(step) if step is not None else 1.0, key=key,
                               on_change=changed, help=tip, format=fmt_str if fmt_str not in (None, "%d") else "%.0f")
    if fmt_str == "%.0f" and not float(cur).is_integer():  # a whole step's box showed 0.5 as "1" (the model used 0.5)
        fmt_str = _decimals(cur)
    return st.number_input(label, value=cur,  # the range is the schema's to refuse, in words (see _typed_box)
                           step=cast(step) if step is not None else None, key=key, on_change=changed,
                           help=tip, format=fmt_str)


def _decimals(v: float) -> str:
    """A printf format with the fewest decimals (at most 6) that shows ``v`` as it is: 0.5 -> %.1f, 82.55 -> %.2f."""
    for d in range(1, 7):
        if abs(round(v, d) - v) < 1e-9 * max(1.0, abs(v)):
            return f"%.{d}f"
    return "%.6f"


LADDER_MANTISSAS = (1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0)


@functools.lru_cache(maxsize=1024)
def _ladder(lo, hi, pin, cur, is_int: bool, widget: str) -> dict:
    """A log slider's rungs, each with its text (the same ones on most reruns: formatting every rung of
    every log slider was 660 calls of fmt.num, about 4 ms, of a Post-training rerun). The slider keeps
    its value as the shown text, so no rung may read like the pinned or the current value."""
    show = (lambda v: f"{v:,.0f}") if widget == "pow2" else fmt.num
    ladder = sorted(set(log_ladder(lo, hi, pin, is_int, pow2=widget == "pow2")) | {cur})
    taken = (show(pin), show(cur))
    return {v: show(v) for v in ladder if v in (pin, cur) or show(v) not in taken}


def log_ladder(lo: float, hi: float, cur: float, is_int: bool, pow2: bool = False) -> list:
    """Round values from lo to hi, evenly spaced on a log scale (1, 1.5, 2, 3, 4, 5, 6, 8 x 10^k, or
    powers of two), plus the current value: a slider whose track is not 99% empty at 70B of 1,000B."""
    lo_pos = max(lo, 1.0 if is_int else 1e-3)
    vals = {cur}
    if pow2:
        k = math.ceil(math.log2(lo_pos))
        while 2.0 ** k <= hi:
            vals.add(2.0 ** k)
            k += 1
    else:
        for e in range(math.floor(math.log10(lo_pos)), math.ceil(math.log10(hi)) + 1):
            for m in LADDER_MANTISSAS:
                v = float(f"{m * 10.0 ** e:.12g}")  # 0.15, not 0.15000000000000002 (it goes into the link)
                if lo_pos <= v <= hi:
                    vals.add(v)
    if lo <= 0 < lo_pos:
        vals.add(0.0)
    cast = int if is_int else float
    return sorted({cast(round(v)) if is_int else cast(v) for v in vals})


def knob_columns(*columns) -> None:
    """Knobs laid out in columns: each column is a list of knob() argument tuples (a plain string: a caption)."""
    for col, specs in zip(st.columns(len(columns)), columns):
        with col:
            for spec in specs:
                if isinstance(spec, str):
                    st.caption(spec)
                else:
                    knob(*spec)


def stage_results(stage: str, bar: bool = True, explain: bool = True) -> api.Result:
    """A stage's headline metrics, its warnings, its cost by resource and how it was computed."""
    res = result()
    stage_metrics(res, stage)
    show_checks(res, [stage])
    if bar:
        stacked_bar(res, [stage], height=220)
    if explain:
        how_computed(res, stage)
    return res


def stage_toggle(stage: str, label: str | None = None) -> bool:
    ss = state()
    on = stage in ss.scenario.get("stages", {})
    key = f"stage:{stage}:{ss.rev}"

    def changed():
        set_stage(stage, st.session_state[key])

    st.toggle(label or f"Include this stage ({STAGE_SHORT[stage]})", value=on, key=key, on_change=changed)
    return on


# ---------------------------------------------------------------------------
# Sidebar and page frame
# ---------------------------------------------------------------------------
PRESET_BOX_CHARS = 30  # about what the sidebar's preset box shows of a title at its default width


def sidebar() -> None:
    ss = state()
    with st.sidebar:
        st.markdown("### Scenario")
        titles = preset_titles()
        names = list(titles)
        pkey = f"preset:{ss.rev}"

        def preset_changed():
            load_preset(st.session_state[pkey])

        st.selectbox("Preset", names, index=names.index(ss.preset) if ss.preset in names else 0,
                     format_func=lambda n: titles.get(n, n), key=pkey, on_change=preset_changed)
        if len(titles.get(ss.preset, "")) > PRESET_BOX_CHARS:  # the box cuts a long title: "70B pipeline with LoRA SFT and G"
            st.caption(md_escape(titles[ss.preset]))
        knob("hardware.gpu", "GPU type", options=schema.GPU_NAMES,
             help="Accelerator; specs and default price from costcore/data/hardware.yaml.")
        knob("hardware.num_gpus", "GPUs (default for every stage)", widget="number", step=1)
        knob("hardware.usd_per_gpu_hour", "Price, $ per GPU-hour", widget="number", step=0.05, fmt_str="%.2f")
        if st.button("Reset to preset", width="stretch"):
            load_preset(ss.preset)
            st.rerun()
        st.markdown("### Share")
        st.caption("This link reproduces the scenario exactly (preset + changed values).")
        # inline code, not st.code: st.code loads a 1.5 MB syntax highlighter into every new session's
        # first paint (0.5-0.7 s of the overview's, benchmarks/bench_first_paint.py)
        st.markdown(f"`{share_url().replace('`', '%60')}`")
        st.download_button("Download scenario (YAML)", data=functools.partial(dump_yaml, ss.scenario),  # on click
                           file_name="scenario.yaml", mime="application/x-yaml", width="stretch")
        ukey = f"upload:{ss.rev}"

        def uploaded():
            up = st.session_state.get(ukey)
            if up is None:
                return
            data = up.getvalue()
            named = fmt.one_line(up.name or "the upload", 80)  # the file, as the uploader shows it
            if len(data) > MAX_YAML_BYTES:
                ss.messages.append(f"{named}: the file is {len(data):,} bytes; the limit is {MAX_YAML_BYTES:,}. "
                                   "The previous scenario is kept.")
                return
            try:
                ss.scenario = api.load_yaml_text(data, what=named)
                # a file saved from a preset names it: the sidebar's preset, its Reset and the share link follow it
                # (they stayed on the preset before, and the link listed every default the file wrote out)
                ss.preset = preset_named(ss.scenario.get("name"), ss.preset)
                ss.rev += 1
            except ScenarioError as err:
                ss.messages.append(f"{err}. The previous scenario is kept.")

        st.file_uploader("Upload scenario (YAML)", type=["yaml", "yml"], key=ukey, on_change=uploaded,
                         max_upload_size=SMALL_UPLOAD_MB, help=f"Up to {SMALL_UPLOAD_MB} MB.")


def _leave_legacy_router() -> None:
    """Hand a deep link over to st.navigation.

    Streamlit still has a legacy router for apps with a pages/ folder: while
    it is on, a fresh server runs /checkpoints as pages/checkpoints.py alone
    (no app.py, no navigation, no page config). The page files are named
    like their st.navigation url paths, so the legacy router finds them; this
    switches it off for the process and reruns through app.py.
    """
    try:
        from streamlit.runtime.pages_manager import PagesManager
    except Exception:  # noqa: BLE001 - private API; the page still renders without it
        return
    if PagesManager.uses_pages_directory:
        PagesManager.uses_pages_directory = False
        st.rerun()


def frame(title: str, intro: str) -> api.Result:
    """Title, sidebar, messages, URL sync and the headline numbers of every page."""
    _leave_legacy_router()
    ss = state()
    _catch_up()  # once per rerun, before anything is drawn
    sidebar()
    res = result()
    _sync_url()
    st.title(title)
    for msg in ss.messages:
        st.warning(md_escape(msg), icon="⚠️")
    ss.messages = []
    for msg in ss.get("notes", []):  # what an action did (a lever applied): not a warning
        st.success(md_escape(msg), icon="✅")
    ss.notes = []
    name = md_escape(ss.scenario.get("name", "").strip() or "Untitled scenario")  # never an empty "****"
    st.caption(f"Scenario: **{name}** · preset `{ss.preset}` · {md_escape(model_label(ss.scenario))} · "
               f"{len(res.stages)} stage{'' if len(res.stages) == 1 else 's'} · {md_escape(gpu_label(ss.scenario))}")
    if not res.feasible:  # no headline numbers for a plan that cannot run: the reason stands where they would be
        st.error("**No total: the plan is infeasible.**\n\n" + "\n".join(f"- {md_escape(x)}" for x in res.infeasible)
                 + "\n\nThe pages below still show each stage's figures as planned, to help find a layout "
                   "that fits.", icon=":material/block:")
    else:
        cols = metric_row(5)
        cols[0].metric("Total cost", fmt.usd(res.total_usd), help=fmt.usd_exact(res.total_usd))
        cols[1].metric("GPU-hours (billed)", fmt.gpu_hours(res.gpu_hours).replace(" GPU-h", ""),
                       help=f"{res.gpu_hours:,.0f} GPU-hours")
        cols[2].metric("Fixed cost", fmt.usd(res.fixed_usd), help="people, platform, datasets bought outright and kept: "
                       + fmt.usd_exact(res.fixed_usd))
        cols[3].metric("Elastic cost", fmt.usd(res.elastic_usd), help="scales with GPU time, tokens and samples: "
                       + fmt.usd_exact(res.elastic_usd))
        one = max(res.stat(s, "num_gpus") for s in res.stages) if res.stages else 0
        # 128 became 160 with no GPU count changed: evaluation starts before RL ends (schedule overlap), said here
        cols[4].metric("Peak GPUs", f"{res.peak_gpus:,}", help="Most GPUs held at once. Stages run one after another; "
                       "one set to overlap the stage before it (Budget page, Timeline; evaluation starts halfway through "
                       "the stage before it by default) holds both sets at once" + (
                           f": here more than the {one:,.0f} of the largest stage." if res.peak_gpus > one + 0.5
                           else "."))
    training = [s for s in res.stages if s in api.TRAINING_STAGES]
    by_hand = [STAGE_LABELS[s] for s in training if not res.uses_layout(s)]
    if res.feasible and res.total_usd_p90 > res.total_usd_p10:
        st.caption(f"P10–P90: {fmt.usd(res.total_usd_p10)} – {fmt.usd(res.total_usd_p90)}, the step model's "
                   "out-of-sample error on public runs (the Validation page has the record)"
                   + (f"; none on {fmt.words_list(by_hand)}, whose MFU or throughput you set" if by_hand else "")
                   + ". The Sensitivity page's Monte Carlo also varies prices, failures, tokens and the other "
                     "uncertain inputs, so its range differs: usually wider, and off this one's centre where "
                     "those inputs lean one way (failures, tokens).")
    elif res.feasible and training and len(by_hand) == len(training):
        st.caption(f"No error band: the MFU or throughput of {fmt.words_list(by_hand)} is set by hand, so the "
                   "step model's record does not apply; the Sensitivity page's Monte Carlo varies it.")
    for w in res.warnings:
        st.warning(md_escape(w), icon="⚠️")
    budget_header(res)
    st.markdown(intro)
    return res


STATUS_COLORS = {"ok": "green", "unchecked": "gray", "warning": "orange", "over": "red"}
# memory per GPU by kind, in this order, one colour each on every page that draws it (the workbench drew optimizer
# states red and the Job layout page activations)
MEMORY_COLORS = ["#4C78A8", "#F58518", "#54A24B", "#E45756", "#9D755D"]  # weights, gradients, optimizer, activations, buffers


def budget_header(res: api.Result) -> None:
    """Budget status on every page: a coloured badge and one line per alert."""
    from costcore.analysis.budget import budget_status
    status = budget_status(res)
    if status is None:
        return
    st.badge(f"Budget: {'NOT CHECKED' if status['status'] == 'unchecked' else status['status'].upper()}",
             color=STATUS_COLORS[status["status"]],
             icon=":material/account_balance_wallet:")
    for a in status["alerts"]:
        (st.error if a["status"] == "over" else st.warning)(a["message"], icon=":material/error:" if a["status"] ==
                                                            "over" else ":material/warning:")


def show_checks(res: api.Result, stages=None) -> None:
    for w in explain.checks(res):
        if stages is None or any(w.startswith(s + ":") for s in stages) or ":" not in w.split(" ")[0]:
            st.warning(w, icon="⚠️")


def lazy_expander(label: str, key: str):
    """An expander whose content the caller draws only while it is open (``if box.open: with box: ...``).

    Opening or closing it reruns the page (``on_change="rerun"``), so a closed one costs a rerun
    nothing: the explanations of two phases were some 60 elements, each a message to the browser,
    drawn on every slider move although nobody had opened them.
    """
    return st.expander(label, key=key, on_change="rerun")


def lazy_tabs(tabs: dict, key: str) -> None:
    """Tabs (label -> function that draws it) of which only the open one is drawn.

    Choosing a tab reruns the page (``on_change="rerun"``); the first is open on a first visit. A slider
    moved in one tab then redraws that tab alone, not the charts and tables of the others, each of which
    is a message to the browser on every rerun. The open tab's label is ``st.session_state[key]``.
    """
    for tab, draw in zip(st.tabs(list(tabs), key=key, on_change="rerun"), tabs.values()):
        if tab.open:
            with tab:
                draw()


def how_computed(res: api.Result, stage: str) -> None:
    box = lazy_expander(f"How this was computed — {STAGE_LABELS[stage]}", f"how:{stage}")
    if not box.open:
        return
    with box:
        for title, formula, source in explain.stage_explanation(res, stage):
            st.markdown(f"**{title}**")
            st.latex(formula)
            st.caption(f"Source: {source}")


# ---------------------------------------------------------------------------
# Tables and charts
# ---------------------------------------------------------------------------
def in_words(df: pd.DataFrame) -> pd.DataFrame:
    """A copy of a table of stages, resources and line-item kinds with their keys in words (Pre-training,
    Hidden costs, Elastic) for the screen; the exports keep the keys."""
    words = {"stage": lambda c: c.map(STAGE_LABELS), "resource": lambda c: c.map(RESOURCE_LABELS),
             "kind": lambda c: c.str.capitalize()}
    return df.assign(**{c: f(df[c]) for c, f in words.items() if c in df.columns})


def resource_frame(res: api.Result, stages=None) -> pd.DataFrame:
    shown, usd = _shown_matrix(res, stages)
    return _resource_rows(shown, usd)


def _shown_matrix(res: api.Result, stages=None) -> tuple[tuple, np.ndarray]:
    """The enabled stages asked for (all by default) and their rows of the kernel's resource matrix, $."""
    shown = tuple(s for s in res.stages if not stages or s in stages)
    m = res.resource_matrix()
    return shown, np.ascontiguousarray(m[[STAGES.index(s) for s in shown]], dtype=float).reshape(len(shown), -1)


def _resource_rows(shown: tuple, usd: np.ndarray) -> pd.DataFrame:
    rows = []
    for i, s in enumerate(shown):
        for j, r in enumerate(RESOURCES):
            v = float(usd[i, j])
            rows.append({"stage": STAGE_SHORT[s], "stage_name": STAGE_LABELS[s], "stage_key": s, "resource": RESOURCE_LABELS[r],
                         "resource_key": r, "usd": v, "cost": fmt.usd(v), "exact": fmt.usd_exact(v)})
    return pd.DataFrame(rows, columns=["stage", "stage_name", "stage_key", "resource", "resource_key", "usd", "cost",
                                       "exact"])


def stacked_bar(res: api.Result, stages=None, height: int = 320):
    """The stages' cost by resource: one stage's resources side by side, or several stages stacked."""
    shown, usd = _shown_matrix(res, stages)
    if not shown:
        st.info("No stage is switched on.")
        return
    _stacked_bar(shown, usd, stages is not None and len(stages) == 1, height)


@st.cache_data(max_entries=256, show_spinner=False)
def _stacked_bar(shown: tuple, usd: np.ndarray, single: bool, height: int) -> None:
    """Cached on the kernel's numbers: a page with a bar per stage (Post-training has three) redraws only
    the stage a slider moved; building the rows and the chart was about 3.5 ms a bar on every rerun."""
    df = _resource_rows(shown, usd)
    if single:  # one stage: its resources side by side
        df = df[df.usd > 0]
        chart = alt.Chart(df).mark_bar().encode(
            y=alt.Y("resource:N", sort="-x", title="Resource"),
            x=alt.X("usd:Q", title=f"{STAGE_LABELS[shown[0]]}: cost by resource ($)", axis=usd_axis(8)),
            color=alt.Color("resource:N", legend=None, scale=resource_scale()),
            tooltip=[alt.Tooltip("resource:N", title="Resource"), alt.Tooltip("exact:N", title="Cost")])
        # a step per bar: a pixel height is the whole chart's once Streamlit fits it to the page (title and axes
        # included), and with 5-7 resources Vega then hid every other label (Operations, Compute unlabelled)
        show_chart(chart, f"{STAGE_LABELS[shown[0]]}: where the money goes", height=alt.Step(28))
        return
    order = [STAGE_SHORT[s] for s in STAGES]
    chart = alt.Chart(df).mark_bar().encode(
        x=alt.X("stage:N", sort=order, title="Stage", axis=stage_axis()),
        y=alt.Y("sum(usd):Q", title="Cost ($)", axis=usd_axis()),
        color=alt.Color("resource:N", title="Resource", scale=resource_scale()),
        order=alt.Order("resource_key:N"),
        tooltip=[alt.Tooltip("stage_name:N", title="Stage"), alt.Tooltip("resource:N", title="Resource"),
                 alt.Tooltip("exact:N", title="Cost")])
    show_chart(chart, "Cost of each stage by resource", height=height)


# Altair checks a whole chart against the Vega-Lite JSON schema on every to_dict: 57% of the time
# the Sensitivity page spent on its charts (py-spy, Dec 2026), on every rerun, for specs the code
# builds the same way each time. The test suite checks them (tests/conftest.py sets this variable,
# and every page's charts are drawn through AppTest); a served page skips the check.
CHECK_CHART_SCHEMA = os.environ.get("COSTCORE_CHECK_CHART_SCHEMA") == "1"
if not CHECK_CHART_SCHEMA:  # nor each alt.Scale, alt.Axis... as it is built (Altair's debug mode, on by default)
    alt.utils.schemapi.disable_debug_mode()


def show_chart(chart, title: str, height=None) -> None:
    """Every chart with a title in words (tests/test_readability.py checks titles, axes and legends);
    ``height``: pixels or an ``alt.Step``. Set on a shallow copy: Altair's ``properties()`` deep-copies
    and validates the whole chart, a few ms a chart on every rerun."""
    chart = chart.copy(deep=False)
    chart.title = title
    if chart.config is alt.Undefined:  # Vega-Lite cuts legend labels at 160 px: "Preference alignment (D…"
        chart.config = LEGEND_CONFIG
    if height is not None:
        chart.height = height
    try:  # the chart's whole content, data included: equal bytes are an equal chart
        key = hashlib.blake2b(pickle.dumps(chart, protocol=5), digest_size=16).digest()
    except Exception:  # noqa: BLE001 - something in it does not pickle: draw it without the cache
        _draw_chart(chart)
        return
    _draw_chart_cached(key, chart)


# Dollar axes and legends: d3's SI prefix writes a billion as "G" ($1G); a person reads $1B. On a linear
# axis each label is formatted on its own, so a zero reads $0 (with one shared prefix, Vega wrote $0M next
# to $2M); on a log scale Vega's own labels are kept (it leaves the ticks between decades unlabelled,
# and labelling them all made it drop decades instead: 400M, 50M, 6M), with only the G replaced.
USD_LABEL_EXPR = "replace(format(datum.value, '$~s'), 'G', 'B')"
LOG_LABEL_EXPR = "replace(datum.label, 'G', 'B')"


def usd_axis(ticks: int | None = None, log: bool = False) -> alt.Axis:
    """An axis of dollars: $0, $500k, $20M, $1.5B; ``ticks``: about how many (Vega's default put 23 on a
    $4.4k axis, "$1.2k$1.4k" touching); ``log``: on a log scale."""
    return alt.Axis(format="$~s", labelExpr=LOG_LABEL_EXPR if log else USD_LABEL_EXPR,
                    **({"tickCount": ticks} if ticks else {}))


def stage_axis() -> alt.Axis:
    """A horizontal axis of stages by their short names, each word of a name on its own line.

    Nine stages side by side leave about 80 px a bar on a laptop; "Multimodal align" on one line took more,
    and Vega hid every other label (CPT, SFT, RL unlabelled).
    """
    return alt.Axis(labelAngle=0, labelExpr="split(datum.label, ' ')", labelOverlap=False)


def usd_legend(log: bool = False) -> alt.Legend:
    """A colour legend of dollars, labelled as :func:`usd_axis` (``log``: on a log colour scale)."""
    return alt.Legend(format="$~s", labelExpr=LOG_LABEL_EXPR if log else USD_LABEL_EXPR)


LEGEND_CONFIG = alt.Config(legend=alt.LegendConfig(labelLimit=320))


def spread_labels(x, y, text, width_px: float, height_px: float, domain, char_px: float = 5.6,
                  line_px: float = 12.0) -> np.ndarray:
    """y positions (data units) for point labels on a log-log chart so that no two overlap: each label
    starts beside its point (to the right, a line above) and moves down, then up, a line at a time
    until its box is clear of the ones placed before it (points taken from the top). A label moved
    this way stays next to its point: twelve runs between 300k and 3M GPU-hours all had their names
    written over each other."""
    lo, hi = math.log10(domain[0]), math.log10(domain[1])
    px = lambda v, size: (np.log10(np.asarray(v, dtype=float)) - lo) / (hi - lo) * size  # noqa: E731
    xs, ys = px(x, width_px), px(y, height_px) + 6.0  # label baseline a little above the point
    boxes: list[tuple[float, float, float]] = []  # (left, right, y)
    out = np.empty(len(xs))
    for i in np.argsort(-ys, kind="stable"):
        left, right = xs[i] + 7.0, xs[i] + 7.0 + char_px * len(str(text[i]))
        for k in range(41):
            cand = ys[i] + line_px * ((-1) ** k) * ((k + 1) // 2)
            if all(right < b0 or left > b1 or abs(cand - by) >= line_px for b0, b1, by in boxes):
                break
        boxes.append((left, right, cand))
        out[i] = 10 ** (lo + cand / height_px * (hi - lo))
    return out


def layer(*charts, independent_colors: bool = False):
    """``alt.layer(*charts)`` (or ``a + b``) without its copies: Altair deep-copies every layer to lift
    selection parameters to the top, 2-3 ms a layered chart on every rerun (7 of the Checkpoints page's
    53 ms with ``.properties`` and ``.resolve_scale``). For layers with no parameters the spec is the
    same (tests/test_readability.py checks it); ``independent_colors``: each layer its own colour legend."""
    if any(getattr(c, "params", alt.Undefined) is not alt.Undefined for c in charts):  # a selection: Altair's way
        out = alt.layer(*charts)
        return out.resolve_scale(color="independent") if independent_colors else out
    out = alt.LayerChart()
    out.layer = list(charts)
    if independent_colors:
        out.resolve = alt.Resolve(scale=alt.ScaleResolveMap(color="independent"))
    return out


@st.cache_data(max_entries=512, show_spinner=False)
def _draw_chart_cached(key: bytes, _chart) -> None:
    """Turning a chart into Vega-Lite and its data into Arrow was a quarter of a Budget-page rerun
    (py-spy on a served app, Dec 2026), mostly for charts the rerun left as they were; st.cache_data
    keeps the drawn element per chart content and replays it."""
    _draw_chart(_chart)


def _draw_chart(chart) -> None:
    if not CHECK_CHART_SCHEMA:  # Streamlit calls chart.to_dict() (streamlit/elements/vega_charts.py)
        object.__setattr__(chart, "to_dict", functools.partial(chart.to_dict, validate=False))  # not a chart property
    st.altair_chart(chart, width="stretch")


STAGE_COLOR_BY_LABEL = {STAGE_LABELS[s]: c for s, c in STAGE_COLORS.items()}


def stage_color_scale(labels) -> alt.Scale:
    """Colours for a chart's stages (labels in words): only the stages it shows are in its legend,
    each in the colour it has on every page, in plan order."""
    shown = set(labels)
    domain = [lab for lab in STAGE_COLOR_BY_LABEL if lab in shown]
    return alt.Scale(domain=domain, range=[STAGE_COLOR_BY_LABEL[lab] for lab in domain])
STAGE_SHORT_COLORS = {STAGE_SHORT[s]: c for s, c in STAGE_COLORS.items()}


def _code_key(f) -> tuple:
    """What a formatter computes, as a key that is the same on every rerun: a lambda made anew on each
    run of a page has the same code, constants and closure values each time."""
    code = getattr(f, "__code__", None)
    if code is None:
        return (repr(f),)
    cells = tuple(repr(c.cell_contents) for c in (f.__closure__ or ()))
    names = []  # the globals it reads (a page's `unit`): their values, so a changed one is a new key
    for name in code.co_names:
        if name in f.__globals__:
            v = f.__globals__[name]
            names.append((name, getattr(v, "__name__", None) if callable(v) or isinstance(v, types.ModuleType)
                          else repr(v)))
    return (code.co_filename, code.co_firstlineno, code.co_code, repr(code.co_consts), repr(f.__defaults__), cells,
            tuple(names))


def number_table(df: pd.DataFrame, formats: dict, headers: dict | None = None, helps: dict | None = None,
                 **kwargs) -> None:
    """A table whose numbers are shown in words (``formats``: column -> formatter, e.g. fmt.usd) but stay
    numbers underneath, so a click on a header sorts $900k before $1.20M. The shown text is a pandas
    Styler display value on a NumberColumn; ``headers``: column -> words, ``helps``: column -> tooltip.

    The table is drawn once per content: rendering a Styler is 10-20 ms for a hundred rows (the Budget
    page's line items were 17 ms of its 115 ms rerun), and most reruns show the same table again, so the
    element is kept by st.cache_data (keyed on the frame's values and the formatters' code) and replayed."""
    try:  # the frame's whole content (values, dtypes, column names) as 16 bytes
        values = hashlib.blake2b(pickle.dumps(df.reset_index(drop=True), protocol=5), digest_size=16).digest()
    except Exception:  # noqa: BLE001 - a cell that does not pickle: draw it without the cache
        _number_table(df, formats, headers, helps, kwargs)
        return
    key = (values,
           tuple((c, _code_key(f)) for c, f in formats.items()), repr(headers), repr(helps), repr(sorted(kwargs.items())))
    _number_table_cached(key, df, formats, headers, helps, kwargs)


@st.cache_data(max_entries=512, show_spinner=False)
def _number_table_cached(key, _df, _formats, _headers, _helps, _kwargs) -> None:
    _number_table(_df, _formats, _headers, _helps, _kwargs)


def _number_table(df: pd.DataFrame, formats: dict, headers, helps, kwargs: dict) -> None:
    headers, helps, formats, kwargs = dict(headers or {}), dict(helps or {}), dict(formats), dict(kwargs)
    own = set(kwargs.get("column_config") or {})
    widths = kwargs.pop("widths", None) or {}  # column -> "small" / "medium" / "large" (else sized to its content)
    columns = {}  # one frame built at once: setting its columns one by one was 4 ms of a 6 x 11 table
    for c in df.columns:
        col = df[c]
        if c in formats:
            columns[c] = pd.to_numeric(col, errors="coerce").to_numpy(dtype=float)
        elif c not in own and pd.api.types.is_float_dtype(col):  # not formatted by the caller: 3 significant digits
            formats[c] = fmt.num
            columns[c] = col.to_numpy()
        elif c not in own and col.dtype == object:  # blank for "no value"
            columns[c] = [("" if v is None or (isinstance(v, float) and math.isnan(v)) else v) for v in col]
        else:
            columns[c] = col.to_numpy()
    data = pd.DataFrame(columns, columns=list(df.columns))
    cfg = {}
    for c in data.columns:
        words = headers.get(c, c.replace("_", " ").capitalize())
        cfg[c] = (st.column_config.NumberColumn(words, help=helps.get(c), width=widths.get(c)) if c in formats
                  else st.column_config.Column(words, help=helps.get(c), width=widths.get(c)))
    shown = _display_styler(data, formats)
    kwargs.setdefault("width", "stretch")
    kwargs.setdefault("placeholder", NO_VALUE)
    st.dataframe(shown, hide_index=True, column_config=cfg | kwargs.pop("column_config", {}), **kwargs)


NO_VALUE = "–"  # a missing value: Streamlit draws its own grey "None" for a null cell unless told otherwise


def _display_styler(data: pd.DataFrame, formats: dict):
    """A pandas Styler that carries each formatted cell's text, made without Styler's renderer.

    st.dataframe sends a Styler as the frame's values plus a second frame of display strings, which it
    reads from ``Styler._translate`` (streamlit/elements/lib/pandas_styler_utils.py). Styler's own
    ``format`` + ``_translate`` render every cell, header and CSS class of the table: 17-19 ms for the
    overview's 6 x 11 stage table, against 9 ms when the text is computed here and handed over as the
    translated body (ids ``row{i}_col{j}``, the only keys streamlit reads from it). The numbers
    underneath are unchanged, so a header click still sorts by value. Should either library change
    those private names, the Styler's own formatter is used (same text, slower)."""
    cols = list(data.columns)
    text = {cols.index(c): [NO_VALUE if pd.isna(v) else f(float(v)) for v in data[c]] for c, f in formats.items()}
    styler = data.style
    if not (callable(getattr(styler, "_compute", None)) and callable(getattr(styler, "_translate", None))):
        return styler.format({c: (lambda f: lambda v: NO_VALUE if pd.isna(v) else f(float(v)))(f)
                              for c, f in formats.items()})
    body = [[{"id": f"row{i}_col{j}", "display_value": col[i]} for j, col in text.items()]
            for i in range(len(data))]
    styler._compute = lambda: styler
    styler._translate = lambda *_args, **_kwargs: {"body": body}
    return styler


MONEY_HELP = "3 significant digits; the CSV export keeps the exact value"


def money_table(df: pd.DataFrame, money_cols, headers: dict | None = None, formats: dict | None = None,
                helps: dict | None = None, **kwargs) -> None:
    """A table with money at 3 significant digits ($24.9M), sorting by the amounts; the exact values are
    in the CSV export and the column's tooltip says so. ``headers``: column -> words; ``formats``: other
    numeric columns -> their formatter (fmt.gpu_hours, fmt.days); ``kwargs`` go to st.dataframe."""
    headers = {c: c.capitalize() for c in money_cols} | dict(headers or {})
    number_table(df, {c: fmt.usd for c in money_cols} | dict(formats or {}), headers,
                 {c: MONEY_HELP for c in money_cols} | dict(helps or {}), **kwargs)


def metric_row(n: int) -> list:
    """n slots for metrics side by side, filled in order (``m[0].metric(...)``, then ``m[1]`` ...).

    One horizontal container instead of st.columns(n): a row of four metrics was nine blocks and
    elements, each a message the server sends on every rerun; now it is five."""
    return [st.container(horizontal=True, gap="medium")] * n


def stage_metrics(res: api.Result, stage: str) -> None:
    c = metric_row(4)
    runs = res.stat(stage, "fits") > 0.5
    # a stage that cannot run as laid out: its figures are those of the nearest layout, marked on each (an RL stage
    # on 4 GPUs read "$17.9M, 3,060 days, 300 GB" as plain figures)
    mark = {} if runs else {"delta": "cannot run as laid out", "delta_color": "inverse", "delta_arrow": "off"}
    c[0].metric(f"{STAGE_LABELS[stage]} cost", fmt.usd(res.stat(stage, "usd_total")),
                help=fmt.usd_exact(res.stat(stage, "usd_total")), **mark)
    c[1].metric("GPU-hours (billed)", fmt.gpu_hours(res.stat(stage, "gpu_hours")),
                help=f"productive {res.stat(stage, 'productive_gpu_hours'):,.0f} GPU-h", **mark)
    c[2].metric("Wall-clock", fmt.days(res.stat(stage, "wall_days")),
                help=f"One run on {fmt.gpus(res.stat(stage, 'num_gpus'))}; the billed GPU-hours also count the "
                     "failed runs and repeated experiments, so they can exceed wall-clock x GPUs.", **mark)
    mem, usable = res.stat(stage, "memory_per_gpu_gb"), res.stat(stage, "usable_memory_gb")
    # "47.3 GB, does not fit" on an 80 GB GPU: the nearest layout's memory, which is not what stops the stage
    why = "does not fit" if mem > usable else "cannot run as laid out"
    c[3].metric("Memory per GPU", fmt.gb(mem),
                help=f"of {fmt.gb(usable)} usable; " + ("fits" if runs else (
                    "more than the GPU holds" if mem > usable else
                    "the nearest layout's: memory is not what stops this stage (the message above says what does)")),
                **({} if runs else {"delta": why, "delta_color": "inverse", "delta_arrow": "off"}))
