"""Reading scenario YAML safely.

``yaml.safe_load`` semantics (no Python objects), plus: duplicated keys and
aliases (``&a`` / ``*a``, the "billion laughs" vector) are refused, and input
size is capped. Every failure is a :class:`~costcore.schema.ScenarioError`
with one plain sentence.
"""
from __future__ import annotations

import re
from pathlib import Path

import yaml

from .schema import ScenarioError

MAX_YAML_BYTES = 100_000  # PyYAML is pure Python: 100 KB parses in under a second, 1 MB can take ten
MAX_DEPTH = 12


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys and aliases."""

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise ScenarioError("file", f"YAML aliases (*{event.anchor}) are not accepted, line {event.start_mark.line + 1}")
        return super().compose_node(parent, index)

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                hash(key)
            except TypeError:
                raise ScenarioError("file", f"a key on line {key_node.start_mark.line + 1} is not text") from None
            if key in seen:
                raise ScenarioError("file", f"key {key!r} appears twice (line {key_node.start_mark.line + 1})")
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


# YAML 1.1 floats need a decimal point, so "1e3" and "3e-5" were text in a file while --set and share
# links read them as numbers; resolve them as floats here too (YAML 1.2 does). Only plain scalars with
# an exponent match; everything else keeps SafeLoader's rules.
_StrictLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)[eE][-+]?[0-9]+$"),
    list("-+0123456789."))


def _depth(obj, level=0) -> int:
    if level > MAX_DEPTH:
        return level
    if isinstance(obj, dict):
        return max([_depth(v, level + 1) for v in obj.values()] or [level + 1])
    if isinstance(obj, list):
        return max([_depth(v, level + 1) for v in obj] or [level + 1])
    return level


def parse_yaml(text: str | bytes, what: str = "file"):
    """Parse YAML text with the strict safe loader; ScenarioError on any problem."""
    if isinstance(text, bytes):
        if len(text) > MAX_YAML_BYTES:
            raise ScenarioError(what, f"is {len(text):,} bytes; the limit is {MAX_YAML_BYTES:,}")
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise ScenarioError(what, "is not UTF-8 text") from None
    if len(text) > MAX_YAML_BYTES:
        raise ScenarioError(what, f"is {len(text):,} characters; the limit is {MAX_YAML_BYTES:,}")
    try:
        data = yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - SafeLoader subclass
    except ScenarioError as err:
        raise ScenarioError(what, str(err).split(": ", 1)[-1]) from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        problem = getattr(err, "problem", None) or "could not be parsed"
        raise ScenarioError(what, f"is not valid YAML{where}: {problem}") from None
    except RecursionError:
        raise ScenarioError(what, "is nested too deeply") from None
    except (ValueError, TypeError, KeyError, IndexError, AttributeError, OverflowError) as err:
        # raised while PyYAML builds a value: "!!int 0x", "2027-02-30", "!!set [1]", ...
        raise ScenarioError(what, f"is not valid YAML: a value could not be read ({type(err).__name__})") from None
    if _depth(data) > MAX_DEPTH:
        raise ScenarioError(what, f"is nested more than {MAX_DEPTH} levels deep")
    return data


def read_yaml_file(path: str | Path):
    p = Path(path)
    try:
        size = p.stat().st_size
    except (OSError, ValueError):
        raise ScenarioError(str(path)[:200], "no such file") from None
    if not p.is_file():
        raise ScenarioError(str(path), "is not a file")
    if size > MAX_YAML_BYTES:
        raise ScenarioError(str(path), f"is {size:,} bytes; the limit is {MAX_YAML_BYTES:,}")
    return parse_yaml(p.read_bytes(), what=str(path))


def dump_yaml(data) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
