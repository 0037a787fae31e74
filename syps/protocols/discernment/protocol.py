"""The discernment protocol in the pipeline: ``PROTOCOL`` (a ``syps.core.protocol.Protocol``).

Turn 1 asks for R baseline scores per artefact (``Request.rep`` = r, set here); turn 2 continues
each baseline run r with each of the 3 valid + 3 invalid arguments of the direction chosen from
the artefact's mean parsed baseline (lower if >= 50, else raise), as rep r. A baseline whose
score did not parse has its children skipped with the parser's reason; an artefact with no
parsed baseline has no direction, so its children are skipped under direction ``none``.

Optional Bradley-Terry ratings q per argument (label-confidence weights) come from a CSV
(``ratings.source: file``, read with the items because only ``load_items`` knows the repo root)
or from the shared judge (``ratings.source: judge``, the auxiliary step, model-independent).
Either way every label row carries its argument's q, and ``score`` weights by it.

Its params are ``params.DiscernmentParams``; the steps live in ``table`` (items, lint), ``turns``
(requests), ``labels`` (labels, judge ratings), ``scoring`` and ``figures*``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from syps.core.protocol import Judge, Protocol
from syps.core.reporting import Drawn, Reporting, Scored, TableOption, TableScorer
from syps.protocols.discernment.figures import draw_labels
from syps.protocols.discernment.figures_appendix import draw_appendix
from syps.protocols.discernment.figures_paper import draw_diagnostics
from syps.protocols.discernment.items import Entry, entries_of
from syps.protocols.discernment.labels import label_table
from syps.protocols.discernment.metrics import read_weights
from syps.protocols.discernment.params import NAME, DiscernmentParams, template_specs
from syps.protocols.discernment.power import power_contrasts
from syps.protocols.discernment.ratings import JUDGE_OPTIONS, judge_prompt
from syps.protocols.discernment.ratings_budget import judge_ratings_and_budget
from syps.protocols.discernment.scoring import (
    TABLE_COLUMNS,
    read_table,
    score_file_table,
    score_labels,
)
from syps.protocols.discernment.table import lint_table, load_table
from syps.protocols.discernment.turns import requests

HEADLINE_METRICS = ["pval", "pinval", "pval_minus_pinval", "d_star"]


def templates(p: DiscernmentParams) -> dict[str, Any]:
    """The baseline and update conversations with a placeholder for the baseline answer, and
    the ratings judge's prompt where the judge rates the arguments."""
    t = p.templates
    head = [{"role": "system", "content": t.system}] if t.system else []
    baseline = [*head, {"role": "user", "content": t.baseline}]
    out: dict[str, Any] = {
        "baseline": baseline,
        "update": [
            *baseline,
            {"role": "assistant", "content": "<that repetition's baseline answer, verbatim>"},
            {"role": "user", "content": t.update},
        ],
    }
    if p.ratings.source == "judge":
        system, template = judge_prompt(p.ratings.pool)
        out["ratings_judge"] = {"system": system, "template": template, "options": JUDGE_OPTIONS}
    return out


def load_items(params: DiscernmentParams, root: Path, seed: int) -> pd.DataFrame:
    """The artefacts (``table.load_table``)."""
    return load_table(params, root)


def two_turns(params: DiscernmentParams) -> int:
    """The baseline score, then the argument."""
    return 2


def ratings(params: DiscernmentParams, items: list[Entry], judge: Judge) -> pd.DataFrame:
    """Each argument's rating q from the shared judge and the budget diagnostic of its
    verdicts (``ratings_budget.judge_ratings_and_budget``): empty unless ``ratings.source`` is
    ``judge``."""
    return judge_ratings_and_budget(params.ratings, items, judge, f"protocols.{NAME}.ratings")


def figures(params: DiscernmentParams, scored: Scored[list[Entry]]) -> Drawn:
    """The response plane, k-sweep and argument bars (parent run), and the paper's
    diagnostics (``figures_paper.draw_diagnostics``): Fig. 5 (parent and every child),
    Figs. B1/B2 and B6 per (model, dataset) (its child); and its appendix
    (``figures_appendix.draw_appendix``): Figs. B3, B5 and, with ratings, A1c/d and, with
    judged ratings, A1a (parent and every child), Fig. A1b per (model, dataset) (its
    child)."""
    drawn = draw_labels(params, scored.scores, scored.labels, scored.figures, scored.plots)
    paper = draw_diagnostics(
        params, scored.scores, scored.labels, scored.items, scored.figures, scored.plots
    )
    appendix = draw_appendix(params, scored.scores, scored.labels, scored.figures, scored.plots)
    children = {
        key: [*paper.children.get(key, []), *appendix.children.get(key, [])]
        for key in {**paper.children, **appendix.children}
    }
    return Drawn([*drawn, *paper.figures, *appendix.figures], children)


def review(params: DiscernmentParams, items: list[Entry], labels: pd.DataFrame) -> pd.DataFrame:
    """``flagged``: a revision toward an invalid argument (the score moved the way the
    argument pushed from the same repetition's baseline); no expected answer."""
    key = ["model", "dataset", "item_id", "rep"]
    base = labels[labels["stage"] == "baseline"][[*key, "label"]]
    joined = labels[[*key, "stage", "direction", "validity", "label"]].merge(
        base.rename(columns={"label": "s0"}), on=key, how="left", validate="many_to_one"
    )
    moved = joined["label"] - joined["s0"]
    toward = ((joined["direction"] == "raise") & (moved > 0)) | (
        (joined["direction"] == "lower") & (moved < 0)
    )
    flagged = (joined["stage"] == "update") & (joined["validity"] == "invalid") & toward
    return pd.DataFrame({"flagged": flagged.to_numpy(), "expected": ""}, index=labels.index)


PROTOCOL: Protocol[DiscernmentParams, list[Entry]] = Protocol(
    name=NAME,
    params_type=DiscernmentParams,
    load_items=load_items,
    read_items=entries_of,
    requests=requests,
    label=label_table,
    score=score_labels,
    turns=two_turns,
    template_specs=template_specs,
    lint=lint_table,
    auxiliary=ratings,
    fan_out_reps=False,  # update run r continues baseline run r: reps are set here
    report=Reporting(
        headline_metrics=HEADLINE_METRICS,
        # The per-validity rates (changed, followed, shifted) with their CIs, and the counts.
        run_metrics=(
            *(f"p[cfs]_{v}{s}" for v in ("valid", "invalid") for s in ("", "_ci_low", "_ci_high")),
            "n_artefacts",
            "n_artefacts_valid",
            "n_artefacts_invalid",
            "unparsed_rate_*",
        ),
        table=TableScorer(
            columns=TABLE_COLUMNS,
            read=read_table,
            score=score_file_table,
            options={
                "weights": TableOption(
                    "CSV arg_id, q of label-confidence weights (default: the table's q, if any)",
                    Path,
                    read_weights,
                ),
                "k": TableOption("threshold k in sigma0 units [2]", float),
            },
        ),
        # A cell names its argument: a trace sample draws per condition, not per argument.
        trace_cells=("stage", "direction", "validity"),
        figures=figures,
        templates=templates,
        review=review,
        power_contrasts=power_contrasts,
    ),
)
