"""Judge validation for any protocol's labeller: draw label rows for people to label, then
measure the labeller as configured now against them (``syps judge sample|validate``).

A protocol describes each labeller it validates as a ``syps.core.protocol.JudgeSpec`` (which
label rows it decides, what a person reads besides the response, the columns that name a row,
the strata to sample by, and how the labeller as configured now labels rows again) and lists
them in its ``judges``. Everything else lives here, the same for every judge:

- ``judge_sample`` draws ``n`` of the rows the judge decides from the label tables
  (``out/protocols/<p>/labels/<model>.parquet``; the response text from the sibling
  ``responses/<model>.parquet`` where a label table has none), stratified by the spec's strata,
  into a CSV with an empty ``human_label`` column (1, 0 or UNCLEAR);
- ``read_annotations`` reads it back strictly: each error names the file, the row and its
  sample_id;
- ``judge_validate`` labels the same rows again through the response store (a prompt judged
  before costs nothing), reports agreement, Cohen's kappa with a bootstrap CI, the confusion
  matrix and both UNCLEAR rates per dataset and over all rows, writes the report JSON and logs
  one MLflow run tagged ``syps.kind=judge-validation``;
- ``annotations_from_traces`` reads people's labels from the MLflow traces instead of a CSV.

A protocol reads no params.yaml, store or MLflow: its spec is handed tables and a judge.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from syps.core.agreement import (
    CATEGORIES,
    REPORT_KEYS,
    agreement_report,
    confusion,
    stratified_sample,
)
from syps.core.compare import find_runs
from syps.core.config import ConfigError, Params, ProtocolParams
from syps.core.io import (
    InputError,
    atomic_write,
    read_csv,
    read_parquet,
    sha256_file,
    sha256_text,
    write_json,
)
from syps.core.judge import StoreJudge
from syps.core.ppi import ppi_mean, stratum_weights
from syps.core.protocol import LINEAGE_COLUMNS, Protocol
from syps.core.provenance import git_info
from syps.core.report import LOW_SUPPORT
from syps.core.reporting import JudgeSpec
from syps.core.runs import cache_dir, repo_root, store_path
from syps.core.store import Store
from syps.core.traces import LINK_BATCH, SKIPPED, TAG, human_labels, response_text, run_traces
from syps.core.tracking import log_validation_run, tracking_uri

HUMAN_VALUES = {"1": 1.0, "0": 0.0, "unclear": math.nan}
# What the relabel returns per row; judge_template_sha256 may be left out ("": a rule).
MACHINE_COLUMNS = ["label", "labeler", "labeler_sha256", "judge_template_sha256"]
LABELER_KEYS = ["labeler", "labeler_sha256", "judge_template_sha256"]
ITEM_COLUMNS = ["dataset", "item_id", "item"]
ALL = "all"
# The corrected rate of each group (see corrected_rates), logged as <dataset>/<key>.
PPI_KEYS = [
    "judged_rate",
    "judged_rate_n",
    "n_judged_unclear",
    "corrected_rate",
    "corrected_rate_ci_low",
    "corrected_rate_ci_high",
    "corrected_rate_se",
    "corrected_rate_n",
    "corrected_rate_low_support",
]


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


def _own_params(p: Params, params: Path, protocol: Protocol[Any, Any]) -> ProtocolParams:
    if protocol.name not in p.protocols:
        raise ConfigError(f"{params}: protocols.{protocol.name}: not configured")
    return p.protocols[protocol.name]


# --- sample ---------------------------------------------------------------------------------


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
    out_dir = Path("out/protocols") / protocol.name
    responses_dir = responses_dir or out_dir / "labels"
    items = items or out_dir / "items.parquet"
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
    # A fixed row order, so the sample depends on the seed and the content only.
    table = table.sort_values(list(spec.key), kind="stable").reset_index(drop=True)
    drawn = stratified_sample(table, n, list(spec.strata), p.seed if seed is None else seed)
    sample = drawn.assign(
        sample_id=range(1, len(drawn) + 1),
        response_sha256=[sha256_text(str(r)) for r in drawn["response"]],
        human_label="",
        notes="",
    )[spec.sample_columns]
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
            table = _with_responses(table, labels_dir.parent / "responses" / f"{m}.parquet")
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


# --- read back ------------------------------------------------------------------------------


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


# --- validate -------------------------------------------------------------------------------


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
    ``out/protocols/<protocol>/labels`` and ``items.parquet``); without them the report says
    why it has none.

    Prints the agreement table and confusion matrices, writes the report JSON (by default
    ``<stem>.validation.json`` beside the CSV; ``judge-traces.validation.json`` for traces,
    ``judge-queue.validation.json`` for a queue), logs one MLflow run, and returns the report.
    """
    own = _own_params(p, params, protocol)
    out_dir = Path("out/protocols") / protocol.name
    labels_dir = labels_dir or out_dir / "labels"
    items = items or out_dir / "items.parquet"
    if traces is not None or queue is not None:
        stem = "judge-traces" if queue is None else "judge-queue"
        report_json = report_json or Path(f"{stem}.validation.json")
        annotated_csv = report_json.with_name(f"{report_json.stem}.annotations.csv")
        if queue is None:
            sample = annotations_from_traces(spec, protocol, p, traces or [], items, labels_dir)
            where = "the traces"
        else:
            sample = annotations_from_queue(spec, protocol, p, queue, items, labels_dir)
            where = f"review queue {queue!r}"
        atomic_write(annotated_csv, lambda f: sample.to_csv(f, index=False, encoding="utf-8"))
        print(f"{annotated_csv}: {len(sample)} people's labels read from {where}", file=sys.stderr)
    if annotated_csv is None:
        raise InputError("give the annotated CSV, or --traces or --queue to read people's labels")
    report_json = report_json or annotated_csv.with_name(f"{annotated_csv.stem}.validation.json")
    table, skipped = read_annotations(spec, annotated_csv, allow_missing)
    if table.empty:
        raise InputError(f"{annotated_csv}: no row has a human_label yet")
    machine, _ = machine_labels(spec, protocol, p, own, table)
    both = table.assign(**{c: machine[c].to_numpy() for c in MACHINE_COLUMNS})
    datasets, tables = agreement_by_dataset(spec, both, p.score.bootstrap, p.score.ci, p.seed)
    population, omitted = population_rows(spec, table, labels_dir, items)
    if population is not None:
        # Only what the store holds: after a change of the judge, labelling every response is
        # dvc repro's job (and cost), never a side effect of validating a sample.
        judged, missing = machine_labels(spec, protocol, p, own, population, dry=True)
        if missing:
            omitted = (
                f"the store lacks {missing} verdict(s) of the judge as configured now on the "
                f"{len(judged)} responses of the label tables; run dvc repro (it labels them), "
                "then validate again"
            )
            population = None
        else:
            population = population.assign(label=judged["label"].to_numpy())
    if population is not None:
        for d, entry in corrected_rates(
            spec, both, population, p.score.ci, p.score.min_items
        ).items():
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
        "corrected": {
            "labels": str(labels_dir),
            "strata": _ppi_strata(spec),
            "omitted": omitted,
        },
        "datasets": datasets,
    }
    print(validation_table(report))
    write_json(report, report_json)
    _log_run(p, report, annotated_csv, report_json, tables)
    return report


