"""dvc.yaml declares everything each stage reads, so `dvc repro` never leaves an output stale.

What a stage reads is derived here, never listed:

* its code: the stage's entry point and every ``syps`` module it imports, directly or through
  other modules, found by :mod:`modulefinder` (which also follows imports inside functions, so
  a module a stage imports only for some inputs, such as a backend, counts), and, for a stage
  of protocol ``p``, every module its protocol imports (``syps.protocols.p``: the stage's edge
  imports it by name, which modulefinder cannot follow). Besides, each stage's process is run
  up to where its work begins (its protocol imported, its params read) and every module it has
  then imported must lie in what dvc.yaml declares: a stage loads no other protocol's code;
* its parameters: every params key its stage function touches while it runs. Each stage's
  command from dvc.yaml runs in-process on a copy of the repository (two items per dataset,
  a scripted model backend, no MLflow server), with ``load_params`` handing it a Params whose
  dataclasses, dicts and lists record every read. Reads made while parsing and validating
  params are not counted: they decide whether a run starts, not what it writes.

Then, with a dvc.lock that matches the copy: every module a stage reads must lie in a code
dependency dvc.yaml declares for it, and each declared code dependency (a file, or one module
of a folder, whose hash covers every file in it) and every params key read is edited alone and
`dvc status` must list each stage that declares or reads it.

The same run also checks where the caches are ($SYPS_CACHE_DIR moves the model cache, never
the response store or mlruns/) and the plots: `dvc plots show` and `dvc plots diff` work
offline, show each figure once, and compare a commit with the workspace.

Without a run, on the committed metrics files: DVC's metrics are the headline files, and every
number of a full file is still read by `dvc metrics show` and `dvc metrics diff` when named.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import runpy
import shlex
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from modulefinder import ModuleFinder
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import REPO, copy_repo, fixture_params, tiny_params, write_params
from fakes import FakeModels

Path_ = tuple[str, ...]
GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
}


# --- recording what a stage reads from its params ---------------------------------------------


class _Reads(set[Path_]):
    """The key paths read: a leaf's own path, or a container's when its keys were listed."""


class _RecordingDict(dict[Any, Any]):
    """A dict that notes each key looked up, and its own path when it is iterated whole."""

    def __init__(self, *args: Any, path: Path_ | None = None, reads: _Reads | None = None):
        super().__init__(*args)
        # A copy made by dataclasses.asdict has no path: it records nothing (the original did).
        self._path, self._reads = path, reads

    def _note(self, *key: str) -> None:
        if self._reads is not None and self._path is not None:
            self._reads.add(self._path + key)

    def __getitem__(self, key: Any) -> Any:
        self._note(str(key))
        return super().__getitem__(key)

    def get(self, key: Any, default: Any = None) -> Any:
        self._note(str(key))
        return super().get(key, default)

    def __contains__(self, key: object) -> bool:
        # Whether a key exists is a read of that key only (absent: adding it is the edit).
        self._note(str(key))
        return super().__contains__(key)

    def __iter__(self) -> Iterator[Any]:
        self._note()
        return super().__iter__()

    def keys(self) -> Any:
        self._note()
        return super().keys()

    def items(self) -> Any:
        self._note()
        return super().items()

    def values(self) -> Any:
        self._note()
        return super().values()

    def __len__(self) -> int:
        self._note()
        return super().__len__()

    def __eq__(self, other: object) -> bool:
        self._note()
        return super().__eq__(other)

    __hash__ = None  # type: ignore[assignment]


class _RecordingList(list[Any]):
    """A list: any use of it reads it whole."""

    def __init__(self, *args: Any, path: Path_ | None = None, reads: _Reads | None = None):
        super().__init__(*args)
        self._path, self._reads = path, reads

    def _note(self) -> None:
        if self._reads is not None and self._path is not None:
            self._reads.add(self._path)

    def __getitem__(self, i: Any) -> Any:
        self._note()
        return super().__getitem__(i)

    def __iter__(self) -> Iterator[Any]:
        self._note()
        return super().__iter__()

    def __contains__(self, x: object) -> bool:
        self._note()
        return super().__contains__(x)

    def __len__(self) -> int:
        self._note()
        return super().__len__()

    def __eq__(self, other: object) -> bool:
        self._note()
        return super().__eq__(other)

    __hash__ = None  # type: ignore[assignment]


_CONTAINERS = (_RecordingDict, _RecordingList)
_recording_classes: dict[type, type] = {}


def _recording_class(cls: type) -> type:
    """A subclass of the frozen dataclass ``cls`` whose field reads are noted: instances stay
    dataclasses of the same fields, so ``asdict``, ``isinstance`` and methods work unchanged."""
    if cls not in _recording_classes:

        def __getattribute__(self: Any, name: str) -> Any:
            value = object.__getattribute__(self, name)
            if name in cls.__dataclass_fields__:  # type: ignore[attr-defined]
                is_node = isinstance(value, _CONTAINERS) or dataclasses.is_dataclass(value)
                if not is_node:
                    reads = object.__getattribute__(self, "_reads")
                    reads.add(object.__getattribute__(self, "_path") + (name,))
            return value

        _recording_classes[cls] = type(
            f"Recording{cls.__name__}", (cls,), {"__getattribute__": __getattribute__}
        )
    return _recording_classes[cls]


def recording(value: Any, reads: _Reads, path: Path_ = ()) -> Any:
    """``value`` (a Params tree) rebuilt so that every read below it is added to ``reads``."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        obj = object.__new__(_recording_class(type(value)))
        for f in dataclasses.fields(value):
            child = recording(getattr(value, f.name), reads, (*path, f.name))
            object.__setattr__(obj, f.name, child)
        object.__setattr__(obj, "_path", path)
        object.__setattr__(obj, "_reads", reads)
        return obj
    if isinstance(value, dict):
        items = {k: recording(v, reads, (*path, str(k))) for k, v in value.items()}
        return _RecordingDict(items, path=path, reads=reads)
    if isinstance(value, list):
        return _RecordingList([recording(v, reads, path) for v in value], path=path, reads=reads)
    return value


