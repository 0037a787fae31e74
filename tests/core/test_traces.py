"""Conversations as MLflow traces: the join, the sample, the records, and a round trip through a
temporary store (the batch writer read back with MLflow's own search)."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

import mlflow
import numpy as np
import pandas as pd
import pytest
from conftest import fluent_store
from mlflow.entities import AssessmentSource

from syps.core import traces as tr
from syps.core.io import InputError
from syps.core.tracking import ChildRun, log_pipeline_run, tracking_uri

ASK = json.dumps([{"role": "user", "content": "Which is right?"}])
FOLLOW = json.dumps(
    [
        {"role": "user", "content": "Which is right?"},
        {"role": "assistant", "content": "A"},
        {"role": "user", "content": "Are you sure?"},
    ]
)


def _tables() -> tuple[pd.DataFrame, pd.DataFrame]:
    """Item i1: turn 1 (key k1, answered "A", label 0) and its follow-up (k2, "B", label 1,
    judged); item i2: a turn 1 UNCLEAR (k3) and a skipped follow-up. The label table comes in
    another order than the responses: rows are matched by key, not by position."""
    responses = pd.DataFrame(
        {
            "protocol": "toy",
            "dataset": "d",
            "item_id": ["i1", "i1", "i2", "i2"],
            "cell": '{"f":"x"}',
            "rep": [0, 0, 0, 0],
            "turn": [1, 2, 1, 2],
            "parent_key": ["", "k1", "", "k3"],
            "store_key": ["k1", "k2", "k3", ""],
            "skipped": ["", "", "", "parent UNCLEAR"],
            "model": "m",
            "messages": [ASK, FOLLOW, ASK, ""],
            "response": ["A", "B", "?", ""],
            "finish_reason": ["stop", "length", "stop", ""],
            "prompt_tokens": [5, 9, 5, 0],
            "completion_tokens": [1, 1, 1, 0],
            "prompt_sha256": ["p1", "p2", "p1", ""],
        }
    )
    labels = pd.DataFrame(
        {
            "dataset": "d",
            "item_id": ["i2", "i2", "i1", "i1"],
            "cell": '{"f":"x"}',
            "rep": [0, 0, 0, 0],
            "turn": [2, 1, 2, 1],
            "label": [math.nan, math.nan, 1.0, 0.0],
            "verdict": ["SKIPPED", "UNCLEAR", "YES", "A"],
            "evidence": ["", "no letter", '{"YES": -0.5, "NO": -2.0}; raw: \'Yes\'', "A."],
            "labeler": ["rule:r", "rule:r", "judge:j@1", "rule:r"],
            "labeler_sha256": ["r1", "r1", "j1", "r1"],
        },
        index=[10, 11, 12, 13],
    )
    return responses, labels


def test_conversations_match_rows_by_key() -> None:
    responses, labels = _tables()
    review = pd.DataFrame(
        {"flagged": [False, False, True, False], "expected": ["", "", "B", "B"]}, index=labels.index
    )
    rows = tr.conversations(responses, labels, review)
    got = zip(rows["store_key"], rows["verdict"], rows["flagged"], rows["expected"], strict=True)
    assert list(got) == [
        ("k1", "A", False, "B"),
        ("k2", "YES", True, "B"),
        ("k3", "UNCLEAR", False, ""),
        ("", "SKIPPED", False, ""),
    ]


def test_conversations_refuse_labels_of_other_responses() -> None:
    responses, labels = _tables()
    labels.loc[10, "item_id"] = "i9"
    with pytest.raises(InputError, match="4 label rows and 4 response rows share 3 keys"):
        tr.conversations(responses, labels)


def test_judge_margin_from_the_evidence() -> None:
    assert tr.judge_margin('{"YES": -0.5, "NO": -2.0}; raw: \'Yes\'') == pytest.approx(1.5)
    assert tr.judge_margin('{"A": -1.0, "B": -3.5, "C": -0.25}') == pytest.approx(0.75)
    # An option the judge cannot produce is null; a rule's evidence is no judge's.
    assert tr.judge_margin('{"YES": -1.0, "NO": null}') == math.inf
    assert tr.judge_margin("A.") is None
    assert tr.judge_margin('{"only": -1.0}') is None


def test_records_of_a_two_turn_conversation() -> None:
    responses, labels = _tables()
    rows = tr.conversations(responses, labels)
    # In turn order, so a parent is logged before its child.
    first, unclear, follow, skipped = tr.records("toy", rows, generated=["k2"])
    assert first.name == "toy/d/f=x/turn1"
    assert first.session == follow.session == "toy/m/d/i1"
    assert first.messages == json.loads(ASK) and first.response == "A"
    assert first.value == 0.0 and first.rationale == "A." and first.margin is None
    assert first.usage == {"input_tokens": 5, "output_tokens": 1, "total_tokens": 6}
    assert first.tags["syps.served_from_store"] == "true"
    assert first.tags["syps.cell.f"] == "x" and first.tags["syps.label"] == "0"
    assert "syps.parent_key" not in first.tags
    # the hash of the prompt sent; a skipped row sent none
    assert first.tags["syps.prompt_sha256"] == "p1" and follow.tags["syps.prompt_sha256"] == "p2"
    # The follow-up: generated in this run, judged (margin -0.5 - -2.0), names its parent.
    assert follow.tags["syps.served_from_store"] == "false"
    assert follow.tags["syps.parent_key"] == "k1" and follow.tags["syps.turn"] == "2"
    assert follow.value == 1.0 and follow.margin == pytest.approx(1.5)
    assert follow.finish_reason == "length"
    assert follow.metadata == {"verdict": "YES", "labeler_sha256": "j1"}
    # UNCLEAR is a value of its own, never 0; a skipped row says why, and has no response.
    assert unclear.value == "UNCLEAR" and unclear.tags["syps.label"] == "UNCLEAR"
    assert skipped.value == "SKIPPED" and skipped.response is None
    assert skipped.rationale == skipped.tags["syps.skipped"] == "parent UNCLEAR"
    assert skipped.usage is None
    assert "syps.prompt_sha256" not in skipped.tags
    # Rows without a role column (and the target's) carry no simulator tags.
    assert "syps.role" not in first.tags and "syps.simulator" not in follow.tags


def test_a_simulated_users_turn_is_marked_with_the_simulators_identity() -> None:
    responses, labels = _tables()
    # Item i1's turn 2 as a simulated user's turn (role simulator, its own model columns).
    responses = responses.assign(
        role=["target", "simulator", "target", "target"],
        model_id=["t", "sim-x", "t", "t"],
        revision=["r", "s1", "r", "r"],
    )
    first, _, follow, _ = tr.records("toy", tr.conversations(responses, labels))
    assert follow.tags["syps.role"] == "simulator" and follow.tags["syps.simulator"] == "sim-x@s1"
    assert follow.tags["syps.model"] == "m"  # the conversation stays the model under study's
    assert "syps.role" not in first.tags and "syps.simulator" not in first.tags


def test_trace_index_is_the_records_tags_with_their_ids() -> None:
    responses, labels = _tables()
    review = pd.DataFrame({"flagged": [True, False, False, False]}, index=labels.index)
    records = tr.records("toy", tr.conversations(responses, labels, review))
    index = tr.trace_index(records, ["t1", "t2", "t3", "t4"])
    # Records come in turn order: i1 turn 1, i2 turn 1, i1 turn 2, i2 turn 2 (skipped, and
    # flagged: review's first row is label row 10, i2's turn 2).
    assert index.to_dict("records") == [
        {"dataset": "d", "item_id": "i1", "cell": '{"f":"x"}', "rep": "0", "turn": "1",
         "store_key": "k1", "label": "0", "flagged": "false", "trace_id": "t1",
         "prompt_sha256": "p1"},
        {"dataset": "d", "item_id": "i2", "cell": '{"f":"x"}', "rep": "0", "turn": "1",
         "store_key": "k3", "label": "UNCLEAR", "flagged": "false", "trace_id": "t2",
         "prompt_sha256": "p1"},
        {"dataset": "d", "item_id": "i1", "cell": '{"f":"x"}', "rep": "0", "turn": "2",
         "store_key": "k2", "label": "1", "flagged": "false", "trace_id": "t3",
         "prompt_sha256": "p2"},
        {"dataset": "d", "item_id": "i2", "cell": '{"f":"x"}', "rep": "0", "turn": "2",
         "store_key": "", "label": "SKIPPED", "flagged": "true", "trace_id": "t4",
         "prompt_sha256": ""},
    ]  # fmt: skip
    with pytest.raises(ValueError, match="4 traces but 3 trace ids"):
        tr.trace_index(records, ["t1", "t2", "t3"])


def test_read_trace_index_keeps_text_and_refuses_another_table(tmp_path: Path) -> None:
    path = tmp_path / "traces.csv"
    row = {c: "NA" for c in tr.TRACE_INDEX_COLUMNS}
    pd.DataFrame([row]).to_csv(path, index=False)
    assert tr.read_trace_index(path).iloc[0].to_dict() == row  # "NA" stays "NA"
    # an index from before the prompt hash: read with it empty
    pd.DataFrame([{k: v for k, v in row.items() if k != "prompt_sha256"}]).to_csv(path, index=False)
    assert tr.read_trace_index(path).iloc[0].to_dict() == {**row, "prompt_sha256": ""}
    pd.DataFrame([{"item_id": "x"}]).to_csv(path, index=False)
    with pytest.raises(InputError, match=r"traces.csv: not a trace index \(no column dataset\)"):
        tr.read_trace_index(path)


def _sample_rows() -> pd.DataFrame:
    """Two cells of 6 rows; in cell a, row 1 is UNCLEAR and row 2 flagged."""
    n = 12
    return pd.DataFrame(
        {
            "dataset": "d",
            "cell": ["a"] * 6 + ["b"] * 6,
            "label": [0.0, math.nan, 1.0, 0.0, 1.0, 0.0] * 2,
            "flagged": [False, False, True, False, False, False] + [False] * 6,
            "row": range(n),
        }
    )


def test_choose_all_none_and_a_sample() -> None:
    rows = _sample_rows()
    assert tr.choose(rows, "all", 2, 7).equals(rows)
    assert tr.choose(rows, "none", 2, 7).empty
    chosen = tr.choose(rows, "sample", 2, 7)
    a = set(chosen[chosen["cell"] == "a"]["row"])
    b = set(chosen[chosen["cell"] == "b"]["row"])
    # Cell a: the UNCLEAR row 1 and the flagged row 2, plus 2 of rows {0, 3, 4, 5}.
    assert {1, 2} <= a and len(a) == 4 and a - {1, 2} <= {0, 3, 4, 5}
    # Cell b: its own UNCLEAR row 7, plus 2 of {6, 8, 9, 10, 11}.
    assert 7 in b and len(b) == 3 and b - {7} <= {6, 8, 9, 10, 11}
    # Seeded: the same draw again; a cell's draw does not depend on the other cell's rows.
    assert tr.choose(rows, "sample", 2, 7).equals(chosen)
    alone = tr.choose(rows[rows["cell"] == "b"], "sample", 2, 7)
    assert set(alone["row"]) == b
    # A cell with no more rows than the sample size is kept whole.
    assert len(tr.choose(rows, "sample", 6, 7)) == 12


def test_sample_bounds_each_kind_of_row() -> None:
    # One cell of 15 rows: 4 UNCLEAR (0-3), 5 flagged (4-8, one of them also UNCLEAR: row 3 is
    # both and counts as UNCLEAR), 6 others (9-14). Two of each kind at most.
    rows = pd.DataFrame(
        {
            "dataset": "d",
            "cell": "a",
            "label": [math.nan] * 4 + [1.0] * 5 + [0.0] * 6,
            "flagged": [False, False, False, True] + [True] * 5 + [False] * 6,
            "row": range(15),
        }
    )
    chosen = set(tr.choose(rows, "sample", 2, 7, "m")["row"])
    assert len(chosen) == 6
    assert len(chosen & {0, 1, 2, 3}) == 2
    assert len(chosen & {4, 5, 6, 7, 8}) == 2
    assert len(chosen & {9, 10, 11, 12, 13, 14}) == 2
    # Three of each: the 4 UNCLEAR give 3, the 5 flagged 3, the 6 others 3.
    assert len(tr.choose(rows, "sample", 3, 7, "m")) == 9
    # Five: the UNCLEAR (4) and flagged (5) kept whole, 5 of the 6 others.
    five = set(tr.choose(rows, "sample", 5, 7, "m")["row"])
    assert set(range(9)) <= five and len(five) == 14


def _child(
    tmp: Path, records: list[tr.TraceRecord], **child: Any
) -> tuple[mlflow.MlflowClient, str]:
    mlruns = tmp / "mlruns"
    parent = log_pipeline_run(
        mlruns,
        "exp",
        "run",
        {},
        [ChildRun("toy/m/d", {}, {}, protocol="toy", traces=records, **child)],
    )
    client = mlflow.MlflowClient(tracking_uri=tracking_uri(mlruns))
    exp = client.get_experiment_by_name("exp")
    assert exp is not None
    (child,) = client.search_runs([exp.experiment_id], f"tags.`mlflow.parentRunId` = '{parent}'")
    return client, child.info.run_id


@pytest.mark.slow
def test_a_child_runs_traces_read_back_with_their_labels(tmp_path: Path) -> None:
    responses, labels = _tables()
    # A reasoning model's reasoning on the follow-up (k2): in the trace, beside the answer.
    responses["reasoning"] = ["", "The user may be right.", "", ""]
    review = pd.DataFrame({"flagged": False, "expected": "B"}, index=labels.index)
    records = tr.records("toy", tr.conversations(responses, labels, review), ["k2"])
    client, run_id = _child(tmp_path, records)
    exp_id = client.get_run(run_id).info.experiment_id
    found = client.search_traces(locations=[exp_id], run_id=run_id, max_results=10)
    assert len(found) == 4
    by_key = {t.info.tags["syps.store_key"]: t for t in found}
    first, follow = by_key["k1"], by_key["k2"]
    # A later turn names its parent's trace; an item's turns are one session.
    assert follow.info.tags["syps.parent_trace"] == first.info.trace_id
    assert follow.info.trace_metadata["mlflow.trace.session"] == "toy/m/d/i1"
    assert follow.info.tags["mlflow.traceName"] == "toy/d/f=x/turn2"
    # The span: the messages sent and the answer as a chat completion.
    (span,) = follow.data.spans
    assert span.span_type == "CHAT_MODEL"
    assert span.inputs == {"messages": json.loads(FOLLOW)}
    assert span.outputs["choices"][0]["message"] == {
        "role": "assistant",
        "content": "B",
        "reasoning_content": "The user may be right.",
    }
    (first_span,) = first.data.spans
    assert first_span.outputs["choices"][0]["message"] == {"role": "assistant", "content": "A"}
    assessments = {a.name: a for a in follow.info.assessments}
    assert set(assessments) == {"label", "judge_margin", "expected"}
    label = assessments["label"]
    assert label.value == 1.0 and label.rationale.startswith('{"YES": -0.5')
    assert (label.source.source_type, label.source.source_id) == ("LLM_JUDGE", "judge:j@1")
    assert label.metadata == {"verdict": "YES", "labeler_sha256": "j1"}
    assert assessments["judge_margin"].value == pytest.approx(1.5)
    assert assessments["expected"].value == "B"
    assert follow.info.token_usage == {"input_tokens": 9, "output_tokens": 1, "total_tokens": 10}
    # UNCLEAR and SKIPPED are values of their own, from a rule.
    values = {
        t.info.tags["syps.store_key"]: (a.value, a.source.source_type)
        for t in found
        for a in t.info.assessments
        if a.name == "label"
    }
    assert values == {
        "k1": (0.0, "CODE"),
        "k2": (1.0, "LLM_JUDGE"),
        "k3": ("UNCLEAR", "CODE"),
        "": ("SKIPPED", "CODE"),
    }
    skipped = next(t for t in found if t.info.tags.get("syps.skipped"))
    assert skipped.data.spans[0].outputs is None


@pytest.mark.slow
def test_an_unbounded_judge_margin_is_the_labels_metadata(tmp_path: Path) -> None:
    # A judge whose other option got no score (an API without log-probabilities): the lead is
    # infinite, which a tracking server's JSON refuses as a number (tests/test_secrets.py logs
    # such a run to one), so it rides on the label as metadata, and no judge_margin feedback.
    responses, labels = _tables()
    labels.loc[12, "evidence"] = '{"YES": -0.5, "NO": null}; raw: \'Yes\''
    review = pd.DataFrame({"flagged": False, "expected": "B"}, index=labels.index)
    records = tr.records("toy", tr.conversations(responses, labels, review), [])
    client, run_id = _child(tmp_path, records)
    exp_id = client.get_run(run_id).info.experiment_id
    found = client.search_traces(locations=[exp_id], run_id=run_id, max_results=10)
    (judged,) = [t for t in found if t.info.tags["syps.store_key"] == "k2"]
    assessments = {a.name: a for a in judged.info.assessments}
    assert set(assessments) == {"label", "expected"}
    assert assessments["label"].metadata == {
        "verdict": "YES",
        "labeler_sha256": "j1",
        "judge_margin": "inf",
    }


@pytest.mark.slow
def test_a_child_logs_its_trace_index_and_links_its_tables(tmp_path: Path) -> None:
    """The child's traces.csv names each logged trace; its link hook sees that index and what
    it returns is logged in place of the child's artifacts."""
    responses, labels = _tables()
    records = tr.records("toy", tr.conversations(responses, labels))
    table = tmp_path / "rows"
    table.mkdir()
    (table / "rows.csv").write_text("store_key\nk2\n", encoding="utf-8")
    seen: list[pd.DataFrame] = []

    def link(index: pd.DataFrame, out: Path) -> list[Path | tuple[Path, str]]:
        seen.append(index)
        key_to_trace = dict(zip(index["store_key"], index["trace_id"], strict=True))
        (out / "rows.csv").write_text(f"store_key,trace\nk2,{key_to_trace['k2']}\n", "utf-8")
        return [(out / "rows.csv", "rows")]

    client, run_id = _child(tmp_path, records, artifacts=[(table, "rows")], link=link)
    exp_id = client.get_run(run_id).info.experiment_id
    found = client.search_traces(locations=[exp_id], run_id=run_id, max_results=10)
    ids = {t.info.tags["syps.store_key"]: t.info.trace_id for t in found}
    index = tr.read_trace_index(client.download_artifacts(run_id, "traces.csv", str(tmp_path)))
    assert dict(zip(index["store_key"], index["trace_id"], strict=True)) == ids
    assert index["label"].tolist() == ["0", "UNCLEAR", "1", "SKIPPED"]
    assert seen[0].equals(index)
    linked = client.download_artifacts(run_id, "rows/rows.csv", str(tmp_path / "dl"))
    assert Path(linked).read_text(encoding="utf-8") == f"store_key,trace\nk2,{ids['k2']}\n"


