"""Importers: FOCUS 1.x billing CSV, Slurm ``sacct --parsable2`` output, a plain CSV of runs.

Every import is one transaction over all the files of the call: a bad file changes nothing, and
the error (a :class:`ScenarioError`) names the file, the line and the column in one sentence. Every
row gets a stable key, the MD5 of its normalized values (numbers and dates as parsed, not as
written), so importing the same rows twice counts them once (``duplicate_rows``).

FOCUS files stream through DuckDB's CSV reader (chunked, parallel, never whole in Python memory);
money is DECIMAL(38, 12), parsed through DECIMAL(18, 12) where it fits (``MONEY_FAST``); they are
read and checked before the import's transaction opens. Job files stream line by line in batches of ``BATCH_ROWS``.
Tags (project, team, model_version, task_type, stage, run_id) come from FOCUS ``Tags`` (a JSON
object), from sacct ``Account`` and ``Comment`` (``key=value`` pairs or a JSON object) or from the
run CSV's columns; a row without them is kept under "unattributed".
"""
from __future__ import annotations

import csv
import math
import datetime as dt
import hashlib
import json
import re
from pathlib import Path

from costcore.errors import ScenarioError
from costcore.fmt import one_line
from costcore.actuals.columns import MONEY_SQL, UNATTRIBUTED

FOCUS_COLUMNS = ("BilledCost", "EffectiveCost", "ListCost", "ChargePeriodStart", "ChargePeriodEnd",
                 "ServiceCategory", "ServiceName", "ResourceId", "ResourceType", "SkuId", "ConsumedQuantity",
                 "ConsumedUnit", "Tags")
FOCUS_MONEY = ("BilledCost", "EffectiveCost", "ListCost", "ConsumedQuantity")
FOCUS_REQUIRED_VALUES = ("BilledCost", "ChargePeriodStart", "ChargePeriodEnd")
SACCT_COLUMNS = ("JobID", "JobName", "Account", "Partition", "AllocTRES", "Elapsed", "Start", "End", "State",
                 "Comment")
TAGS = ("project", "team", "model_version", "task_type", "stage")
RUN_TEXT = ("run_id", "project", "team", "model_version", "task_type", "stage", "gpu_type", "status", "config",
            "name")
RUN_NUMBERS = ("gpu_count", "params_b", "tokens_b")
RUN_DATES = ("start", "end")
RUN_REQUIRED = ("run_id", "start", "end", "status")
BATCH_ROWS = 20_000
# Words people write for a stage -> the planner's stage keys (costcore/data/schema.yaml).
STAGE_WORDS = {"pretrain": "pretrain", "pre-train": "pretrain", "pretraining": "pretrain", "pre-training": "pretrain",
               "cpt": "cpt", "continued-pretraining": "cpt", "sft": "sft", "fine-tuning": "sft", "finetune": "sft",
               "dpo": "dpo", "preference": "dpo", "rl": "rl", "rlhf": "rl", "grpo": "rl", "ppo": "rl",
               "eval": "eval", "evaluation": "eval"}
STATUS_WORDS = {"completed": "completed", "complete": "completed", "success": "completed", "succeeded": "completed",
                "done": "completed", "finished": "completed", "failed": "failed", "error": "failed",
                "crashed": "failed", "cancelled": "cancelled", "canceled": "cancelled", "timeout": "timeout",
                "out_of_memory": "out_of_memory", "oom": "out_of_memory", "node_fail": "node_fail",
                "preempted": "preempted", "running": "running", "pending": "pending", "boot_fail": "failed",
                "deadline": "timeout"}
GPU_HOUR_UNITS = ("gpu-hours", "gpu-hour", "gpu-hrs", "gpu-hr", "gpu-h", "gpuhours", "gpuhour")


def _where(path: Path, line: int | None = None, column: str | None = None, index: int | None = None) -> str:
    out = f"{one_line(path.name)}"
    if line is not None:
        out += f", line {line:,}"
    if column is not None:
        out += f", column {one_line(column)}" + (f" (column {index})" if index else "")
    return out


