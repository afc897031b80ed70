"""Concurrent browser sessions against one real Streamlit server: no cross-talk.

    python -m pytest tests/test_concurrency_browser.py -q

Eight headless Chromium contexts (one browser, one thread, Playwright's async
API under asyncio.gather) each open a different scenario link, read their
Total cost, move the "Model size (billion parameters)" slider with the
keyboard at the same moment (a few presses, each waiting for its own rerun
while the other sessions rerun), and wait for their Total cost to change. Each session's final Total cost
must be the one costcore computes for the scenario in that session's own
final URL (costcore.scenario.share.decode + costcore.estimate +
costcore.fmt.usd), and its model size must be its own start value moved its
own number of rungs up the slider's log ladder (pages/common.log_ladder): no
session sees another's state.

Uses Debian's chromium (``shutil.which("chromium")``); no browser is ever
downloaded. Without chromium (or playwright) the module is skipped locally,
and fails when the ``CI`` environment variable is set.
"""
from __future__ import annotations

import asyncio
import time
from urllib.parse import parse_qsl, urlsplit

import pytest

import costcore
from costcore import api, fmt
from costcore.scenario import schema
from costcore.scenario import share

from server_support import APP_STATE_JS, CHROMIUM_ARGS, NEVER_MS, NEVER_S, require_chromium, server_for_tests, tail as _tail

SERVER_START_TIMEOUT_S = NEVER_S
FIRST_LOAD_TIMEOUT_MS = NEVER_MS   # the first session of a server loads/compiles the kernels
RERUN_TIMEOUT_MS = NEVER_MS        # eight sessions share two CPUs: be generous per rerun

VIEWPORT = {"width": 1280, "height": 900}
METRIC = '[data-testid="stMetric"]'
METRIC_VALUE = '[data-testid="stMetricValue"]'
METRIC_LABEL = '[data-testid="stMetricLabel"]'
EXCEPTION = '[data-testid="stException"]'
MODEL_SLIDER_LABEL = "Model size (billion parameters)"
DEFAULT_PRESET = "pipeline-70b"
PRESSES = 3  # ArrowRight presses per session: more than one, so each session reruns while others do

# (preset, model.params_b in the link or None for the preset's own): eight different scenarios whose
# Total cost moves visibly (3 significant digits) and that still fit a few rungs up the size ladder.
SESSIONS = [
    ("llama2-7b-pretrain", None), ("llama2-7b-pretrain", "1"), ("llama2-7b-pretrain", "3"),
    ("llama3-8b", None), ("llama3-8b", "1.5"), ("llama3-8b", "3"),
    ("scratch-7b", None), ("scratch-7b", "2.5"),
]


CHROMIUM = require_chromium()
from playwright.async_api import async_playwright, expect  # noqa: E402


# ---------------------------------------------------------------------------
# Server fixture (tests/server_support.py)
# ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def server(tmp_path_factory):
    log = tmp_path_factory.mktemp("streamlit") / "server.log"
    with server_for_tests(log, SERVER_START_TIMEOUT_S) as base:
        yield base, log


# ---------------------------------------------------------------------------
# What costcore says a URL costs
# ---------------------------------------------------------------------------
def expected_from_url(url: str) -> tuple[str, dict, str, list[str]]:
    """(formatted Total cost, scenario, preset, decode warnings) of the scenario in a URL's query string."""
    params = dict(parse_qsl(urlsplit(url).query, keep_blank_values=True))
    scn, preset, warnings = share.decode(params, DEFAULT_PRESET)
    return fmt.usd(costcore.estimate(scn).total_usd), scn, preset, warnings


def _start_value(preset: str, params_b: str | None) -> float:
    if params_b is not None:
        return float(params_b)
    return float(schema.effective_value(api.load_preset(preset), "model.params_b"))


def _ladder(start: float) -> list:
    """The size slider's options at ``start``, as the page builds them (pages/common.knob, widget="log"):
    round sizes on a log scale over the input's range, plus the current value."""
    from pages.common import log_ladder
    f = schema.BY_PATH["model.params_b"]
    return log_ladder(f.lo, f.hi, start, False)


def _after_presses(start: float, presses: int) -> float:
    """The size ``presses`` ArrowRight presses lead to: that many rungs up the ladder. The ladder drops
    an off-rung start once the slider leaves it, but the rungs above it stay the same."""
    ladder = _ladder(start)
    return ladder[ladder.index(start) + presses]


