"""A collaborator's first day: clone, `dvc repro`, and the MLflow store has the run.

Every input of the mlflow stage is a deterministic function of the commit, so in a fresh clone
they hash as the committed dvc.lock records them; the store (mlruns/) is local and never
versioned. Before the stage had an output, DVC therefore skipped it in every clone but the
committing one, and the clone's store stayed empty. The end-to-end tests did not see it: they
run with their own small params.yaml, which changes the stage's params and so reruns it.

This test runs the shipped study as committed (its params.yaml, its dvc.lock) on a copy of
what git tracks, the way CI's clean clone does, so it is marked ``shipped``: a researcher's
edited study is not what it checks. It is CI's check that the commit reproduces: `dvc repro`
on a cold response store must leave dvc.lock and every committed output byte for byte as they
are, and a second `dvc repro` logs nothing new.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import copy_repo

pytestmark = pytest.mark.shipped

GIT = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
}
# One child per (protocol, model, dataset) of the shipped study: SyPS's three datasets and one
# each of pushback, discernment and betting, for the embedded model.
CHILDREN = {
    "smollm2-135m/OEQ",
    "smollm2-135m/AITA-YTA",
    "smollm2-135m/SS",
    "pushback/smollm2-135m/builtin-mcq",
    "discernment/smollm2-135m/builtin",
    "betting/smollm2-135m/truthfulqa",
    "adaptive/smollm2-135m/truthfulqa",
}


def _run(cmd: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=2400)
    assert done.returncode == 0, f"{' '.join(cmd)}:\n{done.stdout}\n{done.stderr}"
    return done


def _state(root: Path, env: dict[str, str]) -> tuple[str, str]:
    """What git sees (every untracked file too) and the whole diff against HEAD."""
    status = _run(["git", "status", "--porcelain", "--untracked-files=all"], root, env).stdout
    diff = _run(["git", "diff", "HEAD", "--binary"], root, env).stdout
    return status, diff


# What the clone's store holds, read in a process of its own: MLflow keeps one database engine
# per tracking URI for the life of a process, so after the store is moved away this process
# would go on reading the old file through it.
READ_STORE = """
import json, sys
import mlflow
import pandas as pd

root, tmp = sys.argv[1], sys.argv[2]
client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{root}/mlruns/mlflow.db")
exp = client.get_experiment_by_name("syps")
if exp is None:
    print(json.dumps(None))
    sys.exit()
runs = client.search_runs([exp.experiment_id], max_results=1000)
out = {"parents": [], "children": {}}
for r in runs:
    parent = r.data.tags.get("mlflow.parentRunId")
    if parent is None:
        out["parents"].append(
            {"id": r.info.run_id, "name": r.info.run_name,
             "config": r.data.tags["syps.config_sha256"]}
        )
        continue
    ids, token = [], None
    while True:
        page = client.search_traces(
            locations=[exp.experiment_id], run_id=r.info.run_id, max_results=500,
            page_token=token, include_spans=False,
        )
        ids += [t.info.trace_id for t in page]
        token = page.token
        if not token:
            break
    index = client.download_artifacts(r.info.run_id, "traces.csv", tmp)
    out["children"][r.info.run_name] = {
        "parent": parent,
        "traces": sorted(ids),
        "indexed": sorted(pd.read_csv(index, dtype=str)["trace_id"]),
    }
print(json.dumps(out))
"""


def _store(root: Path, tmp: Path, env: dict[str, str]) -> dict[str, Any]:
    """The pipeline runs of experiment ``syps`` in the clone's store (id, name, config hash)
    and, by name, each child's parent, its trace ids and the trace ids its traces.csv names."""
    tmp.mkdir(parents=True, exist_ok=True)
    read = _run([sys.executable, "-c", READ_STORE, str(root), str(tmp)], root, env)
    found = json.loads(read.stdout)
    assert found is not None, "the clone's MLflow store has no experiment 'syps'"
    return dict(found)


