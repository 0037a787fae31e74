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

import itertools
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from syps.core.config import ConfigError
from syps.core.io import LintError, canonical_json, sha256_text
from syps.core.templating import TemplateSpec
from syps.protocols.base import (
    Drawn,
    Judge,
    Protocol,
    ProtocolParams,
    Request,
    ScoreSettings,
    Skipped,
    TraceDefaults,
    Turn,
    cell_key,
    item_values,
)
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
from syps.protocols.pushback.persistence import chain_factors
from syps.protocols.pushback.prompts import (
    PRESETS,
    STRENGTHS,
    Cell,
    Templates,
    asserted_free,
    asserted_letter,
    baseline_cell,
    cell_grid,
    first_turn,
    followup_objection,
    objection_text,
    pushback_turn,
)
from syps.protocols.pushback.stance import Stance, held_labels

Placement = Literal["in_context", "preemptive"]
Strength = Literal["simple", "ethos", "justification", "citation"]
Naming = Literal["named", "unnamed"]
FormatPos = Literal["objection", "question", "absent"]
Direction = Literal["auto", "regressive", "progressive"]
WHERE = "protocols.pushback"
# SYCON-Bench used 5 rounds; a conversation's turns all hold the earlier ones verbatim.
MAX_ROUNDS = 20


@dataclass(frozen=True, kw_only=True)
class McqColumnsParams:
    """Columns of a user MCQ CSV: one per option (A first), and the correct option's letter."""

    question: str = "question"
    options: list[str] = field(default_factory=lambda: ["A", "B", "C", "D"])
    correct: str = "correct"


@dataclass(frozen=True, kw_only=True)
class FreeColumnsParams:
    """Columns of a user free-form CSV; ``incorrect``: ``;``-separated wrong answers."""

    question: str = "question"
    ground_truth: str = "ground_truth"
    incorrect: str | None = "incorrect"


@dataclass(frozen=True, kw_only=True)
class SourceParams:
    """One dataset: the built-in sample, TruthfulQA's CSV layout, or a user CSV."""

    source: Literal["builtin", "truthfulqa", "csv"] = "builtin"
    format: Literal["mcq", "free"] = "mcq"
    path: str | None = None
    name: str | None = None  # the dataset's name in every table; default <source>-<format>
    n_options: int = 4  # TruthfulQA MCQ: the best answer + up to n_options - 1 incorrect ones
    mcq_columns: McqColumnsParams = field(default_factory=McqColumnsParams)
    free_columns: FreeColumnsParams = field(default_factory=FreeColumnsParams)

    @property
    def dataset(self) -> str:
        return self.name or f"{self.source}-{self.format}"


@dataclass(frozen=True, kw_only=True)
class GridParams:
    """An explicit factor grid (the product of the lists), replacing the preset's cells."""

    placements: list[Placement] = field(default_factory=lambda: ["in_context", "preemptive"])
    strengths: list[Strength] = field(default_factory=lambda: ["simple"])
    namings: list[Naming] = field(default_factory=lambda: ["named", "unnamed"])
    formats: list[FormatPos] = field(default_factory=lambda: ["objection", "question", "absent"])
    directions: list[Direction] = field(default_factory=lambda: ["auto"])


@dataclass(frozen=True, kw_only=True)
class TemplateOverrides:
    """Texts replacing the preset's (``prompts.Templates``); per-strength maps are merged."""

    question: str | None = None
    option: str | None = None
    answer_mcq: str | None = None
    format: str | None = None
    pressure: dict[str, str] | None = None
    naming: str | None = None
    preemptive_pressure: dict[str, str] | None = None
    forced_naming: dict[str, str] | None = None


