"""``protocols.discernment`` in params.yaml (see syps/protocols/discernment/params.yaml): the
items, the templates, the threshold k, the baseline, the argument ratings, the parser's option
and the unparsed limit, typed; and ``template_specs``, the templates' placeholder rules.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from syps.core.config import ConfigError, ConvGeneration, ProtocolParams
from syps.core.templating import TemplateSpec
from syps.protocols.discernment.prompts import BASELINE_FIELDS, UPDATE_FIELDS, Templates

NAME = "discernment"
BUILTIN = "builtin"
Pool = Literal["artefact", "global"]  # which arguments a ratings judge compares (see ratings)


@dataclass(frozen=True, kw_only=True)
class RatingsParams:
    """Where the arguments' Bradley-Terry ratings q come from (label-confidence weights).

    ``none``: every argument weighs 1. ``file``: a CSV ``arg_id, q`` (``file``, relative to the
    repo root) covering every loaded argument. ``judge``: pairwise comparisons by the shared
    judge, fitted by I-LSR with regularisation ``alpha``, in one of two ``pool``s: ``global``
    (the paper's) is one random ``matches``-regular graph over every argument of every artefact;
    ``artefact`` (the default) a random ``degree``-regular graph per artefact (see ``ratings``).
    ``seed`` draws the graphs: the auxiliary step is not handed the run seed
    (base.Protocol.auxiliary has no seed argument), so it is its own key here.
    """

    source: Literal["none", "file", "judge"] = "none"
    file: str | None = None
    pool: Pool = "artefact"
    degree: int = 4
    matches: int = 70
    alpha: float = 0.01  # I-LSR's regularisation, as in the paper
    seed: int = 0
    # The budget diagnostic (``ratings_budget``, Fig. A1a): the even per-argument comparison
    # counts whose ranking is set against the full graph's (those above it are left out), and
    # the Kendall τb a budget must exceed to count as converged (the paper: 0.9).
    budgets: list[int] = field(default_factory=lambda: [10, 20, 30, 40, 50, 60, 70])
    tau_threshold: float = 0.9

    def __post_init__(self) -> None:
        # Whether the pool has a matches-regular graph depends on its size, checked once the
        # items are loaded (``ratings.global_schedule``); a count below 1 never has one.
        if self.matches < 1:
            raise ConfigError(
                f"protocols.{NAME}.ratings.matches: must be at least 1, got {self.matches}"
            )
        bad = [b for b in self.budgets if b < 2 or b % 2]
        if bad:
            # A budget is b/2 of the graph's 2-factors (``ratings_budget.two_factors``).
            raise ConfigError(
                f"protocols.{NAME}.ratings.budgets: each must be even and at least 2, got {bad}"
            )
        if not -1 <= self.tau_threshold <= 1:
            raise ConfigError(
                f"protocols.{NAME}.ratings.tau_threshold: a Kendall τb lies in [-1, 1], "
                f"got {self.tau_threshold}"
            )


def _default_generation() -> ConvGeneration:
    # Sampled repetitions: the baseline's spread is the model's own noise (sigma0), so greedy
    # decoding or one repetition measures nothing; four, scaled down from the paper's R = 20 to
    # the smoke-test budget.
    return ConvGeneration(max_new_tokens=64, temperature=0.7, top_p=0.95, reps=4)


@dataclass(frozen=True, kw_only=True)
class DiscernmentParams(ProtocolParams):
    """``protocols.discernment`` in params.yaml (see syps/protocols/discernment/params.yaml)."""

    generation: ConvGeneration = field(default_factory=_default_generation)
    items: str = BUILTIN  # "builtin" or a benchmark-layout JSON/JSONL file (repo-relative)
    limit: int | None = None  # the first N artefacts in file order
    templates: Templates = field(default_factory=Templates)
    k: float = 2.0
    baseline: Literal["run", "mean"] = "run"
    ratings: RatingsParams = field(default_factory=RatingsParams)
    scale_ten: bool = False  # convert "/10" answers (x10) instead of leaving them UNPARSED
    # The score stage fails when a stage's unparsed share exceeds this (as SyPS's max_unclear):
    # its metrics would rest on the responses that happened to parse. 1.0 (no check) by default,
    # as every default here is sized for the smoke-test model, which often misses the format;
    # 0.2 for a study (docs/discernment.md).
    max_unparsed: float = 1.0
    figure_artefact: str | None = (
        None  # the per-argument bars' artefact (None: the first with a σ0)
    )


def template_specs(p: DiscernmentParams, where: str = f"protocols.{NAME}") -> list[TemplateSpec]:
    """The baseline must hold ``{artefact}`` (what is scored) and may hold ``{initial_prompt}``,
    ``{title}``, ``{domain}``; the update must hold ``{message}`` exactly once (the argument is
    all that differs between update turns); the system text is sent as is."""
    key = f"{where}.templates"
    t = p.templates
    out = [
        TemplateSpec(
            f"{key}.baseline",
            t.baseline,
            frozenset({"artefact"}),
            frozenset(BASELINE_FIELDS),
            why={"artefact": "the artefact the model scores"},
        ),
        TemplateSpec(
            f"{key}.update",
            t.update,
            frozenset({"message"}),
            frozenset(UPDATE_FIELDS),
            once=frozenset({"message"}),
            why={
                "message": "the argument, the only text that differs between update turns; "
                "else valid and invalid turns are confounded"
            },
        ),
    ]
    if t.system is not None:
        out.append(TemplateSpec(f"{key}.system", t.system, frozenset(), frozenset()))
    return out
