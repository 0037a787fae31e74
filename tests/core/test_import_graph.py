"""The import graph of syps/, read from the source: no cycle, and the core knows no protocol.

Every ``import`` and ``from ... import`` statement counts, wherever it stands (inside a function,
under ``if TYPE_CHECKING:``), and so does ``importlib.import_module("<literal>")``: a lazy import is
still a dependency, and a cycle through one is a cycle waiting for the next refactor to make it
eager. Relative imports are resolved against the importing module's package; ``from pkg import
name`` where ``pkg/name.py`` (or ``pkg/name/``) exists counts as importing ``pkg.name``.
"""

from __future__ import annotations

import ast
import io
import tokenize
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

SYPS = Path(__file__).resolve().parents[2] / "syps"
PROTOCOLS = SYPS / "protocols"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SYPS.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def all_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(SYPS.rglob("*.py")) if "__pycache__" not in p.parts}


MODULES = all_modules()
# The protocol folders: every package directly under syps/protocols/.
FOLDERS = sorted(p.name for p in PROTOCOLS.iterdir() if p.is_dir() and p.name != "__pycache__")


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


def _lazy_nodes(tree: ast.AST) -> set[int]:
    """The ids of the nodes that do not run when the module is imported: function bodies and
    ``if TYPE_CHECKING:`` blocks."""
    lazy: set[int] = set()

    def mark(node: ast.AST) -> None:
        lazy.update(id(n) for n in ast.walk(node))

    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            mark(node)
        elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                mark(child)
    return lazy


