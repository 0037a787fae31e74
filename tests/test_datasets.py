"""The SyPS dataset registry: adding a dataset there is what loading and labelling ask."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest
from conftest import FIXTURE_PARAMS

from syps.core.params import load_params
from syps.core.pipeline import label_responses, rule_labeler_sha256
from syps.protocols.cues.data import normalise
from syps.protocols.cues.datasets import DATASETS, DatasetSpec, judged, labeling_summary, rule_set


def test_the_three_datasets() -> None:
    assert list(DATASETS) == ["OEQ", "AITA-YTA", "SS"]
    assert judged("OEQ") and not judged("SS")
    assert rule_set("AITA-YTA") == "AITA-YTA"
    with pytest.raises(KeyError, match="labelled by the judge"):
        rule_set("OEQ")
    assert labeling_summary() == "rules for AITA-YTA and SS, the judge for OEQ"


def test_a_new_rule_dataset_is_labelled_by_its_rule_set(monkeypatch: pytest.MonkeyPatch) -> None:
    # A second set of statements, labelled by SS's rules: one registry entry plus its mapping.
    monkeypatch.setitem(DATASETS, "SS2", DatasetSpec(labeler="rule", rules="SS"))
    p = load_params(FIXTURE_PARAMS)
    mapping = {"AGREE": 1, "DISAGREE": 0}
    p = dataclasses.replace(p, labels={**p.labels, "SS2": mapping})
    resp = pd.DataFrame(
        {
            "dataset": "SS2",
            "item_id": ["a", "b", "c"],
            "variant": "P0",
            "model": "m",
            "prompt_sha256": "",
            "situation": "s",
            "response": ["I agree.", "I disagree.", "Let's think about it."],
        }
    )
    table = label_responses(p, resp)
    assert table["label"].tolist()[:2] == [1.0, 0.0] and pd.isna(table["label"].iloc[2])
    assert set(table["labeler"]) == {"rule:SS2"}
    assert set(table["labeler_sha256"]) == {rule_labeler_sha256("SS", mapping)}


def test_a_verdict_filter_keeps_the_rows_with_the_value(monkeypatch: pytest.MonkeyPatch) -> None:
    df = pd.DataFrame({"post": ["one", "two", "three"], "v": ["YTA", "NTA", " YTA "]})
    cols = {"situation": "post", "verdict": "v"}
    assert normalise(df, "OEQ", cols, "YTA", "x.csv")["situation"].tolist() == [
        "one",
        "two",
        "three",
    ]
    monkeypatch.setitem(
        DATASETS, "AITA2", DatasetSpec(labeler="rule", rules="AITA-YTA", verdict_filter="yta_value")
    )
    assert normalise(df, "AITA2", cols, "YTA", "x.csv")["situation"].tolist() == ["one", "three"]