@dataclass(frozen=True, kw_only=True)
class PushbackParams(ProtocolParams):
    """``protocols.pushback`` (see ``syps/protocols/pushback/params.yaml`` for the comments)."""

    datasets: list[SourceParams] = field(default_factory=lambda: [SourceParams()])
    limit: int | None = None
    preset: Literal["default", "syceval", "syceval-matched"] = "default"
    grid: GridParams | None = None
    templates: TemplateOverrides = field(default_factory=TemplateOverrides)
    margin: float = 0.05
    alpha: float = 0.05
    lint: Literal["error", "warn"] = "error"
    cut_off: Literal["keep_if_parsed", "skip"] = "keep_if_parsed"
    # Sustained pressure (SYCON-Bench): ``rounds`` objections per conversation, each answered
    # before the next; 1 is one objection (SycEval). ``followups``: the objections of rounds 2,
    # 3, ... in order, the last repeated ({answer}: the asserted answer); null repeats the
    # cell's own objection.
    rounds: int = 1
    followups: list[str] | None = None
    # How an in-context cell's strengths meet the model: ``branched``, each objection a separate
    # reply to the same first answer (SycEval's cells, compared side by side); ``chained``, one
    # conversation escalating through the strengths present, each answered before the next
    # (simple -> ethos -> justification -> citation), each turn's row carrying its strength's
    # cell. Preemptive cells have no earlier turn to chain and stay one message.
    escalation: Literal["branched", "chained"] = "branched"

    def __post_init__(self) -> None:
        if self.limit is not None and self.limit < 1:
            raise ConfigError(f"{WHERE}.limit: must be at least 1, got {self.limit}")
        for key in ("margin", "alpha"):
            if not 0 < getattr(self, key) < 1:
                raise ConfigError(f"{WHERE}.{key}: must be in (0, 1), got {getattr(self, key)}")
        names = [d.dataset for d in self.datasets]
        for k, d in enumerate(self.datasets):
            at = f"{WHERE}.datasets[{k}]"
            if (d.source == "builtin") != (d.path is None):
                need = "takes no path" if d.source == "builtin" else "needs a path"
                raise ConfigError(f"{at}.path: source {d.source!r} {need}")
            if "/" in d.dataset or not d.dataset.strip():
                raise ConfigError(f"{at}.name: {d.dataset!r} must be non-empty, without '/'")
            if names.count(d.dataset) > 1:
                raise ConfigError(f"{at}.name: dataset {d.dataset!r} is configured twice")
        if not self.datasets:
            raise ConfigError(f"{WHERE}.datasets: at least one dataset")
        if not 1 <= self.rounds <= MAX_ROUNDS:
            raise ConfigError(f"{WHERE}.rounds: must be 1 to {MAX_ROUNDS}, got {self.rounds}")
        if self.followups is not None:
            if self.rounds == 1:
                raise ConfigError(f"{WHERE}.followups: apply only with rounds above 1")
            if not self.followups or not all(f.strip() for f in self.followups):
                raise ConfigError(f"{WHERE}.followups: a non-empty list of non-empty texts")
        _, cells = resolve(self)  # template and grid errors at parse time, naming the key
        if self.escalation == "chained":
            at = f"{WHERE}.escalation: chained"
            if self.rounds != 1:
                raise ConfigError(
                    f"{at} escalates through the strengths, one objection each; it takes "
                    f"rounds: 1, got {self.rounds}"
                )
            if not escalations(cells):
                raise ConfigError(
                    f"{at} needs two or more strengths in context; the cells have "
                    f"{sorted({c.strength for c in cells if c.placement == 'in_context'})}"
                )


def resolve(p: PushbackParams) -> tuple[Templates, list[Cell]]:
    """The templates (preset + overrides) and the cells (explicit grid, else the preset's)."""
    base, cells = PRESETS[p.preset]
    over = {k: v for k, v in asdict(p.templates).items() if v is not None}
    for key in ("pressure", "preemptive_pressure", "forced_naming"):
        if key in over:
            over[key] = {**getattr(base, key), **over[key]}
    try:
        templates = replace(base, **over)
    except ValueError as e:
        raise ConfigError(f"{WHERE}.templates: {e}") from None
    if p.grid is not None:
        g = p.grid
        lists = (g.placements, g.strengths, g.namings, g.formats, g.directions)
        if not all(lists):
            raise ConfigError(f"{WHERE}.grid: every factor needs at least one value")
        cells = cell_grid(*lists)
    return templates, cells


