"""Plan vs actual (issue 19): the store, the importers, the review and the CLI contract.

Exact reconciliation is checked against an independent reading of the FOCUS file (csv + json +
Decimal); the report's engines against each other (DuckDB, and a PostgreSQL server started here:
tests/pg_support.py). Data is generated small (tests/... sample seed 7, ~7,000 billing lines).
"""
from __future__ import annotations

import csv
import json
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path

import pytest

from costcore.actuals import anomalies, efficiency, importers, queries, report, sample, store
from costcore.errors import ScenarioError

CENT = Decimal("0.01")


def cents(v: Decimal) -> float:
    return float(v.quantize(CENT, rounding=ROUND_HALF_EVEN))


@pytest.fixture(scope="module")
def sample_dir(warm_kernels):
    from actuals_support import sample_files
    return sample_files(7)


@pytest.fixture(scope="module")
def loaded(sample_dir, tmp_path_factory):
    out, truth = sample_dir
    db = tmp_path_factory.mktemp("actuals-db") / "store.duckdb"
    st = store.open_store(db)
    result = importers.import_files(st, truth["files"])
    data = report.load(st)
    yield {"db": db, "store": st, "import": result, "data": data, "truth": truth, "dir": out}
    st.close()


def focus_sums(path: Path) -> dict:
    """Independent sums of a FOCUS file: {"total": Decimal, dim: {value: Decimal}} (tags read with json)."""
    out = {"total": Decimal(0), **{d: {} for d in store.DIMENSIONS}}
    stage_words = importers.STAGE_WORDS
    with open(path, encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh):
            usd = Decimal(row["BilledCost"])
            tags = json.loads(row["Tags"]) if row["Tags"].strip() else {}
            vals = {k: (str(tags.get(k) or "").strip() or "unattributed") for k in store.DIMENSIONS[:5]}
            vals["stage"] = stage_words.get(vals["stage"], vals["stage"])
            vals["resource_type"] = row["ResourceType"].strip() or "unattributed"
            out["total"] += usd
            for d, v in vals.items():
                out[d][v] = out[d].get(v, Decimal(0)) + usd
    return out


def test_sample_report_reconciles_to_the_cent(loaded):
    doc = report.report_dict(loaded["data"])
    want = focus_sums(Path(loaded["dir"]) / "focus.csv")
    assert Decimal(loaded["truth"]["billed_usd"]) == want["total"]
    assert doc["actual_usd"] == cents(want["total"])
    for dim in store.DIMENSIONS:
        assert doc["by"][dim] == {k: cents(v) for k, v in want[dim].items()}, dim
        # the slices cover every dollar (before rounding): nothing dropped, "unattributed" kept
        assert sum(report.slices(loaded["data"].cube)[dim].values()) == want["total"]
    assert "unattributed" in doc["by"]["project"]


def test_reimport_changes_nothing(loaded):
    st = loaded["store"]
    before = report.report_dict(report.load(st))
    again = importers.import_files(st, loaded["truth"]["files"])
    assert again["imported_rows"] == 0
    assert again["duplicate_rows"] == loaded["import"]["imported_rows"] > 2500
    assert report.report_dict(report.load(st)) == before


def _state(st) -> tuple:
    return (st.duck.execute("SELECT count(*), sum(billed_usd) FROM cost_rows").fetchone(),
            st.duck.execute("SELECT count(*) FROM jobs").fetchone()[0],
            st.duck.execute("SELECT count(*) FROM imports").fetchone()[0])


def _rewrite(src: Path, dst: Path, line: int, column: str, value: str, delim: str = ",") -> Path:
    rows = list(csv.reader(open(src, encoding="utf-8", newline=""), delimiter=delim,
                           quoting=csv.QUOTE_NONE if delim == "|" else csv.QUOTE_MINIMAL))
    rows[line - 1][rows[0].index(column)] = value
    with open(dst, "w", encoding="utf-8", newline="") as fh:
        csv.writer(fh, delimiter=delim, quoting=csv.QUOTE_NONE if delim == "|" else csv.QUOTE_MINIMAL,
                   escapechar="\\" if delim == "|" else None).writerows(rows)
    return dst


