"""MLflow logging: one parent run per pipeline run, one child run per (protocol, model, dataset),
and one run per judge validation (``syps judge validate``), tagged ``syps.kind=judge-validation``.
The layout (tags, names, artifacts) is :mod:`syps.core.runlayout`'s.

Of the pipeline, only the mlflow stage logs, so a ``dvc repro`` that skips unchanged stages
creates no duplicate runs. mlflow is imported lazily: it is slow to import and only logging
needs it.
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from syps.core.io import InputError
from syps.core.runlayout import (
    KIND_TAG,
    LOGGED_ARTIFACTS_TAG,
    METRICS_TABLE,
    PROTOCOL_PARAM,
    RESULTS_TAG,
    TRACE_INDEX,
    child_tags,
    is_pipeline_parent,
    metrics_table_json,
)
from syps.core.traces import TraceRecord, log_traces, trace_index
from syps.core.urls import redact

if TYPE_CHECKING:
    import mlflow
    import pandas as pd


@dataclass(frozen=True)
class ChildRun:
    """One child of a pipeline run (``name``: see :mod:`syps.core.runlayout`).

    ``protocol`` is logged as the tag ``syps.protocol`` and the param ``protocol``.
    """

    name: str
    params: dict[str, str]
    metrics: dict[str, float]
    artifacts: list[Path | tuple[Path, str]] = field(default_factory=list)
    protocol: str = ""
    # Its conversations, logged as traces linked to it (see syps.core.traces).
    traces: Sequence[TraceRecord] = ()
    # Every metric, ``metrics`` included, logged as its metrics table (runlayout.METRICS_TABLE);
    # empty: no table.
    table: Mapping[str, float] = field(default_factory=dict)
    # Its tags; None: the parent's.
    tags: Mapping[str, str] | None = None
    # Once its traces are logged: the artifacts to log in place of ``artifacts``, given its
    # trace index (runlayout.TRACE_INDEX) and a scratch folder for rewritten copies, so a
    # table of conversations can name each row's trace (its protocol's ``link_traces``).
    link: Callable[[pd.DataFrame, Path], Sequence[Artifact]] | None = None


# MLflow's own variable naming the tracking server (or database) to log to; its credentials go
# in MLflow's MLFLOW_TRACKING_USERNAME / MLFLOW_TRACKING_PASSWORD (or a token), which MLflow reads
# itself: syps never reads, prints or logs them.
TRACKING_ENV = "MLFLOW_TRACKING_URI"


def tracking_uri(mlruns: Path) -> str:
    """Where runs are logged and read: ``MLFLOW_TRACKING_URI`` where it is set (a lab's tracking
    server, or another database), else the repository's own store, ``mlruns/mlflow.db``.
    ``mlruns`` stays the clone's folder either way: the mlflow stage's marker and the lock that
    serialises logging lie there."""
    return _named() or f"sqlite:///{mlruns.resolve() / 'mlflow.db'}"


def _named() -> str:
    """What ``MLFLOW_TRACKING_URI`` names ("" where it is unset or blank)."""
    return os.environ.get(TRACKING_ENV, "").strip()


def on_server() -> bool:
    """Whether runs go to ``MLFLOW_TRACKING_URI`` rather than the repository's store."""
    return bool(_named())


def refusal(error: BaseException) -> str | None:
    """The one line for a tracking server's refusal of the credentials (HTTP 401 or 403), or
    None for any other error. The server is named by :func:`shown`; nothing is logged by then,
    as the stage's first call reads the experiment."""
    code = str(getattr(error, "error_code", ""))
    mlflow_error = any(c.__name__ == "MlflowException" for c in type(error).__mro__)
    if not mlflow_error or code not in REFUSED:
        return None
    return (
        f"{redact(_named())}: the tracking server refused the "
        f"credentials ({code}: check MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD); "
        "nothing was logged"
    )


# MLflow's error codes for HTTP 401 and 403.
REFUSED = ("UNAUTHENTICATED", "CUSTOMER_UNAUTHORIZED", "PERMISSION_DENIED")


def existing_store(mlruns: Path) -> str:
    """The tracking URI of a command that reads runs: a server's as it is, the repository's
    only if its store exists (opening a missing SQLite file would create an empty store)."""
    if not on_server() and not (mlruns / "mlflow.db").is_file():
        raise InputError(
            f"{mlruns}: no MLflow store (mlflow.db) here; run dvc repro first, or set "
            f"{TRACKING_ENV} to a tracking server"
        )
    return tracking_uri(mlruns)


def pipeline_run_name(git: dict[str, str], config_sha256: str, exp_name: str = "") -> str:
    """A readable name that tells pipeline runs apart: ``[<dvc exp>-]<commit>[-dirty]-<config>``.

    ``<commit>`` is the short sha (``unknown`` outside git), ``-dirty`` marks uncommitted
    changes, and ``<config>`` is the first 8 hex digits of the hash of the params and templates
    that ran, so two runs on one commit with different uncommitted cues get different names.
    """
    commit = git.get("git_commit", "unknown")[:7]
    dirty = "-dirty" if git.get("git_dirty") == "true" else ""
    return f"{exp_name + '-' if exp_name else ''}{commit}{dirty}-{config_sha256[:8]}"