def _presses_needed(preset: str, start: float) -> int:
    """PRESSES, checked: the plan still fits there and its displayed Total cost differs from the start's."""
    base = api.load_preset(preset)
    # the size slider resizes the model (pages/common.apply -> schema.resize_model), as here
    shown = fmt.usd(costcore.estimate(schema.validate(schema.resize_model(base, start))).total_usd)
    res = costcore.estimate(schema.validate(schema.resize_model(base, _after_presses(start, PRESSES))))
    if not res.feasible or fmt.usd(res.total_usd) == shown:
        raise AssertionError(f"{preset} at {start} B: {PRESSES} rungs up the size ladder does not fit or does not "
                             "change the displayed Total cost; pick another scenario for this test")
    return PRESSES


# ---------------------------------------------------------------------------
# Browser helpers (async)
# ---------------------------------------------------------------------------
async def _total_cost(page, timeout_ms: int = RERUN_TIMEOUT_MS):
    metric = page.locator(METRIC).filter(has=page.locator(METRIC_LABEL, has_text="Total cost")).first
    value = metric.locator(METRIC_VALUE)
    await value.wait_for(state="visible", timeout=timeout_ms)
    return value


async def _wait_idle(page, quiet_s: float = 0.8, timeout_s: float = NEVER_S) -> None:
    """Until no rerun is in flight and the URL and metrics stop changing."""
    deadline = time.monotonic() + timeout_s
    last, since = None, time.monotonic()
    while time.monotonic() < deadline:
        snap = await page.evaluate(APP_STATE_JS)
        busy = snap[0] or snap[1] > 0
        if busy or snap != last:
            last, since = snap, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"the app did not settle within {timeout_s} s (last state {last})")


def _slider_thumb(page):
    return page.locator('[data-testid="stSlider"]').filter(has_text=MODEL_SLIDER_LABEL).first \
        .locator('input[type="range"], [role="slider"]').first


async def _slider_value(page) -> float:
    """The size the thumb shows ('6.74'): a select slider's input holds the rung's index, its text the value."""
    return float((await _slider_thumb(page).get_attribute("aria-valuetext")).replace(",", ""))


async def _trail_point(page) -> str:
    size = dict(parse_qsl(urlsplit(page.url).query)).get("model.params_b", "preset")
    focused = await page.evaluate("() => document.activeElement && document.activeElement.getAttribute('role')")
    return f"thumb {await _slider_value(page):g}, URL {size}, focus {focused}"


async def _wait_for_size(page, want: float, timeout_s: float = NEVER_S) -> None:
    """Until the page's URL carries model size ``want``; a lost press times out with the trail."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        size = dict(parse_qsl(urlsplit(page.url).query)).get("model.params_b")
        if size is not None and abs(float(size) - want) <= 1e-9:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"the URL never reached model size {want:g}: {await _trail_point(page)}")


async def _session(browser, base: str, i: int, preset: str, params_b: str | None, presses: int,
                   barrier: asyncio.Barrier) -> dict:
    rec: dict = {"i": i, "preset": preset, "params_b": params_b, "presses": presses, "js_errors": []}
    ctx = await browser.new_context(viewport=VIEWPORT)
    ctx.set_default_timeout(RERUN_TIMEOUT_MS)
    try:
        page = await ctx.new_page()
        page.on("pageerror", lambda e: rec["js_errors"].append(str(e)))
        url = f"{base}/?p={preset}" + (f"&model.params_b={params_b}" if params_b is not None else "")
        await page.goto(url)
        total = await _total_cost(page, FIRST_LOAD_TIMEOUT_MS)
        await _wait_idle(page)
        rec["start_url"] = page.url
        rec["before"] = (await total.inner_text()).strip()
        rec["expected_before"], _, rec["preset_before"], rec["warnings_before"] = expected_from_url(page.url)
        rec["start_value"] = await _slider_value(page)
        thumb = _slider_thumb(page)
        await barrier.wait()  # every session moves its slider at the same moment
        await thumb.focus()
        rec["trail"] = []  # (thumb's value, URL's size) after each press: what a failure message shows
        start = rec["start_value"]
        for k in range(1, presses + 1):
            await page.keyboard.press("ArrowRight")
            # one press, then its rerun: a press made while its own session reruns is a race in
            # Streamlit's browser code (the thumb may keep it while the server never gets it), which
            # made this test fail one run in three on a loaded machine. The eight sessions still
            # rerun at the same time, which is what cross-talk needs.
            await _wait_for_size(page, _after_presses(start, k))
            await _wait_idle(page)
            rec["trail"].append(await _trail_point(page))
        await expect(total).not_to_have_text(rec["before"], timeout=RERUN_TIMEOUT_MS)
        await _wait_idle(page)
        rec["final_url"] = page.url
        rec["trail"].append(await _trail_point(page))
        rec["after"] = (await total.inner_text()).strip()
        rec["final_value"] = await _slider_value(page)
        rec["expected_after"], scn, rec["preset_after"], rec["warnings_after"] = expected_from_url(page.url)
        rec["url_params_b"] = float(schema.effective_value(scn, "model.params_b"))
        rec["exceptions"] = [t[:500] for t in await page.locator(EXCEPTION).all_inner_texts()]
        return rec
    finally:
        await ctx.close()


async def _warm_server(browser, base: str) -> None:
    """One sequential page load first: the server's first session loads/compiles the numba kernels."""
    ctx = await browser.new_context(viewport=VIEWPORT)
    try:
        page = await ctx.new_page()
        await page.goto(f"{base}/?p={DEFAULT_PRESET}")
        await _total_cost(page, FIRST_LOAD_TIMEOUT_MS)
        await _wait_idle(page)
    finally:
        await ctx.close()


