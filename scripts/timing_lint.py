"""Lint: the test suite holds no wall-clock assertion; timing lives in benchmarks/, which print numbers.

    python scripts/timing_lint.py          # prints each finding, exits 1 if there is one

A limit in seconds inside a test passes on a quiet machine and fails on a loaded one, so it is a CI
failure waiting to happen. Waiting *for* something (a server's health, a page to settle) with a
generous timeout is allowed; asserting that something took less than N seconds is not, and neither is
a ratio of two timings (benchmarks/bench_refusal.py prints the one the suite used to check).

This module measures no time: it reads the test sources as text. tests/test_source_rules.py runs it,
and checks it against its own samples (scripts/timing_lint_samples.txt), so the patterns it looks for
live here and not in a test.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
SAMPLES = Path(__file__).resolve().parent / "timing_lint_samples.txt"

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


def sources() -> list[Path]:
    """The test sources the lint reads."""
    return sorted(TESTS.glob("*.py"))


def findings(paths=None) -> list[str]:
    """``file:line: what`` for every timed assertion, timing helper or short wait in ``paths`` (the tests)."""
    found = []
    for path in sources() if paths is None else paths:
        text = path.read_text(encoding="utf-8")
        for pattern, hint in ((_TIMED_ASSERT, ""), (_TIMED_HELPER, ""),
                              (_SHORT_WAIT, " (wait server_support.NEVER_S / NEVER_MS)")):
            for m in pattern.finditer(text):
                line = text[: m.start()].count("\n") + 1
                found.append(f"{path.name}:{line}: {m.group(0).strip()[:100]}{hint}")
    return found


def _samples(kind: str) -> list[str]:
    lines = SAMPLES.read_text(encoding="utf-8").splitlines()
    return [ln.split(":", 1)[1] for ln in lines if ln.split(":", 1)[0] == kind]


def missed_samples() -> list[str]:
    """The samples the lint judges wrongly: a ``timed:`` or ``wait:`` line it lets through, or an ``ok-``
    line it flags. Empty when the lint catches the suite's old patterns and nothing else."""
    timed = lambda s: bool(_TIMED_ASSERT.search(s) or _TIMED_HELPER.search(s))  # noqa: E731
    wait = lambda s: bool(_SHORT_WAIT.search(s))  # noqa: E731
    return ([s for s in _samples("timed") if not timed(s)] + [s for s in _samples("ok-timed") if timed(s)]
            + [s for s in _samples("wait") if not wait(s)] + [s for s in _samples("ok-wait") if wait(s)])


def sample_counts() -> tuple[int, int]:
    """(timed samples, wait samples)."""
    return len(_samples("timed")), len(_samples("wait"))


if __name__ == "__main__":
    found = findings()
    print("\n".join(found) if found else "no wall-clock assertion in tests/")
    sys.exit(1 if found else 0)
