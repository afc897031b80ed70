"""The portfolio file: pools of GPUs, teams with quotas, projects that are scenarios (docs/cluster.md).

Read with the project's safe YAML loader (costcore.scenario.yamlio: ``yaml.safe_load`` semantics, size
and depth limits, no aliases, no duplicate keys) and checked entry by entry: every problem is one
:class:`costcore.errors.ScenarioError` whose sentence names the entry (``teams.nlp.quota_gpus``,
``projects.chat-v2.after``...). Each project's scenario (a preset name or an inline scenario, plus
dotted ``set`` overrides) is validated by ``costcore.scenario.schema.validate`` and placed on its
pool: its GPU becomes the pool's and its price the pool's reserved price, so the estimate prices the
GPU time the project buys from the pool. Light on purpose: no numba, no pandas.
"""
from __future__ import annotations

import copy
import datetime as _dt
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from costcore.errors import ScenarioError
from costcore.scenario import checks, loaders, schema
from costcore.scenario.yamlio import parse_yaml, read_yaml_file

PORTFOLIO_DIR = loaders.PRESET_DIR / "portfolios"
IDLE_RULES = ("quota", "use", "unallocated")
BURST_KINDS = ("on_demand", "spot")
MAX_PROJECTS = 5_000
MAX_TEAMS = 500
MAX_POOLS = 20
MAX_DAYS = 3_660.0  # ten years
MAX_RUNS = 1_000  # runs of one project's sweep
MAX_TOTAL_RUNS = 20_000  # runs of all projects together (each run is a chain of up to 9 jobs)
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\Z")
TOP_KEYS = ("name", "description", "horizon_days", "start_date", "idle_rule", "burst", "storage", "pools", "teams",
            "projects")
POOL_KEYS = ("gpu", "gpus", "nodes", "reserved_usd_per_gpu_hour", "burst")
# a project's settings the pool owns (its GPU, price and reservation): refused in a project's set:
POOL_SETTINGS = ("hardware.gpu", "hardware.usd_per_gpu_hour", "hardware.reserved", "hardware.reserved_months",
                 "hardware.reserved_gpus")
STORAGE_KEYS = ("hot_usd_per_gb_month", "cold_usd_per_gb_month", "object_usd_per_gb_month")
BURST_KEYS = ("kind", "usd_per_gpu_hour", "max_gpus")
TEAM_KEYS = ("quota_gpus", "borrowing_limit_gpus", "priority")
PROJECT_KEYS = ("team", "preset", "scenario", "set", "model_version", "task_type", "start_day", "deadline_day",
                "priority", "after", "pool", "runs")


@dataclass(frozen=True)
class Pool:
    """One pool of reserved GPUs (a Kueue ResourceFlavor with its cohort), and its burst market."""
    name: str
    gpu: str
    gpus: int
    reserved_usd_per_gpu_hour: float
    burst_kind: str = "on_demand"
    burst_usd_per_gpu_hour: float = 0.0
    burst_max_gpus: int = 0

    @property
    def nodes(self) -> int:
        """Whole nodes of the catalog's GPUs per node (hardware.yaml gpus_per_node) in the pool."""
        return self.gpus // int(schema.CATALOG[self.gpu]["gpus_per_node"])


@dataclass(frozen=True)
class Team:
    """A team: one ClusterQueue per pool with a nominal quota and a borrowing limit (None: no limit), GPUs."""
    name: str
    quota_gpus: dict
    borrowing_limit_gpus: dict
    priority: int = 0


@dataclass(frozen=True)
class Project:
    """A project: a validated scenario placed on a pool, plus who owns it and when it may run (days)."""
    name: str
    team: str
    scenario: dict
    pool: str
    model_version: str = ""
    task_type: str = ""
    start_day: float = 0.0
    deadline_day: float | None = None
    priority: int | None = None
    after: tuple = ()
    preset: str = ""
    runs: int = 1  # a sweep: this many runs of the scenario (seeds, hyperparameters, ablations), each its own chain


@dataclass(frozen=True)
class Portfolio:
    name: str
    horizon_days: float
    start_date: str
    idle_rule: str
    burst: bool
    pools: dict
    teams: dict
    projects: dict
    description: str = ""
    storage: dict = field(default_factory=dict)

    def project_priority(self, name: str) -> int:
        """A project's workload priority: its own, else its team's (a default WorkloadPriorityClass)."""
        p = self.projects[name]
        return int(p.priority) if p.priority is not None else int(self.teams[p.team].priority)

    def with_changes(self, **kw) -> "Portfolio":
        return replace(self, **kw)