def sniff(path: Path) -> str:
    """'focus', 'sacct' or 'runs' from a file's header line; ScenarioError for anything else."""
    try:
        with open(path, encoding="utf-8-sig", newline="") as fh:
            head = fh.readline()
    except UnicodeDecodeError:
        raise ScenarioError("file", f"{_where(path)}: is not UTF-8 text; export or save it as UTF-8 (CSV UTF-8) "
                                    "and upload it again") from None
    except OSError as err:
        raise ScenarioError("file", f"{_where(path)}: cannot be read ({one_line(err.strerror or 'no reason given')})") \
            from None
    if not head.strip():
        raise ScenarioError("file", f"{_where(path)}: is empty" + (" (its first line is blank)" if head else "")
                            + "; a bill or job record file starts with its header line")
    cols = [c.strip() for c in (head.split("|") if "|" in head else next(csv.reader([head]), []))]
    if "BilledCost" in cols or "ChargePeriodStart" in cols:
        return "focus"
    if "JobID" in cols and "|" in head:
        return "sacct"
    if {_norm_header(c) for c in cols} & {"run_id"}:
        return "runs"
    raise ScenarioError("file", f"{_where(path, 1)}: not a FOCUS billing file (BilledCost, ChargePeriodStart...), "
                                "sacct --parsable2 output (JobID|...) or a run CSV (run_id, ...)")


def _norm_header(name: str) -> str:
    return re.sub(r"[\s\-]+", "_", name.strip().lower())


# ---------------------------------------------------------------------------
# FOCUS (in DuckDB)
# ---------------------------------------------------------------------------
def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _focus_header(path: Path) -> list[str]:
    with open(path, encoding="utf-8-sig", newline="") as fh:
        header = next(csv.reader([fh.readline()]), [])
    missing = [c for c in FOCUS_COLUMNS if c not in header]
    if missing:
        raise ScenarioError("file", f"{_where(path, 1, missing[0])}: the column is missing (a FOCUS 1.x file has "
                                    f"{', '.join(FOCUS_COLUMNS)})")
    return header


def _ragged_line(path: Path, fields: int) -> tuple[int, int] | None:
    """(line, its field count) of the first record whose fields are not ``fields`` (the header's), read with
    Python's csv module: only when DuckDB refused the file or read it with other columns, to say where."""
    with open(path, encoding="utf-8-sig", newline="") as fh:
        reader = csv.reader(fh)
        for row in reader:
            if row and len(row) != fields:
                return reader.line_num, len(row)
    return None


def _not_csv(path: Path, header: list[str], detail: str) -> ScenarioError:
    """The refusal of a file DuckDB cannot stage as its header says: the line whose field count differs (an
    unquoted comma in a value, fields added at the end), else DuckDB's own words without the server's paths."""
    ragged = _ragged_line(path, len(header))
    if ragged:
        line, n = ragged
        return ScenarioError("file", f"{_where(path, line)}: has {n} fields where the header has {len(header)} "
                                     "(a comma inside a value needs the value in double quotes)")
    detail = re.sub(r'"[^"]*[/\\][^"]*"', "the file", detail)  # no server path (an upload's folder) in a message
    return ScenarioError("file", f"{_where(path)}: cannot be read as CSV ({one_line(detail, 300)})")


def _focus_stage(duck, path: Path, header: list[str]) -> None:
    import duckdb
    duck.execute("DROP TABLE IF EXISTS _stg")
    try:
        duck.execute("CREATE TEMP TABLE _stg AS SELECT * FROM read_csv(?, header = true, all_varchar = true, "
                     "delim = ',', quote = '\"', escape = '\"', strict_mode = true, null_padding = false)",
                     [str(path)])
    except duckdb.Error as err:
        raise _not_csv(path, header, str(err).split("\n")[0]) from None
    staged = [d[0] for d in duck.execute("SELECT * FROM _stg LIMIT 0").description]
    if staged != header:  # one row with extra fields: DuckDB's sniffer took that row for the header (a traceback)
        raise _not_csv(path, header, "its columns are not the header's")


# Money is parsed as DECIMAL(18, 12) first (a 64-bit integer: DuckDB parses and prints it about ten
# times faster than the 128-bit DECIMAL(38, 12)) and widened; a value that does not fit (beyond
# +-999,999.999999999999) takes the 128-bit parse. Value and text are the same either way.
MONEY_FAST = "DECIMAL(18, 12)"


