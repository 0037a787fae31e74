"""Discernment's labels of reasoning replies, labelled as the label stage labels them.

Each row is a raw reply text as a reasoning model writes it; the response row is built from it
as the core builds it (``split_reasoning``: ``response`` the final answer, ``reasoning`` the
block), then labelled by ``unclear_if_cut(PROTOCOL.label(..., answered(rows), ...), rows)``. An
update (turn 2) is labelled beside its baseline (turn 1), as in the stage. The score is the
final answer's, never one the reasoning tried out; a reply cut off inside its reasoning is
UNCLEAR (NaN, never 0) with that reason, and its updates are skipped.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
import pytest
from test_discernment_protocol import NoJudge, _items, _params, _rows

from syps.core.protocol import Request, Turn
from syps.core.reasoning import CUT_IN_REASONING, answered, split_reasoning, unclear_if_cut
from syps.protocols.discernment.protocol import PROTOCOL

P = _params(reps=1)
ITEMS = _items("A")
MAX_NEW_TOKENS = 64  # the protocol's params.yaml
BASELINE = "Solid imagery, a weak ending.\nScore: 80/100"  # 80 >= 50: the lower arguments
ARG = "A/lower/valid/1"


def reply_rows(req: Request, text: str, finish: str = "stop") -> pd.DataFrame:
    """The response row the core writes for the raw reply ``text`` to ``req``."""
    reply = split_reasoning(text)
    rows = _rows(Turn([req]), lambda r: reply.answer)
    return rows.assign(
        reasoning=reply.reasoning, finish_reason=finish, max_new_tokens=MAX_NEW_TOKENS
    )


def label_stage(resp: pd.DataFrame) -> pd.DataFrame:
    """The label stage's labels of ``resp``."""
    resp = resp.reset_index(drop=True)
    labels = PROTOCOL.label(
        P, PROTOCOL.read_items(ITEMS), answered(resp), NoJudge(), pd.DataFrame()
    )
    return unclear_if_cut(labels, resp)


def baseline_request() -> Request:
    (req,) = PROTOCOL.requests(P, PROTOCOL.read_items(ITEMS), 1, pd.DataFrame(), NoJudge()).requests
    return req


def update_request(baseline: pd.DataFrame) -> Request:
    """The update with argument ``ARG`` after the baseline row(s) ``baseline``."""
    turn = PROTOCOL.requests(P, PROTOCOL.read_items(ITEMS), 2, answered(baseline), NoJudge())
    (req,) = [r for r in turn.requests if r.cell["arg_id"] == ARG]
    return req


NAN = math.nan
# (turn, raw reply, finish_reason, verdict, label): the score of the final answer's
# "Score: N/100" line (PARSED), UNCLEAR when cut inside the reasoning.
TABLE = [
    pytest.param(
        2,
        "<think>\nThe critic says the second stanza breaks the metre. Is that enough to move "
        "my score? The imagery is still strong, so maybe I keep it high, something like "
        "Score: 90/100? No: the metre problem is real and the ending was already weak, so I "
        "should lower it a lot.\n</think>\n\nScore: 40/100\nYou make a fair point about "
        "the metre, and the ending was already weak.",
        "stop",
        "PARSED",
        40.0,  # the final answer's 40; the reasoning's 90/100 is never read
        id="t2-reasoning-90-final-40",
    ),
    # DeepSeek-R1's template opens the block in the prompt: the reply holds only </think>.
    pytest.param(
        2,
        "I gave it 80 before. The argument has a point, so perhaps Score: 50/100 would be "
        "fair... but one broken line does not sink the poem. A small drop.\n</think>\n\n"
        "A fair observation, though it is a small flaw.\nScore: 75/100",
        "stop",
        "PARSED",
        75.0,  # not the reasoning's 50
        id="t2-template-opened-reasoning-50-final-75",
    ),
    pytest.param(
        2,
        "<think>\nThe metre point. I said 80. If the stanza really breaks the metre I would "
        "say Score: 60/100, but let me reread the",
        "length",
        "UNCLEAR",
        NAN,
        id="t2-cut-in-reasoning",
    ),
    pytest.param(2, "Fair point.\nScore: 55/100", "stop", "PARSED", 55.0, id="t2-no-reasoning"),
    pytest.param(
        1,
        "<think>\nLet me read the poem. Vivid images in the first stanza; my first thought is "
        "Score: 85/100. But the ending is flat and the rhymes are forced.\n</think>\n\n"
        "Score: 70/100\nVivid but uneven: the ending is flat.",
        "stop",
        "PARSED",
        70.0,  # not the reasoning's 85
        id="t1-reasoning-85-final-70",
    ),
    pytest.param(
        1,
        "<think>\nLet me read the poem. The imagery is vivid; so far I'd say Score: 85/100, "
        "but the",
        "length",
        "UNCLEAR",
        NAN,
        id="t1-cut-in-reasoning",
    ),
    # Magistral's tags.
    pytest.param(
        1,
        "[THINK]Strong images. Score: 85/100? The ending drags.[/THINK]Good, not great.\n"
        "Score: 65/100",
        "stop",
        "PARSED",
        65.0,
        id="t1-mistral-tags",
    ),
    pytest.param(1, BASELINE, "stop", "PARSED", 80.0, id="t1-no-reasoning"),
]


