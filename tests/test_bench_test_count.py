"""bench/test_count.py reads pytest's own summary line and rewrites the one row of
docs/performance.md that quotes it, on hand-written output."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("test_count", BENCH / "test_count.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_row_is_pytests_count() -> None:
    tc = _load()
    out = (
        "....\n"
        "==== 3 passed, 1 skipped, 9 deselected in 0.52s ====\n"  # an inner run's line
        "======= 2368 passed, 2 skipped, 190 deselected in 129.41s (0:02:09) =======\n"
    )
    counts, secs = tc.summary(out)
    assert counts == {"passed": 2368, "skipped": 2, "deselected": 190} and secs == 129.41
    row = tc.row(counts, secs, wall=136.4, user=123.2, commit="abc1234")
    # 136 s of wall time is 2 min 16 s; pytest's 129.41 s shown as 129 s.
    assert row.startswith(tc.ROW)
    assert "| 2,368 passed, 2 skipped, 190 deselected in 129 s (" in row
    assert "at abc1234" in row and "2 min 16 s of wall time, 123 s of user CPU" in row


def test_the_page_gets_the_row_in_place_of_the_old_one() -> None:
    tc = _load()
    page = f"# P\n\n| a | b |\n{tc.ROW} old | 1 passed |\n| `next` | x |\n"
    new = tc.rewrite(page, f"{tc.ROW} new |")
    assert new == f"# P\n\n| a | b |\n{tc.ROW} new |\n| `next` | x |\n"
    with pytest.raises(SystemExit, match="0 rows"):
        tc.rewrite("# P\n", "x")
    with pytest.raises(SystemExit, match="no summary line"):
        tc.summary("collected 0 items\n")
