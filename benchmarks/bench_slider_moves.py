"""Server-side rerun after a slider move, on every page, as a browser drives it: prints numbers, asserts nothing.

    python benchmarks/bench_slider_moves.py                 # every page, every slider, 2 moves each
    python benchmarks/bench_slider_moves.py --moves 4 --pages sensitivity,overview

Why a browser and not AppTest: ``streamlit.testing.v1.AppTest`` reruns the whole script on every
``run()``, while a real session reruns only the fragment (``st.fragment``) that holds the moved widget.
The sensitivity page puts each analysis, its sliders with it, in its own fragment, so AppTest
(benchmarks/bench_app.py part c) times a full rerun of all five analyses that a slider move never
causes. Here a real ``streamlit run app.py`` is started through a wrapper that times, in the server
process, every execution of the script or of its fragments (streamlit's
``exec_func_with_error_handling``) and logs whether it was a fragment run; headless Chromium opens each
page (the overview's default scenario), focuses each slider in turn and presses ArrowRight (ArrowLeft
when the slider is at its end), waits until the app is idle, and the runs that started after the key
press are read from the log. A move that started no run (the value did not change) is not counted.

Printed per page: the sliders found, the moves that ran, the median and max server-side run time of
those moves (fragment and full runs separately), and the script thread's own CPU time of those runs
(``time.thread_time``): the wall time also holds the waits for a core that Chromium, the Playwright
driver and the server's event loop (which sends each element to the browser) share on 2 cores. Target (issue 16): <= 100 ms a rerun.
Uses Debian's chromium (``shutil.which("chromium")``); never downloads one.
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
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
import server_support  # noqa: E402
from server_support import CHROMIUM_ARGS, TIMED_SERVER_HOOK, timed_runs, wait_idle  # noqa: E402
from shared import app_pages  # noqa: E402

THUMBS = '[data-testid="stSlider"] input[type="range"]'  # one per thumb (React Aria), sidebar included
AT_END_JS = """(i) => {
    const t = document.querySelectorAll('[data-testid="stSlider"] input[type="range"]')[i];
    if (!t) return null;
    return Number(t.value) >= Number(t.max);
}"""


TABS = '[data-testid="stMain"] [role="tab"]'  # a page that draws one tab at a time (pages/common.lazy_tabs)


def bench_page(page, base: str, url_path: str, log: Path, moves: int) -> list[tuple[str, dict]]:
    """(tab name, record) for each tab of the page ("" for a page without tabs), every slider moved."""
    page.goto(f"{base}/{url_path}")
    page.wait_for_selector('[data-testid="stMain"] h1', timeout=server_support.NEVER_MS)  # the page's title
    wait_idle(page, quiet_s=1.5)
    out = []
    for k in range(max(1, page.locator(TABS).count())):
        name = ""
        if page.locator(TABS).count():
            tab = page.locator(TABS).nth(k)
            name = tab.inner_text().strip()
            if k:
                tab.click()
                wait_idle(page, quiet_s=1.0)
        out.append((name, _move_sliders(page, log, moves)))
    return out


def _move_sliders(page, log: Path, moves: int) -> dict:
    n = page.locator(THUMBS).count()
    rec = {"sliders": n, "frag": [], "full": [], "cpu": [], "cut": 0, "silent": 0, "slow": {}}
    for i in range(n):
        for m in range(moves):
            thumb = page.locator(THUMBS).nth(i)
            if not thumb.count():
                break
            key = "ArrowLeft" if page.evaluate(AT_END_JS, i) else "ArrowRight"
            since = time.time()
            thumb.focus()
            page.keyboard.press(key)
            wait_idle(page, quiet_s=0.4)
            runs = timed_runs(log, since, cpu=True)
            if not runs:
                rec["silent"] += 1
                continue
            rec["cut"] += sum(1 for r in runs if r[1])
            done = [r for r in runs if not r[1]]
            for ms, _, frag, cpu_ms in done:
                rec["frag" if frag else "full"].append(ms)
                rec["cpu"].append(cpu_ms)
                if ms > 100:
                    label = thumb.get_attribute("aria-label") or f"slider {i + 1}"
                    rec["slow"].setdefault(label, []).append(ms)
    return rec


def _stat(xs: list[float]) -> str:
    return f"median {statistics.median(xs):6.1f} ms, max {max(xs):6.1f} ms ({len(xs)} runs)" if xs else "none"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--moves", type=int, default=2, help="key presses per slider")
    ap.add_argument("--pages", default="", help="comma-separated url paths (default: every visible page)")
    args = ap.parse_args()
    chromium = shutil.which("chromium")
    if not chromium:
        raise SystemExit("no chromium on PATH")
    pages = [p for p in app_pages() if not p["hidden"]]  # the default page's url_path is ""
    if args.pages:
        pages = [p for p in pages if (p["url_path"] or "overview") in args.pages.split(",")]
    from playwright.sync_api import sync_playwright
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as pw:
        log = Path(tmp) / "runs.log"
        with server_support.running_server(Path(tmp) / "server.log",
                                           launcher=[sys.executable, "-c", TIMED_SERVER_HOOK],
                                           env={"BENCH_RERUN_LOG": str(log)}) as (base, _):
            browser = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
            try:
                page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
                page.goto(base + "/")  # the first session loads the kernels; not timed
                page.wait_for_selector("text=Total cost", timeout=server_support.NEVER_MS)
                wait_idle(page)
                print(f"server-side run after a slider move (real server, Chromium, {args.moves} moves a slider; "
                      "target <= 100 ms)")
                worst, cpu = [], []
                for p in pages:
                    for tab, r in bench_page(page, base, p["url_path"], log, args.moves):
                        allr = r["frag"] + r["full"]
                        worst.extend(allr)
                        cpu.extend(r["cpu"])
                        where = p["title"] + (f" / {tab}" if tab else "")
                        print(f"  {where:30s} {r['sliders']:3d} sliders  fragment runs: {_stat(r['frag'])}; "
                              f"full runs: {_stat(r['full'])}; script thread CPU: {_stat(r['cpu'])}; "
                              f"interrupted {r['cut']}, no run {r['silent']}")
                        for label, xs in r["slow"].items():
                            print(f"      over 100 ms: {label!r}: " + ", ".join(f"{x:.0f}" for x in xs) + " ms")
                if worst:
                    over = sum(1 for x in worst if x > 100)
                    print(f"  all pages: median {statistics.median(worst):.1f} ms, max {max(worst):.1f} ms, "
                          f"{over} of {len(worst)} runs over 100 ms; script thread CPU median "
                          f"{statistics.median(cpu):.1f} ms, {sum(1 for x in cpu if x > 100)} over 100 ms")
            finally:
                browser.close()


if __name__ == "__main__":
    main()