def template_specs(p: PushbackParams, where: str = WHERE) -> list[TemplateSpec]:
    """Every text of the resolved templates with the placeholders its renderer fills
    (``prompts``): question ``{question}`` ``{options}``, option and answer_mcq ``{letter}``
    ``{text}``, naming ``{answer}``, pressure and preemptive_pressure ``{justification}``
    ``{citation}`` (the item's text arguing for the asserted answer); format is sent as is.

    Required: the question, its options and each option's letter and text (the format asks for
    a letter; an MCQ question without its options is answered blind), the asserted option's
    letter in answer_mcq (what the answer is read by), {answer} in naming (a named cell that
    names nothing is its unnamed twin), and the per-item text of the justification and
    citation strengths (else they are the simple strength). The question, option and
    answer_mcq texts are filled for MCQ items only, so nothing is required of them when every
    dataset is free-form. Keys are the user's (``templates.question``), also where the value
    is the preset's.
    """
    t, _ = resolve(p)
    key = f"{where}.templates"
    mcq = any(d.format == "mcq" for d in p.datasets)

    def spec(name: str, text: str, need: dict[str, str], fills: tuple[str, ...]) -> TemplateSpec:
        return TemplateSpec(
            f"{key}.{name}", text, frozenset(need), frozenset(fills) | frozenset(need), why=need
        )

    mcq_need = {
        "question": "the question asked of every MCQ item",
        "options": "the lettered options of every MCQ item, without which it is answered blind",
    }
    out = [
        spec("question", t.question, mcq_need if mcq else {}, ("question", "options")),
        spec(
            "option",
            t.option,
            {"letter": "the letter an answer names", "text": "the option's text"} if mcq else {},
            ("letter", "text"),
        ),
        spec(
            "answer_mcq",
            t.answer_mcq,
            {"letter": "the asserted option's letter, which answers are read by"} if mcq else {},
            ("letter", "text"),
        ),
        spec("format", t.format, {}, ()),
        spec(
            "naming",
            t.naming,
            {"answer": "the asserted answer a named cell names; else it is its unnamed twin"},
            ("answer",),
        ),
    ]
    for group, texts in (("pressure", t.pressure), ("preemptive_pressure", t.preemptive_pressure)):
        for strength in (s for s in STRENGTHS if s in texts):
            need = (
                {
                    strength: f"the item's {strength} text that the {strength} strength quotes; "
                    "without it the strength is the simple one"
                }
                if strength in itm.TEXT_KINDS
                else {}
            )
            out.append(spec(f"{group}.{strength}", texts[strength], need, itm.TEXT_KINDS))
    for i, text in enumerate(p.followups or []):
        fills = frozenset({"answer"})
        out.append(TemplateSpec(f"{where}.followups[{i}]", text, frozenset(), fills))
    return out


def escalations(cells: Sequence[Cell]) -> list[list[Cell]]:
    """The conversations of ``escalation: chained``: the in-context cells grouped as SycEval's
    chains are (``persistence.chain_factors``: the factors besides the strength that vary on
    their own), each group in ``STRENGTHS`` order; groups of one cell are left out. Every grid
    and preset is a product over the formats, so a group's cells share their format and with
    it their first question."""
    held = ("placement", *chain_factors(cells))
    groups: dict[tuple[str, ...], list[Cell]] = {}
    for c in sorted(cells, key=lambda c: STRENGTHS.index(c.strength)):
        if c.placement == "in_context":
            groups.setdefault(tuple(getattr(c, f) for f in held), []).append(c)
    return [g for g in groups.values() if len(g) >= 2]


def successors(p: PushbackParams) -> dict[Cell, Cell]:
    """Each chained cell -> the cell whose objection comes next in its conversation (empty
    under ``branched``)."""
    if p.escalation != "chained":
        return {}
    _, cells = resolve(p)
    return {a: b for g in escalations(cells) for a, b in itertools.pairwise(g)}


def history(p: PushbackParams) -> dict[Cell, int]:
    """Each cell -> how many objections come before its own in its conversation (0 for every
    cell under ``branched``)."""
    _, cells = resolve(p)
    out = {c: 0 for c in cells}
    for g in escalations(cells) if p.escalation == "chained" else []:
        out |= {c: k for k, c in enumerate(g)}
    return out


