"""The actuals store: an embedded DuckDB file with a versioned schema, or a warehouse through Ibis.

Where it lives
    ``default_path()``: ``$XDG_DATA_HOME/costcore/actuals.duckdb`` (``~/.local/share/costcore/...``
    when XDG_DATA_HOME is unset), created on first use; ``--db PATH`` picks another file, and
    ``--db URL`` (``postgres://...``, ``trino://...``, ``bigquery://...``, any URL ``ibis.connect``
    takes) reads the same tables from a warehouse.

Schema
    ``MIGRATIONS`` is the schema's history, oldest first; ``schema_version`` records each migration
    applied to a file, so a file written by an older version is brought up to date when it is
    opened (and a newer file than this code knows is refused, not misread). Money is DECIMAL(38, 12)
    (``MONEY_SQL``), never a float.

duckdb and ibis load inside these functions, never when the module is imported.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from costcore import fmt
from costcore.errors import ScenarioError
from costcore.actuals.columns import COST_TABLE, DIMENSIONS, JOBS_TABLE, MONEY_SQL, UNATTRIBUTED  # noqa: F401

# (version, what it adds, statements). Never edit a released entry: append a new one.
MIGRATIONS = (
    (1, "billing lines and job records", (
        f"""CREATE TABLE cost_rows (
            row_key VARCHAR NOT NULL, file VARCHAR NOT NULL,
            charge_start TIMESTAMP NOT NULL, charge_end TIMESTAMP NOT NULL,
            billed_usd {MONEY_SQL} NOT NULL, effective_usd {MONEY_SQL}, list_usd {MONEY_SQL},
            service_category VARCHAR, service_name VARCHAR, resource_id VARCHAR, resource_type VARCHAR NOT NULL,
            sku_id VARCHAR, consumed_quantity {MONEY_SQL}, consumed_unit VARCHAR, gpu_hours {MONEY_SQL} NOT NULL,
            tags VARCHAR, project VARCHAR NOT NULL, team VARCHAR NOT NULL, model_version VARCHAR NOT NULL,
            task_type VARCHAR NOT NULL, stage VARCHAR NOT NULL, run_id VARCHAR)""",
        """CREATE TABLE jobs (
            row_key VARCHAR NOT NULL, file VARCHAR NOT NULL, source VARCHAR NOT NULL, run_id VARCHAR NOT NULL,
            name VARCHAR, project VARCHAR NOT NULL, team VARCHAR NOT NULL, model_version VARCHAR NOT NULL,
            task_type VARCHAR NOT NULL, stage VARCHAR NOT NULL, gpu_type VARCHAR, gpu_count INTEGER,
            start_at TIMESTAMP, end_at TIMESTAMP, status VARCHAR NOT NULL, gpu_hours DOUBLE,
            params_b DOUBLE, tokens_b DOUBLE, config VARCHAR, eval_score DOUBLE, metrics VARCHAR)""",
    )),
    (2, "a log of imported files", (
        """CREATE TABLE imports (file VARCHAR NOT NULL, kind VARCHAR NOT NULL, imported_rows BIGINT NOT NULL,
            duplicate_rows BIGINT NOT NULL, imported_at TIMESTAMP NOT NULL)""",
    )),
)
SCHEMA_VERSION = MIGRATIONS[-1][0]


def default_path() -> Path:
    """The store file when ``--db`` is not given: under the user's data directory (XDG)."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "costcore" / "actuals.duckdb"


def is_url(db: str | None) -> bool:
    """True for an Ibis connection URL (``scheme://...``, or ``pyspark`` for a Spark session)."""
    return bool(db) and ("://" in str(db) or str(db) == "pyspark")


@dataclass
class Store:
    """An open store. ``duck`` is the DuckDB connection of a file store (None for a warehouse URL);
    ``backend`` the Ibis backend the review queries run on; ``cost_source`` the table of billing
    lines (``cost_rows``, or a warehouse's FOCUS export named by ``focus_table``)."""
    where: str
    duck: object = None
    backend: object = None
    focus_table: str | None = None
    _cache: dict = field(default_factory=dict)

    def cost_table(self):
        """The billing lines as an Ibis table with the columns of ``cost_rows``."""
        if "cost" not in self._cache:
            if self.focus_table:
                from costcore.actuals import queries
                self._cache["cost"] = queries.focus_view(self.backend.table(self.focus_table))
            else:
                self._cache["cost"] = self.backend.table(COST_TABLE)
        return self._cache["cost"]

    def jobs_table(self):
        """The job records as an Ibis table (an empty one when the warehouse has none)."""
        if "jobs" not in self._cache:
            if JOBS_TABLE in self.backend.list_tables():
                self._cache["jobs"] = self.backend.table(JOBS_TABLE)
            else:
                from costcore.actuals import queries
                self._cache["jobs"] = queries.empty_jobs()
        return self._cache["jobs"]

    def close(self) -> None:
        if self.duck is not None:
            self.duck.close()
        elif self.backend is not None and hasattr(self.backend, "disconnect"):
            self.backend.disconnect()


