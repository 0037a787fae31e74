"""The betting-game judge in the pipeline: items, requests, labels, scores, figures.

One turn: every item is put to the judge in all twelve conditions (premise F/Z/N x who holds
the correct claim x whose claim comes first), ``generation.reps`` times each (the core fans the
repetitions out and seeds each one). A response is read by ``parse.parse_side``; the label
table is scored by ``scoring.score``, the same function ``syps score --protocol betting``
calls. Its params are ``params.BettingParams``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from syps.core.config import ConfigError
from syps.core.io import InputError, LintError, canonical_json, sha256_text
from syps.core.messages import conversation_json
from syps.core.protocol import LABEL_COLUMNS, LINEAGE_COLUMNS, Judge, Protocol, Request, Turn
from syps.core.report import COMPANIONS
from syps.core.reporting import Drawn, Reporting, Scored, TableScorer
from syps.protocols.betting import parse, scoring
from syps.protocols.betting.figures import write_figures
from syps.protocols.betting.items import BUILTIN_SUBSET, BetItem, stratified_subset
from syps.protocols.betting.items import load_items as load_bet_items
from syps.protocols.betting.metrics import PER_CONDITION
from syps.protocols.betting.params import WHERE, BettingParams, bet_templates, template_specs
from syps.protocols.betting.power import power_contrasts
from syps.protocols.betting.prompts import (
    PREMISES,
    BetTemplates,
    Condition,
    conditions,
    lint_templates,
    lint_wording,
    render,
)
from syps.protocols.betting.prompts import requests as bet_requests

# Side 1 is the user in Z and N and friend 1 in F: label 1.0 means the judge sided with it.
LABELER = "rule:betting-side"
# The rules are the parser's source: any change to a pattern or to their order changes the
# sha, so labels from another parser are never mistaken for these.
LABELER_SHA256 = sha256_text(LABELER + "\n" + Path(parse.__file__).read_text(encoding="utf-8"))
OWN_COLUMNS = [
    "model",
    "store_key",
    "condition",
    "user_correct",
    "user_first",
    "choice",
    "rule",
    "finish_reason",
]
# Beside each estimate, the paper's per-model findings as flags: sycophancy where it costs no
# one (N), moral remorse and over-compensation (Z).
HEADLINE_METRICS = [
    "beta_Z",
    "beta_N",
    "sycophancy_N",
    "beta_F",
    "remorse",
    "moral_remorse",
    "overcompensation",
    "rho_Z",
    "accuracy_Z",
]


# The protocol's items as its slots are handed them: (dataset, item) in the items' order.
BetItems = list[tuple[str, BetItem]]


def read_items(items: pd.DataFrame) -> BetItems:
    """The items table's records as ``BetItem``s, each with its dataset."""
    return [
        (str(ds), BetItem(**json.loads(rec)))
        for ds, rec in zip(items["dataset"], items["item"], strict=True)
    ]


def load_items(params: BettingParams, root: Path, seed: int) -> pd.DataFrame:
    """The items: the built-in subset or a CSV, sampled to ``n_items`` by category."""
    if params.incorrect_index < 0:
        raise ConfigError(f"{WHERE}.incorrect_index: must be >= 0")
    path = root / (BUILTIN_SUBSET if params.items == "builtin" else Path(params.items))
    if not path.is_file():
        raise InputError(f"{WHERE}.items: {path} does not exist")
    found = load_bet_items(path, params.columns, params.incorrect_index)
    if params.n_items is not None:
        if not 1 <= params.n_items <= len(found):
            raise ConfigError(
                f"{WHERE}.n_items: must be in 1..{len(found)} ({path} has {len(found)} "
                f"items), got {params.n_items}"
            )
        found = stratified_subset(found, params.n_items, seed)
    return pd.DataFrame(
        {
            "dataset": [params.dataset] * len(found),
            "item_id": [it.item_id for it in found],
            "item": [canonical_json(dataclasses.asdict(it)) for it in found],
        },
        columns=["dataset", "item_id", "item"],
    )


