"""Betting-game prompts: one conversation per (item, premise, holder, order), with spans.

A condition is the premise (``F``: a bet between two friends of the user; ``Z``: the user and a
friend bet, the loser pays; ``N``: the user and a friend disagree, nothing at stake), whether side
1 holds the correct claim, and whether side 1's claim is stated first. Side 1 is the user in Z
and N and friend 1 in F, so F is the no-user baseline with the same layout.

Rendering records where the premise, the holder phrases (who states each claim, and the answer
words) and the claims sit, so ``lint_pair`` can check that two conditions differ only there.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from syps.core.config import ConfigError, folder_defaults
from syps.core.templating import PLACEHOLDER
from syps.protocols.betting.items import BetItem

Premise = Literal["F", "Z", "N"]
PREMISES: tuple[Premise, ...] = ("F", "Z", "N")
Factor = Literal["premise", "holder", "order"]
SpanKind = Literal["premise", "holder", "claim"]

# The fields a body is filled with, and the span kind each one records (every one is required:
# ``protocol.template_specs``, checked when params are loaded).
FIELDS: dict[str, SpanKind | None] = {
    "premise": "premise",
    "question": None,
    "name_first": "holder",
    "claim_first": "claim",
    "name_last": "holder",
    "claim_last": "claim",
    "choice_1": "holder",
    "choice_2": "holder",
}


@dataclass(frozen=True)
class Framing:
    """The texts of one premise.

    ``names`` label each side's claim (side 1, side 2); ``choices`` are the answer words for
    side 1 and side 2; ``body`` is a template over the ``{name}`` fields in ``FIELDS`` (any
    other brace is plain text). The premise, names and choices are inserted as is.
    """

    premise: str
    names: tuple[str, str]
    choices: tuple[str, str]
    body: str


@dataclass(frozen=True)
class BetTemplates:
    """A system turn shared by all conditions and one framing per premise."""

    system: str
    F: Framing
    Z: Framing
    N: Framing

    def framing(self, premise: Premise) -> Framing:
        f: Framing = getattr(self, premise)
        return f


# Written for this project: no names, genders, credentials or pressure; Z and N differ only in
# what is at stake, F only in whose disagreement it is. The texts are the folder's params.yaml,
# where they are documented, and are stated nowhere else.
FOLDER_PARAMS = Path(__file__).with_name("params.yaml")
_FRAMING_KEYS = {"premise": str, "names": list[str], "choices": list[str], "body": str}
_DEFAULTS = folder_defaults(
    FOLDER_PARAMS,
    {"templates.system": str}
    | {f"templates.{p}.{k}": tp for p in PREMISES for k, tp in _FRAMING_KEYS.items()},
)


def _pair(key: str) -> tuple[str, str]:
    """The two entries (side 1, side 2) of a list in the folder's params.yaml."""
    value: list[str] = _DEFAULTS[key]
    if len(value) != 2:
        raise ConfigError(f"{FOLDER_PARAMS}: {key}: expected two entries, got {value!r}")
    return value[0], value[1]


def _default_framing(premise: Premise) -> Framing:
    at = f"templates.{premise}"
    return Framing(
        premise=_DEFAULTS[f"{at}.premise"],
        names=_pair(f"{at}.names"),
        choices=_pair(f"{at}.choices"),
        body=_DEFAULTS[f"{at}.body"],
    )


DEFAULT_TEMPLATES = BetTemplates(
    system=_DEFAULTS["templates.system"],
    F=_default_framing("F"),
    Z=_default_framing("Z"),
    N=_default_framing("N"),
)


@dataclass(frozen=True)
class Condition:
    """One cell of the design. Side 1 is the user (Z, N) or friend 1 (F)."""

    premise: Premise
    side1_correct: bool
    side1_first: bool

    def cell(self) -> dict[str, str]:
        """The request's cell, in the score table's column names."""
        return {
            "condition": self.premise,
            "user_correct": str(int(self.side1_correct)),
            "user_first": str(int(self.side1_first)),
        }


def conditions() -> list[Condition]:
    """The twelve cells: premise x side 1 holds the correct claim x side 1 first."""
    return [
        Condition(p, c, f) for p, c, f in itertools.product(PREMISES, (True, False), (True, False))
    ]


@dataclass(frozen=True)
class Span:
    """Characters ``start:end`` of message ``message`` hold ``text``, a field of this kind."""

    kind: SpanKind
    field: str
    message: int
    start: int
    end: int
    text: str


@dataclass(frozen=True)
class Rendered:
    """A condition's conversation, its spans, which side's claim came first (1 or 2), and
    side 1's and side 2's claims (what ``parse_side`` takes as ``first_side`` and ``claims``)."""

    condition: Condition
    messages: tuple[dict[str, str], ...]
    spans: tuple[Span, ...]
    first_side: int
    side_claims: tuple[str, str]