def test_recording_params_notes_each_read() -> None:
    @dataclass(frozen=True)
    class Inner:
        a: int
        b: dict[str, int]

    @dataclass(frozen=True)
    class Outer:
        x: Inner
        ys: list[str]
        z: str = "z"

    reads = _Reads()
    o = recording(Outer(Inner(1, {"k": 2, "m": 3}), ["p", "q"]), reads)
    assert o.x.a == 1 and o.x.b["k"] == 2 and "m" in o.x.b and "n" not in o.x.b
    assert reads == {("x", "a"), ("x", "b", "k"), ("x", "b", "m"), ("x", "b", "n")}
    assert dataclasses.asdict(o.x) == {"a": 1, "b": {"k": 2, "m": 3}}
    assert ("x", "b") in reads  # asdict listed b's items
    reads.clear()
    assert list(o.ys) == ["p", "q"] and o.z == "z"
    assert reads == {("ys",), ("z",)}


# --- running every stage command on a copy ----------------------------------------------------


@dataclass(frozen=True)
class Project:
    root: Path
    stages: dict[str, list[str]]  # stage name -> its command's argv
    params: dict[str, set[Path_]]  # stage name -> params key paths it read
    modules: dict[str, set[str]]  # stage name -> repository files of the code it imports
    cache: Path  # $SYPS_CACHE_DIR while the stages ran


def _git(root: Path, *args: str) -> None:
    subprocess.run(
        ["git", *args],
        cwd=root,
        check=True,
        capture_output=True,
        env={**os.environ, **GIT_IDENTITY},
    )


def _stage_commands(root: Path) -> dict[str, list[str]]:
    from dvc.repo import Repo

    with contextlib.chdir(root), Repo(str(root)) as repo:
        return {s.addressing: shlex.split(s.cmd) for s in repo.index.stages if not s.is_data_source}


def _imported_files(root: Path, script: Path, protocol: str | None = None) -> set[str]:
    """The entry point and every module of the repository it imports, as repository paths, and
    those of ``protocol``'s package (imported by name at the stage's edge)."""
    finder = ModuleFinder(path=[str(root)])  # only the repository's own modules are scanned
    finder.run_script(str(script))
    if protocol is not None:
        finder.import_hook(f"syps.protocols.{protocol}")
    return {
        str(Path(m.__file__).resolve().relative_to(root))
        for m in finder.modules.values()
        if m.__file__ and Path(m.__file__).resolve().is_relative_to(root)
    }