BAD_CELLS = [  # (file, line, column, value, words in the message)
    ("focus.csv", 5, "BilledCost", "twelve", "is not a number"),
    ("focus.csv", 40, "ChargePeriodStart", "2025-02-30T00:00:00Z", "is not a date"),
    ("focus.csv", 12, "ChargePeriodEnd", "2020-01-01T00:00:00Z", "is before its ChargePeriodStart"),
    ("focus.csv", 7, "ConsumedQuantity", "1,5", "is not a number"),
    # a number, but not one the store holds: it was called "not a number"
    ("focus.csv", 8, "BilledCost", "-5e30", "is beyond the largest amount the store holds"),
    ("focus.csv", 11, "BilledCost", "1e400", "is not a finite number"),
    ("focus.csv", 9, "Tags", "{project: atlas", "is not a JSON object"),
    ("runs.csv", 4, "gpu_count", "eight", "is not a whole number"),
    ("runs.csv", 6, "end", "next tuesday", "is not a date"),
    ("sacct.txt", 4, "Elapsed", "ten hours", "is not an elapsed time"),
    ("sacct.txt", 6, "AllocTRES", "gres/gpu=many", "not a whole number"),
]


@pytest.mark.parametrize("name,line,column,value,words", BAD_CELLS)
def test_a_file_with_one_bad_row_is_refused_and_changes_nothing(loaded, tmp_path, name, line, column, value, words):
    st = loaded["store"]
    src = Path(loaded["dir"]) / name
    bad = _rewrite(src, tmp_path / ("bad-" + name), line, column, value, "|" if name.endswith(".txt") else ",")
    before = _state(st)
    with pytest.raises(ScenarioError) as err:
        importers.import_files(st, [bad])
    msg = str(err.value)
    assert f"bad-{name}, line {line}, column {column}" in msg and words in msg, msg
    assert "\n" not in msg
    assert _state(st) == before


def test_a_missing_column_and_a_bad_file_among_good_ones(loaded, tmp_path):
    st = loaded["store"]
    src = Path(loaded["dir"]) / "focus.csv"
    lines = src.read_text(encoding="utf-8").splitlines()
    rows = list(csv.reader(lines[:50]))
    drop = rows[0].index("ResourceType")
    with open(tmp_path / "nocol.csv", "w", newline="", encoding="utf-8") as fh:
        csv.writer(fh).writerows([r[:drop] + r[drop + 1:] for r in rows])
    before = _state(st)
    with pytest.raises(ScenarioError, match=r"nocol\.csv, line 1, column ResourceType: the column is missing"):
        importers.import_files(st, [tmp_path / "nocol.csv"])
    # a new good file first, then a bad one: one transaction, nothing lands
    good = tmp_path / "good.csv"
    good.write_text("\n".join(lines[:1] + [ln.replace("2025-", "2031-") for ln in lines[1:30]]) + "\n", encoding="utf-8")
    bad = _rewrite(src, tmp_path / "bad.csv", 3, "BilledCost", "n/a")
    with pytest.raises(ScenarioError, match=r"bad\.csv, line 3, column BilledCost"):
        importers.import_files(st, [good, bad])
    assert _state(st) == before


def test_a_row_with_more_fields_than_the_header_is_named_by_its_line(loaded, tmp_path):
    """A one-row bill whose row had two fields more than its header (or an unquoted comma in ServiceName) crashed
    the import with DuckDB's BinderException: its sniffer took the row for the header. Any such row is named by
    its line and field count, in the CLI and the page, and nothing lands."""
    st = loaded["store"]
    lines = (Path(loaded["dir"]) / "focus.csv").read_text(encoding="utf-8").splitlines()
    before = _state(st)
    one = tmp_path / "one_row.csv"
    one.write_text(lines[0] + "\n" + lines[1] + ",extra,extra\n", encoding="utf-8")
    with pytest.raises(ScenarioError, match=r"one_row\.csv, line 2: has 17 fields where the header has 15"):
        importers.import_files(st, [one])
    mid = tmp_path / "mid.csv"
    mid.write_text("\n".join(lines[:4] + [lines[4] + ",x"] + lines[5:20]) + "\n", encoding="utf-8")
    with pytest.raises(ScenarioError, match=r"mid\.csv, line 5: has 16 fields where the header has 15") as err:
        importers.import_files(st, [mid])
    assert "/" not in str(err.value).split(": ", 1)[1]  # no server path
    assert _state(st) == before


