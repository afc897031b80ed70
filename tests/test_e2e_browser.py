"""End-to-end browser tests: the real Streamlit server driven by headless Chromium.

    python -m pytest tests/test_e2e_browser.py -q -x

Uses Debian's chromium (``shutil.which("chromium")``) through the Python
``playwright`` package; no browser is ever downloaded. Without chromium (or
playwright) the module is skipped locally, but fails when the ``CI``
environment variable is set: CI must run the browser tests.

Full-page screenshots of every page go to ``artifacts/screenshots/<page>.png``.
"""
from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from server_support import CHROMIUM_ARGS, NEVER_MS, NEVER_S, ROOT, require_chromium, server_for_tests, wait_idle
from shared import app_pages
SHOTS = ROOT / "artifacts" / "screenshots"

SERVER_START_TIMEOUT_S = NEVER_S      # the first start may compile the numba kernels
FIRST_LOAD_TIMEOUT_MS = NEVER_MS   # the first session of a server loads/compiles the kernels
RERUN_TIMEOUT_MS = NEVER_MS  # a wait, not a speed: benchmarks/ print the speeds

VIEWPORT = {"width": 1400, "height": 900}

# url path -> page title (st.title of the page, also its navigation title).
# The default page (Overview) is served at the root; /overview is its hidden alias (app.py).
PAGES = {
    "": "Overview",
    "overview": "Overview",
    "pretraining": "Pre-training and CPT",
    "job-layout": "Job layout",
    "post-training": "Post-training",
    "fine-tuning": "Fine-tuning workbench",
    "checkpoints": "Checkpoints and reliability",
    "data-people": "Data, evaluation and people",
}

PAGES_WITHOUT_CHARTS = {"glossary"}  # words and formulas only
# pages that plan a stage the default preset lacks open on a preset that has it (visiting never adds a stage)
PAGE_PRESETS = {"multimodal": "llava-1.5-7b"}
PAGES_WITHOUT_SCENARIO_LINK = {"cluster"}  # its link carries the cluster, not a scenario (test_cluster_browser.py)

METRIC_VALUE = '[data-testid="stMetricValue"]'
METRIC_LABEL = '[data-testid="stMetricLabel"]'
SHARE_CODE = '[data-testid="stSidebar"] [data-testid="stMarkdownContainer"] code'
ALERT = '[data-testid="stAlert"]'
EXCEPTION = '[data-testid="stException"]'
CHART = '[data-testid="stVegaLiteChart"]'
MODEL_SLIDER_LABEL = "Model size (billion parameters)"


CHROMIUM = require_chromium()
from playwright.sync_api import expect, sync_playwright  # noqa: E402


# ---------------------------------------------------------------------------
# Fixtures
# ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """Base URL of a real server shared by the tests of this module."""
    with server_for_tests(tmp_path_factory.mktemp("streamlit") / "server.log", SERVER_START_TIMEOUT_S) as base:
        yield base


@pytest.fixture(scope="module")
def browser():
    pw = sync_playwright().start()
    try:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    except Exception as err:  # noqa: BLE001
        pw.stop()
        pytest.fail(f"could not launch {CHROMIUM}: {err}", pytrace=False)
    yield b
    b.close()
    pw.stop()


@pytest.fixture
def context(browser):
    ctx = browser.new_context(viewport=VIEWPORT)
    ctx.set_default_timeout(RERUN_TIMEOUT_MS)
    yield ctx
    ctx.close()


