"""costcore: the LLM training cost planner's engine (no UI code here).

Public API::

    load_scenario(path_or_dict) -> validated scenario dict
    estimate(scenario) -> Result (.to_dict(), .line_items(), .stage_table())
    batch(scenario, {path: values}, full=False) -> array of variants
"""
from . import config  # noqa: F401  (sets the numba cache folder before any jit)
from .api import (BATCH_COLUMNS, Result, batch, estimate, load_preset, load_scenario,  # noqa: F401
                  load_yaml_text, preset_names, preset_titles)
from .kernel import LINE_ITEMS, STATS, warm_up  # noqa: F401
from .schema import FIELDS, RESOURCES, STAGES, ScenarioError  # noqa: F401
from .sensitivity import heatmap, monte_carlo, solve_budget, sweep, tornado  # noqa: F401,E402
