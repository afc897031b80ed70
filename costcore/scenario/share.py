"""Scenario <-> URL query parameters.

A shared link carries the preset name (``p``) and only the values that
differ from that preset, one query parameter per dotted path
(``stages.sft.method=lora``). Stages switched off carry ``=off``, stages
switched on with defaults ``=on``. A custom name travels as ``name``.
The planner's defaults are not in the link (GPU specs and prices, presets, fitted efficiencies:
the files under ``costcore/data`` and ``presets``); ``d`` carries a stamp of them
(:func:`defaults_stamp`), so a link opened on a copy whose defaults differ says its numbers may
differ from the sender's. Decoding never raises: each bad parameter keeps its default and is named in
one warning for the whole link (values follow the rules of a YAML file).
"""
from __future__ import annotations

import copy
import functools
import hashlib
from pathlib import Path
from costcore.scenario import loaders
from costcore.scenario import schema
from costcore.scenario.schema import BY_PATH, STAGES, ScenarioError
from costcore.scenario.yamlio import parse_yaml

MAX_PARAMS = 300
MAX_VALUE_CHARS = 200
STAMP_KEY = "d"  # the defaults stamp a link carries (defaults_stamp)
_DEFAULT_DIRS = (Path(__file__).resolve().parent.parent / "data", loaders.PRESET_DIR)
STAMP_WARNING = ("This link was made with other planner defaults than this copy's (GPU specs and prices, presets "
                 "or fitted efficiencies), so its numbers may differ from the sender's; its settings are applied "
                 "as given.")


@functools.lru_cache(maxsize=1)
def defaults_stamp() -> str:
    """A 12-hex-digit stamp of the defaults a link leaves out: every file under ``costcore/data`` and
    ``presets`` (path and content, line endings as LF), SHA-256. Equal stamps, equal defaults."""
    h = hashlib.sha256()
    for root in _DEFAULT_DIRS:
        for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
            h.update(path.relative_to(root.parent).as_posix().encode("utf-8") + b"\0")
            h.update(path.read_bytes().replace(b"\r\n", b"\n") + b"\0")
    return h.hexdigest()[:12]


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
    base = loaders.load_preset(preset)
    params: dict[str, str] = {"p": preset, STAMP_KEY: defaults_stamp()}
    if scn.get("name", "") != base.get("name", ""):
        params["name"] = scn.get("name", "")
    for s in STAGES:
        on, was = s in scn.get("stages", {}), s in base.get("stages", {})
        if on != was:
            params[f"stages.{s}"] = "on" if on else "off"
    a, b = _flat(scn), _flat(base)
    for flat in (a, b):  # a shipped model's config follows its name (decode sets both): the name alone
        if flat.get("model.name") and flat.get("model.hf_config") == flat.get("model.name"):
            del flat["model.hf_config"]
    for path in sorted(set(a) | set(b)):
        if path.startswith("stages.") and path.split(".")[1] not in scn.get("stages", {}):
            continue
        if path in a and (path not in b or a[path] != b[path]):
            params[path] = _fmt_value(a[path])
        elif path not in a and path in b:
            # the preset sets it, the scenario went back to the default
            params[path] = _fmt_value(schema.effective_value({}, path)
                                      if not path.startswith("hardware.") else schema.effective_value(scn, path))
    if "model.params_b" in params and not any(k in params for k in schema.SHAPE_LINK_KEYS):
        # a size alone brings the shape of that size (schema.size_alone, as the slider): a scenario that keeps
        # the preset's shape at another size (a YAML file can say so) states that shape, or the link moves it
        for path in schema.SHAPE_LINK_KEYS:
            if path in a:
                params[path] = _fmt_value(a[path])
    return params


MAX_NAME_CHARS = 200  # schema.validate's limit for a scenario name
MAX_LISTED = 10  # bad parameters named one by one in the summary warning


VIEW_PREFIX = "view."  # what a page shows (its stage, the methods it compares), kept in the link beside the scenario


def view_params(params: dict) -> dict[str, str]:
    """{name: text} of a link's view parameters (``view.NAME=TEXT``): printable, given once, at most
    ``MAX_VALUE_CHARS``; anything else is dropped. The page that owns a name checks its text against its own
    choices (pages/common.view_seed), so a tampered value picks nothing."""
    out = {}
    for key, value in list(params.items())[:MAX_PARAMS]:
        key = str(key)
        if not key.startswith(VIEW_PREFIX):
            continue
        text, why = _one_value(value)
        if why is None and text.isprintable() and len(text) <= MAX_VALUE_CHARS and len(key) <= 60:
            out[key[len(VIEW_PREFIX):]] = text
    return out


