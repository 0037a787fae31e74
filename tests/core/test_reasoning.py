"""A reply's reasoning and final answer (syps.core.reasoning), and what the core does with them:
labelers read the answer, later turns replay the answer, a reply cut off inside its reasoning
is UNCLEAR with that reason, and the reasoning stays in the response record."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from test_conversation import run
from toy_protocol import ToyBackend, ToyParams, toy_text

from syps.core.backends import GenResult
from syps.core.protocol import RESPONSE_COLUMNS
from syps.core.reasoning import (
    CUT_IN_REASONING,
    Reply,
    answered,
    split_reasoning,
    unclear_if_cut,
    with_reasoning,
)


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("B is correct.", Reply("", "B is correct.")),
        (
            "<think>The user says D. Hmm, D is wrong.</think>\n\nThe answer is B.",
            Reply("<think>The user says D. Hmm, D is wrong.</think>", "The answer is B."),
        ),
        # The chat template opened the block in the prompt (DeepSeek-R1): only the closing tag.
        ("Let me think. A or B?</think>B.", Reply("Let me think. A or B?</think>", "B.")),
        # The last closing tag ends the reasoning: a tag quoted inside it cannot end it early.
        (
            "<think>I must not write </think> too soon. So: A.</think> A",
            Reply("<think>I must not write </think> too soon. So: A.</think>", "A"),
        ),
        # Cut off inside the reasoning: no answer, whatever the reasoning said.
        (
            "<think>The answer is clearly C, but let me",
            Reply("<think>The answer is clearly C, but let me", "", cut=True),
        ),
        ("  \n<think>still thinking", Reply("  \n<think>still thinking", "", cut=True)),
        # Mistral's tags.
        (
            "[THINK]maybe A[/THINK]My answer is B.",
            Reply("[THINK]maybe A[/THINK]", "My answer is B."),
        ),
        ("[THINK]maybe A", Reply("[THINK]maybe A", "", cut=True)),
        # A tag in the middle of an answer is the answer's own words.
        ("Use a <think> tag to reason.", Reply("", "Use a <think> tag to reason.")),
        ("", Reply("", "")),
    ],
)
def test_split_reasoning(text: str, want: Reply) -> None:
    assert split_reasoning(text) == want


def test_an_api_reasoning_field_is_written_as_one_block() -> None:
    assert with_reasoning("", "B.") == "B."
    text = with_reasoning("D? No.", "B.")
    assert text == "<think>D? No.</think>\nB."
    assert split_reasoning(text) == Reply("<think>D? No.</think>", "B.")


def _rows(reasoning: list[str], responses: list[str]) -> pd.DataFrame:
    rows = pd.DataFrame([{c: "" for c in RESPONSE_COLUMNS} for _ in reasoning])
    rows["reasoning"], rows["response"], rows["max_new_tokens"] = reasoning, responses, 32
    return rows


def test_a_cut_row_is_not_answered_and_its_label_is_unclear_with_the_reason() -> None:
    rows = _rows(["", "<think>D is right, I think", "<think>x</think>"], ["B.", "", "A."])
    seen = answered(rows)
    assert list(seen["skipped"]) == ["", CUT_IN_REASONING, ""]
    assert list(rows["skipped"]) == ["", "", ""]  # the caller's table is left as it was
    labels = pd.DataFrame(
        {"label": [1.0, math.nan, 0.0], "verdict": ["YES", "SKIPPED", "NO"], "evidence": "e"}
    )
    out = unclear_if_cut(labels, rows)
    assert list(out["verdict"]) == ["YES", "UNCLEAR", "NO"]
    assert out["label"].iloc[1] != out["label"].iloc[1]  # NaN, never 0
    assert out["evidence"].iloc[1] == (
        "cut off inside its reasoning (max_new_tokens 32): ...'<think>D is right, I think'"
    )
    assert list(out["evidence"].iloc[[0, 2]]) == ["e", "e"]


def test_answer_only_is_replayed_and_the_reasoning_is_kept(tmp_path: Path) -> None:
    """The toy protocol (tests/toy_protocol.py) with a reasoning model: every reply opens with a
    reasoning block that says SKIP (which would skip the children if it were read), the answer
    after it is the toy's usual one; q0's turn-1 reply is cut off inside its reasoning.

    Hand count: q0 cut (its 2 children built on an empty answer by the toy, which does not look
    at skipped parents, so it is told: the core marks the parent skipped), q1 answered (2
    children), q2 ("skipme") answers SKIP after its reasoning (2 children skipped by the toy)."""
    reasoning = "<think>I could just answer SKIP here.</think>\n"

    def reply(messages: list[dict[str, str]], seed: int) -> GenResult:
        text = toy_text(messages, seed)
        if len(messages) == 1 and "alpha" in messages[0]["content"]:
            return GenResult("<think>I could just answer SKIP", 5, 9, "length")
        return GenResult(reasoning + text, 5, 9, "stop")

    rows, _, _ = run(tmp_path / "s.sqlite", ToyParams(), ToyBackend(reply=reply))
    t1 = rows[rows["turn"] == 1].set_index("item_id")
    assert t1.loc["q0", "response"] == ""
    assert t1.loc["q0", "reasoning"] == "<think>I could just answer SKIP"
    assert t1.loc["q1", "reasoning"] == reasoning.strip()
    assert t1.loc["q1", "response"] == toy_text(json.loads(t1.loc["q1", "messages"]), 0)
    # Turn 2 replays the answer only, never the reasoning.
    for r in rows[(rows["turn"] == 2) & (rows["skipped"] == "")].itertuples():
        sent: list[dict[str, Any]] = json.loads(r.messages)
        assert sent[1]["role"] == "assistant" and "<think>" not in sent[1]["content"]
        assert "SKIP" not in sent[1]["content"]
    # Every reply's tokens, reasoning included, are its completion tokens.
    assert set(rows.loc[rows["skipped"] == "", "completion_tokens"]) == {9}
