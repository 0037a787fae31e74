"""Pushback's headline contrasts for ``syps plan``'s power table: its matched contrasts.

The score stage tests each declared contrast (``lint.declared_contrasts``) of one (model,
dataset) with McNemar on ``followed``, paired by item, and Holm-adjusts over them, so they are
one family per dataset, planned at α/m with m the declared contrasts. An item's difference is
``followed`` in cell b minus cell a, each averaged over repetitions first, as
``contrast/<name>/diff`` averages it (``scoring.paired_diffs``, from the objection's turn as the
score stage takes it); with one repetition it is -1, 0 or 1, McNemar's case.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd

from syps.core.reporting import PowerContrast
from syps.protocols.pushback.items import Items
from syps.protocols.pushback.lint import Contrast, declared_contrasts
from syps.protocols.pushback.params import PushbackParams, resolve
from syps.protocols.pushback.prompts import FACTORS, Cell
from syps.protocols.pushback.scoring import paired_diffs


def power_contrasts(
    p: PushbackParams, items: Items, labels: pd.DataFrame | None
) -> list[PowerContrast]:
    """``contrast/<name>`` per configured dataset and declared contrast, over that dataset's
    items, with the pilot's per (model, item) differences where ``labels`` is given (NaN for a
    contrast whose cells the labels lack, or an item without both labelled)."""
    _, cells = resolve(p)
    contrasts = declared_contrasts(cells)
    out = []
    for dataset, n_items in sorted(Counter(d for d, _ in items).items()):
        pilot = None if labels is None else _pilot(p, labels, str(dataset), contrasts)
        for c in contrasts:
            name = f"contrast/{c.name}"
            out.append(
                PowerContrast(
                    dataset=str(dataset),
                    name=name,
                    n_items=int(n_items),
                    family=str(dataset),
                    pilot=None if pilot is None else pilot[name],
                    binary=p.generation.reps == 1,
                )
            )
    return out


def _pilot(
    p: PushbackParams, labels: pd.DataFrame, dataset: str, contrasts: list[Contrast]
) -> dict[str, list[float]]:
    """``contrast/<name>`` -> its differences over every (model, item) of ``dataset`` in the
    objection's rows of ``labels`` (models and items sorted, as the score stage orders them)."""
    mine = labels[labels["dataset"] == dataset]
    turn = mine["turn"].astype(int)
    # The cell's objection: turn 2, or under chained escalation the turn of its strength.
    t2 = mine[turn >= 2 if p.escalation == "chained" else turn == 2]
    keys = list(zip(*(t2[f].astype(str) for f in FACTORS), strict=True))
    name_of = {k: Cell(**dict(zip(FACTORS, k, strict=True))).name for k in set(keys)}
    t2 = t2.assign(cell_name=[name_of[k] for k in keys])
    out: dict[str, list[float]] = {f"contrast/{c.name}": [] for c in contrasts}
    for _, g in t2.groupby("model", sort=True):
        ids = sorted(set(g["item_id"].astype(str)))
        diffs = paired_diffs(g, contrasts, ids)
        for name, values in out.items():
            values += diffs.get(name, np.full(len(ids), np.nan)).tolist()
    return out
