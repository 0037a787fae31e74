"""The requests of each pushback turn, for every (item, cell, repetition).

1. Turn 1 (``first_round``) is the unpressured question of the cell's in-context baseline
   (``prompts.baseline_cell``): for an in-context cell its own first turn, for a preemptive cell
   the same question asked without pressure, whose answer decides what an ``auto`` objection
   asserts. One row per cell, not per distinct text: cells whose turn 1 renders the same share
   one store key (generated once), and each turn-2 row's ``parent_key`` then points at the turn-1
   row of its own cell, so lineage and skipped counts are per cell with no lookup table.
2. Turn 2 (``second_round``, a ``child`` per turn-1 row) is the pressured conversation:
   in-context, turn 1 + the turn-1 answer replayed verbatim + the objection; preemptive, one user
   message (question + objection). Its ``parent_key`` is the turn-1 row it depends on (the
   replayed answer, or the baseline that decided the direction).

A turn-2 child is skipped, with its reason, when its parent was skipped, when the parent was
cut off at ``max_new_tokens`` and gave no answer (``cut_off: keep_if_parsed``; every cut-off
parent under ``cut_off: skip``), or when an ``auto`` objection cannot be aimed because the
parent's answer is UNCLEAR (no single letter; a free-form verdict the judge could not give).

Turn 3 on (``later_round``): with ``rounds`` above 1, the user objects again after every answer
(SYCON-Bench); under ``escalation: chained``, an in-context conversation goes on to the next
strength's objection (``params.successors``), each row carrying that strength's cell.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from syps.core.protocol import Judge, Request, Skipped, Turn, cell_key
from syps.protocols.pushback import items as itm
from syps.protocols.pushback.items import Items
from syps.protocols.pushback.labels import LETTER_LABELER, Initial, cell_of, initials, letter_sha
from syps.protocols.pushback.params import PushbackParams, history, resolve, successors
from syps.protocols.pushback.prompts import (
    Cell,
    Templates,
    asserted_free,
    asserted_letter,
    baseline_cell,
    first_turn,
    followup_objection,
    objection_text,
    pushback_turn,
)
from syps.protocols.pushback.stance import Stance, held_labels

Key = tuple[str, str, str, int]  # (dataset, item_id, cell, rep)
# The reason every later turn of a conversation that ended early carries.
ENDED = "conversation ended at"


def n_turns(p: PushbackParams) -> int:
    """The answer, then one turn per objection: ``rounds``, or under ``escalation: chained`` the
    longest conversation's strengths."""
    return 1 + max(p.rounds, 1 + max(history(p).values()))


def requests(
    p: PushbackParams, it_map: Items, turn: int, previous: pd.DataFrame, judge: Judge
) -> Turn:
    """The requests (and skipped children) of ``turn``, given the rows of the turns before."""
    templates, cells = resolve(p)
    if turn == 1:
        return first_round(templates, cells, it_map, range(p.generation.reps))
    if not 2 <= turn <= n_turns(p):
        raise ValueError(f"pushback has {n_turns(p)} turns, not {turn}")
    if turn > 2:
        return later_round(p, templates, it_map, turn, previous, judge)
    return second_round(p, templates, cells, it_map, previous, judge)


def first_round(
    templates: Templates,
    cells: Sequence[Cell],
    it_map: Mapping[tuple[str, str], itm.McqItem | itm.FreeItem],
    reps: range,
) -> Turn:
    """Turn 1: each cell's baseline question, once per (item, cell, rep)."""
    return Turn(
        [
            Request(
                ds,
                iid,
                cell.as_dict(),
                1,
                first_turn(it, baseline_cell(cell), templates).as_messages(),
                rep=r,
            )
            for (ds, iid), it in it_map.items()
            for cell in cells
            for r in reps
        ]
    )


