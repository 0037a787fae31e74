"""Content-addressed store of generations and judge verdicts.

DVC reruns a whole stage when any dependency changes; the store makes that rerun cost only the
prompts that changed. A record's key is the sha256 of everything that determines it, so an
edit to one cue misses only that cue's prompts, and reverting the edit hits again.

SQLite in WAL mode: each ``put_many`` is one transaction, durable once it returns, so a crash
loses at most the batch in flight; several processes (``dvc queue start -j N``) may read and
write at once. The store is a cache: deleting it only costs regeneration.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from syps.io import InputError, canonical_json, sha256_text

_SCHEMA = """
CREATE TABLE IF NOT EXISTS records (
    key TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    value TEXT NOT NULL,
    created REAL NOT NULL
) WITHOUT ROWID
"""


def generation_key(
    identity: Mapping[str, str],
    messages_json: str,
    max_new_tokens: int,
    sampling: Mapping[str, float | int],
    replicate: int = 0,
) -> str:
    """Key of one generation: backend and model identity, exact messages, every parameter that
    changes the output, and the replicate index."""
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
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = sqlite3.connect(path, timeout=timeout_s, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            # NORMAL is durable across process crashes in WAL mode (only an OS crash may lose
            # the last commits), at a fraction of FULL's fsync cost.
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(_SCHEMA)
        except sqlite3.DatabaseError as e:
            raise InputError(
                f"{path}: not a usable response store ({e}); it is only a cache: delete it "
                f"(and its -wal/-shm files) to start afresh, at the cost of regenerating"
            ) from None

    def get_many(self, keys: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The stored records among ``keys``; absent keys are simply missing from the result."""
        found: dict[str, dict[str, Any]] = {}
        unique = list(dict.fromkeys(keys))
        for start in range(0, len(unique), 500):  # SQLite caps the number of bound parameters
            chunk = unique[start : start + 500]
            marks = ",".join("?" * len(chunk))
            rows = self._db.execute(
                f"SELECT key, value FROM records WHERE key IN ({marks})", chunk
            ).fetchall()
            for key, value in rows:
                try:
                    found[key] = json.loads(value)
                except json.JSONDecodeError:
                    raise InputError(
                        f"{self.path}: record {key} is corrupt; delete the store to rebuild it"
                    ) from None
        return found

    def put_many(self, kind: str, records: Iterable[tuple[str, Mapping[str, Any]]]) -> None:
        """Store records in one transaction; a key already present keeps its first value."""
        now = time.time()
        rows = [(k, kind, canonical_json(dict(v)), now) for k, v in records]
        if not rows:
            return
        self._db.execute("BEGIN IMMEDIATE")
        try:
            self._db.executemany(
                "INSERT OR IGNORE INTO records (key, kind, value, created) VALUES (?, ?, ?, ?)",
                rows,
            )
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise

    def count(self, kind: str | None = None) -> int:
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