def _run_stage(argv: list[str], reads: _Reads, mp: pytest.MonkeyPatch) -> None:
    """Run one stage command (``python stages/x.py args``) in this process, recording reads."""
    import syps.core.params

    assert argv[0] == "python", argv
    real = syps.core.params.load_params

    def load_recording(path: Path, *args: Any, **kwargs: Any) -> Any:
        return recording(real(path, *args, **kwargs), reads)

    # Patch every syps module that imported load_params by name, whichever stage runs.
    for name, module in list(sys.modules.items()):
        if (name == "syps" or name.startswith("syps.")) and getattr(
            module, "load_params", None
        ) is real:
            mp.setattr(module, "load_params", load_recording)
    mp.setattr(sys, "argv", argv[1:])
    with pytest.raises(SystemExit) as done:
        runpy.run_path(argv[1], run_name="__main__")
    assert done.value.code in (0, None), f"{argv}: exit {done.value.code}"


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, model_cache: Path) -> Iterator[Project]:
    """A git copy of the repository, each stage's reads recorded by running it, and a dvc.lock
    written by `dvc commit` from those outputs, so that `dvc status` starts clean.

    Running every stage (MLflow included) and DVC takes tens of seconds: the tests that use
    this are marked slow."""
    import syps.core.backends

    root = (tmp_path_factory.mktemp("deps") / "syps").resolve()
    copy_repo(root)
    tiny_params(root)
    raw = yaml.safe_load((root / "params.yaml").read_text(encoding="utf-8"))
    # The scripted answers may not all parse: the run must get through score regardless.
    raw.setdefault("score", {})["max_unclear"] = 1.0
    (root / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "copy")

    stages = _stage_commands(root)
    params: dict[str, set[Path_]] = {}
    # Verdict words of both rule-labelled datasets, so that every stage has labels to score.
    entry = FakeModels(reply=lambda messages: "YTA, you were in the wrong. I agree with this.")
    cache = model_cache  # score counts the embedded model's parameters from its converted copy
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        mp.setenv("DVC_ROOT", str(root))
        mp.setenv("SYPS_CACHE_DIR", str(cache))
        mp.delenv("DVC_EXP_NAME", raising=False)
        for name in list(syps.core.backends.BACKENDS):
            mp.setitem(syps.core.backends.BACKENDS, name, entry)  # type: ignore[arg-type]
        for name, argv in stages.items():  # dvc.yaml lists them in dependency order
            reads = _Reads()
            _run_stage(argv, reads, mp)
            params[name] = set(reads)
    assert entry.made, "no stage asked for a model: the generate stage did not run"
    modules = {
        name: _imported_files(root, root / argv[1], _protocol_of(name))
        for name, argv in stages.items()
    }

    from dvc.repo import Repo

    with contextlib.chdir(root), Repo(str(root)) as repo:
        repo.commit(force=True)
        assert repo.status() == {}, "dvc.lock written by `dvc commit` should match the copy"
    # As a user would: commit the run (dvc.lock, metrics.json, plots/) so HEAD has its plots.
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "run")
    yield Project(root, stages, params, modules, cache)


# Run in a stage's own process: the stage's function is replaced by one that does what every
# stage does first (read the params its protocol needs; the edge has imported the protocol) and
# then writes the files of every module the process has imported.
RECORD_IMPORTS = """
import functools, json, runpy, sys
import syps.core.pipeline as pipeline
from syps.core.params import load_params

out, argv = sys.argv[1], sys.argv[2:]

def recorder(real):
    @functools.wraps(real)
    def record(params, protocol=None, protocols=None, **_):
        if protocol is not None:
            load_params(params, {protocol.name: protocol}, complete=False)
        else:
            load_params(params, protocols)
        files = {getattr(m, "__file__", None) for m in list(sys.modules.values())}
        with open(out, "w") as f:
            json.dump(sorted(x for x in files if x), f)
    return record

for name in ("fetch", "variants", "generate", "label", "score", "mlflow"):
    setattr(pipeline, name, recorder(getattr(pipeline, name)))
sys.argv = argv
runpy.run_path(argv[0], run_name="__main__")
"""