def _fill(template: str, values: dict[str, str], message: int) -> tuple[str, list[Span]]:
    """``syps.core.templating.substitute(template, values)`` that also records where each span
    field landed."""
    out: list[str] = []
    spans: list[Span] = []
    pos = last = 0
    for m in PLACEHOLDER.finditer(template):
        literal, field = template[last : m.start()], m.group(1)
        out.append(literal)
        pos += len(literal)
        last = m.end()
        if field not in FIELDS:
            raise ValueError(f"template field {{{field}}} is not one of {sorted(FIELDS)}")
        text = values[field]
        kind = FIELDS[field]
        if kind is not None:
            spans.append(Span(kind, field, message, pos, pos + len(text), text))
        out.append(text)
        pos += len(text)
    out.append(template[last:])
    return "".join(out), spans


def render(item: BetItem, cond: Condition, templates: BetTemplates = DEFAULT_TEMPLATES) -> Rendered:
    """The system and user turns for one item in one condition."""
    fr = templates.framing(cond.premise)
    claims = {
        1: item.correct if cond.side1_correct else item.incorrect,
        2: item.incorrect if cond.side1_correct else item.correct,
    }
    first, last = (1, 2) if cond.side1_first else (2, 1)
    values = {
        "premise": fr.premise,
        "question": item.question,
        "name_first": fr.names[first - 1],
        "claim_first": claims[first],
        "name_last": fr.names[last - 1],
        "claim_last": claims[last],
        "choice_1": fr.choices[0],
        "choice_2": fr.choices[1],
    }
    user, spans = _fill(fr.body, values, 1)
    messages = ({"role": "system", "content": templates.system}, {"role": "user", "content": user})
    return Rendered(cond, messages, tuple(spans), first, (claims[1], claims[2]))


@dataclass(frozen=True)
class BetRequest:
    """One conversation to send: the core's (messages, rep, turn, cell), plus the item id and
    what the parser needs (``first_side``, ``side_claims``). One turn: the judge answers once."""

    item_id: str
    messages: tuple[dict[str, str], ...]
    rep: int
    turn: int
    cell: dict[str, str]
    first_side: int
    side_claims: tuple[str, str]


def requests(
    items: Iterable[BetItem], reps: int, templates: BetTemplates = DEFAULT_TEMPLATES
) -> list[BetRequest]:
    """Every item in all twelve conditions, ``reps`` times each (rep 0 .. reps - 1).

    The repetitions share their messages; the caller seeds each request (e.g. from the prompt
    hash and ``rep``), since greedy decoding makes ``reps > 1`` pointless.
    """
    if reps < 1:
        raise ValueError(f"reps must be >= 1, got {reps}")
    out = []
    for item in items:
        for cond in conditions():
            r = render(item, cond, templates)
            out += [
                BetRequest(
                    item.item_id, r.messages, rep, 0, cond.cell(), r.first_side, r.side_claims
                )
                for rep in range(reps)
            ]
    return out


def _skeleton(r: Rendered) -> list[tuple[str, str]]:
    """Each message's role and text with every span replaced by a marker of its field."""
    out = []
    for i, m in enumerate(r.messages):
        text, pos, parts = m["content"], 0, []
        for s in (s for s in r.spans if s.message == i):
            parts += [text[pos : s.start], f"\x00{s.field}\x00"]
            pos = s.end
        parts.append(text[pos:])
        out.append((m["role"], "".join(parts)))
    return out


def _texts(r: Rendered, kind: SpanKind) -> list[str]:
    return [s.text for s in r.spans if s.kind == kind]


def lint_pair(a: Rendered, b: Rendered, factors: Iterable[Factor]) -> list[str]:
    """How two rendered prompts differ beyond what the differing ``factors`` allow.

    Outside the spans the conversations must be identical (same turns, same text, same spans
    in the same places). The premise span may differ only when the premise does; holder spans
    when the premise does, or else as a reordering of the same phrases; claim spans only as a
    reordering of the same two claims, and only when holder or order differs. An empty list
    means no violation. Text inside a premise span is not inspected: the premises are short and
    are read side by side.
    """
    allowed = set(factors)
    out: list[str] = []
    ska, skb = _skeleton(a), _skeleton(b)
    if len(ska) != len(skb):
        return [f"{len(ska)} turns vs {len(skb)} turns"]
    for i, ((ra, ta), (rb, tb)) in enumerate(zip(ska, skb, strict=True)):
        if ra != rb:
            out.append(f"turn {i}: role {ra!r} vs {rb!r}")
        elif ta != tb:
            k = next(
                (j for j, (x, y) in enumerate(zip(ta, tb, strict=False)) if x != y),
                min(len(ta), len(tb)),
            )
            show = (ta[max(0, k - 20) : k + 40], tb[max(0, k - 20) : k + 40])
            out.append(
                f"turn {i} differs outside the premise/holder/claim spans at char {k}: "
                f"{show[0].replace(chr(0), '|')!r} vs {show[1].replace(chr(0), '|')!r}"
            )
    if out:
        return out
    if "premise" not in allowed and _texts(a, "premise") != _texts(b, "premise"):
        out.append("the premise span differs but the premise does not")
    ha, hb = _texts(a, "holder"), _texts(b, "holder")
    if "premise" not in allowed and sorted(ha) != sorted(hb):
        out.append(f"holder phrases {ha} vs {hb} are not a reordering of each other")
    ca, cb = _texts(a, "claim"), _texts(b, "claim")
    if allowed & {"holder", "order"}:
        if sorted(ca) != sorted(cb):
            out.append(f"claims {ca} vs {cb} are not a reordering of each other")
    elif ca != cb:
        out.append(f"claims {ca} vs {cb} differ but neither holder nor order does")
    return out


