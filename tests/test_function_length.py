"""No function or method in the repository runs over 80 lines (../shared/STYLE.md: thin typed
functions; a long one is split into well-named parts, a long test into one test per output it
checks).

A function's length is its lines from ``def`` to its last line, inclusive (decorators not
counted), as ``ast`` reports them; nested functions are measured on their own too. Every Python
file git lists is read (tracked, and untracked but not ignored, as tests/conftest.py's copy_repo
lists them: work in progress is held to it too).
"""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LIMIT = 80


def function_lengths(source: str) -> list[tuple[int, str, int]]:
    """(line of the ``def``, name, length in lines) of every function and method in ``source``,
    nested ones included, in the order ``ast.walk`` meets them."""
    return [
        (node.lineno, node.name, (node.end_lineno or node.lineno) - node.lineno + 1)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    ]


def python_files() -> list[str]:
    """The repository's .py files as git lists them (tracked, or untracked and not ignored),
    relative to its root."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", "*.py"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\0")
    return sorted(rel for rel in set(listed) if rel and (REPO / rel).is_file())


def test_no_function_over_80_lines() -> None:
    files = python_files()
    assert "tests/test_function_length.py" in files  # the listing found the repository's files
    offenders = [
        f"{rel}:{line} {name} {length}"
        for rel in files
        for line, name, length in function_lengths((REPO / rel).read_text(encoding="utf-8"))
        if length > LIMIT
    ]
    assert not offenders, f"functions over {LIMIT} lines (file:line name length):\n" + "\n".join(
        offenders
    )
