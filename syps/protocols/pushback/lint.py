"""Lint for pushback conversations: a contrast may differ only in the factor it tests.

Each contrast declares a factor (``naming``, ``placement`` with naming held fixed, ``format``
position) and two cells. The lint renders both cells' conversations for an item, with the same
asserted answer (the item's target) and a placeholder for the replayed turn-1 answer, and
compares the template parts (spans) they are made of:

- ``naming``: only the naming clause may appear in one and not the other;
- ``format``: only the format instruction may move, appear or disappear;
- ``placement``: the turn structure changes (turn count aside), but the user turns must carry
  the same parts with the same texts: a naming clause in one placement only is the SycEval
  confound (timing and naming vary together), reworded pressure is extra text.

Whitespace joining parts is ignored; everything else is compared exactly. Cells that differ in
a factor other than the declared one are a violation before any text is compared.

Under ``escalation: chained`` an in-context cell's objection comes after the earlier strengths'
objections and answers of its conversation. A contrast whose two cells come after different
numbers of objections (in-context ethos, after simple, against preemptive ethos, after none)
compares histories as well as its factor: a violation (``objection history differs``). Two
cells at the same place of parallel conversations (the named and unnamed ethos turns) differ
only in the factor, in every turn, and pass.

``lint_lines`` groups the violations into the report's lines: one per contrast and kind.

``checklist`` sorts the same violations into the three checks the audit of SycEval proposes to
benchmark authors (``CHECKS``; docs/pushback.md, "Lint"): *naming parity* (a naming clause, or
a naming factor, in one cell only), *format position* (the format instruction moved, or written
into another part) and *wording parity* (everything else: reworded question or objection,
another factor varying alongside, a different objection history). Each check passes or fails
with the contrasts that fail it, their cells and why.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from syps.core.io import InputError
from syps.protocols.pushback.items import FreeItem, McqItem
from syps.protocols.pushback.prompts import FACTORS, Cell, Conversation, Templates, pushback_turn

CONTRAST_FACTORS = ("naming", "placement", "format")
# What the lint replays as the model's turn-1 answer: the same for both cells, so it never
# differs; real answers are not known before generation.
REPLAY_PLACEHOLDER = "<turn-1 answer>"
# The span kind each factor is allowed to change.
_ALLOWED = {"naming": {"naming"}, "format": {"format"}}
_WHAT = {
    "naming": "target named in one cell only",
    "format": "format instruction moved",
    "pressure": "objection wording differs",
    "question": "question text differs",
}
HISTORY = "objection history differs"

# The audit's three checks (CHECKS below), by key.
NAMING_PARITY = "naming_parity"
FORMAT_POSITION = "format_position"
WORDING_PARITY = "wording_parity"


@dataclass(frozen=True)
class Check:
    """One of the audit's checks: its key, its name in a line, and what it checks."""

    name: str
    title: str
    checks: str


CHECKS = (
    Check(
        NAMING_PARITY,
        "naming parity",
        "both cells name the asserted answer alike: a naming clause in one cell only (SycEval's "
        "preemptive objection at simple and ethos) is allowed only where naming is the factor "
        "compared, and there the cells must differ in it",
    ),
    Check(
        FORMAT_POSITION,
        "format position",
        "the output-format instruction sits where each cell's format says, as a part of its "
        "own: in the same place in both cells unless format is the factor compared (and then "
        "it must move), never written into the objection or the question",
    ),
    Check(
        WORDING_PARITY,
        "wording parity",
        "apart from the factor compared, both cells are the same conversation: the same "
        "question and objection wording (no wording of its own for one placement), the same "
        "other factors, and as many earlier objections (escalation: chained)",
    ),
)


def _check_of(kind: str) -> str:
    """The check a template part's kind (or a factor) belongs to; pressure, question and
    every other part or factor are wording."""
    return {"naming": NAMING_PARITY, "format": FORMAT_POSITION}.get(kind, WORDING_PARITY)


@dataclass(frozen=True)
class Contrast:
    """Two cells compared on one factor; ``a`` is the reference (e.g. unnamed, in-context)."""

    name: str
    factor: str
    a: Cell
    b: Cell

    def __post_init__(self) -> None:
        if self.factor not in CONTRAST_FACTORS:
            raise ValueError(
                f"contrast {self.name}: factor {self.factor!r}; allowed: {list(CONTRAST_FACTORS)}"
            )


@dataclass(frozen=True)
class Violation:
    contrast: str
    cell_a: str
    cell_b: str
    item_id: str
    what: str
    text: str
    message: str
    # The checks (CHECKS) this violation fails: one, or for cells differing in several
    # undeclared factors, one per factor's check.
    checks: tuple[str, ...]


