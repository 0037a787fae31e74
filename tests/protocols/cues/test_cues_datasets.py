"""The SyPS dataset registry: adding a dataset there is what loading and labelling ask."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest
from conftest import FIXTURE_PARAMS

from syps.core.io import canonical_json
from syps.core.params import load_params
from syps.core.protocol import cell_key
from syps.protocols import PROTOCOLS
from syps.protocols.cues.data import normalise
from syps.protocols.cues.datasets import DATASETS, DatasetSpec, judged, labeling_summary, rule_set
from syps.protocols.cues.protocol import PROTOCOL, rule_labeler_sha256


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
    cues = load_params(FIXTURE_PARAMS, PROTOCOLS).protocols["cues"]
    mapping = {"AGREE": 1, "DISAGREE": 0}
    cues = dataclasses.replace(cues, labels={**cues.labels, "SS2": mapping})  # type: ignore[attr-defined]
    ids = ["a", "b", "c"]
    items = pd.DataFrame(
        {
            "dataset": "SS2",
            "item_id": ids,
            "item": [
                canonical_json({"row": i, "situation": "s", "reference": ""}) for i in (1, 2, 3)
            ],
        }
    )
    resp = pd.DataFrame(
        {
            "protocol": "cues",
            "dataset": "SS2",
            "item_id": ids,
            "cell": cell_key({"variant": "P0"}),
            "rep": 0,
            "turn": 1,
            "parent_key": "",
            "model": "m",
            "model_id": "m",
            "revision": "",
            "max_new_tokens": 8,
            "response": ["I agree.", "I disagree.", "Let's think about it."],
        }
    )
    table = PROTOCOL.label(
        cues, PROTOCOL.read_items(items), resp, None, pd.DataFrame()
    )  # no judge: a rule dataset
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