def second_round(
    p: PushbackParams,
    templates: Templates,
    cells: Sequence[Cell],
    it_map: Mapping[tuple[str, str], itm.McqItem | itm.FreeItem],
    previous: pd.DataFrame,
    judge: Judge,
) -> Turn:
    """Turn 2: the ``child`` of every turn-1 row, but for the cells that object after another
    one (under ``escalation: chained``)."""
    parents, inits = first_answers(previous, it_map, judge, p.grading)
    later = set(successors(p).values())  # a chained cell objects after another one
    out = Turn([])
    for (ds, iid), it in it_map.items():
        for cell in cells:
            if cell in later:
                continue
            for r in range(p.generation.reps):
                key = (ds, iid, cell_key(cell.as_dict()), r)
                c = child(p, templates, it, cell, r, parents.get(key), inits.get(key))
                if isinstance(c, Request):
                    out.requests.append(c)
                else:
                    out.skipped.append(c)
    return out


def child(
    p: PushbackParams,
    templates: Templates,
    it: itm.McqItem | itm.FreeItem,
    cell: Cell,
    rep: int,
    parent: Any,
    init: Initial | None,
) -> Request | Skipped:
    """The turn-2 request of (item, cell, rep) given its turn-1 row ``parent`` (None if absent)
    and what that row's answer says (None if it was not generated), or why there is none."""
    key = "" if parent is None else str(parent.store_key)

    def skip(why: str) -> Skipped:
        return Skipped(it.dataset, it.item_id, cell.as_dict(), 2, why, rep=rep, parent_key=key)

    if parent is None or init is None:
        return skip("no turn-1 row" if parent is None else f"parent skipped: {parent.skipped}")
    if str(parent.finish_reason) == "length" and (p.cut_off == "skip" or init.correct is None):
        return skip(f"parent cut off at max_new_tokens ({init.evidence})")
    if isinstance(it, itm.McqItem):
        asserted = asserted_letter(it, cell, init.letter)
    else:
        asserted = asserted_free(it, cell, init.correct)
    if asserted is None:
        return skip(f"parent {init.evidence} (an auto objection needs its answer)")
    replay = str(parent.response) if cell.placement == "in_context" else None
    conv = pushback_turn(it, cell, templates, asserted, replay)
    return Request(it.dataset, it.item_id, cell.as_dict(), 2, conv.as_messages(), rep, key)


def first_answers(
    previous: pd.DataFrame,
    it_map: Mapping[tuple[str, str], itm.McqItem | itm.FreeItem],
    judge: Judge,
    grading: str,
) -> tuple[dict[Key, Any], dict[Key, Initial]]:
    """The turn-1 rows by (dataset, item, cell, rep), and what each generated one's answer says
    (which decides what every objection of its conversation asserts), graded as ``grading``
    says: an answer the grader calls erroneous has no correctness to object to."""
    t1 = previous[previous["turn"] == 1]
    parents = {
        (str(r.dataset), str(r.item_id), str(r.cell), int(r.rep)): r
        for r in t1.itertuples(index=False)
    }
    generated = t1[t1["skipped"].astype(str) == ""]
    inits = {
        (str(r.dataset), str(r.item_id), str(r.cell), int(r.rep)): x
        for r, x in zip(
            generated.itertuples(index=False),
            initials(generated, it_map, judge, grading),
            strict=True,
        )
    }
    return parents, inits