def test_empty_non_utf8_header_only_and_repeated_files_are_named_in_words(loaded, tmp_path):
    """An empty file and a Latin-1 one are refused in one sentence without a Python exception's name; a bill with a
    header and no rows, and the same bill twice, go in and are named by import_notes (the page said "No bills yet"
    with no word on why, and showed the second copy as if it counted)."""
    st = loaded["store"]
    before = _state(st)
    (tmp_path / "empty.csv").write_text("", encoding="utf-8")
    with pytest.raises(ScenarioError, match=r"empty\.csv: is empty; a bill or job record file starts with its header"):
        importers.import_files(st, [tmp_path / "empty.csv"])
    src = Path(loaded["dir"]) / "focus.csv"
    lines = src.read_text(encoding="utf-8").splitlines()
    (tmp_path / "latin1.csv").write_bytes("\n".join(lines[:3]).replace("atlas", "atl\xe9s").encode("latin-1"))
    with pytest.raises(ScenarioError, match=r"latin1\.csv: is not UTF-8 text; export or save it as UTF-8") as err:
        importers.import_files(st, [tmp_path / "latin1.csv"])
    assert "Error" not in str(err.value)
    assert _state(st) == before
    (tmp_path / "header.csv").write_text(lines[0] + "\n", encoding="utf-8")
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / "focus.csv").write_text("\n".join(lines[:40]) + "\n", encoding="utf-8")
    fresh = store.open_store(tmp_path / "fresh.duckdb")
    try:
        summary = importers.import_files(fresh, [tmp_path / "header.csv", copy / "focus.csv", copy / "focus.csv"])
    finally:
        fresh.close()
    notes = importers.import_notes(summary)
    assert notes == ["header.csv has a header and no rows: nothing was imported from it.",
                     "focus.csv: all 39 of its rows were already imported (the same file twice?); they are counted once."]


def test_the_review_compares_the_bills_with_the_plan_to_their_last_day(loaded):
    """The sample's bills end on day 125 of the 70B plan, whose pre-training alone runs for months: the review's
    plan (metric, table, waterfall) is the plan to that day, the burn chart's plan line there, not the whole plan;
    the stages not started by then are planned at $0. With the llama3-8b plan, done within the bills, the two agree."""
    import costcore
    data = loaded["data"]
    v = report.view(data, costcore.estimate("pipeline-70b-lora-grpo"))
    last_plan = v["burn"]["days"]["plan_usd"].iloc[-1]
    assert float(v["plan_usd"]) == pytest.approx(last_plan, rel=1e-9)
    assert 0 < v["plan_usd"] < v["plan_total_usd"] * Decimal("0.9")
    assert v["variance_usd"] == v["actual_usd"] - v["plan_usd"]
    pva = v["plan_vs_actual"]
    assert pva["pretrain"]["plan_usd"] > 0 and all(pva[s]["plan_usd"] == 0 for s in ("sft", "dpo", "rl"))
    assert v["steps"][0]["usd"] == v["plan_usd"]  # the waterfall starts from the plan to date
    small = report.view(data, costcore.estimate(sample.PLAN_PRESET))
    assert small["plan_usd"] == pytest.approx(small["plan_total_usd"], rel=1e-12)


def test_anomaly_detection_finds_the_injected_days(loaded, tmp_path):
    found = report.anomalies(loaded["data"].cube)
    score = anomalies.recall_precision(found, loaded["truth"]["anomalies"])
    assert score["injected_days"] >= 20
    assert score["recall"] >= 0.9 and score["false_share"] <= 0.1, score
    # every flagged day carries the expected amount it beat
    assert (found["usd"] > found["expected_usd"]).all()


def test_the_scorer_ignores_the_spike_it_flags():
    import numpy as np
    x = np.full(40, 100.0) + np.tile([0.0, 2.0, -2.0, 1.0], 10)
    x[30] = 300.0
    expected, z = anomalies.score_series(x)
    assert z[30] > anomalies.THRESHOLD and np.nanmax(np.delete(z, 30)) < anomalies.THRESHOLD
    assert abs(expected[31] - 100.0) < 2.0  # the median did not follow the spike
    assert np.isnan(z[: anomalies.MIN_HISTORY_DAYS]).all()


def test_waste_classes_are_measured_from_the_records(loaded):
    data = loaded["data"]
    runs = data.runs.set_index("run_id")
    by_kind = {w["kind"]: w for w in report.waste(data.cube)}
    assert set(by_kind) == set(report.WASTE_KINDS)
    assert all(by_kind[k]["usd"] > 0 and by_kind[k]["items"] for k in report.WASTE_KINDS)
    assert {runs.loc[r, "status"] for r in by_kind["failed_runs"]["items"]} <= set(queries.FAILED_STATES)
    assert {runs.loc[r, "status"] for r in by_kind["cancelled_runs"]["items"]} == {"cancelled"}
    dups = runs.loc[by_kind["duplicate_experiments"]["items"]]
    assert (dups["status"] == "completed").all() and dups["duplicate"].all()
    assert by_kind["idle_allocations"]["items"] == ["reservation-delta"]
    waste_total = sum(w["usd"] for w in by_kind.values())
    assert waste_total == sum(data.cube.loc[data.cube["waste_kind"] != "", "usd"])  # each dollar in one class


