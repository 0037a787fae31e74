"""MLflow logging: one parent run per pipeline run, one child run per (model, dataset).

Only the score stage logs, so a ``dvc repro`` that skips unchanged stages creates no duplicate
runs. mlflow is imported lazily: it is slow to import and only this stage needs it.
"""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class ChildRun:
    name: str
    params: dict[str, str]
    metrics: dict[str, float]
    artifacts: list[Path] = field(default_factory=list)


def tracking_uri(mlruns: Path) -> str:
    return f"sqlite:///{mlruns.resolve() / 'mlflow.db'}"


def git_info(root: Path, exclude: tuple[str, ...] = ("dvc.lock",)) -> dict[str, str]:
    """Commit and dirty flag of ``root``; 'unknown' outside a git checkout.

    ``exclude`` lists files the running pipeline itself rewrites (dvc.lock, the metrics file):
    they are the run's results, not a change to what produced them.
    """

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()

    try:
        commit = git("rev-parse", "HEAD")
        top = Path(git("rev-parse", "--show-toplevel")).resolve()
        inside = [(root / p).resolve() for p in exclude if (root / p).resolve().is_relative_to(top)]
        # A path outside the checkout cannot make it dirty, and git rejects it as a pathspec.
        pathspec = [".", *(f":(exclude){p}" for p in inside)]
        status = git("status", "--porcelain", "--untracked-files=no", "--", *pathspec)
    except (subprocess.CalledProcessError, FileNotFoundError):
        return {"git_commit": "unknown", "git_dirty": "unknown"}
    return {"git_commit": commit, "git_dirty": str(bool(status)).lower()}


def log_pipeline_run(
    mlruns: Path, experiment: str, run_name: str, tags: dict[str, str], children: list[ChildRun]
) -> str:
    """Log a parent run with its tags and one nested child run each; returns the parent run id."""
    import mlflow
    from mlflow.entities import Metric, Param, RunTag

    mlruns.mkdir(parents=True, exist_ok=True)
    client = mlflow.MlflowClient(tracking_uri=tracking_uri(mlruns))
    exp = client.get_experiment_by_name(experiment)
    exp_id = (
        exp.experiment_id
        if exp
        else client.create_experiment(
            experiment, artifact_location=(mlruns.resolve() / "artifacts").as_uri()
        )
    )
    parent = client.create_run(exp_id, run_name=run_name, tags=tags).info.run_id
    now = int(time.time() * 1000)
    for child in children:
        run_id = client.create_run(
            exp_id, run_name=child.name, tags={"mlflow.parentRunId": parent}
        ).info.run_id
        client.log_batch(
            run_id,
            metrics=[Metric(k, float(v), now, 0) for k, v in child.metrics.items()],
            params=[Param(k, v) for k, v in child.params.items()],
            tags=[RunTag(k, v) for k, v in tags.items()],
        )
        for path in child.artifacts:
            client.log_artifact(run_id, str(path))
        client.set_terminated(run_id)
    client.set_terminated(parent)
    return str(parent)
