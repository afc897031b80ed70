"""Validation of the multimodal block and phases (issue 17): one plain sentence naming the field.

``multimodal.encoder`` given as a mapping of figures becomes the ``custom`` encoder plus those
fields (as a custom GPU does for ``hardware.gpu``); a phase's ``train: [connector, llm, encoder]``
list becomes its three ``train_*`` switches; and the rules that need several fields at once
(something is trained, the encoder takes the modality and the resolution, the media fit in the
sequence, features can only be precomputed for a frozen encoder) are checked on the validated
scenario with the kernel's own formulas (:mod:`costcore.engine.formulas`), so the message and the
estimate count the same tokens.
"""
from __future__ import annotations

from costcore.errors import ScenarioError
from costcore.scenario.checks import _shown as _show

TRAIN_PARTS = ("connector", "llm", "encoder")
# multimodal.encoder as a mapping: its keys -> the multimodal fields they set.
CUSTOM_ENCODER_KEYS = {"name": "encoder_name", "params_b": "encoder_params_b", "layers": "encoder_layers",
                       "hidden": "encoder_hidden", "patch_px": "patch_px", "resolution_px": "resolution_px",
                       "max_resolution_px": "max_resolution_px", "tokens_per_item": "encoder_tokens",
                       "tokens_per_second": "audio_tokens_per_second", "max_seconds": "max_seconds"}
CUSTOM_ENCODER_REQUIRED = ("params_b",)


def custom_encoder(data: dict) -> dict:
    """``multimodal.encoder`` as a mapping -> encoder ``custom`` plus the fields its keys set.

    ``tokens_per_item`` of the mapping is the encoder's own output per image (or window), before
    the connector; keys also set directly in ``multimodal`` must agree.
    """
    mm = data.get("multimodal")
    if not isinstance(mm, dict) or not isinstance(mm.get("encoder"), dict):
        return data
    spec = mm["encoder"]
    out = {k: v for k, v in mm.items() if k != "encoder"}
    for k, v in spec.items():
        if not isinstance(k, str) or k not in CUSTOM_ENCODER_KEYS:
            raise ScenarioError(_where("multimodal", "encoder", k), "unknown figure of a custom encoder; allowed: "
                                + ", ".join(CUSTOM_ENCODER_KEYS))
        target = CUSTOM_ENCODER_KEYS[k]
        if target in out and out[target] != v:
            raise ScenarioError(f"multimodal.encoder.{k}", f"conflicts with multimodal.{target}; set it in one place")
        out[target] = v
    for k in CUSTOM_ENCODER_REQUIRED:
        if k not in spec:
            raise ScenarioError(f"multimodal.encoder.{k}", "a custom encoder needs its size in billions of "
                                "parameters (params_b), e.g. {params_b: 0.4, tokens_per_item: 729}")
    out["encoder"] = "custom"
    return dict(data, multimodal=out)


def _where(*parts) -> str:
    from costcore.scenario.schema import _path
    return _path(*parts)


def with_train_list(sname: str, sdata: dict) -> dict:
    """A multimodal phase's ``train:`` list (connector, llm, encoder) unfolded into its three switches."""
    from costcore.scenario.schema import MM_STAGES
    if sname not in MM_STAGES or "train" not in sdata:
        return sdata
    parts = sdata["train"]
    if isinstance(parts, str):
        parts = [parts]
    where = f"stages.{sname}.train"
    if not isinstance(parts, list) or not all(isinstance(p, str) and p in TRAIN_PARTS for p in parts):
        raise ScenarioError(where, "must be a list of what the phase trains, from: " + ", ".join(TRAIN_PARTS)
                            + f" (got {_show(sdata['train'])})", allowed="a list from " + ", ".join(TRAIN_PARTS))
    out = {k: v for k, v in sdata.items() if k != "train"}
    for part in TRAIN_PARTS:
        key = f"train_{part}"
        flag = part in parts
        if key in out and out[key] is not flag:
            raise ScenarioError(where, f"conflicts with stages.{sname}.{key}; set it in one place")
        out[key] = flag
    return out


