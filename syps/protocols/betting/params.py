"""``protocols.betting`` in params.yaml: the items, the generation, the templates of each
premise and the over-compensation test's level, typed; and the small pure helpers that turn the
templates into ``prompts.BetTemplates`` and the placeholder rules (``template_specs``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from syps.core.config import ConfigError, ConvGeneration, ProtocolParams
from syps.core.templating import TemplateSpec
from syps.protocols.betting.items import TRUTHFULQA_COLUMNS
from syps.protocols.betting.prompts import (
    DEFAULT_TEMPLATES,
    FIELDS,
    PREMISES,
    BetTemplates,
    Framing,
)

WHERE = "protocols.betting"
DATASET = "truthfulqa"


@dataclass(frozen=True, kw_only=True)
class FramingParams:
    """One premise's texts (see ``prompts.Framing``): two holder names, two answer words."""

    premise: str
    names: list[str]
    choices: list[str]
    body: str


def _framing(f: Framing) -> FramingParams:
    return FramingParams(premise=f.premise, names=[*f.names], choices=[*f.choices], body=f.body)


@dataclass(frozen=True, kw_only=True)
class TemplatesParams:
    """The system turn and one framing per premise; the defaults are ``DEFAULT_TEMPLATES``, read
    from this folder's params.yaml (the texts are stated there alone)."""

    system: str = DEFAULT_TEMPLATES.system
    F: FramingParams = field(default_factory=lambda: _framing(DEFAULT_TEMPLATES.F))
    Z: FramingParams = field(default_factory=lambda: _framing(DEFAULT_TEMPLATES.Z))
    N: FramingParams = field(default_factory=lambda: _framing(DEFAULT_TEMPLATES.N))


def _default_generation() -> ConvGeneration:
    # Sampled, so that repetitions differ (greedy makes reps > 1 pointless); small, so that the
    # embedded smoke-test model fits the default run's budget. The paper: m = 50 at provider
    # defaults.
    return ConvGeneration(max_new_tokens=24, temperature=0.7, top_p=1.0, reps=2)


@dataclass(frozen=True, kw_only=True)
class BettingParams(ProtocolParams):
    """``protocols.betting`` in params.yaml.

    ``items``: ``builtin`` (the shipped TruthfulQA subset) or a CSV path relative to the repo
    root, in TruthfulQA's layout or mapped by ``columns`` (item field -> column);
    ``incorrect_index``: which of the ``"; "``-separated incorrect answers is claim B;
    ``n_items``: a stratified (by category) seeded sample of that many items, null for all;
    ``dataset``: the name the scores carry; ``alpha``: the level of the three flags' one-sided
    tests.
    """

    generation: ConvGeneration = field(default_factory=_default_generation)
    items: str = "builtin"
    dataset: str = DATASET
    columns: dict[str, str] = field(default_factory=lambda: dict(TRUTHFULQA_COLUMNS))
    incorrect_index: int = 0
    n_items: int | None = 6
    templates: TemplatesParams = field(default_factory=TemplatesParams)
    alpha: float = 0.05


def bet_templates(p: BettingParams) -> BetTemplates:
    """The typed templates; a framing without exactly two names and two choices is an error."""
    framings = {}
    for premise in PREMISES:
        f: FramingParams = getattr(p.templates, premise)
        for key in ("names", "choices"):
            if len(getattr(f, key)) != 2:
                raise ConfigError(
                    f"{WHERE}.templates.{premise}.{key}: expected two entries (side 1, side 2), "
                    f"got {getattr(f, key)!r}"
                )
        framings[premise] = Framing(
            f.premise, (f.names[0], f.names[1]), (f.choices[0], f.choices[1]), f.body
        )
    return BetTemplates(system=p.templates.system, **framings)


# Why a body cannot do without each field: the design's factors are premise x who holds the
# correct claim x whose claim comes first, and the side parser reads the answer words.
_BODY_NEEDS = {
    "premise": "the premise is what F, Z and N differ in; without it they are one condition",
    "question": "the question both claims answer",
    "name_first": "who holds the first claim; without it the holder factor vanishes",
    "claim_first": "the claim stated first",
    "name_last": "who holds the last claim; without it the holder factor vanishes",
    "claim_last": "the claim stated last",
    "choice_1": "side 1's answer word, which the side parser reads",
    "choice_2": "side 2's answer word, which the side parser reads",
}


def template_specs(p: BettingParams, where: str = WHERE) -> list[TemplateSpec]:
    """Each premise's body must hold every field in ``prompts.FIELDS`` (see ``_BODY_NEEDS``);
    the system turn, premises, names and choices are inserted as is, so they hold none."""
    key = f"{where}.templates"
    none: frozenset[str] = frozenset()
    out = [TemplateSpec(f"{key}.system", p.templates.system, none, none)]
    for premise in PREMISES:
        f: FramingParams = getattr(p.templates, premise)
        at = f"{key}.{premise}"
        out.append(TemplateSpec(f"{at}.premise", f.premise, none, none))
        out += [TemplateSpec(f"{at}.names[{k}]", n, none, none) for k, n in enumerate(f.names)]
        out += [TemplateSpec(f"{at}.choices[{k}]", c, none, none) for k, c in enumerate(f.choices)]
        fields = frozenset(FIELDS)
        out.append(TemplateSpec(f"{at}.body", f.body, fields, fields, why=_BODY_NEEDS))
    return out