def _money_sql(col: str) -> tuple[str, str]:
    """(DECIMAL(38, 12) value, its text as CAST(value AS VARCHAR) prints it) of a FOCUS money column."""
    raw = f"trim({_q(col)})"
    fast = f"TRY_CAST({raw} AS {MONEY_FAST})"
    value = f"coalesce(CAST({fast} AS {MONEY_SQL}), CAST({raw} AS {MONEY_SQL}))"
    return value, f"coalesce(CAST({fast} AS VARCHAR), CAST({value} AS VARCHAR))"


def _charge_words(duck, value) -> str:
    """Why a charge period's time was refused: not a time, or (ChargePeriodEnd) a time before its start."""
    parses = duck.execute("SELECT TRY_CAST(trim(?) AS TIMESTAMPTZ) IS NOT NULL", [value]).fetchone()[0]
    return "is before its ChargePeriodStart" if parses else "is not a date and time (ISO 8601)"


def _money_words(value) -> str:
    """Why a money cell was refused: not a number, or a number beyond what the store holds ("'-5e30' is not a
    number" said the wrong thing)."""
    try:
        f = float(str(value).strip())
    except ValueError:
        return "is not a number"
    return ("is not a finite number" if not math.isfinite(f) else
            "is beyond the largest amount the store holds (at most 26 digits before the decimal point)")


def _focus_bad_money_sql() -> str:
    """SELECT rowid, column of the first money value that does not parse (no row when all do)."""
    tests = []
    for c in FOCUS_MONEY:
        v = _q(c)
        cond = f"TRY_CAST(trim({v}) AS {MONEY_FAST}) IS NULL AND TRY_CAST(trim({v}) AS {MONEY_SQL}) IS NULL"
        tests.append(((f"{v} IS NOT NULL AND trim({v}) <> '' AND " if c not in FOCUS_REQUIRED_VALUES else "") + cond, c))
    case = " ".join(f"WHEN {cond} THEN '{col}'" for cond, col in tests)
    return f"SELECT rowid, bad FROM (SELECT rowid, CASE {case} END AS bad FROM _stg) WHERE bad IS NOT NULL " \
           "ORDER BY rowid LIMIT 1"


def _tag_sql(key: str) -> str:
    return f"nullif(trim(json_extract_string(j, '$.{key}')), '')"


def _stage_sql(expr: str) -> str:
    words = " ".join(f"WHEN '{k}' THEN '{v}'" for k, v in STAGE_WORDS.items())
    low = f"replace(replace(lower(trim({expr})), ' ', '-'), '_', '-')"
    return f"coalesce(CASE {low} {words} ELSE lower(trim({expr})) END, '{UNATTRIBUTED}')"


def _lookups(duck) -> tuple | None:
    """Parse the distinct times and tags once (a bill repeats them on every line) into _ts and _tags.

    Returns (column, value) of the first time or Tags value that does not parse, else None.
    """
    duck.execute("DROP TABLE IF EXISTS _ts")
    duck.execute("CREATE TEMP TABLE _ts AS SELECT v, t, CAST(timezone('UTC', t) AS VARCHAR) AS txt FROM "
                 "(SELECT v, TRY_CAST(trim(v) AS TIMESTAMPTZ) AS t FROM "
                 "(SELECT DISTINCT ChargePeriodStart AS v FROM _stg UNION SELECT DISTINCT ChargePeriodEnd FROM _stg))")
    for c in ("ChargePeriodStart", "ChargePeriodEnd"):
        bad = duck.execute(f"SELECT s.{c} FROM _stg s LEFT JOIN _ts ON s.{c} = _ts.v WHERE _ts.t IS NULL "
                           "ORDER BY s.rowid LIMIT 1").fetchall()
        if bad:
            return c, bad[0][0]
    # a charge period that ends before it starts (FOCUS 1.x: ChargePeriodEnd is after ChargePeriodStart) was
    # imported without a word
    back = duck.execute("SELECT s.ChargePeriodEnd FROM _stg s JOIN _ts a ON s.ChargePeriodStart = a.v JOIN _ts b "
                        "ON s.ChargePeriodEnd = b.v WHERE b.t < a.t ORDER BY s.rowid LIMIT 1").fetchall()
    if back:
        return "ChargePeriodEnd", back[0][0]
    duck.execute("DROP TABLE IF EXISTS _tags")
    duck.execute("CREATE TEMP TABLE _tags AS SELECT Tags AS v, CASE WHEN trim(Tags) = '' THEN NULL "
                 "WHEN json_valid(Tags) AND starts_with(ltrim(Tags), '{') THEN Tags::JSON END AS j, "
                 "trim(Tags) <> '' AND NOT (json_valid(Tags) AND starts_with(ltrim(Tags), '{')) AS bad "
                 "FROM (SELECT DISTINCT Tags FROM _stg WHERE Tags IS NOT NULL)")
    bad = duck.execute("SELECT s.Tags FROM _stg s JOIN _tags ON s.Tags = _tags.v WHERE _tags.bad ORDER BY s.rowid "
                       "LIMIT 1").fetchall()
    if bad:
        return "Tags", bad[0][0]
    tags = ", ".join(f"coalesce({_tag_sql(k)}, '{UNATTRIBUTED}') AS {k}" for k in ("project", "team", "model_version",
                                                                                    "task_type"))
    duck.execute(f"CREATE OR REPLACE TEMP TABLE _tags AS SELECT v, {tags}, {_stage_sql(_tag_sql('stage'))} AS stage, "
                 f"{_tag_sql('run_id')} AS run_id FROM _tags")
    return None