def declared_contrasts(cells: Sequence[Cell]) -> list[Contrast]:
    """Every matched pair in ``cells`` that differs in exactly one contrast factor.

    naming: unnamed (a) vs named (b); placement: in_context (a) vs preemptive (b); format:
    objection (a) vs question (b), and objection (a) vs absent (b) — the audit's question is
    what moving or dropping SycEval's instruction does.
    """
    refs = {"naming": ("unnamed", "named"), "placement": ("in_context", "preemptive")}
    fmt_pairs = [("objection", "question"), ("objection", "absent")]
    present = set(cells)
    out = []
    for cell in cells:
        for factor in CONTRAST_FACTORS:
            pairs = fmt_pairs if factor == "format" else [refs[factor]]
            for ref, alt in pairs:
                if getattr(cell, factor) != ref:
                    continue
                other = Cell(**{**cell.as_dict(), factor: alt})
                if other in present:
                    # Slashes and dashes only: the name becomes part of an MLflow metric key.
                    name = f"{factor}/{ref}-vs-{alt}/{_rest(cell, factor)}"
                    out.append(Contrast(name, factor, cell, other))
    return out


def _rest(cell: Cell, factor: str) -> str:
    return "/".join(str(getattr(cell, f)) for f in FACTORS if f != factor)


def _user_parts(conv: Conversation) -> list[list[tuple[str, str]]]:
    """Per message, its non-whitespace parts; assistant turns give an empty list."""
    out = []
    for k, msg in enumerate(conv.messages):
        parts = [
            (s.kind, s.text)
            for s in conv.spans
            if s.message == k and not (s.kind == "sep" and not s.text.strip())
        ]
        out.append(parts if msg["role"] == "user" else [])
    return out


def lint_contrast(
    contrast: Contrast, item: McqItem | FreeItem, templates: Templates
) -> list[Violation]:
    """The ways the two cells' conversations for ``item`` differ beyond the declared factor."""
    a, b, factor = contrast.a, contrast.b, contrast.factor

    def v(what: str, text: str, message: str, *checks: str) -> Violation:
        return Violation(contrast.name, a.name, b.name, item.item_id, what, text, message, checks)

    extra = [f for f in FACTORS if f != factor and getattr(a, f) != getattr(b, f)]
    if extra:
        diff = ", ".join(f"{f}: {getattr(a, f)} vs {getattr(b, f)}" for f in extra)
        failed = {_check_of(f) for f in extra}
        return [
            v(
                "cells differ in another factor",
                diff,
                f"{contrast.name} tests {factor}, but its cells also differ in {diff}",
                *(c.name for c in CHECKS if c.name in failed),
            )
        ]
    asserted = item.target
    if not asserted:
        raise InputError(f"item {item.dataset}/{item.item_id}: no target answer to assert")
    convs = []
    for cell in (a, b):
        replay = REPLAY_PLACEHOLDER if cell.placement == "in_context" else None
        convs.append(pushback_turn(item, cell, templates, asserted, replay))
    pa, pb = (_user_parts(c) for c in convs)
    out: list[Violation] = []
    if factor == "placement":
        # The turn structure is what placement changes; compare the parts as multisets.
        ca = Counter(p for msg in pa for p in msg)
        cb = Counter(p for msg in pb for p in msg)
        for kind, text in sorted(((ca - cb) + (cb - ca)).keys()):
            where = a.name if ca[(kind, text)] > cb[(kind, text)] else b.name
            if kind == "naming":
                msg = (
                    f"{contrast.name}: naming the target co-varies with placement: "
                    f"{text!r} appears only in {where}; hold naming fixed to isolate timing"
                )
            else:
                msg = f"{contrast.name}: {kind} text {text!r} appears only in {where}"
            out.append(v(_WHAT.get(kind, f"extra {kind} text"), text, msg, _check_of(kind)))
        return out + _baked_format(contrast, templates, pa, pb, v)
    # Naming and format contrasts keep the turn structure: compare message by message.
    allowed = _ALLOWED[factor]
    for k, (ma, mb) in enumerate(zip(pa, pb, strict=True)):
        ka = [p for p in ma if p[0] not in allowed]
        kb = [p for p in mb if p[0] not in allowed]
        if ka == kb:
            continue
        for kind, text in sorted(set(ka) ^ set(kb)):
            where = a.name if (kind, text) in ka else b.name
            msg = f"{contrast.name}: message {k}: {kind} part {text!r} only in {where}"
            out.append(v(_WHAT.get(kind, f"extra {kind} text"), text, msg, _check_of(kind)))
    if pa == pb:
        out.append(
            v(
                "declared factor does not vary",
                factor,
                f"{contrast.name}: both cells render the same conversation (a forced "
                f"{factor} in the templates?): the contrast measures nothing",
                _check_of(factor),
            )
        )
    return out + _baked_format(contrast, templates, pa, pb, v)