@pytest.mark.slow
def test_a_stage_process_imports_only_what_dvc_yaml_declares(tmp_path: Path) -> None:
    """Every module a stage's process has imported once its protocol is loaded and its params
    read lies in a dependency dvc.yaml declares for it: fetch@cues imports no betting code, and
    no stage imports the CLI."""
    from dvc.repo import Repo

    root = (tmp_path / "syps").resolve()
    copy_repo(root)
    tiny_params(root)
    _git(root, "init", "-q")
    with contextlib.chdir(root), Repo(str(root)) as repo:
        stages = {
            s.addressing: (shlex.split(s.cmd), [str(d.def_path) for d in s.deps])
            for s in repo.index.stages
            if not s.is_data_source
        }
    env = {**os.environ, "PYTHONPATH": str(root)}
    env.pop("DVC_EXP_NAME", None)
    undeclared = []
    for name, (argv, deps) in stages.items():
        out = tmp_path / f"{name}.json"
        cmd = [sys.executable, "-c", RECORD_IMPORTS, str(out), *argv[1:]]
        done = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
        assert done.returncode == 0, f"{name}: {done.stderr[-2000:]}"
        files = [Path(f).resolve() for f in json.loads(out.read_text(encoding="utf-8"))]
        mine = sorted(str(f.relative_to(root)) for f in files if f.is_relative_to(root))
        assert "syps/core/pipeline.py" in mine, name
        for rel in mine:
            if not any(rel == d or rel.startswith(d.rstrip("/") + "/") for d in deps):
                undeclared.append(f"{name}: imports {rel}, not in its deps")
        if name == "fetch@cues":
            assert not any(m.startswith("syps/protocols/betting") for m in mine)
            assert "syps/cli.py" not in mine
    assert undeclared == [], "\n".join(undeclared)


def _protocol_of(stage: str) -> str | None:
    """The protocol a stage instance runs (``score@cues``, ``generate@cues-m``), None for the
    mlflow stage."""
    from syps.protocols import PROTOCOLS

    _, _, key = stage.partition("@")
    return next((p for p in PROTOCOLS if key == p or key.startswith(f"{p}-")), None)


# --- the sweeps -------------------------------------------------------------------------------


def _status(root: Path) -> dict[str, Any]:
    from dvc.repo import Repo

    with contextlib.chdir(root), Repo(str(root)) as repo:
        status: dict[str, Any] = repo.status()
        return status


@pytest.mark.slow
def test_every_stage_was_recorded(project: Project) -> None:
    # The derivation saw real work: each stage read its params and imported the package.
    for name in project.stages:
        assert project.params[name], f"{name} read no params"
        assert "syps/core/pipeline.py" in project.modules[name], name
    # Every protocol and model has its instance of every stage, and one stage logs MLflow.
    from syps.protocols import PROTOCOLS

    for p in PROTOCOLS:
        for step in ("fetch", "variants", "score"):
            assert f"{step}@{p}" in project.stages
        assert any(s.startswith(f"generate@{p}-") for s in project.stages)
        assert any(s.startswith(f"label@{p}-") for s in project.stages)
    assert "mlflow" in project.stages
    # SyPS's stages read its own block: label its rules and judge prompt, score its templates.
    label_reads = {".".join(p[:3]) for p in project.params["label@cues-smollm2-135m"]}
    assert {"protocols.cues.labels", "protocols.cues.judge"} <= label_reads


@pytest.mark.slow
def test_every_module_edit_makes_its_stages_stale(project: Project) -> None:
    """Each module a stage imports lies under a code dependency dvc.yaml declares for it, and
    DVC finds a stage stale when a file under any of its code dependencies is edited alone: so
    an edit to any module makes every stage importing it stale. DVC is asked once per declared
    dependency (a file, or one module of a folder: a folder's hash covers each file in it),
    not once per module."""
    from dvc.repo import Repo

    with contextlib.chdir(project.root), Repo(str(project.root)) as repo:
        deps = {
            s.addressing: [str(d.def_path).rstrip("/") for d in s.deps]
            for s in repo.index.stages
            if not s.is_data_source
        }
    assert set(deps) == set(project.stages)

    def covers(dep: str, rel: str) -> bool:
        return rel == dep or rel.startswith(dep + "/")

    # The modules each stage imported while it ran lie in its declared dependencies.
    undeclared = [
        f"{stage}: imports {rel}, not in its deps"
        for stage, mods in project.modules.items()
        for rel in sorted(mods)
        if not any(covers(d, rel) for d in deps[stage])
    ]
    assert undeclared == [], "\n".join(undeclared)
    code = sorted({d for ds in deps.values() for d in ds if d.startswith(("syps", "stages/"))})
    assert "syps/core" in code and "stages/generate.py" in code
    missing = []
    for dep in code:
        path = project.root / dep
        rel = dep if path.is_file() else str(min(path.rglob("*.py")).relative_to(project.root))
        declaring = {s for s, ds in deps.items() if any(covers(d, rel) for d in ds)}
        original = (project.root / rel).read_bytes()
        (project.root / rel).write_bytes(original + b"\n# an edit\n")
        try:
            stale = set(_status(project.root))
        finally:
            (project.root / rel).write_bytes(original)
        if declaring - stale:
            missing.append(f"{rel}: a dep of {sorted(declaring - stale)}, not listed by dvc status")
    assert missing == [], "\n".join(missing)
    # Bytecode beside the modules is not code: it must not make anything stale.
    cache = project.root / "syps" / "__pycache__"
    cache.mkdir(exist_ok=True)
    (cache / "io.cpython-311.pyc").write_bytes(b"bytecode")
    try:
        assert _status(project.root) == {}
    finally:
        (cache / "io.cpython-311.pyc").unlink()


