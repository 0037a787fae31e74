"""Shared fixtures."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(scope="session")
def model_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One GGUF conversion of the embedded model for the whole test session; with
    ``SYPS_TEST_MODEL_CACHE`` set, that folder, shared by every pytest process that names it
    (CI's jobs: one conversion for the whole run instead of one per job; two processes that
    convert at once build the copy once, ``hf_resolve.build_once``)."""
    shared = os.environ.get("SYPS_TEST_MODEL_CACHE")
    if shared:
        Path(shared).mkdir(parents=True, exist_ok=True)
        return Path(shared)
    return tmp_path_factory.mktemp("syps-cache")


@pytest.fixture(scope="session")
def postgres() -> Iterator[Any]:
    """One real PostgreSQL server for the session (tests/pg_server.py): a test takes a database
    of its own from it (``pg_database``). Skipped, saying how to run it, where PostgreSQL is not
    installed; a failure instead under SYPS_PG_TESTS=1 (CI)."""
    from pg_server import start_postgres, stop_postgres

    pg = start_postgres("tests/core/test_store.py tests/test_lab.py")
    yield pg
    stop_postgres(pg)


_databases = iter(range(1, 1_000_000))


@pytest.fixture
def pg_database(postgres: Any) -> str:
    """A new, empty database on the session's server: its URL (password included)."""
    return str(postgres.createdb(f"t{next(_databases)}"))


REPO = Path(__file__).resolve().parents[1]

# The researcher's study, which no test but the checks of the shipped study (``-m shipped``)
# may read: an audit hook fails any test that opens it (``copy_repo`` copies it into a copy of
# the repository, whose study that copy's own commands then read). In every test of both tiers,
# in every process pytest runs; tests/test_fixture_params.py also runs the tests that build
# their parameters from a file on an edited study, which catches what a subprocess reads.
USER_PARAMS = REPO / "params.yaml"
_guard = {"on": False}


def _no_user_params(event: str, args: tuple[Any, ...]) -> None:
    if event != "open" or not _guard["on"] or not args or isinstance(args[0], int):
        return
    try:
        name = os.fsdecode(args[0])
    except TypeError:
        return
    if name.endswith("params.yaml") and Path(os.path.abspath(name)) == USER_PARAMS:
        raise PermissionError(
            f"a test opened the researcher's study {USER_PARAMS}: build parameters from "
            "conftest.read_params() (tests/fixtures/params.yaml), or mark the test shipped"
        )


sys.addaudithook(_no_user_params)


@pytest.fixture(autouse=True)
def _not_the_users_study(request: pytest.FixtureRequest) -> Iterator[None]:
    _guard["on"] = request.node.get_closest_marker("shipped") is None
    yield
    _guard["on"] = False