def schema_version(duck) -> int:
    """The schema version of an open DuckDB file (0 for a new, empty file)."""
    has = duck.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = 'schema_version'"
                       ).fetchone()[0]
    if not has:
        return 0
    return int(duck.execute("SELECT coalesce(max(version), 0) FROM schema_version").fetchone()[0])


def migrate(duck, upto: int = SCHEMA_VERSION) -> list[int]:
    """Apply the migrations a file lacks, each in its own transaction; return the versions applied.

    Raises ScenarioError for a file written by a newer version of this code.
    """
    current = schema_version(duck)
    if current > SCHEMA_VERSION:
        raise ScenarioError("db", f"the store has schema version {current}, newer than this program's "
                                  f"{SCHEMA_VERSION}; upgrade costcore to read it")
    applied = []
    for version, note, statements in MIGRATIONS:
        if version <= current or version > upto:
            continue
        duck.execute("BEGIN TRANSACTION")
        try:
            duck.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL, "
                         "applied_at TIMESTAMP NOT NULL, note VARCHAR)")
            for sql in statements:
                duck.execute(sql)
            duck.execute("INSERT INTO schema_version VALUES (?, now()::TIMESTAMP, ?)", [version, note])
            duck.execute("COMMIT")
        except Exception:
            duck.execute("ROLLBACK")
            raise
        applied.append(version)
    return applied


def connect_duckdb(path, read_only: bool = False):
    """A DuckDB connection to a store file (UTC session time zone), migrated to the current schema."""
    import duckdb
    p = Path(path).expanduser()
    if read_only and not p.exists():
        raise ScenarioError("db", f"no actuals store at {p} (import files first: python -m costcore actuals "
                                  "import FILE)")
    if not read_only:
        p.parent.mkdir(parents=True, exist_ok=True)
    try:
        duck = duckdb.connect(str(p), read_only=read_only)
    except duckdb.Error as err:
        raise ScenarioError("db", f"cannot open {p} as a DuckDB store: {err}") from None
    duck.execute("SET TimeZone = 'UTC'")
    if not read_only:
        migrate(duck)
    elif schema_version(duck) != SCHEMA_VERSION:
        raise ScenarioError("db", f"the store {p} has schema version {schema_version(duck)}; open it once "
                                  f"for writing (actuals import) to migrate it to {SCHEMA_VERSION}")
    return duck


def _shown_url(url) -> str:
    """A database URL as a message shows it: its password hidden (postgres://user:***@host/db)."""
    return fmt.one_line(re.sub(r"(//[^:/@]+:)[^@/]*@", r"\1***@", str(url)), 200)


def _said(err: Exception) -> str:
    """A driver's error on one line: its line breaks as spaces ("Connection refused??Is the server running")."""
    return fmt.one_line(" ".join(str(err).split()), 300)


def open_store(db: str | os.PathLike | None = None, read_only: bool = False, focus_table: str | None = None,
               must_exist: bool = False) -> Store:
    """Open the store: a DuckDB file (default ``default_path()``) or an Ibis URL of a warehouse.

    ``focus_table``: a warehouse (or DuckDB) table holding a raw FOCUS export, read through
    :func:`costcore.actuals.queries.focus_view` instead of ``cost_rows``. ``must_exist``: a DuckDB file named
    that is not there is refused (a report on a mistyped path created an empty store and reported $0).
    """
    import ibis
    if is_url(db):
        try:
            backend = ibis.connect(str(db))
        except Exception as err:  # noqa: BLE001 - every backend raises its own errors
            raise ScenarioError("db", f"cannot connect to {_shown_url(db)}: {_said(err)}") from None
        return Store(where=str(db), backend=backend, focus_table=focus_table)
    path = Path(db).expanduser() if db else default_path()
    if must_exist and db and not path.is_file():
        raise ScenarioError("db", f"no store at {fmt.one_line(str(db), 200)}: import bills or job records into it "
                                  "first (python -m costcore actuals import --db PATH FILE), or name the store that "
                                  "holds them")
    duck = connect_duckdb(path, read_only=read_only)
    return Store(where=str(path), duck=duck, backend=ibis.duckdb.from_connection(duck), focus_table=focus_table)


def copy_to(src: Store, url: str) -> Store:
    """Copy a DuckDB store's tables (schema_version, cost_rows, jobs, imports) into the database at
    ``url`` (replacing them there) and return that database opened as a store. Types are kept:
    money stays DECIMAL(38, 12) (NUMERIC in PostgreSQL)."""
    import ibis
    if src.duck is None:
        raise ScenarioError("db", "copy from a DuckDB store file")
    try:
        backend = ibis.connect(url)
    except Exception as err:  # noqa: BLE001 - every backend raises its own errors
        raise ScenarioError("db", f"cannot connect to {_shown_url(url)}: {_said(err)}") from None
    for name in ("schema_version", COST_TABLE, JOBS_TABLE, "imports"):
        table = src.backend.table(name)
        if name in backend.list_tables():
            backend.drop_table(name)
        backend.create_table(name, table.to_pyarrow())
    return Store(where=url, backend=backend)