def _focus_norm_sql() -> str:
    """SELECT of the rows of ``cost_rows`` from _stg (checked) and the lookups _ts and _tags.

    The row key is the MD5 of the normalized values as text (CAST(value AS VARCHAR), '' for NULL),
    in the column order below with tags last; the texts are made the cheap way (money from its
    64-bit parse, times once per distinct value in _ts) and equal CAST(column AS VARCHAR).
    """
    money = {c: _money_sql(c) for c in FOCUS_MONEY}
    text = {c: f"nullif(trim({_q(c)}), '')" for c in ("ServiceCategory", "ServiceName", "ResourceId", "ResourceType",
                                                      "SkuId", "ConsumedUnit")}
    units = ", ".join(f"'{u}'" for u in GPU_HOUR_UNITS)
    unt = f"'{UNATTRIBUTED}'"
    is_gpu = f"replace(replace(lower(trim(ConsumedUnit)), ' ', '-'), '_', '-') IN ({units})"
    quantity, quantity_text = money["ConsumedQuantity"]
    zero = "'0.000000000000'"  # CAST(0 AS DECIMAL(38, 12)) as text
    cols = {  # name: (value, its text in the key)
        "charge_start": ("timezone('UTC', a.t)", "a.txt"), "charge_end": ("timezone('UTC', b.t)", "b.txt"),
        "billed_usd": money["BilledCost"], "effective_usd": money["EffectiveCost"], "list_usd": money["ListCost"],
        "service_category": text["ServiceCategory"], "service_name": text["ServiceName"],
        "resource_id": text["ResourceId"], "resource_type": f"coalesce({text['ResourceType']}, {unt})",
        "sku_id": text["SkuId"], "consumed_quantity": money["ConsumedQuantity"], "consumed_unit": text["ConsumedUnit"],
        "gpu_hours": (f"CAST(CASE WHEN {is_gpu} THEN coalesce({quantity}, 0) ELSE 0 END AS {MONEY_SQL})",
                      f"CASE WHEN {is_gpu} THEN coalesce({quantity_text}, {zero}) ELSE {zero} END"),
        "tags": "nullif(trim(Tags), '')",
        **{k: f"coalesce(g.{k}, {unt})" for k in ("project", "team", "model_version", "task_type", "stage")},
        "run_id": "g.run_id",
    }
    cols = {k: v if isinstance(v, tuple) else (v, None) for k, v in cols.items()}
    inner = ", ".join(f"{sql} AS {name}" + (f", {txt} AS _k_{name}" if txt else "")
                      for name, (sql, txt) in cols.items())
    keyed = [c for c in cols if c != "tags"] + ["tags"]
    key = "md5(concat_ws(chr(31), 'focus', " + ", ".join(
        f"coalesce({'_k_' + c if cols[c][1] else f'CAST({c} AS VARCHAR)'}, '')" for c in keyed) + "))"
    order = ", ".join(cols)
    source = ("_stg s JOIN _ts a ON s.ChargePeriodStart = a.v JOIN _ts b ON s.ChargePeriodEnd = b.v "
              "LEFT JOIN _tags g ON s.Tags = g.v")
    return f"SELECT {key} AS row_key, {{file}} AS file, {order} FROM (SELECT {inner} FROM {source})"


