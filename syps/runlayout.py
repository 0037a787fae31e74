"""The MLflow run layout, in one place: what the score stage writes and what ``syps compare``
and ``syps audit`` read back.

A pipeline run is a parent run (no ``mlflow.parentRunId`` tag, no ``syps.kind`` tag) with one
child per (protocol, model, dataset). A child carries the tag ``syps.protocol`` and the param
``protocol``; a child logged before protocols existed has neither and is SyPS's. SyPS children
are named ``<model>/<dataset>`` (the names and metric keys users compare across runs), other
protocols' children ``<protocol>/<model>/<dataset>``. The parent holds SyPS's
``templates.json`` and ``params.yaml``, and ``protocols/<name>/templates.json`` for each other
protocol. Runs tagged ``syps.kind`` (judge validations) share the experiment and are no
pipeline run.
"""

from __future__ import annotations

from collections.abc import Mapping

PARENT_TAG = "mlflow.parentRunId"
KIND_TAG = "syps.kind"
PROTOCOL_TAG = "syps.protocol"
PROTOCOL_PARAM = "protocol"
SYPS = "syps"
TEMPLATES = "templates.json"
PARAMS = "params.yaml"
PROTOCOLS_DIR = "protocols"


def child_name(protocol: str, model: str, dataset: str) -> str:
    """The child run's name: ``<model>/<dataset>`` for SyPS, else prefixed by the protocol."""
    return f"{model}/{dataset}" if protocol == SYPS else f"{protocol}/{model}/{dataset}"


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
    """The protocol of a child run; SyPS for a child logged before protocols existed."""
    return tags.get(PROTOCOL_TAG) or params.get(PROTOCOL_PARAM) or SYPS


def protocol_templates(protocol: str) -> str:
    """The parent's artifact path of a non-SyPS protocol's template set."""
    return f"{PROTOCOLS_DIR}/{protocol}/{TEMPLATES}"