def multimodal_rules(scn: dict, raw: dict) -> None:
    """The rules of the multimodal block and phases that need several fields (one sentence each)."""
    from costcore.scenario.schema import ENCODERS, MM_STAGES, effective_value
    raw_mm = raw.get("multimodal") if isinstance(raw.get("multimodal"), dict) else {}
    if raw_mm.get("tokens_per_item", None) == 0 and not isinstance(raw_mm.get("tokens_per_item"), bool):
        raise ScenarioError("multimodal.tokens_per_item", "0 media tokens per item would give the language model "
                            "nothing to see; give 1 to 10,000,000 tokens, or leave it out to derive it from the "
                            "encoder", value=0, allowed="1 to 10,000,000, or unset")
    phases = [s for s in MM_STAGES if s in scn.get("stages", {})]
    if not phases and "multimodal" not in scn:
        return

    def ev(path):
        return effective_value(scn, path)

    modality, encoder = ev("multimodal.modality"), ev("multimodal.encoder")
    enc_kind = ENCODERS[encoder].get("modality", "image")
    label = ENCODERS[encoder].get("label", encoder)
    if encoder != "custom" and (enc_kind == "audio") != (modality == "audio"):
        want = "an audio encoder (a Whisper encoder)" if modality == "audio" else "an image encoder (CLIP, SigLIP ...)"
        raise ScenarioError("multimodal.encoder", f"{label} encodes {enc_kind}, but the media type is {modality}; "
                            f"pick {want} or change multimodal.modality", value=encoder)
    if modality == "audio":
        if "resolution_px" in (scn.get("multimodal") or {}):
            raise ScenarioError("multimodal.resolution_px", "applies to images and video, not to audio; set "
                                "multimodal.seconds_per_item for the clips' length")
    else:
        res, patch, top = float(ev("multimodal.resolution_px")), float(ev("multimodal.patch_px")), \
            float(ev("multimodal.max_resolution_px"))
        if patch > top:
            raise ScenarioError("multimodal.patch_px", f"a patch of {patch:,.0f} pixels is larger than the largest "
                                f"input {label} takes ({top:,.0f} pixels a side)", value=patch,
                                allowed=f"1 to {top:,.0f} pixels")
        if res < patch or res > top:
            raise ScenarioError("multimodal.resolution_px", f"{label} takes images from {patch:,.0f} to {top:,.0f} "
                                f"pixels a side (got {res:,.0f}); use multimodal.tiles_per_item for more detail, "
                                "or an encoder that takes larger inputs", value=res,
                                allowed=f"{patch:,.0f} to {top:,.0f} pixels")
    _phase_rules(scn, phases, ev)


def media_tokens(scn: dict, stage: str) -> tuple[float, float]:
    """(encoder tokens per pass, LLM tokens per item) of a phase, by the kernel's formulas."""
    from costcore.engine import formulas as fm
    from costcore.scenario.schema import BY_PATH, effective_value

    def ev(path):
        v = effective_value(scn, path)
        f = BY_PATH[path]
        return float(f.choices.index(v)) if f.kind == "enum" else float(v)

    mod = ev("multimodal.modality")
    t_pass = fm.encoder_tokens_per_pass(mod, ev("multimodal.resolution_px"), ev("multimodal.patch_px"),
                                        ev("multimodal.encoder_tokens"), ev("multimodal.audio_tokens_per_second"),
                                        ev("multimodal.max_seconds"))
    passes = fm.encoder_passes_per_item(mod, ev("multimodal.tiles_per_item"), ev("multimodal.frames_per_item"),
                                        ev("multimodal.seconds_per_item"), ev("multimodal.max_seconds"))
    tok = ev(f"stages.{stage}.tokens_per_item") or ev("multimodal.tokens_per_item")
    if tok <= 0:
        tok = fm.media_tokens_per_item(mod, passes, t_pass, ev("multimodal.seconds_per_item"),
                                       ev("multimodal.max_seconds"), ev("multimodal.connector"),
                                       ev("multimodal.connector_queries"), ev("multimodal.token_compression"))
    return float(t_pass), float(tok)


def _phase_rules(scn: dict, phases: list, ev) -> None:
    modality = ev("multimodal.modality")
    words = {"image": "images", "video": "clips", "audio": "recordings"}[modality]
    for s in phases:
        if not any(ev(f"stages.{s}.train_{p}") for p in TRAIN_PARTS):
            raise ScenarioError(f"stages.{s}.train", "a phase that trains nothing has nothing to plan; train the "
                                "connector, the llm or the encoder", allowed="a list from " + ", ".join(TRAIN_PARTS))
        if ev(f"stages.{s}.train_encoder") and ev("multimodal.precomputed_features"):
            raise ScenarioError("multimodal.precomputed_features", f"stages.{s} trains the encoder, so its features "
                                "change every step and cannot be computed once; turn one of them off")
        t_pass, tok = media_tokens(scn, s)
        if t_pass <= 0 or tok <= 0:
            raise ScenarioError("multimodal.encoder_tokens", "the encoder gives 0 tokens per item with these "
                                "settings; set multimodal.encoder_tokens or multimodal.audio_tokens_per_second")
        items, text, seq = float(ev(f"stages.{s}.items_per_sample")), float(ev(f"stages.{s}.text_tokens_per_sample")), \
            float(ev(f"stages.{s}.seq_len"))
        need = text + items * tok
        if need > seq:
            raise ScenarioError(f"stages.{s}.items_per_sample",
                                f"{items:,.4g} {words if items != 1 else words[:-1]} x {tok:,.0f} tokens + {text:,.0f} text tokens = {need:,.0f} "
                                f"tokens, more than the sequence length of {seq:,.0f} (stages.{s}.seq_len); use fewer "
                                f"{words} per sample, fewer tokens per item or a longer sequence",
                                value=items, allowed=f"at most {max(0.0, (seq - text) / tok):,.4g}")


def pick_encoder(scn: dict, name: str) -> dict:
    """A copy of ``scn`` whose encoder is the shipped encoder ``name``: the old encoder's figures and a
    custom name go (they belong to the old one), so the new one's come from encoders.yaml."""
    from costcore.scenario.schema import ENCODER_KEYS
    mm = {k: v for k, v in (scn.get("multimodal") or {}).items() if k not in ENCODER_KEYS and k != "encoder_name"}
    mm["encoder"] = name
    return dict(scn, multimodal=mm)
