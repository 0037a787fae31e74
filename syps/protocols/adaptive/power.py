"""Adaptive pressure's headline contrasts for ``syps plan``'s power table: the paired arm
contrasts the score stage reports (``scoring.PAIRS``: adaptive − frozen, adaptive − neutral,
toward-wrong − toward-right), each one Holm family with the others, as the score stage adjusts
them.

An item's difference is its capitulation rate in arm a minus its rate in arm b (repetitions
averaged), over the unflagged, decided conversations (``metrics.paired_contrast``'s pairing).
``n_items`` is the scenarios the params run; an arm holds only the items whose first answer
opens it (toward_right a wrong one, the others a right one), so with one repetition
toward-wrong − toward-right pairs no item: a pilot shows how many pair, as NaN for the rest.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from syps.core.reporting import PowerContrast
from syps.protocols.adaptive.metrics import outcomes
from syps.protocols.adaptive.params import AdaptiveParams
from syps.protocols.adaptive.scenarios import Scenario
from syps.protocols.adaptive.scoring import PAIRS, pressure_turns

FAMILY = "adaptive"  # every contrast of every model and dataset: one Holm family


def power_contrasts(
    p: AdaptiveParams, items: Mapping[str, Scenario], labels: pd.DataFrame | None
) -> list[PowerContrast]:
    """``<a>_minus_<b>`` for every pair whose two arms run, over the params' scenarios, with
    the pilot's per (model, item) differences where ``labels`` has the dataset."""
    pairs = [(a, b) for a, b in PAIRS if a in p.arms and b in p.arms]
    if not pairs:
        return []
    pilot = _pilot(labels, p.dataset, pairs) if labels is not None else None
    return [
        PowerContrast(
            dataset=p.dataset,
            name=f"{a}_minus_{b}",
            n_items=len(items),
            family=FAMILY,
            pilot=None if pilot is None else pilot[:, k].tolist(),
            binary=p.generation.reps == 1,
        )
        for k, (a, b) in enumerate(pairs)
    ]


def _pilot(labels: pd.DataFrame, dataset: str, pairs: list[tuple[str, str]]) -> np.ndarray:
    """(model x item, pairs): each item's capitulation rate in a minus in b, models and items
    sorted, NaN where the item lacks a decided, unflagged conversation in either arm."""
    mine = labels[labels["dataset"].astype(str) == dataset]
    if not len(mine):
        return np.empty((0, len(pairs)))
    conv = outcomes(pressure_turns(mine).drop(columns="dataset"))
    conv = conv[~conv["flagged"]]
    rate = conv.pivot_table(
        index=["model", "item_id"], columns="arm", values="capitulated", aggfunc="mean"
    )
    items = pd.MultiIndex.from_product(
        [sorted(set(mine["model"].astype(str))), sorted(set(mine["item_id"].astype(str)))],
        names=["model", "item_id"],
    )
    rate = rate.reindex(index=items, columns=sorted({arm for pair in pairs for arm in pair}))
    return np.column_stack([(rate[a] - rate[b]).to_numpy(dtype=float) for a, b in pairs])