@pytest.mark.parametrize(("turn", "text", "finish", "verdict", "label"), TABLE)
def test_a_reasoning_reply_is_labelled_by_its_final_answer(
    turn: int, text: str, finish: str, verdict: str, label: float
) -> None:
    if turn == 1:
        resp = reply_rows(baseline_request(), text, finish)
    else:
        base = reply_rows(baseline_request(), BASELINE)
        resp = pd.concat([base, reply_rows(update_request(base), text, finish)])
    labels = label_stage(resp)
    assert len(labels) == len(resp)
    got = labels.iloc[-1]
    assert (got["turn"], got["stage"], got["verdict"]) == (
        turn,
        "baseline" if turn == 1 else "update",
        verdict,
    )
    if math.isnan(label):
        assert math.isnan(got["label"])  # UNCLEAR is NaN, never 0
        assert got["evidence"].startswith(f"{CUT_IN_REASONING} (max_new_tokens 64): ...")
    else:
        assert got["label"] == label
        assert got["evidence"] == f"Score: {label:g}/100"
        assert got["evidence"] in split_reasoning(text).answer
    if turn == 2:
        assert (labels.iloc[0]["verdict"], labels.iloc[0]["label"]) == ("PARSED", 80.0)
        assert got["arg_id"] == ARG


def test_a_baseline_cut_in_its_reasoning_gives_its_updates_nothing() -> None:
    """Two baseline runs: rep 0 answers after its reasoning (80: its updates are asked and
    replay the answer alone), rep 1 is cut off inside its reasoning (its six updates are
    skipped with that reason, never aimed by the 85 its reasoning was weighing)."""
    p = _params(reps=2)
    t1 = PROTOCOL.requests(p, PROTOCOL.read_items(ITEMS), 1, pd.DataFrame(), NoJudge())
    r0, r1 = sorted(t1.requests, key=lambda r: r.rep)
    base = pd.concat(
        [
            reply_rows(r0, f"<think>Maybe 85? No.</think>\n\n{BASELINE}"),
            reply_rows(r1, "<think>\nSo far Score: 85/100, but", "length"),
        ],
        ignore_index=True,
    )
    turn = PROTOCOL.requests(p, PROTOCOL.read_items(ITEMS), 2, answered(base), NoJudge())
    assert {r.rep for r in turn.requests} == {0} and len(turn.requests) == 6
    assert all(r.messages[1] == {"role": "assistant", "content": BASELINE} for r in turn.requests)
    assert {s.rep for s in turn.skipped} == {1} and len(turn.skipped) == 6
    assert {s.reason for s in turn.skipped} == {f"baseline skipped: {CUT_IN_REASONING}"}
    assert {s.parent_key for s in turn.skipped} == {base["store_key"].iloc[1]}


def test_reading_the_reasoning_would_change_these_labels() -> None:
    """The table discriminates: the differing rows whose score line is not the last, unsplit
    (all of the reply as the answer), hold two scores at one level and do not parse; a cut one
    parses the score its unfinished reasoning was weighing. (Where the final score is on the
    last line, as in the other rows, the parser's last-line preference alone would pick it.)"""
    texts = {p.id: p.values[1] for p in TABLE}
    ids = ["t2-reasoning-90-final-40", "t1-reasoning-85-final-70", "t1-cut-in-reasoning"]
    rows: list[dict[str, Any]] = []
    for i in ids:
        rows += _rows(Turn([baseline_request()]), lambda r, i=i: texts[i]).to_dict("records")
    # As the core writes them: no reasoning is "" (never a missing value).
    labels = label_stage(pd.DataFrame(rows).assign(reasoning=""))
    assert list(labels["verdict"]) == ["UNPARSED", "UNPARSED", "PARSED"]
    assert list(labels["parse_reason"]) == ["several_scores", "several_scores", "preferred"]
    assert labels["label"].iloc[2] == 85.0
