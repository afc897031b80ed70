"""Reading scenario YAML safely and fast.

``yaml.safe_load`` semantics (no Python objects), plus:

* the size, line-count, flow-item and nesting-depth limits are checked on the
  raw text *before* any parsing, so a hostile file is refused in about a
  millisecond whatever its shape;
* parsing uses libyaml's C parser (``yaml.CSafeLoader``) when PyYAML was built
  with it, else the pure-Python ``SafeLoader``; both go through the same
  checks and give the same result;
* duplicated keys and aliases (``&a`` / ``*a``, the "billion laughs" vector)
  are refused;
* numbers in exponent notation (``1e3``, ``3e-5``) are floats, as in YAML 1.2
  and as ``--set`` and share links read them.

Every failure is a :class:`~costcore.scenario.schema.ScenarioError` with one plain
sentence naming the file (or upload) and the limit.
"""
from __future__ import annotations

import re
from pathlib import Path

import yaml

from costcore.errors import ScenarioError

MAX_YAML_BYTES = 100_000  # a scenario is a few KB; the biggest preset is under 4 KB
MAX_LINES = 5_000         # a scenario has about 300 settings; a preset is under 150 lines
MAX_FLOW_ITEMS = 5_000    # commas in flow collections ([1, 2, ...], {a: 1, ...})
MAX_DEPTH = 12

_BaseLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
USING_LIBYAML = _BaseLoader is not yaml.SafeLoader

# The one way a number is written as text, in files, in --set and in share links: ASCII digits, an
# optional sign, point and exponent (schema.parse_number_text uses it for --set and links).
NUMBER_TEXT = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


class _StrictLoader(_BaseLoader):
    """Safe loader that refuses duplicate keys and aliases (C parser where available)."""

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


# YAML plain scalars follow NUMBER_TEXT: digits alone are an int, with a point or an exponent a float
# (YAML 1.2: "1e3" and "3e-5" too, which PyYAML's YAML 1.1 reads as text), plus .inf/.nan so that a
# numeric field can say they are not finite. YAML 1.1's extras (1_000, 0x10, 017 octal, 1:30 base 60)
# stay text, so a numeric field refuses them with its allowed range instead of reading a surprising value.
_INT = re.compile(r"^[-+]?[0-9]+$")
_FLOAT = re.compile(r"^(?=.*[.eE])" + NUMBER_TEXT.pattern + r"$|^[-+]?\.(?:inf|Inf|INF)$|^\.(?:nan|NaN|NAN)$")
_StrictLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag not in ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")]
    for first, resolvers in _BaseLoader.yaml_implicit_resolvers.items()}
_StrictLoader.add_implicit_resolver("tag:yaml.org,2002:int", _INT, list("-+0123456789"))
_StrictLoader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT, list("-+0123456789."))
# ... and a leading zero is a decimal digit (YAML 1.1 would read 017 as octal 15).
_StrictLoader.add_constructor("tag:yaml.org,2002:int", lambda loader, node: int(loader.construct_scalar(node), 10))


def _check_nodes(root) -> None:
    """Refuse aliases and deep nesting in a composed node tree (iteratively: no recursion).

    An alias makes the composer hand out the same node object twice, so a node
    seen twice is an alias (this works for the C and the Python composer alike).
    """
    seen: set[int] = set()
    stack = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        if id(node) in seen:
            line = node.start_mark.line + 1 if node.start_mark else "?"
            raise ScenarioError("file", f"YAML aliases (*name) are not accepted (line {line})")
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            if depth > MAX_DEPTH:
                raise ScenarioError("file", f"is nested more than {MAX_DEPTH} levels deep")
            for k, v in node.value:
                stack.append((k, depth + 1))
                stack.append((v, depth + 1))
        elif isinstance(node, yaml.SequenceNode):
            if depth > MAX_DEPTH:
                raise ScenarioError("file", f"is nested more than {MAX_DEPTH} levels deep")
            stack.extend((v, depth + 1) for v in node.value)


