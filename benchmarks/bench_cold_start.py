"""The first start after an install, with an empty numba cache: prints numbers, asserts nothing.

    python benchmarks/bench_cold_start.py              # warm first, then the app; then the app alone
    python benchmarks/bench_cold_start.py --skip-bare  # only the README's way (warm, then the app)

Each part uses its own empty cache directory (NUMBA_CACHE_DIR, which costcore/engine/config.py honours),
so nothing compiled by an earlier run is reused:

(a) ``python -m costcore warm`` end to end (compiles every kernel the app runs), then ``streamlit run
    app.py`` on that cache and the time from ``page.goto`` to the overview's "Total cost" in Chromium.
(b) (unless --skip-bare) the app started on an empty cache without the warm step: the same first paint,
    which then waits behind the "Loading the cost kernels" spinner while numba compiles.
"""
from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def first_paint_s(env: dict) -> float:
    """Seconds from page.goto to the overview's total cost on a server started with ``env``."""
    from playwright.sync_api import sync_playwright
    port = _free_port()
    srv = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
                            "--server.port", str(port)], cwd=ROOT, env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while True:
            try:
                urllib.request.urlopen(f"http://localhost:{port}/_stcore/health")
                break
            except OSError:
                time.sleep(0.2)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=shutil.which("chromium"),
                                        args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_page()
            t = time.perf_counter()
            page.goto(f"http://localhost:{port}/")
            page.get_by_text("Total cost").first.wait_for(timeout=900_000)
            took = time.perf_counter() - t
            browser.close()
        return took
    finally:
        srv.terminate()
        srv.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--skip-bare", action="store_true", help="skip (b), the app on an empty cache without warm")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "costcore", "warm"], cwd=ROOT, env=env, check=True,
                       stdout=subprocess.DEVNULL)
        print(f"(a) python -m costcore warm on an empty cache: {time.perf_counter() - t:.1f} s")
        print(f"    then the app's first page (Total cost painted): {first_paint_s(env):.1f} s")
    if not args.skip_bare:
        with tempfile.TemporaryDirectory() as cache:
            env = dict(os.environ, NUMBA_CACHE_DIR=cache)
            print(f"(b) the app's first page on an empty cache, no warm step: {first_paint_s(env):.1f} s")


if __name__ == "__main__":
    main()