def objection_rows(p: PushbackParams, labels: pd.DataFrame) -> pd.Series:
    """Each row's flag: it holds its cell's (first) objection: turn 2 under ``branched``, where
    later turns repeat it; every turn from 2 under ``chained``, where each strength's objection
    is its own turn (and ``rounds`` is 1)."""
    turn = labels["turn"].astype(int)
    return turn >= 2 if p.escalation == "chained" else turn == 2


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
_PROBE = itm.McqItem(
    "probe",
    "probe",
    "{question}",
    ("{option A}", "{option B}"),
    correct="A",
    target="B",
    texts={f"{k}:{x}": "{" + k + "}" for k in itm.TEXT_KINDS for x in "AB"},
)


def flagged_contrasts(p: PushbackParams) -> dict[str, list[str]]:
    """Contrast name -> what co-varies with its factor (empty when the grid is matched)."""
    templates, cells = resolve(p)
    out: dict[str, list[str]] = {}
    for v in lint(declared_contrasts(cells), [_PROBE], templates, history(p)):
        out.setdefault(v.contrast, [])
        if v.what not in out[v.contrast]:
            out[v.contrast].append(v.what)
    return out


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
    # The turn before's stance against the first answer (its letter; the stance judge's verdict,
    # the one its label records): with none readable, the conversation has no stance to press on.
    stances: dict[str, str | None] = {}
    if chained is None:
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
        stances = {
            str(k): h.evidence if h.unclear else None
            for k, h in zip(answered["store_key"], held, strict=True)
        }
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

        def end(why: str, it: Any = it, cell: Cell = cell, r: Any = r, key: str = key) -> None:
            out.skipped.append(
                Skipped(it.dataset, it.item_id, cell.as_dict(), turn, why, rep=int(r.rep),
                        parent_key=key)
            )  # fmt: skip

        if str(r.skipped):
            why = str(r.skipped)
            end(why if why.startswith(ENDED) else f"{ENDED} turn {turn - 1} skipped: {why}")
            continue
        if stances.get(key) is not None:
            end(f"{ENDED} turn {turn - 1} {stances[key]}")
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


# ---------------------------------------------------------------------------------- protocol


class PushbackProtocol(TraceDefaults):
    """``PROTOCOL``: see the module docstring."""

    name = "pushback"
    params_type = PushbackParams
    # Turn-2 rep r continues turn-1 rep r, so the protocol sets ``rep`` itself.
    fan_out_reps = False
    needs_sampling_for_reps = True
    headline_metrics: Sequence[str] = ()  # set below
    # The per-cell rates are in the metrics table (and the plots).
    # ... and, with rounds > 1, the follow curve and the conversations ended early.
    run_metrics: Sequence[str] = ("n_items", "round/*/follow_rate", "n_ended")
    run_prefix: str = "pushback"

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

    def auxiliary(self, params: PushbackParams, items: pd.DataFrame, judge: Judge) -> pd.DataFrame:
        # The per-item justification/citation texts come from the items' columns; nothing is
        # computed by a model before the run.
        return pd.DataFrame()

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
        from syps.protocols.pushback.scoring import score_labels

        return score_labels(params, labels, settings)

    def figures(
        self,
        params: PushbackParams,
        scores: dict[str, dict[str, dict[str, float]]],
        labels: pd.DataFrame,
        items: pd.DataFrame,
        figures: Path,
        tables: Path,
        plots: Path,
        settings: ScoreSettings,
    ) -> Drawn:
        from syps.protocols.pushback.figures import draw

        templates, cells = resolve(params)
        return Drawn(draw(scores, cells, declared_contrasts(cells), params.margin, figures, plots))

    def template_specs(self, params: PushbackParams, where: str) -> list[TemplateSpec]:
        return template_specs(params, where)

    def templates(self, params: PushbackParams) -> dict[str, Any]:
        templates, cells = resolve(params)
        probe = replace(_PROBE, dataset="template", item_id="template")
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

    def run_tags(self, params: PushbackParams) -> dict[str, str]:
        """None beyond the template set's hash."""
        return {}

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


PROTOCOL: Protocol[PushbackParams] = PushbackProtocol()
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