def _flow_depth(text: str) -> int:
    """Deepest nesting of flow brackets, ignoring quoted text and comments (a cheap upper bound)."""
    depth = best = 0
    quote = ""
    i, n = 0, len(text)
    # Jump between the characters that matter with a regex: C speed on long plain stretches.
    special = re.compile(r"[\[\]{}'\"#\n\\]")
    while i < n:
        m = special.search(text, i)
        if m is None:
            break
        c = m.group()
        i = m.end()
        if quote:
            if c == "\\" and quote == '"':
                i += 1
            elif c == quote:
                quote = ""
            continue
        if c in "'\"":
            quote = c
        elif c == "#":
            nl = text.find("\n", i)
            i = n if nl < 0 else nl
        elif c in "[{":
            depth += 1
            best = max(best, depth)
        elif c in "]}":
            depth = max(0, depth - 1)
    return best


def precheck_text(text: str, what: str) -> None:
    """The limits that need no parse: characters, lines, flow items, flow depth."""
    if len(text) > MAX_YAML_BYTES:
        raise ScenarioError(what, f"is {len(text):,} characters; the limit is {MAX_YAML_BYTES:,}")
    lines = text.count("\n")
    if lines > MAX_LINES:
        raise ScenarioError(what, f"has {lines:,} lines; a scenario has at most {MAX_LINES:,}")
    depth = _flow_depth(text) if ("[" in text or "{" in text) else 0
    commas = text.count(",")
    if commas > MAX_FLOW_ITEMS and depth > 0:
        raise ScenarioError(what, f"has about {commas:,} list or mapping items; a scenario has at most "
                                  f"{MAX_FLOW_ITEMS:,}")
    if depth > MAX_DEPTH:
        raise ScenarioError(what, f"is nested more than {MAX_DEPTH} levels deep")


def parse_yaml(text: str | bytes, what: str = "file"):
    """Parse YAML text with the strict safe loader; ScenarioError on any problem."""
    if isinstance(text, (bytes, bytearray)):
        if len(text) > MAX_YAML_BYTES:
            raise ScenarioError(what, f"is {len(text):,} bytes; the limit is {MAX_YAML_BYTES:,}")
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError:
            raise ScenarioError(what, "is not UTF-8 text") from None
    if not isinstance(text, str):
        raise ScenarioError(what, f"must be YAML text (got {type(text).__name__})")
    precheck_text(text, what)
    try:
        loader = _StrictLoader(text)
        try:
            node = loader.get_single_node()
            if node is None:
                return None
            _check_nodes(node)
            data = loader.construct_document(node)
        finally:
            loader.dispose()
    except ScenarioError as err:
        raise ScenarioError(what, str(err).split(": ", 1)[-1]) from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        problem = getattr(err, "problem", None) or "could not be parsed"
        tag = re.search(r"constructor for the tag '(?:tag:yaml\.org,2002:)?([^']{0,80})", problem)
        if tag:  # safe_load refuses Python tags: say so in words, not in PyYAML's ("could not determine a constructor")
            name = tag.group(1) if tag.group(1).startswith("!") else "!!" + tag.group(1)
            raise ScenarioError(what, f"uses the tag {name}{where}, which a scenario file may not use: "
                                      "only plain YAML (mappings, lists, text, numbers, true/false)") from None
        raise ScenarioError(what, f"is not valid YAML{where}: {problem}") from None
    except RecursionError:
        raise ScenarioError(what, "is nested too deeply") from None
    except (ValueError, TypeError, KeyError, IndexError, AttributeError, OverflowError) as err:
        # raised while PyYAML builds a value: "!!int 0x", "2027-02-30", "!!set [1]", ...
        raise ScenarioError(what, f"is not valid YAML: a value could not be read ({type(err).__name__})") from None
    return data


def read_yaml_file(path: str | Path):
    p = Path(path)
    shown = str(path)[:200]
    try:
        size = p.stat().st_size
    except (OSError, ValueError):
        raise ScenarioError(shown, "no such file") from None
    if not p.is_file():
        raise ScenarioError(shown, "is not a file")
    if size > MAX_YAML_BYTES:
        raise ScenarioError(shown, f"is {size:,} bytes; the limit is {MAX_YAML_BYTES:,}")
    try:
        data = p.read_bytes()
    except OSError as err:
        raise ScenarioError(shown, f"could not be read ({err.strerror or type(err).__name__})") from None
    return parse_yaml(data, what=shown)


def dump_yaml(data) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