async def _run_all(base: str, plan) -> list:
    async with async_playwright() as pw:
        try:
            browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        except Exception as err:  # noqa: BLE001
            pytest.fail(f"could not launch {CHROMIUM}: {err}", pytrace=False)
        try:
            await _warm_server(browser, base)
            barrier = asyncio.Barrier(len(plan))
            return await asyncio.gather(
                *[_session(browser, base, i, preset, pb, presses, barrier)
                  for i, (preset, pb, presses) in enumerate(plan)], return_exceptions=True)
        finally:
            await browser.close()


# ---------------------------------------------------------------------------
# Test
# ---------------------------------------------------------------------------
def test_eight_concurrent_sessions_do_not_cross_talk(server):
    base, log = server
    costcore.warm_up()
    plan = [(preset, pb, _presses_needed(preset, _start_value(preset, pb))) for preset, pb in SESSIONS]
    results = asyncio.run(_run_all(base, plan))

    problems: list[str] = []
    for (preset, pb, presses), rec in zip(plan, results):
        tag = f"session {preset} params_b={pb or 'preset'} (+{presses} rungs)"
        if isinstance(rec, BaseException):
            problems.append(f"{tag}: {type(rec).__name__}: {str(rec)[:600]}")
            continue
        start = _start_value(preset, pb)
        if rec["before"] != rec["expected_before"]:
            problems.append(f"{tag}: shows {rec['before']} on load, its URL costs {rec['expected_before']}")
        if abs(rec["start_value"] - start) > 1e-6:  # the start is a rung of its own ladder, off-grid or not
            problems.append(f"{tag}: slider starts at {rec['start_value']}, expected {start}")
        if rec["preset_after"] != preset:
            problems.append(f"{tag}: final URL carries preset {rec['preset_after']!r}: {rec['final_url']}")
        if rec["warnings_before"] or rec["warnings_after"]:
            problems.append(f"{tag}: its URL does not decode cleanly: {rec['warnings_before'] + rec['warnings_after']}")
        want = _after_presses(start, presses)
        if abs(rec["url_params_b"] - want) > 1e-6 or abs(rec["final_value"] - want) > 1e-6:
            problems.append(f"{tag}: model size ends at {rec['final_value']} (URL {rec['url_params_b']}), "
                            f"expected its own {start} moved {presses} rungs up the ladder = {want:g}; "
                            f"after each press and at the end: {rec['trail']}; final query {urlsplit(rec['final_url']).query}")
        if rec["after"] == rec["before"]:
            problems.append(f"{tag}: Total cost did not change ({rec['before']})")
        if rec["after"] != rec["expected_after"]:
            problems.append(f"{tag}: shows Total cost {rec['after']}, but its final URL "
                            f"({urlsplit(rec['final_url']).query}) costs {rec['expected_after']}")
        if rec["exceptions"]:
            problems.append(f"{tag}: shows an exception: {rec['exceptions'][0]}")
        if rec["js_errors"]:
            problems.append(f"{tag}: JavaScript errors: {rec['js_errors'][:2]}")
    if problems:
        problems.append(f"server log tail:\n{_tail(log, 2500)}")
    assert not problems, "\n".join(problems)
    finals = [r["after"] for r in results]
    assert len({r["final_url"] for r in results}) == len(results), "two sessions ended on the same URL"
    print(f"8 concurrent sessions: {finals}")  # their speed: benchmarks/bench_concurrency.py prints it
