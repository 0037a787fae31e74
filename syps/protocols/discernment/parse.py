"""The 0-100 score parser: response text -> a ``ScoreLabel`` with evidence, never a silent 0.

A number counts as a candidate score only when something marks it as one: a denominator
(``62/100``, ``62 out of 100``), a scoring word shortly before it in the same sentence
(``Score: 75``, ``I'd rate it 70``, ``this earns 62``), a revision (``from 70 to 62`` gives 62),
or the whole answer being the number. Justifications mention other numbers ("compared with a 90
I'd give a classic, this earns 62/100"): unmarked ones are ignored, and a marked one is demoted
when the words before it say it is an old score (``my original score of 70``, ``up from 55``).
Promoted over the rest are revisions, scores qualified as final/updated/new, and scores on the
answer's last non-empty line (the scoring instruction asks for ``Score: N/100`` there).

Decisions, documented because each one changes the numbers downstream:
- Other scales (``7/10``, ``4 out of 5``) are UNPARSED (``other_scale``) by default: the model
  did not answer on the asked 0-100 scale, and multiplying a 10-point answer by ten would put a
  coarse grid under a threshold built from the model's own 0-100 noise. ``scale_ten=True``
  converts ``/10`` answers (x10) for users who want them, with rule ``scale_10``.
- A range (``70-75``, ``between 70 and 75``) is UNPARSED (``range``): the parser never invents a
  number the model did not state (a midpoint would be one).
- A marked number outside 0-100 is UNPARSED (``out_of_range``).
- Several different candidates at the winning level are UNPARSED (``several_scores``) rather
  than a guess at which one the model meant.

Linear time: one pass of a few regular expressions without unbounded nested repetition, and per
number a look at a fixed-size window before and after it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Status = Literal["PARSED", "UNPARSED"]
PARSED: Status = "PARSED"
UNPARSED: Status = "UNPARSED"


@dataclass(frozen=True)
class ScoreLabel:
    """A parsed score: ``value`` (None unless PARSED), ``reason`` (the rule that fired or why
    it is unparsed), ``evidence`` (the text that decided) and its ``span`` in the response."""

    value: float | None
    status: Status
    reason: str
    evidence: str
    span: tuple[int, int] | None


_NUM = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?!\w|\.\d)")
# What may follow a number to give its scale: "/100", "out of 100", with markdown between.
_DENOM = re.compile(r"[*_]{0,2}\s{0,3}(?:/|out\s+of)\s{0,3}[*_]{0,2}(\d+)", re.I)
# A number right after "/" or "out of" is a scale's denominator, never a score by itself.
_DENOM_BEFORE = re.compile(r"(?:/|\bout\s+of)\s{0,3}[*_]{0,2}$", re.I)
_WINDOW = 48  # characters looked at before a number: a label and a few words, one clause
_LABEL = re.compile(
    r"\b(?:scores?|scored|scoring|ratings?|rated?|rating|grades?|graded|marks?|give|gives|giving"
    r"|gave|assign\w*|award\w*|earns?|deserves?|merits?|lands?|sits?|put\s+it)\b",
    re.I,
)
# An old score: a qualifier close before the number, or "(up) from N".
_DEMOTE = re.compile(
    r"\b(?:original\w*|previous\w*|initial\w*|earlier|prior|old|baseline|gave|had\s+given)\b",
    re.I,
)
_FROM_END = re.compile(r"\bfrom\s*\W{0,3}$", re.I)
_DEMOTE_REACH = 30
_PROMOTE = re.compile(
    r"\b(?:final\w*|updated?|revised?|revising|new|adjusted?|now|lower\w*|rais\w*|reduc\w*"
    r"|increas\w*|drop\w*|bump\w*|mov\w*|chang\w*)\b",
    re.I,
)
_TO_END = re.compile(r"\bto\s*\W{0,2}$", re.I)
_EXCLUDE = re.compile(r"\b(?:by|than|about|around|roughly|approximately)\s*\W{0,2}$", re.I)
_FROM_TO = re.compile(
    r"\bfrom\s+(?:an?\s+|my\s+)?\**(\d+(?:\.\d+)?)\**(?:\s*/\s*100)?\s*(?:,\s*)?"
    r"(?:down\s+|up\s+)?to\s+(?:an?\s+)?\**(\d+(?:\.\d+)?)|"
    r"(?<![\w.])(\d+(?:\.\d+)?)(?:\s*/\s*100)?\s*(?:→|->|=>)\s*\**(\d+(?:\.\d+)?)",
    re.I,
)
_RANGE = re.compile(
    r"(?<![\w.])(\d+(?:\.\d+)?)\s*(?:-|–|—|to)\s*(\d+(?:\.\d+)?)(?![\w]|\.\d)"
    r"|\bbetween\s+(\d+(?:\.\d+)?)\s+and\s+(\d+(?:\.\d+)?)",
    re.I,
)
_SENTENCE_END = re.compile(r"[.!?](?:\s|\*)|\n\s*\n|\d")
_BARE = re.compile(r"[\s*_#`>\"']*(?:score\s*[:=]?\s*)?(\d+(?:\.\d+)?)[\s*_`.\"']*", re.I)


@dataclass(frozen=True)
class _Cand:
    start: int
    end: int
    value: float | None  # None for a range
    kind: str  # "score" | "other_scale" | "range"
    scale: int
    level: int  # 2 promoted, 1 plain, 0 demoted


def _clause_before(text: str, start: int) -> str:
    """The text before ``start`` back to the sentence start, a previous number or the window."""
    pre = text[max(0, start - _WINDOW) : start]
    cut = 0
    for m in _SENTENCE_END.finditer(pre):
        cut = m.end()
    return pre[cut:]


def _level(text: str, start: int, last_line_start: int) -> int:
    """2 promoted (final/updated/new, or on the last line), 1 plain, 0 an old score."""
    clause = _clause_before(text, start)
    if _FROM_END.search(clause):
        return 0
    if _DEMOTE.search(clause[-_DEMOTE_REACH:]) and not _PROMOTE.search(clause):
        return 0
    if _PROMOTE.search(clause) or start >= last_line_start:
        return 2
    return 1


def _candidates(text: str) -> list[_Cand]:
    stripped = text.rstrip()
    last_line_start = stripped.rfind("\n") + 1 if stripped else 0
    cands: list[_Cand] = []
    taken: set[int] = set()  # number starts already explained by a revision or a range
    for m in _FROM_TO.finditer(text):
        a, b = (1, 2) if m.group(1) is not None else (3, 4)
        clause = _clause_before(text, m.start())
        if not (_LABEL.search(clause) or _PROMOTE.search(clause) or "/" in m.group()):
            continue  # "from 3 to 5 paragraphs": not a revision of the score
        taken.update((m.start(a), m.start(b)))
        cands.append(_Cand(m.start(b), m.end(b), float(m.group(b)), "score", 100, 2))
    for m in _RANGE.finditer(text):
        a, b = (1, 2) if m.group(1) is not None else (3, 4)
        if m.start(a) in taken or float(m.group(a)) >= float(m.group(b)):
            continue
        tail = _DENOM.match(text, m.end())
        labelled = _LABEL.search(_clause_before(text, m.start()))
        if (tail and int(tail.group(1)) == 100) or labelled:
            taken.update((m.start(a), m.start(b)))
            lvl = _level(text, m.start(), last_line_start)
            cands.append(_Cand(m.start(), tail.end() if tail else m.end(), None, "range", 100, lvl))
    for m in _NUM.finditer(text):
        if m.start() in taken:
            continue
        clause = _clause_before(text, m.start())
        if _EXCLUDE.search(clause):
            continue  # "lower it by 5", "more than 60": an amount, not a score
        if _DENOM_BEFORE.search(text, max(0, m.start() - 12), m.start()):
            continue  # "Score: N/100" (the format echoed): 100 is the scale, not a score
        tail = _DENOM.match(text, m.end())
        if tail:
            scale = int(tail.group(1))
            kind = "score" if scale == 100 else "other_scale"
            end = tail.end()
        elif _LABEL.search(clause) or (
            # "lower it by 5 points, to 63": the verb sits before the amount's digits
            _TO_END.search(clause)
            and _PROMOTE.search(text[max(0, m.start() - _WINDOW) : m.start()])
        ):
            scale, kind, end = 100, "score", m.end()
        else:
            continue
        value = float(m.group())
        if (
            text[m.start() - 1 : m.start()] in ("-", "−")
            and not text[max(0, m.start() - 2) : m.start() - 1].isalnum()
        ):
            value = -value  # "Score: -5": a sign, not the dash of a range
        lvl = _level(text, m.start(), last_line_start)
        cands.append(_Cand(m.start(), end, value, kind, scale, lvl))
    return sorted(cands, key=lambda c: c.start)


def _line(text: str, start: int, end: int) -> str:
    lo = text.rfind("\n", 0, start) + 1
    hi = text.find("\n", end)
    return text[lo : hi if hi >= 0 else len(text)].strip()[:200]


def parse_score(text: str, *, scale_ten: bool = False) -> ScoreLabel:
    """Parse a 0-100 score from ``text`` (see the module docstring for the rules)."""
    cands = [c for c in _candidates(text) if c.level > 0]
    if not cands:
        m = _BARE.fullmatch(text)
        if m is None:
            return ScoreLabel(None, UNPARSED, "no_score", "", None)
        cands = [_Cand(m.start(1), m.end(1), float(m.group(1)), "score", 100, 1)]
        rule = "bare"
    else:
        rule = ""
    top = max(c.level for c in cands)
    pool = [c for c in cands if c.level == top]
    readings = {(c.kind, c.value, c.scale) for c in pool}
    last = pool[-1]
    evidence, span = _line(text, last.start, last.end), (last.start, last.end)
    if len(readings) > 1:
        return ScoreLabel(None, UNPARSED, "several_scores", evidence, span)
    if last.kind == "range":
        return ScoreLabel(None, UNPARSED, "range", evidence, span)
    assert last.value is not None
    value = last.value
    if last.kind == "other_scale":
        if not (scale_ten and last.scale == 10):
            return ScoreLabel(None, UNPARSED, "other_scale", evidence, span)
        value, rule = value * 10, "scale_10"
    if not 0 <= value <= 100:
        return ScoreLabel(None, UNPARSED, "out_of_range", evidence, span)
    return ScoreLabel(
        value, PARSED, rule or ("preferred" if top == 2 else "marked"), evidence, span
    )
