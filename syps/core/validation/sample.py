"""``syps judge sample``: draw label rows the judge decides, stratified by its strata, into a
CSV for people to label (and, with a review queue, attach their traces to it in MLflow)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pandas as pd

from syps.core.agreement import stratified_sample
from syps.core.config import ConfigError, Params
from syps.core.io import InputError, atomic_write, read_parquet, sha256_text
from syps.core.layout import Layout
from syps.core.protocol import Protocol
from syps.core.reporting import JudgeSpec
from syps.core.validation.inputs import ITEM_COLUMNS, label_rows, with_context
from syps.core.validation.review import add_to_queue, question_name, sample_traces


def judge_sample(
    spec: JudgeSpec,
    protocol: Protocol[Any, Any],
    p: Params,
    params: Path,
    out_csv: Path,
    n: int = 500,
    seed: int | None = None,
    datasets: list[str] | None = None,
    models: list[str] | None = None,
    responses_dir: Path | None = None,
    items: Path | None = None,
    force: bool = False,
    queue: str | None = None,
    runs: list[str] | None = None,
) -> None:
    """Write ``n`` of the label rows the judge decides, stratified by its strata, as a CSV to
    annotate. ``p`` is the params the caller read from the file ``params`` (named in errors).

    ``seed`` defaults to the params seed; ``models`` to all in params, ``datasets`` to all in
    the items table (``items``; ``responses_dir`` holds the label tables). An existing
    ``out_csv`` is kept unless ``force``: it may already hold human labels.

    With ``queue``, people may answer in the MLflow UI instead: the sampled responses' traces
    (:func:`sample_traces`; ``runs`` as for ``--traces``, default the newest pipeline run) are
    attached to that review queue, which asks the judge's question (:func:`add_to_queue`).
    """
    layout = Layout.here()
    responses_dir = responses_dir or layout.labels(protocol.name)
    items = items or layout.items(protocol.name)
    models, datasets, item_table = _scope(p, params, models, datasets, items)
    if out_csv.exists() and not force:
        raise InputError(
            f"{out_csv}: already exists and may hold human labels; pass --force to overwrite it"
        )
    table = label_rows(spec, models, responses_dir)
    table = table[table["dataset"].astype(str).isin(datasets)]
    table = with_context(spec, table, item_table, items)
    if n > len(table):
        raise InputError(
            f"--n {n} asks for more responses than the {len(table)} the {spec.name} judge "
            f"decides of models {models} on datasets {datasets}; pass --n {len(table)} or fewer"
        )
    sample = draw_sample(spec, table, n, p.seed if seed is None else seed)
    # Every trace is found before anything is written: a sample without its traces is refused.
    traced = (
        None if queue is None else sample_traces(spec, protocol, p, sample, runs or [], out_csv)
    )
    atomic_write(out_csv, lambda f: sample.to_csv(f, index=False, encoding="utf-8"))
    counts = sample.groupby(["model", "dataset"], sort=True).size()
    print(
        f"{out_csv}: {len(sample)} responses ("
        + ", ".join(f"{m}/{d}={c}" for (m, d), c in counts.items())
        + f"); fill human_label with {spec.meaning}",
        file=sys.stderr,
    )
    if queue is not None and traced is not None:
        add_to_queue(spec, protocol, p, queue, traced)
        print(
            f"review queue {queue!r} (experiment '{p.tracking.experiment}'): {len(traced)} "
            f"traces to answer {question_name(protocol, spec)!r} with 1, 0 or UNCLEAR; then "
            f"syps judge validate --protocol {protocol.name} --judge {spec.name} --queue {queue}",
            file=sys.stderr,
        )


def _scope(
    p: Params, params: Path, models: list[str] | None, datasets: list[str] | None, items: Path
) -> tuple[list[str], list[str], pd.DataFrame]:
    """The models (default: all of ``p``) and datasets (default: all of the items table
    ``items``) to draw from, and that items table; an error naming any unknown one."""
    models = models or list(p.models)
    unknown = sorted(set(models) - set(p.models))
    if unknown:
        raise ConfigError(f"{params}: models: no entry {unknown}; known: {sorted(p.models)}")
    item_table = read_parquet(items, ITEM_COLUMNS)
    known = list(dict.fromkeys(item_table["dataset"].astype(str)))
    datasets = datasets or known
    unknown = [d for d in datasets if d not in known]
    if unknown:
        raise InputError(f"--dataset {unknown}: not in {items}; its datasets: {known}")
    return models, datasets, item_table


def draw_sample(spec: JudgeSpec, table: pd.DataFrame, n: int, seed: int) -> pd.DataFrame:
    """``n`` rows of ``table`` (the rows the judge decides, with their context) drawn with
    ``seed`` evenly over ``spec.strata``, numbered from 1 as ``sample_id``, with their
    response's hash and empty ``human_label`` and ``notes``: the spec's sample columns."""
    # A fixed row order, so the sample depends on the seed and the content only.
    table = table.sort_values(list(spec.key), kind="stable").reset_index(drop=True)
    drawn = stratified_sample(table, n, list(spec.strata), seed)
    return drawn.assign(
        sample_id=range(1, len(drawn) + 1),
        response_sha256=[sha256_text(str(r)) for r in drawn["response"]],
        human_label="",
        notes="",
    )[spec.sample_columns]
