"""The pushback protocol as the conversation core runs it (``protocols.pushback`` in params).

Two turns per (item, cell, repetition), and more where the conversation goes on: the
unpressured answer, then the objection (``rounds`` above 1: again after every answer; under
``escalation: chained``: the next strength's objection). ``turns`` builds each turn's requests
and says why a child is skipped; its docstring tells the turns in full.

Its params are ``params.PushbackParams``; the steps live in ``params`` and ``items`` (items),
``lint`` (lint), ``turns`` (requests), ``labels`` (labels), ``scoring`` and ``figures``.
"""

from __future__ import annotations

import sys
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import pandas as pd

from syps.core.io import LintError, canonical_json, sha256_text
from syps.core.protocol import Protocol
from syps.core.reporting import Drawn, Reporting, Scored, TableOption, TableScorer
from syps.protocols.pushback.crossmodel import summary
from syps.protocols.pushback.figures import draw
from syps.protocols.pushback.items import Items, McqItem, items_of, items_table
from syps.protocols.pushback.judges import GRADER, STANCE
from syps.protocols.pushback.labels import label
from syps.protocols.pushback.lint import (
    checklist,
    checklist_lines,
    declared_contrasts,
    lint,
    lint_lines,
)
from syps.protocols.pushback.params import (
    WHERE,
    PushbackParams,
    history,
    load_source,
    resolve,
    successors,
    template_specs,
)
from syps.protocols.pushback.power import power_contrasts
from syps.protocols.pushback.prompts import (
    PROBE,
    baseline_cell,
    first_turn,
    objection_text,
    pushback_turn,
)
from syps.protocols.pushback.scoring import (
    TABLE_COLUMNS,
    read_table,
    score_file_table,
    score_labels,
)
from syps.protocols.pushback.turns import n_turns, requests


def load_items(params: PushbackParams, root: Path, seed: int) -> pd.DataFrame:
    """Each configured dataset's items, the first ``limit`` of each."""
    return items_table(
        it for s in params.datasets for it in load_source(s, root, seed)[: params.limit]
    )


def lint_design(
    params: PushbackParams, items: Items, conversations: pd.DataFrame
) -> dict[str, Any]:
    """The lint report; ``checklist`` is the audit's three checks, pass or fail, with the
    contrasts that fail each and why (``lint.checklist``). Under ``lint: error`` a flagged
    design raises, with the report (so ``lint.json`` holds the checklist either way). The
    contrasts are compared on each item's rendered turns (``lint.lint``), the objection turns
    with a placeholder where the model's earlier answer goes; ``conversations`` (the first
    turn, preemptive objections included) is what generate sends."""
    templates, cells = resolve(params)
    contrasts = declared_contrasts(cells)
    found = lint(contrasts, items.values(), templates, history(params))
    lines = lint_lines(found)
    checks = checklist(found)
    report = {
        "protocol": "pushback",
        "preset": params.preset,
        "status": "flagged" if lines else "pass",
        "n_items": len(items),
        "cells": [c.name for c in cells],
        "contrasts": [{"name": c.name, "factor": c.factor} for c in contrasts],
        "violations": lines,
        "checklist": checks,
    }
    if lines and params.lint == "error":
        raise LintError(
            "\n".join(
                [
                    *lines,
                    *checklist_lines(checks),
                    f"{WHERE}.lint: these contrasts are confounded; to run the design "
                    "anyway (e.g. to reproduce SycEval) set lint: warn, and the flagged "
                    "contrasts carry confounded = 1 in every metric table and figure",
                ]
            ),
            report,
        )
    for line in lines:
        print(f"WARNING pushback lint (lint: warn): {line}", file=sys.stderr)
    for line in checklist_lines(checks) if lines else []:
        print(f"pushback lint checklist: {line}", file=sys.stderr)
    return report


def figures(params: PushbackParams, scored: Scored[Items]) -> Drawn:
    """The follow rates per cell, the matched contrasts and, over rounds, the follow curve."""
    templates, cells = resolve(params)
    contrasts = declared_contrasts(cells)
    return Drawn(draw(scored.scores, cells, contrasts, params.margin, scored.figures, scored.plots))


def templates(params: PushbackParams) -> dict[str, Any]:
    """The template set, and every cell's turns rendered with a placeholder two-option item
    whose objection asserts B, a placeholder where each earlier answer goes."""
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


def review(params: PushbackParams, items: Items, labels: pd.DataFrame) -> pd.DataFrame:
    """``flagged``: a cave, an answer that followed the objection; ``expected``: the item's
    correct answer (a multiple-choice item's letter; "" for a free-form one)."""
    correct = {k: it.correct if isinstance(it, McqItem) else "" for k, it in items.items()}
    keys = zip(labels["dataset"].astype(str), labels["item_id"].astype(str), strict=True)
    return pd.DataFrame(
        {
            "flagged": (labels["followed"] == 1.0).to_numpy(),
            "expected": [correct.get(k, "") for k in keys],
        },
        index=labels.index,
    )


HEADLINE_METRICS = [
    "follow_rate",
    "initial_accuracy",
    # SycEval's headline, pooled over every cell's objection.
    "sycophancy_rate",
    "progressive_rate",
    "regressive_rate",
    "effect/naming/unnamed-vs-named",
    "effect/placement/in_context-vs-preemptive",
    "effect/format/objection-vs-question",
    "effect/format/objection-vs-absent",
    # Sustained pressure (rounds > 1 only; absent otherwise, and then shown nowhere).
    "tof",
    "nof",
    "flip_back",
]

PROTOCOL: Protocol[PushbackParams, Items] = Protocol(
    name="pushback",
    params_type=PushbackParams,
    load_items=load_items,
    read_items=items_of,
    requests=requests,
    label=label,
    score=score_labels,
    turns=n_turns,
    template_specs=template_specs,
    lint=lint_design,
    # Turn-2 rep r continues turn-1 rep r, so the protocol sets ``rep`` itself.
    fan_out_reps=False,
    report=Reporting(
        headline_metrics=HEADLINE_METRICS,
        # The per-cell rates are in the metrics table (and the plots); and, with rounds > 1,
        # the follow curve and the conversations ended early; with two or more models, the
        # audit's cross-model test: the format placement effect's difference from each other
        # model's, Holm-adjusted. A child logs at most 60 MLflow metrics and the stage counts
        # come last, so the other cross-model keys stay in its metrics table.
        run_metrics=(
            "n_items",
            "round/*/follow_rate",
            "n_ended",
            "xmodel/*/effect/format/objection-vs-question/diff",
            "xmodel/*/effect/format/objection-vs-question/p_holm",
        ),
        table=TableScorer(
            columns=TABLE_COLUMNS,
            read=read_table,
            score=score_file_table,
            options={"margin": TableOption("equivalence (TOST) margin [0.05]", float)},
        ),
        judges=(GRADER, STANCE),
        figures=figures,
        templates=templates,
        review=review,
        summary=summary,
        power_contrasts=power_contrasts,
    ),
)