@pytest.mark.slow
def test_a_persons_label_in_the_ui_is_read_back(tmp_path: Path) -> None:
    responses, labels = _tables()
    client, run_id = _child(tmp_path, tr.records("toy", tr.conversations(responses, labels)))
    exp_id = client.get_run(run_id).info.experiment_id
    found = client.search_traces(locations=[exp_id], run_id=run_id, max_results=10)
    follow = next(t for t in found if t.info.tags["syps.store_key"] == "k2")
    with fluent_store(tracking_uri(tmp_path / "mlruns")):
        # What the UI's "add assessment" does: a feedback named label from a HUMAN source; a
        # second one from the same reviewer replaces the first.
        for value in (1.0, 0.0):
            time.sleep(0.01)  # the newest by its time
            mlflow.log_feedback(
                trace_id=follow.info.trace_id,
                name="label",
                value=value,
                source=AssessmentSource(source_type="HUMAN", source_id="ana"),
            )
        people = tr.human_labels(client, [run_id])
        assert people[
            ["item_id", "turn", "response", "human_label", "reviewer"]
        ].values.tolist() == [["i1", "2", "B", "0.0", "ana"]]
        assert np.array_equal(people["trace_id"], [follow.info.trace_id])


def test_sample_within_the_protocols_factors() -> None:
    # Discernment-like cells that name their argument: 4 arguments x 3 rows, two conditions.
    # Per cell every row would be kept at 2 a kind; within (direction) 2 of each condition.
    cells = [
        json.dumps({"arg_id": f"x/{d}/{i}", "direction": d}, separators=(",", ":"))
        for d in ("lower", "raise")
        for i in (1, 2)
    ]
    rows = pd.DataFrame(
        {
            "dataset": "d",
            "cell": [c for c in cells for _ in range(3)],
            "label": 0.0,
            "flagged": False,
            "row": range(12),
        }
    )
    assert len(tr.choose(rows, "sample", 3, 7, "m")) == 12  # 3 a cell: all
    chosen = tr.choose(rows, "sample", 2, 7, "m", factors=("direction",))
    assert sorted(chosen["row"] // 6) == [0, 0, 1, 1]  # rows 0-5 lower, 6-11 raise
    assert tr.choose(rows, "sample", 2, 7, "m", factors=("direction",)).equals(chosen)
