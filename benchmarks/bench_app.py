"""App benchmark: prints numbers, asserts nothing.

    python benchmarks/bench_app.py                 # both parts
    python benchmarks/bench_app.py --moves 40      # more slider moves in part (a)
    python benchmarks/bench_app.py --skip-browser  # part (a) only

(a) Server-side time of one rerun after a slider move on the overview page,
    measured with streamlit.testing.v1.AppTest (no browser, no websocket):
    "Model size (billion parameters)" is moved ``--moves`` times and each
    ``at.run()`` is timed. Target: median <= 100 ms.
(b) First page load of a fresh server process with the numba on-disk cache
    warm: one warm-up start (so the cache exists), then ``--starts`` measured
    starts, each timed from ``Popen`` of ``streamlit run app.py`` until a
    headless Chromium page shows the first "Total cost" metric value.
    Chromium is launched before the clock starts. Target: <= 5 s.
(c) Server-side rerun of the whole sensitivity page (AppTest reruns the whole script: what a change in
    the sidebar costs there). A slider of this page reruns only its own fragment in a browser; that
    rerun is measured by benchmarks/bench_slider_moves.py. Target (issue 16): <= 100 ms a rerun.
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))
import server_support  # noqa: E402
from server_support import CHROMIUM_ARGS, pct  # noqa: E402
APP = ROOT / "app.py"
SLIDER_LABEL = "Model size (billion parameters)"


# ---------------------------------------------------------------------------
# (a) rerun time
# ---------------------------------------------------------------------------
def bench_rerun(moves: int) -> None:
    import logging

    from streamlit.testing.v1 import AppTest

    # "missing ScriptRunContext" is expected in AppTest's bare mode
    logging.getLogger("streamlit.runtime.scriptrunner_utils.script_run_context").setLevel(logging.ERROR)

    print(f"(a) server-side rerun after a slider move ({moves} moves, AppTest, overview page)")
    t0 = time.perf_counter()
    at = AppTest.from_file(str(APP), default_timeout=120)
    at.run()
    first = time.perf_counter() - t0
    if at.exception:
        print("    the first run raised:", [e.value for e in at.exception])
        return
    print(f"    first run (incl. numba cache load / compile): {first * 1000:,.0f} ms")

    def slider():  # a select slider over a log ladder of sizes (pages/common.log_ladder)
        found = [s for s in at.select_slider if s.label == SLIDER_LABEL]
        if not found:
            raise SystemExit(f"no slider labelled {SLIDER_LABEL!r}; sliders: {[s.label for s in at.select_slider]}")
        return found[0]

    def total():
        return next((m.value for m in at.metric if m.label == "Total cost"), None)

    start_value, start_total = float(slider().value), total()
    from pages.common import log_ladder
    rungs = [v for v in log_ladder(1.0, 150.0, start_value, False) if v != start_value]  # sizes that fit
    times, totals = [], []
    for i in range(moves):
        value = rungs[i % len(rungs)]  # a different rung each move
        slider().set_value(value)
        t = time.perf_counter()
        at.run()
        times.append((time.perf_counter() - t) * 1000)
        totals.append(total())
        if at.exception:
            print("    a rerun raised:", [e.value for e in at.exception])
            return
    ms = times
    print(f"    Total cost: {start_total} at {start_value} B -> {totals[-1]} at {slider().value} B "
          f"({len(set(totals))} distinct values over {moves} moves)")
    print(f"    rerun time: median {statistics.median(ms):.1f} ms, p95 {pct(ms, 95):.1f} ms, "
          f"min {min(ms):.1f} ms, max {max(ms):.1f} ms   (target median <= 100 ms)")


def _page_reruns(page: str, moves: int, move, target_ms: int, preset: str | None = None,
                 tab: tuple[str, str] | None = None) -> None:
    """Open ``page`` in AppTest (and its lazy tab ``(key, label)``), time its first run, then ``moves``
    reruns after ``move(at, i)``."""
    import logging

    from streamlit.testing.v1 import AppTest

    logging.getLogger("streamlit.runtime.scriptrunner_utils.script_run_context").setLevel(logging.ERROR)
    at = AppTest.from_file(str(APP), default_timeout=120)
    if preset:
        at.query_params["p"] = preset
    at.run()
    at.switch_page(page)
    if tab:
        at.session_state[tab[0]] = tab[1]
    t = time.perf_counter()
    at.run()
    print(f"    first run of the page: {(time.perf_counter() - t) * 1000:,.0f} ms")
    if at.exception:
        print("    the page raised:", [e.value for e in at.exception])
        return
    times = []
    for i in range(moves):
        move(at, i)
        t = time.perf_counter()
        at.run()
        times.append((time.perf_counter() - t) * 1000)
    print(f"    rerun time: median {statistics.median(times):.1f} ms, p95 {pct(times, 95):.1f} ms, "
          f"max {max(times):.1f} ms   (target <= {target_ms} ms)")


def bench_sensitivity(moves: int) -> None:
    """Server-side rerun of the sensitivity page, whose analyses are lazy tabs (one drawn at a time): the
    tornado's range slider moved (AppTest reruns the page; a browser only the tornado's fragment:
    bench_slider_moves.py), then, with each tab open, the sidebar's price changed, which changes the
    scenario and so recomputes the open analysis. Target: <= 100 ms."""
    print(f"(c) sensitivity page, whole-page rerun after a tornado slider move ({moves} moves, AppTest)")
    values = [0.1, 0.15, 0.2, 0.25, 0.3, 0.35]
    _page_reruns("pages/sensitivity.py", moves,
                 lambda at, i: at.slider(key="tor_rel").set_value(values[i % len(values)]), 100)

    def price(at, i):
        [n for n in at.number_input if n.label.startswith("Price")][0].set_value(2.5 + 0.05 * (i % 10 + 1))
    for label in ("Tornado", "Sweep one input", "Cost surface", "Monte Carlo", "Budget solver"):
        print(f"(c) sensitivity page, tab {label!r} open, rerun after a price change ({moves} moves)")
        _page_reruns("pages/sensitivity.py", moves, price, 100, tab=("sensitivity:tab", label))


def bench_multimodal(moves: int) -> None:
    """Server-side rerun of the Multimodal page (LLaVA-1.5-7B preset: phase table, media lines, two sweeps
    of one batch call each) after moving the instruction-tuning phase's text-tokens slider. Target <= 100 ms."""
    print(f"(d) multimodal page rerun after a slider move ({moves} moves, AppTest, llava-1.5-7b)")

    def move(at, i):
        slider = [s for s in at.slider if s.label == "Text tokens per sample"][-1]  # the tuning phase's
        slider.set_value(200.0 + 10.0 * (i % 10))
    _page_reruns("pages/multimodal.py", moves, move, 100, preset="llava-1.5-7b")