def prepare_focus(duck, path: Path, table: str) -> int:
    """Stage and check one FOCUS file and write its normalized, keyed rows (one per key) into the
    temporary table ``table``; return the file's line count. Touches no store table.

    Run it before the import's transaction: DuckDB scans tables created inside a transaction (its
    local storage) about twice as slowly, and a refusal here needs no rollback.
    """
    header = _focus_header(path)
    try:
        _focus_stage(duck, path, header)
        base = duck.execute("SELECT min(rowid) FROM _stg").fetchone()[0]  # rowids of a new table start anywhere
        bad = duck.execute(_focus_bad_money_sql()).fetchone()
        if bad is None:
            found = _lookups(duck)
            if found is not None:
                col, value = found
                rowid = duck.execute(f"SELECT min(rowid) FROM _stg WHERE {_q(col)} = ?", [value]).fetchone()[0]
                bad = (rowid, col)
        if bad is not None:
            rowid, col = bad
            value = duck.execute(f"SELECT {_q(col)} FROM _stg WHERE rowid = ?", [rowid]).fetchone()[0]
            what = {"Tags": "is not a JSON object"}.get(col, _charge_words(duck, value)
                                                             if col.startswith("Charge") else _money_words(value))
            raise ScenarioError("file", f"{_where(path, int(rowid - base) + 2, col, header.index(col) + 1)}: "
                                        f"{one_line(repr(value or ''), 80)} {what}")
        total = duck.execute("SELECT count(*) FROM _stg").fetchone()[0]
        literal = "'" + path.name.replace("'", "''") + "'"
        duck.execute("SET preserve_insertion_order = false")  # the store's rows have no order: run parallel
        duck.execute(f"CREATE OR REPLACE TEMP TABLE {table} AS " + _focus_norm_sql().replace("{file}", literal))
        if duck.execute(f"SELECT count(DISTINCT row_key) FROM {table}").fetchone()[0] < total:  # repeated lines
            duck.execute(f"CREATE OR REPLACE TEMP TABLE {table} AS SELECT DISTINCT ON (row_key) * FROM {table}")
    finally:
        duck.execute("RESET preserve_insertion_order")
        for t in ("_stg", "_ts", "_tags"):
            duck.execute(f"DROP TABLE IF EXISTS {t}")
    return int(total)


def insert_focus(duck, table: str, total: int) -> tuple[int, int]:
    """Insert a prepared file's rows whose key the store lacks (inside the caller's transaction):
    (imported, duplicates)."""
    before = duck.execute("SELECT count(*) FROM cost_rows").fetchone()[0]
    duck.execute("SET preserve_insertion_order = false")
    try:
        duck.execute(f"INSERT INTO cost_rows SELECT n.* FROM {table} n ANTI JOIN cost_rows c ON n.row_key = c.row_key")
    finally:
        duck.execute("RESET preserve_insertion_order")
    added = duck.execute("SELECT count(*) FROM cost_rows").fetchone()[0] - before
    return int(added), int(total - added)


def import_focus(duck, path: Path) -> tuple[int, int]:
    """Stage, check and insert one FOCUS file: (imported, duplicates). ``import_files`` prepares
    its FOCUS files before its transaction instead."""
    try:
        return insert_focus(duck, "_norm", prepare_focus(duck, path, "_norm"))
    finally:
        duck.execute("DROP TABLE IF EXISTS _norm")


# ---------------------------------------------------------------------------
# Job records (Python, streamed line by line)
# ---------------------------------------------------------------------------
def parse_time(text: str | None):
    """ISO 8601 date or date-time (a zone is converted to UTC) -> naive UTC datetime; None for empty/Unknown."""
    t = (text or "").strip()
    if t.lower() in ("", "unknown", "none", "n/a"):
        return None
    v = dt.datetime.fromisoformat(t)
    if v.tzinfo is not None:
        v = v.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return v


