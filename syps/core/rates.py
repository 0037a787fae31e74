"""What a simple design's ``label`` and ``score`` are made of: a label table from a rule's
verdicts, and a rate with its item-bootstrap CI. The shipped protocols compute richer metrics;
a new single-turn design (docs/adding-a-protocol.md) needs these two."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from syps.core.protocol import LABEL_COLUMNS, LINEAGE_COLUMNS, ScoreSettings
from syps.core.report import Scores
from syps.core.stats import bootstrap_counts, percentile_ci, weighted_means


def rule_labels(
    responses: pd.DataFrame,
    value: Sequence[float],
    evidence: Sequence[str],
    labeler: str,
    labeler_sha256: str,
    verdict: Sequence[str] | None = None,
) -> pd.DataFrame:
    """A label table for ``responses`` (one row each, in order) from a rule's values (NaN:
    UNCLEAR) and the evidence for each: the lineage columns, ``model`` and ``LABEL_COLUMNS``.
    ``verdict`` defaults to the value as a word: ``1``, ``0`` or ``UNCLEAR``."""
    values = [float(v) for v in value]
    if len(values) != len(responses) or len(evidence) != len(responses):
        got = f"{len(values)} values and {len(evidence)} evidence texts"
        raise ValueError(f"rule_labels: {len(responses)} responses, {got}")
    words = [("UNCLEAR" if np.isnan(v) else str(int(v))) for v in values]
    return (
        responses[[*LINEAGE_COLUMNS, "model"]]
        .assign(
            label=values,
            verdict=list(verdict) if verdict is not None else words,
            evidence=list(evidence),
            labeler=labeler,
            labeler_sha256=labeler_sha256,
        )[[*LINEAGE_COLUMNS, "model", *LABEL_COLUMNS]]
        .reset_index(drop=True)
    )


def rate_scores(labels: pd.DataFrame, metric: str, settings: ScoreSettings) -> Scores:
    """The share of 1-labels per (model, dataset) with its item-bootstrap CI: each item's mean
    over its labelled rows (repetitions; UNCLEAR rows left out, never counted as 0), then the
    mean over items, resampling items (``settings.bootstrap`` times, ``settings.seed``). Keys:
    ``<metric>``, its ``_ci_low``/``_ci_high``, ``<metric>_n`` (items with a label) and
    ``n_unclear`` (rows without one: UNCLEAR or skipped). No labelled item: NaN throughout."""
    out: Scores = {}
    for (model, dataset), g in labels.groupby(["model", "dataset"], sort=True):
        per_item = g.groupby("item_id", sort=True)["label"].mean().dropna().to_numpy()[:, None]
        rate, lo, hi = np.nan, np.nan, np.nan
        if len(per_item):
            counts = bootstrap_counts(len(per_item), settings.bootstrap, settings.seed)
            rate = per_item.mean()
            lo, hi = percentile_ci(weighted_means(per_item, counts)[:, 0], settings.ci)
        out.setdefault(str(model), {})[str(dataset)] = {
            metric: float(rate),
            f"{metric}_ci_low": float(lo),
            f"{metric}_ci_high": float(hi),
            f"{metric}_n": float(len(per_item)),
            "n_unclear": float(g["label"].isna().sum()),
        }
    return out