# ---------------------------------------------------------------------------
# (b) first page load of a fresh process
# ---------------------------------------------------------------------------
def one_start(browser, timeout_s: float = 120.0) -> dict:
    """Start a fresh server; seconds from Popen to health 'ok', to the load event and to the first Total cost."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 900})
    page = ctx.new_page()
    with tempfile.TemporaryDirectory() as tmp:
        try:
            with server_support.running_server(Path(tmp) / "server.log", timeout_s=timeout_s,
                                               poll_s=0.05) as (base, t_health):
                t_ok = time.perf_counter()
                page.goto(base + "/")  # returns at the load event: static bundle fetched and parsed
                t_loaded = t_health + time.perf_counter() - t_ok
                metric = page.locator('[data-testid="stMetric"]').filter(
                    has=page.locator('[data-testid="stMetricLabel"]', has_text="Total cost")
                ).first.locator('[data-testid="stMetricValue"]')
                metric.wait_for(state="visible", timeout=timeout_s * 1000)
                t_metric = t_health + time.perf_counter() - t_ok
                return {"health": t_health, "loaded": t_loaded, "metric": t_metric,
                        "value": metric.inner_text().strip()}
        except server_support.ServerError as err:
            raise RuntimeError(str(err)) from None
        finally:
            ctx.close()


def bench_first_load(starts: int) -> None:
    print(f"(b) first page load of a fresh server process, numba cache warm "
          f"(1 warm-up start + {starts} measured)")
    chromium = shutil.which("chromium")
    if not chromium:
        print("    skipped: no chromium on PATH")
        return
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        print("    skipped: playwright is not installed")
        return
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            w = one_start(browser)
            print(f"    warm-up start: health {w['health']:.2f} s, first Total cost {w['metric']:.2f} s "
                  f"({w['value']})")
            runs = []
            for i in range(starts):
                r = one_start(browser)
                runs.append(r)
                print(f"    start {i + 1}: health ok after {r['health']:.2f} s, page load event after "
                      f"{r['loaded']:.2f} s, first Total cost ({r['value']}) after {r['metric']:.2f} s")
            m = [r["metric"] for r in runs]
            print(f"    process start -> first Total cost: median {statistics.median(m):.2f} s, "
                  f"min {min(m):.2f} s, max {max(m):.2f} s   (target <= 5 s)")
        finally:
            browser.close()


def _server_script_cache() -> None:
    """Give every AppTest run one shared ScriptCache, as a server does. AppTest builds a new ScriptCache on
    each run (streamlit/testing/v1/app_test.py and local_script_runner.py, 1.67), so each timed rerun also
    reads, AST-rewrites ("magic") and compiles app.py and the page: about 28 ms for the sensitivity page on
    a 2-core machine. A server keeps one ScriptCache for its lifetime (streamlit/runtime/runtime.py), so a
    browser rerun never pays it. ``--per-run-compile`` keeps AppTest's behaviour."""
    from streamlit.runtime.scriptrunner import script_cache
    from streamlit.testing.v1 import app_test, local_script_runner

    shared = script_cache.ScriptCache()
    app_test.ScriptCache = local_script_runner.ScriptCache = lambda: shared


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--moves", type=int, default=20, help="slider moves timed in part (a)")
    ap.add_argument("--starts", type=int, default=1, help="measured fresh starts in part (b), after the warm-up")
    ap.add_argument("--skip-browser", action="store_true", help="only part (a)")
    ap.add_argument("--per-run-compile", action="store_true",
                    help="AppTest's own behaviour: recompile app.py and the page on every rerun (a server does not)")
    args = ap.parse_args()
    print(f"python {sys.version.split()[0]}, app {APP}")
    if not args.per_run_compile:
        _server_script_cache()
        print("scripts compiled once and cached, as a server's Runtime does (--per-run-compile: AppTest's default)")
    bench_rerun(args.moves)
    bench_sensitivity(max(5, args.moves // 2))
    bench_multimodal(max(5, args.moves // 2))
    if not args.skip_browser:
        bench_first_load(args.starts)


if __name__ == "__main__":
    main()
