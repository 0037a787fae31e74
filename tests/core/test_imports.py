"""syps's import rules. The structural ones (no cycle at any depth, the core imports no protocol,
a protocol folder no other, the edges no folder) are import-linter contracts in pyproject.toml,
run here by ``lint-imports`` as CI runs it. The rule no linter states is checked below: an import
inside a function is for what is slow to import or optional, and says why it is lazy.
"""

from __future__ import annotations

import ast
import io
import shutil
import subprocess
import tokenize
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SYPS = ROOT / "syps"


def test_the_import_contracts_hold() -> None:
    lint = shutil.which("lint-imports")
    assert lint, "lint-imports is not installed: `pip install -e .[dev]`"
    done = subprocess.run([lint], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "4 kept, 0 broken" in done.stdout


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SYPS.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def all_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(SYPS.rglob("*.py")) if "__pycache__" not in p.parts}


MODULES = all_modules()


def _known(name: str) -> str | None:
    """``name`` if it is a module of syps (a file or a package), else None."""
    if name in MODULES:
        return name
    # A folder without __init__.py is still a (namespace) package.
    if (SYPS.parent / Path(*name.split("."))).is_dir() and name.split(".")[0] == "syps":
        return name
    return None


def _resolve_from(module: str, path: Path, level: int, target: str | None) -> str:
    """The absolute package a ``from <dots><target> import ...`` names."""
    if level == 0:
        return target or ""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    base = package[: len(package) - (level - 1)] if level > 1 else package
    return ".".join([*base, *([target] if target else [])])


# Imports inside a function are for what is slow to import or optional, and only that: the
# libraries below, and the syps modules that import one of them at module level. Anything else
# (the standard library, numpy, pandas, yaml, a light syps module) is imported at the top.
HEAVY_LIBRARIES = frozenset(
    {
        "torch",
        "transformers",
        "vllm",
        "openai",
        "mlflow",
        "matplotlib",
        "huggingface_hub",
        "opentelemetry",
        "psutil",
        "ruamel",  # ruamel.yaml: 15-25 ms, and only reading params.yaml needs it
        "dvc",  # DVC's -S override code imports hydra and omegaconf: `syps preset` alone uses it
        "psycopg",  # ~0.27 s (libpq), and only a PostgreSQL store (SYPS_STORE) needs it
    }
)
HEAVY_MODULES = {
    "syps.core.backends.hf": "imports torch and transformers",
    "syps.core.backends.vllm_engine": "imports syps.core.backends.hf (torch, transformers)",
    "syps.core.backends.openai_api": "imports openai",
    "syps.core.backends.openai_batch": "imports openai",
    "syps.core.backends.hf_parallel": "imports tqdm and multiprocessing (20-40 ms), of use only "
    "beside torch (the HF backend over several devices): every stage would pay for them",
}


def _comment_lines(source: str) -> set[int]:
    """The lines holding a comment that says something: a bare pragma (``# type: ignore[...]``,
    ``# noqa``) does not count."""
    lines: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type != tokenize.COMMENT:
            continue
        parts = [p.strip() for p in tok.string.split("#")]
        if any(p and not p.startswith(("type:", "noqa", "pragma")) for p in parts):
            lines.add(tok.start[0])
    return lines


def _imported(module: str, path: Path, node: ast.Import | ast.ImportFrom) -> list[str]:
    """What ``node`` imports: syps modules by name (as :func:`imports_of` resolves them), any
    other library by its top-level package."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        pkg = _resolve_from(module, path, node.level, node.module)
        if pkg.split(".")[0] != "syps":
            return [pkg.split(".")[0]]
        subs = [f"{pkg}.{a.name}" for a in node.names if _known(f"{pkg}.{a.name}")]
        names = subs if len(subs) == len(node.names) else [*subs, pkg]
    return [n if n.split(".")[0] == "syps" else n.split(".")[0] for n in names]


def function_imports(
    module: str, path: Path
) -> Iterator[tuple[str, ast.Import | ast.ImportFrom, list[str]]]:
    """(qualified function name, import node, what it imports) for every import statement
    inside a function of ``path`` (nested classes and functions included)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))

    def walk(node: ast.AST, scope: list[str], in_function: bool) -> Iterator[Any]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                inner = in_function or not isinstance(child, ast.ClassDef)
                yield from walk(child, [*scope, child.name], inner)
            elif in_function and isinstance(child, ast.Import | ast.ImportFrom):
                yield ".".join(scope), child, _imported(module, path, child)
            else:
                yield from walk(child, scope, in_function)

    yield from walk(tree, [], False)


def lazy_import_problems(module: str, path: Path, where: str | None = None) -> dict[str, list[str]]:
    """``{"<file>:<function>": ["<file>:<line>: <problem>", ...]}`` for each import inside a
    function that imports something light, or that no comment explains: one on the import's
    own lines or on the line above it. Consecutive imports (blank lines between them allowed)
    share the comment above the first."""
    source = path.read_text(encoding="utf-8")
    comments = _comment_lines(source)
    lines = source.splitlines()
    where = where or path.relative_to(SYPS.parent).as_posix()
    problems: dict[str, list[str]] = {}
    explained_up_to = -1  # the last line of the latest explained import
    for function, node, targets in function_imports(module, path):
        end = node.end_lineno or node.lineno
        own = set(range(node.lineno, end + 1))
        explained = bool(own & comments) or node.lineno - 1 in comments
        above = node.lineno - 1
        while above > 0 and not lines[above - 1].strip():
            above -= 1  # a run of imports may be split in groups (isort's) by blank lines
        explained = explained or above == explained_up_to
        explained_up_to = end if explained else -1
        found = problems.setdefault(f"{where}:{function}", [])
        light = [
            t
            for t in targets
            if t not in HEAVY_LIBRARIES and t not in HEAVY_MODULES and t != module
        ]
        if light:
            found.append(
                f"{where}:{node.lineno}: {', '.join(light)} imported inside {function}(): "
                "import it at the top (or add a heavy module to HEAVY_MODULES, with why)"
            )
        if not explained:
            found.append(
                f"{where}:{node.lineno}: the import inside {function}() says not why it is "
                "there (a comment on its line or the line above)"
            )
    return {k: v for k, v in problems.items() if v}


@pytest.mark.parametrize(
    "module", sorted(MODULES), ids=lambda m: MODULES[m].relative_to(SYPS.parent).as_posix()
)
def test_imports_inside_functions_are_heavy_and_explained(module: str) -> None:
    # The standard library, numpy, pandas, yaml and light syps modules belong at the top, where
    # a reader sees a module's dependencies; a lazy import says why it is lazy.
    problems = lazy_import_problems(module, MODULES[module])
    bad = [p for _, ps in sorted(problems.items()) for p in ps]
    assert not bad, "\n".join(bad)


def test_the_heavy_modules_named_exist() -> None:
    assert set(HEAVY_MODULES) <= set(MODULES), set(HEAVY_MODULES) - set(MODULES)