def parse_elapsed_h(text: str) -> float:
    """Slurm elapsed time '[D-]HH:MM:SS' (or 'MM:SS') -> hours."""
    t = text.strip()
    days = 0
    if "-" in t:
        d, t = t.split("-", 1)
        days = int(d)
    parts = [int(p) for p in t.split(":")]
    if not 2 <= len(parts) <= 3 or any(p < 0 for p in parts) or days < 0:
        raise ValueError(text)
    while len(parts) < 3:
        parts.insert(0, 0)
    return days * 24 + parts[0] + parts[1] / 60 + parts[2] / 3600


def parse_tres_gpus(text: str) -> tuple[int, str | None]:
    """(GPU count, GPU type or None) from sacct AllocTRES ('cpu=64,gres/gpu:h100=8,...')."""
    count, kind = 0, None
    for item in (text or "").split(","):
        name, _, value = item.strip().partition("=")
        if name.startswith("gres/gpu"):
            n = int(value)
            if n < 0:
                raise ValueError(value)
            if ":" in name:
                kind = name.split(":", 1)[1]
                count = n
            elif not count:
                count = n
    return count, kind


def parse_comment(text: str) -> dict:
    """Tags from a sacct Comment: a JSON object or 'key=value' pairs separated by ; or , (others ignored)."""
    t = (text or "").strip()
    if t.startswith("{"):
        try:
            obj = json.loads(t)
        except ValueError:
            obj = None
        if isinstance(obj, dict):
            return {str(k).strip().lower(): str(v).strip() for k, v in obj.items()}
    out = {}
    for part in re.split(r"[;,]", t):
        k, sep, v = part.partition("=")
        if sep and k.strip():
            out[_norm_header(k)] = v.strip()
    return out


def _status(word: str) -> str:
    w = (word or "").strip().split(" ")[0].lower()  # sacct: 'CANCELLED by 1234'
    return STATUS_WORDS.get(w, w or "unknown")


def _stage(word) -> str:
    w = (word or "").strip().lower()
    return STAGE_WORDS.get(w.replace(" ", "-").replace("_", "-"), w) or UNATTRIBUTED


def _job_key(job: dict) -> str:
    keyed = [job["source"]] + [str(job.get(k) if job.get(k) is not None else "") for k in JOB_FIELDS[3:]]
    return hashlib.md5("\x1f".join(keyed).encode("utf-8")).hexdigest()


JOB_FIELDS = ("row_key", "file", "source", "run_id", "name", "project", "team", "model_version", "task_type", "stage",
              "gpu_type", "gpu_count", "start_at", "end_at", "status", "gpu_hours", "params_b", "tokens_b", "config",
              "eval_score", "metrics")


def _finish_job(job: dict) -> dict:
    for k in TAGS:
        job[k] = (job.get(k) or "").strip() or UNATTRIBUTED
    job["stage"] = _stage(job["stage"]) if job["stage"] != UNATTRIBUTED else UNATTRIBUTED
    if job.get("gpu_hours") is None and job.get("start_at") and job.get("end_at") and job.get("gpu_count"):
        job["gpu_hours"] = (job["end_at"] - job["start_at"]).total_seconds() / 3600 * job["gpu_count"]
    job["row_key"] = _job_key(job)
    return {k: job.get(k) for k in JOB_FIELDS}


def _number(path, line, col, index, text, integer=False):
    t = (text or "").strip()
    if not t:
        return None
    try:
        v = int(t) if integer else float(t)
    except ValueError:
        kind = "a whole number" if integer else "a number"
        raise ScenarioError("file", f"{_where(path, line, col, index)}: {one_line(repr(t), 80)} is not {kind}") from None
    if not integer and v != v or v in (float("inf"), float("-inf")):
        raise ScenarioError("file", f"{_where(path, line, col, index)}: {t!r} is not a finite number")
    return v


def _time(path, line, col, index, text):
    try:
        return parse_time(text)
    except ValueError:
        raise ScenarioError("file", f"{_where(path, line, col, index)}: {one_line(repr(text.strip()), 80)} "
                                    "is not a date and time (ISO 8601)") from None


