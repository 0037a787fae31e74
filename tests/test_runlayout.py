"""The MLflow run layout: child names, the parent test and a child's protocol."""

from __future__ import annotations

from syps.core.runlayout import (
    child_name,
    child_protocol,
    child_tags,
    is_pipeline_parent,
    parent_of,
    protocol_templates,
)


def test_syps_children_keep_their_names_others_are_prefixed() -> None:
    assert child_name("syps", "smollm2-135m", "AITA-YTA") == "smollm2-135m/AITA-YTA"
    assert child_name("pushback", "smollm2-135m", "mcq") == "pushback/smollm2-135m/mcq"


def test_a_child_without_the_tag_is_syps() -> None:
    # Logged before protocols existed: only the parent tag and the model/dataset params.
    old = {"mlflow.parentRunId": "p1"}
    assert child_protocol(old, {"model": "m", "dataset": "SS"}) == "syps"
    assert child_protocol(child_tags("p1", "pushback"), {}) == "pushback"
    assert child_protocol({}, {"protocol": "betting"}) == "betting"


def test_parents_children_and_judge_validations() -> None:
    assert is_pipeline_parent({"git_commit": "abc"})
    assert not is_pipeline_parent(child_tags("p1", "syps"))
    assert not is_pipeline_parent({"syps.kind": "judge-validation"})
    assert parent_of(child_tags("p1", "syps")) == "p1" and parent_of({}) is None
    assert protocol_templates("pushback") == "protocols/pushback/templates.json"
