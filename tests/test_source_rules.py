"""The suite holds no wall-clock assertion (scripts/timing_lint.py reads the test sources as text and says
why: a limit in seconds passes on a quiet machine and fails on a loaded one). Timing lives in
benchmarks/, which print numbers. This module measures nothing and holds none of the lint's patterns."""
from __future__ import annotations

import importlib.util

from shared import ROOT


def _lint():
    spec = importlib.util.spec_from_file_location("timing_lint", ROOT / "scripts" / "timing_lint.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_there_are_sources_to_check():
    assert len(_lint().sources()) >= 10


def test_no_test_compares_a_duration():
    found = _lint().findings()
    assert not found, "wall-clock assertions in the suite (move them to benchmarks/):\n" + "\n".join(found)


def test_the_lint_catches_the_old_patterns_and_nothing_else():
    lint = _lint()
    assert lint.sample_counts() == (6, 4)
    assert lint.missed_samples() == []
