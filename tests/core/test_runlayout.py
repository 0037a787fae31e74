"""The MLflow run layout: child names, the parent test and a child's protocol."""

from __future__ import annotations

import pytest

from syps.core.runlayout import (
    child_protocol,
    child_tags,
    is_pipeline_parent,
    parent_of,
    protocol_templates,
)
from syps.protocols import PROTOCOLS, load_protocol


@pytest.mark.parametrize("name", list(PROTOCOLS))
def test_syps_children_keep_their_names_others_are_prefixed(name: str) -> None:
    # A child is named <run_prefix>/<model>/<dataset> (the score stage joins the non-empty
    # parts): SyPS's children keep their names from before it was a protocol.
    prefix = load_protocol(name).run_prefix
    assert prefix == ("" if name == "cues" else name)
    parts = (prefix, "smollm2-135m", "AITA-YTA")
    expected = "smollm2-135m/AITA-YTA" if name == "cues" else f"{name}/smollm2-135m/AITA-YTA"
    assert "/".join(x for x in parts if x) == expected


def test_a_child_without_the_tag_is_cues() -> None:
    # Logged before protocols existed: only the parent tag and the model/dataset params.
    old = {"mlflow.parentRunId": "p1"}
    assert child_protocol(old, {"model": "m", "dataset": "SS"}) == "cues"
    # Logged as "syps" before SyPS was renamed.
    assert child_protocol(child_tags("p1", "syps"), {}) == "cues"
    assert child_protocol(child_tags("p1", "pushback"), {}) == "pushback"
    assert child_protocol({}, {"protocol": "betting"}) == "betting"


def test_parents_children_and_judge_validations() -> None:
    assert is_pipeline_parent({"git_commit": "abc"})
    assert not is_pipeline_parent(child_tags("p1", "cues"))
    assert not is_pipeline_parent({"syps.kind": "judge-validation"})
    assert parent_of(child_tags("p1", "cues")) == "p1" and parent_of({}) is None
    assert protocol_templates("pushback") == "protocols/pushback/templates.json"
