"""``syps judge validate``: measure the judge as configured now against people's labels (an
annotated CSV, or read from MLflow), print the report, write it as JSON and log it as one
MLflow run."""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pandas as pd

from syps.core.agreement import REPORT_KEYS
from syps.core.config import ConfigError, Params, ProtocolParams
from syps.core.io import InputError, atomic_write, sha256_file, write_json
from syps.core.layout import Layout
from syps.core.protocol import Protocol
from syps.core.provenance import git_info
from syps.core.reporting import JudgeSpec
from syps.core.runlayout import metric_name
from syps.core.tracking import log_validation_run
from syps.core.validation.agree import (
    ALL,
    LABELER_KEYS,
    MACHINE_COLUMNS,
    PPI_KEYS,
    agreement_by_dataset,
    corrected_rates,
    machine_labels,
    population_rows,
    ppi_strata,
    reviewer_agreement,
)
from syps.core.validation.inputs import read_annotations
from syps.core.validation.report import validation_table
from syps.core.validation.review import annotations_from_queue, annotations_from_traces


def judge_validate(
    spec: JudgeSpec,
    protocol: Protocol[Any, Any],
    p: Params,
    params: Path,
    annotated_csv: Path | None,
    report_json: Path | None = None,
    allow_missing: bool = False,
    traces: list[str] | None = None,
    queue: str | None = None,
    labels_dir: Path | None = None,
    items: Path | None = None,
) -> dict[str, Any]:
    """Measure the judge as configured now against the human labels of ``annotated_csv``, or,
    with ``traces`` (run ids; ``[]``: the newest pipeline run), against people's labels on the
    MLflow traces of those runs' children of ``protocol`` (:func:`annotations_from_traces`),
    or, with ``queue``, against the answers to that MLflow review queue
    (:func:`annotations_from_queue`).

    Beside agreement and kappa, each dataset's judged rate corrected by the people's labels
    (:func:`corrected_rates`), over every response the judge decides of the sample's (model,
    dataset) pairs: the label tables in ``labels_dir`` with the items table ``items`` (default
    the layout's, ``syps.core.layout``); without them the report says
    why it has none.

    Prints the agreement table and confusion matrices, writes the report JSON (by default
    ``<stem>.validation.json`` beside the CSV; ``judge-traces.validation.json`` for traces,
    ``judge-queue.validation.json`` for a queue), logs one MLflow run, and returns the report.
    """
    own = _own_params(p, params, protocol)
    layout = Layout.here()
    labels_dir = labels_dir or layout.labels(protocol.name)
    items = items or layout.items(protocol.name)
    reviews = None
    if traces is not None or queue is not None:
        annotated_csv, report_json, reviews = _people_from_mlflow(
            spec, protocol, p, traces, queue, report_json, items, labels_dir
        )
    if annotated_csv is None:
        raise InputError("give the annotated CSV, or --traces or --queue to read people's labels")
    report_json = report_json or annotated_csv.with_name(f"{annotated_csv.stem}.validation.json")
    table, skipped = read_annotations(spec, annotated_csv, allow_missing)
    if table.empty:
        raise InputError(f"{annotated_csv}: no row has a human_label yet")
    machine, _ = machine_labels(spec, protocol, p, own, table)
    both = table.assign(**{c: machine[c].to_numpy() for c in MACHINE_COLUMNS})
    datasets, tables = agreement_by_dataset(spec, both, p.score.bootstrap, p.score.ci, p.seed)
    rates, omitted = _corrected(spec, protocol, p, own, both, labels_dir, items)
    for d, entry in rates.items():
        datasets[d].update(entry)
    report: dict[str, Any] = {
        "protocol": protocol.name,
        "judge": spec.name,
        "annotated_csv": str(annotated_csv),
        "annotated_sha256": sha256_file(annotated_csv),
        "n_skipped": skipped,
        "bootstrap": p.score.bootstrap,
        "ci": p.score.ci,
        "seed": p.seed,
        "min_items": p.score.min_items,
        "reference": None if spec.reference is None else asdict(spec.reference),
        "corrected": {"labels": str(labels_dir), "strata": ppi_strata(spec), "omitted": omitted},
        "datasets": datasets,
    }
    if reviews is not None and len(reviews):
        judged, _ = machine_labels(spec, protocol, p, own, reviews)
        report["reviewers"] = reviewer_agreement(
            spec, reviews, judged["label"].to_numpy(float), p.score.bootstrap, p.score.ci, p.seed
        )
    print(validation_table(report))
    write_json(report, report_json)
    _log_run(p, report, annotated_csv, report_json, tables)
    return report


def _own_params(p: Params, params: Path, protocol: Protocol[Any, Any]) -> ProtocolParams:
    if protocol.name not in p.protocols:
        raise ConfigError(f"{params}: protocols.{protocol.name}: not configured")
    return p.protocols[protocol.name]