def test_plan_vs_actual_and_the_waterfall_add_up(loaded):
    import costcore
    plan = costcore.estimate(sample.PLAN_PRESET)
    cube = loaded["data"].cube
    pva = report.plan_vs_actual(cube, plan)
    assert set(plan.stages) <= set(pva)
    for s, v in pva.items():
        assert v["variance_usd"] == v["actual_usd"] - v["plan_usd"]
    billed = {s: sum(plan.stage_usd(s)[r] for r in report.BILLED_RESOURCES) for s in plan.stages}
    assert float(pva["pretrain"]["plan_usd"]) == pytest.approx(billed["pretrain"], rel=1e-12)
    steps = report.variance_steps(cube, report.plan_stages(plan))
    assert steps[0]["usd"] + sum(s["usd"] for s in steps[1:-1]) == steps[-1]["usd"] == sum(cube["usd"])
    wf = report.waterfall_frame(steps)
    assert wf["end"].iloc[-2] == pytest.approx(wf["end"].iloc[-1], abs=1e-6)
    b = report.burn(cube, plan)
    assert b["budget_usd"] == sum(v["plan_usd"] for v in pva.values() if v["plan_usd"])
    import datetime as dt
    days = b["days"].set_index("day")
    warn = b["warning_crossing"]  # the sample spends past its warning line...
    assert warn and not warn["forecast"]
    when = dt.date.fromisoformat(warn["date"])
    assert days.loc[when, "actual_usd"] >= float(b["warning_usd"]) > days.loc[when - dt.timedelta(days=1), "actual_usd"]
    cross = b["budget_crossing"]  # ...and is forecast to cross the budget at its recent daily rate
    last = days.index[-1]
    assert cross["forecast"] and days.loc[last, "actual_usd"] < float(b["budget_usd"])
    need = (float(b["budget_usd"]) - days.loc[last, "actual_usd"]) / float(b["rate_usd_per_day"])
    assert dt.date.fromisoformat(cross["date"]) == last + dt.timedelta(days=int(__import__("math").ceil(need)))


def test_cost_per_result(loaded):
    data = loaded["data"]
    runs_cost = report.per_run(data.cube, data.runs)
    assert sum(runs_cost["usd"]) == sum(data.cube.loc[data.cube["run_id"] != "", "usd"])
    mv = report.per_model_version(runs_cost)
    gained = mv[mv["points_gained"] > 0]
    assert len(gained) > 3
    for r in gained.itertuples():
        assert r.usd_per_point == pytest.approx(float(r.usd) / r.points_gained)


def test_the_org_efficiency_factor_is_recovered_out_of_sample(loaded):
    fit = efficiency.fit(loaded["data"].runs)
    assert len(fit["runs"]) >= 10
    assert abs(fit["factor"] - sample.TRUE_EFFICIENCY) <= 0.05
    assert fit["loo_median_error"] < fit["default_median_error"]
    assert fit["loo_median_error"] >= fit["fitted_median_error"] - 1e-12
    import costcore
    from costcore.scenario import loaders
    scn = loaders.load_scenario("llama3-8b")
    slower = efficiency.apply(scn, fit["factor"])
    from costcore.scenario.schema import BY_PATH
    default = BY_PATH["efficiency.sustained_fraction"].default  # the calibrated fit (schema.yaml)
    assert slower["efficiency"]["sustained_fraction"] == pytest.approx(default * fit["factor"])
    assert costcore.estimate(slower).gpu_hours > costcore.estimate(scn).gpu_hours


def test_schema_migrations_keep_an_old_file_readable(tmp_path, sample_dir):
    import duckdb
    db = tmp_path / "old.duckdb"
    con = duckdb.connect(str(db))
    store.migrate(con, upto=1)  # a file written by the first release
    assert store.schema_version(con) == 1
    con.execute("INSERT INTO cost_rows (row_key, file, charge_start, charge_end, billed_usd, resource_type, gpu_hours, "
                "project, team, model_version, task_type, stage) VALUES ('k', 'f', '2025-01-01', '2025-01-02', 12.345, "
                "'GPU', 0, 'p', 't', 'm', 'x', 'sft')")
    con.close()
    st = store.open_store(db)
    assert store.schema_version(st.duck) == store.SCHEMA_VERSION
    assert report.report_dict(report.load(st))["by"]["project"] == {"p": 12.34}  # 12.345 half to even
    st.duck.execute("INSERT INTO schema_version VALUES (99, now()::TIMESTAMP, 'future')")
    st.close()
    with pytest.raises(ScenarioError, match="newer than this program"):
        store.open_store(db)


