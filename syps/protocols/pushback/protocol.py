"""The pushback protocol as the conversation core runs it (``protocols.pushback`` in params).

Two turns per (item, cell, repetition), and more where the conversation goes on (below):

1. Turn 1 is the unpressured question of the cell's in-context baseline
   (``prompts.baseline_cell``): for an in-context cell its own first turn, for a preemptive cell
   the same question asked without pressure, whose answer decides what an ``auto`` objection
   asserts. One row per cell, not per distinct text: cells whose turn 1 renders the same share
   one store key (generated once), and each turn-2 row's ``parent_key`` then points at the turn-1
   row of its own cell, so lineage and skipped counts are per cell with no lookup table.
2. Turn 2 is the pressured conversation: in-context, turn 1 + the turn-1 answer replayed
   verbatim + the objection; preemptive, one user message (question + objection). Its
   ``parent_key`` is the turn-1 row it depends on (the replayed answer, or the baseline that
   decided the direction).

A turn-2 child is skipped, with its reason, when its parent was skipped, when the parent was
cut off at ``max_new_tokens`` and gave no answer (``cut_off: keep_if_parsed``; every cut-off
parent under ``cut_off: skip``), or when an ``auto`` objection cannot be aimed because the
parent's answer is UNCLEAR (no single letter; a free-form verdict the judge could not give).

Turn 3 on (``later_round``): with ``rounds`` above 1, the user objects again after every answer
(SYCON-Bench); under ``escalation: chained``, an in-context conversation goes on to the next
strength's objection (``successors``), each row carrying that strength's cell.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import pandas as pd

from syps.core.io import LintError, canonical_json, sha256_text
from syps.core.protocol import (
    Drawn,
    Judge,
    Protocol,
    Request,
    Scored,
    ScoreSettings,
    Skipped,
    TableOption,
    TableScorer,
    Turn,
    cell_key,
    item_values,
)
from syps.core.templating import TemplateSpec
from syps.protocols.pushback import items as itm
from syps.protocols.pushback.labels import (
    LETTER_LABELER,
    Initial,
    cell_of,
    initials,
    label_rows,
    letter_sha,
)
from syps.protocols.pushback.lint import Violation, declared_contrasts, lint
from syps.protocols.pushback.params import (
    WHERE,
    PushbackParams,
    SourceParams,
    history,
    resolve,
    successors,
    template_specs,
)
from syps.protocols.pushback.prompts import (
    PROBE,
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
from syps.protocols.pushback.scoring import (
    TABLE_COLUMNS,
    read_table,
    score_file_table,
    score_labels,
)
from syps.protocols.pushback.stance import Stance, held_labels

# ---------------------------------------------------------------------------------- items


def item_record(it: itm.McqItem | itm.FreeItem) -> dict[str, Any]:
    """An item as the JSON ``item`` column holds it."""
    if isinstance(it, itm.McqItem):
        return {
            "kind": "mcq",
            "question": it.question,
            "options": list(it.options),
            "correct": it.correct,
            "target": it.target,
            "texts": dict(it.texts),
        }
    return {
        "kind": "free",
        "question": it.question,
        "ground_truth": it.ground_truth,
        "target": it.target,
        "texts": dict(it.texts),
    }


def item_from_row(dataset: str, item_id: str, record: str) -> itm.McqItem | itm.FreeItem:
    r = json.loads(record)
    if r["kind"] == "mcq":
        return itm.McqItem(
            dataset, item_id, r["question"], tuple(r["options"]), r["correct"], r["target"],
            r["texts"],
        )  # fmt: skip
    return itm.FreeItem(dataset, item_id, r["question"], r["ground_truth"], r["target"], r["texts"])


def _load_source(s: SourceParams, root: Path, seed: int) -> list[itm.McqItem] | list[itm.FreeItem]:
    name = s.dataset
    if s.source == "builtin":
        file = itm.BUILTIN_DIR / ("mcq.csv" if s.format == "mcq" else "free.csv")
        if s.format == "mcq":
            return itm.load_mcq_csv(file, seed, name)
        return itm.load_free_csv(file, seed, name)
    path = root / str(s.path)
    if s.source == "truthfulqa":
        if s.format == "mcq":
            return itm.load_truthfulqa(path, seed, s.n_options, name)
        return itm.load_truthfulqa_free(path, seed, name)
    if s.format == "mcq":
        c = s.mcq_columns
        return itm.load_mcq_csv(
            path, seed, name, itm.McqColumns(c.question, tuple(c.options), c.correct)
        )
    f = s.free_columns
    return itm.load_free_csv(
        path, seed, name, itm.FreeColumns(f.question, f.ground_truth, f.incorrect)
    )


def items_of(items: pd.DataFrame) -> dict[tuple[str, str], itm.McqItem | itm.FreeItem]:
    """The items table as records, keyed (dataset, item_id)."""
    return {
        (str(r.dataset), str(r.item_id)): item_from_row(str(r.dataset), str(r.item_id), str(r.item))
        for r in items.itertuples(index=False)
    }


# ---------------------------------------------------------------------------------- lint


# Renders every strength: a probe item with per-item texts for every letter, used where the
# lint's verdict is needed without the items (scoring, figures): the confounds are structural.
def _lint_lines(violations: Sequence[Violation]) -> list[str]:
    """One line per (contrast, kind of violation): the first message and how many items."""
    groups: dict[tuple[str, str], list[Violation]] = {}
    for v in violations:
        groups.setdefault((v.contrast, v.what), []).append(v)
    return [
        f"{vs[0].message} [{what}; {len({v.item_id for v in vs})} item(s)]"
        for (_, what), vs in groups.items()
    ]


# ---------------------------------------------------------------------------------- labels


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


Key = tuple[str, str, str, int]  # (dataset, item_id, cell, rep)
# The reason every later turn of a conversation that ended early carries.
ENDED = "conversation ended at"


def first_answers(
    previous: pd.DataFrame,
    it_map: Mapping[tuple[str, str], itm.McqItem | itm.FreeItem],
    judge: Judge,
) -> tuple[dict[Key, Any], dict[Key, Initial]]:
    """The turn-1 rows by (dataset, item, cell, rep), and what each generated one's answer says
    (which decides what every objection of its conversation asserts)."""
    t1 = previous[previous["turn"] == 1]
    parents = {
        (str(r.dataset), str(r.item_id), str(r.cell), int(r.rep)): r
        for r in t1.itertuples(index=False)
    }
    generated = t1[t1["skipped"].astype(str) == ""]
    inits = {
        (str(r.dataset), str(r.item_id), str(r.cell), int(r.rep)): x
        for r, x in zip(
            generated.itertuples(index=False), initials(generated, it_map, judge), strict=True
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
    parents, inits = first_answers(previous, it_map, judge)
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


# ---------------------------------------------------------------------------------- protocol


class PushbackProtocol(Protocol[PushbackParams]):
    """``PROTOCOL``: see the module docstring."""

    name = "pushback"
    params_type = PushbackParams
    # Turn-2 rep r continues turn-1 rep r, so the protocol sets ``rep`` itself.
    fan_out_reps = False
    headline_metrics: Sequence[str] = ()  # set below
    # The per-cell rates are in the metrics table (and the plots).
    # ... and, with rounds > 1, the follow curve and the conversations ended early.
    run_metrics: Sequence[str] = ("n_items", "round/*/follow_rate", "n_ended")
    table = TableScorer(
        columns=TABLE_COLUMNS,
        read=read_table,
        score=score_file_table,
        options={"margin": TableOption("equivalence (TOST) margin [0.05]", float)},
    )

    def turns(self, params: PushbackParams) -> int:
        """The answer, then one turn per objection: ``rounds``, or under ``escalation:
        chained`` the longest conversation's strengths."""
        return 1 + max(params.rounds, 1 + max(history(params).values()))

    def load_items(self, params: PushbackParams, root: Path, seed: int) -> pd.DataFrame:
        rows = []
        for s in params.datasets:
            loaded = _load_source(s, root, seed)
            for it in loaded[: params.limit]:
                rows.append(
                    {
                        "dataset": it.dataset,
                        "item_id": it.item_id,
                        "item": canonical_json(item_record(it)),
                    }
                )
        return pd.DataFrame(rows, columns=["dataset", "item_id", "item"])

    def lint(self, params: PushbackParams, items: pd.DataFrame) -> dict[str, Any]:
        templates, cells = resolve(params)
        contrasts = declared_contrasts(cells)
        found = lint(contrasts, items_of(items).values(), templates, history(params))
        lines = _lint_lines(found)
        if lines and params.lint == "error":
            raise LintError(
                "\n".join(
                    [
                        *lines,
                        f"{WHERE}.lint: these contrasts are confounded; to run the design "
                        "anyway (e.g. to reproduce SycEval) set lint: warn, and the flagged "
                        "contrasts carry confounded = 1 in every metric table and figure",
                    ]
                )
            )
        for line in lines:
            print(f"WARNING pushback lint (lint: warn): {line}", file=sys.stderr)
        return {
            "protocol": self.name,
            "preset": params.preset,
            "status": "flagged" if lines else "pass",
            "n_items": len(items),
            "cells": [c.name for c in cells],
            "contrasts": [{"name": c.name, "factor": c.factor} for c in contrasts],
            "violations": lines,
        }

    def requests(
        self,
        params: PushbackParams,
        items: pd.DataFrame,
        turn: int,
        previous: pd.DataFrame,
        judge: Judge,
    ) -> Turn:
        templates, cells = resolve(params)
        it_map = items_of(items)
        reps = range(params.generation.reps)
        if turn == 1:
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
        if not 2 <= turn <= self.turns(params):
            raise ValueError(f"pushback has {self.turns(params)} turns, not {turn}")
        if turn > 2:
            return later_round(params, templates, it_map, turn, previous, judge)
        parents, inits = first_answers(previous, it_map, judge)
        later = set(successors(params).values())  # a chained cell objects after another one
        out = Turn([])
        for (ds, iid), it in it_map.items():
            for cell in cells:
                if cell in later:
                    continue
                for r in reps:
                    key = (ds, iid, cell_key(cell.as_dict()), r)
                    c = child(params, templates, it, cell, r, parents.get(key), inits.get(key))
                    if isinstance(c, Request):
                        out.requests.append(c)
                    else:
                        out.skipped.append(c)
        return out

    def label(
        self,
        params: PushbackParams,
        items: pd.DataFrame,
        responses: pd.DataFrame,
        judge: Judge,
        aux: pd.DataFrame,
    ) -> pd.DataFrame:
        # Free-form stances are judged where a metric reads them: over several rounds.
        return label_rows(items_of(items), responses, judge, stance=params.rounds > 1)

    def score(
        self, params: PushbackParams, labels: pd.DataFrame, settings: ScoreSettings
    ) -> dict[str, dict[str, dict[str, float]]]:
        return score_labels(params, labels, settings)

    def figures(self, params: PushbackParams, scored: Scored) -> Drawn:
        from syps.protocols.pushback.figures import draw

        templates, cells = resolve(params)
        contrasts = declared_contrasts(cells)
        return Drawn(
            draw(scored.scores, cells, contrasts, params.margin, scored.figures, scored.plots)
        )

    def template_specs(self, params: PushbackParams, where: str) -> list[TemplateSpec]:
        return template_specs(params, where)

    def templates(self, params: PushbackParams) -> dict[str, Any]:
        templates, cells = resolve(params)
        probe = replace(PROBE, dataset="template", item_id="template")
        before = {b: a for a, b in successors(params).items()}
        rendered = {}
        for cell in cells:
            convs = {"turn 1": first_turn(probe, baseline_cell(cell), templates).as_messages()}
            replay = "{turn-1 answer}" if cell.placement == "in_context" else None
            # Under chained escalation, the strengths before this cell's in its conversation.
            links = [cell]
            while links[0] in before:
                links.insert(0, before[links[0]])
            # The probe's target is option B: the asserted answer shows where {answer} goes.
            messages = pushback_turn(probe, links[0], templates, "B", replay).as_messages()
            for k, link in enumerate(links[1:], start=2):
                messages += [
                    {"role": "assistant", "content": f"{{turn-{k} answer}}"},
                    {"role": "user", "content": objection_text(probe, link, templates, "B")},
                ]
            convs[f"turn {len(links) + 1}"] = messages
            rendered[cell.name] = convs
        raw = asdict(templates)
        return {
            "preset": params.preset,
            "templates": raw,
            "templates_sha256": sha256_text(canonical_json(raw)),
            "cells": [c.name for c in cells],
            "contrasts": [{"name": c.name, "factor": c.factor} for c in declared_contrasts(cells)],
            "rendered": rendered,
            "note": "rendered with a placeholder two-option item whose objection asserts B",
        }

    def review(
        self, params: PushbackParams, items: pd.DataFrame, labels: pd.DataFrame
    ) -> pd.DataFrame:
        """``flagged``: a cave, an answer that followed the objection; ``expected``: the
        item's correct answer."""
        return pd.DataFrame(
            {
                "flagged": (labels["followed"] == 1.0).to_numpy(),
                "expected": item_values(items, labels, "correct"),
            },
            index=labels.index,
        )


PROTOCOL = PushbackProtocol()
HEADLINE_METRICS = [
    "follow_rate",
    "initial_accuracy",
    "effect/naming/unnamed-vs-named",
    "effect/placement/in_context-vs-preemptive",
    "effect/format/objection-vs-question",
    "effect/format/objection-vs-absent",
    # Sustained pressure (rounds > 1 only; absent otherwise, and then shown nowhere).
    "tof",
    "nof",
    "flip_back",
]
PushbackProtocol.headline_metrics = HEADLINE_METRICS
