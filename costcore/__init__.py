"""costcore: the LLM training cost planner's engine (no UI code here).

Public API::

    Scenario.of(path_or_dict_or_preset) -> validated, immutable scenario (dict, vector, provenance)
    load_scenario(path_or_dict) -> validated scenario dict
    estimate(scenario) -> Result (.to_dict(), .line_items(), .stage_table())
    batch(scenario, {path: values}, full=False) -> array of variants
    batch_layouts(scenario, {path: values}) -> each variant's searched job layout per stage
    tornado, sweep, sweep_jumps, heatmap, monte_carlo, solve_budget -> sensitivity and uncertainty

Every bad input raises :class:`ScenarioError` (see :mod:`costcore.errors`).

The names load on first use (PEP 562), so ``import costcore`` and a CLI
refusal of a bad file do not pay for numba and pandas.
"""
from __future__ import annotations

import importlib

from costcore.errors import ScenarioError  # noqa: F401

_LAZY = {
    "BATCH_COLUMNS": "api", "Result": "api", "batch": "api", "batch_layouts": "api", "estimate": "api",
    "Scenario": "scenario.loaders", "load_preset": "scenario.loaders", "load_scenario": "scenario.loaders",
    "load_yaml_text": "scenario.loaders",
    "preset_names": "scenario.loaders", "preset_titles": "scenario.loaders",
    "LINE_ITEMS": "engine.kernel", "STATS": "engine.kernel", "warm_up": "engine.kernel",
    "FIELDS": "scenario.schema", "RESOURCES": "scenario.schema", "STAGES": "scenario.schema",
    "heatmap": "analysis.sensitivity", "monte_carlo": "analysis.sensitivity", "solve_budget": "analysis.sensitivity",
    "sweep": "analysis.sensitivity", "sweep_jumps": "analysis.sensitivity", "tornado": "analysis.sensitivity",
}
__all__ = sorted(_LAZY) + ["ScenarioError"]


def __getattr__(name: str):
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'costcore' has no attribute {name!r}")
    if mod in ("api", "engine.kernel", "analysis.sensitivity"):
        importlib.import_module(".engine.config", __name__)  # the numba cache folder, before any jit
    value = getattr(importlib.import_module(f".{mod}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return __all__
