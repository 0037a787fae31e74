"""SyPS's headline contrasts for ``syps plan``'s power table: each cue's delta against P0.

An item's difference for cue k is its label under the cue (averaged over the cue's wordings
where it has several) minus its label under P0, as ``delta_<cue>`` averages it
(``stats.pooled_differences``): a paired binary contrast, McNemar's with one wording. The score
stage tests each cue on its own (no Holm family), so each is planned at the full α; a cue with
one wording is binary (its difference -1, 0 or 1), one with several is a mean over them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from syps.core.reporting import PowerContrast
from syps.protocols.cues.metrics import label_matrix
from syps.protocols.cues.params import CuesParams
from syps.protocols.cues.scoring import variants_of
from syps.protocols.cues.stats import by_cue, pooled_differences


def power_contrasts(
    p: CuesParams, items: pd.DataFrame, labels: pd.DataFrame | None
) -> list[PowerContrast]:
    """``delta_<cue>`` per configured dataset and cue but P0, over that dataset's items, with
    the pilot's per (model, item) pooled differences where ``labels`` has the dataset."""
    out = []
    n_items = items.groupby("dataset")["item_id"].nunique()
    for dataset, variants in variants_of(p).items():
        if dataset not in n_items.index:
            continue
        groups = by_cue(variants)
        cues = [c for c in groups if c != variants[0]]
        pilot = _pilot(labels, dataset, variants) if labels is not None else None
        for k, cue in enumerate(cues):
            out.append(
                PowerContrast(
                    dataset=dataset,
                    name=f"delta_{cue}",
                    n_items=int(n_items[dataset]),
                    family=f"{dataset}/delta_{cue}",
                    pilot=None if pilot is None else pilot[:, k].tolist(),
                    binary=len(groups[cue]) == 1,
                )
            )
    return out


def _pilot(labels: pd.DataFrame, dataset: str, variants: list[str]) -> np.ndarray:
    """(model x item, cues but P0): the pooled differences of every model's items."""
    mine = labels[(labels["dataset"] == dataset) & labels["variant"].isin(variants)]
    parts = [
        pooled_differences(label_matrix(sub, variants), variants)
        for _, sub in mine.groupby("model", sort=True)
    ]
    return np.vstack(parts) if parts else np.empty((0, len(by_cue(variants)) - 1))
