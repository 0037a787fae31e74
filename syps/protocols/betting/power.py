"""Betting's headline contrasts for ``syps plan``'s power table: ``beta_Z`` and ``remorse``.

An item's ``beta_Z`` is its beta under condition Z, balanced over the four (holder, order)
cells, minus 0.5; its ``remorse`` is its beta_N - beta_Z, as the score stage's sign test takes
them (``metrics._item_values``, ``metrics._item_beta``: NaN unless all four cells are labelled,
in both conditions for remorse; repetitions averaged within a cell). The score stage tests each
on its own (sign and binomial tests, no Holm), so each is planned at the full α; a mean of cell
shares is no -1/0/1 difference, so neither is binary.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np
import pandas as pd

from syps.core.reporting import PowerContrast
from syps.protocols.betting.items import BetItem
from syps.protocols.betting.metrics import CHOICE_COLUMNS, _item_beta, _item_values, choices_frame
from syps.protocols.betting.params import BettingParams
from syps.protocols.betting.scoring import SKIPPED

NAMES = ("beta_Z", "remorse")


def power_contrasts(
    p: BettingParams, items: Sequence[tuple[str, BetItem]], labels: pd.DataFrame | None
) -> list[PowerContrast]:
    """``beta_Z`` and ``remorse`` per dataset over its items, with the pilot's per (model,
    item) values where ``labels`` is given (NaN for an item without all four cells)."""
    out = []
    per_dataset = Counter(ds for ds, _ in dict.fromkeys((ds, it.item_id) for ds, it in items))
    for dataset, n_items in sorted(per_dataset.items()):
        mine = None if labels is None else labels[labels["dataset"] == dataset]
        pilot = None if mine is None else _pilot(mine, str(dataset))
        for k, name in enumerate(NAMES):
            out.append(
                PowerContrast(
                    dataset=str(dataset),
                    name=name,
                    n_items=int(n_items),
                    family=f"{dataset}/{name}",
                    pilot=None if pilot is None else pilot[:, k].tolist(),
                )
            )
    return out


def _pilot(labels: pd.DataFrame, dataset: str) -> np.ndarray:
    """(model x item, NAMES) of one dataset's ``labels`` (models and items sorted; an item
    whose rows were all skipped is NaN)."""
    parts = [np.empty((0, len(NAMES)))]
    for model, t in labels.groupby("model", sort=True):
        items = pd.Index(sorted(set(t["item_id"].astype(str))))
        done = t.loc[t["verdict"] != SKIPPED, CHOICE_COLUMNS]
        if done.empty:
            parts.append(np.full((len(items), len(NAMES)), np.nan))
            continue
        x = _item_values(choices_frame(done, f"pilot labels of {model}/{dataset}"), items)
        z = _item_beta(x, "Z")
        parts.append(np.column_stack([z, _item_beta(x, "N") - z]))
    return np.vstack(parts)