def machine_labels(
    spec: JudgeSpec,
    protocol: Protocol[Any, Any],
    p: Params,
    own: ProtocolParams,
    table: pd.DataFrame,
    dry: bool = False,
) -> tuple[pd.DataFrame, int]:
    """The labels the judge as configured now (``p.judge``; ``own``: the protocol's params)
    gives the rows of ``table``, through the response store (a prompt judged before costs
    nothing), in row order: ``MACHINE_COLUMNS``; and how many verdicts the store lacked. With
    ``dry`` those are not asked (their rows' label is NaN): the judge never loads."""
    rows = table.reset_index(drop=True)
    with Store(store_path()) as store:
        judge = StoreJudge(p.judge, store, cache_dir(), dry=dry)
        out = spec.relabel(protocol, own, rows, judge).reset_index(drop=True)
    if "judge_template_sha256" not in out.columns:
        out = out.assign(judge_template_sha256="")
    lacking = [c for c in MACHINE_COLUMNS if c not in out.columns]
    if len(out) != len(rows) or lacking:
        raise RuntimeError(
            f"judge {spec.name}: relabel gave {len(out)} rows for {len(rows)}"
            + (f", without {lacking}" if lacking else "")
        )
    return out.assign(label=out["label"].astype(float)), judge.tally["judged"]


