"""The Review page in Chromium with the sample data: upload the files, slice, see an anomaly.

Follows tests/test_e2e_browser.py: Debian's chromium through playwright (never downloaded),
skipped locally without it and failing under CI; the screenshot goes to
artifacts/screenshots/review-sample.png.
"""
from __future__ import annotations

import contextlib
import time

import pytest

from server_support import CHROMIUM_ARGS, ROOT, require_chromium, server_for_tests, wait_idle

CHROMIUM = require_chromium()
from playwright.sync_api import sync_playwright  # noqa: E402

SHOTS = ROOT / "artifacts" / "screenshots"
LOAD_MS = 120_000


def _metric(page, label: str) -> str:
    m = page.locator('[data-testid="stMetric"]').filter(has=page.locator('[data-testid="stMetricLabel"]', has_text=label))
    return m.first.locator('[data-testid="stMetricValue"]').inner_text().strip()


@contextlib.contextmanager
def _review_page(tmp_path, query: str = ""):
    """The Review page in Chromium on a server of the test's own, loaded (its Total cost drawn) and idle."""
    with server_for_tests(tmp_path / "server.log", 90) as base, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.set_default_timeout(60_000)
            page.goto(f"{base}/review{query}")
            page.locator('[data-testid="stMetricLabel"]', has_text="Total cost").first.wait_for(timeout=LOAD_MS)
            wait_idle(page, quiet_s=0.8)
            yield page
        finally:
            browser.close()


def test_review_page_upload_slice_and_see_an_anomaly(tmp_path, warm_kernels):
    from costcore import fmt
    from actuals_support import sample_files
    out, truth = sample_files(7)
    SHOTS.mkdir(parents=True, exist_ok=True)
    with _review_page(tmp_path, "?p=llama3-8b") as page:
        page.locator('[data-testid="stMain"] [data-testid="stFileUploader"] input[type="file"]').set_input_files(truth["files"])
        page.locator('[data-testid="stMetricLabel"]', has_text="Anomalous days").first.wait_for(timeout=LOAD_MS)
        page.locator('[data-testid="stMultiSelect"]').first.wait_for(timeout=LOAD_MS)
        wait_idle(page, quiet_s=0.8)
        assert _metric(page, "Actual spend") == fmt.usd(float(truth["billed_usd"]))
        box = page.locator('[data-testid="stMultiSelect"]').filter(has_text="Project").first
        box.click()
        page.get_by_role("option", name="atlas", exact=True).click()
        page.keyboard.press("Escape")
        wait_idle(page, quiet_s=0.8)
        assert _metric(page, "Actual spend") == fmt.usd(float(truth["by_project_usd"]["atlas"]))
        n = int(_metric(page, "Anomalous days"))
        atlas_days = {a["date"] for a in truth["anomalies"] if a["project"] == "atlas"}
        assert n == len(atlas_days) > 0  # distinct days, not anomaly rows
        body = page.locator('[data-testid="stMain"]').inner_text()
        assert "Anomalies" in body and "red dashed lines mark the anomalous days" in body
        charts = page.evaluate("""() => [...document.querySelectorAll('[data-testid="stVegaLiteChart"]')]
            .map(c => { const g = c.querySelector('canvas, svg'); if (!g) return 0;
                        const r = g.getBoundingClientRect(); return r.width > 100 && r.height > 100 ? 1 : 0; })""")
        assert len(charts) == 3 and all(charts), charts
        assert page.locator('[data-testid="stException"]').count() == 0
        height = page.evaluate("""() => Math.max(document.documentElement.scrollHeight,
            ...[...document.querySelectorAll('[data-testid="stMain"]')].map(e => e.scrollHeight))""")
        page.set_viewport_size({"width": 1400, "height": min(int(height) + 40, 12000)})
        time.sleep(1.0)
        page.screenshot(path=str(SHOTS / "review-sample.png"), full_page=True)
        assert atlas_days  # the days the chart marks are the injected ones (checked by count above)


def test_a_bad_upload_keeps_the_data_shown_before(tmp_path, warm_kernels):
    """Load the sample, then upload a file that cannot be imported: the import is all or nothing, and the sample's
    review stays on screen with the refusal (the page dropped it and showed "No bills yet")."""
    from costcore import fmt
    from actuals_support import sample_files
    _, truth = sample_files(7)
    bad = tmp_path / "malformed.csv"
    bad.write_text("run_id,end\nr1,2026-01-01\n")
    with _review_page(tmp_path) as page:
        page.get_by_role("button", name="Load the sample data").click()
        page.locator('[data-testid="stMetricLabel"]', has_text="Anomalous days").first.wait_for(timeout=LOAD_MS)
        wait_idle(page, quiet_s=0.8)
        shown = _metric(page, "Actual spend")
        assert shown == fmt.usd(float(truth["billed_usd"]))
        page.locator('[data-testid="stMain"] [data-testid="stFileUploader"] input[type="file"]').set_input_files(
            str(bad))
        page.get_by_text("the data shown before stays").first.wait_for(timeout=LOAD_MS)
        wait_idle(page, quiet_s=0.8)
        assert _metric(page, "Actual spend") == shown
        assert page.locator('[data-testid="stException"]').count() == 0
