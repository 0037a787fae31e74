"""What judge validation reads from files: the judge a protocol names, its label rows (with the
response text from the sibling responses table where a label table has none), what a person
reads beside the response, and the annotated CSV people filled in."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from syps.core.io import InputError, read_csv, read_parquet, sha256_text
from syps.core.layout import responses_beside
from syps.core.protocol import LINEAGE_COLUMNS, Protocol
from syps.core.reporting import JudgeSpec

HUMAN_VALUES = {"1": 1.0, "0": 0.0, "unclear": math.nan}
ITEM_COLUMNS = ["dataset", "item_id", "item"]


def spec_of(protocol: Protocol[Any, Any], judge: str | None) -> JudgeSpec:
    """``protocol``'s judge named ``judge`` (None: its first), or an error naming its judges."""
    specs = {s.name: s for s in protocol.report.judges}
    if not specs:
        raise InputError(f"--protocol {protocol.name}: has no judge to validate")
    if judge is None:
        return next(iter(specs.values()))
    if judge not in specs:
        raise InputError(
            f"--judge {judge}: no such judge of {protocol.name}; its judges: {list(specs)}"
        )
    return specs[judge]


def label_rows(spec: JudgeSpec, models: Sequence[str], labels_dir: Path) -> pd.DataFrame:
    """Every label row of ``models`` (``labels_dir/<model>.parquet``) with its response, all of
    them: ``decides`` is applied by :func:`with_context`, after ``context`` has read them."""
    parts = []
    for m in models:
        path = labels_dir / f"{m}.parquet"
        if not path.exists():
            raise InputError(f"{path}: no responses for model {m!r}; run `dvc repro` first")
        table = read_parquet(path, [c for c in (*spec.key, *spec.reads) if c != "model"])
        if "response" not in table.columns:
            table = _with_responses(table, responses_beside(labels_dir) / f"{m}.parquet")
        parts.append(table.assign(model=m))
    return pd.concat(parts, ignore_index=True)


def _with_responses(labels: pd.DataFrame, path: Path) -> pd.DataFrame:
    """A label table that lacks the response text, with it from the responses table (one row
    per label row, joined on the lineage columns)."""
    responses = read_parquet(path, [*LINEAGE_COLUMNS, "response"])
    on = [c for c in LINEAGE_COLUMNS if c in labels.columns]
    try:
        out = labels.merge(responses[[*on, "response"]], on=on, how="left", validate="one_to_one")
    except pd.errors.MergeError:
        raise InputError(
            f"{path}: not one row per label row ({on}); run `dvc repro` first"
        ) from None
    if out["response"].isna().any():
        raise InputError(f"{path}: lacks responses of the label table; run `dvc repro` first")
    return out


def with_context(
    spec: JudgeSpec, table: pd.DataFrame, items: pd.DataFrame, items_path: Path
) -> pd.DataFrame:
    """The rows of ``table`` the judge decides, with what a person reads beside the response;
    an error naming the items table where a row's item is missing."""
    shown = spec.shown
    context = spec.context(items, table)
    lacking = [c for c in shown if c not in context.columns]
    if lacking:
        raise ValueError(f"judge {spec.name}: its context lacks the columns {lacking}")
    keep = np.ones(len(table), bool) if spec.decides is None else spec.decides(table).to_numpy()
    rows = table.drop(columns=[c for c in shown if c in table.columns]).join(context[shown])
    rows = rows[keep]
    lost = rows[rows[shown].isna().any(axis=1)]
    if len(lost):
        r = lost.iloc[0]
        whose = (
            f"trace {r['trace_id']}" if "trace_id" in r else f"responses of model {r['model']!r}"
        )
        raise InputError(
            f"{items_path}: no item {r['item_id']} of {r['dataset']} ({whose}); the outputs "
            "are out of date: run `dvc repro` first"
        )
    return rows


def read_annotations(spec: JudgeSpec, path: Path, allow_missing: bool) -> tuple[pd.DataFrame, int]:
    """The annotated rows with ``human`` as 1.0, 0.0 or NaN, and how many unlabelled were
    skipped. Strict: every check names the row (1-based, header excluded) and its sample_id."""
    table = read_csv(path, [c for c in spec.sample_columns if c != "notes"])

    def where(i: int) -> str:
        return f"{path}: row {i + 1} (sample_id {table['sample_id'].iat[i]})"

    for i, row in enumerate(table.to_dict("records")):
        if not str(row["sample_id"]).strip().isdigit():
            raise InputError(f"{where(i)}: sample_id is not a whole number")
        if spec.datasets and row["dataset"] not in spec.datasets:
            raise InputError(
                f"{where(i)}: unknown dataset {row['dataset']!r}; known: {list(spec.datasets)}"
            )
        if sha256_text(row["response"]) != row["response_sha256"]:
            raise InputError(
                f"{where(i)}: the response does not match its response_sha256: it was edited "
                f"(a spreadsheet can change line endings or quotes); restore it from the sample"
            )
        why = None if spec.check is None else spec.check(row)
        if why:
            raise InputError(f"{where(i)}: {why}")
    raw = table["human_label"].str.strip()
    empty = raw == ""
    if empty.any() and not allow_missing:
        i = int(np.flatnonzero(empty.to_numpy())[0])
        raise InputError(
            f"{where(i)}: human_label is empty; label every row with 1, 0 or UNCLEAR, or pass "
            f"--allow-missing to skip the unlabelled ones"
        )
    bad = ~empty & ~raw.str.lower().isin(list(HUMAN_VALUES))
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        raise InputError(
            f"{where(i)}: human_label {table['human_label'].iat[i]!r} is not 1, 0 or UNCLEAR"
        )
    dup = table.duplicated(list(spec.key), keep=False)
    if dup.any():
        rows = [int(i) + 1 for i in np.flatnonzero(dup.to_numpy())]
        raise InputError(f"{path}: rows {rows} are the same response ({', '.join(spec.key)})")
    labelled = table[~empty].reset_index(drop=True)
    human = labelled["human_label"].str.strip().str.lower().map(HUMAN_VALUES).astype(float)
    return labelled.assign(human=human), int(empty.sum())
