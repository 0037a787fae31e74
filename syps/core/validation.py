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
from syps.core.protocol import LINEAGE_COLUMNS, JudgeSpec, Protocol
from syps.core.provenance import git_info
from syps.core.runs import cache_dir, repo_root, store_path
from syps.core.store import Store
from syps.core.traces import human_labels
from syps.core.tracking import log_validation_run, tracking_uri

HUMAN_VALUES = {"1": 1.0, "0": 0.0, "unclear": math.nan}
# What the relabel returns per row; judge_template_sha256 may be left out ("": a rule).
MACHINE_COLUMNS = ["label", "labeler", "labeler_sha256", "judge_template_sha256"]
LABELER_KEYS = ["labeler", "labeler_sha256", "judge_template_sha256"]
ITEM_COLUMNS = ["dataset", "item_id", "item"]
ALL = "all"


def spec_of(protocol: Protocol[Any], judge: str | None) -> JudgeSpec:
    """``protocol``'s judge named ``judge`` (None: its first), or an error naming its judges."""
    specs = {s.name: s for s in protocol.judges}
    if not specs:
        raise InputError(f"--protocol {protocol.name}: has no judge to validate")
    if judge is None:
        return next(iter(specs.values()))
    if judge not in specs:
        raise InputError(
            f"--judge {judge}: no such judge of {protocol.name}; its judges: {list(specs)}"
        )
    return specs[judge]


def _own_params(p: Params, params: Path, protocol: Protocol[Any]) -> ProtocolParams:
    if protocol.name not in p.protocols:
        raise ConfigError(f"{params}: protocols.{protocol.name}: not configured")
    return p.protocols[protocol.name]


# --- sample ---------------------------------------------------------------------------------


def judge_sample(
    spec: JudgeSpec,
    protocol: Protocol[Any],
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
) -> None:
    """Write ``n`` of the label rows the judge decides, stratified by its strata, as a CSV to
    annotate. ``p`` is the params the caller read from the file ``params`` (named in errors).

    ``seed`` defaults to the params seed; ``models`` to all in params, ``datasets`` to all in
    the items table (``items``; ``responses_dir`` holds the label tables). An existing
    ``out_csv`` is kept unless ``force``: it may already hold human labels.
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
    atomic_write(out_csv, lambda f: sample.to_csv(f, index=False, encoding="utf-8"))
    counts = sample.groupby(["model", "dataset"], sort=True).size()
    print(
        f"{out_csv}: {len(sample)} responses ("
        + ", ".join(f"{m}/{d}={c}" for (m, d), c in counts.items())
        + f"); fill human_label with {spec.meaning}",
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
    protocol: Protocol[Any],
    p: Params,
    params: Path,
    annotated_csv: Path | None,
    report_json: Path | None = None,
    allow_missing: bool = False,
    traces: list[str] | None = None,
) -> dict[str, Any]:
    """Measure the judge as configured now against the human labels of ``annotated_csv``, or,
    with ``traces`` (run ids; ``[]``: the newest pipeline run), against people's labels on the
    MLflow traces of those runs' children of ``protocol`` (:func:`annotations_from_traces`).

    Prints the agreement table and confusion matrices, writes the report JSON (by default
    ``<stem>.validation.json`` beside the CSV; ``judge-traces.validation.json`` for traces),
    logs one MLflow run, and returns the report.
    """
    own = _own_params(p, params, protocol)
    if traces is not None:
        report_json = report_json or Path("judge-traces.validation.json")
        annotated_csv = report_json.with_name(f"{report_json.stem}.annotations.csv")
        sample = annotations_from_traces(spec, protocol, p, traces)
        atomic_write(annotated_csv, lambda f: sample.to_csv(f, index=False, encoding="utf-8"))
        print(
            f"{annotated_csv}: {len(sample)} people's labels read from the traces", file=sys.stderr
        )
    if annotated_csv is None:
        raise InputError("give the annotated CSV, or --traces to read people's labels")
    report_json = report_json or annotated_csv.with_name(f"{annotated_csv.stem}.validation.json")
    table, skipped = read_annotations(spec, annotated_csv, allow_missing)
    if table.empty:
        raise InputError(f"{annotated_csv}: no row has a human_label yet")
    machine = machine_labels(spec, protocol, p, own, table)
    both = table.assign(**{c: machine[c].to_numpy() for c in MACHINE_COLUMNS})
    datasets, tables = agreement_by_dataset(spec, both, p.score.bootstrap, p.score.ci, p.seed)
    report: dict[str, Any] = {
        "protocol": protocol.name,
        "judge": spec.name,
        "annotated_csv": str(annotated_csv),
        "annotated_sha256": sha256_file(annotated_csv),
        "n_skipped": skipped,
        "bootstrap": p.score.bootstrap,
        "ci": p.score.ci,
        "seed": p.seed,
        "reference": None if spec.reference is None else asdict(spec.reference),
        "datasets": datasets,
    }
    print(validation_table(report))
    write_json(report, report_json)
    _log_run(p, report, annotated_csv, report_json, tables)
    return report


def machine_labels(
    spec: JudgeSpec, protocol: Protocol[Any], p: Params, own: ProtocolParams, table: pd.DataFrame
) -> pd.DataFrame:
    """The labels the judge as configured now (``p.judge``; ``own``: the protocol's params)
    gives the annotated rows, through the response store (a prompt judged before costs
    nothing), in row order: ``MACHINE_COLUMNS``."""
    rows = table.reset_index(drop=True)
    with Store(store_path()) as store:
        judge = StoreJudge(p.judge, store, cache_dir())
        out = spec.relabel(protocol, own, rows, judge).reset_index(drop=True)
    if "judge_template_sha256" not in out.columns:
        out = out.assign(judge_template_sha256="")
    lacking = [c for c in MACHINE_COLUMNS if c not in out.columns]
    if len(out) != len(rows) or lacking:
        raise RuntimeError(
            f"judge {spec.name}: relabel gave {len(out)} rows for {len(rows)}"
            + (f", without {lacking}" if lacking else "")
        )
    return out.assign(label=out["label"].astype(float))


def _log_run(
    p: Params,
    report: dict[str, Any],
    annotated_csv: Path,
    report_json: Path,
    tables: Mapping[str, pd.DataFrame],
) -> None:
    """One MLflow run (``syps.kind=judge-validation``): the labellers' identities as tags, the
    settings as params, every number per dataset as a metric, the files as artifacts."""
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
        "judge_model": p.judge.model.model,
        "judge_min_margin": str(p.judge.min_margin),
    }
    metrics = {
        f"{d}/{k}": (math.nan if e[k] is None else float(e[k]))
        for d, e in report["datasets"].items()
        for k in REPORT_KEYS
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
    protocol: Protocol[Any],
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
    people = _cell_columns(spec, people)
    if spec.reads:
        people = _with_labels(spec, people, labels_dir or out_dir / "labels")
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
            f"{r} on trace {t}" for r, t in zip(people["reviewer"], people["trace_id"], strict=True)
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
    """The report as plain text: one line per dataset (and all), then each confusion matrix,
    then the published check where the report has its dataset."""
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