def _unique_name(client: mlflow.MlflowClient, exp_id: str, name: str) -> str:
    """``name``, or ``name.2``, ``name.3``, ... if runs of the experiment already have it: the
    same config rerun on the same commit (with other uncommitted code, or forced) is another
    run, and a name must point at one run."""
    taken: set[str] = set()
    token = None
    while True:
        page = client.search_runs([exp_id], "", max_results=1000, page_token=token)
        taken |= {r.info.run_name or "" for r in page}
        token = page.token
        if not token:
            break
    n, candidate = 1, name
    while candidate in taken:
        n += 1
        candidate = f"{name}.{n}"
    return candidate


def _experiment(mlruns: Path, experiment: str) -> tuple[mlflow.MlflowClient, str]:
    """A client on ``mlruns`` and the id of ``experiment``, created with its artifacts beside."""
    import mlflow  # heavy: slow to import, and only logging needs it

    mlruns.mkdir(parents=True, exist_ok=True)
    client = mlflow.MlflowClient(tracking_uri=tracking_uri(mlruns))
    exp = client.get_experiment_by_name(experiment)
    if exp is not None:
        return client, str(exp.experiment_id)
    # A server keeps the artifacts where it was told to (its artifact store); the repository's
    # store beside its database, in mlruns/artifacts.
    local = None if on_server() else (mlruns.resolve() / "artifacts").as_uri()
    return client, str(client.create_experiment(experiment, artifact_location=local))


Artifact = Path | tuple[Path, str]


def _log_paths(client: mlflow.MlflowClient, run_id: str, paths: Sequence[Artifact]) -> None:
    """Log files as artifacts, and directories as artifact folders named after the directory.
    In a ``(path, folder)`` pair, ``folder`` is the artifact folder that receives the file or
    the directory's contents: ``(templates.json, "protocols/pushback")`` logs
    ``protocols/pushback/templates.json`` (see :func:`syps.core.runlayout.protocol_templates`)."""
    for entry in paths:
        folder: str | None
        if isinstance(entry, tuple):
            path, folder = entry
        else:
            path, folder = entry, entry.name if entry.is_dir() else None
        if path.is_dir():
            client.log_artifacts(run_id, str(path), artifact_path=folder)
        else:
            client.log_artifact(run_id, str(path), artifact_path=folder)


