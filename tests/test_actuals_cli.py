"""``python -m costcore actuals import|report``, ``validate --db`` and ``estimate --org-efficiency``:
the JSON contract of issue 19, one-line refusals with exit code 2, and a CLI that stays light."""
from __future__ import annotations

import csv
import io
import json
import subprocess
import sys

import pytest

from shared import ROOT
from server_support import NEVER_S  # the one wait limit of the suite (not a speed)


@pytest.fixture(scope="module")
def files(warm_kernels):
    from actuals_support import sample_files
    return sample_files(7)


def test_import_then_report_json_contract(cli, files, tmp_path):
    out, truth = files
    db = str(tmp_path / "s.duckdb")
    rc, stdout, _ = cli("actuals", "import", *truth["files"], "--db", db)
    assert rc == 0
    doc = json.loads(stdout)
    assert set(doc) == {"imported_rows", "duplicate_rows", "files"}
    assert doc["duplicate_rows"] == 0 and doc["imported_rows"] > 2500 and len(doc["files"]) == 3
    rc, stdout, _ = cli("actuals", "import", str(out / "focus.csv"), "--db", db)
    assert json.loads(stdout)["imported_rows"] == 0
    rc, stdout, _ = cli("actuals", "report", "--db", db, "--plan", "llama3-8b", "--format", "json")
    assert rc == 0
    rep = json.loads(stdout)
    assert list(rep) == ["actual_usd", "by", "plan_vs_actual", "anomalies", "waste"]
    assert list(rep["by"]) == ["project", "team", "model_version", "task_type", "stage", "resource_type"]
    assert set(rep["plan_vs_actual"]) >= {"pretrain", "sft", "dpo", "eval"}
    for v in rep["plan_vs_actual"].values():
        assert set(v) == {"plan_usd", "actual_usd", "variance_usd"}
        assert v["variance_usd"] == pytest.approx(v["actual_usd"] - v["plan_usd"], abs=0.011)
    assert rep["anomalies"] and {"date", "project", "usd", "expected_usd"} <= set(rep["anomalies"][0])
    assert [w["kind"] for w in rep["waste"]] == ["failed_runs", "cancelled_runs", "idle_allocations",
                                                  "duplicate_experiments", "orphaned_storage"]
    money = [rep["actual_usd"], *[x for d in rep["by"].values() for x in d.values()],
             *[a["usd"] for a in rep["anomalies"]], *[w["usd"] for w in rep["waste"]]]
    assert all(isinstance(m, float) and round(m, 2) == m for m in money)
    assert rep["actual_usd"] == float(round(__import__("decimal").Decimal(truth["billed_usd"]), 2))
    rc, stdout, _ = cli("actuals", "report", "--db", db, "--since", "2025-03-01", "--until", "2025-03-31",
                        "--where", "project=atlas", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(stdout)))
    assert rc == 0 and rows[0]["section"] == "total"
    assert [r["key"] for r in rows if r["section"] == "by_project"] == ["atlas"]
    assert all("2025-03" in r["key"] for r in rows if r["section"] == "anomaly")


@pytest.mark.parametrize("argv,words", [
    (["actuals", "report", "--since", "2025-02-30"], "since: must be a date"),
    (["actuals", "report", "--where", "colour=red"], "where: must be dimension=value"),
    (["actuals", "report", "--retention-days", "-3"], "retention_days"),
    (["actuals", "import", "/nonexistent/bill.csv"], "no such file"),
    # a mistyped store: it created an empty one and reported $0 with exit code 0
    (["actuals", "report"], "db: no store at"),
    (["validate"], "db: no store at"),
])
def test_bad_arguments_are_one_line_and_exit_2(cli, tmp_path, argv, words):
    rc, stdout, stderr = cli(*argv, "--db", str(tmp_path / "s.duckdb"))
    assert rc == 2 and stdout == "" and stderr.count("\n") == 1 and words in stderr, stderr
    assert argv[-1] == "/nonexistent/bill.csv" or not (tmp_path / "s.duckdb").exists()  # a report creates no store


def test_a_bad_file_names_file_line_and_column(cli, files, tmp_path):
    out, _ = files
    lines = (out / "runs.csv").read_text(encoding="utf-8").splitlines()
    head = lines[0].split(",")
    row = lines[3].split(",")
    row[head.index("start")] = "yesterday"
    bad = tmp_path / "runs-bad.csv"
    bad.write_text("\n".join(lines[:3] + [",".join(row)] + lines[4:]) + "\n", encoding="utf-8")
    rc, _, stderr = cli("actuals", "import", str(bad), "--db", str(tmp_path / "s.duckdb"))
    assert rc == 2 and "runs-bad.csv, line 4, column start" in stderr and "'yesterday' is not a date" in stderr


def test_validate_db_and_estimate_with_the_org_efficiency(cli, files, tmp_path):
    _, truth = files
    db = str(tmp_path / "s.duckdb")
    cli("actuals", "import", *truth["files"], "--db", db)
    saved = tmp_path / "org.yaml"
    rc, stdout, _ = cli("validate", "--db", db, "--format", "json", "--save", str(saved))
    assert rc == 0
    fit = json.loads(stdout)
    assert fit["factor"] == pytest.approx(truth["true_efficiency"], abs=0.05) and len(fit["runs"]) >= 10
    rc, table, _ = cli("validate", "--db", db)
    assert rc == 0 and "leave-one-out" in table and f"{fit['factor']:.2f}" in table
    base = json.loads(cli("estimate", "llama3-8b", "--format", "json")[1])
    for source in (str(saved), db):
        rc, stdout, _ = cli("estimate", "llama3-8b", "--format", "json", "--org-efficiency", source)
        assert rc == 0
        assert json.loads(stdout)["gpu_hours"] > base["gpu_hours"] * 1.1  # a slower cluster: more GPU-hours
    rc, _, stderr = cli("estimate", "llama3-8b", "--org-efficiency", str(tmp_path / "none.yaml"))
    assert rc == 2 and "org_efficiency" in stderr


def test_the_actuals_command_does_not_load_duckdb_ibis_or_numba():
    code = ("import sys; from costcore.cli import main; "
            "rc = main.main(['actuals', 'report', '--since', 'not-a-date']); "
            "print(rc, sorted(m for m in ('duckdb', 'ibis', 'numba') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=NEVER_S)
    assert out.stdout.strip().splitlines()[-1] == "2 []", out.stdout + out.stderr


def test_a_database_that_refuses_the_connection_is_said_on_one_line_without_its_password(cli):
    """The driver's two-line error read 'Connection refused??Is the server running' (its line break made safe as
    '??'), after the URL with its password in clear."""
    rc, stdout, stderr = cli("actuals", "report", "--db", "postgres://user:s3cret@127.0.0.1:1/bills")
    assert rc == 2 and stderr.count("\n") == 1, stderr
    assert "s3cret" not in stderr and "postgres://user:***@127.0.0.1:1/bills" in stderr and "??" not in stderr