@pytest.fixture(scope="module")
def baseline(server, browser):
    """Total cost of the default scenario (app root, no parameters), from its own context."""
    ctx = browser.new_context(viewport=VIEWPORT)
    try:
        page = ctx.new_page()
        page.goto(server + "/")
        total = _total_cost(page, FIRST_LOAD_TIMEOUT_MS)
        expect(total).not_to_have_text("", timeout=RERUN_TIMEOUT_MS)
        wait_idle(page)
        return {"total": total.inner_text().strip(), "url": page.url}
    finally:
        ctx.close()


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------
def _total_cost(page, timeout_ms: int = RERUN_TIMEOUT_MS):
    """Locator of the "Total cost" metric value (the first metric of every page), once visible."""
    metric = page.locator('[data-testid="stMetric"]').filter(
        has=page.locator(METRIC_LABEL, has_text="Total cost")).first
    value = metric.locator(METRIC_VALUE)
    value.wait_for(state="visible", timeout=timeout_ms)
    first_label = page.locator(METRIC_LABEL).first.inner_text().strip()
    assert first_label == "Total cost", f"the first metric is {first_label!r}, expected 'Total cost'"
    return value


def _size_thumb(page):
    """The model-size slider's thumb: a select slider whose input holds the rung's index."""
    return page.locator('[data-testid="stSlider"]').filter(has_text=MODEL_SLIDER_LABEL).first \
        .locator('input[type="range"], [role="slider"]').first


def _size_value(thumb) -> float:
    """The size the thumb shows ('70.6', '1,000'): its aria-valuetext, the index being its value."""
    return float(thumb.get_attribute("aria-valuetext").replace(",", ""))


def _ladder(current: float) -> list:
    """The size slider's options, as the page builds them (pages/common.knob, widget="log")."""
    from costcore.scenario.schema import BY_PATH
    from pages.common import log_ladder
    f = BY_PATH["model.params_b"]
    return log_ladder(f.lo, f.hi, current, False)


def _usd(text: str) -> float:
    """'$28.8M' -> 28.8e6 (inverse of costcore.fmt.usd, for comparisons only)."""
    m = re.fullmatch(r"(-?)\$([\d,.]+)([KMBT]?)", text.strip())
    assert m, f"not a money value: {text!r}"
    mult = {"": 1, "K": 1e3, "M": 1e6, "B": 1e9, "T": 1e12}[m.group(3)]
    return (-1 if m.group(1) else 1) * float(m.group(2).replace(",", "")) * mult


def _headline_metrics(page) -> list[str]:
    return [t.strip() for t in page.locator('[data-testid="stMain"] ' + METRIC_VALUE).all_inner_texts()[:5]]


def _alerts(page) -> list[str]:
    return [t.strip() for t in page.locator(ALERT).all_inner_texts()]


def _share_link(page) -> str:
    code = page.locator(SHARE_CODE).first
    code.wait_for(state="visible")
    return re.sub(r"\s+", "", code.inner_text())


def _wait_charts(page, minimum: int = 1, timeout_s: float = NEVER_S) -> int:
    """Wait until every Vega-Lite chart on the page has drawn a non-empty canvas or svg."""
    deadline = time.monotonic() + timeout_s
    state = None
    while time.monotonic() < deadline:
        state = page.evaluate("""(sel) => [...document.querySelectorAll(sel)].map(c => {
            const g = c.querySelector('canvas, svg');
            if (!g) return 0;
            const r = g.getBoundingClientRect();
            return (r.width > 10 && r.height > 10) ? 1 : 0;
        })""", CHART)
        if len(state) >= minimum and all(state):
            return len(state)
        time.sleep(0.2)
    raise AssertionError(f"charts did not render within {timeout_s} s: {state!r} "
                         f"(1 = drawn, 0 = empty; expected at least {minimum})")


def _full_page_screenshot(page, path: Path) -> None:
    """Streamlit scrolls inside stMain, not the document: grow the viewport to the content first."""
    height = page.evaluate("""() => Math.max(
        document.documentElement.scrollHeight,
        ...[...document.querySelectorAll('[data-testid="stMain"], [data-testid="stSidebarContent"]')]
            .map(e => e.scrollHeight))""")
    page.set_viewport_size({"width": VIEWPORT["width"], "height": min(int(height) + 40, 12000)})
    try:
        time.sleep(0.5)  # let charts re-layout to the new viewport
        _wait_charts(page, minimum=0)
        page.screenshot(path=str(path), full_page=True)
    finally:
        page.set_viewport_size(VIEWPORT)