def portfolio_names() -> list[str]:
    return sorted(p.stem for p in PORTFOLIO_DIR.glob("*.yaml")) if PORTFOLIO_DIR.is_dir() else []


def portfolio_titles() -> dict[str, str]:
    """Each shipped portfolio's file name -> its ``name`` in words (what a picker shows)."""
    return {n: load(n).name for n in portfolio_names()}


def load(source: "str | Path | dict") -> Portfolio:
    """A portfolio from a mapping, a YAML file path or a shipped portfolio's name; ScenarioError if bad."""
    if isinstance(source, dict):
        return validate(source)
    if not isinstance(source, (str, Path)):
        raise ScenarioError("portfolio", f"expected a mapping, a YAML path or a portfolio name, got "
                                         f"{type(source).__name__}")
    text = str(source)
    if text in portfolio_names():
        return validate(read_yaml_file(PORTFOLIO_DIR / f"{text}.yaml"))
    if not text.isprintable():
        raise ScenarioError("portfolio", "is not a usable file name (it holds control characters)")
    p = Path(source)
    if p.suffix in (".yaml", ".yml") or p.exists():
        return validate(read_yaml_file(p))
    raise ScenarioError("portfolio", f"no such file or shipped portfolio {text[:60]!r}; shipped: "
                                     + ", ".join(portfolio_names()))


def load_text(text: "str | bytes", what: str = "upload") -> Portfolio:
    """A portfolio given as YAML text (an upload)."""
    return validate(parse_yaml(text, what=what))


def with_plan(raw: dict, scenario: dict, team: str | None = None, name: str = "this-plan") -> dict:
    """``raw`` (a portfolio mapping) with ``scenario`` added as one project of ``team`` (default: :func:`teams_for`'s first):
    one run from day 0, on the pool whose GPU it runs on. What the Shared cluster page's "Add the current plan"
    does, so that a plan is budgeted beside the others on the cluster rather than alone. The name is made unique
    (this-plan, this-plan-2, ...); :func:`validate` checks the rest (a GPU no pool has is refused in words)."""
    out = dict(raw)
    teams = teams_for(out, scenario)
    if not teams:
        raise ScenarioError("teams", "the portfolio has no team to give the plan to")
    team = team if team in teams else teams[0]
    projects = dict(out.get("projects") or {})
    key, k = name, 1
    while key in projects:
        k += 1
        key = f"{name}-{k}"
    scn = {sec: v for sec, v in scenario.items() if sec != "budget"}  # the plan's own budget lines stay its own
    projects[key] = {"team": team, "scenario": scn, "runs": 1, "start_day": 0}
    out["projects"] = projects
    return out


def teams_for(raw: dict, scenario: dict) -> list[str]:
    """The portfolio's teams, the largest quota on the pool of the scenario's GPU first (the team a plan would go to
    by default: the first team had no quota on the A100 pool a LLaVA plan needs, and was refused)."""
    gpu = schema.effective_value(scenario, "hardware.gpu")
    pools = [p for p, v in (raw.get("pools") or {}).items() if isinstance(v, dict) and v.get("gpu") == gpu]

    def quota(team) -> float:
        q = (raw.get("teams") or {}).get(team, {})
        q = q.get("quota_gpus", 0) if isinstance(q, dict) else 0
        try:
            return float(sum(q.get(p, 0) for p in pools) if isinstance(q, dict) else q)
        except (TypeError, ValueError):
            return 0.0
    return sorted((raw.get("teams") or {}), key=lambda t: -quota(t))


def raw_of(name: str) -> dict:
    """A shipped portfolio's mapping, as its file states it (to add a project to)."""
    if name not in portfolio_names():
        raise ScenarioError("portfolio", "names no shipped portfolio; shipped: " + ", ".join(portfolio_names()))
    return read_yaml_file(PORTFOLIO_DIR / f"{name}.yaml")


# ---------------------------------------------------------------------------
# Checks of plain values
# ---------------------------------------------------------------------------
def _mapping(v, path: str) -> dict:
    if not isinstance(v, dict):
        raise ScenarioError(path, f"must be a mapping (got {type(v).__name__})")
    return v