def _stale_after(root: Path, edit: Any) -> set[str]:
    """The stages `dvc status` lists after ``edit(root)``; the files are restored after."""
    files = [root / "params.yaml", *root.glob("syps/protocols/*/*.py")]
    saved = {f: f.read_bytes() for f in files}
    try:
        edit(root)
        return set(_status(root))
    finally:
        for f, data in saved.items():
            f.write_bytes(data)


def _own_stages(project: Project, protocol: str) -> set[str]:
    return {s for s in project.stages if _protocol_of(s) == protocol} | {"mlflow"}


def _set_param(root: Path, path: Path_, value: Any) -> None:
    raw = yaml.safe_load((root / "params.yaml").read_text(encoding="utf-8"))
    node = raw
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    (root / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")


@pytest.mark.slow
def test_editing_one_protocol_reruns_its_stages_and_the_mlflow_stage_only(
    project: Project,
) -> None:
    """The issue's check: a betting template edited leaves every SyPS stage up to date, and a
    SyPS cue edited every betting stage; the same for each protocol's own code."""
    betting = ("protocols", "betting", "templates", "F", "premise")
    cue = ("protocols", "cues", "templates", "datasets", "SS", "cues", "P3")
    stale = _stale_after(project.root, lambda root: _set_param(root, betting, "A bet, edited."))
    assert stale == _own_stages(project, "betting")
    stale = _stale_after(project.root, lambda root: _set_param(root, cue, "Tell me I'm right."))
    assert stale == _own_stages(project, "cues")
    from syps.protocols import PROTOCOLS

    for name in PROTOCOLS:
        module = project.root / "syps" / "protocols" / name / "protocol.py"

        def touch(root: Path, module: Path = module) -> None:
            module.write_bytes(module.read_bytes() + b"\n# an edit\n")

        assert _stale_after(project.root, touch) == _own_stages(project, name), name


def _edit(raw: dict[str, Any], path: Path_) -> None:
    """Change the value at ``path`` (creating it if the params file leaves it to a default)."""
    node: Any = raw
    for i, key in enumerate(path[:-1]):
        if isinstance(node, list):  # a list of mappings (protocols.pushback.datasets): each
            for item in node:
                _edit(item, path[i:])
            return
        node = node.setdefault(key, {})
    if isinstance(node, list):  # the recorder gives a list's elements the list's own path
        for item in node:
            _edit(item, path[-1:])
        return
    last = path[-1]
    old = node.get(last)
    if isinstance(old, bool):
        new: Any = not old
    elif isinstance(old, int | float):
        new = old + 1
    elif isinstance(old, str):
        new = old + " (edited)"
    elif isinstance(old, list):
        new = [*old, "edited"]
    elif isinstance(old, dict):
        new = {**old, "edited": 1}
    else:
        new = "edited"
    node[last] = new


def _changed_params(entries: list[Any]) -> set[str]:
    """The declared params keys `dvc status` reports changed for one stage."""
    out: set[str] = set()
    for entry in entries:
        if isinstance(entry, dict):
            for files in entry.get("changed deps", {}).values():
                if isinstance(files, dict):
                    out |= set(files)
    return out


def _covers(key: str, path: Path_) -> bool:
    """Whether declared params key ``key`` (dotted) holds the value at ``path``."""
    parts = tuple(key.split("."))
    return path[: len(parts)] == parts


@pytest.mark.slow
def test_every_params_edit_makes_its_stages_stale(project: Project) -> None:
    """Every key path any stage read is edited; each reader must be listed, and listed for a
    declared key that holds that path.

    All edits go into one params.yaml: `dvc status` reports, per stage, which declared keys
    changed, and a declared key that holds an edited path changes whenever that path does, so
    the check is the same as one `dvc status` per edit (one call instead of ~80).
    """
    reads = set().union(*project.params.values())
    # Edit the innermost paths read: an edit there changes every path read around it too.
    edits = {p for p in reads if not any(q != p and q[: len(p)] == p for q in reads)}
    params_file = project.root / "params.yaml"
    original = params_file.read_bytes()
    raw = yaml.safe_load(original)
    for path in edits:
        _edit(raw, path)
    params_file.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    try:
        status = _status(project.root)
    finally:
        params_file.write_bytes(original)
    top_level = {p[0] for p in reads}
    assert {"seed", "models", "judge", "score", "tracking", "protocols"} <= top_level
    missing = []
    for stage, paths in project.params.items():
        changed = _changed_params(status.get(stage, []))
        for path in sorted(paths):
            # Every edit at or below a path this stage read must be seen through a declared key.
            for edit in sorted(e for e in edits if e[: len(path)] == path):
                if not any(_covers(k, edit) for k in changed):
                    missing.append(
                        f"{stage} reads {'.'.join(path)}; editing {'.'.join(edit)} "
                        f"is not seen (changed keys: {sorted(changed)})"
                    )
    assert missing == [], "\n".join(missing)


# --- where the caches are -------------------------------------------------------------------


@pytest.mark.slow
def test_the_store_and_mlruns_stay_in_the_repository(project: Project) -> None:
    # The stages ran with $SYPS_CACHE_DIR set: the answers and MLflow runs are still the
    # project's own (README, Layout), and nothing of them went to the shared model cache.
    assert (project.root / ".cache" / "store.sqlite").is_file()
    assert (project.root / "mlruns" / "mlflow.db").is_file()
    moved = [p.name for p in project.cache.rglob("*") if p.name.startswith(("store", "mlflow"))]
    assert moved == []


def test_syps_cache_dir_holds_the_model_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from syps.core import runs
    from syps.core.backends import model_identity
    from syps.core.config import ModelSpec

    repo, shared = tmp_path / "repo", tmp_path / "shared"
    repo.mkdir()
    monkeypatch.setenv("DVC_ROOT", str(repo))
    monkeypatch.setenv("SYPS_CACHE_DIR", str(shared))
    # Naming the embedded model hashes its weights once and memoises the hash.
    model_identity(ModelSpec("embedded:smollm2"), runs.cache_dir(), "models.smollm2-135m")
    assert (shared / "hashes.json").is_file()
    assert not (repo / ".cache").exists()
    assert runs.store_location() == str(repo.resolve() / ".cache" / "store.sqlite")


# --- the metrics DVC shows -------------------------------------------------------------------

SCREEN = 200  # columns


def dvc_metric_keys(data: Any, prefix: str = "") -> set[str]:
    """The dotted keys DVC reads from a metrics file: its numbers and strings (DVC leaves out
    nulls and lists)."""
    if isinstance(data, dict):
        return set().union(*(dvc_metric_keys(v, f"{prefix}{k}.") for k, v in data.items()))
    return {prefix.removesuffix(".")} if isinstance(data, int | float | str) else set()


def _first_number(data: dict[str, Any]) -> tuple[str, ...]:
    """The key path of the first number in a nested metrics dict."""
    for key, value in data.items():
        if isinstance(value, dict) and (inner := _first_number(value)):
            return (key, *inner)
        if isinstance(value, int | float):
            return (key,)
    return ()


def _metrics_copy(dest: Path) -> list[str]:
    """What DVC needs to read the committed metrics files (dvc.yaml, .dvc/config, metrics/) under
    the tests' params, as one git commit; returns the protocols that have both files (one
    registered but not run yet has none)."""
    from syps.protocols import PROTOCOLS

    protocols = [
        p
        for p in PROTOCOLS
        if (REPO / "metrics" / f"{p}.json").is_file()
        and (REPO / "metrics" / "summary" / f"{p}.json").is_file()
    ]
    files = ["dvc.yaml", ".dvc/config"]
    files += [f for p in protocols for f in (f"metrics/{p}.json", f"metrics/summary/{p}.json")]
    for rel in files:
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        (dest / rel).write_bytes((REPO / rel).read_bytes())
    params = fixture_params()
    params["protocols"] = {p: params["protocols"][p] for p in protocols}
    write_params(dest / "params.yaml", params)
    _git(dest, "init", "-q")
    _git(dest, "add", "-A")
    _git(dest, "commit", "-qm", "metrics")
    return protocols


def test_dvc_metrics_are_the_headline_files_and_every_number_stays_reachable(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """`dvc metrics show` prints one column per number, so the full files (a few hundred numbers
    each) made lines of ~100,000 characters: the declared metrics are the headline files, and a
    full file, a plain committed output, is read when named."""
    from dvc.cli import main as dvc_main
    from dvc.repo import Repo

    root = tmp_path / "syps"
    protocols = _metrics_copy(root)
    assert "cues" in protocols, "metrics/cues.json and its headline file are committed"

    def read(rel: str) -> Any:
        return json.loads((root / rel).read_text(encoding="utf-8"))

    full = {rel: read(rel) for rel in (f"metrics/{p}.json" for p in protocols)}
    headline = {rel: read(rel) for rel in (f"metrics/summary/{p}.json" for p in protocols)}

    def keys(shown: dict[str, Any]) -> dict[str, set[str]]:
        return {path: dvc_metric_keys(res["data"]) for path, res in shown[""]["data"].items()}

    # A number that only the full file holds moves in the workspace.
    cues = full["metrics/cues.json"]
    path = _first_number(cues)
    node = cues
    for key in path[:-1]:
        node = node[key]
    old = node[path[-1]]
    node[path[-1]] = old + 1
    (root / "metrics" / "cues.json").write_text(json.dumps(cues), encoding="utf-8")

    with contextlib.chdir(root), Repo(str(root)) as repo:
        assert keys(repo.metrics.show()) == {p: dvc_metric_keys(d) for p, d in headline.items()}
        assert keys(repo.metrics.show(targets=list(full))) == {
            p: dvc_metric_keys(d) for p, d in full.items()
        }
        # `dvc metrics diff` names the moved number when its file is a target, and leaves it
        # out by default.
        moved = {".".join(path): {"old": old, "new": old + 1, "diff": 1}}
        assert repo.metrics.diff(targets=["metrics/cues.json"]) == {
            "diff": {"metrics/cues.json": moved}
        }
        assert repo.metrics.diff() == {}  # nothing else moved, no error

        # The first look (README.md): the headline numbers, one a line, within a screen's width.
        capfd.readouterr()
        assert dvc_main(["metrics", "diff", "--all"]) == 0
    lines = capfd.readouterr().out.splitlines()
    assert max(map(len, lines)) <= SCREEN, max(lines, key=len)
    assert {tuple(x.split()[:2]) for x in lines[1:]} == {
        (p, k) for p, d in headline.items() for k in dvc_metric_keys(d)
    }


# --- plots ------------------------------------------------------------------------------------


def _plots_page(root: Path, *args: str, out: Path) -> str:
    """The page `dvc plots <args>` writes, with nothing but the repository's own config."""
    res = subprocess.run(
        ["dvc", "plots", *args, "-o", str(out)], cwd=root, capture_output=True, text=True
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert "failed to load" not in res.stdout + res.stderr, res.stdout + res.stderr
    return (out / "index.html").read_text(encoding="utf-8")


def _plot_ids(root: Path) -> list[str]:
    dvc_yaml = yaml.safe_load((root / "dvc.yaml").read_text(encoding="utf-8"))
    return [next(iter(p)) for p in dvc_yaml["plots"] if isinstance(p, dict)]


def _empty_plots(root: Path) -> list[str]:
    """The plots of dvc.yaml whose every data file holds no row (a CSV with its header alone,
    an empty JSON list)."""

    def no_rows(path: Path) -> bool:
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".json":
            return json.loads(text) == []
        return len([line for line in text.splitlines() if line.strip()]) <= 1

    dvc_yaml = yaml.safe_load((root / "dvc.yaml").read_text(encoding="utf-8"))
    plots = [next(iter(p.items())) for p in dvc_yaml["plots"] if isinstance(p, dict)]
    return [name for name, spec in plots if all(no_rows(root / f) for f in spec["y"])]


@pytest.mark.slow
def test_plots_show_works_offline_and_shows_each_figure_once(
    project: Project, tmp_path: Path
) -> None:
    html = _plots_page(project.root, "show", out=tmp_path / "page")
    # No script comes from the network: the page (.dvc/vega/page.html, set in .dvc/config)
    # carries Vega, Vega-Lite and vega-embed inline.
    sources = re.findall(r"<script\b[^>]*\bsrc\s*=\s*[\"']?([^\"' >]+)", html, flags=re.I)
    assert sources == []
    for lib in ("vega", "vega-lite", "vega-embed"):
        assert f"<script>/* {lib} " in html
    ids = _plot_ids(project.root)
    assert ids
    for plot in ids:
        assert html.count(f"vegaEmbed('#{plot}'") == 1, plot
    # The bar charts (.dvc/plots/bars.json) draw one bar per row: no two rows share a label,
    # which DVC would stack into one bar (SyPS's rates per variant once ran to 2.7, three
    # datasets in each), and their labels are never cut short.
    specs = [json.loads(s) for s in re.findall(r"var spec = (\{.*?\});\n", html, flags=re.S)]
    bars = [s for s in specs if s.get("mark", {}).get("type") == "bar" and "data" in s]
    assert len(bars) >= 5
    for spec in bars:
        y = spec["encoding"]["y"]
        labels = [(r[y["field"]], r["rev"]) for r in spec["data"]["values"]]
        assert len(labels) == len(set(labels)), spec["title"]
        assert y["axis"]["labelLimit"] == 0, spec["title"]


@pytest.mark.slow
def test_plots_diff_compares_the_commit_with_the_workspace(
    project: Project, tmp_path: Path
) -> None:
    """The plot data are committed with the run (plots/, like metrics.json), so a changed
    workspace is drawn beside HEAD, figures included (from DVC's cache)."""
    profile = project.root / "plots" / "cues" / "profile.json"
    original = profile.read_bytes()
    rows = json.loads(original)
    profile.write_text(json.dumps([{**r, "syc_rate": 0.5} for r in rows]), encoding="utf-8")
    try:
        html = _plots_page(project.root, "diff", "HEAD", out=tmp_path / "diff")
    finally:
        profile.write_bytes(original)
    specs = re.findall(r"var spec = (\{.*?\});\n", html, flags=re.S)
    assert len(specs) == len(_plot_ids(project.root))
    profile_rows = next(
        json.loads(s)["data"]["values"] for s in specs if '"plots/cues/profile.json"' in s
    )
    by_rev = {
        rev: sorted(r["syc_rate"] for r in profile_rows if r["rev"] == rev)
        for rev in ("HEAD", "workspace")
    }
    assert by_rev["workspace"] == [0.5] * len(rows)
    assert by_rev["HEAD"] == sorted(r["syc_rate"] for r in rows)
    drawn = [json.loads(spec) for spec in specs]
    # A plot whose files have no rows has no data (at this size: discernment's per-argument bars
    # when no artefact has a baseline spread, its rating plots without ratings, ...); every
    # other has both revisions.
    assert sum("data" not in spec for spec in drawn) <= len(_empty_plots(project.root))
    for spec in (s for s in drawn if "data" in s):
        assert {r["rev"] for r in spec["data"]["values"]} == {"HEAD", "workspace"}


@pytest.mark.slow
def test_rewriting_committed_plot_data_leaves_the_run_clean(project: Project) -> None:
    """plots/ is committed like metrics.json: score rewriting it is the run's result, not a
    change to what ran, so the MLflow run is not marked dirty (a commit made without rerunning
    holds older plot data)."""
    from mlflow import MlflowClient

    stale = project.root / "plots" / "cues" / "size.csv"
    stale.write_text(stale.read_text(encoding="utf-8") + "\n", encoding="utf-8")
    _git(project.root, "commit", "-qam", "plot data older than the code")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(project.root)
        mp.setenv("DVC_ROOT", str(project.root))
        mp.setenv("SYPS_CACHE_DIR", str(project.cache))
        mp.delenv("DVC_EXP_NAME", raising=False)
        _run_stage(project.stages["score@cues"], _Reads(), mp)
        _run_stage(project.stages["mlflow"], _Reads(), mp)
    assert subprocess.run(
        ["git", "status", "--porcelain", "plots"], cwd=project.root, capture_output=True, text=True
    ).stdout.strip(), "score should have rewritten the stale plot data"
    client = MlflowClient(tracking_uri=f"sqlite:///{project.root / 'mlruns' / 'mlflow.db'}")
    runs = client.search_runs(
        [e.experiment_id for e in client.search_experiments()],
        filter_string="attributes.status = 'FINISHED'",
        order_by=["attributes.start_time DESC"],
    )
    newest = next(r for r in runs if "mlflow.parentRunId" not in r.data.tags)
    assert newest.data.tags["git_dirty"] == "false"
