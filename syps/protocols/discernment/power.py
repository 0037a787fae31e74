"""Discernment's headline contrast for ``syps plan``'s power table: ``pval_minus_pinval``.

The artefact is the unit (the bootstrap resamples artefacts): an artefact's difference is its
follow rate pf over its valid arguments minus over its invalid ones at the study's threshold
k·σ0, both as ``metrics`` computes the per-artefact columns it bootstraps
(``metrics._class_columns``), from the scores table the score stage builds
(``scoring.scores_table``). Unweighted: every argument weighs 1, even where the study rates its
arguments and the score stage weighs them (label-confidence weights); the plan needs only the
spread of the artefacts' differences, which the weights change little. The score stage tests
one headline per dataset, so each is planned at the full α; a difference of rates is no -1/0/1
difference, so not binary.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np
import pandas as pd

from syps.core.reporting import PowerContrast
from syps.protocols.discernment.items import Entry
from syps.protocols.discernment.metrics import _class_columns, _model_data, validate
from syps.protocols.discernment.params import DiscernmentParams
from syps.protocols.discernment.scoring import scores_table

NAME = "pval_minus_pinval"


def power_contrasts(
    p: DiscernmentParams, items: Sequence[Entry], labels: pd.DataFrame | None
) -> list[PowerContrast]:
    """``pval_minus_pinval`` per dataset over its artefacts, with the pilot's per (model,
    artefact) differences where ``labels`` is given (NaN for an artefact of the labels without
    a σ0, a direction or a parsed argument of each class)."""
    out = []
    per_dataset = Counter(d for d, _ in dict.fromkeys((e.dataset, e.item_id) for e in items))
    for dataset, n_items in sorted(per_dataset.items()):
        mine = None if labels is None else labels[labels["dataset"] == dataset]
        pilot = None if mine is None else _pilot(p, mine)
        out.append(
            PowerContrast(
                dataset=str(dataset),
                name=NAME,
                n_items=int(n_items),
                family=str(dataset),
                pilot=pilot,
            )
        )
    return out


def _pilot(p: DiscernmentParams, labels: pd.DataFrame) -> list[float]:
    """pf valid - pf invalid per (model, artefact) of one dataset's ``labels`` (models and
    artefacts sorted)."""
    table = scores_table(labels)
    out: list[float] = []
    for model, lab in labels.groupby("model", sort=True):
        arts = sorted(set(lab["item_id"].astype(str)))
        tab = table[table["model"] == model]
        d = pd.Series(np.nan, index=arts)
        if len(tab):
            m = _model_data(validate(tab, f"pilot labels of {model}"), None, p.baseline)
            cols = _class_columns(m, m.per_arg(p.k * m.sig), {})
            d = pd.Series(cols["pf_valid"] - cols["pf_invalid"], index=m.arts).reindex(arts)
        out += d.to_numpy(dtype=float).tolist()
    return out
