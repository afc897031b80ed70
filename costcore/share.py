"""Scenario <-> URL query parameters.

A shared link carries the preset name (``p``) and only the values that
differ from that preset, one query parameter per dotted path
(``stages.sft.method=lora``). Stages switched off carry ``=off``, stages
switched on with defaults ``=on``. A custom name travels as ``name``.
Decoding never raises: each bad parameter becomes a warning naming it, and
the default is kept.
"""
from __future__ import annotations

import copy
from . import api, schema
from .schema import BY_PATH, STAGES, ScenarioError
from .yamlio import parse_yaml

MAX_PARAMS = 300
MAX_VALUE_CHARS = 200


def _flat(scn: dict) -> dict:
    return dict(schema.iter_values(scn))


def _fmt_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        if v == int(v) and abs(v) < 1e15:
            return str(int(v))
        return repr(v)
    return str(v)


def encode(scn: dict, preset: str) -> dict[str, str]:
    """Query parameters that rebuild ``scn`` from ``preset``."""
    base = api.load_preset(preset)
    params: dict[str, str] = {"p": preset}
    if scn.get("name", "") != base.get("name", ""):
        params["name"] = scn.get("name", "")
    for s in STAGES:
        on, was = s in scn.get("stages", {}), s in base.get("stages", {})
        if on != was:
            params[f"stages.{s}"] = "on" if on else "off"
    a, b = _flat(scn), _flat(base)
    for path in sorted(set(a) | set(b)):
        if path.startswith("stages.") and path.split(".")[1] not in scn.get("stages", {}):
            continue
        if path in a and (path not in b or a[path] != b[path]):
            params[path] = _fmt_value(a[path])
        elif path not in a and path in b:
            # the preset sets it, the scenario went back to the default
            params[path] = _fmt_value(schema.effective_value({}, path)
                                      if not path.startswith("hardware.") else schema.effective_value(scn, path))
    return params


def decode(params: dict, default_preset: str) -> tuple[dict, str, list[str]]:
    """Rebuild a scenario from query parameters.

    Returns (scenario, preset name, warnings). Unknown or invalid parameters
    are skipped with a warning; the result is always a valid scenario.
    """
    warnings: list[str] = []
    items = list(params.items())
    if len(items) > MAX_PARAMS:
        warnings.append(f"The link has {len(items)} parameters; only the first {MAX_PARAMS} were read.")
        items = items[:MAX_PARAMS]
    preset = params.get("p", default_preset)
    try:
        scn = api.load_preset(preset)
    except ScenarioError as err:
        warnings.append(f"URL parameter p: {err}. Using the preset {default_preset!r}.")
        preset = default_preset
        scn = api.load_preset(preset)
    raw = copy.deepcopy(scn)
    # Stage switches first, then values (a value for a stage switches it on).
    for key, text in items:
        if key.startswith("stages.") and key.count(".") == 1:
            stage = key.split(".")[1]
            if stage not in STAGES or text not in ("on", "off"):
                warnings.append(f"URL parameter {key[:60]}: must be a stage name set to on or off; ignored.")
                continue
            if text == "off":
                raw.get("stages", {}).pop(stage, None)
            else:
                raw.setdefault("stages", {}).setdefault(stage, {})
    for key, text in items:
        if key == "p" or (key.startswith("stages.") and key.count(".") == 1):
            continue
        if key == "name":
            cand = schema.set_path(raw, "name", str(text)[:200])
        else:
            if key not in BY_PATH or key.endswith(".enabled"):
                warnings.append(f"URL parameter {key[:60]!s}: unknown setting; ignored.")
                continue
            if len(str(text)) > MAX_VALUE_CHARS:
                warnings.append(f"URL parameter {key}: value too long; using the default.")
                continue
            if BY_PATH[key].kind == "str":
                value = str(text)  # text stays text: "123", "yes", "~" are names, not numbers
            else:
                try:
                    value = parse_yaml(str(text), what=key)
                except ScenarioError:
                    value = text
                value = schema.coerce_text(key, value)
            if key.startswith("stages.") and key.split(".")[1] not in raw.get("stages", {}):
                raw.setdefault("stages", {})[key.split(".")[1]] = {}
            cand = schema.set_path(raw, key, value)
        try:
            schema.validate(cand)
        except ScenarioError as err:
            warnings.append(f"URL parameter {err}; using the default.")
            continue
        raw = cand
    return schema.validate(raw), preset, warnings


def query_string(params: dict[str, str]) -> str:
    from urllib.parse import urlencode
    return urlencode(params, safe=".,-_")
