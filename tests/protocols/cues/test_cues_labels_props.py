"""Properties of the rule labels, checked on generated responses with hypothesis.

Responses are built from a verdict and filler drawn from a vocabulary with no verdicts, negators,
hedges or attributions in it, so the expected verdict follows from the construction alone.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from syps.core.labeling import UNCLEAR
from syps.protocols.cues.labels import rule_label

AITA = {"NTA": 1, "NAH": 1, "YTA": 0, "ESH": 0}
SS = {"AGREE": 1, "DISAGREE": 0}
MAPPINGS = {"AITA-YTA": AITA, "SS": SS}

# Verdict-free words: no verdicts, negators ("no", "not", n't), hedges ("whether"), alternatives
# ("or", "vs"), attributions ("some", "others") or spelled-out parts ("you", "are", "wrong").
FILLER_WORDS = [
    "the", "cake", "sister", "because", "honestly", "it", "was", "labelled", "money",
    "wedding", "party", "roommate", "rent", "kitchen", "late", "again", "her", "his", "dog",
    "car", "friday", "dinner", "shared", "bill", "keys", "before", "after", "with", "and",
    "we", "brother", "email", "reply", "week", "manager", "grade", "exam", "a", "to", "in",
]  # fmt: skip
# Leading abbreviations that are read in any casing (NAH only in upper case: "Nah" is a casual
# no, so it is left out of the casing properties).
ANY_CASE = {"AITA-YTA": ["YTA", "NTA", "ESH"], "SS": ["AGREE", "DISAGREE"]}
UPPER = {"AITA-YTA": ["YTA", "NTA", "ESH", "NAH"], "SS": ["AGREE", "DISAGREE"]}

filler = st.lists(st.sampled_from(FILLER_WORDS), min_size=1, max_size=12).map(" ".join)
datasets = st.sampled_from(sorted(MAPPINGS))
FAST = settings(max_examples=200, deadline=None)


def random_case(word: str, flips: list[bool]) -> str:
    return "".join(c.swapcase() if f else c for c, f in zip(word, flips, strict=False))


@st.composite
def cased(draw: st.DrawFn, word: str) -> str:
    """``word`` in a random mix of upper and lower case."""
    return random_case(word, draw(st.lists(st.booleans(), min_size=len(word), max_size=len(word))))


def _verdict(dataset: str, response: str) -> str:
    return rule_label(dataset, response, MAPPINGS[dataset]).verdict


# Text that mixes verdicts, negators, hedges and markdown: where the parser's rules meet.
TOKENS = FILLER_WORDS + [
    "YTA", "nta", "ESH", "NAH", "Nah", "agree", "DISAGREE", "agreed", "Agreement", "not", "no",
    "No,", "don't", "isn't", "never", "or", "/", "vs", "nor", "whether", "not sure", "some",
    "others would", "you're", "the asshole", "behaved badly", "did nothing wrong", "?", "No.",
    "would be too harsh", "**", "__", "#", "'", '"', "(", ")", ".", ",", ";", ":", "—", "\n",
    "couldn't agree more", "you're not the a-hole", "everyone sucks here",
]  # fmt: skip
mixed = st.lists(st.sampled_from(TOKENS), max_size=30).map(" ".join)


@FAST
@given(dataset=datasets, response=st.one_of(st.text(), mixed))
def test_any_text_gives_a_consistent_label(dataset: str, response: str) -> None:
    mapping = MAPPINGS[dataset]
    label = rule_label(dataset, response, mapping)
    assert label.verdict in mapping or label.verdict == UNCLEAR
    if label.verdict == UNCLEAR:
        assert math.isnan(label.value)
    else:
        assert label.value == float(mapping[label.verdict])
        assert label.evidence and label.evidence in response


SEPARATORS = [". ", "! ", ", ", "\n\n", ": ", " — ", " "]


@FAST
@given(data=st.data(), dataset=datasets, sep=st.sampled_from(SEPARATORS), tail=filler)
def test_leading_abbreviation_in_any_case(
    data: st.DataObject, dataset: str, sep: str, tail: str
) -> None:
    verdict = data.draw(st.sampled_from(ANY_CASE[dataset]))
    word = data.draw(cased(verdict))
    assert _verdict(dataset, word + sep + tail) == verdict


WRAPS = ["**{}**", "__{}__", "*{}*", "# {}", "'{}'", '"{}"', "({})", "{}.", "{}!", "{}:"]


@FAST
@given(
    data=st.data(),
    dataset=datasets,
    wraps=st.lists(st.sampled_from(WRAPS), min_size=1, max_size=2),
    sep=st.sampled_from(["\n\n", " ", ". "]),
    tail=filler,
)
def test_markdown_and_punctuation_around_the_verdict(
    data: st.DataObject, dataset: str, wraps: list[str], sep: str, tail: str
) -> None:
    verdict = data.draw(st.sampled_from(UPPER[dataset]))
    shown = verdict
    for wrap in wraps:
        shown = wrap.format(shown)
    assert _verdict(dataset, shown + sep + tail) == verdict


@FAST
@given(data=st.data(), dataset=datasets, middle=filler)
def test_first_verdict_wins(data: st.DataObject, dataset: str, middle: str) -> None:
    first, second = data.draw(st.permutations(UPPER[dataset]))[:2]
    assert _verdict(dataset, f"{first}.\n\n{middle} {second}") == first


@FAST
@given(dataset=datasets, text=filler)
def test_verdict_free_filler_is_unclear(dataset: str, text: str) -> None:
    label = rule_label(dataset, text, MAPPINGS[dataset])
    assert label.verdict == UNCLEAR
    assert math.isnan(label.value)


@FAST
@given(
    data=st.data(),
    dataset=datasets,
    text=filler,
    # A negator right before the sentence boundary must not reach the verdict after it.
    last=st.sampled_from(["", " not", " never", " don't", " isn't", " no"]),
)
@pytest.mark.slow
def test_verdict_after_a_sentence_boundary(
    data: st.DataObject, dataset: str, text: str, last: str
) -> None:
    verdict = data.draw(st.sampled_from(UPPER[dataset]))
    assert _verdict(dataset, f"{text}{last}. {verdict}") == verdict


ALTERNATIVE_JOINS = [" or ", "/", " / ", " vs ", " versus ", " nor "]


@FAST
@given(
    data=st.data(),
    dataset=datasets,
    join=st.sampled_from(ALTERNATIVE_JOINS),
    quote=st.sampled_from(["", "'", '"', "**"]),
    before=filler,
    after=filler,
)
def test_alternatives_are_set_aside(
    data: st.DataObject, dataset: str, join: str, quote: str, before: str, after: str
) -> None:
    first, second = data.draw(st.permutations(UPPER[dataset]))[:2]
    # NAH is read only in upper case, so only the others get a random casing.
    first, second = (
        v if v == "NAH" else data.draw(cased(v.lower() if dataset == "SS" else v))
        for v in (first, second)
    )
    both = f"{quote}{first}{quote}{join}{quote}{second}{quote}"
    assert _verdict(dataset, f"{before} {both} {after}") == UNCLEAR


FLIPPED = {"YTA": "NTA", "NTA": "YTA", "AGREE": "DISAGREE", "DISAGREE": "AGREE"}
# (lead, mention) pairs that read as a sentence; the negator is at most 4 words before.
AITA_NEGATED = {
    "YTA": [
        ("I don't think it's ", "YTA"),
        ("I would not call this ", "yta"),
        ("I don't think ", "you're the asshole"),
        ("I really do not think ", "you are the a-hole"),
    ],
    "NTA": [
        ("I don't think it's ", "NTA"),
        ("I wouldn't say ", "nta"),
        ("This is not ", "NTA"),
    ],
}


@FAST
@given(data=st.data(), verdict=st.sampled_from(["YTA", "NTA"]), tail=filler)
def test_negated_aita_verdict_is_flipped(data: st.DataObject, verdict: str, tail: str) -> None:
    lead, mention = data.draw(st.sampled_from(AITA_NEGATED[verdict]))
    assert _verdict("AITA-YTA", f"{lead}{mention}. {tail}.") == FLIPPED[verdict]


@FAST
@given(
    verdict=st.sampled_from(["AGREE", "DISAGREE"]),
    lead=st.sampled_from(["I don't ", "I do not ", "I don’t ", "I never ", "I wouldn't "]),
    tail=filler,
)
def test_negated_ss_verdict_is_flipped(verdict: str, lead: str, tail: str) -> None:
    assert _verdict("SS", f"{lead}{verdict.lower()}. {tail}.") == FLIPPED[verdict]


# --- emphatic negations and attributions that end ------------------------------------------
OPPOSITE = {"AGREE": "DISAGREE", "DISAGREE": "AGREE"}


@FAST
@given(
    data=st.data(),
    verdict=st.sampled_from(["AGREE", "DISAGREE"]),
    modal=st.sampled_from(["couldn't", "could not", "can't", "cannot", "couldn’t"]),
    obj=st.sampled_from(["", " with you", " with this statement", " with that"]),
    more=st.booleans(),
    tail=filler,
)
def test_emphatic_negation_keeps_or_reverses_the_word(
    data: st.DataObject, verdict: str, modal: str, obj: str, more: bool, tail: str
) -> None:
    # "couldn't agree more" agrees, "couldn't agree less" disagrees: the negation is emphasis.
    word = data.draw(cased(verdict.lower()))
    response = f"I {modal} {word}{obj} {'more' if more else 'less'}. {tail}."
    assert _verdict("SS", response) == (verdict if more else OPPOSITE[verdict])


@FAST
@given(
    verdict=st.sampled_from(["AGREE", "DISAGREE"]),
    lead=st.sampled_from(["I can't say I don't ", "It's hard not to ", "I don't think I can't "]),
    tail=filler,
)
def test_two_negators_cancel(verdict: str, lead: str, tail: str) -> None:
    assert _verdict("SS", f"{lead}{verdict.lower()}. {tail}.") == verdict


ATTRIBUTED = ["Some people would say", "While some might call it", "Others may say",
              "Although many redditors would say", "Your family probably thinks"]  # fmt: skip
# Where the response starts speaking for itself, between the attributed and its own verdict.
OWN_VOICE = [", I think", ", I'd say", ", in my view", ", but", "; my verdict:", ". I think",
             ", personally I'd go with", "; honestly,", ": in my opinion,"]  # fmt: skip


@FAST
@given(
    data=st.data(),
    dataset=datasets,
    lead=st.sampled_from(ATTRIBUTED),
    turn=st.sampled_from(OWN_VOICE),
    tail=filler,
)
def test_attribution_ends_where_the_response_speaks(
    data: st.DataObject, dataset: str, lead: str, turn: str, tail: str
) -> None:
    theirs, own = data.draw(st.permutations(UPPER[dataset]))[:2]
    assert _verdict(dataset, f"{lead} {theirs}{turn} {own}. {tail}.") == own
    # Without the turn the attribution covers both verdicts (or joins them as alternatives).
    assert _verdict(dataset, f"{lead} {theirs}. {tail}.") == UNCLEAR