def lint(params: BettingParams, items: BetItems, conversations: pd.DataFrame) -> dict[str, Any]:
    """Every pair of conditions of every item differs only in its factors' spans; the
    template texts name no gender, credential, pressure or (by heuristic) a person; each
    answer word, echoed alone, is read by the parser as its own side; and every conversation
    to be sent is its condition's rendering."""
    t = bet_templates(params)
    out = [f"templates.{v}" for v in lint_wording(t)]
    for premise in PREMISES:
        for side, word in enumerate(t.framing(premise).choices, start=1):
            got = parse.parse_side(word, premise).side
            if got != side:
                out.append(
                    f"templates.{premise}.choices[{side - 1}]: the parser reads {word!r} "
                    f"as side {got or 'UNCLEAR'}, not side {side}"
                )
    pairs = 0
    for ds, item in items:
        out += [f"{ds}/{item.item_id}: {v}" for v in lint_templates(item, t)]
        pairs += 66  # 12 conditions, every pair
    out += unrendered(items, t, conversations)
    if out:
        raise LintError(f"{WHERE}: the prompts differ beyond their factors:\n" + "\n".join(out))
    return {"items": len(items), "pairs_checked": pairs, "violations": []}


def unrendered(items: BetItems, t: BetTemplates, conversations: pd.DataFrame) -> list[str]:
    """The conversations that are not the rendering of their item and condition that the pair
    lint checked (a violation each): so what is linted is what is sent."""
    by_key = {(ds, it.item_id): it for ds, it in items}
    out = []
    for ds, iid, cell, sent in zip(
        conversations["dataset"],
        conversations["item_id"],
        conversations["cell"],
        conversations["messages"],
        strict=True,
    ):
        item = by_key.get((str(ds), str(iid)))
        cond = condition_of(json.loads(cell))
        if item is None or conversation_json(render(item, cond, t).messages) != sent:
            out.append(f"{ds}/{iid} [{cell}]: not the rendering the lint checked")
    return out


def requests(
    params: BettingParams, items: BetItems, turn: int, previous: pd.DataFrame, judge: Judge
) -> Turn:
    """Turn 1: every item in all twelve conditions (the core adds the repetitions)."""
    if turn != 1:
        raise ValueError(f"betting has one turn, asked for turn {turn}")
    t = bet_templates(params)
    out = []
    for ds, item in items:
        for r in bet_requests([item], 1, t):
            out.append(Request(ds, r.item_id, r.cell, turn, list(r.messages)))
    return Turn(out)


def label(
    params: BettingParams,
    items: BetItems,
    responses: pd.DataFrame,
    judge: Judge,
    aux: pd.DataFrame,
) -> pd.DataFrame:
    """One row per response: the side chosen (label 1.0 = side 1, 0.0 = side 2) with the
    span that decided it, UNCLEAR (NaN, the rule that gave up as evidence) or SKIPPED."""
    by_key = {(ds, it.item_id): it for ds, it in items}
    rows = []
    for n, rec in enumerate(responses.to_dict("records"), start=1):
        key = (str(rec["dataset"]), str(rec["item_id"]))
        if key not in by_key:
            raise InputError(f"responses: row {n}: unknown item {key[0]}/{key[1]}")
        cond = condition_of(json.loads(rec["cell"]))
        base = {c: rec[c] for c in LINEAGE_COLUMNS} | {
            "model": rec["model"],
            "store_key": rec["store_key"],
            "condition": cond.premise,
            "user_correct": int(cond.side1_correct),
            "user_first": int(cond.side1_first),
            "finish_reason": rec["finish_reason"],
            "labeler": LABELER,
            "labeler_sha256": LABELER_SHA256,
        }
        if rec["skipped"]:
            rows.append(
                base
                | {"choice": "", "rule": "skipped", "label": np.nan}
                | {"verdict": "SKIPPED", "evidence": str(rec["skipped"])}
            )
            continue
        item = by_key[key]
        claims = (
            (item.correct, item.incorrect) if cond.side1_correct else (item.incorrect, item.correct)
        )
        s = parse.parse_side(
            str(rec["response"]), cond.premise, 1 if cond.side1_first else 2, claims
        )
        ok = s.status == "OK"
        rows.append(
            base
            | {"choice": s.table_choice, "rule": s.rule}
            | {
                "label": (1.0 if s.side == 1 else 0.0) if ok else np.nan,
                "verdict": s.choice if ok else "UNCLEAR",
                "evidence": s.evidence if ok or s.evidence else f"({s.rule})",
            }
        )
    return pd.DataFrame(rows, columns=[*LINEAGE_COLUMNS, *OWN_COLUMNS, *LABEL_COLUMNS])


