"""Where a pipeline run keeps its state outside DVC's outputs: the repository root, the model
cache, the response store, and each stage's run log (what the stage did in its last run, which
the score stage logs to MLflow once).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from syps.core.io import sha256_file, write_json


def repo_root() -> Path:
    """The repository that owns caches and mlruns/.

    Queued ``dvc exp`` runs execute in a temporary copy but get the parent repo as DVC_ROOT,
    so every run shares one model cache and one MLflow store.
    """
    return Path(os.environ.get("DVC_ROOT") or Path.cwd()).resolve()


def cache_dir() -> Path:
    """The model cache: converted model weights (``models/``) and the weights-hash memo
    (``hashes.json``), in ``$SYPS_CACHE_DIR``, else ``<repo>/.cache``.

    Its contents are named by the weights' hashes, so one directory can serve several clones.
    The response store is not here: see :func:`store_location`.
    """
    return Path(os.environ.get("SYPS_CACHE_DIR") or repo_root() / ".cache")


STORE_ENV = "SYPS_STORE"


def store_location() -> str:
    """The response store: ``$SYPS_STORE`` when set (a ``postgresql://`` URL, the lab's shared
    store, or an SQLite file's path), else ``<repo>/.cache/store.sqlite``, outside DVC's
    outputs, shared by queued runs (through DVC_ROOT).

    Configuration, not a param: where an answer is kept never changes it, so moving the store
    changes no stage's dependencies and no output. ``$SYPS_CACHE_DIR`` does not move it: the
    store holds this project's answers, so deleting the project's ``.cache/`` resets them, while
    a model cache shared between clones (or test runs) shares weights, never answers.
    """
    return os.environ.get(STORE_ENV) or str(repo_root() / ".cache" / "store.sqlite")


def batch_dir() -> Path:
    """Where OpenAI batch jobs keep their request files: ``<repo>/.cache/batches``."""
    return repo_root() / ".cache" / "batches"


RUN_LOG = "run-log"


def run_log_path(outputs: Path, stage: str, model: str) -> Path:
    """Where ``stage`` leaves the record of its last run for ``model``:
    ``<outputs>/run-log/<stage>.<model>.json``, with ``outputs`` the directory above the
    stage's own output folder (``out/``).

    It sits in the working copy (each queued experiment has its own), beside DVC's outputs but
    not one of them and not inside a declared dependency, so it never enters ``dvc.lock``.
    """
    return outputs / RUN_LOG / f"{stage}.{model}.json"


def write_run_log(
    out: Path,
    stage: str,
    model: str,
    line: str,
    counts: Mapping[str, Mapping[str, float]],
    retries: Mapping[str, int] | None = None,
    detail: Mapping[str, Any] | None = None,
    outputs: Path | None = None,
    generated_keys: Sequence[str] = (),
) -> None:
    """Record what this run of ``stage`` did (its log line, counts per dataset, the retries
    its backend made per error kind, any ``detail`` such as per-turn counts, the store keys
    it generated), tied to the output it wrote by that file's sha256; the mlflow stage logs
    it. The record goes to ``<outputs>/run-log/`` (default: the directory above ``out``'s
    own)."""
    record = {
        "stage": stage,
        "model": model,
        "line": line,
        "datasets": {d: dict(c) for d, c in counts.items()},
        "retries": dict(retries or {}),
        "detail": dict(detail or {}),
        "generated_keys": sorted(generated_keys),
        "output": str(out),
        "output_sha256": sha256_file(out),
        "finished": datetime.now(UTC).isoformat(timespec="seconds"),
        "logged_in_run": None,
    }
    write_json(record, run_log_path(outputs or out.parent.parent, stage, model))


def read_run_log(outputs: Path, stage: str, model: str, output: Path) -> dict[str, Any] | None:
    """The record of ``stage``'s last run for ``model`` if that run wrote ``output`` as it is
    now and no pipeline run has logged it yet; else None: this pipeline run did not run the
    stage (DVC found the output up to date, or restored it from its run cache)."""
    path = run_log_path(outputs, stage, model)
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # no record, or a damaged one: it cannot vouch for anything
    if (
        not isinstance(record, dict)
        or record.get("logged_in_run") is not None
        or not output.exists()
        or record.get("output_sha256") != sha256_file(output)
    ):
        return None
    return record


def mark_run_log_logged(outputs: Path, stage: str, model: str, run_id: str) -> None:
    """Note that a pipeline run logged this record, so the next one does not claim it."""
    path = run_log_path(outputs, stage, model)
    record = json.loads(path.read_text(encoding="utf-8"))
    write_json({**record, "logged_in_run": run_id}, path)


# The mlflow stage's note for a stage that did not run in this pipeline run.
NOT_RUN = (
    "did not run in this pipeline run: DVC found its output up to date or restored it from "
    "its run cache, or an earlier pipeline run already logged that run"
)
# The per-dataset counts each stage's run log holds that a child run logs as metrics.
RUN_LOG_COUNTS = {
    "generate": ("generated", "served_from_store", "skipped"),
    "label": ("unclear", "judged", "judge_served_from_store"),
}


# Usage counts a run log's datasets may hold (syps.core.usage.usage_summary's keys).
USAGE_KEYS = (
    "tokens_sent",
    "tokens_received",
    "tokens_sent_served",
    "tokens_received_served",
    "cost_usd",
    "cost_saved_usd",
)


def usage_metrics(record: dict[str, Any] | None, dataset: str) -> dict[str, float]:
    """A run log's usage for one dataset (tokens, and cost where a price was set) and its
    backend's retries per error kind (``retries/<kind>``), as child-run metrics. Nothing when
    the stage did not run in this pipeline run: its output cost nothing now."""
    if record is None:
        return {}
    counts = record["datasets"].get(dataset, {})
    # The simulated user's usage (``simulator_*``) beside the target's, where a design has one.
    keys = [*USAGE_KEYS, *(f"simulator_{k}" for k in USAGE_KEYS)]
    out = {k: float(counts[k]) for k in keys if k in counts}
    out.update({f"retries/{kind}": float(n) for kind, n in record.get("retries", {}).items()})
    return out
