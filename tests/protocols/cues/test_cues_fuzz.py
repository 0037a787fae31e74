"""Fuzzing with hypothesis: the template renderer, ``fill``, the rule parsers and ``read_csv``.

test_cues_templates.py and test_cues_labels_props.py check that typical text is placed verbatim and
labelled as constructed; this module throws arbitrary (and adversarial) input at the same code
and checks only what must hold for *any* input: no unexpected exception, no interpretation of
the situation text, consistent labels, and parse time that grows about linearly.
"""

from __future__ import annotations

import json
import math
import re
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from syps.core.config import ConfigError
from syps.core.io import InputError, canonical_json, read_csv
from syps.core.labeling import UNCLEAR
from syps.core.templating import fill
from syps.protocols.cues.labels import NEGATED, VERDICT_PATTERNS, extract_verdict, rule_label
from syps.protocols.cues.params import VARIANTS, DatasetTemplate, TemplateParams
from syps.protocols.cues.templates import render_variants

pytestmark = pytest.mark.slow  # hypothesis searches, several seconds each

FUZZ = settings(max_examples=150, deadline=None)

# --- strategies -----------------------------------------------------------------------------------
# Pieces that have meant something to some renderer: format fields, escapes, chat-template
# tokens, JSON, line-ending mixes, invisible and bidi characters.
HOSTILE_PIECES = [
    "{situation}", "{0}", "{}", "{{", "}}", "${x}", "%s", "%(name)s", "%%", "\\", "\\n", "\\1",
    "\\g<0>", "<|im_start|>", "<|im_end|>", "<|endoftext|>", "[INST]", "</s>", "<think>",
    '{"role": "system", "content": "x"}', "\r\n", "\r", "\n", "\n\n", "\t", "\x00", "\x1b[31m",
    "\u2028", "\u2029", "\x85", "\u200b", "\u202e", "\ufeff", "é", "e\u0301", "🙂", "𝔘", "\x7f",
]  # fmt: skip
# Every code point but surrogates (which cannot be encoded to UTF-8), so control characters,
# private-use and unassigned ones are all drawn.
any_char = st.characters(exclude_categories=["Cs"])
piece = st.one_of(st.text(any_char, max_size=20), st.sampled_from(HOSTILE_PIECES))
hostile_text = st.lists(piece, max_size=12).map("".join)
# Long strings: a drawn piece repeated, up to ~50k characters.
long_text = st.builds(
    lambda p, n: p * n, st.text(any_char, min_size=1, max_size=8), st.integers(500, 6000)
)
situation = st.one_of(hostile_text, long_text).filter(lambda t: t.strip() != "")
cue_text = st.one_of(st.just(""), hostile_text)


@st.composite
def dataset_template(draw: st.DrawFn) -> DatasetTemplate:
    """A template with arbitrary task, format and cues; some cues have several wordings."""
    cues: dict[str, str | list[str]] = {"P0": draw(cue_text)}
    for v in draw(st.lists(st.sampled_from(VARIANTS[1:]), unique=True, max_size=7)):
        if draw(st.booleans()):
            cues[v] = draw(cue_text)
        else:
            cues[v] = draw(st.lists(cue_text, min_size=2, max_size=3))
    return DatasetTemplate(task=draw(hostile_text), format=draw(hostile_text), cues=cues)


def occurrences(needle: str, hay: str) -> list[int]:
    """Start of every occurrence of ``needle`` in ``hay``, overlapping ones included."""
    out, i = [], hay.find(needle)
    while i >= 0:
        out.append(i)
        i = hay.find(needle, i + 1)
    return out


# --- render_variants ------------------------------------------------------------------------------
@FUZZ
@given(
    situations=st.lists(situation, min_size=1, max_size=3, unique=True),
    tpl=dataset_template(),
    position=st.sampled_from(["before", "after"]),
)
def test_render_variants_on_arbitrary_text(
    situations: list[str], tpl: DatasetTemplate, position: str
) -> None:
    cues = tpl.variant_cues()
    # A situation that also occurs inside the fixed parts of a prompt (cue, format or the blank
    # lines that join them) cannot be counted "exactly once"; those draws say nothing here.
    for s in situations:
        assume(all(s not in f"\n\n{c.strip()}\n\n{tpl.format.strip()}\n\n" for c in cues.values()))
    items = pd.DataFrame(
        {
            "dataset": "SS",
            "item_id": [f"id{i}" for i in range(len(situations))],
            "situation": situations,
        }
    )
    out = render_variants(items, TemplateParams(cue_position=position, datasets={"SS": tpl}))  # type: ignore[arg-type]

    assert len(out) == len(situations) * len(cues)
    assert set(out["variant"]) == set(cues)
    systems = set()
    for row in out.itertuples():
        msgs = json.loads(row.messages)
        # The messages JSON is canonical: decoding and re-encoding gives the same bytes.
        assert canonical_json(msgs) == row.messages
        assert [m["role"] for m in msgs] == ["system", "user"]
        assert set(msgs[0]) == set(msgs[1]) == {"role", "content"}
        systems.add(msgs[0]["content"])
        user = msgs[1]["content"]
        sit = situations[int(row.item_id[2:])]
        assert len(occurrences(sit, user)) == 1, (sit, user)
        cue = cues[row.variant].strip()
        # The cue sits on the configured side of the situation, the format closes the turn.
        if cue:
            assert (user.index(cue) < user.index(sit)) == (position == "before")
        assert user.endswith(tpl.format.strip())
    # The system turn is byte-identical across variants (and items).
    assert systems == {tpl.task.strip()}