# --- corrected rates ------------------------------------------------------------------------


def population_rows(
    spec: JudgeSpec, sample: pd.DataFrame, labels_dir: Path, items: Path
) -> tuple[pd.DataFrame | None, str | None]:
    """Every label row the judge decides of the (model, dataset) pairs ``sample`` names (a
    skipped row, with no response, is none), with what it reads: the population whose rate the
    sample corrects. (None, why) where the label tables or the items cannot be read: the
    report then says why it has no corrected rate (a sample annotated elsewhere still
    validates)."""
    pairs = set(zip(sample["model"].astype(str), sample["dataset"].astype(str), strict=True))
    try:
        table = label_rows(spec, sorted({m for m, _ in pairs}), labels_dir)
        keep = [
            pair in pairs
            for pair in zip(table["model"].astype(str), table["dataset"].astype(str), strict=True)
        ]
        table = table[keep]
        if "verdict" in table.columns:
            table = table[table["verdict"].astype(str) != SKIPPED]
        rows = with_context(spec, table, read_parquet(items, ITEM_COLUMNS), items)
    except InputError as e:
        return None, str(e)
    # As the sample's rows are: text, in a fixed order.
    out = rows[[*spec.columns, "response"]].astype(str)
    return out.sort_values(list(spec.key), kind="stable").reset_index(drop=True), None


def _ppi_strata(spec: JudgeSpec) -> list[str]:
    """The strata the rectifier is weighted by: the sample's, with model and dataset."""
    return list(dict.fromkeys(["model", "dataset", *spec.strata]))


def corrected_rates(
    spec: JudgeSpec, sample: pd.DataFrame, population: pd.DataFrame, level: float, min_items: int
) -> dict[str, dict[str, Any]]:
    """Per dataset of ``sample`` and over all: the judge's rate over ``population`` (its
    ``label``: 1.0, 0.0, NaN) corrected by the people's labels (``human``) of the sample rows,
    with ``label`` the same judge's (:func:`syps.core.ppi.ppi_mean`): the keys ``PPI_KEYS``,
    None where undefined, and ``n_outside``, the sample rows that are no population row (a
    skipped response; label tables older than the sample), left out.

    The rectifier is weighted by each row's inverse sampling fraction over the strata
    (:func:`_ppi_strata`, :func:`syps.core.ppi.stratum_weights`): ``syps judge sample``
    spreads the draws evenly over the strata, so a small stratum's rows are over-represented
    and would otherwise count its errors too often. A sample of a dataset (of all) stands for
    that dataset's population (of all of it). It is low-support
    (``corrected_rate_low_support`` 1.0) where fewer than ``min_items`` rows are behind it."""
    strata, key = _ppi_strata(spec), list(spec.key)
    known = set(population[key].itertuples(index=False, name=None))
    inside = np.array(
        [k in known for k in sample[key].astype(str).itertuples(index=False, name=None)], bool
    )
    out: dict[str, dict[str, Any]] = {}
    for name in [*dict.fromkeys(sample["dataset"].astype(str)), ALL]:
        mine = np.ones(len(sample), bool) if name == ALL else (sample["dataset"] == name).to_numpy()
        pop = population if name == ALL else population[population["dataset"] == name]
        rows = sample[mine & inside]
        r = ppi_mean(
            pop["label"].to_numpy(float),
            rows["label"].to_numpy(float),
            rows["human"].to_numpy(float),
            stratum_weights(pop, rows, strata),
            level,
        )
        out[name] = {
            "judged_rate": _none_if_nan(r.raw),
            "judged_rate_n": r.N,
            "n_judged_unclear": r.unclear,
            "corrected_rate": _none_if_nan(r.estimate),
            "corrected_rate_ci_low": _none_if_nan(r.ci_low),
            "corrected_rate_ci_high": _none_if_nan(r.ci_high),
            "corrected_rate_se": _none_if_nan(r.se),
            "corrected_rate_n": r.n,
            "corrected_rate_low_support": float(r.n < min_items),
            "n_outside": int((mine & ~inside).sum()),
        }
    return out


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
    log_validation_run(
        repo_root() / "mlruns",
        p.tracking.experiment,
        f"judge-validation {annotated_csv.name}",
        tags,
        run_params,
        metrics,
        [annotated_csv, report_json],
        {f"confusion_{d}.csv": t for d, t in tables.items()},
    )