def _one_value(value):
    """(text, None) for a parameter given once, (None, reason) otherwise.

    The app passes lists (``st.query_params.get_all``); tests and the CLI pass plain text.
    """
    if isinstance(value, (list, tuple)):
        if len(value) > 1:
            return None, f"given {len(value)} times"
        value = value[0] if value else ""
    return ("" if value is None else str(value)), None


def _shown(key) -> str:
    key = str(key)
    return key[:60] + ("..." if len(key) > 60 else "")


def _reason(key: str, err: ScenarioError) -> str:
    """The sentence of a ScenarioError without its field when that field is the parameter itself."""
    text = str(err)
    if err.path == key and text.startswith(key + ": "):
        return text[len(key) + 2:]
    return text


def _summary(problems: list[tuple[str, str, str, str]], n_params: int) -> list[str]:
    """At most one warning for the whole link.

    ``problems`` holds (key, short reason, full reason, what is used instead): up to three are
    given with their full reason, more by name and short reason, the first ``MAX_LISTED`` only.
    """
    if n_params <= MAX_PARAMS and len(problems) == 1:
        key, _, full, instead = problems[0]
        return [f"URL parameter {_shown(key)}: {full}" + (f"; {instead}." if instead else ".")]
    if len(problems) <= 3:  # each with its reason, one short sentence each
        listed = " ".join(f"{_shown(k)}: {full}." for k, _, full, _ in problems)
    else:
        names = [f"{_shown(k)} ({short})" for k, short, _, _ in problems[:MAX_LISTED]]
        if len(problems) > MAX_LISTED:
            names.append(f"and {len(problems) - MAX_LISTED:,} more")
        listed = ", ".join(names) + "."
    if n_params > MAX_PARAMS:
        text = f"The link has {n_params:,} parameters; only the first {MAX_PARAMS} were read"
        return [text + (f", and {len(problems):,} {'was' if len(problems) == 1 else 'were'} ignored (defaults kept): {listed}" if problems else ".")]
    if not problems:
        return []
    return [f"{len(problems):,} URL parameters were ignored (defaults kept): {listed}"]


def decode(params: dict, default_preset: str) -> tuple[dict, str, list[str]]:
    """Rebuild a scenario from query parameters.

    ``params`` maps each key to its text, or to the list of its values (a key repeated in the
    link; repeated keys are refused). Values are checked by the rules of a YAML file: the name
    has at most 200 characters (it is refused, not cut), numbers are written as
    :func:`schema.parse_number_text` says, other values have at most ``MAX_VALUE_CHARS``.
    Returns (scenario, preset name, warnings): every bad parameter keeps its default and is
    named in one warning for the whole link; the result is always a valid scenario.
    """
    problems: list[tuple[str, str, str, str]] = []

    def refuse(key, short, full=None, instead="using the default"):
        problems.append((str(key), short, full or short, instead))

    items = list(params.items())
    preset, scn = _preset_of(params, default_preset, refuse)
    raw = copy.deepcopy(scn)
    values: list[tuple[str, str]] = []
    stamp = None
    for key, value in items[:MAX_PARAMS]:
        key = str(key)
        if key == "p" or key.startswith(VIEW_PREFIX):  # a page's view (view_params), not a setting
            continue
        text, why = _one_value(value)
        if why:
            refuse(key, why, f"{why}; a setting can be given once")
            continue
        if key == STAMP_KEY:  # not a setting: the sender's defaults, compared below
            stamp = text
            continue
        values.append((key, text))
    _apply_switches(raw, values, refuse)  # stage switches first (a value for a stage switches it on)
    todo = [(k, t) for k, t in values if not (k.startswith("stages.") and k.count(".") == 1)]
    resize = not any(k in schema.SHAPE_LINK_KEYS for k, _ in todo)  # a size without a shape moves the shape
    while todo:  # values that only hold together (media tokens and the sequence) wait for the others
        waiting, errors = [], {}
        for key, text in todo:
            try:
                cand = _with_value(raw, key, text, refuse, resize)
                if cand is None:
                    continue
                schema.validate(cand)
            except ScenarioError as err:
                waiting.append((key, text))
                errors[key] = err
                continue
            raw = cand
        if len(waiting) < len(todo):
            todo = waiting
            continue
        raw = _all_or_none(raw, waiting, errors, refuse)  # no progress one by one: all of them at once
        break
    warnings = _summary(problems, len(items))
    if stamp is not None and stamp != defaults_stamp():  # still one warning for the whole link
        warnings = [f"{warnings[0]} {STAMP_WARNING}"] if warnings else [STAMP_WARNING]
    return schema.validate(raw), preset, warnings