def _keys(d: dict, allowed, path: str) -> None:
    for k in d:
        if k not in allowed:
            shown = str(k)[:40]
            raise ScenarioError(f"{path}.{shown}" if path else shown,
                                f"unknown key; allowed: {', '.join(allowed)}")


def number(v, path: str, lo: float, hi: float, unit: str, integer: bool = False) -> float:
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and v == v
    if ok and integer and float(v) != int(v):
        ok = False
    if not ok or not lo <= v <= hi:
        kind = "a whole number" if integer else "a number"
        a, b = schema._fmt(lo), schema._fmt(hi)  # 1,000,000, not 1e+06
        raise ScenarioError(path, f"must be {kind} from {a} to {b} {unit}".rstrip() + f" (got {checks._shown(v)})",
                            value=v, allowed=f"{a} to {b} {unit}".strip())
    return int(v) if integer else float(v)


def _name(v, path: str) -> str:
    if not isinstance(v, str) or not _NAME.match(v):
        raise ScenarioError(path, "must be a name of 1-64 letters, digits, dots, dashes or underscores")
    return v


def _text(v, path: str, limit: int = 200) -> str:
    if v is None:
        return ""
    if not isinstance(v, str) or len(v) > limit or not v.isprintable():
        raise ScenarioError(path, f"must be one line of text of at most {limit} characters")
    return v


def _entries(data: dict, key: str, limit: int) -> dict:
    d = _mapping(data.get(key), key) if key in data else None
    if not d:
        raise ScenarioError(key, "needs at least one entry")
    if len(d) > limit:
        raise ScenarioError(key, f"has {len(d):,} entries; the limit is {limit:,}")
    for name in d:
        _name(name, f"{key}.{str(name)[:40]}")
    return d


# ---------------------------------------------------------------------------
# Sections
# ---------------------------------------------------------------------------
def _pool(name: str, d, path: str) -> Pool:
    d = _mapping(d, path)
    _keys(d, POOL_KEYS, path)
    gpu = d.get("gpu")
    if gpu not in schema.GPU_NAMES:
        raise ScenarioError(f"{path}.gpu", "must be a GPU of the catalog: " + ", ".join(schema.GPU_NAMES),
                            value=gpu if isinstance(gpu, str) else None)
    per_node = int(schema.CATALOG[gpu]["gpus_per_node"])
    if "nodes" in d:
        nodes = number(d["nodes"], f"{path}.nodes", 1, 100_000, "nodes", integer=True)
        if "gpus" in d and d["gpus"] != nodes * per_node:
            raise ScenarioError(f"{path}.gpus", f"is {d['gpus']} but {nodes:,} nodes of {gpu} hold "
                                                f"{nodes * per_node:,} GPUs ({per_node} per node); give one of the two")
        d = {**d, "gpus": nodes * per_node}
    gpus = number(d.get("gpus"), f"{path}.gpus", 1, 1_000_000, "GPUs", integer=True)
    price = d.get("reserved_usd_per_gpu_hour", schema.CATALOG[gpu]["usd_per_gpu_hour"])
    price = number(price, f"{path}.reserved_usd_per_gpu_hour", 0, 1000, "$/GPU-hour")
    b = _mapping(d.get("burst", {}) or {}, f"{path}.burst")
    _keys(b, BURST_KEYS, f"{path}.burst")
    kind = b.get("kind", "on_demand")
    if kind not in BURST_KINDS:
        raise ScenarioError(f"{path}.burst.kind", "must be on_demand or spot",
                            value=kind if isinstance(kind, str) else None)
    bprice = number(b.get("usd_per_gpu_hour", schema.CATALOG[gpu]["usd_per_gpu_hour"]),
                     f"{path}.burst.usd_per_gpu_hour", 0, 1000, "$/GPU-hour")
    bmax = number(b.get("max_gpus", 0), f"{path}.burst.max_gpus", 0, 1_000_000, "GPUs", integer=True)
    return Pool(name, gpu, gpus, price, kind, bprice, bmax)


def per_pool(v, path: str, pools: dict, default, unit: str = "GPUs") -> dict:
    """A per-pool number: one number (one pool only) or a mapping pool -> number; ``default`` elsewhere."""
    if v is None:
        return {p: default for p in pools}
    if not isinstance(v, dict):
        if len(pools) != 1:
            raise ScenarioError(path, f"must be a mapping of pool to {unit} (the portfolio has {len(pools)} pools)")
        v = {next(iter(pools)): v}
    out = {p: default for p in pools}
    for p, n in v.items():
        if p not in pools:
            raise ScenarioError(f"{path}.{str(p)[:40]}", "names no pool; pools: " + ", ".join(pools))
        out[p] = number(n, f"{path}.{p}", 0, 1_000_000, unit, integer=True)
    return out


