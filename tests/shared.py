"""Constants the test modules share (instead of importing each other)."""
from __future__ import annotations

import math
import numbers
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")
PRESET_DIR = ROOT / "presets"
PAGES = ["pages/overview.py", "pages/pretraining.py", "pages/post-training.py",
         "pages/fine-tuning.py", "pages/checkpoints.py", "pages/data-people.py", "pages/sensitivity.py",
         "pages/budget.py", "pages/compare.py", "pages/validation.py", "pages/job-layout.py", "pages/glossary.py"]

# Pages that draw one tab at a time (pages/common.lazy_tabs): page -> (the tabs' session-state key, their labels).
# A test of a page's content runs once per tab (page_views); tests/test_app.py checks these are the page's tabs.
LAZY_TABS = {"pages/overview.py": ("overview:tab", ["Stages: cost, GPU-hours and time", "Top cost drivers",
                                                    "Each stage's share"]),
             "pages/budget.py": ("budget:tab", ["Budget and fixed cost", "Timeline", "GPUs and storage held",
                                                "Iteration lifecycle", "Attribution export"]),
             "pages/multimodal.py": ("multimodal:tab", ["What each phase costs", "Preprocessing, storage and rights",
                                                        "How the cost moves with the media"]),
             "pages/sensitivity.py": ("sensitivity:tab", ["Tornado", "Sweep one input", "Cost surface", "Monte Carlo",
                                                          "Budget solver"])}


def page_views(pages) -> list[tuple[str, str | None]]:
    """(page, tab) for every tab of every page; ``None`` for a page without lazy tabs."""
    return [(p, t) for p in pages for t in (LAZY_TABS[p][1] if p in LAZY_TABS else [None])]


def app_on(page: str | None = None, tab: str | None = None, **params):
    """An AppTest of the app with ``params`` in its URL, on ``page`` and its ``tab`` (lazy tabs), run without an
    exception. The page tests each opened it by hand: the URL, a run, the switch, a run, the tab."""
    from streamlit.testing.v1 import AppTest

    from server_support import NEVER_S  # the one wait limit of the suite (not a speed)
    at = AppTest.from_file(APP, default_timeout=NEVER_S)
    for k, v in params.items():
        at.query_params[k] = v
    at.run()
    if page:
        at.switch_page(page)
        at.run()
        open_tab(at, page, tab)
    assert not at.exception, [e.value for e in at.exception]
    return at


def open_tab(at, page: str, tab: str | None) -> None:
    """Open ``tab`` of ``page`` in an AppTest on that page (what a click on the tab sets), and rerun."""
    if tab is not None:
        at.session_state[LAZY_TABS[page][0]] = tab
        at.run()


def app_pages() -> list[dict]:
    """Every st.Page of app.py, read from its source: {"url_path", "title", "hidden"} in order."""
    import ast
    out = []
    for node in ast.walk(ast.parse((ROOT / "app.py").read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "Page":
            kw = {k.arg: k.value.value for k in node.keywords if isinstance(k.value, ast.Constant)}
            out.append({"url_path": kw.get("url_path", ""), "title": kw["title"],
                        "hidden": kw.get("visibility") == "hidden"})
    return out


def _short(argv):
    return [a if len(a) < 300 else a[:60] + f"...({len(a):,} chars)" for a in argv]


def run_cli(capsys, argv) -> tuple[int, str, str]:
    """``costcore.cli.main.main(argv)`` in-process: (exit code, stdout, stderr). Any escaping exception fails."""
    from costcore.cli import main as cli
    argv = list(argv)
    capsys.readouterr()  # drop anything captured before
    try:
        rc = cli.main(argv)
    except SystemExit as exc:  # argparse errors
        rc = exc.code
    except BaseException as exc:  # noqa: BLE001 - this is the bug the tests look for
        capsys.readouterr()
        tb = "".join(traceback.format_exception(exc)).strip().splitlines()
        raise AssertionError(f"cli.main({_short(argv)}) raised {type(exc).__name__}: {str(exc)[:200]} "
                             f"(must exit 2 with one line on stderr); last frames: {tb[-4:]}") from None
    out, err = capsys.readouterr()
    return rc, out, err


def assert_finite(obj, where: str = "to_dict()") -> None:
    """Every number in a nested dict/list (a result, a JSON output) is finite."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            assert_finite(v, f"{where}[{k!r}]")
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            assert_finite(v, f"{where}[{i}]")
    elif isinstance(obj, numbers.Real) and not isinstance(obj, bool):
        assert math.isfinite(obj), f"{where} = {obj!r} is not finite"