@pytest.fixture(autouse=True)
def _outside_the_study(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every test starts in an empty folder outside any study, so that a command which reads
    the study it runs in (``syps score``) never reads the researcher's params.yaml; a test that
    needs a study builds one and changes into it. A shared store or tracking server the
    developer's shell names (``SYPS_STORE``, ``MLFLOW_TRACKING_URI``) is not the tests': a test
    that needs one sets it."""
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))
    for name in ("SYPS_STORE", "MLFLOW_TRACKING_URI"):
        monkeypatch.delenv(name, raising=False)


@contextlib.contextmanager
def fluent_store(uri: str) -> Iterator[None]:
    """MLflow's fluent API (``mlflow.log_feedback``: what the UI does) on the store ``uri``
    for a block. Its store is process-wide, and ``mlflow.set_tracking_uri`` also sets
    ``MLFLOW_TRACKING_URI``, which syps reads: both are cleared after (the test's own
    environment stays as it set it)."""
    import mlflow

    saved = os.environ.get("MLFLOW_TRACKING_URI")
    mlflow.set_tracking_uri(uri)
    try:
        yield
    finally:
        mlflow.set_tracking_uri(None)  # type: ignore[arg-type]  # None unsets it (MLflow's own)
        if saved is not None:
            os.environ["MLFLOW_TRACKING_URI"] = saved


# The tests' parameters, never the working params.yaml (the researcher's study: an edit or a
# `dvc exp run -S` must not break tests): the shared keys of tests/fixtures/params.yaml and, for
# every protocol in the registry, its folder's defaults (syps/protocols/<name>/params.yaml), so
# a new protocol needs no copy under tests/. Written once per session to FIXTURE_PARAMS.
SHARED_PARAMS = Path(__file__).resolve().parent / "fixtures" / "params.yaml"


def _yaml(path: Path) -> Any:
    from syps.core.config import read_yaml

    return read_yaml(path.read_text(encoding="utf-8"))


def fixture_params() -> dict[str, Any]:
    """The tests' params as plain data: the shared keys and every registered protocol's
    default block."""
    from syps.protocols import PROTOCOLS

    raw: dict[str, Any] = _yaml(SHARED_PARAMS)
    folder = REPO / "syps" / "protocols"
    # A protocol's folder params.yaml where it has one; its params type's defaults otherwise.
    raw["protocols"] = {
        name: _yaml(folder / name / "params.yaml")
        if (folder / name / "params.yaml").is_file()
        else {}
        for name in PROTOCOLS
    }
    return raw


def _write_fixture() -> Path:
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="syps-fixture-")) / "params.yaml"
    write_params(path, fixture_params())
    return path


def read_params(path: Path | None = None) -> dict[str, Any]:
    """A params file as plain data, read the way syps reads it (YAML 1.2: ``YES`` is a string);
    by default the tests' params."""
    raw: dict[str, Any] = _yaml(path) if path is not None else fixture_params()
    return raw


def write_params(path: Path, raw: dict[str, Any]) -> Path:
    """Write ``raw`` as a params file (PyYAML quotes keys like ``YES``, so any reader agrees)."""
    import yaml

    path.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    return path


FIXTURE_PARAMS = _write_fixture()


def copy_repo(dest: Path, skip: tuple[str, ...] = ()) -> None:
    """Copy the repository as a fresh clone would see it, plus untracked files that git does
    not ignore (work in progress must be tested too); paths starting with ``skip`` are left out."""
    import shutil
    import subprocess

    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\0")
    guarded, _guard["on"] = _guard["on"], False  # the copy's study is the user's: copied
    try:
        for rel in filter(None, listed):
            src = REPO / rel
            if src.is_file() and not rel.startswith(skip):
                (dest / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dest / rel)
    finally:
        _guard["on"] = guarded


def tiny_params(root: Path) -> None:
    """Write the fixture params, shrunk to two items per dataset, six new tokens and 200
    resamples, as root/params.yaml (a repository copy's own params.yaml is the user's study)."""
    params = read_params()
    cues = params["protocols"]["cues"]
    cues["data"]["limit"] = 2
    cues["max_new_tokens"] = {"OEQ": 6, "AITA-YTA": 6, "SS": 6}
    params["score"]["bootstrap"] = 200
    shrink_protocols(params)
    write_params(root / "params.yaml", params)


def shrink_protocols(params: dict[str, Any]) -> None:
    """The protocols at the smallest size that still runs every stage: one item, two
    repetitions, eight new tokens (later turns may then be mostly skipped children, which is
    a path worth running too)."""
    blocks = params.get("protocols", {})
    if "pushback" in blocks:
        blocks["pushback"]["limit"] = 1
        blocks["pushback"]["generation"].update(max_new_tokens=8)
    if "discernment" in blocks:
        blocks["discernment"]["limit"] = 1
        blocks["discernment"]["generation"].update(reps=2, max_new_tokens=8)
    if "betting" in blocks:
        blocks["betting"]["n_items"] = 1
        blocks["betting"]["generation"].update(reps=2, max_new_tokens=8)
    if "adaptive" in blocks:
        blocks["adaptive"].update(limit=1, max_turns=1)
        blocks["adaptive"]["generation"].update(max_new_tokens=8)
        params["simulator"]["max_new_tokens"] = 8


def check_rule_label(dataset: str, mapping: dict[str, int], response: str, verdict: str) -> None:
    """The rule label of ``response`` is ``verdict``, valued by ``mapping`` (NaN for UNCLEAR),
    with evidence taken from the response itself."""
    import math

    from syps.core.labeling import UNCLEAR
    from syps.protocols.cues.labels import rule_label

    label = rule_label(dataset, response, mapping)
    assert label.verdict == verdict
    if verdict == UNCLEAR:
        assert math.isnan(label.value)  # UNCLEAR is NaN, never 0
    else:
        assert label.value == float(mapping[verdict])
        assert label.evidence and label.evidence in response


# --- the suite's scripted backend and judge (tests/fakes.py) ---------------------------------


@pytest.fixture
def fake_backend(monkeypatch: pytest.MonkeyPatch) -> Any:
    """A ``fakes.FakeModels`` in place of ``syps.core.backends.BACKENDS["hf"]`` for this test:
    every hf model (generator and judge) is a scripted ``fakes.FakeBackend``. Set its script
    (``reply``, ``score``) and knobs (``batch``, ``crash_after``) before a stage loads a model;
    ``loads``, ``made``, ``requests`` and ``judge_prompts`` record what happened."""
    from fakes import install_backend

    return install_backend(monkeypatch)


@pytest.fixture
def fake_judge() -> Any:
    """A ``fakes.FakeJudge``: a scripted stand-in for ``syps.protocols.base.Judge`` that
    records every call."""
    from fakes import FakeJudge

    return FakeJudge()


def enter_project(monkeypatch: pytest.MonkeyPatch, root: Path) -> Path:
    """Work in ``root`` as in a repository of its own: the working directory, the DVC root, a
    cache of its own, and no git repository above it (so provenance reads none)."""
    monkeypatch.chdir(root)
    monkeypatch.setenv("DVC_ROOT", str(root))
    monkeypatch.setenv("SYPS_CACHE_DIR", str(root / "cache"))
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(root.parent))
    return root