# ---------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------
def test_slider_changes_total_and_share_link_reproduces_it(server, browser, context, baseline):
    page = context.new_page()
    page.goto(server + "/")
    total = _total_cost(page, FIRST_LOAD_TIMEOUT_MS)
    wait_idle(page)
    before = total.inner_text().strip()
    assert before == baseline["total"]

    thumb = _size_thumb(page)
    old_value = _size_value(thumb)
    thumb.focus()
    page.keyboard.press("ArrowRight")  # one rung up the log ladder: a larger model that still fits
    want = _ladder(old_value)[_ladder(old_value).index(old_value) + 1]
    want_txt = f"{want:g}"

    page.wait_for_url(re.compile(rf"[?&]model\.params_b={re.escape(want_txt)}(&|$)"), timeout=RERUN_TIMEOUT_MS)
    expect(total).not_to_have_text(before, timeout=RERUN_TIMEOUT_MS)
    wait_idle(page)
    after = total.inner_text().strip()
    assert after != before
    assert _usd(after) > _usd(before), f"a larger model ({old_value} B -> {want} B) must cost more: {before} -> {after}"
    metrics = _headline_metrics(page)
    checks = _alerts(page)  # feasibility checks (e.g. memory per GPU) of the changed scenario

    link = _share_link(page)
    assert link.startswith(server), f"share link {link!r} does not point at {server}"
    assert "p=" in link and f"model.params_b={want_txt}" in link, link

    fresh = browser.new_context(viewport=VIEWPORT)  # no cookies, storage or session shared
    try:
        other = fresh.new_page()
        other.goto(link)
        shared_total = _total_cost(other, FIRST_LOAD_TIMEOUT_MS)
        expect(shared_total).to_have_text(after, timeout=RERUN_TIMEOUT_MS)
        wait_idle(other)
        assert shared_total.inner_text().strip() == after
        assert _headline_metrics(other) == metrics, "the share link must reproduce every headline metric"
        assert _size_value(_size_thumb(other)) == want
        shared_alerts = _alerts(other)
        assert not [a for a in shared_alerts if "URL parameter" in a], f"the share link was not clean: {shared_alerts}"
        not_found = [t for t in other.locator('[role="dialog"]').all_inner_texts() if "not found" in t.lower()]
        assert not not_found, f"the share link {link} shows {not_found}"
        assert shared_alerts == checks, "the share link must show the same checks as the original page"
    finally:
        fresh.close()


def test_infeasible_plan_shows_the_reason_where_the_total_would_be(server, context):
    """The slider's maximum (its ladder's top, 5,000 B) on the 70B preset's GPUs does not fit: no dollar
    headline, the sentence."""
    page = context.new_page()
    page.goto(server + "/")
    _total_cost(page, FIRST_LOAD_TIMEOUT_MS)
    wait_idle(page)
    thumb = _size_thumb(page)
    top = _ladder(_size_value(thumb))[-1]
    thumb.focus()
    page.keyboard.press("End")
    page.wait_for_url(re.compile(rf"[?&]model\.params_b={top:g}(&|$)"), timeout=RERUN_TIMEOUT_MS)
    assert _size_value(_size_thumb(page)) == top
    reason = page.locator('[data-testid="stAlert"]').filter(has_text="No total: the plan is infeasible.").first
    reason.wait_for(state="visible", timeout=RERUN_TIMEOUT_MS)
    wait_idle(page)
    text = reason.inner_text()
    assert "does not fit" in text and "GPU" in text, text
    assert page.locator(METRIC_LABEL, has_text="Total cost").count() == 0, \
        "an infeasible plan must not show a Total cost figure"
    assert page.locator(EXCEPTION).count() == 0
    page.screenshot(path=str(SHOTS / "infeasible-overview.png"), full_page=True)


