"""Numbers and words a person reads (the product manager's issue): labels for every input, charts
with titles, axis titles and legends in words, tables without raw keys or cents.

The chart checks read the Vega-Lite spec of every chart on every page (AppTest), so they cover
what the browser draws without parsing pixels; tests/test_readability_browser.py checks the
visible text in Chromium.
"""
from __future__ import annotations

import json
import re

import pytest
from streamlit.testing.v1 import AppTest

from costcore.scenario.schema import FIELDS, PLAN_FIELDS, STAGES
from shared import APP

ALL_FIELDS = FIELDS + PLAN_FIELDS
RAW_KEYS = {f.path for f in ALL_FIELDS} | set(STAGES)


def test_every_input_has_words_and_help():
    for f in ALL_FIELDS:
        assert f.label and f.label != f.path and "." not in f.label.split(": ")[-1].replace("/s", ""), f.path
        assert f.doc, f"{f.path} has no help text"
    labels = [f.label for f in ALL_FIELDS]
    assert len(set(labels)) == len(labels), "two inputs share a label"


# ---------------------------------------------------------------------------
# Charts: every chart on every page says what it shows in words
# ---------------------------------------------------------------------------
PAGES = ["pages/overview.py", "pages/pretraining.py", "pages/job-layout.py", "pages/post-training.py",
         "pages/fine-tuning.py", "pages/checkpoints.py", "pages/data-people.py", "pages/budget.py",
         "pages/compare.py", "pages/sensitivity.py", "pages/validation.py"]
POSITIONAL = ("x", "y")


def _datasets(proto) -> dict:
    from streamlit import dataframe_util
    out = {}
    for d in proto.datasets:
        out[d.name] = dataframe_util.convert_arrow_bytes_to_pandas_df(d.data.data)
    return out


def _views(spec: dict):
    """The spec and every nested layer / concat view."""
    yield spec
    for key in ("layer", "hconcat", "vconcat", "concat"):
        for sub in spec.get(key, []) or []:
            yield from _views(sub)
    if "spec" in spec:
        yield from _views(spec["spec"])


def _title_text(t) -> str:
    if isinstance(t, dict):
        t = t.get("text", "")
    if isinstance(t, list):
        t = " ".join(map(str, t))
    return str(t or "").strip()


def chart_problems(proto) -> list[str]:
    spec = json.loads(proto.spec)
    data = _datasets(proto)
    name = _title_text(spec.get("title")) or "(untitled chart)"
    out = [] if _title_text(spec.get("title")) else [f"{name}: no chart title"]
    for view in _views(spec):
        ds = (view.get("data") or {}).get("name")
        frame = data.get(ds)
        for ch, enc in (view.get("encoding") or {}).items():
            if not isinstance(enc, dict) or "field" not in enc:
                continue
            field = enc["field"]
            if ch in POSITIONAL and enc.get("axis", {}) is not None:
                if not _title_text(enc.get("title")):
                    out.append(f"{name}: {ch} axis ({field}) has no title")
            if ch in ("color", "fill", "shape", "strokeDash") and enc.get("legend", {}) is not None:
                if not _title_text(enc.get("title")):
                    out.append(f"{name}: {ch} legend ({field}) has no title")
            if ch in POSITIONAL + ("color", "fill", "shape", "strokeDash") and enc.get("type") == "nominal":
                values = set(map(str, (enc.get("scale") or {}).get("domain") or []))
                if frame is not None and field in frame:
                    values |= set(map(str, frame[field].dropna().unique()))
                raw = sorted(values & RAW_KEYS)
                if raw:
                    out.append(f"{name}: {ch} ({field}) shows raw keys {raw[:4]}")
    return out


@pytest.mark.parametrize("page", PAGES)
def test_every_chart_has_a_title_axis_titles_and_legend_words(page):
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page(page)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    charts = at.get("vega_lite_chart")
    problems = [p for c in charts for p in chart_problems(c.proto)]
    assert not problems, "\n".join(problems)
