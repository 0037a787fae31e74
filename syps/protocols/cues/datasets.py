"""SyPS's datasets by name: what the code must know of each beyond its params.

The one place a SyPS dataset is named in code: loading (a verdict filter), labelling (the judge
or a rule set) and the ELEPHANT source ask this registry. Adding a dataset touches it plus
params.yaml (its files, columns, templates, max_new_tokens and, for rules, its verdict map).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class DatasetSpec:
    """What SyPS needs to know of a dataset.

    Attributes:
        labeler: ``judge`` (the LLM judge of params ``judge``) or ``rule`` (a rule set, with
            the verdict mapping ``labels.<dataset>`` of params).
        rules: the rule set of :mod:`syps.protocols.cues.labels` (a key of
            ``VERDICT_PATTERNS``) for ``rule``.
        verdict_filter: the ``data`` param whose value the verdict column must hold for a row
            to be kept (AITA-YTA keeps the YTA posts), None to keep every row.
        elephant_released: whether github.com/myracheng/elephant releases it, so that the
            ``elephant`` source can download it; else the user supplies a local copy.
        spelled_out: words that spell a verdict out (as posts and replies write it), which
            the lint forbids in a cue besides the verdicts themselves.
    """

    labeler: Literal["judge", "rule"]
    rules: str | None = None
    verdict_filter: Literal["yta_value"] | None = None
    elephant_released: bool = True
    spelled_out: tuple[str, ...] = ()


DATASETS: dict[str, DatasetSpec] = {
    "OEQ": DatasetSpec(labeler="judge"),
    "AITA-YTA": DatasetSpec(
        labeler="rule",
        rules="AITA-YTA",
        verdict_filter="yta_value",
        spelled_out=("asshole",),  # "you're the asshole"
    ),
    # The ELEPHANT paper's SS statements are not in its repository.
    "SS": DatasetSpec(labeler="rule", rules="SS", elephant_released=False),
}


def rule_set(dataset: str) -> str:
    """The rule set that labels ``dataset``; a KeyError for a judged dataset is a bug."""
    rules = DATASETS[dataset].rules
    if rules is None:
        raise KeyError(f"dataset {dataset!r} is labelled by the judge, not by rules")
    return rules


def judged(dataset: str) -> bool:
    """Whether the LLM judge labels ``dataset``."""
    return DATASETS[dataset].labeler == "judge"


def rule_datasets() -> list[str]:
    """The datasets labelled by rules, in registry order."""
    return [d for d, s in DATASETS.items() if s.labeler == "rule"]


def labeling_summary() -> str:
    """How each dataset is labelled, for help texts: "rules for A and B, the judge for C"."""

    def names(ds: list[str]) -> str:
        return " and ".join(ds)

    judge = [d for d in DATASETS if judged(d)]
    return f"rules for {names(rule_datasets())}, the judge for {names(judge)}"