def test_tampered_url_warns_and_still_renders(server, context, baseline):
    page = context.new_page()
    page.goto(f"{server}/?p=pipeline-70b&model.params_b=-5&stages.sft.epochs=abc")
    total = _total_cost(page, FIRST_LOAD_TIMEOUT_MS)
    wait_idle(page)
    alerts = _alerts(page)
    for param in ("model.params_b", "stages.sft.epochs"):
        assert any(param in a for a in alerts), f"no warning names {param}: {alerts}"
    assert total.inner_text().strip() == baseline["total"], "invalid values must fall back to the preset's"
    assert page.locator(EXCEPTION).count() == 0
    # the URL is rewritten to the valid scenario: the bad parameters are gone
    assert "model.params_b" not in page.url and "epochs" not in page.url, page.url


def test_path_traversal_preset_falls_back_to_default(server, context, baseline):
    page = context.new_page()
    page.goto(f"{server}/?p=../../etc/passwd")
    total = _total_cost(page, FIRST_LOAD_TIMEOUT_MS)
    wait_idle(page)
    alerts = _alerts(page)
    assert any("etc/passwd" in a or "unknown preset" in a for a in alerts), f"no warning about the preset: {alerts}"
    assert total.inner_text().strip() == baseline["total"], "the default preset must be rendered"
    default_preset = re.search(r"[?&]p=([^&]+)", baseline["url"]).group(1)
    assert re.search(rf"[?&]p={re.escape(default_preset)}(&|$)", page.url), page.url
    assert default_preset in page.locator('[data-testid="stMain"] [data-testid="stCaptionContainer"]').first.inner_text()
    body = page.locator("body").inner_text()
    assert "root:x:0:0" not in body, "the contents of /etc/passwd leaked into the page"
    assert page.locator(EXCEPTION).count() == 0


def test_deep_link_is_the_first_request_of_a_fresh_server(browser, tmp_path):
    """A shared deep link may be the very first request a server gets: it must go through
    st.navigation (not Streamlit's legacy pages/ router) and show the right page."""
    path, title = "checkpoints", PAGES["checkpoints"]
    with server_for_tests(tmp_path / "server.log", SERVER_START_TIMEOUT_S) as base:
        ctx = browser.new_context(viewport=VIEWPORT)
        try:
            page = ctx.new_page()
            page.goto(f"{base}/{path}?p=pipeline-70b")
            _total_cost(page, FIRST_LOAD_TIMEOUT_MS)
            wait_idle(page)
            heading = page.locator('[data-testid="stMain"] h1').first.inner_text().strip()
            assert heading == title
            nav = [t.strip().splitlines()[-1] for t in page.locator('[data-testid="stSidebarNav"] a').all_inner_texts()]
            assert set(PAGES.values()) <= set(nav), f"the sidebar is not the app's navigation: {nav}"
            not_found = [t for t in page.locator('[role="dialog"]').all_inner_texts() if "not found" in t.lower()]
            assert not not_found, not_found
            assert page.locator(EXCEPTION).count() == 0
            assert re.search(rf"/{path}\?", page.url), page.url
        finally:
            ctx.close()


# Visible text a person reads: numbers at no more than 4 significant digits, no dotted input keys.
# Inputs (sliders, number boxes) show the value being edited and are left out; so is the share link,
# which is a URL. Tables (st.dataframe) draw on a canvas: tests/test_readability.py covers them.
VISIBLE_TEXT_JS = """() => {
    const skip = '[data-testid="stSlider"], [data-testid="stNumberInput"], [data-testid="stTextInput"],'
               + ' [data-testid="stCode"], [data-testid="stDateInput"], [data-testid="stTooltipContent"],'
               + ' [data-testid="stSidebar"] [data-testid="stMarkdownContainer"] code';  // the share link
    const roots = [...document.querySelectorAll('[data-testid="stMain"], [data-testid="stSidebar"]')];
    const out = [];
    for (const root of roots) {
        const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
        for (let n = walker.nextNode(); n; n = walker.nextNode()) {
            const el = n.parentElement;
            if (!el || el.closest(skip) || !el.checkVisibility()) continue;
            const t = n.textContent.trim();
            if (t) out.push(t);
        }
    }
    return out;
}"""
NUMBER = re.compile(r"(?<![\w.$])\$?(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+\.\d+|\d{5,})(?![\w.])")
YEAR = re.compile(r"^(19|20)\d\d$")


