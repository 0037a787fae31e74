"""The response store on PostgreSQL: the lab's one store for many clones and machines.

Same keys, same records and the same semantics as the SQLite store (``syps.core.store``): one
table ``records(key, kind, value, created)``, a key already present keeps its first value
(``ON CONFLICT DO NOTHING``), and each ``put_many`` is one transaction, durable once it returns,
so a writer killed with ``kill -9`` loses only the batch in flight. Any number of processes on
any number of machines may read and write at once: PostgreSQL serialises the inserts of one key,
and the first committed wins.

Where the store is, is configuration and not a param (where an answer is kept never changes
it): ``SYPS_STORE=postgresql://user:password@host:port/database`` (``syps.core.runs``). The
password is never printed: every message names the store by :func:`redact`'s form of the URL,
and an error of the driver is shown with the password cut out of it.

psycopg (3) is imported here alone, when a PostgreSQL store is opened.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from syps.core.store import Row, StoreError, as_rows
from syps.core.urls import redact, secrets_of

# Keys a look-up sends at once (one array parameter, so no cap on bound parameters as in SQLite).
CHUNK = 10_000

_SCHEMA = """
CREATE TABLE IF NOT EXISTS records (
    key TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    value TEXT NOT NULL,
    created DOUBLE PRECISION NOT NULL
)
"""
# Two processes creating the table at once would both pass IF NOT EXISTS and one would fail on
# the catalogue's unique index: the creation is serialised by this advisory lock (any constant
# both agree on; "syps" in ASCII).
_LOCK = 0x73797073
# information_schema.columns of that table: (name, data type, nullable) per column.
_COLUMNS = [
    ("key", "text", "NO"),
    ("kind", "text", "NO"),
    ("value", "text", "NO"),
    ("created", "double precision", "NO"),
]


class PostgresStore:
    """A key -> JSON record table in one PostgreSQL database (the interface of ``Store``)."""

    def __init__(self, url: str, timeout_s: float = 60.0):
        self.url = url
        self.location = redact(url)
        try:
            import psycopg  # heavy: ~0.27 s with libpq, and only this store needs it
        except ImportError:  # pragma: no cover - psycopg is a dependency of syps
            raise StoreError(
                f"{self.location}: a PostgreSQL store needs psycopg (pip install 'psycopg[binary]')"
            ) from None
        self._psycopg = psycopg
        with self._errors("cannot connect"):
            self._db = psycopg.connect(url, autocommit=True, connect_timeout=int(timeout_s))
        try:
            with self._errors("cannot use the store"):
                self._db.execute(f"SET statement_timeout = {int(timeout_s * 1000)}")
                self._create()
        except BaseException:
            self._db.close()
            raise

    def _create(self) -> None:
        """The table, made when the database has none; a database whose ``records`` table has
        other columns is refused and left as it was."""
        with self._db.transaction():
            self._db.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK,))
            columns = self._db.execute(
                "SELECT column_name, data_type, is_nullable FROM information_schema.columns "
                "WHERE table_schema = current_schema() AND table_name = 'records' "
                "ORDER BY ordinal_position"
            ).fetchall()
            if not columns:
                self._db.execute(_SCHEMA)
            elif [tuple(c) for c in columns] != _COLUMNS:
                raise StoreError(
                    f"{self.location}: not a syps response store (table records has columns "
                    f"{[c[0] for c in columns]}; expected key, kind, value, created)"
                )

    @contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        """Re-raise the driver's errors as StoreError naming the store, the password cut out."""
        try:
            yield
        except self._psycopg.Error as e:
            message = " ".join(str(e).split())
            for s in secrets_of(self.url):
                message = message.replace(s, "***")
            raise StoreError(f"{self.location}: {what} ({message})") from None

    def get_many(self, keys: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The stored records among ``keys``; absent keys are simply missing from the result."""
        found: dict[str, dict[str, Any]] = {}
        unique = list(dict.fromkeys(keys))
        for start in range(0, len(unique), CHUNK):
            with self._errors("cannot read the store"):
                rows = self._db.execute(
                    "SELECT key, value FROM records WHERE key = ANY(%s)",
                    (unique[start : start + CHUNK],),
                ).fetchall()
            for key, value in rows:
                found[key] = self._decode(key, value)
        return found

    def _decode(self, key: str, value: str) -> dict[str, Any]:
        try:
            record = json.loads(value)
        except ValueError:
            record = None
        if not isinstance(record, dict):
            raise StoreError(f"{self.location}: record {key} is corrupt (not a JSON object)")
        return record

    def put_many(self, kind: str, records: Iterable[tuple[str, Mapping[str, Any]]]) -> None:
        """Store records in one transaction; a key already present keeps its first value."""
        self.put_rows(as_rows(kind, records))

    def put_rows(self, rows: Sequence[Row]) -> int:
        """Store (key, kind, value, created) rows as they are, in one transaction; a key
        already present keeps its first value. Returns how many were new."""
        if not rows:
            return 0
        with (
            self._errors("cannot write to the store"),
            self._db.transaction(),
            self._db.cursor() as cur,
        ):
            # One statement for the batch (an array per column), not one per row.
            cur.execute(
                "INSERT INTO records (key, kind, value, created) "
                "SELECT * FROM unnest(%s::text[], %s::text[], %s::text[], %s::float8[]) "
                "ON CONFLICT (key) DO NOTHING",
                [list(c) for c in zip(*rows, strict=True)],
            )
            return int(cur.rowcount)

    def count(self, kind: str | None = None) -> int:
        with self._errors("cannot read the store"):
            if kind is None:
                row = self._db.execute("SELECT COUNT(*) FROM records").fetchone()
            else:
                row = self._db.execute(
                    "SELECT COUNT(*) FROM records WHERE kind = %s", (kind,)
                ).fetchone()
        return int(row[0]) if row else 0

    def rows(self, batch: int = CHUNK) -> Iterator[list[Row]]:
        """Every record as (key, kind, value, created), in key order, ``batch`` at a time."""
        after = ""
        while True:
            with self._errors("cannot read the store"):
                got = self._db.execute(
                    "SELECT key, kind, value, created FROM records WHERE key > %s "
                    "ORDER BY key LIMIT %s",
                    (after, batch),
                ).fetchall()
            if not got:
                return
            yield [(str(k), str(kd), str(v), float(c)) for k, kd, v, c in got]
            after = str(got[-1][0])

    def values(self, keys: Sequence[str]) -> dict[str, tuple[str, str]]:
        """(kind, value as stored) of each stored key among ``keys``."""
        out: dict[str, tuple[str, str]] = {}
        for start in range(0, len(keys), CHUNK):
            with self._errors("cannot read the store"):
                got = self._db.execute(
                    "SELECT key, kind, value FROM records WHERE key = ANY(%s)",
                    (list(keys[start : start + CHUNK]),),
                ).fetchall()
            out.update({str(k): (str(kd), str(v)) for k, kd, v in got})
        return out

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> PostgresStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