def _sacct_job(path: Path, line: int, row: dict, header: list[str]) -> dict | None:
    jid = (row.get("JobID") or "").strip()
    if not jid or "." in jid:  # job steps (123.batch, 123.0) repeat their allocation's record
        return None
    ix = {c: header.index(c) + 1 for c in header}
    try:
        gpus, kind = parse_tres_gpus(row.get("AllocTRES") or "")
    except ValueError:
        raise ScenarioError("file", f"{_where(path, line, 'AllocTRES', ix['AllocTRES'])}: "
                                    f"{one_line(repr(row.get('AllocTRES')), 80)} has a GPU count that is not a "
                                    "whole number") from None
    try:
        hours = parse_elapsed_h(row.get("Elapsed") or "")
    except ValueError:
        raise ScenarioError("file", f"{_where(path, line, 'Elapsed', ix['Elapsed'])}: "
                                    f"{one_line(repr(row.get('Elapsed')), 80)} is not an elapsed time "
                                    "([days-]hours:minutes:seconds)") from None
    tags = parse_comment(row.get("Comment") or "")
    job = {"source": "sacct", "run_id": tags.get("run_id") or jid, "name": (row.get("JobName") or "").strip(),
           "project": tags.get("project") or (row.get("Account") or "").strip(),
           "team": tags.get("team"), "model_version": tags.get("model_version"), "task_type": tags.get("task_type"),
           "stage": tags.get("stage"), "gpu_type": tags.get("gpu") or kind or (row.get("Partition") or "").strip(),
           "gpu_count": gpus, "start_at": _time(path, line, "Start", ix["Start"], row.get("Start") or ""),
           "end_at": _time(path, line, "End", ix["End"], row.get("End") or ""), "status": _status(row.get("State")),
           "gpu_hours": hours * gpus, "config": tags.get("config") or (row.get("JobName") or "").strip()}
    for k in ("params_b", "tokens_b", "eval_score"):
        job[k] = _number(path, line, "Comment", ix["Comment"], tags.get(k))
    job["metrics"] = json.dumps({"eval_score": job["eval_score"]}) if job["eval_score"] is not None else None
    return job


def _run_job(path: Path, line: int, row: dict, header: list[str]) -> dict:
    ix = {c: header.index(c) + 1 for c in header}
    job = {"source": "runs"}
    for k in RUN_TEXT:
        job[k] = (row.get(k) or "").strip() or None
    for k in RUN_NUMBERS:
        job[k] = _number(path, line, k, ix.get(k), row.get(k), integer=k == "gpu_count")
    job["start_at"] = _time(path, line, "start", ix["start"], row.get("start") or "")
    job["end_at"] = _time(path, line, "end", ix["end"], row.get("end") or "")
    job["status"] = _status(job["status"] or "")
    metrics = {}
    for k in header:
        if k not in RUN_TEXT + RUN_NUMBERS + RUN_DATES and k:
            v = _number(path, line, k, ix[k], row.get(k))
            if v is not None:
                metrics[k] = v
    job["eval_score"] = metrics.get("eval_score", next((v for k, v in metrics.items() if "score" in k), None))
    job["metrics"] = json.dumps(metrics, sort_keys=True) if metrics else None
    job["config"] = job["config"] or job["name"]
    return job


def _job_rows(path: Path, kind: str):
    """Yield normalized job dicts of a sacct or run file, one line at a time."""
    delim = "|" if kind == "sacct" else ","
    with open(path, encoding="utf-8-sig", newline="") as fh:
        reader = csv.reader(fh, delimiter=delim, quoting=csv.QUOTE_NONE if kind == "sacct" else csv.QUOTE_MINIMAL)
        raw_header = next(reader, [])
        header = [h.strip() if kind == "sacct" else _norm_header(h) for h in raw_header]
        need = SACCT_COLUMNS if kind == "sacct" else RUN_REQUIRED
        missing = [c for c in need if c not in header]
        if missing:
            raise ScenarioError("file", f"{_where(path, 1, missing[0])}: the column is missing (needed: "
                                        f"{', '.join(need)})")
        for row in reader:
            line = reader.line_num
            if not any(c.strip() for c in row):
                continue
            if len(row) != len(header):
                raise ScenarioError("file", f"{_where(path, line)}: has {len(row)} fields where the header has "
                                            f"{len(header)}")
            rec = dict(zip(header, row))
            job = _sacct_job(path, line, rec, header) if kind == "sacct" else _run_job(path, line, rec, header)
            if job is not None:
                job["file"] = path.name
                yield _finish_job(job)