def significant_digits(token: str) -> int:
    t = token.replace(",", "").replace("$", "")
    whole, _, frac = t.partition(".")
    digits = (whole + frac).lstrip("0")
    return len(digits if frac else digits.rstrip("0")) or 1


STAGE_KEYS_AS_WORDS = ("pretrain", "cpt", "sft", "dpo", "mm_align", "mm_cpt", "mm_tune")


def _raw_key_pattern() -> re.Pattern:
    """Any input key (``model.params_b``) standing alone in a text, longest keys tried first.

    One compiled alternation: the 550-odd keys searched one by one overflowed ``re``'s pattern cache
    and recompiled every key for every text node (150 s of this module's 200 s).
    """
    from costcore.scenario.schema import FIELDS, PLAN_FIELDS
    keys = sorted({f.path for f in FIELDS + PLAN_FIELDS}, key=len, reverse=True)
    # a stage's key in lower case ("(sft, dpo)" in a lever's title); "rl" and "eval" read as words and a
    # preset's name may end in one ("alpaca-7b-sft"), so hyphens bound these and they are matched as typed
    stages = "|".join(k for k in STAGE_KEYS_AS_WORDS)
    return re.compile(r"(?<![\w.=/])(" + "|".join(map(re.escape, keys)) + r")(?![\w])"
                      r"|(?<![\w.=/-])(?-i:(" + stages + r"))(?![\w-])")


def readability_problems(page) -> list[str]:
    raw_key = _raw_key_pattern()
    out = []
    for text in page.evaluate(VISIBLE_TEXT_JS):
        for m in NUMBER.finditer(text):
            if significant_digits(m.group(1)) > 4 and not YEAR.match(m.group(1)):
                out.append(f"shows {m.group(0)!r} (over 4 significant digits) in {text[:80]!r}")
        raw = raw_key.search(text)
        if raw:
            out.append(f"shows the raw key {raw.group(1) or raw.group(2)!r} in {text[:80]!r}")
    return out


def _shown_problems(page, where: str) -> list[str]:
    """What a view of a page must not show: an exception box, or text a person cannot read."""
    exc = page.locator(EXCEPTION)
    out = [f"{where}: shows an exception: {exc.first.inner_text()[:1500]}"] if exc.count() else []
    return out + [f"{where}: {p}" for p in readability_problems(page)]


def test_the_raw_key_check_finds_a_key_standing_alone_and_only_then():
    pattern = _raw_key_pattern()
    assert pattern.search("set model.params_b to 7").group(1) == "model.params_b"
    assert pattern.search("(stages.sft.epochs)").group(1) == "stages.sft.epochs"
    assert pattern.search("LoRA instead of full fine-tuning (sft, dpo)").group(2) == "sft"
    for clean in ("Model size (billion parameters)", "/?p=1&x=model.params_b", "x.model.params_b", "model.params_bx",
                  "preset alpaca-7b-sft", "SFT and DPO", "?p=alpaca-7b-sft", "pretraining"):
        assert pattern.search(clean) is None, clean