@dataclass(frozen=True)
class Clone:
    """The shipped study cloned and reproduced once: its root, environment, tmp folder, what
    git saw and the dvc.lock bytes before the run, and the first `dvc repro`'s output."""

    root: Path
    env: dict[str, str]
    tmp: Path
    committed: tuple[str, str]
    lock: bytes
    first: str


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory, model_cache: Path) -> Clone:
    """One `dvc repro` of the shipped study in a fresh copy on a cold store, which every test
    here asserts on (the rerun test last: it moves the store)."""
    tmp = tmp_path_factory.mktemp("fresh")
    root = tmp / "clone"
    copy_repo(root)
    env = {**os.environ, **GIT, "SYPS_CACHE_DIR": str(model_cache)}
    for var in ("DVC_ROOT", "DVC_EXP_NAME", "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"):
        env.pop(var, None)
    _run(["git", "init", "-q"], root, env)
    _run(["git", "add", "-A"], root, env)
    _run(["git", "commit", "-qm", "as committed"], root, env)
    assert not (root / "mlruns" / "mlflow.db").exists()
    committed = _state(root, env)
    lock = (root / "dvc.lock").read_bytes()
    first = _run(["dvc", "repro"], root, env).stdout
    return Clone(root, env, tmp, committed, lock, first)


def test_a_fresh_clone_reproduces_the_commit(clone: Clone) -> None:
    # dvc.lock and every committed output (metrics, plot data) as committed: a function of the
    # commit alone, not of this machine's cold store or of the run.
    assert "Running stage 'mlflow'" in clone.first, clone.first
    assert (clone.root / "dvc.lock").read_bytes() == clone.lock
    assert _state(clone.root, clone.env) == clone.committed
    assert _run(["dvc", "status", "--json"], clone.root, clone.env).stdout.strip() == "{}"


@pytest.mark.parametrize("protocol", ["cues", "pushback", "discernment", "betting", "adaptive"])
def test_syps_score_in_the_study_prints_its_metrics(clone: Clone, protocol: str) -> None:
    """`syps score --protocol <p>` on the label stage's parquet, without options, inside the
    study, scores as the stage did (the study's seed, score block and protocol params, said in
    one line): every number of the committed metrics/<p>.json, NaN as null."""
    labels = clone.root / "out" / "protocols" / protocol / "labels" / "smollm2-135m.parquet"
    done = _run(
        ["syps", "score", "--protocol", protocol, str(labels)], clone.root / "out", clone.env
    )
    assert json.loads(done.stdout) == json.loads(
        (clone.root / "metrics" / f"{protocol}.json").read_text(encoding="utf-8")
    )
    [said] = [line for line in done.stderr.splitlines() if line.startswith("syps score:")]
    assert said.startswith(f"syps score: as the study in {clone.root / 'params.yaml'} scores it")
    assert _state(clone.root, clone.env) == clone.committed  # scoring wrote nothing


def test_a_fresh_clone_logs_its_run_once(clone: Clone) -> None:
    root, env, tmp_path = clone.root, clone.env, clone.tmp
    committed, lock = clone.committed, clone.lock
    first_store = _store(root, tmp_path / "dl1", env)
    [parent] = first_store["parents"]
    head = _run(["git", "rev-parse", "HEAD"], root, env).stdout.strip()
    assert parent["name"] == f"{head[:7]}-{parent['config'][:8]}"
    children = first_store["children"]
    assert set(children) == CHILDREN
    for name, child in children.items():
        # Every child's conversations are traces in this clone's store, each one named in the
        # child's own index.
        assert child["parent"] == parent["id"], name
        assert child["traces"], f"{name}: no traces"
        assert child["indexed"] == child["traces"], name

    # Nothing changed: nothing runs, nothing is logged, nothing in git moves.
    again = _run(["dvc", "repro"], root, env)
    assert "Running stage" not in again.stdout, again.stdout
    assert _store(root, tmp_path / "dl2", env) == first_store
    assert _state(root, env) == committed

    # The marker lives with the store: a store moved away (or deleted) gets the run again on
    # the next repro, and only the mlflow stage runs for it.
    shutil.move(root / "mlruns", tmp_path / "old-mlruns")
    _run(["git", "checkout", "--", "mlruns/.gitignore"], root, env)
    moved = _run(["dvc", "repro"], root, env)
    assert moved.stdout.count("Running stage") == 1, moved.stdout
    assert "Running stage 'mlflow'" in moved.stdout
    new_store = _store(root, tmp_path / "dl3", env)
    [new_parent] = new_store["parents"]
    assert new_parent["id"] != parent["id"] and new_parent["name"] == parent["name"]
    assert {n: len(c["traces"]) for n, c in new_store["children"].items()} == {
        n: len(c["traces"]) for n, c in children.items()
    }
    assert (root / "dvc.lock").read_bytes() == lock
    assert _state(root, env) == committed
