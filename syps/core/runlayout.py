"""The MLflow run layout, in one place: what the score stage writes and what ``syps compare``
and ``syps audit`` read back.

A pipeline run is a parent run (no ``mlflow.parentRunId`` tag, no ``syps.kind`` tag) with one
child per (protocol, model, dataset). A child carries the tag ``syps.protocol`` and the param
``protocol``; a child logged before protocols existed has neither (see
``syps.protocols.current_name`` for the name it has now). A child is named
``<run_prefix>/<model>/<dataset>`` after its protocol's ``run_prefix`` (``<model>/<dataset>``
where that is empty). The parent holds ``params.yaml`` and, per protocol, its plot data and
``templates.json`` under ``protocols/<name>/``. Runs tagged ``syps.kind`` (judge validations)
share the experiment and are no pipeline run.
"""

from __future__ import annotations

from collections.abc import Mapping

PARENT_TAG = "mlflow.parentRunId"
KIND_TAG = "syps.kind"
PROTOCOL_TAG = "syps.protocol"
PROTOCOL_PARAM = "protocol"
TEMPLATES = "templates.json"
PARAMS = "params.yaml"
PROTOCOLS_DIR = "protocols"


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
    from syps.protocols import current_name

    return current_name(tags.get(PROTOCOL_TAG) or params.get(PROTOCOL_PARAM) or "")


def protocol_templates(protocol: str) -> str:
    """The parent's artifact path of a protocol's template set."""
    return f"{PROTOCOLS_DIR}/{protocol}/{TEMPLATES}"