def test_every_page_renders_with_charts_and_screenshots(server, context):
    """Every page by its url path: title, Total cost, drawn charts, no exception, no
    "Page not found", a share link that opens the same page; plus a full-page screenshot.

    Problems are collected over all pages (so every screenshot is written) and reported together.
    """
    SHOTS.mkdir(parents=True, exist_ok=True)
    page = context.new_page()
    js_errors: list[str] = []
    page.on("pageerror", lambda e: js_errors.append(str(e)))
    problems: list[str] = []
    pages = dict(PAGES)
    page.goto(server + "/")
    _total_cost(page, FIRST_LOAD_TIMEOUT_MS)
    for href, text in page.evaluate("""() => [...document.querySelectorAll('[data-testid="stSidebarNav"] a')]
            .map(a => [new URL(a.href).pathname.replace(/^\\/+|\\/+$/g, ''), a.innerText])"""):
        title = text.strip().splitlines()[-1].strip()
        if href and href not in pages:  # a page added to the app since this test was written
            pages[href] = title
    # every url_path app.py declares, hidden ones and those behind the sidebar's "View more" too,
    # must open its page from a deep link
    for pg in app_pages():
        pages.setdefault(pg["url_path"], pg["title"])
    for i, (path, title) in enumerate(pages.items()):
        page.goto(f"{server}/{path}" + (f"?p={PAGE_PRESETS[path]}" if path in PAGE_PRESETS else ""))
        total = _total_cost(page, FIRST_LOAD_TIMEOUT_MS)
        wait_idle(page)
        if not total.inner_text().strip():
            problems.append(f"/{path}: empty Total cost")
        heading = page.locator('[data-testid="stMain"] h1').first.inner_text().strip()
        if heading != title:
            problems.append(f"/{path}: shows the page {heading!r}, expected {title!r}")
        try:
            if path not in PAGES_WITHOUT_CHARTS:
                _wait_charts(page, minimum=1)
        except AssertionError as err:
            problems.append(f"/{path}: {err}")
        dialogs = [t for t in page.locator('[role="dialog"]').all_inner_texts() if "not found" in t.lower()]
        if dialogs:
            problems.append(f"/{path}: shows the dialog {dialogs[0]!r} (a deep link to this page does not work)")
        # the share link must lead back to this page without a "Page not found" detour;
        # Streamlit serves the default (first) page at the root, whatever its url_path
        link_path = (path if path in PAGES_WITHOUT_SCENARIO_LINK
                     else re.sub(r"^https?://[^/?#]+", "", _share_link(page)).split("?")[0].strip("/"))
        expected_path = "" if i == 0 else path
        if link_path != expected_path:
            problems.append(f"/{path}: the share link points at /{link_path}, expected /{expected_path}")
        problems += _shown_problems(page, f"/{path}")
        shot = SHOTS / f"{path or 'overview'}.png"
        _full_page_screenshot(page, shot)
        assert shot.exists(), shot
        assert shot.stat().st_size > 20_000, f"{shot} is only {shot.stat().st_size} bytes"
        # a page that draws one tab at a time (pages/common.lazy_tabs): open every other tab as a person would
        tabs = page.locator('[data-testid="stMain"] [role="tab"]')
        for k in range(1, tabs.count()):
            name = tabs.nth(k).inner_text().strip()
            tabs.nth(k).click()
            wait_idle(page)
            where = f"/{path} ({name} tab)"
            if tabs.nth(k).get_attribute("aria-selected") != "true":
                problems.append(f"{where}: the tab did not open")
            try:
                _wait_charts(page, minimum=0)
            except AssertionError as err:
                problems.append(f"{where}: {err}")
            problems += _shown_problems(page, where)
            tab_shot = SHOTS / f"{path or 'overview'}-{re.sub(r'[^a-z0-9]+', '-', name.lower()).strip('-')}.png"
            _full_page_screenshot(page, tab_shot)
    if js_errors:
        problems.append(f"JavaScript errors: {js_errors}")
    assert not problems, "\n".join(problems)


def _pick(page, label: str, option: str) -> None:
    """Choose ``option`` in the Streamlit selectbox labelled ``label``."""
    box = page.locator('[data-testid="stMain"] [data-testid="stSelectbox"]').filter(has_text=label).first
    box.click()
    page.get_by_role("option", name=option, exact=True).click()
    wait_idle(page)