# --- people's labels on the traces ----------------------------------------------------------


def annotations_from_traces(
    spec: JudgeSpec,
    protocol: Protocol[Any, Any],
    p: Params,
    run_ids: list[str],
    items: Path | None = None,
    labels_dir: Path | None = None,
) -> pd.DataFrame:
    """People's labels on the traces of ``protocol``'s child runs, as an annotated sample (the
    spec's sample columns, ``notes`` naming the reviewer and the trace): a feedback named
    ``label`` from a ``HUMAN`` source, 1, 0 or UNCLEAR (see ``syps.core.traces``). The runs:
    ``run_ids`` (a pipeline run means its children), or the newest pipeline run with children
    of ``protocol``. A key column a trace lacks comes from its cell (SyPS's ``variant``); the
    columns ``reads`` names, from the label tables (``labels_dir``); the context, from the
    items table (``items``). Traces of rows the judge did not decide are left out."""
    import mlflow  # heavy: only this path talks to an MLflow client

    if not spec.traces:
        raise InputError(
            f"--traces: a trace's label is not the {spec.name} judge's; annotate a sample "
            f"(syps judge sample --judge {spec.name}) instead"
        )
    out_dir = Path("out/protocols") / protocol.name
    items = items or out_dir / "items.parquet"
    uri = tracking_uri(repo_root() / "mlruns")
    runs = find_runs(
        uri, p.tracking.experiment, {}, run_ids, latest=not run_ids, protocol=protocol.name
    )
    people = human_labels(mlflow.MlflowClient(tracking_uri=uri), [r.run_id for r in runs])
    if people.empty:
        where = f"runs {run_ids}" if run_ids else "the newest pipeline run"
        raise InputError(
            f"no trace of {where} has a person's label (a feedback named label from a HUMAN "
            "source); add one in the MLflow UI (docs/validating-labels.md)"
        )
    return _as_sample(spec, people, items, labels_dir or out_dir / "labels")


def _as_sample(
    spec: JudgeSpec, people: pd.DataFrame, items: Path, labels_dir: Path
) -> pd.DataFrame:
    """People's labels on traces (``trace_id``, the trace's tags, ``response``,
    ``human_label`` as the feedback says it, ``reviewer``) as an annotated sample: the key
    columns a trace lacks from its cell, the label-table columns ``spec.reads`` names, the
    context from the items table; rows of responses the judge does not decide left out (and
    counted); ``notes`` naming the reviewer and the trace."""
    people = _cell_columns(spec, people)
    if spec.reads:
        people = _with_labels(spec, people, labels_dir)
    people = people.assign(human_label=[_human_value(v) for v in people["human_label"]])
    n = len(people)
    people = with_context(spec, people, read_parquet(items, ITEM_COLUMNS), items)
    if len(people) < n:
        print(
            f"left out {n - len(people)} trace(s) the {spec.name} judge did not label",
            file=sys.stderr,
        )
    people = people.sort_values(list(spec.key), kind="stable").reset_index(drop=True)
    return people.assign(
        sample_id=range(1, len(people) + 1),
        response_sha256=[sha256_text(str(r)) for r in people["response"]],
        notes=[
            f"{r} on trace {t}" if r else f"no answer yet on trace {t}"
            for r, t in zip(people["reviewer"], people["trace_id"], strict=True)
        ],
    )[spec.sample_columns]


def _cell_columns(spec: JudgeSpec, people: pd.DataFrame) -> pd.DataFrame:
    """Each key column a trace has no tag for, from its cell's factors (SyPS's ``variant``)."""
    cells = [json.loads(c) if c else {} for c in people["cell"]]
    lacking = [c for c in spec.key if c not in people.columns]
    return people.assign(**{c: [str(cell.get(c, "")) for cell in cells] for c in lacking})