def _baked_format(
    contrast: Contrast,
    templates: Templates,
    pa: list[list[tuple[str, str]]],
    pb: list[list[tuple[str, str]]],
    v: Callable[..., Violation],
) -> list[Violation]:
    """The format instruction written into another part (as SycEval's rebuttals carry it)
    travels with that part: the cells' format factor no longer says where it is."""
    fmt = templates.format.strip()
    out = []
    for cell, parts in ((contrast.a, pa), (contrast.b, pb)):
        for kind, text in {p for msg in parts for p in msg}:
            if fmt and kind != "format" and fmt in text:
                out.append(
                    v(
                        "format instruction inside another part",
                        text,
                        f"{contrast.name}: {cell.name}: the format instruction is part of "
                        f"the {kind} text, so it sits there whatever format says",
                        FORMAT_POSITION,
                    )
                )
    return out


def lint_history(
    contrast: Contrast, item: McqItem | FreeItem, history: Mapping[Cell, int]
) -> list[Violation]:
    """The history violation of ``contrast`` for ``item``: its cells come after different
    numbers of objections (``history``: cell -> objections before its own)."""
    ha, hb = history.get(contrast.a, 0), history.get(contrast.b, 0)
    if ha == hb:
        return []
    a, b = contrast.a, contrast.b
    text = f"{a.name}: {ha}, {b.name}: {hb}"
    message = (
        f"{contrast.name}: under escalation: chained {a.name} objects after {ha} earlier "
        f"objection(s) and {b.name} after {hb}, so the contrast also compares those turns; "
        "compare the cells under escalation: branched"
    )
    return [
        Violation(
            contrast.name, a.name, b.name, item.item_id, HISTORY, text, message, (WORDING_PARITY,)
        )
    ]


def lint(
    contrasts: Iterable[Contrast],
    items: Iterable[McqItem | FreeItem],
    templates: Templates,
    history: Mapping[Cell, int] | None = None,
) -> list[Violation]:
    """All violations of all contrasts over all items (render errors propagate); with
    ``history`` (cell -> objections before its own), the history violations too."""
    items = list(items)
    return [
        x
        for c in contrasts
        for it in items
        for x in [*lint_contrast(c, it, templates), *lint_history(c, it, history or {})]
    ]


def _groups(violations: Iterable[Violation]) -> list[list[Violation]]:
    """The violations per (contrast, kind of violation), in order of first appearance."""
    groups: dict[tuple[str, str], list[Violation]] = {}
    for v in violations:
        groups.setdefault((v.contrast, v.what), []).append(v)
    return list(groups.values())


def _n_items(vs: Sequence[Violation]) -> int:
    return len({v.item_id for v in vs})


def lint_lines(violations: Sequence[Violation]) -> list[str]:
    """One line per (contrast, kind of violation): the first message and how many items."""
    return [f"{vs[0].message} [{vs[0].what}; {_n_items(vs)} item(s)]" for vs in _groups(violations)]


def checklist(violations: Sequence[Violation]) -> list[dict[str, Any]]:
    """The audit's three checks (``CHECKS``), in order: each one's ``name``, ``title``, what it
    ``checks``, ``status`` (``pass`` or ``fail``) and its ``failures``, one per (contrast, kind
    of violation) as in ``lint_lines``: the contrast, its two cells, the kind, the first
    item's offending text, why (the first message) and on how many items."""
    out = []
    for check in CHECKS:
        failures = [
            {
                "contrast": vs[0].contrast,
                "cells": [vs[0].cell_a, vs[0].cell_b],
                "kind": vs[0].what,
                "text": vs[0].text,
                "why": vs[0].message,
                "n_items": _n_items(vs),
            }
            for vs in _groups(v for v in violations if check.name in v.checks)
        ]
        status = "fail" if failures else "pass"
        out.append({**asdict(check), "status": status, "failures": failures})
    return out


def checklist_lines(entries: Sequence[Mapping[str, Any]]) -> list[str]:
    """One line per check of ``checklist``: its title, PASS or FAIL, and the failing contrasts."""
    out = []
    for e in entries:
        names = list(dict.fromkeys(f["contrast"] for f in e["failures"]))
        where = f": {len(names)} contrast(s): {', '.join(names)}" if names else ""
        out.append(f"check {e['title']}: {e['status'].upper()}{where}")
    return out
