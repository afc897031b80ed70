"""The review runs unchanged on DuckDB and on PostgreSQL, with the same results to the cent.

A throwaway PostgreSQL server (tests/pg_support.py: Debian's binaries, a temporary cluster on a free
port, stopped at the end) gets (1) a copy of the DuckDB store's tables, and (2) the raw FOCUS file
as a plain text table, read through queries.focus_view as a warehouse's export would be. Skipped
locally without PostgreSQL; under CI (CI set) a server that cannot start fails the module.
"""
from __future__ import annotations

import csv

import pytest

from costcore.actuals import importers, queries, report, sample, store

import pg_support


@pytest.fixture(scope="module")
def pg_url():
    try:
        ctx = pg_support.postgres_server()
        url = ctx.__enter__()
    except pg_support.PostgresUnavailable as err:
        pg_support.require_postgres_or_skip(err)
    yield url
    ctx.__exit__(None, None, None)


@pytest.fixture(scope="module")
def duck(tmp_path_factory, warm_kernels):
    from actuals_support import sample_files
    out, truth = sample_files(7)
    st = store.open_store(tmp_path_factory.mktemp("engines") / "s.duckdb")
    importers.import_files(st, truth["files"])
    yield st, truth, out
    st.close()


def test_postgres_gives_the_same_report_to_the_cent(duck, pg_url):
    import costcore
    st, truth, _ = duck
    pg = store.copy_to(st, pg_url)
    plan = costcore.estimate(sample.PLAN_PRESET)
    a, b = report.load(st), report.load(pg)
    keys = list(queries.CUBE_KEYS)
    ca, cb = (d.cube.sort_values(keys).reset_index(drop=True) for d in (a, b))
    assert len(ca) == len(cb) > 1000
    assert (ca.astype(str) == cb.astype(str)).all().all()
    for filters in (None, {"project": ["atlas", "unattributed"]}, {"stage": ["sft"], "resource_type": ["GPU"]}):
        da, db = report.report_dict(a, plan, filters), report.report_dict(b, plan, filters)
        assert da == db, filters
    assert report.report_dict(b)["actual_usd"] == float(round(__import__("decimal").Decimal(truth["billed_usd"]), 2))
    pg.close()


def test_a_warehouse_focus_table_reads_as_the_store(duck, pg_url):
    """The second way in: no import, the report points at the table holding the FOCUS export."""
    import ibis
    import pyarrow as pa
    st, _, out = duck
    with open(out / "focus.csv", encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    table = pa.table({c: [r[c] for r in rows] for c in rows[0]})  # every column text, as an export lands
    con = ibis.connect(pg_url)
    if "focus_export" in con.list_tables():
        con.drop_table("focus_export")
    con.create_table("focus_export", table)
    con.disconnect()
    wh = store.open_store(pg_url, focus_table="focus_export")
    local = report.load(st)
    remote = report.load(wh)
    wh.close()
    da, dw = report.report_dict(local), report.report_dict(remote)
    assert dw["actual_usd"] == da["actual_usd"]
    assert dw["by"] == da["by"]
    assert dw["anomalies"] == da["anomalies"]
    assert dw["waste"][2]["kind"] == "idle_allocations"  # no job table there: only the bill-only classes
    assert dw["waste"][2] == da["waste"][2]