# --- fill -----------------------------------------------------------------------------------------
# A copy of the placeholder syntax fill documents: {identifier}, ASCII.
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True)


@st.composite
def placeholder_values(draw: st.DrawFn) -> dict[str, str]:
    keys = draw(st.lists(names, min_size=1, max_size=4, unique=True))
    # Values that look like placeholders of the other keys, or like regex replacement syntax.
    tricky = st.one_of(
        hostile_text, st.sampled_from(keys).map(lambda k: "{" + k + "}"), st.just("\\g<0>\\1")
    )
    return {k: draw(st.lists(tricky, max_size=3).map("".join)) for k in keys}


@FUZZ
@given(values=placeholder_values(), data=st.data())
def test_fill_inserts_values_verbatim_in_one_pass(
    values: dict[str, str], data: st.DataObject
) -> None:
    keys = list(values)
    # Every key at least once, some twice, in a drawn order, between literal text that holds
    # no placeholder of its own (braces are fine, "{x}" is not).
    order = data.draw(
        st.permutations(keys + data.draw(st.lists(st.sampled_from(keys), max_size=3)))
    )
    literal = hostile_text.filter(lambda t: PLACEHOLDER.search(t) is None)
    lits = [data.draw(literal) for _ in range(len(order) + 1)]
    template = lits[0] + "".join(
        "{" + k + "}" + lit for k, lit in zip(order, lits[1:], strict=True)
    )
    expected = lits[0] + "".join(values[k] + lit for k, lit in zip(order, lits[1:], strict=True))
    assert fill(template, values, "judge.template") == expected


@FUZZ
@given(
    template=st.one_of(
        hostile_text,
        st.lists(st.one_of(piece, names.map("{{{}}}".format)), max_size=8).map("".join),
    ),
    values=st.dictionaries(st.one_of(names, st.text(max_size=5)), hostile_text, max_size=4),
)
def test_fill_fails_only_with_config_error(template: str, values: dict[str, str]) -> None:
    found = set(PLACEHOLDER.findall(template))
    should_fail = bool(found - set(values)) or bool(set(values) - found)
    try:
        got = fill(template, values, "judge.template")
    except ConfigError as e:
        assert should_fail, f"fill raised {e} for a template that uses exactly its values"
        assert "judge.template" in str(e)
        return
    assert not should_fail
    # Nothing but the placeholders changed: splitting on them gives back the literal text.
    literal = PLACEHOLDER.split(template)[::2]
    pos = 0
    for lit in literal:
        i = got.find(lit, pos)
        assert i >= 0
        pos = i + len(lit)


# --- rule parsers ---------------------------------------------------------------------------------
MAPPINGS = {
    "AITA-YTA": {"NTA": 1, "NAH": 1, "YTA": 0, "ESH": 0},
    "SS": {"AGREE": 1, "DISAGREE": 0},
}
# A grammar of everything the rules react to, in several casings and apostrophes.
VERDICT_TOKENS = [
    "YTA", "yta", "NTA", "Nta", "ESH", "NAH", "Nah", "nah", "AGREE", "agree", "Agreed",
    "disagrees", "DISAGREE", "agreement", "you're the asshole", "You’re not the a-hole",
    "you are an arsehole", "you are hardly the AH", "not the a**hole", "you're in the wrong",
    "you're not in the wrong", "you behaved badly", "OP didn't act badly", "you did nothing wrong",
    "everyone sucks here", "no assholes here", "couldn't agree more", "can’t agree more",
    "couldn't disagree more", "could not agree with you more", "can't agree less",
    "you couldn't be more in the wrong", "you couldn't be less of an asshole", "nobody is the AH",
    "you're both in the wrong", "you weren't the asshole", "in full agreement", "beg to differ",
]  # fmt: skip
NEGATORS = ["not", "never", "hardly", "no", "No,", "don't", "isn’t", "wouldn't", "can't",
            "cannot", "hard to", "fail to", "no doubt", "can't help but", "not only"]  # fmt: skip
