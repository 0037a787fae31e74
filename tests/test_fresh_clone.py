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

import os
import shutil
import subprocess
from pathlib import Path

import pandas as pd
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


def _store(root: Path) -> tuple[list, dict[str, list]]:  # type: ignore[type-arg]
    """The parent runs of experiment ``syps`` in the clone's store, and each child run's trace
    ids by the child's name (the parent's children only)."""
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{root / 'mlruns' / 'mlflow.db'}")
    exp = client.get_experiment_by_name("syps")
    assert exp is not None, "the clone's MLflow store has no experiment 'syps'"
    runs = client.search_runs([exp.experiment_id], max_results=1000)
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    traces: dict[str, list] = {}  # type: ignore[type-arg]
    for r in runs:
        if "mlflow.parentRunId" not in r.data.tags:
            continue
        ids, token = [], None
        while True:
            page = client.search_traces(
                locations=[exp.experiment_id],
                run_id=r.info.run_id,
                max_results=500,
                page_token=token,
                include_spans=False,
            )
            ids += [t.info.trace_id for t in page]
            token = page.token
            if not token:
                break
        traces[r.info.run_name] = sorted(ids)
    return parents, traces


def _indexed_traces(root: Path, run_id: str, tmp: Path) -> list[str]:
    """The trace ids a child run's traces.csv artifact names."""
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{root / 'mlruns' / 'mlflow.db'}")
    path = client.download_artifacts(run_id, "traces.csv", str(tmp))
    return sorted(pd.read_csv(path, dtype=str)["trace_id"])


def test_a_fresh_clone_logs_its_run_once_and_stays_clean(tmp_path: Path, model_cache: Path) -> None:
    root = tmp_path / "clone"
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

    first = _run(["dvc", "repro"], root, env)
    assert "Running stage 'mlflow'" in first.stdout, first.stdout
    # dvc.lock and every committed output (metrics, plot data) as committed: a function of the
    # commit alone, not of this machine's cold store or of the run.
    assert (root / "dvc.lock").read_bytes() == lock
    assert _state(root, env) == committed
    assert _run(["dvc", "status", "--json"], root, env).stdout.strip() == "{}"

    parents, traces = _store(root)
    assert len(parents) == 1
    parent = parents[0]
    head = _run(["git", "rev-parse", "HEAD"], root, env).stdout.strip()
    assert parent.info.run_name == f"{head[:7]}-{parent.data.tags['syps.config_sha256'][:8]}"
    assert set(traces) == CHILDREN
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{root / 'mlruns' / 'mlflow.db'}")
    for name, ids in traces.items():
        # Every child's conversations are traces in this clone's store, each one named in the
        # child's own index.
        [child] = client.search_runs([parent.info.experiment_id], f"run_name = '{name}'")
        assert child.data.tags["mlflow.parentRunId"] == parent.info.run_id
        assert ids, f"{name}: no traces"
        assert _indexed_traces(root, child.info.run_id, tmp_path / name) == ids, name

    # Nothing changed: nothing runs, nothing is logged, nothing in git moves.
    again = _run(["dvc", "repro"], root, env)
    assert "Running stage" not in again.stdout, again.stdout
    parents_again, traces_again = _store(root)
    assert [p.info.run_id for p in parents_again] == [parent.info.run_id]
    assert traces_again == traces
    assert _state(root, env) == committed

    # The marker lives with the store: a store moved away (or deleted) gets the run again on
    # the next repro, and only the mlflow stage runs for it.
    shutil.move(root / "mlruns", tmp_path / "old-mlruns")
    _run(["git", "checkout", "--", "mlruns/.gitignore"], root, env)
    moved = _run(["dvc", "repro"], root, env)
    assert moved.stdout.count("Running stage") == 1, moved.stdout
    assert "Running stage 'mlflow'" in moved.stdout
    parents_moved, traces_moved = _store(root)
    assert len(parents_moved) == 1 and parents_moved[0].info.run_id != parent.info.run_id
    assert set(traces_moved) == CHILDREN
    assert {n: len(t) for n, t in traces_moved.items()} == {n: len(t) for n, t in traces.items()}
    assert (root / "dvc.lock").read_bytes() == lock
    assert _state(root, env) == committed
