"""A real PostgreSQL server for tests, in a temporary folder, on 127.0.0.1.

``initdb`` makes a cluster whose one role, ``syps``, logs in over TCP with a password
(scram-sha-256, the server's default); ``pg_ctl`` starts it on a free port, its socket in the
same folder; it is stopped by the postmaster's own process id. PostgreSQL refuses to run as
root, so as root both run as the ``postgres`` user (``runuser -u postgres --``), in a folder that
user owns.

Where PostgreSQL is not installed the tests that need it skip, saying how to run them; with
``SYPS_PG_TESTS=1`` (``.ci/run`` sets it) they fail instead, so CI cannot pass without them.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from katan import free_port

USER = "syps"
HOW = (
    "PostgreSQL 15 is not installed (no initdb/pg_ctl on PATH): `apt-get install postgresql` "
    "(Debian), put its bin/ on PATH, and run python -m pytest -m slow {}"
)


@dataclass
class Postgres:
    folder: Path
    port: int
    password: str
    pid: int

    def url(self, database: str = USER, password: str | None = None) -> str:
        pw = self.password if password is None else password
        return f"postgresql://{USER}:{pw}@127.0.0.1:{self.port}/{database}"

    def createdb(self, name: str) -> str:
        """A new, empty database; its URL."""
        _run(self, ["createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", USER, name])
        return self.url(name)


def _binaries() -> dict[str, str] | None:
    found = {name: shutil.which(name) for name in ("initdb", "pg_ctl", "createdb")}
    if all(found.values()):
        return {k: str(v) for k, v in found.items()}
    for bin_dir in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if all((bin_dir / n).exists() for n in found):
            return {n: str(bin_dir / n) for n in found}
    return None


def _as_owner(cmd: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd


def _run(pg: Postgres | None, cmd: list[str], env: dict[str, str] | None = None) -> None:
    bins = _binaries()
    assert bins is not None
    full = [bins.get(cmd[0], cmd[0]), *cmd[1:]]
    extra = {"PGPASSWORD": pg.password} if pg else {}
    proc = subprocess.run(
        _as_owner(full), capture_output=True, text=True, env={**os.environ, **extra, **(env or {})}
    )
    if proc.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr}")


def start_postgres(where: str, fsync: bool = False) -> Postgres:
    """A running server in a new folder, or a skip (a failure under SYPS_PG_TESTS=1) where
    PostgreSQL is not installed; ``where`` names the tests for the skip's line. The tests' server
    does not sync to disk (``fsync=off``); a benchmark's does, as a lab's server would."""
    if _binaries() is None:
        if os.environ.get("SYPS_PG_TESTS") == "1":
            pytest.fail("SYPS_PG_TESTS=1 but " + HOW.format(where), pytrace=False)
        pytest.skip(HOW.format(where))
    folder = Path(tempfile.mkdtemp(prefix="syps-pg-", dir="/tmp"))
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres", "postgres")
    data, pwfile = folder / "data", folder / "pw"
    password = "pg-" + secrets.token_hex(12)
    pwfile.write_text(password + "\n")
    if os.geteuid() == 0:
        shutil.chown(pwfile, "postgres", "postgres")
    pwfile.chmod(0o600)
    _run(None, ["initdb", "-D", str(data), "-U", USER, "--pwfile", str(pwfile),
                "--auth=scram-sha-256", "--no-sync", "-E", "UTF8", "--locale=C"])  # fmt: skip
    port = free_port()
    options = (
        f"-k {folder} -p {port} -c listen_addresses=127.0.0.1 -c fsync={'on' if fsync else 'off'}"
    )
    _run(None, ["pg_ctl", "-D", str(data), "-o", options, "-l", str(folder / "log"), "-w",
                "start"])  # fmt: skip
    pid = int((data / "postmaster.pid").read_text().split()[0])
    pg = Postgres(folder, port, password, pid)
    pg.createdb(USER)
    return pg


def stop_postgres(pg: Postgres) -> None:
    """Fast shutdown by the postmaster's pid (SIGINT), then the folder removed."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pg.pid, signal.SIGINT)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.kill(pg.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    shutil.rmtree(pg.folder, ignore_errors=True)