def imports_of(module: str, path: Path, eager_only: bool = False) -> Iterator[tuple[str, int]]:
    """(imported syps module, line) for every import in ``path``; with ``eager_only``, only
    those run when the module is imported."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    lazy = _lazy_nodes(tree) if eager_only else set()
    for node in ast.walk(tree):
        if id(node) in lazy:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "syps":
                    yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            pkg = _resolve_from(module, path, node.level, node.module)
            if pkg.split(".")[0] != "syps":
                continue
            names = [a.name for a in node.names]
            submodules = [f"{pkg}.{n}" for n in names if _known(f"{pkg}.{n}")]
            yield from ((s, node.lineno) for s in submodules)
            if len(submodules) < len(names):  # a plain name (or *) of pkg itself
                yield pkg, node.lineno
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
            and node.args[0].value.startswith("syps")
        ):
            yield node.args[0].value, node.lineno


def graph(eager_only: bool = False) -> dict[str, dict[str, int]]:
    """module -> {imported module: first line}, syps modules only, self-imports left out."""
    edges: dict[str, dict[str, int]] = {}
    for module, path in MODULES.items():
        out = edges.setdefault(module, {})
        for target, line in imports_of(module, path, eager_only):
            if target != module:
                out.setdefault(target, line)
    return edges


GRAPH = graph()
EAGER = graph(eager_only=True)


def _cycles(edges: dict[str, dict[str, int]]) -> list[list[str]]:
    """One cycle (as a module path back to its start) per strongly connected component of more
    than one module (Tarjan)."""
    return [_path_in(edges, c) for c in _components(edges)]


def _components(edges: dict[str, dict[str, int]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    comps: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(set(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return comps


def _path_in(edges: dict[str, dict[str, int]], comp: set[str]) -> list[str]:
    """A cycle through the first module of ``comp``, staying inside it (breadth-first)."""
    start = min(comp)
    parent: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(edges.get(v, {})):
                if w not in comp:
                    continue
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(parent[path[-1]])
                    return [*reversed(path), start]
                if w not in parent:
                    parent[w] = v
                    nxt.append(w)
        frontier = nxt
    return sorted(comp)


def _show(cycle: list[str], edges: dict[str, dict[str, int]]) -> str:
    return (
        " -> ".join(f"{a} (line {edges[a][b]})" for a, b in zip(cycle, cycle[1:], strict=False))
        + f" -> {cycle[-1]}"
    )


def folder_of(module: str) -> str | None:
    """The protocol folder ``module`` lies in (``syps.protocols.<name>[.*]``), else None."""
    parts = module.split(".")
    if len(parts) >= 3 and parts[:2] == ["syps", "protocols"] and parts[2] in FOLDERS:
        return parts[2]
    return None


def test_the_graph_sees_the_package() -> None:
    # The walk found the layers it checks, and the edges it must (a sanity check of the reader).
    assert "syps.core.store" in MODULES and "syps.cli" in MODULES
    assert {"cues", "pushback", "discernment", "betting"} <= set(FOLDERS)
    assert "syps.core.config" in GRAPH["syps.core.protocol"]
    # The registry imports every protocol's package; the package syps.protocols none.
    assert {f"syps.protocols.{f}" for f in FOLDERS} <= set(GRAPH["syps.registry"])
    assert not any(folder_of(t) for t in GRAPH["syps.protocols"])


def test_relative_and_from_imports_resolve(tmp_path: Path) -> None:
    # Read against a fake file placed in the real tree's namespace.
    src = (
        "from . import cues\n"
        "from .. import cli\n"
        "from syps.core import store, io as sio\n"
        "from syps.protocols import PROTOCOLS\n"
        "def f():\n"
        "    from typing import TYPE_CHECKING\n"
        "    if TYPE_CHECKING:\n"
        "        import syps.core.judge\n"
        "    import importlib\n"
        "    importlib.import_module('syps.core.plan')\n"
    )
    fake = tmp_path / "__init__.py"
    fake.write_text(src, encoding="utf-8")
    got = {t for t, _ in imports_of("syps.protocols", fake)}
    assert got == {
        "syps.protocols.cues",
        "syps.cli",
        "syps.core.store",
        "syps.core.io",
        "syps.protocols",
        "syps.core.judge",
        "syps.core.plan",
    }
    assert _cycles({"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}, "d": {"a": 1}}) == [
        ["a", "b", "c", "a"]
    ]
    eager = {t for t, _ in imports_of("syps.protocols", fake, eager_only=True)}
    assert eager == {
        "syps.protocols.cues",
        "syps.cli",
        "syps.core.store",
        "syps.core.io",
        "syps.protocols",
    }


def test_no_import_cycle_when_imported() -> None:
    # Module-level imports only: a cycle here fails at import time, whichever module is first.
    cycles = _cycles(EAGER)
    assert not cycles, "import cycles in syps/:\n" + "\n".join(_show(c, EAGER) for c in cycles)


def test_no_import_cycle_counting_lazy_imports() -> None:
    # Inside a function, under TYPE_CHECKING or as a module name in a string: none closes a
    # cycle either.
    cycles = _cycles(GRAPH)
    assert not cycles, "import cycles in syps/ (lazy imports counted):\n" + "\n".join(
        _show(c, GRAPH) for c in cycles
    )


CORE = sorted(m for m in MODULES if m.startswith("syps.core"))


@pytest.mark.parametrize("module", CORE)
def test_the_core_imports_nothing_of_the_protocols(module: str) -> None:
    # The core owns the contract (syps.core.protocol); the protocols import it, never the
    # reverse: not a folder, not the package, not the registry.
    bad = {
        t: line
        for t, line in GRAPH[module].items()
        if t == "syps.registry" or t.startswith("syps.protocols") or t in ("syps.cli", "syps.stage")
    }
    assert not bad, f"{module} imports above the core: " + ", ".join(
        f"{t} (line {line})" for t, line in sorted(bad.items())
    )


@pytest.mark.parametrize("module", ["syps", "syps.protocols", "syps.stage"])
def test_the_edges_import_no_protocol_folder(module: str) -> None:
    # syps.stage imports a stage's protocol by its name alone (never all of them).
    bad = {t: line for t, line in GRAPH[module].items() if folder_of(t) or t == "syps.registry"}
    assert not bad, f"{module} imports protocol folders: " + ", ".join(
        f"{t} (line {line})" for t, line in sorted(bad.items())
    )


@pytest.mark.parametrize("module", sorted(m for m in MODULES if folder_of(m)))
def test_a_protocol_folder_imports_no_other_protocol(module: str) -> None:
    own = folder_of(module)
    bad = {t: line for t, line in GRAPH[module].items() if folder_of(t) not in (None, own)}
    assert not bad, f"{module} (protocol {own}) imports another protocol: " + ", ".join(
        f"{t} (line {line})" for t, line in sorted(bad.items())
    )


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


def test_lazy_import_problems_are_found(tmp_path: Path) -> None:
    # A light import is named wherever it is; a heavy one only without a comment (a pragma is
    # none); a comment above a run of imports explains the run; class methods are functions.
    src = (
        "import json\n"
        "def f():\n"
        "    import os\n"
        "    import torch  # type: ignore[import]\n"
        "    # heavy: matplotlib draws only here\n"
        "    import matplotlib\n"
        "    from matplotlib import pyplot\n"
        "\n"
        "    from syps.core.backends.hf import HFBackend  # heavy: torch\n"
        "    from syps.core.backends import hf\n"
        "class C:\n"
        "    import math\n"
        "    def g(self):\n"
        "        from syps.core import store  # a comment does not make it heavy\n"
    )
    fake = tmp_path / "fake.py"
    fake.write_text(src, encoding="utf-8")
    got = lazy_import_problems("syps.core.fake", fake, where="fake.py")
    assert {fn: [p.split(": ", 1)[0] for p in ps] for fn, ps in got.items()} == {
        "fake.py:f": ["fake.py:3", "fake.py:3", "fake.py:4"],
        "fake.py:C.g": ["fake.py:14"],
    }
    assert "os imported inside f()" in got["fake.py:f"][0]
    assert "says not why" in got["fake.py:f"][1] and "says not why" in got["fake.py:f"][2]
    assert "syps.core.store imported inside C.g()" in got["fake.py:C.g"][0]
