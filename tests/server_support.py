"""Starting and stopping the real Streamlit server, for the browser tests and the benchmarks.

Not a test module. The browser tests import it as ``server_support`` (pytest
puts tests/ on sys.path); the benchmarks add tests/ to sys.path first.
"""
from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Debian's chromium, as root, on a machine with no network but the package registries
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
                 "--disable-dev-shm-usage"]
STREAMLIT = [sys.executable, "-m", "streamlit"]
# A snapshot of the page for "has the app settled?": a rerun running, stale elements, the URL, the metrics.
APP_STATE_JS = """() => {
    const w = document.querySelector('[data-testid="stStatusWidget"]');
    const running = !!w && /running/i.test(w.innerText);
    const stale = document.querySelectorAll('[data-stale="true"]').length;
    return [running, stale, location.href,
            [...document.querySelectorAll('[data-testid="stMetricValue"]')].map(e => e.innerText).join('|')];
}"""


# Not limits a test can fail on: how long a stopped server gets before SIGKILL, and how long one health
# poll may hang before the next one (running_server polls until its own timeout_s, NEVER_S by default).
STOP_GRACE_S = 10.0
HEALTH_POLL_S = 2.0


class ServerError(RuntimeError):
    """The server exited or never became healthy; the message carries the end of its log."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tail(path: Path, n: int = 4000) -> str:
    try:
        return path.read_text(errors="replace")[-n:]
    except OSError:
        return "(no server log)"


def stop(proc: subprocess.Popen) -> None:
    """Terminate the server's whole process group (streamlit may spawn helpers)."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=STOP_GRACE_S)


@contextlib.contextmanager
def running_server(log: Path, launcher=None, env=None, timeout_s: float | None = None, poll_s: float = 0.25):
    """Run ``streamlit run app.py`` on a free port until the block ends.

    Yields (base URL without trailing slash, seconds from Popen to a healthy
    server). ``launcher`` replaces ``python -m streamlit`` (e.g. a timing
    hook); ``env`` adds environment variables. Raises ServerError with the
    log's end when the server exits or is not healthy in ``timeout_s``.
    """
    timeout_s = NEVER_S if timeout_s is None else timeout_s
    port = free_port()
    cmd = list(launcher or STREAMLIT) + ["run", "app.py", "--server.port", str(port), "--server.headless", "true",
                                         "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false"]
    base = f"http://127.0.0.1:{port}"
    with open(log, "wb") as fh:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, env=dict(os.environ, PYTHONUNBUFFERED="1", **(env or {})))
    try:
        while True:
            if proc.poll() is not None:
                raise ServerError(f"streamlit exited with code {proc.returncode} before it was healthy:\n{tail(log)}")
            try:
                with urllib.request.urlopen(f"{base}/_stcore/health", timeout=HEALTH_POLL_S) as r:
                    if r.read().decode().strip() == "ok":
                        break
            except OSError:
                pass
            if time.perf_counter() - t0 > timeout_s:
                raise ServerError(f"streamlit not healthy after {timeout_s:g} s:\n{tail(log)}")
            time.sleep(poll_s)
        yield base, time.perf_counter() - t0
    finally:
        stop(proc)


def pct(values, q: float) -> float:
    """Linear-interpolated percentile of a list (nan when empty)."""
    s = sorted(values)
    if not s:
        return float("nan")
    k = (len(s) - 1) * q / 100
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


# ---------------------------------------------------------------------------
# For the pytest browser modules
# ---------------------------------------------------------------------------
def unavailable(reason: str):
    """Skip the module locally; fail under CI, which must run the browser tests."""
    import pytest
    if os.environ.get("CI"):
        pytest.fail(f"CI is set but the browser test cannot run: {reason}", pytrace=False)
    pytest.skip(reason, allow_module_level=True)


def require_chromium() -> str:
    """Path of Debian's chromium (never downloaded); skips or fails the module when it is missing."""
    import shutil
    try:
        import playwright  # noqa: F401
    except ImportError as err:  # pragma: no cover - depends on the environment
        unavailable(f"the Python package playwright is not importable ({err}); pip install playwright")
    path = shutil.which("chromium")
    if path is None:  # pragma: no cover - depends on the environment
        unavailable("no 'chromium' executable on PATH (Debian: apt-get install chromium); "
                    "the browser tests never download a browser")
    return path


@contextlib.contextmanager
def server_for_tests(log: Path, timeout_s: float):
    """running_server for a test: a start failure fails the test with the server log's end."""
    import pytest
    try:
        with running_server(log, timeout_s=timeout_s) as (base, _):
            yield base
    except ServerError as err:
        pytest.fail(str(err), pytrace=False)


# For the benchmarks: a launcher for running_server that times, inside the server process, every
# execution of the script or of its fragments (streamlit's exec_func_with_error_handling) and appends
# "start_epoch_s seconds interrupted fragment session_id" to $BENCH_RERUN_LOG, then runs streamlit's CLI.
TIMED_SERVER_HOOK = r"""
import os, sys, threading, time
import streamlit.runtime.scriptrunner.script_runner as _sr
_log, _lock, _orig = os.environ["BENCH_RERUN_LOG"], threading.Lock(), _sr.exec_func_with_error_handling
def _timed(func, ctx):
    t0, p0, c0 = time.time(), time.perf_counter(), time.thread_time()
    out = _orig(func, ctx)
    dt, cpu = time.perf_counter() - p0, time.thread_time() - c0
    frag = int(bool(getattr(ctx, "fragment_ids_this_run", None)))
    with _lock, open(_log, "a") as fh:
        fh.write(f"{t0:.6f} {dt:.6f} {int(out[2] is not None)} {frag} {cpu:.6f} {getattr(ctx, 'session_id', '?')}\n")
    return out
_sr.exec_func_with_error_handling = _timed
from streamlit.web import cli
sys.argv = ["streamlit", *sys.argv[1:]]
sys.exit(cli.main())
"""


def timed_runs(path: Path, since: float, cpu: bool = False) -> list[tuple]:
    """(ms, interrupted, fragment) of every run TIMED_SERVER_HOOK logged that started at or after ``since``;
    with ``cpu``, (ms, interrupted, fragment, cpu_ms): the script thread's own CPU time besides the wall time
    (on a machine whose cores the browser shares, the wall time also holds the waits for a core)."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        t0, dt, cut, frag, cpu_s, _sid = line.split(" ", 5)
        if float(t0) >= since:
            row = (float(dt) * 1000, cut == "1", frag == "1")
            out.append(row + (float(cpu_s) * 1000,) if cpu else row)
    return out


# How long a browser test waits for something to happen (a server to start, a page to draw, a rerun to land)
# before it calls the app stuck. Not a speed claim: the speeds are printed by benchmarks/bench_first_paint.py,
# bench_app.py and bench_concurrency.py. Generous, so a busy CI machine never turns a slow wait into a failure.
NEVER_S = 300.0
NEVER_MS = int(NEVER_S * 1000)


def wait_idle(page, quiet_s: float = 0.6, timeout_s: float = NEVER_S) -> None:
    """Wait (Playwright, sync) until no rerun is in flight and the page's state stops changing for quiet_s.

    A wait with a generous timeout, not a timing: it fails only when the app never settles.
    """
    deadline = time.monotonic() + timeout_s
    last, since = None, time.monotonic()
    while time.monotonic() < deadline:
        snap = page.evaluate(APP_STATE_JS)
        busy = snap[0] or snap[1] > 0
        if busy or snap != last:
            last, since = snap, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            return
        time.sleep(0.1)
    raise AssertionError(f"the app did not settle within {timeout_s} s (last state {last})")
