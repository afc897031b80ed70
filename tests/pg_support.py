"""A throwaway PostgreSQL server for the actuals report tests (not a test module).

``postgres_server(tmp)`` runs Debian's PostgreSQL binaries (``initdb``, ``pg_ctl``; found on PATH or
under /usr/lib/postgresql/<version>/bin): a fresh cluster in a temporary directory, listening on a
free port of 127.0.0.1 with its socket in that directory, trust authentication, stopped (and its
directory removed) when the block ends. As root it runs as the ``postgres`` OS user
(``runuser -u postgres --``): PostgreSQL refuses to run as root.

``scripts/test.sh`` installs Debian's ``postgresql`` package when the binaries are missing. Without
them the PostgreSQL tests skip locally but fail under CI (``CI`` set), like the browser tests.
"""
from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from server_support import NEVER_S  # the one wait limit of the suite (not a speed)


class PostgresUnavailable(RuntimeError):
    """The binaries are missing or the server did not start; the message says which."""


def pg_bindir() -> str | None:
    """Directory holding initdb and pg_ctl (PATH first, then Debian's versioned directories, newest first)."""
    found = shutil.which("pg_ctl")
    if found and shutil.which("initdb"):
        return str(Path(os.path.realpath(found)).parent)
    for d in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(Path(p).parent.name)
                    if Path(p).parent.name.isdigit() else 0, reverse=True):
        if Path(d, "pg_ctl").exists() and Path(d, "initdb").exists():
            return d
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _as_db_user(cmd: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return cmd
    if shutil.which("runuser") is None:
        raise PostgresUnavailable("running as root but runuser is missing (PostgreSQL refuses to run as root)")
    return ["runuser", "-u", "postgres", "--"] + cmd


def _run(cmd: list[str], what: str) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=NEVER_S)
    if proc.returncode != 0:
        raise PostgresUnavailable(f"{what} failed ({proc.returncode}): {(proc.stderr or proc.stdout)[-1500:]}")


@contextlib.contextmanager
def postgres_server():
    """Yield a ``postgres://`` URL of a fresh, empty database ``actuals`` on a server of its own."""
    bindir = pg_bindir()
    if bindir is None:
        raise PostgresUnavailable("no initdb/pg_ctl on PATH or under /usr/lib/postgresql/*/bin "
                                  "(Debian: apt-get install postgresql; scripts/test.sh does it)")
    root = Path(tempfile.mkdtemp(prefix="costcore-pg-"))
    data, log = root / "data", root / "server.log"
    user = "postgres" if os.geteuid() == 0 else None
    if user:
        shutil.chown(root, user=user)
        os.chmod(root, 0o700)
    port = _free_port()
    ctl = [f"{bindir}/pg_ctl", "-D", str(data)]
    started = False
    try:
        _run(_as_db_user([f"{bindir}/initdb", "-D", str(data), "-A", "trust", "-U", "postgres", "-E", "UTF8",
                          "--no-sync"]), "initdb")
        opts = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off"
        _run(_as_db_user(ctl + ["-l", str(log), "-o", opts, "-w", "-t", "60", "start"]), "pg_ctl start")
        started = True
        _run(_as_db_user([f"{bindir}/createdb", "-h", str(root), "-p", str(port), "-U", "postgres", "actuals"]),
             "createdb")
        yield f"postgres://postgres@127.0.0.1:{port}/actuals"
    finally:
        if started:
            with contextlib.suppress(Exception):
                _run(_as_db_user(ctl + ["-m", "fast", "-w", "stop"]), "pg_ctl stop")
        shutil.rmtree(root, ignore_errors=True)


def require_postgres_or_skip(err: Exception):
    """Skip locally; fail under CI, which must run the PostgreSQL tests."""
    import pytest
    if os.environ.get("CI"):
        pytest.fail(f"CI is set but the PostgreSQL server cannot start: {err}", pytrace=False)
    pytest.skip(f"PostgreSQL unavailable: {err}")