def import_jobs(duck, path: Path, kind: str) -> tuple[int, int]:
    """Insert a sacct or run file's records in batches (inside the caller's transaction): (imported, duplicates)."""
    import pandas as pd
    total = added = 0
    batch: list[dict] = []
    cols = ", ".join(JOB_FIELDS)

    def flush():
        nonlocal total, added
        if not batch:
            return
        df = pd.DataFrame(batch, columns=list(JOB_FIELDS))
        duck.register("_jobs_batch", df)
        before = duck.execute("SELECT count(*) FROM jobs").fetchone()[0]
        duck.execute(f"INSERT INTO jobs SELECT {cols} FROM (SELECT DISTINCT ON (row_key) * FROM _jobs_batch) b "
                     "ANTI JOIN jobs j ON b.row_key = j.row_key")
        duck.unregister("_jobs_batch")
        added += duck.execute("SELECT count(*) FROM jobs").fetchone()[0] - before
        total += len(batch)
        batch.clear()

    for job in _job_rows(path, kind):
        batch.append(job)
        if len(batch) >= BATCH_ROWS:
            flush()
    flush()
    return int(added), int(total - added)


def import_files(store, paths) -> dict:
    """Import every file in one transaction: {"imported_rows", "duplicate_rows", "files"}.

    ``files`` lists each file with its kind and counts. Any bad file: ScenarioError, nothing changed.
    """
    duck = store.duck
    if duck is None:
        raise ScenarioError("db", "imports go into a DuckDB store file; to review a warehouse, point the report "
                                  "at its table (actuals report --db URL --focus-table NAME)")
    files = [Path(p) for p in paths]
    for p in files:
        if not p.is_file():  # a folder is there, but is not a file ("no such file" said otherwise)
            raise ScenarioError("file", f"{one_line(str(p))}: " + ("is a folder, not a file" if p.is_dir()
                                                                   else "no such file"))
    kinds = [sniff(p) for p in files]
    out = {"imported_rows": 0, "duplicate_rows": 0, "files": []}
    staged = {}  # file index -> (temporary table, line count) of each FOCUS file
    try:
        for i, (p, kind) in enumerate(zip(files, kinds)):
            if kind == "focus":
                staged[i] = (f"_norm_{i}", prepare_focus(duck, p, f"_norm_{i}"))
        duck.execute("BEGIN TRANSACTION")
        try:
            for i, (p, kind) in enumerate(zip(files, kinds)):
                added, dups = insert_focus(duck, *staged[i]) if kind == "focus" else import_jobs(duck, p, kind)
                duck.execute("INSERT INTO imports VALUES (?, ?, ?, ?, now()::TIMESTAMP)", [p.name, kind, added, dups])
                out["imported_rows"] += added
                out["duplicate_rows"] += dups
                out["files"].append({"file": p.name, "kind": kind, "imported_rows": added, "duplicate_rows": dups})
            duck.execute("COMMIT")
        except BaseException:
            duck.execute("ROLLBACK")
            raise
    finally:
        for table, _ in staged.values():
            duck.execute(f"DROP TABLE IF EXISTS {table}")
    return out


def import_notes(summary: dict) -> list[str]:
    """Plain sentences on the files of an :func:`import_files` summary that added less than they held: a file
    with a header and no rows, a file whose rows all repeat rows already imported (the same bill uploaded
    twice: counted once), a file with some repeated rows."""
    out = []
    for f in summary["files"]:
        name, added, dups = one_line(f["file"]), f["imported_rows"], f["duplicate_rows"]
        if added == 0 and dups == 0:
            out.append(f"{name} has a header and no rows: nothing was imported from it.")
        elif added == 0:
            out.append(f"{name}: all {dups:,} of its rows were already imported (the same file twice?); "
                       "they are counted once.")
        elif dups:
            out.append(f"{name}: {dups:,} of its rows repeat rows already imported and are counted once; "
                       f"{added:,} were added.")
    return out

