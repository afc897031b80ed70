"""The pages keep drawn charts and tables per content (pages/common.show_chart, number_table) and replay
them when a rerun draws the same again. These tests check the replay never shows stale content: a chart
or table whose data, title or formatter changed is drawn anew, and the same content gives the same element.
"""
from __future__ import annotations

import io

import pyarrow as pa
from streamlit.testing.v1 import AppTest

from server_support import NEVER_S


def _script():
    import altair as alt
    import pandas as pd
    import streamlit as st

    from pages import common

    n = st.session_state.get("n", 2)
    unit = st.session_state.get("unit", "GB")
    title = st.session_state.get("title", "Squares")
    df = pd.DataFrame({"x": list(range(n)), "y": [float(i * i) + 0.5 for i in range(n)]})
    common.show_chart(alt.Chart(df).mark_line().encode(x=alt.X("x:Q", title="Index"), y=alt.Y("y:Q", title="Square")),
                      title)
    common.number_table(df, {"y": lambda v: f"{v:.1f} {unit}"}, {"x": "Index", "y": "Square"})


def _chart(at):
    proto = at.get("vega_lite_chart")[0].proto
    rows = sum(pa.ipc.open_stream(io.BytesIO(d.data.data)).read_all().num_rows for d in proto.datasets)
    return proto.spec, rows


def _shown(at):
    """The table's display strings (the Styler's), column 'y'."""
    styler = at.dataframe[0].proto.arrow_data.styler
    return list(pa.ipc.open_stream(io.BytesIO(styler.display_values)).read_pandas()["y"])


def test_changed_content_is_drawn_anew_and_same_content_is_the_same():
    at = AppTest.from_function(_script, default_timeout=NEVER_S).run()
    assert not at.exception
    spec_2, rows_2 = _chart(at)
    assert rows_2 == 2 and _shown(at) == ["0.5 GB", "1.5 GB"]

    at.session_state["n"] = 3  # new data: a new chart and a new table
    at.run()
    spec_3, rows_3 = _chart(at)
    assert rows_3 == 3 and _shown(at) == ["0.5 GB", "1.5 GB", "4.5 GB"]

    at.session_state["unit"] = "TB"  # the formatter reads a changed value: the table is formatted anew
    at.run()
    assert _shown(at) == ["0.5 TB", "1.5 TB", "4.5 TB"]

    at.session_state["title"] = "Squares again"  # only the title changed
    at.run()
    assert '"Squares again"' in _chart(at)[0]

    for k, v in {"n": 2, "unit": "GB", "title": "Squares"}.items():  # back to the first content: the first element
        at.session_state[k] = v
    at.run()
    assert _chart(at) == (spec_2, rows_2)
    assert _shown(at) == ["0.5 GB", "1.5 GB"]


UNIT = "GB"


def _module_formatter(v):
    return f"{v:.1f} {UNIT}"


def test_a_formatter_key_follows_the_globals_it_reads():
    from pages import common
    global UNIT
    before = common._code_key(_module_formatter)
    assert common._code_key(_module_formatter) == before
    UNIT = "TB"
    try:
        assert common._code_key(_module_formatter) != before
    finally:
        UNIT = "GB"
    assert common._code_key(_module_formatter) == before
