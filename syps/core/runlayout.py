"""The MLflow run layout, in one place: what the score stage writes and what ``syps compare``
and ``syps audit`` read back.

A pipeline run is a parent run (no ``mlflow.parentRunId`` tag, no ``syps.kind`` tag) with one
child per (protocol, model, dataset). A child carries the tag ``syps.protocol`` and the param
``protocol``; a child logged before protocols existed has neither (see
``syps.core.legacy.current_name`` for the name it has now). A child is named
``<run_prefix>/<model>/<dataset>`` after its protocol's ``run_prefix`` (``<model>/<dataset>``
where that is empty). The parent holds ``params.yaml`` and, per protocol, its plot data and
``templates.json`` under ``protocols/<name>/``. Runs tagged ``syps.kind`` (judge validations)
share the experiment and are no pipeline run.
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
from collections.abc import Mapping, Sequence
from fnmatch import fnmatchcase
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlparse

from syps.core.io import InputError
from syps.core.legacy import current_name
from syps.core.report import headline_keys

if TYPE_CHECKING:
    import mlflow
    from mlflow.entities import Run

PARENT_TAG = "mlflow.parentRunId"
KIND_TAG = "syps.kind"
PROTOCOL_TAG = "syps.protocol"
PROTOCOL_PARAM = "protocol"
TEMPLATES = "templates.json"
PARAMS = "params.yaml"
PROTOCOLS_DIR = "protocols"
# MLflow's run description: the parent's names the params keys that differ from the
# committed params.yaml (see syps.core.provenance.params_changes).
NOTE_TAG = "mlflow.note.content"
# A pipeline run's results by what they rest on (syps.core.provenance.results_sha256): the
# mlflow stage logs a run only once to a store that holds one with this tag and nothing newer
# ran (see syps.core.pipeline.mlflow). The parent's alone.
RESULTS_TAG = "syps.results_sha256"


def child_tags(parent_id: str, protocol: str) -> dict[str, str]:
    """The tags that make a run a child of ``parent_id`` for ``protocol``."""
    return {PARENT_TAG: parent_id, PROTOCOL_TAG: protocol}


def children_filter(parent_id: str) -> str:
    """The MLflow search filter for the children of ``parent_id``."""
    return f"tags.`{PARENT_TAG}` = '{parent_id}'"


def parent_of(tags: Mapping[str, str]) -> str | None:
    """The parent run id of a child run, None for a top-level run."""
    return tags.get(PARENT_TAG)


def is_pipeline_parent(tags: Mapping[str, str]) -> bool:
    """Whether a run with ``tags`` is a pipeline (parent) run."""
    return PARENT_TAG not in tags and KIND_TAG not in tags


def child_protocol(tags: Mapping[str, str], params: Mapping[str, str]) -> str:
    """The protocol of a child run, by its name now (a child logged before protocols existed
    has no tag)."""
    return current_name(tags.get(PROTOCOL_TAG) or params.get(PROTOCOL_PARAM) or "")


def protocol_templates(protocol: str) -> str:
    """The parent's artifact path of a protocol's template set."""
    return f"{PROTOCOLS_DIR}/{protocol}/{TEMPLATES}"


# A child run logs at most this many MLflow metrics (its metrics tab stays readable); every
# metric, those included, is in its metrics table, METRICS_TABLE, an artifact in MLflow's table
# format (what ``MlflowClient.log_table`` writes, so the UI shows it as a table). syps writes
# the file itself: log_table's writer keeps 10 decimal digits, and the table must hold each
# number as it was computed. A child logged before the table existed has every metric as an
# MLflow metric and no table.
MAX_RUN_METRICS = 60
METRICS_TABLE = "metrics_table.json"
LOGGED_ARTIFACTS_TAG = "mlflow.loggedArtifacts"  # MLflow's own tag naming a run's tables
# A child's conversations as logged: one row per trace, its lineage, store key, label, flag and
# trace id (syps.core.traces.TRACE_INDEX_COLUMNS), so a table row or a metric finds its traces
# in a copy of mlruns/ without a trace search.
TRACE_INDEX = "traces.csv"


def run_metric_keys(
    metrics: Mapping[str, float], headline: Sequence[str], patterns: Sequence[str]
) -> list[str]:
    """The keys of ``metrics`` a child run logs as MLflow metrics, in this order: each headline
    metric with its CI bounds, support and low-support flag (``COMPANIONS``), then the keys
    each of ``patterns`` (``fnmatch``, the whole key) matches, sorted; each once, the first
    ``MAX_RUN_METRICS``."""
    out = headline_keys(metrics, headline)
    for pattern in patterns:
        out += sorted(k for k in metrics if fnmatchcase(k, pattern))
    return list(dict.fromkeys(out))[:MAX_RUN_METRICS]


def metrics_table_json(metrics: Mapping[str, float]) -> str:
    """``metrics`` as METRICS_TABLE: ``{"columns": ["metric", "value"], "data": [[k, v], ...]}``
    in key order, full precision, NaN (undefined) as null."""
    rows = [[k, None if math.isnan(v) else float(v)] for k, v in sorted(metrics.items())]
    return json.dumps({"columns": ["metric", "value"], "data": rows}, allow_nan=False) + "\n"


def read_metrics_table(text: str, where: str) -> dict[str, float]:
    """The metrics of a METRICS_TABLE text (null is NaN); ``where`` names it in an error."""
    try:
        table = json.loads(text)
        if table["columns"] != ["metric", "value"]:
            raise ValueError(f"columns {table['columns']}, expected ['metric', 'value']")
        return {str(k): math.nan if v is None else float(v) for k, v in table["data"]}
    except (ValueError, KeyError, TypeError) as e:
        raise InputError(f"{where}: not a syps metrics table ({e})") from None


def has_metrics_table(tags: Mapping[str, str]) -> bool:
    """Whether a child run with ``tags`` logged a metrics table."""
    return f'"{METRICS_TABLE}"' in tags.get(LOGGED_ARTIFACTS_TAG, "")


def child_metrics(
    client: mlflow.MlflowClient, run: Run, artifacts: Path | None = None
) -> dict[str, float]:
    """Every metric of a child run: its metrics table (where it logged one) and its MLflow
    metrics. The table is read in ``artifacts`` (the run's artifact folder, e.g. in a copy of
    mlruns/), else where the run's artifact URI says when that is a local folder, else
    downloaded."""
    metrics = dict(run.data.metrics)
    if not has_metrics_table(run.data.tags):
        return metrics
    where = f"run {run.info.run_id}: {METRICS_TABLE}"
    uri = urlparse(str(run.info.artifact_uri))
    if artifacts is None and uri.scheme in ("", "file"):
        artifacts = Path(unquote(uri.path))
    local = artifacts / METRICS_TABLE if artifacts is not None else None
    if local is not None and local.is_file():  # syps's own store: read it where it lies
        return {**read_metrics_table(local.read_text(encoding="utf-8"), where), **metrics}
    # MLflow draws a progress bar on stderr per download; a table per child would fill it.
    bar = "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"
    was = os.environ.get(bar)
    os.environ[bar] = "false"
    try:
        with tempfile.TemporaryDirectory() as tmp:
            path = client.download_artifacts(run.info.run_id, METRICS_TABLE, tmp)
            text = Path(path).read_text(encoding="utf-8")
    finally:
        if was is None:
            os.environ.pop(bar, None)
        else:
            os.environ[bar] = was
    return {**read_metrics_table(text, where), **metrics}


def metric_name(text: str) -> str:
    """``text`` as part of an MLflow metric key: every character MLflow refuses in one (it
    takes letters, digits, ``_ - . : /`` and spaces) as ``_``, and no ``/`` (it would nest)."""
    return re.sub(r"[^A-Za-z0-9_\-.: ]", "_", text)