HEDGES = [
    "not sure",
    "unsure",
    "uncertain",
    "whether",
    "hard to say",
    "can't tell",
    "cannot decide",
]
ATTRIBUTIONS = ["some people", "others", "many would", "commenters", "redditors", "might argue",
                "your sister thinks", "while", "although", "I think", "in my view", "my verdict",
                "personally", "I wouldn't", "they'd be right", "you're not"]  # fmt: skip
REJECTIONS = ["? No", "would be too harsh", "is unfair", "isn't right", "doesn't apply"]
JOINERS = ["or", "/", "vs.", "versus", "nor", "but", "however", "though", "still"]
MARKS = ["**", "__", "*", "`", "'", '"', "“", "”", "‘", "’", "(", ")", "[", "]", "#", "-", ">"]
PUNCT = [".", ",", ";", ":", "!", "?", "\n", "\n\n", "—", "–", "...", "\r\n"]
FILLER = ["the", "cake", "sister", "honestly", "really", "quite", "it", "was", "I", "think",
          "you", "are", "say", "would", "be", "a", "fair", "call", "here", "OP"]  # fmt: skip
grammar_token = st.sampled_from(
    VERDICT_TOKENS
    + NEGATORS
    + HEDGES
    + ATTRIBUTIONS
    + REJECTIONS
    + JOINERS
    + MARKS
    + PUNCT
    + FILLER
)
grammar_text = st.lists(
    st.tuples(grammar_token, st.sampled_from(["", " ", " ", "  ", "\t"])), max_size=40
).map(lambda parts: "".join(t + sep for t, sep in parts))
response = st.one_of(st.text(any_char, max_size=300), grammar_text, hostile_text)
datasets = st.sampled_from(sorted(MAPPINGS))


def check_label(dataset: str, text: str) -> tuple[str, str]:
    mapping = MAPPINGS[dataset]
    verdict, span = extract_verdict(dataset, text)
    assert verdict == UNCLEAR or verdict in VERDICT_PATTERNS[dataset]
    if verdict == UNCLEAR:
        assert span == ""
    else:
        assert span and span in text
    label = rule_label(dataset, text, mapping)
    assert label.verdict == UNCLEAR or label.verdict in mapping
    assert math.isnan(label.value) == (label.verdict == UNCLEAR)
    if label.verdict != UNCLEAR:
        assert label.value == float(mapping[label.verdict])
        assert label.verdict == verdict
        assert label.evidence == span and label.evidence in text
    return verdict, span


@settings(max_examples=400, deadline=None)
@given(dataset=datasets, text=response)
def test_rule_parsers_on_arbitrary_and_grammar_text(dataset: str, text: str) -> None:
    check_label(dataset, text)


@FUZZ
@given(dataset=datasets, text=grammar_text, tail=response)
def test_text_after_a_new_sentence_cannot_change_a_decided_verdict(
    dataset: str, text: str, tail: str
) -> None:
    # The first verdict wins, and every rule that can set a mention aside or flip it looks no
    # further than its own sentence; a later sentence may only decide what was UNCLEAR.
    verdict, _ = check_label(dataset, text)
    assume(verdict != UNCLEAR)
    assert check_label(dataset, f"{text}. {tail}")[0] == verdict


@FUZZ
@given(
    dataset=datasets,
    text=grammar_text,
    lead=st.lists(st.sampled_from(["the", "cake", "was", "late", "again", "dinner"]), max_size=8),
)
def test_a_verdict_free_sentence_before_changes_nothing(
    dataset: str, text: str, lead: list[str]
) -> None:
    before = check_label(dataset, text)[0]
    assert check_label(dataset, " ".join(["Well", *lead]) + ". " + text)[0] == before


def test_negation_table_is_closed() -> None:
    # A flipped verdict must itself be a verdict of the dataset, or the label would be invalid.
    for ds, table in NEGATED.items():
        assert set(table) | set(table.values()) <= set(VERDICT_PATTERNS[ds])


