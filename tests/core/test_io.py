"""Atomic writes: all or nothing, with the permissions a plain open() would give."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from syps.core.io import atomic_write, write_text


def test_written_file_gets_the_umask_mode(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        write_text("hi", tmp_path / "a.txt")
    finally:
        os.umask(old)
    # 0o666 & ~0o022 = 0o644, not mkstemp's private 0o600.
    assert (tmp_path / "a.txt").stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "a.txt").read_text(encoding="utf-8") == "hi"


def test_failed_write_leaves_nothing(tmp_path: Path) -> None:
    def boom(p: Path) -> None:
        p.write_text("partial", encoding="utf-8")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        atomic_write(tmp_path / "out.json", boom)
    assert list(tmp_path.iterdir()) == []
