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
