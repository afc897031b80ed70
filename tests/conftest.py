"""Shared fixtures of the test suite.

Test modules do not import each other: shared constants, strategies and hand-built
scenarios live in plain modules (``shared.py``, ``strategies.py``, ``cases.py``,
``reference_model.py``, ``server_support.py``), fixtures here.

The repository root and ``tests/`` go on ``sys.path`` so plain ``pytest`` works
from any directory, with or without ``pip install -e .``.
"""
from __future__ import annotations

import sys
from pathlib import Path

import os
import warnings

import pytest
from hypothesis import settings

# Under CI (.ci/run sets CI=true) every property test draws the same examples on every run:
# a red build then always means a change broke something, never that a new random draw found
# an old bug. Locally the draws stay random, to keep exploring (and what they find is fixed).
# No example deadline in either profile: hypothesis's default (200 ms per example) is a wall-clock
# assertion, which this suite does not make (speeds are benchmarks/'s business); on a loaded machine
# (two test workers, a browser) it failed examples that were only slow.
settings.register_profile("ci", derandomize=True, database=None, print_blob=True, deadline=None)
settings.register_profile("local", deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "local")

# Every chart a page draws under AppTest is checked against the Vega-Lite schema (a served page skips
# that check for speed: pages/common.CHECK_CHART_SCHEMA).
os.environ.setdefault("COSTCORE_CHECK_CHART_SCHEMA", "1")

TESTS = Path(__file__).resolve().parent
for p in (TESTS.parent, TESTS):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

# The plain helper modules of tests/ whose literals the property tests' strategies are built from.
_HELPERS = ("shared", "strategies", "cases", "reference_model")


def _freeze_hypothesis_constants() -> bool:
    """Make hypothesis's pool of "local constants" the same in every process, whatever ran before.

    Derandomized draws are not enough for a repeatable run: hypothesis (6.13x and later) mixes into its
    draws literals it reads from every *local* module loaded so far (hypothesis.internal.conjecture.
    providers._get_local_constants), and which of the project's modules a process has loaded depends on
    which tests ran before in it (and, under pytest-xdist, on how the files were dealt to workers). The
    fresh-clone CI of fb3749d found a failure in test_batch_equals_estimate that the same command, on
    the same code, did not find here. So under CI every module of ``costcore`` and the test helpers are
    loaded now, their constants read once, and that pool is the one every draw uses. It reaches into a
    private function of hypothesis: if that is gone, the draws are merely derandomized, as before (the
    function returns False and test_hypothesis_constants_are_frozen_under_ci says so).
    """
    import importlib
    import pkgutil

    import costcore
    for mod in pkgutil.walk_packages(costcore.__path__, "costcore."):
        if not mod.name.endswith(".__main__"):  # running it is the CLI
            importlib.import_module(mod.name)
    for name in _HELPERS:
        importlib.import_module(name)
    try:
        from hypothesis.errors import HypothesisSideeffectWarning
        from hypothesis.internal.conjecture import providers
        with warnings.catch_warnings():  # "slow code in conftest": reading the pool once, here, is the point
            warnings.simplefilter("ignore", HypothesisSideeffectWarning)
            frozen = providers._get_local_constants()
    except (ImportError, AttributeError):
        return False
    providers._get_local_constants = lambda: frozen
    return True


HYPOTHESIS_CONSTANTS_FROZEN = _freeze_hypothesis_constants() if os.environ.get("CI") else False


@pytest.fixture(scope="session")
def warm_kernels():
    """Compile (or load from numba's on-disk cache) every kernel once per test session."""
    import costcore
    costcore.warm_up()
    costcore.estimate("pipeline-70b")


@pytest.fixture
def cli(capsys):
    """Run ``costcore.cli.main.main`` in-process: ``cli("estimate", "llama3-8b") -> (exit code, stdout, stderr)``."""
    from shared import run_cli

    def run(*argv: str):
        return run_cli(capsys, argv)
    return run


@pytest.fixture
def scenario_file(tmp_path):
    """Write a scenario mapping (or raw text) to a YAML file and return its path."""
    import yaml

    def write(data, name: str = "scenario.yaml") -> Path:
        p = tmp_path / name
        text = data if isinstance(data, str) else yaml.safe_dump(data, allow_unicode=True, sort_keys=False)
        p.write_text(text, encoding="utf-8")
        return p
    return write


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """Say it in one line when the browser tests did not run (chromium or playwright missing)."""
    skipped = terminalreporter.stats.get("skipped", [])
    browser = [r for r in skipped if "browser" in str(getattr(r, "nodeid", "")) or "browser" in str(r.fspath)]
    if browser:
        reason = browser[0].longrepr[-1] if isinstance(browser[0].longrepr, tuple) else str(browser[0].longrepr)
        terminalreporter.write_line(
            f"BROWSER TESTS SKIPPED ({len(browser)}): {reason} -- they run under CI=true (.ci/run) and fail there "
            "if they cannot", yellow=True, bold=True)
