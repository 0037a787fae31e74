"""Which response store: the SQLite file (``syps.core.store.Store``) or a PostgreSQL database
(``syps.core.pgstore.PostgresStore``), opened from one location (``syps.core.runs.store_location``),
the interface both give the pipeline, and ``syps store copy`` between any two.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from typing import Protocol as TypingProtocol

from syps.core.pgstore import PostgresStore
from syps.core.store import CHUNK, Row, Store, StoreError

# A store URL on PostgreSQL; any other location is an SQLite file.
POSTGRES_SCHEMES = ("postgresql://", "postgres://")


class ResponseStore(TypingProtocol):
    """What the pipeline asks of a store, SQLite (``Store``) or PostgreSQL
    (``syps.core.pgstore.PostgresStore``): the same keys, records and semantics in both."""

    location: str  # what messages name it by (a URL without its password)

    def get_many(self, keys: Sequence[str]) -> dict[str, dict[str, Any]]: ...
    def put_many(self, kind: str, records: Iterable[tuple[str, Mapping[str, Any]]]) -> None: ...
    def put_rows(self, rows: Sequence[Row]) -> int: ...
    def rows(self, batch: int = CHUNK) -> Iterator[list[Row]]: ...
    def values(self, keys: Sequence[str]) -> dict[str, tuple[str, str]]: ...
    def count(self, kind: str | None = None) -> int: ...
    def close(self) -> None: ...
    def __enter__(self) -> ResponseStore: ...
    def __exit__(self, *exc: object) -> None: ...


def is_store_url(location: str) -> bool:
    """Whether ``location`` names a PostgreSQL database rather than an SQLite file."""
    return location.startswith(POSTGRES_SCHEMES)


def open_store(location: str | Path, timeout_s: float = 60.0) -> ResponseStore:
    """The store at ``location``: a ``postgresql://`` URL (``syps.core.pgstore``, which imports
    the driver), else an SQLite file."""
    text = str(location)
    if is_store_url(text):
        return PostgresStore(text, timeout_s)
    return Store(Path(location), timeout_s)


@dataclass(frozen=True)
class Copied:
    """What ``copy_store`` did: the source's records by kind, how many were new in the
    destination, how many it held already with the same record, the keys it holds with another
    record (its first answer, kept), and how many records it holds now."""

    kinds: dict[str, int]
    new: int
    same: int
    differ: list[str]
    total: int

    def line(self, src: str, dst: str) -> str:
        kinds = ", ".join(f"{k} {n:,}" for k, n in sorted(self.kinds.items()))
        read = sum(self.kinds.values())
        return (
            f"copied {src} -> {dst}: {read:,} records ({kinds or 'none'}), {self.new:,} new, "
            f"{self.same:,} there already with the same record, {len(self.differ):,} with "
            f"another (kept); every key of the source is in the destination, which holds "
            f"{self.total:,} now"
        )


def copy_store(src: ResponseStore, dst: ResponseStore, batch: int = CHUNK) -> Copied:
    """Every record of ``src`` into ``dst``, a batch per transaction, then read back: each key
    must be in ``dst``, with the same kind and value unless ``dst`` held it already (a key keeps
    its first record, so such a key is listed, never overwritten)."""
    if src.location == dst.location:
        raise StoreError(f"{src.location}: the source and the destination are the same store")
    kinds: dict[str, int] = {}
    new = same = 0
    differ: list[str] = []
    for rows in src.rows(batch):
        before = dst.values([r[0] for r in rows])
        added = dst.put_rows([r for r in rows if r[0] not in before])
        after = dst.values([r[0] for r in rows])
        for key, kind, value, _ in rows:
            kinds[kind] = kinds.get(kind, 0) + 1
            if key not in after:
                raise StoreError(f"{dst.location}: record {key} is missing after the copy")
            if key in before:
                if before[key] == (kind, value):
                    same += 1
                else:
                    differ.append(key)
            elif after[key] != (kind, value):  # another writer stored it first, meanwhile
                differ.append(key)
        new += added
    return Copied(kinds, new, same, differ, dst.count())
