"""Adaptive pressure in the pipeline: scenarios, turns, labels, scores, figures.

Turn 1 asks every scenario's question; each round after it is a simulated user's turn (the
core's ``simulator`` role, through the response store) and the target's answer
(``turns``). The label table (``labels``) is scored by ``scoring.score``, the function
``syps score --protocol adaptive`` calls too. Its params are ``params.AdaptiveParams``.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pandas as pd

from syps.core.io import InputError, atomic_write, canonical_json
from syps.core.plotting import pyplot, save
from syps.core.protocol import Protocol, ScoreSettings
from syps.core.report import Scores
from syps.core.reporting import Drawn, Reporting, Scored, TableScorer
from syps.protocols.adaptive import scoring
from syps.protocols.adaptive.judges import JUDGES
from syps.protocols.adaptive.labels import label
from syps.protocols.adaptive.params import AdaptiveParams, check, template_specs
from syps.protocols.adaptive.power import power_contrasts
from syps.protocols.adaptive.scenarios import (
    BUILTIN,
    BUILTIN_MCQ,
    Scenario,
    read_mcq,
    read_scenarios,
    read_truthfulqa,
)
from syps.protocols.adaptive.turns import requests

Scenarios = dict[str, Scenario]
HEADLINE_METRICS = (
    "capitulation/toward_wrong",
    "capitulation/frozen",
    "capitulation/neutral",
    "capitulation/toward_right",
    "toward_wrong_minus_frozen",
    "toward_wrong_minus_neutral",
    "flagged/toward_wrong",
    "opening_correct",
)


# What each ``scenarios`` value reads: a shipped file and its layout, else the path given.
SHIPPED = {"builtin": (BUILTIN, "truthfulqa"), "builtin-mcq": (BUILTIN_MCQ, "mcq")}
MCQ_FIELDS = ("options", "correct", "wrong")


def load_items(p: AdaptiveParams, root: Path, seed: int) -> pd.DataFrame:
    """The scenarios: a shipped set, a TruthfulQA CSV, a scenario file or a multiple-choice
    CSV, the first ``limit`` of them. A scenario that is not multiple-choice keeps no empty
    option fields in its record."""
    check(p)
    rel, layout = SHIPPED.get(p.scenarios, (Path(p.scenarios), p.layout))
    path = root / rel
    if not path.is_file():
        raise InputError(f"protocols.adaptive.scenarios: {path} does not exist")
    if layout == "truthfulqa":
        found = read_truthfulqa(path, p.dataset)
    elif layout == "mcq":
        found = read_mcq(path, p.dataset, seed)
    else:
        found = read_scenarios(path, p.dataset)
    found = found[: p.limit] if p.limit is not None else found
    records = [
        {k: v for k, v in dataclasses.asdict(s).items() if s.options or k not in MCQ_FIELDS}
        for s in found
    ]
    return pd.DataFrame(
        {
            "dataset": [s.dataset for s in found],
            "item_id": [s.scenario_id for s in found],
            "item": [canonical_json(r) for r in records],
        },
        columns=["dataset", "item_id", "item"],
    )


def read_items(items: pd.DataFrame) -> Scenarios:
    """The items table's records as scenarios, by id."""
    out = {}
    for rec in items["item"]:
        d = json.loads(rec)
        d |= {"facts": tuple(d["facts"]), "options": tuple(d.get("options", ()))}
        out[d["scenario_id"]] = Scenario(**d)
    return out


def score(p: AdaptiveParams, labels: pd.DataFrame, settings: ScoreSettings) -> Scores:
    """``score@adaptive``: ``scoring.score``."""
    return scoring.score(labels, settings)


def figures(p: AdaptiveParams, scored: Scored[Scenarios]) -> Drawn:
    """``survival.png``: the share of conversations still holding by round, per arm (one
    panel per model and dataset), from ``survival.csv`` in ``plots``."""
    table = scoring.survival_table(scored.labels)
    atomic_write(scored.plots / "survival.csv", lambda f: table.to_csv(f, index=False))
    plt = pyplot()
    groups = list(table.groupby(["model", "dataset"], sort=True))
    fig, axes = plt.subplots(
        1, max(len(groups), 1), figsize=(5 * max(len(groups), 1), 3.5), squeeze=False
    )
    for ax, ((model, dataset), g) in zip(axes[0], groups, strict=False):
        for arm, a in g.groupby("arm", sort=True):
            ax.step([0, *a["turn"]], [1.0, *a["survival"]], where="post", label=str(arm))
        ax.set(title=f"{model} / {dataset}", xlabel="round", ylabel="still holding", ylim=(0, 1.05))
        ax.legend(fontsize=7)
    out = scored.figures / "survival.png"
    save(fig, out)
    return Drawn([out])


PROTOCOL: Protocol[AdaptiveParams, Scenarios] = Protocol(
    name="adaptive",
    params_type=AdaptiveParams,
    load_items=load_items,
    read_items=read_items,
    requests=requests,
    label=label,
    score=score,
    turns=lambda p: 1 + 2 * p.max_turns,
    template_specs=template_specs,
    uses_simulator=True,
    report=Reporting(
        headline_metrics=HEADLINE_METRICS,
        table=TableScorer(
            columns=", ".join(scoring.TABLE_COLUMNS),
            read=scoring.read_table,
            score=scoring.score_file_table,
        ),
        figures=figures,
        judges=JUDGES,
        power_contrasts=power_contrasts,
    ),
)
