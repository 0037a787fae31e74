"""Atomic file writes and checked reads.

Every output is written to a temporary file beside its target and renamed into place, so a crash
or an error never leaves a partial file that looks complete.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import re
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd


class InputError(ValueError):
    """Bad input data; the message names the file, and the row or key where it can."""


class LintError(InputError):
    """A protocol's conversations vary in more than their declared factors (or a cue); the
    message is the lint report, one line per violation. ``report``, where the protocol gives
    one, is its full report as data (every violation, what was checked): the variants stage
    writes it to lint.json, which the message may refer to for what it leaves out."""

    def __init__(self, message: str, report: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.report = report


def atomic_write(path: str | Path, write: Callable[[Path], object]) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(Path(tmp))
        # mkstemp makes the file private (0600); give it the mode a plain open() would.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_parquet(df: pd.DataFrame, path: str | Path) -> None:
    """Write ``df`` to parquet atomically, without the index, with a CRC32 per data page.

    Without the checksums about half of all single-bit flips in a small table read back as
    different values with no error; ``read_parquet`` verifies them.
    """
    atomic_write(path, lambda p: df.to_parquet(p, index=False, write_page_checksum=True))


def write_text(text: str, path: str | Path) -> None:
    """Write UTF-8 text atomically."""
    atomic_write(path, lambda p: p.write_text(text, encoding="utf-8"))


def write_json(obj: Any, path: str | Path) -> None:
    """Write JSON atomically, with sorted keys so equal content gives equal bytes; strict JSON
    (a NaN is refused: ``jsonable`` writes an undefined number as null)."""
    text = json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False)
    write_text(text + "\n", path)


# How to recover from a stage output that cannot be read.
STAGE_OUTPUT = (
    "it is a stage output: rerun `dvc repro` (DVC reruns the stage that writes it, or restores "
    "it from its cache), or delete it"
)


def read_parquet(
    path: str | Path, required: list[str] | None = None, recovery: str = STAGE_OUTPUT
) -> pd.DataFrame:
    """Read a parquet table, naming the file and ``recovery`` if it is missing, truncated,
    corrupt (page checksums are verified where the writer stored them) or lacks columns."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: file not found (run the stage that produces it: dvc repro)")
    try:
        df = pd.read_parquet(path, page_checksum_verification=True)
    except Exception as e:  # pyarrow raises several types for truncated or foreign files
        # pyarrow repeats the path in its message: keep only what is wrong.
        why = re.sub(r"^Could not open Parquet input source '.*?': ", "", str(e))
        raise InputError(f"{path}: not a readable parquet file ({why}); {recovery}") from None
    missing = [c for c in (required or []) if c not in df.columns]
    if missing:
        raise InputError(
            f"{path}: missing column(s) {missing}; found {list(df.columns)}; {recovery}"
        )
    return df


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def canonical_json(obj: Any) -> str:
    """The one serialisation that every content hash in syps is taken over."""
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def read_input_text(path: Path) -> str:
    """A user's input file as text (UTF-8, a BOM dropped), or an error naming the file: not
    found, or not UTF-8 (with the byte and line)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise InputError(
            f"{path}: not valid UTF-8 (byte {e.start}, line {line}); re-save the file as UTF-8"
        ) from None


def read_csv(path: str | Path, required: list[str]) -> pd.DataFrame:
    """Read a CSV as strings, with errors that name the file and what is wrong."""
    path = Path(path)
    text = read_input_text(path)
    try:
        df = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as e:
        raise InputError(f"{path}: not a readable CSV ({e})") from None
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise InputError(f"{path}: missing column(s) {missing}; found {list(df.columns)}")
    return df


def read_jsonl(path: str | Path, required: list[str]) -> list[tuple[int, dict[str, Any]]]:
    """Read a JSON Lines file (one object per line; blank lines skipped) as (line number,
    record) pairs, with errors that name the file, the line and what is wrong: not UTF-8, not
    JSON, not an object, a missing key."""
    path = Path(path)
    text = read_input_text(path)
    records = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError as e:
            raise InputError(f"{path}: line {n}: not JSON ({e})") from None
        if not isinstance(obj, dict):
            raise InputError(f"{path}: line {n}: a record must be a JSON object")
        missing = [k for k in required if k not in obj]
        if missing:
            raise InputError(f"{path}: line {n}: missing key(s) {missing}")
        records.append((n, obj))
    return records


def jsonable(x: Any) -> Any:
    """``x`` with every NaN float (an undefined metric) as None, through nested dicts and lists:
    JSON has no NaN."""
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [jsonable(v) for v in x]
    if isinstance(x, float) and math.isnan(x):
        return None
    return x


def jsonable_records(df: pd.DataFrame) -> list[dict[str, object]]:
    """Rows as JSON-ready dicts, NaN as null."""
    return [jsonable(row) for row in df.to_dict(orient="records")]


def first_index(keys: Sequence[str]) -> dict[str, int]:
    """Each distinct key and the position of its first occurrence, in order: a key that
    occurs on several rows is produced (generated, judged) once, for its first row."""
    first: dict[str, int] = {}
    for i, k in enumerate(keys):
        first.setdefault(k, i)
    return first
