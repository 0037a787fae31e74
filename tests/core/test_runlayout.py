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
from syps.protocols import PROTOCOLS


@pytest.mark.parametrize("name", list(PROTOCOLS))
def test_syps_children_keep_their_names_others_are_prefixed(name: str) -> None:
    # A child is named <run_prefix>/<model>/<dataset> (the score stage joins the non-empty
    # parts): SyPS's children keep their names from before it was a protocol.
    prefix = PROTOCOLS[name].run_prefix
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


def test_run_metric_keys_headline_with_companions_then_patterns_in_order() -> None:
    from syps.core.runlayout import run_metric_keys

    metrics = {
        "b": 1.0,
        "b_ci_low": 0.5,
        "b_ci_high": 1.5,
        "b_n": 4.0,
        "b_low_support": 1.0,
        "b_ci_reps": 200.0,  # not a companion: in the table only
        "a": 2.0,  # a headline metric without CI
        "d_P2": 0.1,
        "d_P1": 0.2,
        "d_P1_n": 3.0,  # "d_P?" matches one character after P: not this
        "count": 7.0,
        "other": 9.0,
    }
    # Headline order, each with its companions; then each pattern's matches, sorted; a key
    # matched twice ("count", by two patterns) is kept once; a missing headline is skipped.
    assert run_metric_keys(metrics, ["b", "a", "missing"], ["d_P?", "count", "c*"]) == [
        "b",
        "b_ci_low",
        "b_ci_high",
        "b_n",
        "b_low_support",
        "a",
        "d_P1",
        "d_P2",
        "count",
    ]


def test_run_metric_keys_stop_at_sixty() -> None:
    from syps.core.runlayout import MAX_RUN_METRICS, run_metric_keys

    metrics = {f"m{i:03d}": float(i) for i in range(100)}
    keys = run_metric_keys(metrics, ["m099"], ["m*"])
    assert MAX_RUN_METRICS == 60
    # m099 first (headline), then m000..m058 sorted: 60 in all.
    assert keys == ["m099", *(f"m{i:03d}" for i in range(59))]


def test_metrics_table_keeps_every_digit_and_nan_reads_back() -> None:
    import json
    import math

    from syps.core.runlayout import metrics_table_json, read_metrics_table

    metrics = {"z": 0.1 + 0.2, "a": math.nan, "p": 1.2345678901234567e-13}
    text = metrics_table_json(metrics)
    # MLflow's table format (split orientation), keys sorted, NaN as null.
    assert json.loads(text) == {
        "columns": ["metric", "value"],
        "data": [["a", None], ["p", 1.2345678901234567e-13], ["z", 0.30000000000000004]],
    }
    back = read_metrics_table(text, "t")
    assert back["z"] == 0.30000000000000004 and back["p"] == 1.2345678901234567e-13
    assert math.isnan(back["a"])


def test_a_table_that_is_not_a_metrics_table_is_refused() -> None:
    from syps.core.io import InputError
    from syps.core.runlayout import read_metrics_table

    with pytest.raises(InputError, match=r"^run r1: metrics_table\.json: not a syps metrics table"):
        read_metrics_table('{"columns": ["a", "b"], "data": []}', "run r1: metrics_table.json")
    with pytest.raises(InputError, match="not a syps metrics table"):
        read_metrics_table("[1, 2", "t")