@contextmanager
def exclusive(mlruns: Path) -> Iterator[None]:
    """Hold the MLflow store for one process at a time.

    Two queued experiments (`dvc queue start -j 2`) reach their score stage at once: on a
    fresh ``mlflow.db`` both run MLflow's schema migrations and one fails ("table
    _alembic_tmp_experiments already exists"), and both may create the experiment. An
    exclusive lock on ``mlruns/.syps.lock`` serialises them; logging takes seconds, and the
    kernel drops the lock of a process that dies.
    """
    mlruns.mkdir(parents=True, exist_ok=True)
    with open(mlruns / ".syps.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file is closed
        yield


def log_pipeline_run(
    mlruns: Path,
    experiment: str,
    run_name: str,
    tags: dict[str, str],
    children: list[ChildRun],
    artifacts: Sequence[Artifact] = (),
) -> str:
    """Log a parent run with its tags and artifacts (files or folders), and one nested child
    run each; returns the parent run id. A ``run_name`` the experiment already holds gets a
    ``.2``, ``.3``, ... suffix (:func:`run_name_of` reads it back). One process at a time (see
    :func:`exclusive`)."""
    with exclusive(mlruns):
        return _log_pipeline_run(mlruns, experiment, run_name, tags, children, artifacts)


def logged_run(mlruns: Path, experiment: str, results: str) -> tuple[str, str] | None:
    """The id and name of a finished pipeline run of ``experiment`` in the store (a server's,
    see :func:`tracking_uri`) whose results hash (``runlayout.RESULTS_TAG``) is ``results``;
    None if it holds none (a new store or server, a deleted run)."""
    import mlflow  # heavy: mlflow, only to read the store

    client = mlflow.MlflowClient(tracking_uri=tracking_uri(mlruns))
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        return None
    found = client.search_runs(
        [exp.experiment_id],
        f"tags.`{RESULTS_TAG}` = '{results}' and attributes.status = 'FINISHED'",
        max_results=50,
        order_by=["attributes.start_time ASC"],
    )
    first = next((r for r in found if is_pipeline_parent(r.data.tags)), None)
    return None if first is None else (first.info.run_id, first.info.run_name or "")


def logged_marker(experiment: str) -> str:
    """The text of ``mlruns/pipeline-logged.json``, the mlflow stage's one DVC output.

    The store is local to each clone and never versioned, while every input of the mlflow
    stage is a deterministic function of the commit: without an output, a fresh clone's
    ``dvc repro`` would find the stage's dependencies as ``dvc.lock`` records them and skip it,
    leaving that clone's store empty. So the stage writes this file into the store's folder
    after logging, and DVC runs the stage again wherever it is missing: a fresh clone, a
    deleted or moved store. Its text depends on nothing but the experiment's name (no run id,
    no commit), so ``dvc.lock`` stays as committed in every clone.
    """
    return (
        json.dumps(
            {
                "experiment": experiment,
                "about": "written by dvc.yaml's mlflow stage once the pipeline run is logged "
                "to this store; without it the next dvc repro logs again",
            },
            indent=1,
        )
        + "\n"
    )


def _log_pipeline_run(
    mlruns: Path,
    experiment: str,
    run_name: str,
    tags: dict[str, str],
    children: list[ChildRun],
    artifacts: Sequence[Artifact] = (),
) -> str:
    """Log a parent run with its tags and artifacts (files or folders), and one nested child
    run each; returns the parent run id. A ``run_name`` the experiment already holds gets a
    ``.2``, ``.3``, ... suffix."""
    from mlflow.entities import Metric, Param, RunTag  # heavy: mlflow, only to log

    client, exp_id = _experiment(mlruns, experiment)
    name = _unique_name(client, exp_id, run_name)
    parent = client.create_run(exp_id, run_name=name, tags=tags).info.run_id
    _log_paths(client, parent, artifacts)
    now = int(time.time() * 1000)
    for child in children:
        if child.params.get(PROTOCOL_PARAM, child.protocol) != child.protocol:
            raise ValueError(f"child {child.name}: param protocol is not {child.protocol!r}")
        run_id = client.create_run(
            exp_id, run_name=child.name, tags=child_tags(parent, child.protocol)
        ).info.run_id
        params = {**child.params, PROTOCOL_PARAM: child.protocol}
        own = dict(tags if child.tags is None else child.tags)
        if child.table:
            own[LOGGED_ARTIFACTS_TAG] = json.dumps([{"path": METRICS_TABLE, "type": "table"}])
        client.log_batch(
            run_id,
            metrics=[Metric(k, float(v), now, 0) for k, v in child.metrics.items()],
            params=[Param(k, v) for k, v in params.items()],
            tags=[RunTag(k, v) for k, v in own.items()],
        )
        with tempfile.TemporaryDirectory() as tmp:
            files: Sequence[Artifact] = child.artifacts
            if child.traces:
                index = trace_index(child.traces, log_traces(client, exp_id, run_id, child.traces))
                index.to_csv(Path(tmp) / TRACE_INDEX, index=False)
                client.log_artifact(run_id, str(Path(tmp) / TRACE_INDEX))
                if child.link is not None:
                    (Path(tmp) / "linked").mkdir()
                    files = child.link(index, Path(tmp) / "linked")
            _log_paths(client, run_id, files)
            if child.table:
                (Path(tmp) / METRICS_TABLE).write_text(
                    metrics_table_json(child.table), encoding="utf-8"
                )
                client.log_artifact(run_id, str(Path(tmp) / METRICS_TABLE))
        client.set_terminated(run_id)
    client.set_terminated(parent)
    return str(parent)


def run_name_of(mlruns: Path, run_id: str) -> str:
    """The name the run ``run_id`` has in the store (with the suffix it may have been given)."""
    import mlflow  # heavy: mlflow, only to read a logged run back

    client = mlflow.MlflowClient(tracking_uri=tracking_uri(mlruns))
    return str(client.get_run(run_id).info.run_name)


def log_validation_run(
    mlruns: Path,
    experiment: str,
    run_name: str,
    tags: dict[str, str],
    params: dict[str, str],
    metrics: dict[str, float],
    artifacts: list[Path],
    tables: dict[str, pd.DataFrame],
) -> str:
    """Log one judge validation as a top-level run; returns its id (one process at a time)."""
    with exclusive(mlruns):
        return _log_validation_run(
            mlruns, experiment, run_name, tags, params, metrics, artifacts, tables
        )


def _log_validation_run(
    mlruns: Path,
    experiment: str,
    run_name: str,
    tags: dict[str, str],
    params: dict[str, str],
    metrics: dict[str, float],
    artifacts: list[Path],
    tables: dict[str, pd.DataFrame],
) -> str:
    """Log one judge validation as a top-level run; returns its id.

    ``tables`` are written as CSV artifacts under their names (the confusion matrices); they
    exist only in the artifact store, the report JSON already holds their counts.
    """
    from mlflow.entities import Metric, Param  # heavy: mlflow, only to log

    client, exp_id = _experiment(mlruns, experiment)
    all_tags = {**tags, KIND_TAG: "judge-validation"}
    run_id = str(client.create_run(exp_id, run_name=run_name, tags=all_tags).info.run_id)
    now = int(time.time() * 1000)
    client.log_batch(
        run_id,
        metrics=[Metric(k, float(v), now, 0) for k, v in metrics.items()],
        params=[Param(k, v) for k, v in params.items()],
    )
    for path in artifacts:
        client.log_artifact(run_id, str(path))
    with tempfile.TemporaryDirectory() as tmp:
        for name, table in tables.items():
            table.to_csv(Path(tmp) / name)
            client.log_artifact(run_id, str(Path(tmp) / name))
    client.set_terminated(run_id)
    return run_id
