"""Scoring a SyPS label table: the one path ``score@cues`` and ``syps score --protocol cues`` share.

:func:`score` is that path: the UNCLEAR check (``metrics.check_unclear``), then
``metrics.score_labels`` (BaseSyc, SPSS, the signed sensitivity, each cue's rate and delta with
item-level paired bootstrap CIs and their support, the paired tests and flip counts, the UNCLEAR
rates). The stage gives it the configured variants of each dataset (:func:`variants_of`); the CLI
gives it none, so the variants are those the table names (``metrics.table_variants``), which for
the label stage's own table are the same variants in the same order.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from syps.core.io import InputError, read_csv, read_parquet
from syps.core.layout import Layout
from syps.core.protocol import ScoreSettings
from syps.core.report import Scores
from syps.protocols.cues.metrics import LABEL_COLUMNS, LABELER_COLUMN, check_unclear, score_labels
from syps.protocols.cues.params import CuesParams

# What ``syps score --help`` says of the table ``read_table`` reads.
TABLE_COLUMNS = (
    "dataset, model, item_id, variant, label (1|0; empty: UNCLEAR); labeler, if present, for "
    "judge_unclear_rate; other columns are ignored; "
    f"CSV, or the label stage's parquet ({Layout.of(Path()).labels('cues')}/<model>.parquet); "
    "prints "
    "{model: {dataset: {metric: value}}}"
)


def variants_of(p: CuesParams) -> dict[str, list[str]]:
    """Per configured dataset, the variant ids ``score@cues`` scores, P0 first: each configured
    cue in the order P0..P7, a cue with several wordings as its wordings ``P3a``, ``P3b``, ...
    (``DatasetTemplate.variant_cues``)."""
    return {d: list(t.variant_cues()) for d, t in p.templates.datasets.items()}


def score(
    params: CuesParams | None,
    labels: pd.DataFrame,
    settings: ScoreSettings,
    source: str | None = None,
) -> Scores:
    """``{model: {dataset: {metric: value}}}`` from a label table: the one function both
    ``score@cues`` and ``syps score --protocol cues`` run (its ``Protocol.score`` and its
    table scorer's ``score``).

    ``labels`` needs ``dataset, model, item_id, variant, label`` (1.0, 0.0 or NaN for UNCLEAR;
    ``labeler``, where present, gives ``judge_unclear_rate``; other columns are ignored), one
    row per (model, dataset, item, variant). First a (model, dataset, variant) whose UNCLEAR
    share is above its limit (``settings.unclear_limit``) fails the score
    (``metrics.UnclearError``); then every (model, dataset) is scored by
    ``metrics.score_labels`` with ``settings``' bootstrap, CI, seed and ``min_items``.

    The variants scored: per dataset those of ``params`` (:func:`variants_of`), P0 first: the
    stage's, and ``syps score``'s in a repository. ``params`` None (``syps score`` on a table
    outside one): the ids each dataset's rows name, ordered by cue, then wording
    (``metrics.table_variants``). The label stage writes a row for every
    item under every configured variant, and ``variant_cues`` lists them in that same order, so
    for the stage's own labels both give the same numbers and keys; a cue no row names is not
    scored (the stage would report it with undefined values).

    ``source`` (a file) prefixes an error in the table's rows, so it names the file.
    """
    variants = variants_of(params) if params is not None else None
    check_unclear(labels, settings)
    read = [*LABEL_COLUMNS, *([LABELER_COLUMN] if LABELER_COLUMN in labels.columns else [])]
    try:
        return score_labels(
            labels[read],
            settings.bootstrap,
            settings.ci,
            settings.seed,
            variants,
            settings.min_items,
        )
    except InputError as e:
        if source is None:
            raise
        raise InputError(f"{source}: {e}") from None


def read_table(path: str) -> pd.DataFrame:
    """A SyPS label table from a CSV or parquet file (label 1, 0 or empty for UNCLEAR), for
    :func:`score`: every column of the file, ``label`` as float (NaN: UNCLEAR). A missing
    column, or a label that is not 0, 1 or empty, is an error naming the file (and the row)."""
    if path.endswith(".parquet"):
        # The user's own file, perhaps: "rerun the stage" is advice for stage outputs only.
        fix = "if it is a stage output, rerun `dvc repro`; otherwise write it again"
        table = read_parquet(path, LABEL_COLUMNS, recovery=fix)
    else:
        table = read_csv(path, LABEL_COLUMNS)
    label = pd.to_numeric(table["label"].replace("", None), errors="coerce")
    bad = table["label"].notna() & (table["label"].astype(str) != "") & label.isna()
    bad |= label.notna() & ~label.isin([0, 1])
    if bad.any():
        row = int(bad.to_numpy().nonzero()[0][0]) + 1
        value = table["label"].iloc[row - 1]
        raise InputError(f"{path}: row {row}: label '{value}' is not 0, 1 or empty")
    return table.assign(label=label.astype(float))
