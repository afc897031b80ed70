"""Loading scenarios: from a mapping, a YAML file, an upload or a preset name, into a validated
:class:`Scenario` (or its plain dict: :func:`load_scenario`).

Light on purpose (schema and YAML only, no numba or pandas), so the CLI can
refuse a bad file before the heavy imports; :mod:`costcore.api` re-exports
these functions.
"""
from __future__ import annotations

import copy
import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

import numpy as np

from costcore.scenario import schema
from costcore.errors import ScenarioError
from costcore.scenario.yamlio import parse_yaml, read_yaml_file

PRESET_DIR = Path(__file__).resolve().parent.parent.parent / "presets"
_PRESET_NAME = re.compile(r"^[a-z0-9](?:[a-z0-9_-]|\.(?![.]|\Z)){0,63}\Z")  # dots inside (llava-1.5-7b), never ".."


def load_scenario(source: str | Path | Mapping) -> dict:
    """Load and validate a scenario from a mapping, a YAML file path, or a preset name.

    Raises :class:`ScenarioError` (one sentence naming the field) on bad input.
    """
    if isinstance(source, dict):
        return schema.validate(source)  # validate reads dicts with the built-in methods
    if isinstance(source, Scenario):  # validated when it was made
        return source.data
    if isinstance(source, Mapping):
        try:
            data = dict(source)
        except Exception:  # noqa: BLE001 - only the foreign mapping's own methods run here
            raise ScenarioError("scenario", "is a mapping that could not be read") from None
        return schema.validate(data)
    if isinstance(source, (str, Path)):
        if not str(source).strip():  # "" is the current folder to Path: ".: is not a file"
            raise ScenarioError("scenario", "is empty: give a preset's name or a YAML file's path")
        if not str(source).isprintable():  # the name is echoed in the message: keep that one line
            raise ScenarioError("file", "is not a usable file name (it holds line breaks or control characters)")
        p = Path(source)
        try:
            is_file = p.suffix in (".yaml", ".yml") or p.exists()
        except (OSError, ValueError):  # name too long, NUL byte
            raise ScenarioError("file", "is not a usable file name") from None
        if is_file:
            return schema.validate(read_yaml_file(p))
        return load_preset(str(source))
    raise ScenarioError("scenario", f"expected a mapping, a YAML path or a preset name, got {type(source).__name__}")


def load_yaml_text(text: str | bytes, what: str = "upload") -> dict:
    """Validate a scenario given as YAML text (uploads); a file that holds no mapping is named ("scenario: must be a
    mapping of sections (got NoneType)" did not say which upload was empty)."""
    data = parse_yaml(text, what=what)
    if not isinstance(data, dict):
        raise schema.not_a_mapping(data, what)
    return schema.validate(data)


def preset_names() -> list[str]:
    return sorted(p.stem for p in PRESET_DIR.glob("*.yaml") if _PRESET_NAME.match(p.stem))  # only loadable names


_PRESET_MEMO: dict = {}


def _preset_hint(name) -> str:
    """What to choose instead of an unknown preset, short enough for one sentence: every name while the
    list is short, else the closest names and where the list is."""
    names = preset_names()
    if len(", ".join(names)) <= 150:
        return "choose one of: " + ", ".join(names)
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.5) if isinstance(name, str) else []
    return ((f"did you mean {' or '.join(close)}? " if close else "")
            + f"python -m costcore presets lists all {len(names)}")


def load_preset(name: str) -> dict:
    """Load a preset by name from presets/ only (no paths: ``../x`` is refused).

    Read and validated once per version of the file (its modification time and size): every page
    rerun diffs the scenario against its preset for the share link. Each call returns its own copy."""
    if not isinstance(name, str) or not _PRESET_NAME.match(name) or name not in preset_names():
        shown = name if isinstance(name, str) and len(name) < 60 else "that name"
        raise ScenarioError("preset", f"unknown preset {shown!r}; " + _preset_hint(name))
    path = PRESET_DIR / f"{name}.yaml"
    st_ = path.stat()
    key = (name, st_.st_mtime_ns, st_.st_size)
    got = _PRESET_MEMO.get(key)
    if got is None:
        got = _PRESET_MEMO[key] = schema.validate(read_yaml_file(path))
    return copy.deepcopy(got)


def preset_titles() -> dict[str, str]:
    return {n: load_preset(n)["name"] for n in preset_names()}