# Inputs that make backtracking regexes, or a rescan of the text per mention, blow up. Each
# builds a string of exactly n characters; each is run on the dataset whose rules it targets.
ADVERSARIAL: dict[str, tuple[str, Callable[[int], str]]] = {
    "you're x n": ("AITA-YTA", lambda n: ("you're " * n)[:n]),
    "you are x n + the asshole": (
        "AITA-YTA",
        lambda n: ("you are " * n)[: n - 12] + " the asshole",
    ),
    "not x n + agree": ("SS", lambda n: ("not " * n)[: n - 6] + " agree"),
    # Negated mentions in one clause, and chains of negators ("not hard to ...").
    "not ESH x n": ("AITA-YTA", lambda n: ("not ESH " * n)[:n]),
    "not hard to disagree x n": ("SS", lambda n: ("not hard to disagree " * n)[:n]),
    "alternatives YTA or NTA ...": ("AITA-YTA", lambda n: ("YTA or NTA or " * n)[:n]),
    "alternatives agree/disagree ...": ("SS", lambda n: ("agree / disagree / " * n)[:n]),
    "markdown stars + YTA": ("AITA-YTA", lambda n: ("*" * n)[: n - 3] + "YTA"),
    "quotes + NTA": ("AITA-YTA", lambda n: ("'\"" * n)[: n - 3] + "NTA"),
    # Many mentions that are set aside, each in its own sentence or all in one.
    "hedged sentences (YTA)": ("AITA-YTA", lambda n: ("I'm not sure YTA. " * n)[:n]),
    "hedged sentences (agree)": ("SS", lambda n: ("I'm not sure I agree. " * n)[:n]),
    "attributed mentions in one sentence": ("AITA-YTA", lambda n: ("some people say YTA " * n)[:n]),
    "attributions ended by a comma": ("AITA-YTA", lambda n: ("while some say YTA, " * n)[:n]),
    "attributions declined": ("SS", lambda n: ("others agree, I don't " * n)[:n]),
    # One long run of word characters before a verdict: degenerate output, a URL, a number.
    "hahaha... + YTA": ("AITA-YTA", lambda n: ("ha" * n)[: n - 4] + " YTA"),
    "long number + agree": ("SS", lambda n: "1" * (n - 6) + " agree"),
}
N = 20_000
# Linear-time parsing of 20,000 characters takes ~0.02 s here; the brief expects under 0.5 s,
# and the assertion allows 2 s so a loaded machine does not fail it. The growth check does not
# depend on the machine's speed: 8x the text may cost about 8x the time, not 64x (quadratic).
# Below NOISE_S a ratio of two timings on a shared machine means little, so it is only checked
# above that, on the best of repeated timings.
MAX_S = 2.0
NOISE_S = 0.25
MAX_GROWTH = 20.0


def _time(dataset: str, text: str, repeat: int = 1) -> float:
    best = math.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        check_label(dataset, text)
        best = min(best, time.perf_counter() - t0)
    return best


@pytest.mark.parametrize("name", list(ADVERSARIAL))
def test_parse_time_is_about_linear(name: str) -> None:
    dataset, build = ADVERSARIAL[name]
    small, big = build(N // 8), build(N)
    assert len(big) == N
    t_small, t_big = _time(dataset, small, repeat=3), _time(dataset, big)
    if NOISE_S <= t_big < MAX_S:
        t_big = min(t_big, _time(dataset, big))  # a second look before calling it slow
    growth = t_big / max(t_small, 1e-6)
    print(f"{dataset} {name}: {N // 8} chars {t_small:.3f} s, {N} chars {t_big:.3f} s")
    assert t_big < MAX_S, f"{dataset} {name!r}: {N} chars took {t_big:.2f} s (> {MAX_S} s)"
    assert t_big < NOISE_S or growth < MAX_GROWTH, (
        f"{dataset} {name!r}: 8x longer text took {growth:.0f}x longer "
        f"({t_small:.3f} s -> {t_big:.3f} s): super-linear parsing"
    )


# --- read_csv -------------------------------------------------------------------------------------
CSV_PIECES = [
    b"prompt", b"ytanta", b",", b'"', b'""', b"\n", b"\r\n", b"\r", b"\x00", b"\xef\xbb\xbf",
    b"\xff\xfe", b"\xc3\xa9", b"\xc3", b"\xed\xa0\x80", b"\xf0\x9f\x99\x82", b" ", b"\t", b";",
    b"#", b"'", b"\\", b"NA", b"nan", b"1e400", b"-", b"a" * 300,
]  # fmt: skip
csv_bytes = st.one_of(
    st.binary(max_size=400),
    st.lists(st.one_of(st.sampled_from(CSV_PIECES), st.binary(max_size=6)), max_size=40).map(
        b"".join
    ),
    st.text(any_char, max_size=200).map(lambda t: ("prompt,ytanta\n" + t).encode("utf-8")),
)


@settings(max_examples=300, deadline=None)
@given(raw=csv_bytes, required=st.sampled_from([[], ["prompt"], ["prompt", "ytanta"]]))
def test_read_csv_raises_only_input_error(raw: bytes, required: list[str]) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "data.csv"
        path.write_bytes(raw)
        try:
            df = read_csv(path, required)
        except InputError as e:
            assert str(path) in str(e)
            return
    assert isinstance(df, pd.DataFrame)
    assert all(c in df.columns for c in required)
    # Read as strings: no value is turned into a number or NaN.
    for col in df.columns:
        assert df[col].map(lambda v: isinstance(v, str)).all()