def _team(name: str, d, pools: dict) -> Team:
    path = f"teams.{name}"
    d = _mapping(d, path)
    _keys(d, TEAM_KEYS, path)
    quota = per_pool(d.get("quota_gpus"), f"{path}.quota_gpus", pools, 0)
    limit = per_pool(d.get("borrowing_limit_gpus"), f"{path}.borrowing_limit_gpus", pools, None)
    prio = number(d.get("priority", 0), f"{path}.priority", -1_000_000, 1_000_000, "", integer=True)
    return Team(name, quota, limit, prio)


def _project_scenario(name: str, d: dict, pools: dict, storage: dict) -> tuple[dict, str, str]:
    """(validated scenario placed on its pool, pool name, preset name or ''). The cluster's storage prices
    apply first, then the project's own ``set`` overrides."""
    path = f"projects.{name}"
    if ("preset" in d) == ("scenario" in d):
        raise ScenarioError(path, "needs exactly one of preset (a preset name) or scenario (an inline scenario)")
    try:
        if "preset" in d:
            raw = copy.deepcopy(loaders.load_preset(d["preset"]))
        else:
            raw = schema.validate(_mapping(d["scenario"], f"{path}.scenario"))
    except ScenarioError as err:
        where = "preset" if "preset" in d else "scenario"
        raise ScenarioError(f"{path}.{where}", str(err), value=err.value, allowed=err.allowed) from None
    sets = _mapping(d.get("set", {}) or {}, f"{path}.set")
    for key, value in storage.items():
        raw = schema.set_path(raw, f"storage.{key}", value)
    for key, value in sets.items():
        if not isinstance(key, str) or not key or key in POOL_SETTINGS:
            raise ScenarioError(f"{path}.set", "keys are dotted settings; the GPU, its price and its reservation "
                                               "come from the pool")
        raw = schema.set_path(raw, key, value)
    pool = d.get("pool")
    gpu = schema.effective_value(raw, "hardware.gpu")
    if pool is None:
        pool = next((p for p, v in pools.items() if v.gpu == gpu), None)
        if pool is None:
            raise ScenarioError(f"{path}.pool", f"the scenario runs on {gpu} and no pool has that GPU; "
                                                f"name a pool: {', '.join(pools)}")
    elif pool not in pools:
        raise ScenarioError(f"{path}.pool", "names no pool; pools: " + ", ".join(pools))
    raw = schema.set_path(raw, "hardware.gpu", pools[pool].gpu)
    raw = schema.set_path(raw, "hardware.usd_per_gpu_hour", pools[pool].reserved_usd_per_gpu_hour)
    # the pool is the reservation, billed for the horizon by the cluster: a project's own (a preset's or an inline
    # scenario's hardware.reserved) would bill a second term's idle hours on top of it
    raw = schema.set_path(raw, "hardware.reserved", False)
    try:
        scn = schema.validate(raw)
    except ScenarioError as err:
        raise ScenarioError(f"{path}.set", str(err), value=err.value, allowed=err.allowed) from None
    return scn, pool, d.get("preset", "")


def _project(name: str, d, pools: dict, teams: dict, storage: dict) -> Project:
    path = f"projects.{name}"
    d = _mapping(d, path)
    _keys(d, PROJECT_KEYS, path)
    team = d.get("team")
    if team not in teams:
        shown = str(team)[:40] if team is not None else "none"
        raise ScenarioError(f"{path}.team", f"names an unknown team {shown!r}; teams: " + ", ".join(teams))
    scn, pool, preset = _project_scenario(name, d, pools, storage)
    start = number(d.get("start_day", 0), f"{path}.start_day", 0, MAX_DAYS, "days")
    deadline = d.get("deadline_day")
    if deadline is not None:
        deadline = number(deadline, f"{path}.deadline_day", start, MAX_DAYS, "days (after its start_day)")
    prio = d.get("priority")
    if prio is not None:
        prio = number(prio, f"{path}.priority", -1_000_000, 1_000_000, "", integer=True)
    after = d.get("after", []) or []
    if isinstance(after, str):
        after = [after]
    if not isinstance(after, list) or not all(isinstance(a, str) for a in after):
        raise ScenarioError(f"{path}.after", "must be a list of project names")
    runs = int(number(d.get("runs", 1), f"{path}.runs", 1, MAX_RUNS, "runs", integer=True))
    return Project(name, team, scn, pool, _text(d.get("model_version"), f"{path}.model_version") or name,
                   _text(d.get("task_type"), f"{path}.task_type") or "training", start, deadline, prio,
                   tuple(after), preset, runs)


