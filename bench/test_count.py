"""The README's test command, timed, and its row of docs/performance.md rewritten from what it
printed: pytest's own count (passed, skipped, deselected), pytest's time, the command's wall time
and user CPU, at this commit. The page's count is this script's output, never typed by hand.

    python bench/test_count.py            # runs `python -m pytest`, rewrites the row
    python bench/test_count.py --dry-run  # prints the row instead

Run it with nothing else running (both cores are the measurement), in the README's environment.
"""

from __future__ import annotations

import argparse
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "performance.md"
ROW = "| `time python -m pytest` |"
WHAT = (
    "the README's test command: the fast tests (`slow` and `shipped` deselected in "
    "pyproject.toml), the edit-test loop"
)
# pytest's last line, e.g. "==== 2368 passed, 2 skipped, 190 deselected in 129.41s (0:02:09) ===="
SUMMARY = re.compile(r"^=+ (?P<counts>.*?) in (?P<secs>[\d.]+)s(?: \([\d:]+\))? =+$", re.M)


def summary(output: str) -> tuple[dict[str, int], float]:
    """pytest's counts by outcome and its time, from its final line."""
    found = SUMMARY.findall(output)
    if not found:
        raise SystemExit("test_count: pytest printed no summary line (did it run?)")
    counts, secs = found[-1]
    parsed = {}
    for part in counts.split(", "):
        n, _, outcome = part.partition(" ")
        parsed[outcome] = int(n)
    return parsed, float(secs)


def row(counts: dict[str, int], secs: float, wall: float, user: float, commit: str) -> str:
    shown = ", ".join(
        f"{counts[k]:,} {k}" for k in ("passed", "skipped", "deselected") if k in counts
    )
    minutes, seconds = divmod(round(wall), 60)
    return (
        f"{ROW} {WHAT} | {shown} in {secs:.0f} s (pytest's count and time, at {commit}, "
        f"written by `python bench/test_count.py`; the command {minutes} min {seconds} s of "
        f"wall time, {user:.0f} s of user CPU) |"
    )


def rewrite(page: str, new_row: str) -> str:
    lines = page.splitlines(keepends=True)
    at = [i for i, line in enumerate(lines) if line.startswith(ROW)]
    if len(at) != 1:
        raise SystemExit(f"test_count: {PAGE} has {len(at)} rows starting {ROW!r}, not 1")
    lines[at[0]] = new_row + "\n"
    return "".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="print the row, leave the page")
    args = parser.parse_args()
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True
    ).stdout.strip()
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pytest"], cwd=REPO, capture_output=True, text=True
    )
    wall = time.perf_counter() - start
    user = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime
    if done.returncode != 0:
        sys.stdout.write(done.stdout[-4000:])
        raise SystemExit(f"test_count: python -m pytest exited {done.returncode}; page unchanged")
    counts, secs = summary(done.stdout)
    new_row = row(counts, secs, wall, user, commit)
    if args.dry_run:
        print(new_row)
        return
    PAGE.write_text(rewrite(PAGE.read_text(encoding="utf-8"), new_row), encoding="utf-8")
    print(f"{PAGE.relative_to(REPO)}: {new_row}")


if __name__ == "__main__":
    main()
