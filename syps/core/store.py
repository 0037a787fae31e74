"""Content-addressed store of generations and judge verdicts.

DVC reruns a whole stage when any dependency changes; the store makes that rerun cost only the
prompts that changed. A record's key is the sha256 of everything that determines it, so an
edit to one cue misses only that cue's prompts, and reverting the edit hits again.

SQLite in WAL mode: each ``put_many`` is one transaction, durable once it returns, so a crash
loses at most the batch in flight; several processes (``dvc queue start -j N``) may read and
write at once. The store is a cache: deleting it only costs regeneration.

A damaged store is an error, never a silent miss: SQLite checks the header and the page count
against the file size when a store is opened (a truncated file fails there), every later
"malformed" error is re-raised naming the file, and a record that does not decode names its
key. ``PRAGMA quick_check`` is not run on open: it reads the whole file (0.36 s warm, 3.3 s
cold for 100k records, 470 MB). A zero-byte file is what SQLite calls an empty database, and
the store starts afresh in it. The -wal and -shm files a killed process leaves behind are not
damage: SQLite replays the committed transactions in them on the next open.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from syps.core.io import InputError, canonical_json, sha256_text

_SCHEMA = """
CREATE TABLE IF NOT EXISTS records (
    key TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    value TEXT NOT NULL,
    created REAL NOT NULL
) WITHOUT ROWID
"""
# PRAGMA table_info(records) of that schema: (name, type, notnull, pk) per column.
_COLUMNS = [
    ("key", "TEXT", 1, 1),
    ("kind", "TEXT", 1, 0),
    ("value", "TEXT", 1, 0),
    ("created", "REAL", 1, 0),
]
# Primary result codes that mean the file itself is damaged or is no database at all.
_SQLITE_CORRUPT, _SQLITE_NOTADB = 11, 26
# Keys one look-up binds at once (SQLite caps the number of bound parameters).
CHUNK = 500
# A stored record as it is: key, kind, its value's canonical JSON, when it was first stored.
Row = tuple[str, str, str, float]


def as_rows(kind: str, records: Iterable[tuple[str, Mapping[str, Any]]]) -> list[Row]:
    """(key, record) pairs as the rows both stores keep: the record's canonical JSON, stored
    now."""
    now = time.time()
    return [(k, kind, canonical_json(dict(v)), now) for k, v in records]


class StoreError(InputError):
    """The response store cannot be used; the message names the file and how to recover."""


def _recovery(path: Path) -> str:
    # Moving the main file alone is enough: SQLite deletes a -wal it finds beside a new, empty
    # database instead of replaying it (tests/test_faults.py checks this).
    return (
        f"The store is only a cache of model outputs, and responses already in out/ are "
        f"unaffected: move it aside (mv {path} {path}.corrupt) and rerun; what is missing is "
        f"generated again."
    )


def generation_key(
    identity: Mapping[str, str],
    messages_json: str,
    max_new_tokens: int,
    sampling: Mapping[str, float | int],
    replicate: int = 0,
) -> str:
    """Key of one generation: backend and model identity, exact messages, every parameter that
    changes the output, and the replicate index.

    ``messages_json`` is the conversation's one encoding (``messages.conversation_json``): the
    bytes conversations.parquet holds, the response row stores and the backend is handed. The
    key's document holds it as a string, neither decoded nor encoded again, so the key is a
    hash over exactly those bytes (nesting the messages as a JSON value would mean a second
    encoding of them, and a new key for every response already in a store)."""
    return sha256_text(
        canonical_json(
            {
                "kind": "generation",
                "model": dict(identity),
                "messages": messages_json,
                "max_new_tokens": max_new_tokens,
                "sampling": dict(sampling),
                "replicate": replicate,
            }
        )
    )


def judge_key(identity: Mapping[str, str], template_sha256: str, messages_json: str) -> str:
    """Key of one judge verdict: judge model, judge template, and the exact judge prompt (which
    holds the judged situation and response)."""
    return sha256_text(
        canonical_json(
            {
                "kind": "judge",
                "model": dict(identity),
                "template": template_sha256,
                "messages": messages_json,
            }
        )
    )


class Store:
    """A key -> JSON record table in one SQLite file."""

    def __init__(self, path: Path, timeout_s: float = 60.0):
        self.path = path
        self.location = str(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with self._errors():
            self._db = sqlite3.connect(path, timeout=timeout_s, isolation_level=None)
        try:
            with self._errors():
                # Checked before anything is written: a foreign database is left as it was.
                tables = self._tables()
                self._db.execute("PRAGMA journal_mode=WAL")
                # NORMAL is durable across process crashes in WAL mode (only an OS crash may
                # lose the last commits), at a fraction of FULL's fsync cost.
                self._db.execute("PRAGMA synchronous=NORMAL")
                if not tables:
                    self._db.execute(_SCHEMA)
        except BaseException:
            self._db.close()
            raise

    def _tables(self) -> list[str]:
        """The store's tables; raises unless they are none (a new store) or exactly ours."""
        tables = [
            name
            for (name,) in self._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            if not name.startswith("sqlite_")  # SQLite's own (sqlite_stat1, ...)
        ]
        if not tables:
            return tables
        columns = [
            (name, type_, notnull, pk)
            for _, name, type_, notnull, _, pk in self._db.execute("PRAGMA table_info(records)")
        ]
        if tables == ["records"] and columns == _COLUMNS:
            return tables
        found = (
            f"tables {tables}" if tables != ["records"] else f"columns {[c[0] for c in columns]}"
        )
        raise StoreError(
            f"{self.path}: not a syps response store ({found}; expected one table, records, with "
            f"columns key, kind, value, created). {_recovery(self.path)}"
        )

    @contextmanager
    def _errors(self) -> Iterator[None]:
        """Re-raise SQLite's errors about this file as StoreError, naming it."""
        try:
            yield
        except sqlite3.DatabaseError as e:
            code = getattr(e, "sqlite_errorcode", None)
            if code is not None and code & 0xFF in (_SQLITE_CORRUPT, _SQLITE_NOTADB):
                raise StoreError(
                    f"{self.path}: the response store is corrupt ({e}). {_recovery(self.path)}"
                ) from None
            if isinstance(e, sqlite3.OperationalError):  # locked past the timeout, disk full...
                raise StoreError(f"{self.path}: cannot use the response store ({e})") from None
            raise  # misuse of the API (ProgrammingError, IntegrityError) is a bug, not input

    def get_many(self, keys: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The stored records among ``keys``; absent keys are simply missing from the result."""
        found: dict[str, dict[str, Any]] = {}
        unique = list(dict.fromkeys(keys))
        for start in range(0, len(unique), CHUNK):
            chunk = unique[start : start + CHUNK]
            marks = ",".join("?" * len(chunk))
            with self._errors():
                # As bytes: text that is not UTF-8 is then a corrupt record naming its key.
                rows = self._db.execute(
                    f"SELECT key, CAST(value AS BLOB) FROM records WHERE key IN ({marks})", chunk
                ).fetchall()
            for key, value in rows:
                found[key] = self._decode(key, value)
        return found

    def _decode(self, key: str, value: bytes) -> dict[str, Any]:
        try:
            record = json.loads(value.decode("utf-8"))
        except ValueError:  # not UTF-8, or not JSON
            record = None
        if not isinstance(record, dict):
            raise StoreError(
                f"{self.path}: record {key} is corrupt (not a JSON object). {_recovery(self.path)}"
            )
        return record

    def put_many(self, kind: str, records: Iterable[tuple[str, Mapping[str, Any]]]) -> None:
        """Store records in one transaction; a key already present keeps its first value."""
        self.put_rows(as_rows(kind, records))

    def put_rows(self, rows: Sequence[Row]) -> int:
        """Store (key, kind, value, created) rows as they are, in one transaction; a key
        already present keeps its first value. Returns how many were new."""
        if not rows:
            return 0
        with self._errors():
            before = self._db.total_changes
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany(
                    "INSERT OR IGNORE INTO records (key, kind, value, created) VALUES (?, ?, ?, ?)",
                    rows,
                )
                self._db.execute("COMMIT")
            except BaseException:
                # SQLite may have rolled back already (on a corrupt page, say).
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise
        return self._db.total_changes - before

    def rows(self, batch: int = CHUNK) -> Iterator[list[Row]]:
        """Every record as (key, kind, value, created), in key order, ``batch`` at a time."""
        after = ""
        while True:
            with self._errors():
                got = self._db.execute(
                    "SELECT key, kind, CAST(value AS BLOB), created FROM records WHERE key > ? "
                    "ORDER BY key LIMIT ?",
                    (after, batch),
                ).fetchall()
            if not got:
                return
            yield [(k, kd, self._text(k, v), float(c)) for k, kd, v, c in got]
            after = got[-1][0]

    def values(self, keys: Sequence[str]) -> dict[str, tuple[str, str]]:
        """(kind, value as stored) of each stored key among ``keys``."""
        out: dict[str, tuple[str, str]] = {}
        for start in range(0, len(keys), CHUNK):
            chunk = list(keys[start : start + CHUNK])
            with self._errors():
                got = self._db.execute(
                    "SELECT key, kind, CAST(value AS BLOB) FROM records WHERE key IN "
                    f"({','.join('?' * len(chunk))})",
                    chunk,
                ).fetchall()
            out.update({k: (kd, self._text(k, v)) for k, kd, v in got})
        return out

    def _text(self, key: str, value: bytes) -> str:
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            raise StoreError(
                f"{self.path}: record {key} is corrupt (not UTF-8). {_recovery(self.path)}"
            ) from None

    def count(self, kind: str | None = None) -> int:
        with self._errors():
            if kind is None:
                (n,) = self._db.execute("SELECT COUNT(*) FROM records").fetchone()
            else:
                (n,) = self._db.execute(
                    "SELECT COUNT(*) FROM records WHERE kind = ?", (kind,)
                ).fetchone()
        return int(n)

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
