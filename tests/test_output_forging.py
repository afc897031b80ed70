"""Text from users never forges output: terminal, JSON, CSV, and every download button of the app.

The probe's cases (issue "Hardening, second pass"): ANSI and OSC escape sequences in a scenario
name, a newline that forges a line such as "TOTAL $1 (everything fits)", right-to-left overrides,
and spreadsheet formulas such as =HYPERLINK(...). Control and direction characters are refused
(one plain sentence, exit code 2); formulas are legal names but every CSV cell that begins with
= + - @ tab or CR is neutralised with a leading quote (OWASP, "CSV Injection").
"""
from __future__ import annotations

import csv
import io
import json

import pytest
import yaml
from streamlit.testing.v1 import AppTest

import costcore
from costcore import fmt
from costcore.cli import main as cli
from costcore.scenario import schema
from costcore.errors import ScenarioError

from shared import APP, PAGES, open_tab, page_views, run_cli
from server_support import NEVER_S  # the one wait limit of the suite (not a speed)

FORGING_NAMES = {
    "ansi_colour": "\x1b[31mred\x1b[0m",
    "ansi_clear_screen": "x\x1b[2J\x1b[H",
    "osc_hyperlink": "\x1b]8;;http://evil.example\x07click\x1b]8;;\x07",
    "osc_title": "\x1b]0;pwned\x07",
    "newline_forged_total": "ok\nTOTAL $1 (everything fits)",
    "carriage_return": "real name\rTOTAL $1",
    "nul": "a\x00b",
    "del": "a\x7fb",
    "c1_csi": "a\x9b31mb",
    "line_separator": "a\u2028TOTAL $1",
    "rtl_override": "invoice\u202egpj.exe",
    "rtl_isolate": "a\u2067b\u2069",
    "lrm_mark": "a\u200eb",
}
FORMULA_NAMES = ['=HYPERLINK("http://evil.example","x")', "+SUM(1,2)", "-2+3", "@SUM(A1)", "=1+1",
                 "\t=1", "=cmd|' /C calc'!A0"]


def _scenario_file(scenario_file, name: str):
    return scenario_file({"name": name, "model": {"params_b": 7}, "stages": {"sft": {}}})


@pytest.mark.parametrize("case", list(FORGING_NAMES))
def test_control_and_direction_characters_in_names_are_refused_everywhere(case):
    name = FORGING_NAMES[case]
    with pytest.raises(ScenarioError) as info:
        schema.validate({"name": name})
    assert info.value.field == "name"
    msg = str(info.value)
    assert "\n" not in msg and "\x1b" not in msg and name not in msg
    with pytest.raises(ScenarioError):
        costcore.load_yaml_text(yaml.safe_dump({"name": name}).encode())


@pytest.mark.parametrize("case", list(FORGING_NAMES))
@pytest.mark.parametrize("out_format", ["table", "json", "csv"])
def test_cli_refuses_forging_names_in_one_line(scenario_file, capsys, case, out_format):
    rc, out, err = run_cli(capsys, ["estimate", str(_scenario_file(scenario_file, FORGING_NAMES[case])),
                                 "--format", out_format])
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("error: name: ")
    assert not any(c in err[:-1] for c in "\x1b\r\x00\x7f\x9b\u2028\u202e\u2067\u200e")


@pytest.mark.parametrize("case", list(FORGING_NAMES))
def test_set_name_and_description_refuse_control_characters(capsys, case):
    rc, out, err = run_cli(capsys, ["estimate", "llama3-8b", "--set", "name=" + FORGING_NAMES[case]])
    assert rc == 2 and out == "" and err.count("\n") == 1


def test_description_may_have_lines_but_no_escapes():
    assert schema.validate({"description": "line one\nline two\twith a tab"})["description"].count("\n") == 1
    with pytest.raises(ScenarioError) as info:
        schema.validate({"description": "x\x1b[2Jy"})
    assert info.value.field == "description"


@pytest.mark.parametrize("name", FORMULA_NAMES)
def test_cli_csv_neutralises_formula_names(scenario_file, capsys, name):
    if name.startswith("\t"):
        with pytest.raises(ScenarioError):  # a tab is a control character in a name
            schema.validate({"name": name})
        return
    rc, out, err = run_cli(capsys, ["estimate", str(_scenario_file(scenario_file, name)), "--format", "csv"])
    assert rc == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))
    assert rows and all(r["scenario"] == "'" + name for r in rows)
    for r in rows:
        for v in r.values():
            assert not v.startswith(("=", "+", "@", "\t", "\r")) and not (v.startswith("-") and not _is_number(v)), v


@pytest.mark.parametrize("name", [n for n in FORMULA_NAMES if not n.startswith("\t")])
def test_cli_table_and_json_print_formula_names_as_text_on_one_line(scenario_file, capsys, name):
    rc, out, _ = run_cli(capsys, ["estimate", str(_scenario_file(scenario_file, name)), "--format", "table"])
    assert rc == 0 and out.splitlines()[0] == name
    assert sum(line.startswith("TOTAL") for line in out.splitlines()) == 1
    rc, out, _ = run_cli(capsys, ["estimate", str(_scenario_file(scenario_file, name)), "--format", "json"])
    assert rc == 0 and json.loads(out)["name"] == name


