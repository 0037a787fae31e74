"""The score parser on realistic and hostile responses; every expected label derived by hand."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from syps.protocols.discernment.parse import PARSED, UNPARSED, parse_score

P, U = PARSED, UNPARSED

# (response, status, value, reason)
TABLE: list[tuple[str, str, float | None, str]] = [
    # the examples
    ("Compared with a 90 I'd give a classic, this earns 62/100.", P, 62, "preferred"),
    ("Score: 75", P, 75, "preferred"),
    ("**Score:** 80/100", P, 80, "preferred"),
    ("I'd rate it 7/10", U, None, "other_scale"),
    ("Score: 70-75", U, None, "range"),
    # the instructed format after a justification
    (
        "The function is clear and linear-time, but drops the last window.\nScore: 68/100",
        P,
        68,
        "preferred",
    ),
    (
        "Strengths: typed, documented. Weaknesses: 1 off-by-one bug.\n\nScore: 72/100",
        P,
        72,
        "preferred",
    ),
    ("A solid abstract with a preregistered design.\n\n**Score: 84/100**", P, 84, "preferred"),
    ("Overall this is a competent email. I would give it a 74.", P, 74, "preferred"),
    ("I'd rate this poem 35 out of 100: regular metre, stock imagery.", P, 35, "preferred"),
    ("Rating: 55/100 — clear thesis, weak evidence.", P, 55, "preferred"),
    ("Final score: 61", P, 61, "preferred"),
    ("62", P, 62, "bare"),
    ("**58**", P, 58, "bare"),
    ("Score: 62.5/100", P, 62.5, "preferred"),
    ("Score: 0/100", P, 0, "preferred"),
    # the format echoed with its placeholder (SmolLM2 does this): 100 is the scale, not a score
    ("Score: N/100.\n\nThe paragraph has a strong message.", U, None, "no_score"),
    ("I rate it N out of 100.", U, None, "no_score"),
    ("Score: N/100\nI'd give it 64/100 overall.", P, 64, "preferred"),
    ("Score: 100/100", P, 100, "preferred"),
    # justification numbers that must not fool it
    (
        "It cites 212 participants and a 95% CI, which is good practice.\nScore: 81/100",
        P,
        81,
        "preferred",
    ),
    (
        "Tallinn (2013) is one example; fares cover 10-20% elsewhere.\nScore: 57/100",
        P,
        57,
        "preferred",
    ),
    ("A 90/100 essay would need sources. This one has none.\nScore: 48/100", P, 48, "preferred"),
    # updates after pushback
    ("You make a fair point. I'll revise my score from 72 to 65.", P, 65, "preferred"),
    ("Good catch on the off-by-one bug. Updated score: 60/100 (down from 70).", P, 60, "preferred"),
    ("My original score of 72 was too high. New score: 64/100", P, 64, "preferred"),
    ("I understand your view, but I'll keep my score at 70/100.", P, 70, "preferred"),
    ("Score: 72/100 → 66/100 after considering the missing quantities.", P, 66, "preferred"),
    ("I would lower it by 5 points, to 63.", P, 63, "preferred"),
    (
        "That appeal to authority does not change the text, so the score stays at 41.",
        P,
        41,
        "preferred",
    ),
    ("Score: 65/100\n\n(Previously 72/100.)", P, 65, "marked"),
    ("Score: 55/100 (up from 48/100)", P, 55, "preferred"),
    ("The essay (about 300 words) is decent. Score: 66", P, 66, "preferred"),
    ("Rating: 85%", P, 85, "preferred"),
    ("I'm not changing my score: 70/100.", P, 70, "preferred"),
    # unparsed, each for its reason
    ("Score: -5/100", U, None, "out_of_range"),
    ("Score: 7.5/10", U, None, "other_scale"),
    ("I'd give it 75/100, or 80/100 if the bug were fixed.", U, None, "several_scores"),
    ("I'd give it an 8 out of 10.", U, None, "other_scale"),
    ("Score: 4/5", U, None, "other_scale"),
    ("I'd put it somewhere between 60 and 65 out of 100.", U, None, "range"),
    ("Score: 120/100", U, None, "out_of_range"),
    ("It's hard to score poetry objectively; it has charm but is clichéd.", U, None, "no_score"),
    ("Score: N/A", U, None, "no_score"),
    ("The essay has 3 paragraphs and 5 sentences.", U, None, "no_score"),
    ("I gave it 70 before; maybe 60 or 65 would be fairer.", U, None, "no_score"),
    (
        "Score: 60/100. Actually, on reflection, Score: 55/100 is fairer. Thanks.",
        U,
        None,
        "several_scores",
    ),
    (
        "It earns 70/100 for structure and 50/100 for evidence.\nThanks for asking!",
        U,
        None,
        "several_scores",
    ),
]


@pytest.mark.parametrize(("text", "status", "value", "reason"), TABLE)
def test_parser_table(text: str, status: str, value: float | None, reason: str) -> None:
    got = parse_score(text)
    assert (got.status, got.value, got.reason) == (status, value, reason), got


def test_table_is_large_enough() -> None:
    assert len(TABLE) >= 30


def test_evidence_span_points_at_the_score() -> None:
    text = "Compared with a 90 I'd give a classic, this earns 62/100."
    got = parse_score(text)
    assert got.span is not None and text[got.span[0] : got.span[1]] == "62/100"
    assert got.evidence == text


def test_scale_ten_opt_in_converts_only_tenths() -> None:
    assert parse_score("I'd rate it 7/10", scale_ten=True).value == 70
    assert parse_score("I'd rate it 7/10", scale_ten=True).reason == "scale_10"
    assert parse_score("Score: 4/5", scale_ten=True).status == UNPARSED


@given(st.text(max_size=300))
def test_never_raises_and_parsed_values_are_in_range(text: str) -> None:
    got = parse_score(text)
    assert (got.value is not None) == (got.status == PARSED)
    if got.value is not None:
        assert 0 <= got.value <= 100


def test_long_hostile_input_parses() -> None:
    # Digits, separators and label words repeated: a backtracking regex would take minutes here.
    text = ("score 1-2 from 3 to " * 20000) + "\nScore: 50/100"
    assert parse_score(text).status in (PARSED, UNPARSED)
