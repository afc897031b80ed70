"""Concurrency benchmark: prints numbers, asserts nothing.

    python benchmarks/bench_concurrency.py                  # N = 1 then N = 8 sessions, 10 moves each
    python benchmarks/bench_concurrency.py --sessions 8     # only N = 8
    python benchmarks/bench_concurrency.py --moves 20

One real ``streamlit run app.py`` server; N headless Chromium contexts in one
browser, driven from one thread with Playwright's async API. Every session
opens its own scenario link, then (all sessions at once) presses ArrowRight on
the "Model size (billion parameters)" slider ``--moves`` times, waiting after
each move until its Total cost has changed and the app is idle.

Client-observed latency of one move = from the keydown event to the DOM
mutation that shows the new Total cost, both timed inside the page
(performance.now(), MutationObserver), so Python's scheduling of eight pages
does not add to it.

Server-side rerun time: the server is started through a small wrapper that
times every script execution (streamlit's ``exec_func_with_error_handling``,
i.e. one full run of app.py and the page) and logs it; runs that were cut
short by a newer widget event ("interrupted") are counted separately.

Uses Debian's chromium (``shutil.which("chromium")``); never downloads one.
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import costcore
from costcore import api, fmt  # noqa: E402
from costcore.scenario import share  # noqa: E402
from costcore.scenario import schema
import server_support  # noqa: E402
from server_support import CHROMIUM_ARGS, pct  # noqa: E402

VIEWPORT = {"width": 1280, "height": 900}
SLIDER_LABEL = "Model size (billion parameters)"
DEFAULT_PRESET = "pipeline-70b"
SLIDER_STEP = 0.1
MOVE_TIMEOUT_MS = 60_000

# Scenarios whose displayed Total cost changes at every 0.1 B step (checked before the run).
SCENARIOS = [
    ("llama2-7b-pretrain", "1"), ("llama3-8b", "1"), ("scratch-7b", "1"), ("llama2-7b-pretrain", "3"),
    ("llama3-8b", "3"), ("scratch-7b", "3"), ("llama2-7b-pretrain", "5"), ("llama3-8b", "5"),
    ("scratch-7b", "5"), ("llama2-7b-pretrain", "2"), ("llama3-8b", "2"), ("scratch-7b", "2"),
]


# Installed in every page: times keydown -> first DOM mutation that changes the Total cost text.
PAGE_PROBE = """() => {
    if (window.__probe) return;
    window.__probe = true;
    const totalText = () => {
        for (const m of document.querySelectorAll('[data-testid="stMetric"]')) {
            const l = m.querySelector('[data-testid="stMetricLabel"]');
            if (l && /Total cost/.test(l.innerText)) {
                const v = m.querySelector('[data-testid="stMetricValue"]');
                return v ? v.innerText.trim() : null;
            }
        }
        return null;
    };
    window.__totalText = totalText;
    document.addEventListener('keydown', () => {
        const b = window.__bench;
        if (b && b.t0 === null) b.t0 = performance.now();
    }, {capture: true});
    new MutationObserver(() => {
        const b = window.__bench;
        if (!b || b.t0 === null || b.t1 !== null) return;
        const t = totalText();
        if (t !== null && t !== b.before) { b.t1 = performance.now(); b.after = t; }
    }).observe(document.body, {subtree: true, childList: true, characterData: true});
}"""


def summary(values_ms) -> str:
    if not values_ms:
        return "no samples"
    return (f"n={len(values_ms):4d}  p50 {pct(values_ms, 50):7.0f} ms  p95 {pct(values_ms, 95):7.0f} ms  "
            f"max {max(values_ms):7.0f} ms  mean {statistics.fmean(values_ms):7.0f} ms")


# ---------------------------------------------------------------------------
# Server
# ---------------------------------------------------------------------------
@contextlib.contextmanager
def running_server(workdir: Path):
    """The real server, started through server_support.TIMED_SERVER_HOOK: every script run timed in-process."""
    rerun_log = workdir / "reruns.log"
    try:
        with server_support.running_server(workdir / "server.log",
                                           launcher=[sys.executable, "-c", server_support.TIMED_SERVER_HOOK],
                                           env={"BENCH_RERUN_LOG": str(rerun_log)}) as (base, _):
            yield base, rerun_log
    except server_support.ServerError as err:
        raise SystemExit(str(err)) from None


def read_reruns(path: Path, since: float) -> tuple[list[float], list[float]]:
    """(completed run times, interrupted run times) in ms, of runs started at or after `since`."""
    runs = server_support.timed_runs(path, since)
    return [ms for ms, cut, _ in runs if not cut], [ms for ms, cut, _ in runs if cut]


# ---------------------------------------------------------------------------
# Sessions
# ---------------------------------------------------------------------------
def expected_total(url: str) -> str:
    params = dict(parse_qsl(urlsplit(url).query, keep_blank_values=True))
    scn, _, _ = share.decode(params, DEFAULT_PRESET)
    return fmt.usd(costcore.estimate(scn).total_usd)


def changes_every_step(preset: str, start: float, moves: int) -> bool:
    base = api.load_preset(preset)
    shown = [fmt.usd(costcore.estimate(schema.validate(schema.set_path(base, "model.params_b",
                                                                        round(start + k * SLIDER_STEP, 6)))).total_usd)
             for k in range(moves + 1)]
    return all(a != b for a, b in itertools.pairwise(shown))


async def wait_idle(page, quiet_s: float = 0.3, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    last, since = None, time.monotonic()
    while time.monotonic() < deadline:
        snap = await page.evaluate("""() => {
            const w = document.querySelector('[data-testid="stStatusWidget"]');
            return [!!w && /running/i.test(w.innerText), document.querySelectorAll('[data-stale="true"]').length,
                    location.href, window.__totalText ? window.__totalText() : null];
        }""")
        if snap[0] or snap[1] > 0 or snap != last:
            last, since = snap, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            return
        await asyncio.sleep(0.05)
    raise TimeoutError(f"page did not settle within {timeout_s} s")


async def session(browser, base: str, preset: str, params_b: str, moves: int, barrier) -> dict:
    rec = {"preset": preset, "params_b": params_b, "latency_ms": [], "errors": [], "mismatch": []}
    ctx = await browser.new_context(viewport=VIEWPORT)
    try:
        page = await ctx.new_page()
        page.on("pageerror", lambda e: rec["errors"].append(str(e)))
        await page.goto(f"{base}/?p={preset}&model.params_b={params_b}")
        await page.locator('[data-testid="stMetricValue"]').first.wait_for(state="visible", timeout=90_000)
        await page.evaluate(PAGE_PROBE)
        await wait_idle(page)
        thumb = page.locator('[data-testid="stSlider"]').filter(has_text=SLIDER_LABEL).first \
            .locator('[role="slider"], input[type="range"]').first
        await barrier.wait()
        for _ in range(moves):
            before = await page.evaluate("() => window.__totalText()")
            await page.evaluate("(b) => { window.__bench = {t0: null, t1: null, before: b, after: null}; }", before)
            await thumb.focus()
            await page.keyboard.press("ArrowRight")
            try:
                await page.wait_for_function("() => window.__bench.t1 !== null", timeout=MOVE_TIMEOUT_MS,
                                             polling=50)
            except Exception as err:  # noqa: BLE001 - a benchmark reports, it does not stop
                rec["errors"].append(f"move timed out: {str(err)[:120]}")
                break
            b = await page.evaluate("() => window.__bench")
            rec["latency_ms"].append(b["t1"] - b["t0"])
            await wait_idle(page)
        want = expected_total(page.url)
        got = await page.evaluate("() => window.__totalText()")
        if got != want:
            rec["mismatch"].append(f"shows {got}, its URL costs {want} ({urlsplit(page.url).query})")
        rec["exceptions"] = await page.locator('[data-testid="stException"]').count()
    finally:
        await ctx.close()
    return rec


async def run_round(base: str, rerun_log: Path, n: int, moves: int) -> None:
    from playwright.async_api import async_playwright

    plan = []
    for preset, pb in SCENARIOS:
        if changes_every_step(preset, float(pb), moves):
            plan.append((preset, pb))
    if not plan:
        raise SystemExit("no scenario changes its Total cost at every slider step")
    plan = [plan[i % len(plan)] for i in range(n)]
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=shutil.which("chromium"), args=CHROMIUM_ARGS)
        try:
            barrier = asyncio.Barrier(n)
            t_start = time.time()
            w0 = time.perf_counter()
            recs = await asyncio.gather(*[session(browser, base, p, pb, moves, barrier) for p, pb in plan])
            wall = time.perf_counter() - w0
        finally:
            await browser.close()
    lat = [x for r in recs for x in r["latency_ms"]]
    done, cut = read_reruns(rerun_log, t_start)
    print(f"N = {n} concurrent sessions x {moves} slider moves  (wall {wall:.1f} s incl. page loads)")
    print(f"  client: key press -> updated Total cost   {summary(lat)}")
    for r in recs:
        if r["latency_ms"]:
            print(f"    {r['preset']:20s} {r['params_b']:>4s} B: p50 {pct(r['latency_ms'], 50):6.0f} ms  "
                  f"max {max(r['latency_ms']):6.0f} ms  ({len(r['latency_ms'])} moves)")
    print(f"  server: script run (completed)           {summary(done)}")
    print(f"  server: script runs interrupted by a newer event: {len(cut)}")
    problems = [f"{r['preset']} {r['params_b']}: {m}" for r in recs for m in r["mismatch"]]
    problems += [f"{r['preset']} {r['params_b']}: {e}" for r in recs for e in r["errors"]]
    problems += [f"{r['preset']} {r['params_b']}: {r['exceptions']} exception(s) shown"
                 for r in recs if r.get("exceptions")]
    print("  correctness: " + ("every session shows the total of its own URL" if not problems else
                               "; ".join(problems)))


async def warm(base: str) -> None:
    from playwright.async_api import async_playwright
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=shutil.which("chromium"), args=CHROMIUM_ARGS)
        try:
            page = await (await browser.new_context(viewport=VIEWPORT)).new_page()
            t0 = time.perf_counter()
            await page.goto(f"{base}/?p={DEFAULT_PRESET}")
            await page.locator('[data-testid="stMetricValue"]').first.wait_for(state="visible", timeout=120_000)
            print(f"warm-up: first page load {time.perf_counter() - t0:.1f} s")
        finally:
            await browser.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", default="1,8", help="comma-separated session counts (default 1,8)")
    ap.add_argument("--moves", type=int, default=10)
    args = ap.parse_args()
    if shutil.which("chromium") is None:
        raise SystemExit("no 'chromium' on PATH (Debian: apt-get install chromium); nothing measured")
    try:
        import playwright  # noqa: F401
    except ImportError:
        raise SystemExit("the Python package playwright is not installed; nothing measured") from None
    costcore.warm_up()
    print(f"CPUs: {os.cpu_count()}  python {sys.version.split()[0]}")
    with tempfile.TemporaryDirectory() as tmp, running_server(Path(tmp)) as (base, rerun_log):
        asyncio.run(warm(base))
        for n in (int(x) for x in args.sessions.split(",")):
            asyncio.run(run_round(base, rerun_log, n, args.moves))


if __name__ == "__main__":
    main()