def _with_labels(spec: JudgeSpec, people: pd.DataFrame, labels_dir: Path) -> pd.DataFrame:
    """People's rows with the label-table columns ``spec.reads`` names, joined on the key."""
    key = list(spec.key)
    parts = []
    for model, group in people.groupby("model", sort=True):
        path = labels_dir / f"{model}.parquet"
        want = [c for c in dict.fromkeys([*key, *spec.reads]) if c != "model"]
        table = read_parquet(path, want)[want].assign(model=str(model))
        table = table.astype({c: str for c in key})
        got = group.drop(columns=[c for c in spec.reads if c not in key and c in group.columns])
        merged = got.astype({c: str for c in key}).merge(
            table, on=key, how="left", validate="many_to_one"
        )
        lost = merged[merged[[c for c in spec.reads if c not in key]].isna().any(axis=1)]
        if len(lost):
            raise InputError(
                f"{path}: no label row of trace {lost['trace_id'].iat[0]}; the outputs are "
                "out of date: run `dvc repro` first"
            )
        parts.append(merged)
    return pd.concat(parts, ignore_index=True)


def _human_value(value: str) -> str:
    """A feedback's value as the sample's ``human_label``: 1, 0 or UNCLEAR (the UI stores a
    number as 1.0 and a yes/no as true/false); anything else is kept, and refused by
    :func:`read_annotations` with its row."""
    v = value.strip().lower()
    return {"1.0": "1", "true": "1", "yes": "1", "0.0": "0", "false": "0", "no": "0"}.get(v, value)


# --- agreement and the report ---------------------------------------------------------------


def agreement_by_dataset(
    spec: JudgeSpec, table: pd.DataFrame, n_boot: int, ci: float, seed: int
) -> tuple[dict[str, dict[str, Any]], dict[str, pd.DataFrame]]:
    """Per dataset (in ``spec.datasets`` order, else by name) and over all rows: the agreement
    report, confusion counts, the sample_ids of disagreements and who labelled; and the
    confusion tables themselves.

    ``table`` has ``sample_id, dataset, human`` and ``MACHINE_COLUMNS``. Undefined values are
    None (JSON null).
    """
    present = set(table["dataset"])
    order = [d for d in spec.datasets if d in present] or sorted(present)
    groups = {**{d: table[table["dataset"] == d] for d in order}, ALL: table}
    out: dict[str, dict[str, Any]] = {}
    tables: dict[str, pd.DataFrame] = {}
    for name, g in groups.items():
        h, m = g["human"].to_numpy(float), g["label"].to_numpy(float)
        stats = agreement_report(h, m, n_boot, ci, seed)
        tables[name] = conf = confusion(h, m)
        entry: dict[str, Any] = {
            **{k: _none_if_nan(v) for k, v in stats.items()},
            "n": int(stats["n"]),
            "n_both_decided": int(stats["n_both_decided"]),
            "confusion": {r: {c: int(conf.at[r, c]) for c in CATEGORIES} for r in CATEGORIES},
            # Both decided, and differently: the rows to reread when judge and human disagree.
            "disagreements": [
                int(s)
                for s, hv, mv in zip(g["sample_id"], h, m, strict=True)
                if not (math.isnan(hv) or math.isnan(mv)) and hv != mv
            ],
        }
        if name != ALL:
            for key in LABELER_KEYS:
                entry[key] = str(g[key].iat[0])
        out[name] = entry
    return out, tables


def _none_if_nan(v: float) -> float | None:
    return None if math.isnan(v) else v


def _pct(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.1%}"


def _kappa(e: dict[str, Any]) -> str:
    if e["kappa"] is None:
        return "n/a"
    lo, hi = e["kappa_ci_low"], e["kappa_ci_high"]
    ci = "[n/a]" if lo is None else f"[{lo:.3f}, {hi:.3f}]"
    return f"{e['kappa']:.3f} {ci}"


