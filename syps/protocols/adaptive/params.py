"""``protocols.adaptive`` in params.yaml: the scenarios, the arms, the ladder's length and the
texts (the target's question, the simulator's instructions and each tactic's brief), typed.
The default texts are stated once, in this folder's params.yaml (read by ``simulator``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from syps.core.config import ConfigError, ConvGeneration, ProtocolParams
from syps.core.templating import TemplateSpec
from syps.protocols.adaptive.controller import LADDER, NEUTRAL, RECOVERY
from syps.protocols.adaptive.simulator import BRIEFS, INSTRUCTIONS, QUESTION

WHERE = "protocols.adaptive"
# The arms, each a conversation per scenario and repetition after the shared first answer:
# the simulated user pressing the wrong claim on a right first answer (``toward_wrong``) or the
# ground truth on a wrong one (``toward_right``: updating toward the truth is not sycophancy);
# the neutral re-ask (``neutral``); and the frozen script (``frozen``): the user turns the
# simulator wrote against a reference assistant that states the ground truth every turn, the
# same bytes for every model, pressing the wrong claim rung by rung.
ARMS = ("toward_wrong", "toward_right", "neutral", "frozen")
# The simulator's fields; a brief may also use {claim}.
INSTRUCTION_FIELDS = frozenset({"persona", "question", "claim", "facts", "brief"})


def _default_generation() -> ConvGeneration:
    # Greedy and short, so that the embedded smoke-test model fits the default run's budget.
    return ConvGeneration(max_new_tokens=40, temperature=0.0, top_p=1.0, reps=1)


@dataclass(frozen=True, kw_only=True)
class AdaptiveTemplates:
    """``question``: the target's first message (``{question}``); ``instructions``: the
    simulator's system message (``{persona}``, ``{question}``, ``{claim}``, ``{facts}``,
    ``{brief}``); ``briefs``: per tactic (every rung of the ladder and ``recovery``), what the
    user's next message must do (``{claim}`` optional)."""

    question: str = QUESTION
    instructions: str = INSTRUCTIONS
    briefs: dict[str, str] = field(default_factory=lambda: dict(BRIEFS))


@dataclass(frozen=True, kw_only=True)
class AdaptiveParams(ProtocolParams):
    """``protocols.adaptive`` in params.yaml.

    ``scenarios``: ``builtin`` (the shipped TruthfulQA subset, data/builtin/betting/, read in
    TruthfulQA's layout), ``builtin-mcq`` (the shipped multiple-choice items,
    data/builtin/pushback/mcq.csv) or a path relative to the repository root: a TruthfulQA CSV
    (``layout: truthfulqa``), a scenario file (``layout: scenarios``: CSV or JSON Lines of
    question, ground_truth, wrong_claim, persona, facts; docs/adaptive.md) or a multiple-choice
    CSV (``layout: mcq``: question, A, B, ..., correct). ``limit``: the first
    that many scenarios (null: all). ``dataset``: the name scores and runs carry.
    ``max_turns``: the user turns a conversation may have (a capitulation's recovery turn
    included); ``ladder``: the tactics in order of strength, a prefix of the full ladder or
    any order of its tactics; ``arms``: which arms run; ``pressure``: ``ladder`` (the
    controller climbs by the model's stance) or ``sustained`` (SYCON-Bench: the ladder's first
    tactic every turn, through a capitulation, until ``max_turns``; ``controller``).
    """

    generation: ConvGeneration = field(default_factory=_default_generation)
    scenarios: str = "builtin"
    layout: Literal["truthfulqa", "scenarios", "mcq"] = "truthfulqa"
    dataset: str = "truthfulqa"
    limit: int | None = 2
    max_turns: int = 2
    ladder: list[str] = field(default_factory=lambda: list(LADDER))
    arms: list[str] = field(default_factory=lambda: list(ARMS))
    pressure: Literal["ladder", "sustained"] = "ladder"
    templates: AdaptiveTemplates = field(default_factory=AdaptiveTemplates)


def check(p: AdaptiveParams) -> None:
    """What types cannot say: a known arm and tactic each, a brief for every tactic used."""
    if p.max_turns < 1:
        raise ConfigError(f"{WHERE}.max_turns: must be at least 1, got {p.max_turns}")
    if p.limit is not None and p.limit < 1:
        raise ConfigError(f"{WHERE}.limit: must be at least 1 or null, got {p.limit}")
    for key, got, known in (("arms", p.arms, ARMS), ("ladder", p.ladder, LADDER)):
        bad = [x for x in got if x not in known]
        if bad or not got or len(set(got)) != len(got):
            raise ConfigError(
                f"{WHERE}.{key}: a non-empty list of distinct names from {list(known)}, got {got}"
            )
    used = [*p.ladder, RECOVERY, *([NEUTRAL] if "neutral" in p.arms else [])]
    missing = [t for t in dict.fromkeys(used) if t not in p.templates.briefs]
    if missing:
        raise ConfigError(f"{WHERE}.templates.briefs: no brief for {missing}")


def template_specs(p: AdaptiveParams, where: str) -> list[TemplateSpec]:
    """Every text the protocol sends, with its placeholders (checked when params load)."""
    check(p)
    t = f"{where}.templates"
    return [
        TemplateSpec(
            f"{t}.question", p.templates.question, frozenset({"question"}), frozenset({"question"})
        ),
        TemplateSpec(
            f"{t}.instructions", p.templates.instructions, frozenset({"brief"}), INSTRUCTION_FIELDS
        ),
        *(
            TemplateSpec(f"{t}.briefs.{k}", v, frozenset(), frozenset({"claim"}))
            for k, v in p.templates.briefs.items()
        ),
    ]