def cues_params(limit: int = 2) -> dict[str, Any]:
    """The tests' params for SyPS (protocol ``cues``) alone on the built-in sample: the first
    ``limit`` items of each dataset (the CSVs by absolute path, so any working directory will
    do), 20 bootstrap resamples, every other protocol switched off."""
    raw = read_params()
    cues = raw["protocols"]["cues"]
    cues["data"]["limit"] = limit
    cues["data"]["files"] = {d: str(REPO / f) for d, f in cues["data"]["files"].items()}
    raw["score"]["bootstrap"] = 20
    for name, block in raw["protocols"].items():
        if name != "cues":
            block["enabled"] = False
    return raw


def lint_first_turn(protocol: Any, params: Any, items: Any) -> dict[str, Any]:
    """What the variants stage does with an items table: read it, build the first turn's
    conversations once, and lint them (``Protocol.lint``'s report, or its LintError)."""
    from syps.core.conversation import first_turn

    records = protocol.read_items(items)
    return protocol.lint(params, records, first_turn(protocol, params, records))  # type: ignore[no-any-return]


# The slow tier's one run. The end-to-end, determinism and MLflow checks assert on one `dvc
# repro` of the tiny study in a fresh copy, made once per pytest process (CI runs their files
# in one job, .ci/run). A test that changes a study works on a copy of it (`copy_run`), so the
# run stays as the repro left it for every other test. The git identity and dates are fixed so
# that every copy of the same files is the same commit, and MLflow records the same tags.
GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
    "GIT_AUTHOR_DATE": "2025-01-01T00:00:00+0000",
    "GIT_COMMITTER_DATE": "2025-01-01T00:00:00+0000",
}


def run_env(model_cache: Path | None = None) -> dict[str, str]:
    """The environment of a command in a copy: the fixed git identity, the session's model
    cache, and no DVC variables of an experiment this session may itself run in."""
    env = {**os.environ, **GIT_IDENTITY}
    if model_cache is not None:
        env["SYPS_CACHE_DIR"] = str(model_cache)
    for var in ("DVC_ROOT", "DVC_EXP_NAME"):
        env.pop(var, None)
    return env


def fresh_copy(dest: Path) -> None:
    """A git copy of the repository with the tiny params, committed."""
    copy_repo(dest)
    tiny_params(dest)
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "tiny"]):
        subprocess.run(cmd, cwd=dest, check=True, env=run_env())


def repro(root: Path, env: dict[str, str], *args: str) -> str:
    """`dvc repro` in ``root``, which must succeed; returns what it printed."""
    done = subprocess.run(
        ["dvc", "repro", *args], cwd=root, env=env, capture_output=True, text=True, timeout=1200
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


@dataclass(frozen=True)
class OneRun:
    """``pristine``: the committed copy before any run (copy it for another run from the same
    commit); ``root``: a copy of it after one cold `dvc repro`, which printed ``log``; ``env``:
    the environment it ran in. Read ``root``; change only a `copy_run` of it."""

    pristine: Path
    root: Path
    env: dict[str, str]
    log: str


@pytest.fixture(scope="session")
def one_run(tmp_path_factory: pytest.TempPathFactory, model_cache: Path) -> OneRun:
    pristine = tmp_path_factory.mktemp("pristine") / "syps"
    fresh_copy(pristine)
    root = tmp_path_factory.mktemp("one-run") / "syps"
    shutil.copytree(pristine, root, symlinks=True)
    assert not (root / ".cache").exists()  # a cold store: the run generates everything
    env = run_env(model_cache)
    return OneRun(pristine, root, env, repro(root, env))


def copy_run(run: OneRun, dest: Path) -> Path:
    """A copy of the run to change, without its MLflow store: a store's experiment keeps its
    artifacts at an absolute path, which in a copy would still be the run's. The copy's first
    `dvc repro` logs the run to a store of its own and runs nothing else."""
    store = run.root / "mlruns"

    def _store_files(folder: str, names: list[str]) -> set[str]:
        return {n for n in names if n != ".gitignore"} if Path(folder) == store else set()

    shutil.copytree(run.root, dest, symlinks=True, ignore=_store_files)
    return dest