def later_round(
    p: PushbackParams,
    templates: Templates,
    it_map: Mapping[tuple[str, str], itm.McqItem | itm.FreeItem],
    turn: int,
    previous: pd.DataFrame,
    judge: Judge,
) -> Turn:
    """Turn 3 on: each conversation of the turn before, its answer replayed and the next
    objection, asserting the same answer as the first objection.

    ``rounds`` above 1: round ``turn - 1``, the cell's objection again (or the followup). A
    conversation ends, as a skipped child with the reason, where the turn before was skipped or
    its answer holds no readable stance (an MCQ answer with no letter, a free-form one whose
    stance the judge cannot tell): there is no stance left to press on.

    ``escalation: chained``: the next strength's cell objects (``successors``); the row carries
    that cell. A conversation ends only where the turn before was skipped: an UNCLEAR answer is
    an unknown link of its chain, and the next objection asserts what the first did whatever
    that answer said. A conversation whose last strength has answered has no next row.
    """
    last = previous[previous["turn"] == turn - 1]
    parents, inits = first_answers(previous, it_map, judge, p.grading)
    chained = successors(p) if p.escalation == "chained" else None
    answered = last[last["skipped"].astype(str) == ""]
    stances = {} if chained is not None else _stances(answered, it_map, parents, inits, judge)
    out = Turn([])
    for r in last.itertuples(index=False):
        it = it_map[(str(r.dataset), str(r.item_id))]
        cell = cell_of(r.cell)
        if chained is not None:
            if cell not in chained:
                continue  # its conversation's last strength, or an unchained cell
            cell = chained[cell]
        # A conversation that ended earlier points at its last generated turn.
        key = str(r.store_key) or str(r.parent_key)
        why = _ended(str(r.skipped), stances.get(key), turn)
        if why is not None:
            out.skipped.append(
                Skipped(it.dataset, it.item_id, cell.as_dict(), turn, why, rep=int(r.rep),
                        parent_key=key)
            )  # fmt: skip
            continue
        # Every cell of a conversation asks the same first question: its turn-1 row's answer.
        init = inits[(str(r.dataset), str(r.item_id), str(r.cell), int(r.rep))]
        claim = (
            asserted_letter(it, cell, init.letter)
            if isinstance(it, itm.McqItem)
            else asserted_free(it, cell, init.correct)
        )
        if claim is None:  # a turn-2 row exists only where the first objection had a claim
            raise ValueError(f"{it.dataset}/{it.item_id} {cell.name}: no asserted answer")
        objection = (
            objection_text(it, cell, templates, claim)
            if chained is not None
            else followup_objection(it, cell, templates, claim, p.followups, turn - 1)
        )
        messages = [
            *json.loads(str(r.messages)),
            {"role": "assistant", "content": str(r.response)},
            {"role": "user", "content": objection},
        ]
        out.requests.append(
            Request(it.dataset, it.item_id, cell.as_dict(), turn, messages, int(r.rep), key)
        )
    return out


def _ended(skipped: str, stance: str | None, turn: int) -> str | None:
    """Why a conversation ends before ``turn`` (its turn before was skipped, or holds no
    readable stance), None where it goes on."""
    if skipped:
        before = f"{ENDED} turn {turn - 1}"
        return skipped if skipped.startswith(ENDED) else f"{before} skipped: {skipped}"
    if stance is not None:
        return f"{ENDED} turn {turn - 1} {stance}"
    return None


def _stances(
    answered: pd.DataFrame,
    it_map: Mapping[tuple[str, str], itm.McqItem | itm.FreeItem],
    parents: Mapping[tuple[str, str, str, int], Any],
    inits: Mapping[tuple[str, str, str, int], Initial],
    judge: Judge,
) -> dict[str, str | None]:
    """Each answered row's stance against its first answer (its letter; the stance judge's
    verdict, the one its label records), by store key: why it is unreadable, None where it is
    readable. With none readable, the conversation has no stance to press on."""
    reads = [
        Stance(
            it_map[(str(r.dataset), str(r.item_id))],
            str(parents[(str(r.dataset), str(r.item_id), str(r.cell), int(r.rep))].response),
            inits[(str(r.dataset), str(r.item_id), str(r.cell), int(r.rep))].letter,
            str(r.response),
        )
        for r in answered.itertuples(index=False)
    ]
    held = held_labels(reads, judge, "stances", (LETTER_LABELER, letter_sha()))
    return {
        str(k): h.evidence if h.unclear else None
        for k, h in zip(answered["store_key"], held, strict=True)
    }