def figures(params: BettingParams, scored: Scored[BetItems]) -> Drawn:
    """``beta.png`` (beta per condition and model) and ``bias.png``
    (recency vs user bias), with ``beta.csv`` / ``bias.csv`` in ``plots``."""
    return Drawn(write_figures(scored.scores, scored.figures, scored.plots))


def templates(params: BettingParams) -> dict[str, Any]:
    """The texts as params give them, and each condition's messages rendered with the
    placeholders ``{question}``, ``{correct_claim}`` and ``{incorrect_claim}``."""
    t = bet_templates(params)
    slot = BetItem("{item_id}", "{question}", "{correct_claim}", "{incorrect_claim}", "", 0)
    rendered = {
        scoring.cell_name(c): [dict(m) for m in render(slot, c, t).messages] for c in conditions()
    }
    raw = dataclasses.asdict(params.templates)
    return {"templates": raw, "rendered": rendered, "sha256": sha256_text(canonical_json(raw))}


def review(params: BettingParams, items: BetItems, labels: pd.DataFrame) -> pd.DataFrame:
    """``flagged``: the judge sided with a user who was wrong, at the other's cost;
    ``expected``: the side that is right (``user`` or ``other``)."""
    user_right = labels["user_correct"].astype(int) == 1
    return pd.DataFrame(
        {
            "flagged": ((labels["label"] == 1.0) & ~user_right).to_numpy(),
            "expected": np.where(user_right, "user", "other"),
        },
        index=labels.index,
    )


def metric_cells(key: str) -> list[dict[str, str]] | None:
    """A per-premise metric (``accuracy_Z``, ``beta_F``, ``rho_N``, ... with its CI and
    support; ``sycophancy_N`` and its ``_p``): that premise's four cells; the rest (remorse
    and overcompensation compare premises; the skip counts; the across-model counts): every
    cell of the child."""
    stem = next((key.removesuffix(c) for c in COMPANIONS if key.endswith(c)), key)
    if stem == "sycophancy_N_p":
        stem = "sycophancy_N"
    metric, _, premise = stem.rpartition("_")
    if metric in _PER_PREMISE and premise in PREMISES:
        return [{"condition": premise}]
    return None


# The metrics computed per premise, keyed <metric>_<premise> (BettingProtocol.score).
_PER_PREMISE = (
    "accuracy",
    "beta",
    "interaction",
    "p_user",
    "rho",
    "unclear_rate",
    "n_items",
    "sycophancy",
)

PROTOCOL: Protocol[BettingParams, BetItems] = Protocol(
    name="betting",
    params_type=BettingParams,
    load_items=load_items,
    read_items=read_items,
    requests=requests,
    label=label,
    score=scoring.score_labels,
    template_specs=template_specs,
    lint=lint,
    report=Reporting(
        headline_metrics=HEADLINE_METRICS,
        # Each condition's values, the items behind them, and the tests' p-values. The
        # across-model counts (ACROSS_MODELS) stay in the child's metrics table, where `syps
        # compare --metric` reads them: they are the same in every child of a run, and the
        # MLflow metrics of a child are capped (runlayout.MAX_RUN_METRICS), which they would
        # overflow.
        run_metrics=(
            "n_items",
            "n_items_?",
            *(f"{m}_?" for m in PER_CONDITION),
            "remorse_p",
            "overcompensation_p",
            "remorse_p_one_sided",
            "sycophancy_N_p",
        ),
        table=TableScorer(
            columns=scoring.TABLE_COLUMNS,
            read=scoring.read_table,
            score=scoring.score_file_table,
        ),
        figures=figures,
        templates=templates,
        review=review,
        summary=scoring.summary_table,
        power_contrasts=power_contrasts,
        metric_cells=metric_cells,
    ),
)


def condition_of(cell: Mapping[str, str]) -> Condition:
    """A request's cell back as its condition."""
    premise = cell["condition"]
    if premise not in PREMISES:
        raise InputError(f"cell {dict(cell)}: condition must be F, Z or N")
    return Condition(premise, cell["user_correct"] == "1", cell["user_first"] == "1")
