"""Hypothesis strategies shared by the property, parity and contract tests.

``scenarios()`` draws random *valid* scenarios: every field of
``costcore.scenario.schema.FIELDS`` may be set to a value inside its [lo, hi] range
(log-uniform for wide ranges, so 1e-3 and 1e6 are both likely), and a random
subset of the six stages is enabled.
"""
from __future__ import annotations

import math
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from costcore.scenario.schema import BY_PATH, FIELDS, STAGE_KEYS, STAGES, Field

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TRAIN_STAGES = ("pretrain", "cpt", "sft", "dpo", "rl")
PEFT_STAGES = ("sft", "dpo", "rl")
WIDE = 1000.0  # hi/lo above which values are drawn log-uniformly
SHIPPED_HF_CONFIGS = tuple(sorted(p.stem for p in (Path(__file__).resolve().parent.parent / "costcore" / "data"
                                                     / "hf_configs").glob("*.json")))


# ---------------------------------------------------------------------------
# Strategies
# ---------------------------------------------------------------------------
def field_values(f: Field, lo: float | None = None, hi: float | None = None) -> st.SearchStrategy:
    """Valid values of one field, optionally inside a narrower [lo, hi]."""
    if f.kind == "enum":
        return st.sampled_from(f.choices)
    if f.kind == "bool":
        return st.booleans()
    if f.kind == "str":  # model.hf_config: none, or one of the shipped configs by name
        return st.sampled_from(("",) + SHIPPED_HF_CONFIGS)
    lo = f.lo if lo is None else max(lo, f.lo)
    hi = f.hi if hi is None else min(hi, f.hi)
    min_nonzero = getattr(f, "min_nonzero", 0.0)
    if lo <= 0.0 and min_nonzero > 0.0:  # "0 = auto" fields: 0, or at least min_nonzero
        inner = Field(path=f.path, index=f.index, kind=f.kind, lo=min_nonzero, hi=hi)
        return st.one_of(st.just(0 if f.kind == "int" else 0.0), field_values(inner))
    if lo <= 0.0:
        floor = hi * 1e-7 if f.kind == "float" else 1.0
        if floor >= hi:
            core = st.floats(lo, hi)
        else:
            core = _log_uniform(floor, hi) if hi / floor > WIDE else st.floats(floor, hi)
        vals = st.one_of(st.just(lo), core)
    elif hi / lo > WIDE:
        vals = st.one_of(st.just(lo), _log_uniform(lo, hi))
    else:
        vals = st.floats(lo, hi)
    if f.kind == "int":
        return vals.map(lambda x: int(min(hi, max(lo, round(x)))))
    return vals.map(lambda x: float(min(hi, max(lo, x))))


def _log_uniform(lo: float, hi: float) -> st.SearchStrategy:
    return st.floats(math.log(lo), math.log(hi)).map(math.exp)


GLOBAL_FIELDS = [f for f in FIELDS if not f.path.startswith("stages.")]
NUMERIC_GLOBAL_FIELDS = [f for f in GLOBAL_FIELDS if f.kind != "str"]  # what a batch column can vary


def _put(d: dict, dotted: str, value) -> None:
    parts = dotted.split(".")
    for p in parts[:-1]:
        d = d.setdefault(p, {})
    d[parts[-1]] = value


def consistent_stage(sdata: dict) -> dict:
    """A stage's drawn settings made to obey schema._stage_rules: base bits 16, 8 or 4 (16 for a full
    fine-tune, not 8 for QLoRA), an evaluation's weight bits 16, 8 or 4, CPU offload only with a ZeRO stage that allows it, and DualPipe only on
    an even (or searched) pipeline without interleaving."""
    if "base_bits" in sdata:
        bits = min((16, 8, 4), key=lambda b: abs(b - sdata["base_bits"]))
        method = sdata.get("method", "full")
        if method == "full" or (method == "qlora" and bits == 8):
            bits = 16
        sdata["base_bits"] = bits
    if "weight_bits" in sdata:  # an evaluation's decoding weights: the same three widths
        sdata["weight_bits"] = min((16, 8, 4), key=lambda b: abs(b - sdata["weight_bits"]))
    need = {"none": 0, "optimizer": 2, "optimizer_and_params": 3}[sdata.get("offload", "none")]
    if 0 <= sdata.get("zero_stage", -1) < need:
        sdata["offload"] = "none"
    if sdata.get("schedule") == "dualpipe" and (sdata.get("pp", 0) % 2 or sdata.get("pp", 0) == 1
                                                 or sdata.get("interleave", 0) > 1):
        sdata["schedule"] = "auto"
    return sdata