def _all_or_none(raw: dict, waiting: list, errors: dict, refuse) -> dict:
    """``raw`` with every waiting value when they hold together (an encoder and its media type), else
    ``raw`` with each of them refused for its own reason."""
    cand = raw
    try:
        for key, text in waiting:
            cand = _with_value(cand, key, text, lambda *a: None) or cand
        schema.validate(cand)
        return cand
    except ScenarioError:
        for key, _ in waiting:
            refuse(key, "invalid value", _reason(key, errors[key]))
        return raw


def _preset_of(params: dict, default_preset: str, refuse) -> tuple[str, dict]:
    """The link's preset (parameter ``p``) and its scenario, or the default preset with a refusal."""
    preset = default_preset
    if "p" in params:
        text, why = _one_value(params["p"])
        if why:
            refuse("p", why, f"{why}; using the preset {default_preset!r}", "")
        else:
            preset = text
    try:
        return preset, loaders.load_preset(preset)
    except ScenarioError as err:
        refuse("p", "no such preset", f"{_reason(err.path, err)}; using the preset {default_preset!r}", "")
        return default_preset, loaders.load_preset(default_preset)


def _apply_switches(raw: dict, values, refuse) -> None:
    """``stages.<name>=on|off`` switches a stage on (with its defaults) or off, in place."""
    for key, text in values:
        if key.startswith("stages.") and key.count(".") == 1:
            stage = key.split(".")[1]
            if stage not in STAGES or text not in ("on", "off"):
                refuse(key, "not a stage switch", "must be a stage name set to on or off")
                continue
            if text == "off":
                raw.get("stages", {}).pop(stage, None)
            else:
                raw.setdefault("stages", {}).setdefault(stage, {})


def _with_value(raw: dict, key: str, text: str, refuse, resize: bool = False) -> dict | None:
    """A copy of ``raw`` with one link value set (not validated), or None after a refusal.

    ``resize``: the link gives the model's size but none of its shape (a link written by hand, or from
    before the size slider re-derived the shape); the size then brings the shape of that size, as the
    slider does (schema.size_alone), so the link and the slider give one model and one cost.
    """
    if key == "name":
        if len(text) > MAX_NAME_CHARS:
            refuse(key, "too long", f"is {len(text):,} characters; the limit is {MAX_NAME_CHARS}",
                   "the preset's name is kept")
            return None
        return schema.set_path(raw, "name", text)
    f = BY_PATH.get(key)
    if f is None or key.endswith(".enabled"):
        refuse(key, "unknown setting")
        return None
    if len(text) > MAX_VALUE_CHARS:
        refuse(key, "too long", f"is {len(text):,} characters; the limit is {MAX_VALUE_CHARS}")
        return None
    if key == "model.hf_config":
        from costcore.scenario.hfconfig import shipped_configs
        if text and text not in shipped_configs():  # a link never makes the server read one of its files ("" = none)
            refuse(key, "not a shipped model", "names a file; a link may only name a shipped model config",
                   "the model's own keys are used")
            return None
    if f.kind == "str":
        value = text  # text stays text: "123", "yes", "~" are names, not numbers
    elif f.kind in ("float", "int"):
        value = schema.parse_number_text(key, text)  # the rule --set uses
    else:
        try:
            value = parse_yaml(text, what=key)
        except ScenarioError:
            value = text
    if key.startswith("stages.") and key.split(".")[1] not in raw.get("stages", {}):
        raw = copy.deepcopy(raw)
        raw.setdefault("stages", {})[key.split(".")[1]] = {}
    if key == "model.name" and schema.get_path(raw, "model.hf_config") == schema.get_path(raw, "model.name"):
        raw = schema.set_path(raw, "model.hf_config", value)  # the config the old name gave follows the new name
    return schema.set_value(raw, key, value, resize)


def query_string(params: dict[str, str]) -> str:
    from urllib.parse import urlencode
    return urlencode(params, safe=".,-_")