def _people_from_mlflow(
    spec: JudgeSpec,
    protocol: Protocol[Any, Any],
    p: Params,
    traces: list[str] | None,
    queue: str | None,
    report_json: Path | None,
    items: Path,
    labels_dir: Path,
) -> tuple[Path, Path, pd.DataFrame | None]:
    """People's labels read from the answers to review queue ``queue``, else from the traces of
    the runs ``traces``, written as an annotated CSV beside the report JSON (by default
    ``judge-queue.validation.json`` or ``judge-traces.validation.json``): so that what was
    validated against stays on file; a queue's answers per reviewer beside it
    (``<stem>.reviews.csv``). Returns the CSV, the report JSON and, for a queue, the answers
    per reviewer."""
    stem = "judge-traces" if queue is None else "judge-queue"
    report_json = report_json or Path(f"{stem}.validation.json")
    annotated_csv = report_json.with_name(f"{report_json.stem}.annotations.csv")
    reviews = None
    if queue is None:
        sample = annotations_from_traces(spec, protocol, p, traces or [], items, labels_dir)
        where = "the traces"
    else:
        answers = annotations_from_queue(spec, protocol, p, queue, items, labels_dir)
        sample, reviews = answers.sample, answers.reviews
        where = f"review queue {queue!r}"
        path = report_json.with_name(f"{report_json.stem}.reviews.csv")
        atomic_write(path, lambda f: reviews.to_csv(f, index=False, encoding="utf-8"))
        who = reviews["reviewer"].nunique()
        print(f"{path}: {len(reviews)} answers of {who} reviewer(s)", file=sys.stderr)
    atomic_write(annotated_csv, lambda f: sample.to_csv(f, index=False, encoding="utf-8"))
    print(f"{annotated_csv}: {len(sample)} people's labels read from {where}", file=sys.stderr)
    return annotated_csv, report_json, reviews


def _corrected(
    spec: JudgeSpec,
    protocol: Protocol[Any, Any],
    p: Params,
    own: ProtocolParams,
    sample: pd.DataFrame,
    labels_dir: Path,
    items: Path,
) -> tuple[dict[str, dict[str, Any]], str | None]:
    """The corrected rates of the annotated ``sample`` (with the judge's ``label``) over its
    population (:func:`population_rows`, labelled by the judge as the store holds it), per
    dataset; or no rates and why there are none."""
    population, omitted = population_rows(spec, sample, labels_dir, items)
    if population is None:
        return {}, omitted
    # Only what the store holds: after a change of the judge, labelling every response is
    # dvc repro's job (and cost), never a side effect of validating a sample.
    judged, missing = machine_labels(spec, protocol, p, own, population, dry=True)
    if missing:
        return {}, (
            f"the store lacks {missing} verdict(s) of the judge as configured now on the "
            f"{len(judged)} responses of the label tables; run dvc repro (it labels them), "
            "then validate again"
        )
    population = population.assign(label=judged["label"].to_numpy())
    return corrected_rates(spec, sample, population, p.score.ci, p.score.min_items), None


def _log_run(
    p: Params,
    report: dict[str, Any],
    annotated_csv: Path,
    report_json: Path,
    tables: Mapping[str, pd.DataFrame],
) -> None:
    """One MLflow run (``syps.kind=judge-validation``): the labellers' identities as tags, the
    settings as params, every number per dataset as a metric (``<dataset>/<key>``: the
    agreement's ``REPORT_KEYS`` and the corrected rate's ``PPI_KEYS``, which ``syps compare
    --validation`` shows), the files as artifacts."""
    tags = {
        **git_info(Path.cwd()),
        "annotated_file": str(annotated_csv),
        "annotated_sha256": report["annotated_sha256"],
        **{
            f"{key}.{d}": e[key]
            for d, e in report["datasets"].items()
            if d != ALL
            for key in LABELER_KEYS
            if e[key]  # rule labellers have no judge template
        },
    }
    run_params = {
        "protocol": report["protocol"],
        "judge": report["judge"],
        "bootstrap_B": str(p.score.bootstrap),
        "ci": str(p.score.ci),
        "seed": str(p.seed),
        "n_skipped": str(report["n_skipped"]),
        "min_items": str(report["min_items"]),
        "judge_model": p.judge.model.model,
        "judge_min_margin": str(p.judge.min_margin),
    }
    metrics = {
        f"{d}/{k}": (math.nan if e[k] is None else float(e[k]))
        for d, e in report["datasets"].items()
        for k in [*REPORT_KEYS, *PPI_KEYS]
        if k in e  # no corrected rate without the label tables
    }
    # Several reviewers: each against the judge, each pair against each other
    # (reviewer/<name>/<key>, reviewers/<a>:<b>/<key>; a name as MLflow allows it).
    for block, prefix in (("judge", "reviewer"), ("pairs", "reviewers")):
        for who, e in report.get("reviewers", {}).get(block, {}).items():
            name = ":".join(metric_name(n) for n in who.split(" ~ "))
            for k in ("n_both_decided", "agreement", "kappa"):
                v = e[k]
                metrics[f"{prefix}/{name}/{k}"] = math.nan if v is None else float(v)
    log_validation_run(
        Layout.here().mlruns,
        p.tracking.experiment,
        f"judge-validation {annotated_csv.name}",
        tags,
        run_params,
        metrics,
        [annotated_csv, report_json],
        {f"confusion_{d}.csv": t for d, t in tables.items()},
    )