def consistent_media(scn: dict) -> dict:
    """Drawn multimodal settings made to obey scenario.media's rules: the encoder takes the media type
    and the resolutions (the block's and a phase's own), a phase trains something, features are precomputed only for a frozen encoder,
    and a sample's media and text fit its sequence (items per sample cut to what fits)."""
    from costcore.scenario import media
    from costcore.scenario.schema import ENCODERS, MM_STAGES, effective_value
    mm = scn.setdefault("multimodal", {})
    for key in ("patch_px", "max_resolution_px", "encoder_tokens", "audio_tokens_per_second", "max_seconds"):
        mm.pop(key, None)  # the encoder's own figures
    if mm.get("tokens_per_item") == 0:
        del mm["tokens_per_item"]
    kind = ENCODERS[mm.get("encoder", "clip-vit-l-14-336")].get("modality", "any")
    if kind == "audio":
        mm["modality"] = "audio"
    elif kind == "image" and mm.get("modality") == "audio":
        mm["modality"] = "image"
    if mm.get("modality") == "audio":
        mm.pop("resolution_px", None)
    elif "resolution_px" in mm:
        lo, hi = float(effective_value(scn, "multimodal.patch_px")), float(effective_value(scn, "multimodal.max_resolution_px"))
        mm["resolution_px"] = int(min(max(mm["resolution_px"], lo), hi))
    for s in MM_STAGES:
        sdata = scn.get("stages", {}).get(s)
        if sdata is None:
            continue
        if sdata.get("resolution_px"):  # a phase's own resolution: images and video, within the encoder's range
            if mm.get("modality") == "audio":
                del sdata["resolution_px"]
            else:
                lo = float(effective_value(scn, "multimodal.patch_px"))
                hi = float(effective_value(scn, "multimodal.max_resolution_px"))
                sdata["resolution_px"] = int(min(max(sdata["resolution_px"], lo), hi))
        if not any(sdata.get(f"train_{p}", effective_value(scn, f"stages.{s}.train_{p}")) for p in media.TRAIN_PARTS):
            sdata["train_connector"] = True
        if sdata.get("train_encoder") and mm.get("precomputed_features"):
            mm["precomputed_features"] = False
        seq = float(effective_value(scn, f"stages.{s}.seq_len"))
        text = float(effective_value(scn, f"stages.{s}.text_tokens_per_sample"))
        if text > seq / 2:
            sdata["text_tokens_per_sample"] = math.floor(seq / 2)
            text = sdata["text_tokens_per_sample"]
        tok = media.media_tokens(scn, s)[1]
        items = float(effective_value(scn, f"stages.{s}.items_per_sample"))
        if text + items * tok > seq:
            sdata["items_per_sample"] = math.floor((seq - text) / tok * 100) / 100
    return scn


@st.composite
def scenarios(draw, stages=None, min_stages=1, max_set=20, fixed=None):
    """A random valid scenario.

    stages: the stages to enable (default: a random non-empty subset).
    max_set: at most this many global fields, and per stage this many stage
    fields, are set explicitly (the rest keep their defaults).
    fixed: {dotted path: value} applied last.
    """
    scn: dict = {}
    chosen = draw(st.lists(st.sampled_from(GLOBAL_FIELDS), max_size=max_set, unique=True), label="globals")
    for f in chosen:
        _put(scn, f.path, draw(field_values(f), label=f.path))
    model = scn.get("model", {})
    if model.get("name") and model.get("hf_config") and model["name"] != model["hf_config"]:
        del model["name"]  # one source of the shape (schema._model_name refuses two)
    if stages is None:
        # at most six stages, as many as the planner had before the multimodal phases: every stage is drawn
        # as often as before, and one example costs no more kernel time than it did
        stages = draw(st.lists(st.sampled_from(STAGES), min_size=min_stages, max_size=6, unique=True), label="stages")
    scn["stages"] = {}
    for s in STAGES:  # in pipeline order
        if s not in stages:
            continue
        keys = sorted(STAGE_KEYS[s] - {"enabled"})
        sdata = {}
        for key in draw(st.lists(st.sampled_from(keys), max_size=max_set, unique=True), label=s):
            sdata[key] = draw(field_values(BY_PATH[f"stages.{s}.{key}"]), label=f"{s}.{key}")
        scn["stages"][s] = consistent_stage(sdata)
    consistent_media(scn)
    for path, value in (fixed or {}).items():
        _put(scn, path, value)
    consistent_shape(scn)
    consistent_throughput(scn)
    return scn


def consistent_throughput(scn: dict) -> dict:
    """Drawn measured TFLOP/s per GPU above the GPU's peak, and drawn peaks that put the FP8 one above twice
    the BF16 one in an FP8 job (schema._throughput_rules), are dropped."""
    from costcore.scenario.schema import ScenarioError, validate
    for _ in range(len(STAGES) + 1):
        try:
            validate(scn)
            return scn
        except ScenarioError as err:
            if err.path == "hardware.fp8_peak_tflops":
                for key in ("peak_tflops", "fp8_peak_tflops"):
                    scn.get("hardware", {}).pop(key, None)
                continue
            parts = err.path.split(".")
            if len(parts) != 3 or parts[2] != "tflops_per_gpu":
                return scn
            scn["stages"][parts[1]].pop("tflops_per_gpu", None)
    return scn


def consistent_shape(scn: dict) -> dict:
    """A drawn model made to obey schema._shape_rules (a dense size and whole shape agree: 1.5x above, 3x below)
    and _active_rule (at most all parameters active; more: all active): the drawn MLP width goes (the shape
    then follows the size), then the drawn depth and width, then the drawn size, then the named config."""
    from costcore.scenario.schema import ScenarioError, validate
    model = scn.get("model") or {}
    steps = [("ffn",), ("layers", "hidden"), ("params_b", "active_params_b"), ("name", "hf_config")]
    for _ in range(len(steps) + 3):
        try:
            validate({"model": model})
            return scn
        except ScenarioError as err:
            if err.path == "model.active_params_b":  # the drawn active share, else the drawn size of a named MoE
                model.pop("active_params_b" if "active_params_b" in model else "params_b", None)
                continue
            if err.path != "model.params_b" or not steps:
                return scn
            for key in steps.pop(0):
                model.pop(key, None)
    return scn