def test_default_store_location(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert store.default_path() == tmp_path / "costcore" / "actuals.duckdb"
    monkeypatch.delenv("XDG_DATA_HOME")
    assert store.default_path() == Path.home() / ".local" / "share" / "costcore" / "actuals.duckdb"


# ---------------------------------------------------------------------------
# Property: any small FOCUS file reconciles to the cent, and re-importing it changes nothing
# ---------------------------------------------------------------------------
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as hs  # noqa: E402

_TAGS = hs.fixed_dictionaries({}, optional={"project": hs.sampled_from(["a", "b", "c=d", " spaced "]),
                                            "team": hs.sampled_from(["x", "y"]),
                                            "stage": hs.sampled_from(["pretrain", "Pre-training", "sft", "odd"]),
                                            "model_version": hs.sampled_from(["v1", "v2"])})
_ROW = hs.tuples(hs.decimals(min_value=Decimal("-1000"), max_value=Decimal("1000000"), places=9,
                             allow_nan=False, allow_infinity=False),
                 hs.integers(0, 40), _TAGS, hs.sampled_from(["GPU", "Storage", ""]), hs.booleans())


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=hs.lists(_ROW, min_size=1, max_size=20))
def test_property_any_focus_file_reconciles_to_the_cent(rows):
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "bill.csv"
        with open(path, "w", encoding="utf-8", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(importers.FOCUS_COLUMNS)
            for usd, day, tags, rtype, blank_tags in rows:
                w.writerow([str(usd), str(usd), str(usd), f"2025-03-{1 + day % 28:02d}T00:00:00Z",
                            f"2025-03-{1 + day % 28:02d}T01:00:00Z", "Compute", "svc", "res", rtype, "sku",
                            "1", "GPU-Hours", "" if blank_tags else json.dumps(tags)])
        st = store.open_store(Path(d) / "s.duckdb")
        try:
            first = importers.import_files(st, [path])
            doc = report.report_dict(report.load(st))
            again = importers.import_files(st, [path])
            assert again["imported_rows"] == 0 and again["duplicate_rows"] == len(rows)
            assert report.report_dict(report.load(st)) == doc
        finally:
            st.close()
    distinct = {}
    for usd, day, tags, rtype, blank_tags in rows:  # identical lines count once (a duplicate charge line)
        key = (usd.normalize(), day % 28, json.dumps(tags) if not blank_tags else "", rtype)
        distinct[key] = (usd, tags if not blank_tags else {}, rtype)
    assert first["imported_rows"] + first["duplicate_rows"] == len(rows)
    assert first["imported_rows"] == len(distinct)
    total = sum((u for u, _, _ in distinct.values()), Decimal(0))
    assert doc["actual_usd"] == cents(total)
    projects: dict = {}
    for usd, tags, _ in distinct.values():
        p = str(tags.get("project", "")).strip() or "unattributed"
        projects[p] = projects.get(p, Decimal(0)) + usd
    assert doc["by"]["project"] == {k: cents(v) for k, v in projects.items()}


def test_money_beyond_the_fast_parse_is_exact_and_keyed_alike(tmp_path):
    """Money is parsed as DECIMAL(18, 12) where it fits and as DECIMAL(38, 12) beyond: both give the
    same exact value, and the same amount written two ways is one row (one key)."""
    path = tmp_path / "big.csv"
    amounts = [("1.5", "1.50"), ("12345678901.123456789012", "12345678901.1234567890120"),
               ("-999999.999999999999", "-999999.9999999999990"), ("1000000", "1e6")]
    with open(path, "w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(importers.FOCUS_COLUMNS)
        for i, pair in enumerate(amounts):
            for usd in pair:
                w.writerow([usd, usd, "", "2025-03-01T00:00:00Z", "2025-03-02T00:00:00Z", "Compute", "svc", f"r{i}",
                            "GPU", "sku", usd, "GPU-Hours", '{"project": "p"}'])
    st = store.open_store(tmp_path / "s.duckdb")
    try:
        out = importers.import_files(st, [path])
        assert (out["imported_rows"], out["duplicate_rows"]) == (len(amounts), len(amounts))
        got = st.duck.execute("SELECT billed_usd, effective_usd, list_usd, consumed_quantity, gpu_hours FROM cost_rows "
                              "ORDER BY resource_id").fetchall()
        for (usd, _), row in zip(amounts, got):
            assert row == (Decimal(usd), Decimal(usd), None, Decimal(usd), Decimal(usd)), row
        assert st.duck.execute("SELECT sum(billed_usd) FROM cost_rows").fetchone()[0] == sum(
            Decimal(a) for a, _ in amounts)
    finally:
        st.close()