def apply_sets(scn: dict, sets: list[str]) -> dict:
    """Apply ``dotted.key=value`` overrides and re-validate.

    Values of numeric fields are read by :func:`schema.parse_number_text`; others as YAML scalars.
    A size set without any of the model's shape, on a scenario that states a whole dense shape, moves
    the shape with it as the size slider does (:func:`schema.resize_model`; the share link's rule).
    """
    raw = dict(scn)
    keys = [item.partition("=")[0].strip() for item in sets or []]
    resize = not any(k in schema.SHAPE_LINK_KEYS for k in keys)
    for item in sets or []:
        if "=" not in item:
            raise ScenarioError("--set", f"expected dotted.key=value, got {item!r}")
        key, _, text = item.partition("=")
        key = key.strip()
        shown = schema._path(*key.split(".")) if key else "''"
        if not key or any(not part for part in key.split(".")) or shown != key:
            raise ScenarioError("--set", f"bad key {shown}")
        f = schema.BY_PATH.get(key)
        if key in ("name", "description") or (f is not None and f.kind == "str"):
            value = text  # text stays text, exactly as typed: "123" is a name, a newline is refused
        elif f is not None and f.kind in ("float", "int") and text.strip():
            # numbers follow the one rule of schema.parse_number_text (the URL uses it too): no YAML
            # 1.1 extras such as 1_000, 0x10 or .inf, no non-ASCII digits
            value = schema.parse_number_text(key, text)
        else:
            value = parse_yaml(text, what=f"--set {key}") if text.strip() else None
        if value is None:
            raise ScenarioError(key, "needs a value")
        raw = schema.set_value(raw, key, schema.coerce_text(key, value), resize)
    return schema.validate(raw)


# ---------------------------------------------------------------------------
# The validated scenario
# ---------------------------------------------------------------------------
# The validated scenario: checked once, then passed around as an immutable value.
#
# A :class:`Scenario` holds the normalized mapping (what :func:`schema.validate`
# returns), the kernel's float64 vector (read-only) and, for every explicit
# setting, where its value came from (a preset, a share link, a file, an upload,
# or the user). :func:`costcore.estimate`, :func:`costcore.batch`, the
# sensitivity functions and the app's pages take it as is: no re-validation
# and no re-encoding per call.
#
#     scn = Scenario.of("pipeline-70b")                       # a preset, a YAML path or a mapping
#     scn2 = scn.with_value("model.params_b", 65)             # a new Scenario; scn is unchanged
#     scn2.provenance["model.params_b"]                       # 'user'
#     costcore.estimate(scn2)
DEFAULT = "default"


def _origin_of(source) -> str:
    if isinstance(source, Mapping):
        return "user"
    if isinstance(source, (str, Path)):
        p = Path(source)
        if p.suffix in (".yaml", ".yml") or (isinstance(source, Path)):
            return f"file {p.name}"
        return f"preset {source}"
    return "user"


@dataclass(frozen=True, eq=False)
class Scenario:
    """A validated scenario (see the module docstring). Build it with :meth:`of`, never by hand."""

    data: Mapping[str, Any]
    vector: np.ndarray
    provenance: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, source, origin: str | None = None, base: "Scenario | None" = None) -> "Scenario":
        """Validate ``source`` (a mapping, a YAML path, a preset name, or a Scenario) once.

        ``origin`` labels the explicit settings (default: "preset <name>", "file <name>" or
        "user"); with ``base``, settings whose value equals the base's keep the base's label,
        so a share link shows which values it changed. Raises :class:`ScenarioError`.
        """
        if isinstance(source, Scenario):
            return source
        data = load_scenario(source)
        return cls._from_valid(data, origin or _origin_of(source), base)

    @classmethod
    def _from_valid(cls, data: dict, origin: str, base: "Scenario | None") -> "Scenario":
        vec = schema.to_vector(data)
        vec.setflags(write=False)
        base_values = dict(schema.iter_values(base.data)) if base is not None else {}
        prov = {}
        for path, value in schema.iter_values(data):
            if base is not None and path in base_values and base_values[path] == value:
                prov[path] = base.provenance.get(path, origin)
            else:
                prov[path] = origin
        for key in ("name", "description"):
            if key in data:
                prov[key] = base.provenance.get(key, origin) if (
                    base is not None and base.data.get(key) == data[key]) else origin
        return cls(data=data, vector=vec, provenance=MappingProxyType(prov))

    def with_value(self, path: str, value, origin: str = "user") -> "Scenario":
        """A new Scenario with one dotted setting changed (validated); this one is unchanged."""
        if not isinstance(path, str):
            raise ScenarioError("path", "must be a dotted setting name")
        # a new size brings the shape of that size, as the size slider does (schema.size_alone)
        cand = schema.validate(schema.set_value(self.data, path, value))
        return Scenario._from_valid(cand, origin, self)

    def value(self, path: str):
        """The value the core uses for a dotted path: explicit, catalog or default."""
        return schema.effective_value(self.data, path)

    def source_of(self, path: str) -> str:
        """Where a setting's value comes from: the label of :meth:`of`, or 'default'."""
        return self.provenance.get(path, DEFAULT)

    def to_dict(self) -> dict:
        """A deep copy of the mapping, free to change (then make a new Scenario of it)."""
        return copy.deepcopy(dict(self.data))

    @property
    def name(self) -> str:
        return self.data.get("name", "")