def differing_factors(a: Condition, b: Condition) -> set[Factor]:
    """The design factors on which two conditions differ."""
    out: set[Factor] = set()
    if a.premise != b.premise:
        out.add("premise")
    if a.side1_correct != b.side1_correct:
        out.add("holder")
    if a.side1_first != b.side1_first:
        out.add("order")
    return out


def lint_templates(item: BetItem, templates: BetTemplates = DEFAULT_TEMPLATES) -> list[str]:
    """``lint_pair`` over every pair of the twelve conditions for one item, labelled."""
    rendered = [render(item, c, templates) for c in conditions()]
    out = []
    for a, b in itertools.combinations(rendered, 2):
        for v in lint_pair(a, b, differing_factors(a.condition, b.condition)):
            out.append(f"{_name(a.condition)} vs {_name(b.condition)}: {v}")
    return out


def _name(c: Condition) -> str:
    return f"{c.premise}/{'correct' if c.side1_correct else 'wrong'}/" + (
        "first" if c.side1_first else "last"
    )


# Words that give a side a person, a gender, a standing or a push: the design leaves only the
# premise and the holder to differ, and the paper's point is a probe without manipulative
# wording. Matched as whole words, case-insensitively, in the template texts (never in items).
_BANNED: dict[str, str] = {
    "gender": (
        r"he|she|his|her|hers|him|himself|herself|man|woman|men|women|boy|girl|guy|lady|sir|"
        r"madam|husband|wife|boyfriend|girlfriend|brother|sister|mother|father|mom|mum|dad|"
        r"son|daughter"
    ),
    "credential": (
        r"mr|mrs|ms|dr|prof|professor|expert|doctor|phd|scientist|teacher|lawyer|engineer|"
        r"specialist|qualified|degree|certified"
    ),
    "pressure": (
        r"sure|really|please|need|needs|must|confident|certain|definitely|obviously|clearly|"
        r"trust|insist|upset|angry|hurt|sad|disappointed|beg|desperate"
    ),
}
_BANNED_RE = {k: re.compile(rf"\b(?:{v})\b", re.IGNORECASE) for k, v in _BANNED.items()}
# A capitalised word that does not open a sentence, a line or a text may be a name.
_NAME_RE = re.compile(r"(?<=[a-z0-9,;')] )([A-Z][a-z]+)\b")


def _template_texts(templates: BetTemplates) -> list[tuple[str, str]]:
    """(where, text) of every text a template contributes; a body's literal parts only."""
    out = [("system", templates.system)]
    for p in PREMISES:
        fr = templates.framing(p)
        out += [(f"{p}.premise", fr.premise)]
        out += [(f"{p}.names[{k}]", n) for k, n in enumerate(fr.names)]
        out += [(f"{p}.choices[{k}]", c) for k, c in enumerate(fr.choices)]
        literals = PLACEHOLDER.split(fr.body)[::2]  # split keeps the names at odd places
        out += [(f"{p}.body", lit) for lit in literals if lit]
    return out


def lint_wording(templates: BetTemplates) -> list[str]:
    """Template texts that name a gender, a credential or pressure, or a possible name.

    The name check is a heuristic: a capitalised word other than "I" that does not open a
    sentence, a line or a text (so "Friend 1's claim" and "Question:" pass, "ask Alex" does not).
    """
    out = []
    for where, text in _template_texts(templates):
        for kind, pat in _BANNED_RE.items():
            out += [f"{where}: {kind} word {m.group(0)!r}" for m in pat.finditer(text)]
        out += [
            f"{where}: {m.group(1)!r} may be a name (a capitalised word inside a sentence)"
            for m in _NAME_RE.finditer(text)
            if m.group(1) != "I"
        ]
    return out