def _table_cell(page, row: int, column: str) -> str:
    """The text of one cell of the page's first table, read from its CSV-like accessible grid."""
    grid = page.locator('[data-testid="stDataFrame"]').first
    headers = [h.strip() for h in grid.locator('[role="columnheader"]').all_inner_texts()]
    col = headers.index(column)
    cells = grid.locator('[role="row"]').nth(row + 1).locator('[role="gridcell"]')
    return cells.nth(col - (len(headers) - cells.count())).inner_text().strip()


def test_workbench_8bit_adam_shrinks_the_optimizer_bar_and_the_fewest_gpus(server, context):
    """Issue 15: pick a model, switch the optimizer to 8-bit Adam, see the optimizer bar shrink and the
    fewest GPUs that fit fall; screenshots before and after."""
    page = context.new_page()
    page.goto(server + "/fine-tuning?p=alpaca-7b-sft")
    _total_cost(page, FIRST_LOAD_TIMEOUT_MS)
    wait_idle(page)
    _pick(page, "Model", "Llama 3.1 8B")
    expect(page.get_by_text("32 layers, hidden 4,096", exact=False)).to_be_visible()
    _wait_charts(page, 2)
    SHOTS.mkdir(parents=True, exist_ok=True)
    _full_page_screenshot(page, SHOTS / "fine-tuning-adamw.png")
    fewest_before = _table_cell(page, 0, "Fewest GPUs")
    _pick(page, "Optimizer", "8-bit AdamW")
    _wait_charts(page, 2)
    fewest_after = _table_cell(page, 0, "Fewest GPUs")
    _full_page_screenshot(page, SHOTS / "fine-tuning-adamw-8bit.png")
    assert int(fewest_after.replace(",", "")) < int(fewest_before.replace(",", "")), (fewest_before, fewest_after)
    # the optimizer bar: Altair's tooltip data is not in the DOM, so read the kernel through the share link
    link = _share_link(page)
    assert "optimizer=adamw_8bit" in link or "adamw_8bit" in link


KATEX_WIDER_THAN_ITS_BOX = """() => [...document.querySelectorAll('[data-testid="stExpander"] .katex-display')].map(e => {
    const box = e.closest('[data-testid="stMarkdownContainer"]') || e.parentElement;
    return [e.textContent.slice(0, 60), e.scrollWidth, box.clientWidth];
})"""


@pytest.mark.parametrize("path, preset", [("pretraining", "moe-deepseek-v3"), ("multimodal", "qwen-vl-style-7b"),
                                          ("post-training", "pipeline-70b-lora-grpo")])
def test_every_formula_of_how_it_was_computed_fits_a_laptop_window(server, browser, path, preset):
    """At 1280 pixels wide, every formula in the opened "How this was computed" expanders fits its column.
    Before, a MoE plan's MFU row ran 1.7x past the column and multimodal rows were cut off mid-number; the
    rows now break into lines (plan, step terms, MFU; formula, then the scenario's numbers)."""
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    ctx.set_default_timeout(RERUN_TIMEOUT_MS)
    try:
        page = ctx.new_page()
        page.goto(f"{server}/{path}?p={preset}")
        _total_cost(page, FIRST_LOAD_TIMEOUT_MS)
        wait_idle(page)
        boxes = page.locator('[data-testid="stExpander"] summary').filter(has_text="How this was computed")
        assert boxes.count() >= 1
        for i in range(boxes.count()):
            boxes.nth(i).click()
            wait_idle(page)
        page.locator('[data-testid="stExpander"] .katex-display').first.wait_for(state="visible")
        shown = page.evaluate(KATEX_WIDER_THAN_ITS_BOX)
        assert len(shown) >= 4 * boxes.count(), shown  # every opened stage drew its formulas (4 or more each)
        too_wide = [s for s in shown if s[1] > s[2] + 2]
        assert not too_wide, too_wide
        assert page.locator(EXCEPTION).count() == 0
    finally:
        ctx.close()
