"""A shipped portfolio and its what-if knobs <-> URL query parameters (as scenario/share.py for scenarios).

Every key starts with ``c.``: ``c.p`` the shipped portfolio's name, ``c.pool.<pool>`` its GPUs,
``c.quota.<team>.<pool>`` a team's quota, ``c.prio.<project>`` a project's priority, ``c.burst`` on or
off, ``c.idle`` the idle rule. Only values that differ from the portfolio travel. Decoding never
raises: each bad parameter is ignored and named in one warning for the whole link; other keys (a
scenario's) are left to their own page. An uploaded portfolio is not on the server, so it has no link.
"""
from __future__ import annotations

import re

from costcore.errors import ScenarioError
from costcore.scenario.schema import parse_number_text
from costcore.cluster import portfolio as cp

PREFIX = "c."
MAX_PARAMS = 300
MAX_CHARS = 100


# A portfolio path as the page's controls name it: the file's keys are for a file's author, not for a what-if
_PATH_WORDS = ((re.compile(r"^teams\.([^.]+)\.quota_gpus$"), "The {0} team's quota"),
               (re.compile(r"^teams\.([^.]+)(\..*)?$"), "Team {0}"),
               (re.compile(r"^pools\.([^.]+)\.gpus$"), "The {0} pool's GPUs"),
               (re.compile(r"^pools\.([^.]+)(\..*)?$"), "Pool {0}"),
               (re.compile(r"^projects\.([^.]+)(\..*)?$"), "Project {0}"))


def error_in_words(err: ScenarioError) -> str:
    """A what-if's refusal with its setting in words: "The pretraining team's quota: the teams' quotas on pool
    h100 add up to 720 GPUs, ..." where it read "teams.pretraining.quota_gpus: ..."."""
    text, path = str(err), str(getattr(err, "path", "") or "")
    for pattern, words in _PATH_WORDS:
        m = pattern.match(path)
        if m and text.startswith(path + ": "):
            return words.format(m.group(1)) + text[len(path):]
    return text


def knobs_of(base: cp.Portfolio, pf: cp.Portfolio) -> dict:
    """The what-if knobs that turn ``base`` into ``pf`` (results.what_if's keywords)."""
    k: dict = {}
    pools = {n: p.gpus for n, p in pf.pools.items() if p.gpus != base.pools[n].gpus}
    quota = {t: {p: g for p, g in v.quota_gpus.items() if g != base.teams[t].quota_gpus[p]}
             for t, v in pf.teams.items()}
    prio = {n: pf.project_priority(n) for n in pf.projects if pf.project_priority(n) != base.project_priority(n)}
    for key, val in (("pool_gpus", pools), ("team_quota", {t: q for t, q in quota.items() if q}),
                     ("project_priority", prio)):
        if val:
            k[key] = val
    if pf.burst != base.burst:
        k["burst"] = pf.burst
    if pf.idle_rule != base.idle_rule:
        k["idle_rule"] = pf.idle_rule
    return k


def encode(name: str, knobs: dict) -> dict:
    params = {PREFIX + "p": name}
    for pool, g in knobs.get("pool_gpus", {}).items():
        params[f"{PREFIX}pool.{pool}"] = str(int(g))
    for team, q in knobs.get("team_quota", {}).items():
        for pool, g in q.items():
            params[f"{PREFIX}quota.{team}.{pool}"] = str(int(g))
    for proj, v in knobs.get("project_priority", {}).items():
        params[f"{PREFIX}prio.{proj}"] = str(int(v))
    if "burst" in knobs:
        params[PREFIX + "burst"] = "on" if knobs["burst"] else "off"
    if "idle_rule" in knobs:
        params[PREFIX + "idle"] = knobs["idle_rule"]
    return params


def _whole(key: str, text: str) -> int:
    v = parse_number_text(key, text)
    if float(v) != int(v):
        raise ScenarioError(key, "must be a whole number")
    return int(v)


def _one(key: str, text: str, base: cp.Portfolio, knobs: dict) -> None:
    """Read one parameter into ``knobs``; ScenarioError when it names nothing or its value is bad."""
    parts = key[len(PREFIX):].split(".")
    if parts[0] == "pool" and len(parts) == 2 and parts[1] in base.pools:
        knobs.setdefault("pool_gpus", {})[parts[1]] = _whole(key, text)
    elif parts[0] == "quota" and len(parts) == 3 and parts[1] in base.teams and parts[2] in base.pools:
        knobs.setdefault("team_quota", {}).setdefault(parts[1], {})[parts[2]] = _whole(key, text)
    elif parts[0] == "prio" and len(parts) >= 2 and ".".join(parts[1:]) in base.projects:
        knobs.setdefault("project_priority", {})[".".join(parts[1:])] = _whole(key, text)
    elif parts == ["burst"] and text in ("on", "off"):
        knobs["burst"] = text == "on"
    elif parts == ["idle"] and text in cp.IDLE_RULES:
        knobs["idle_rule"] = text
    else:
        raise ScenarioError(key, "names no pool, team, project or knob of this portfolio, or its value is not allowed")


def decode(params: dict, default: str) -> tuple[str, dict, list[str]]:
    """(shipped portfolio name, what-if knobs, warnings) from a link's parameters; never raises.

    Each knob is checked by applying it alone (results.what_if's rules: capacity, ranges); a bad one is
    dropped and named in the one warning."""
    from costcore.cluster.results import what_if
    bad: list[str] = []
    items = [(str(k), v[0] if isinstance(v, (list, tuple)) and v else v) for k, v in params.items()
             if str(k).startswith(PREFIX)][:MAX_PARAMS]
    name = dict(items).get(PREFIX + "p", default)
    if name not in cp.portfolio_names():
        bad.append(f"{PREFIX}p (no such shipped portfolio)")
        name = default
    base = cp.load(name)
    knobs: dict = {}
    for key, text in items:
        if key == PREFIX + "p":
            continue
        trial: dict = {}
        try:
            if not isinstance(text, str) or len(text) > MAX_CHARS:
                raise ScenarioError(key, "is not a short text value")
            _one(key, text, base, trial)
            what_if(base, **_merge(knobs, trial))
        except ScenarioError:
            bad.append(key[:60])
            continue
        knobs = _merge(knobs, trial)
    were = "s were" if len(bad) > 1 else " was"
    warn = [f"{len(bad)} link parameter{were} ignored: {', '.join(bad[:10])}."] if bad else []
    return name, knobs, warn


def _merge(a: dict, b: dict) -> dict:
    out = {k: (dict(v) if isinstance(v, dict) else v) for k, v in a.items()}
    for k, v in b.items():
        if isinstance(v, dict):
            d = out.setdefault(k, {})
            for kk, vv in v.items():
                d[kk] = {**d.get(kk, {}), **vv} if isinstance(vv, dict) else vv
        else:
            out[k] = v
    return out
