"""The suite holds no wall-clock assertion: timing lives in benchmarks/, which print numbers.

A limit in seconds inside a test passes on a quiet machine and fails on a loaded
one, so it is a CI failure waiting to happen. Waiting *for* something (a server's
health, a page to settle) with a generous timeout is allowed; asserting that
something took less than N seconds is not, and neither is a ratio of two timings
(benchmarks/bench_refusal.py prints the one the suite used to check).

This module measures no time itself: it reads the test sources as text.
"""
from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent

# An assert whose condition compares a duration: elapsed/seconds/took/duration names, or a clock call.
_TIMED_ASSERT = re.compile(
    r"^\s*assert\b[^#\n]*(\belapsed\b|\bduration\b|[<>]=?\s*\w*(_S|_SECONDS|_MS)\b|"
    r"perf_counter\(|monotonic\(|time\.time\()", re.M)
# Helpers that turn a duration into a pass/fail (the old pattern of this suite).
_TIMED_HELPER = re.compile(r"with\s+within\(|BAD_INPUT_LIMIT_S|TEST_BUDGET_S|\btimeit\b")


# A test's own wait limit (timeout=30_000, timeout_s=60.0, AppTest's default_timeout=120, a subprocess's
# timeout=120): on a busy machine a short wait is a timing check in disguise. Every test waits
# server_support.NEVER_S / NEVER_MS, which only a stuck app exceeds.
_SHORT_WAIT = re.compile(r"\b(default_)?timeout(_s|_ms)?\s*(:\s*float\s*)?=\s*\d[\d_.]*")


def _sources():
    return sorted(p for p in TESTS.glob("*.py") if p.name != Path(__file__).name)


def test_there_are_sources_to_check():
    assert len(_sources()) >= 10


def test_no_assert_compares_a_duration():
    found = []
    for path in _sources():
        text = path.read_text(encoding="utf-8")
        for m in _TIMED_ASSERT.finditer(text):
            line = text[: m.start()].count("\n") + 1
            found.append(f"{path.name}:{line}: {m.group(0).strip()[:100]}")
        for m in _TIMED_HELPER.finditer(text):
            line = text[: m.start()].count("\n") + 1
            found.append(f"{path.name}:{line}: {m.group(0)}")
        for m in _SHORT_WAIT.finditer(text):
            line = text[: m.start()].count("\n") + 1
            found.append(f"{path.name}:{line}: {m.group(0)} (wait server_support.NEVER_S / NEVER_MS)")
    assert not found, "wall-clock assertions in the suite (move them to benchmarks/):\n" + "\n".join(found)


def _samples(kind: str) -> list[str]:
    """The guard's own check lines of one kind (tests/no_wall_clock_samples.txt: kept as text, not code)."""
    lines = (TESTS / "no_wall_clock_samples.txt").read_text(encoding="utf-8").splitlines()
    return [ln.split(":", 1)[1] for ln in lines if ln.split(":", 1)[0] == kind]


def test_the_checker_catches_the_old_patterns():
    assert len(_samples("timed")) == 6 and len(_samples("wait")) == 4
    for s in _samples("timed"):
        assert _TIMED_ASSERT.search(s) or _TIMED_HELPER.search(s), s
    for s in _samples("ok-timed"):
        assert not _TIMED_ASSERT.search(s), s
    for s in _samples("wait"):
        assert _SHORT_WAIT.search(s), s
    for s in _samples("ok-wait"):
        assert not _SHORT_WAIT.search(s), s
