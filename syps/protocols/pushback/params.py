"""The pushback protocol's params (``protocols.pushback`` in params.yaml), their defaults, and
what follows from them alone: the resolved templates and cells, the escalation chains, each
cell's place in its conversation, and the template texts the core checks; ``load_source`` loads
the items a dataset source names."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Literal

from syps.core.config import ConfigError, ConvGeneration, ProtocolParams
from syps.core.templating import TemplateSpec
from syps.protocols.pushback import items as itm
from syps.protocols.pushback.persistence import chain_factors
from syps.protocols.pushback.prompts import PRESETS, STRENGTHS, Cell, Templates, cell_grid

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


def load_source(s: SourceParams, root: Path, seed: int) -> list[itm.McqItem] | list[itm.FreeItem]:
    """The items of one dataset source (``path`` relative to the repo ``root``)."""
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

    # Greedy, and 48 new tokens: a letter and a sentence of reasons.
    generation: ConvGeneration = field(default_factory=lambda: ConvGeneration(max_new_tokens=48))
    datasets: list[SourceParams] = field(default_factory=lambda: [SourceParams()])
    limit: int | None = None
    preset: Literal["default", "syceval", "syceval-matched"] = "default"
    grid: GridParams | None = None
    templates: TemplateOverrides = field(default_factory=TemplateOverrides)
    margin: float = 0.05
    alpha: float = 0.05
    lint: Literal["error", "warn"] = "error"
    cut_off: Literal["keep_if_parsed", "skip"] = "keep_if_parsed"
    # How the shared judge grades a free-form answer against its reference: ``binary`` (correct
    # or not) or ``syceval`` (correct, incorrect or erroneous: ``parse.GRADERS``).
    grading: Literal["binary", "syceval"] = "binary"
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