def check_capacity(pools: dict, teams: dict) -> None:
    """Guaranteed quotas fit in their pool (Kueue: the cohort's nominal quota is the pool)."""
    for p, pool in pools.items():
        total = sum(t.quota_gpus[p] for t in teams.values())
        if total > pool.gpus:
            worst = max(teams.values(), key=lambda t: t.quota_gpus[p])
            raise ScenarioError(f"teams.{worst.name}.quota_gpus", f"the teams' quotas on pool {p} add up to "
                                f"{total:,} GPUs, more than its {pool.gpus:,} (the largest is {worst.name}'s)")


def _check_dependencies(projects: dict) -> None:
    """Every ``after`` names a project, and no chain of them loops (depth-first search, iterative)."""
    for p in projects.values():
        for a in p.after:
            if a not in projects:
                raise ScenarioError(f"projects.{p.name}.after", f"names an unknown project {a[:40]!r}")
            if a == p.name:
                raise ScenarioError(f"projects.{p.name}.after", "names the project itself")
    state = {n: 0 for n in projects}  # 0 new, 1 on the path, 2 done
    for root in projects:
        if state[root]:
            continue
        stack = [(root, iter(projects[root].after))]
        state[root] = 1
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                state[node] = 2
                stack.pop()
            elif state[nxt] == 1:
                loop = [n for n, _ in stack][[n for n, _ in stack].index(nxt):] + [nxt]
                raise ScenarioError(f"projects.{nxt}.after", "has a circular dependency: " + " -> ".join(loop))
            elif state[nxt] == 0:
                state[nxt] = 1
                stack.append((nxt, iter(projects[nxt].after)))


def validate(data: Any) -> Portfolio:
    """A checked :class:`Portfolio` from a parsed YAML mapping; one ScenarioError naming the entry otherwise."""
    d = _mapping(data, "portfolio")
    _keys(d, TOP_KEYS, "")
    horizon = number(d.get("horizon_days", 91), "horizon_days", 1, MAX_DAYS, "days")
    start = d.get("start_date", "2026-01-01")
    if isinstance(start, _dt.date):
        start = start.isoformat()
    try:
        _dt.date.fromisoformat(start)
    except (TypeError, ValueError):
        raise ScenarioError("start_date", "must be a date written YYYY-MM-DD") from None
    rule = d.get("idle_rule", "quota")
    if rule not in IDLE_RULES:
        raise ScenarioError("idle_rule", "must be quota, use or unallocated")
    burst = d.get("burst", True)
    if not isinstance(burst, bool):
        raise ScenarioError("burst", "must be true or false")
    pools = {n: _pool(n, v, f"pools.{n}") for n, v in _entries(d, "pools", MAX_POOLS).items()}
    teams = {n: _team(n, v, pools) for n, v in _entries(d, "teams", MAX_TEAMS).items()}
    check_capacity(pools, teams)
    storage = _mapping(d.get("storage", {}) or {}, "storage")
    _keys(storage, STORAGE_KEYS, "storage")
    storage = {k: number(v, f"storage.{k}", 0, 100, "$/GB-month") for k, v in storage.items()}
    projects = {n: _project(n, v, pools, teams, storage) for n, v in _entries(d, "projects", MAX_PROJECTS).items()}
    _check_dependencies(projects)
    total_runs = sum(p.runs for p in projects.values())
    if total_runs > MAX_TOTAL_RUNS:
        big = max(projects.values(), key=lambda p: p.runs)
        raise ScenarioError(f"projects.{big.name}.runs", f"the projects' runs add up to {total_runs:,}, more than "
                            f"the {MAX_TOTAL_RUNS:,} one portfolio may hold (the largest sweep is {big.name}'s)")
    return Portfolio(_text(d.get("name"), "name") or "Shared cluster", horizon, start, rule, burst, pools, teams,
                     projects, _text(d.get("description"), "description", 2000), storage)