def _grid(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def validation_table(report: dict[str, Any]) -> str:
    """The report as plain text: one line per dataset (and all), then the corrected rates, each
    confusion matrix, and the published check where the report has its dataset."""
    header = [
        "dataset",
        "n",
        "decided",
        "agreement",
        f"kappa [{report['ci']:.0%} CI]",
        "machine UNCLEAR",
        "human UNCLEAR",
    ]
    rows = [
        [
            d,
            f"{e['n']:.0f}",
            f"{e['n_both_decided']:.0f}",
            _pct(e["agreement"]),
            _kappa(e),
            _pct(e["machine_unclear_rate"]),
            _pct(e["human_unclear_rate"]),
        ]
        for d, e in report["datasets"].items()
    ]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = _grid([header, ["-" * w for w in widths], *rows])
    lines += _corrected_lines(report)
    for d, e in report["datasets"].items():
        if d == ALL:
            continue
        lines += ["", f"{d}: rows human, columns machine"]
        grid = [["", *CATEGORIES]] + [
            [r, *(str(e["confusion"][r][c]) for c in CATEGORIES)] for r in CATEGORIES
        ]
        lines += _grid(grid)
    lines += _reference_lines(report)
    if report["n_skipped"]:
        lines += ["", f"skipped {report['n_skipped']} row(s) without a human_label"]
    return "\n".join(lines)


def _corrected_lines(report: dict[str, Any]) -> list[str]:
    """The judged and the corrected rate per dataset (and all), or why there are none."""
    omitted = report["corrected"]["omitted"]
    if omitted:
        return ["", f"no corrected rates: {omitted}"]
    header = [
        "dataset",
        "judged rate",
        "N",
        "judge UNCLEAR",
        "people n",
        f"corrected rate [{report['ci']:.0%} CI]",
    ]
    rows, marked, outside = [], False, 0
    for d, e in report["datasets"].items():
        lo, hi = e["corrected_rate_ci_low"], e["corrected_rate_ci_high"]
        low = e["corrected_rate_low_support"] == 1.0
        marked |= low
        outside += e["n_outside"] if d != ALL else 0
        rate = "n/a" if e["corrected_rate"] is None else f"{e['corrected_rate']:.3f}"
        ci = "" if lo is None else f" [{lo:.3f}, {hi:.3f}]"
        rows.append(
            [
                d,
                _pct(e["judged_rate"]),
                str(e["judged_rate_n"]),
                str(e["n_judged_unclear"]),
                str(e["corrected_rate_n"]),
                rate + ci + (f" {LOW_SUPPORT}" if low else ""),
            ]
        )
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = [
        "",
        "corrected rates (prediction-powered: the judge's rate over the N responses it decides,",
        "corrected by its errors on the n that people labelled; docs/validating-labels.md):",
        # Indented under its title, as the published check is: a row is no agreement row.
        *("  " + x for x in _grid([header, ["-" * w for w in widths], *rows])),
    ]
    if marked:
        lines.append(
            f"{LOW_SUPPORT} low support: fewer than score.min_items ({report['min_items']}) "
            "people's labels behind it"
        )
    if outside:
        lines.append(f"left out {outside} sample row(s) that are no response of the label tables")
    return lines


def _reference_lines(report: dict[str, Any]) -> list[str]:
    ref = report["reference"]
    ours = None if ref is None else report["datasets"].get(ref["dataset"])
    if ours is None:
        return []
    width = max(len(ref["short"]), len("here")) + 2
    return [
        "",
        f"{ref['dataset']} judge against {ref['who']}:",
        f"  {ref['short'] + ':':<{width}}agreement {ref['agreement']:.1%}, "
        f"kappa {ref['kappa']:.2f}, UNCLEAR {ref['unclear_rate']:.1%}",
        f"  {'here:':<{width}}agreement {_pct(ours['agreement'])}, kappa {_kappa(ours)}, "
        f"UNCLEAR {_pct(ours['machine_unclear_rate'])}",
    ]


# --- review queues --------------------------------------------------------------------------

# A person answers a queue's question as the judge does: 1, 0 or UNCLEAR (what 1 means: the
# spec's ``meaning``, the question's instruction).
QUEUE_OPTIONS = ["1", "0", "UNCLEAR"]


def question_name(protocol: Protocol[Any, Any], spec: JudgeSpec) -> str:
    """The label schema a review queue asks for ``spec``'s label, and so the name of the
    feedback a reviewer's answer is (``cues.syc``)."""
    return f"{protocol.name}.{spec.name}"


def _queue_clients(p: Params) -> tuple[Any, Any, str]:
    """An MLflow client, a tracing client (the review-queue and label-schema calls) on the
    project's store, and the id of ``tracking.experiment``, or an error naming the store."""
    import mlflow  # heavy: only the queue paths talk to an MLflow client
    from mlflow.tracing.client import TracingClient

    uri = tracking_uri(repo_root() / "mlruns")
    client = mlflow.MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(p.tracking.experiment)
    if exp is None:
        raise InputError(f"no experiment '{p.tracking.experiment}' in {uri}; run dvc repro first")
    # mlflow.genai.review_queues' and label_schemas' functions are these calls on the store of
    # the process-wide tracking URI; the client's own keep the URI out of process state.
    return client, TracingClient(uri), str(exp.experiment_id)


def _not_found(e: Exception) -> bool:
    return getattr(e, "error_code", "") == "RESOURCE_DOES_NOT_EXIST"


def sample_traces(
    spec: JudgeSpec,
    protocol: Protocol[Any, Any],
    p: Params,
    sample: pd.DataFrame,
    run_ids: list[str],
    where: Path,
) -> list[str]:
    """The trace of each row of ``sample`` (the sample's columns, as text; ``where``: its file,
    named in errors), in order: among the traces of ``protocol``'s child runs of ``run_ids``
    (a pipeline run means its children; none: the newest pipeline run), the one whose tags
    name the row's key and whose response is the row's. An error names the first row that has
    none (``tracking.traces: sample`` logs only some responses)."""
    from mlflow.exceptions import MlflowException  # heavy: mlflow, as for the client

    client, _, _ = _queue_clients(p)
    runs = find_runs(
        tracking_uri(repo_root() / "mlruns"),
        p.tracking.experiment,
        {},
        run_ids,
        latest=not run_ids,
        protocol=protocol.name,
    )
    pairs = set(zip(sample["model"], sample["dataset"], strict=True))
    tagged = [
        _tag_row(t.info.trace_id, t.info.tags)
        for r in runs
        if (r.model, r.dataset) in pairs
        for t in run_traces(client, r.experiment_id, r.run_id, spans=False)
    ]
    frame = _cell_columns(spec, pd.DataFrame(tagged, columns=[*TRACE_TAG_COLUMNS, "trace_id"]))
    key = list(spec.key)
    found: dict[tuple[str, ...], list[str]] = {}
    for k, t in zip(frame[key].itertuples(index=False, name=None), frame["trace_id"], strict=True):
        found.setdefault(k, []).append(t)
    out = []
    for i, row in enumerate(sample.to_dict("records")):
        k = tuple(str(row[c]) for c in key)
        for trace_id in found.get(k, []):
            try:
                spans = client.get_trace(trace_id).data.spans
            except MlflowException:
                continue  # deleted since it was listed
            if sha256_text(response_text(spans[0].outputs if spans else None)) == str(
                row["response_sha256"]
            ):
                out.append(trace_id)
                break
        else:
            whose = ", ".join(f"{c} {v}" for c, v in zip(key, k, strict=True))
            raise InputError(
                f"{where}: row {i + 1} (sample_id {row['sample_id']}; {whose}): no trace of this "
                f"response in {'runs ' + str(run_ids) if run_ids else 'the newest pipeline run'} "
                "(tracking.traces: sample logs only some; all logs every one)"
            )
    return out


TRACE_TAG_COLUMNS = ["model", "dataset", "item_id", "cell", "rep", "turn", "store_key"]


def _tag_row(trace_id: str, tags: Mapping[str, str]) -> list[str]:
    """A trace's ``TRACE_TAG_COLUMNS`` from its tags (``syps.traces``), then its id."""
    names = {"item_id": "item"}
    return [str(tags.get(f"{TAG}{names.get(c, c)}", "")) for c in TRACE_TAG_COLUMNS] + [trace_id]


def add_to_queue(
    spec: JudgeSpec, protocol: Protocol[Any, Any], p: Params, queue: str, trace_ids: list[str]
) -> None:
    """Create (or reuse) the review queue ``queue`` of ``tracking.experiment`` asking the
    judge's question (:func:`question_name`: a categorical label schema with the options
    ``QUEUE_OPTIONS``, created where the experiment lacks it) and attach ``trace_ids`` to it
    (attaching one again keeps its status). A queue of that name asking another question, or a
    schema of that name with other options, is an error: the answers would not be this
    judge's."""
    from mlflow.exceptions import MlflowException  # heavy: mlflow, as for the clients
    from mlflow.genai.label_schemas import InputCategorical

    _, tracing, experiment_id = _queue_clients(p)
    name = question_name(protocol, spec)
    try:
        schema = tracing._get_label_schema_by_name(experiment_id, name)
    except MlflowException as e:
        if not _not_found(e):
            raise
        schema = tracing._create_label_schema(
            experiment_id,
            name=name,
            type="feedback",
            input=InputCategorical(options=QUEUE_OPTIONS),
            instruction=f"The {spec.name} judge's question: {spec.meaning}.",
            enable_comment=True,
        )
    options = getattr(schema.input, "options", None)
    if options != QUEUE_OPTIONS:
        raise InputError(
            f"label schema {name!r} of experiment '{p.tracking.experiment}' offers {options}, "
            f"not {QUEUE_OPTIONS}: delete it (mlflow.genai.label_schemas) or rename it"
        )
    try:
        found = tracing._get_review_queue_by_name(experiment_id, queue)
    except MlflowException as e:
        if not _not_found(e):
            raise
        found = tracing._create_review_queue(
            experiment_id, name=queue, queue_type="custom", users=[], schema_ids=[schema.schema_id]
        )
    if schema.schema_id not in found.schema_ids:
        raise InputError(
            f"--queue {queue}: a review queue of that name exists and does not ask {name!r}; "
            "pick another name"
        )
    for k in range(0, len(trace_ids), LINK_BATCH):
        tracing._add_items_to_review_queue(found.queue_id, item_ids=trace_ids[k : k + LINK_BATCH])


def annotations_from_queue(
    spec: JudgeSpec,
    protocol: Protocol[Any, Any],
    p: Params,
    queue: str,
    items: Path | None = None,
    labels_dir: Path | None = None,
) -> pd.DataFrame:
    """The reviewers' answers to the review queue ``queue`` (``syps judge sample --queue``) as
    an annotated sample, one row per trace in the queue: the newest feedback named
    :func:`question_name` from a ``HUMAN`` source (the reviewer's name its source id; an item
    nobody answered yet has an empty ``human_label``, refused without ``--allow-missing``),
    assembled as for :func:`annotations_from_traces`."""
    from mlflow.exceptions import MlflowException  # heavy: mlflow, as for the clients

    out_dir = Path("out/protocols") / protocol.name
    client, tracing, experiment_id = _queue_clients(p)
    name = question_name(protocol, spec)
    try:
        found = tracing._get_review_queue_by_name(experiment_id, queue)
        schema = tracing._get_label_schema_by_name(experiment_id, name)
    except MlflowException as e:
        if not _not_found(e):
            raise
        raise InputError(
            f"--queue {queue}: {e.message}; make it with syps judge sample --queue {queue}"
        ) from None
    if schema.schema_id not in found.schema_ids:
        raise InputError(
            f"--queue {queue}: it does not ask {name!r}, the {spec.name} judge's question; pass "
            "the --protocol and --judge it was drawn for"
        )
    trace_ids: list[str] = []
    token = None
    while True:
        page = tracing._list_review_queue_items(found.queue_id, max_results=500, page_token=token)
        trace_ids += [i.item_id for i in page]
        token = page.token
        if not token:
            break
    if not trace_ids:
        raise InputError(f"--queue {queue}: holds no trace yet")
    rows = []
    for trace_id in trace_ids:
        trace = client.get_trace(trace_id)
        answers = [
            a
            for a in trace.info.assessments
            if a.name == name and a.source.source_type == "HUMAN" and a.valid is not False
        ]
        newest = max(
            answers, key=lambda a: a.last_update_time_ms or a.create_time_ms or 0, default=None
        )
        spans = trace.data.spans
        rows.append(
            [
                *_tag_row(trace_id, trace.info.tags),
                response_text(spans[0].outputs if spans else None),
                "" if newest is None or newest.value is None else str(newest.value),
                "" if newest is None else newest.source.source_id,
            ]
        )
    people = pd.DataFrame(
        rows, columns=[*TRACE_TAG_COLUMNS, "trace_id", "response", "human_label", "reviewer"]
    )
    return _as_sample(
        spec, people, items or out_dir / "items.parquet", labels_dir or out_dir / "labels"
    )