def _is_number(v: str) -> bool:
    try:
        float(v)
    except ValueError:
        return False
    return True


def test_csv_cell_rules():
    assert fmt.csv_cell("=1+1") == "'=1+1" and fmt.csv_cell("@x") == "'@x" and fmt.csv_cell("\rA") == "'\rA"
    assert fmt.csv_cell("-x") == "'-x" and fmt.csv_cell("+x") == "'+x" and fmt.csv_cell("\tx") == "'\tx"
    assert fmt.csv_cell("plain") == "plain" and fmt.csv_cell(-3.5) == -3.5 and fmt.csv_cell(7) == 7
    assert fmt.one_line("a\nb\x1b[0m\u202e") == "a?b?[0m?"


# ---------------------------------------------------------------------------
# Every download button of the app
# ---------------------------------------------------------------------------
@pytest.fixture
def downloads(monkeypatch):
    """Record (file name, bytes) of every st.download_button the pages render (AppTest keeps no files)."""
    import streamlit.elements.widgets.button as button
    seen: list[tuple[str, bytes]] = []
    real_marshall = button.marshall_file

    def recording(coordinates, data, proto, mimetype, file_name=None, **kw):
        raw = data() if callable(data) else data
        if isinstance(raw, str):
            raw = raw.encode("utf-8")
        seen.append((file_name or "", bytes(raw)))
        return real_marshall(coordinates, data, proto, mimetype, file_name, **kw)
    monkeypatch.setattr(button, "marshall_file", recording)
    return seen


@pytest.mark.parametrize("name", ['=HYPERLINK("http://evil.example","x")', "@SUM(A1)", "-1+2"])
def test_every_download_button_neutralises_formulas(downloads, name):
    for page, tab in page_views(PAGES):
        at = AppTest.from_file(APP, default_timeout=NEVER_S)
        at.query_params["p"] = "pipeline-70b"
        at.query_params["name"] = name
        at.run()
        at.switch_page(page)
        at.run()
        open_tab(at, page, tab)
        assert not at.exception, [e.value for e in at.exception]
        assert at.session_state["scenario"]["name"] == name
    assert downloads, "no download button was rendered"
    kinds = {fn.rsplit(".", 1)[-1] for fn, _ in downloads}
    assert {"csv", "yaml"} <= kinds, kinds
    for fn, raw in downloads:
        text = raw.decode("utf-8")
        if fn.endswith(".csv"):
            for row in csv.reader(io.StringIO(text)):
                for cell in row:
                    assert not cell.startswith(("=", "+", "@", "\t", "\r")), f"{fn}: formula cell {cell[:60]!r}"
                    assert not cell.startswith("-") or _is_number(cell), f"{fn}: formula cell {cell[:60]!r}"
        elif fn.endswith((".yaml", ".yml")):
            data = yaml.safe_load(text)
            if isinstance(data, dict) and "name" in data:
                assert data["name"] == name, f"{fn}: the name did not round-trip"
        assert "\x1b" not in text


def test_a_python_tag_is_refused_in_words_and_its_name_is_not_markdown():
    """'!!python/object:__main__.Foo' was refused in PyYAML's words ("could not determine a constructor for the
    tag 'tag:yaml.org,2002:...'") and drew "main" in bold on the page."""
    from costcore.errors import ScenarioError
    from pages.common import md_escape
    with pytest.raises(ScenarioError) as err:
        costcore.load_yaml_text(b"name: x\nmodel: !!python/object:__main__.Foo {}\n", what="bad.yaml")
    said = str(err.value)
    assert said.startswith("bad.yaml: uses the tag !!python/object:__main__.Foo (line 2), which a scenario file may "
                           "not use") and "constructor" not in said
    assert "\\_\\_main\\_\\_" in md_escape(said) and "params_b" in md_escape("model.params_b")


def test_bare_addresses_in_user_text_never_become_links():
    """Markdown and HTML stayed literal, but GitHub-flavoured markdown still turned a bare https://..., www.host or
    name@host in a shared link's name into a live link in every page's header (it links after parsing, so no
    backslash stops it). md_escape splits each with an invisible word joiner: no autolink pattern remains, and
    the text reads the same."""
    import re
    from pages.common import md_escape
    said = md_escape("see https://evil.example/login, HTTP://X.Y, ftp://f, www.evil.com and a@b.com")
    # mdast-util-gfm-autolink-literal's patterns: a scheme and "://", "www" and a dot, an e-mail address
    assert not re.search(r"(?i)(https?|ftp|mailto)://|www\.|[\w.+-]@[\w-]", said), said
    assert said.replace("\u2060", "") == "see https://evil.example/login, HTTP://X.Y, ftp://f, www.evil.com and a@b.com"
