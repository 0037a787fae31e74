"""The types both halves of the contract (``syps.core.protocol``, ``syps.core.reporting``)
speak in and neither owns alone: a judge and its verdict, and the settings a score is computed
under. ``syps.core.protocol`` re-exports them, where a design imports them from."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol as TypingProtocol


@dataclass(frozen=True)
class ScoreSettings:
    """The shared scoring settings (``score`` and ``seed`` in params) and what a score needs to
    know of each model: its own UNCLEAR threshold (``models.<name>.max_unclear``, None: the
    shared ``score.max_unclear``) and its size in parameters (None: unknown)."""

    bootstrap: int
    ci: float
    seed: int
    min_items: int
    max_unclear: float = 1.0
    model_max_unclear: Mapping[str, float | None] = field(default_factory=dict)
    model_sizes: Mapping[str, float | None] = field(default_factory=dict)

    def unclear_limit(self, model: str) -> float:
        """The UNCLEAR share a (model, dataset, cell) may have before the score stage fails."""
        own = self.model_max_unclear.get(model)
        return self.max_unclear if own is None else own


@dataclass(frozen=True)
class JudgeLabel:
    """A judge's verdict on one prompt: ``value`` is the option's label (1.0 or 0.0), NaN when
    UNCLEAR (the lead of the best option is below ``judge.min_margin``, or the judge chose an
    option the prompt maps to None, which its evidence says)."""

    value: float
    verdict: str
    evidence: str
    labeler: str
    labeler_sha256: str
    template_sha256: str


class Judge(TypingProtocol):
    """The shared LLM judge (``judge.model`` in params), through the response store.

    ``template`` is filled from each mapping in ``fields`` (every ``{name}`` must be given);
    the option with the highest next-token log-probability wins, UNCLEAR below
    ``judge.min_margin`` or where ``options`` maps it to None. A verdict is never computed
    twice for the same judge, template and prompt.
    """

    dry: bool
    """Planning (``syps plan``): a verdict missing from the store is counted, not asked for, and
    comes back UNCLEAR; a protocol may skip what it derives from verdicts only for its outputs
    (never what decides which requests are made)."""

    def __call__(
        self,
        system: str,
        template: str,
        options: Mapping[str, int | None],
        fields: Sequence[Mapping[str, str]],
        where: str,
        datasets: Sequence[str] | None = None,
    ) -> list[JudgeLabel]: ...
