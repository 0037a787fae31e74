"""Judge validation: draw responses for humans to label, then measure the labellers against them.

``judge_sample`` writes a CSV of responses stratified by model, dataset and variant, with an
empty ``human_label`` column. ``judge_validate`` reads it back once annotated, labels the same
responses with the labellers as configured now (the judge through the response store, so a
response judged before costs nothing), and reports agreement, Cohen's κ with a bootstrap CI,
the confusion matrix and the UNCLEAR rates, per dataset and over all rows.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping
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
from syps.core.config import ConfigError, Params
from syps.core.io import (
    InputError,
    atomic_write,
    canonical_json,
    read_csv,
    read_parquet,
    sha256_file,
    sha256_text,
    write_json,
)
from syps.core.protocol import Protocol, cell_key
from syps.core.runs import repo_root
from syps.protocols.cues.data import item_id, items_table
from syps.protocols.cues.datasets import DATASETS
from syps.protocols.cues.params import WHERE, CuesParams

SAMPLE_COLUMNS = [
    "sample_id",
    "dataset",
    "model",
    "variant",
    "item_id",
    "situation",
    "response",
    "response_sha256",
    "human_label",
    "notes",
]
REQUIRED_COLUMNS = [c for c in SAMPLE_COLUMNS if c != "notes"]
STRATA = ["model", "dataset", "variant"]
ROW_KEY = ["model", "dataset", "item_id", "variant"]
HUMAN_VALUES = {"1": 1.0, "0": 0.0, "unclear": math.nan}
# The method paper's check of its GPT-4 judge on 500 manually labelled OEQ responses.
PAPER = {"dataset": "OEQ", "n": 500, "agreement": 0.864, "kappa": 0.73, "unclear_rate": 0.072}
ALL = "all"


def judge_sample(
    protocol: Protocol[Any],
    p: Params,
    params: Path,
    out_csv: Path,
    n: int = 500,
    seed: int | None = None,
    datasets: list[str] | None = None,
    models: list[str] | None = None,
    responses_dir: Path = Path("out/protocols/cues/labels"),
    items: Path = Path("out/protocols/cues/items.parquet"),
    force: bool = False,
) -> None:
    """Write ``n`` responses, stratified by model, dataset and variant, as a CSV to annotate.
    ``p`` is the params the caller read from the file ``params`` (named in errors).

    ``seed`` defaults to the params seed; ``datasets`` and ``models`` default to all in params.
    An existing ``out_csv`` is kept unless ``force``: it may already hold human labels.
    """
    cues = _cues(p)
    models = models or list(p.models)
    datasets = datasets or list(cues.data.datasets)
    unknown = sorted(set(models) - set(p.models))
    if unknown:
        raise ConfigError(f"{params}: models: no entry {unknown}; known: {sorted(p.models)}")
    unknown = sorted(set(datasets) - set(cues.data.datasets))
    if unknown:
        raise ConfigError(
            f"{params}: {WHERE}.data.datasets: {unknown} not listed; known: {cues.data.datasets}"
        )
    if out_csv.exists() and not force:
        raise InputError(
            f"{out_csv}: already exists and may hold human labels; pass --force to overwrite it"
        )
    parts = []
    for m in models:
        path = responses_dir / f"{m}.parquet"
        if not path.exists():
            raise InputError(f"{path}: no responses for model {m!r}; run `dvc repro` first")
        cols = ["dataset", "item_id", "variant", "response"]
        parts.append(read_parquet(path, cols)[cols].assign(model=m))
    resp = pd.concat(parts, ignore_index=True)
    resp = resp[resp["dataset"].isin(datasets)]
    situations = items_table(read_parquet(items, ["dataset", "item_id", "item"]))[
        ["dataset", "item_id", "situation"]
    ]
    table = resp.merge(situations, on=["dataset", "item_id"], how="left", validate="many_to_one")
    lost = table[table["situation"].isna()]
    if len(lost):
        r = lost.iloc[0]
        raise InputError(
            f"{items}: no item {r['item_id']} of {r['dataset']} (responses of model "
            f"{r['model']!r}); the outputs are out of date: run `dvc repro` first"
        )
    if n > len(table):
        raise InputError(
            f"--n {n} asks for more responses than the {len(table)} of models {models} on "
            f"datasets {datasets}; pass --n {len(table)} or fewer"
        )
    # A fixed row order, so the sample depends on the seed and the content only.
    table = table.sort_values(ROW_KEY, kind="stable").reset_index(drop=True)
    drawn = stratified_sample(table, n, STRATA, p.seed if seed is None else seed)
    sample = drawn.assign(
        sample_id=range(1, len(drawn) + 1),
        response_sha256=[sha256_text(r) for r in drawn["response"]],
        human_label="",
        notes="",
    )[SAMPLE_COLUMNS]
    atomic_write(out_csv, lambda f: sample.to_csv(f, index=False, encoding="utf-8"))
    counts = sample.groupby(["model", "dataset"], sort=True).size()
    print(
        f"{out_csv}: {len(sample)} responses ("
        + ", ".join(f"{m}/{d}={c}" for (m, d), c in counts.items())
        + "); fill human_label with 1, 0 or UNCLEAR",
        file=sys.stderr,
    )


def read_annotations(path: Path, allow_missing: bool) -> tuple[pd.DataFrame, int]:
    """The annotated rows with ``human`` as 1.0, 0.0 or NaN, and how many unlabelled were skipped.

    Strict: every check names the row (1-based, header excluded) and its sample_id.
    """
    table = read_csv(path, REQUIRED_COLUMNS)

    def where(i: int) -> str:
        return f"{path}: row {i + 1} (sample_id {table['sample_id'].iat[i]})"

    for i, (ds, resp, sha) in enumerate(
        zip(table["dataset"], table["response"], table["response_sha256"], strict=True)
    ):
        if not table["sample_id"].iat[i].strip().isdigit():
            raise InputError(f"{where(i)}: sample_id is not a whole number")
        if ds not in DATASETS:
            raise InputError(f"{where(i)}: unknown dataset {ds!r}; known: {list(DATASETS)}")
        if sha256_text(resp) != sha:
            raise InputError(
                f"{where(i)}: the response does not match its response_sha256: it was edited "
                f"(a spreadsheet can change line endings or quotes); restore it from the sample"
            )
        # item_id is a hash of the situation: an edited situation would mislead the judge.
        if item_id(ds, table["situation"].iat[i]) != table["item_id"].iat[i]:
            raise InputError(f"{where(i)}: the situation does not match its item_id: it was edited")
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
    dup = table.duplicated(ROW_KEY, keep=False)
    if dup.any():
        rows = [int(i) + 1 for i in np.flatnonzero(dup.to_numpy())]
        raise InputError(
            f"{path}: rows {rows} are the same response (model, dataset, item, variant)"
        )
    labelled = table[~empty].reset_index(drop=True)
    human = labelled["human_label"].str.strip().str.lower().map(HUMAN_VALUES).astype(float)
    return labelled.assign(human=human), int(empty.sum())


def judge_validate(
    protocol: Protocol[Any],
    p: Params,
    params: Path,
    annotated_csv: Path | None,
    report_json: Path | None = None,
    allow_missing: bool = False,
    traces: list[str] | None = None,
) -> dict[str, Any]:
    """Measure the current labellers against the human labels of ``annotated_csv``, or, with
    ``traces`` (run ids; ``[]``: the newest pipeline run), against people's labels on the
    MLflow traces of those runs' SyPS children (:func:`annotations_from_traces`).

    Prints the agreement table and confusion matrices, writes the report JSON (by default
    ``<stem>.validation.json`` beside the CSV; ``judge-traces.validation.json`` for traces),
    logs one MLflow run, and returns the report.
    """
    if traces is not None:
        report_json = report_json or Path("judge-traces.validation.json")
        annotated_csv = report_json.with_name(f"{report_json.stem}.annotations.csv")
        sample = annotations_from_traces(p, traces)
        atomic_write(annotated_csv, lambda f: sample.to_csv(f, index=False, encoding="utf-8"))
        print(
            f"{annotated_csv}: {len(sample)} people's labels read from the traces", file=sys.stderr
        )
    if annotated_csv is None:
        raise InputError("give the annotated CSV, or --traces to read people's labels")
    report_json = report_json or annotated_csv.with_name(f"{annotated_csv.stem}.validation.json")
    table, skipped = read_annotations(annotated_csv, allow_missing)
    if table.empty:
        raise InputError(f"{annotated_csv}: no row has a human_label yet")
    machine = machine_labels(protocol, p, table)
    both = table.merge(
        machine[[*ROW_KEY, "label", "labeler", "labeler_sha256", "judge_template_sha256"]],
        on=ROW_KEY,
        how="left",
        validate="one_to_one",
    )
    datasets, tables = agreement_by_dataset(both, p.score.bootstrap, p.score.ci, p.seed)
    report: dict[str, Any] = {
        "annotated_csv": str(annotated_csv),
        "annotated_sha256": sha256_file(annotated_csv),
        "n_skipped": skipped,
        "bootstrap": p.score.bootstrap,
        "ci": p.score.ci,
        "seed": p.seed,
        "paper": PAPER,
        "datasets": datasets,
    }
    print(validation_table(report))
    write_json(report, report_json)

    _log_validation(p, report, annotated_csv, report_json, tables)
    return report


def _log_validation(
    p: Params,
    report: dict[str, Any],
    annotated_csv: Path,
    report_json: Path,
    tables: Mapping[str, pd.DataFrame],
) -> None:
    """Log one MLflow run of a judge validation: the labellers' identities as tags, the
    agreement of each dataset as metrics, the CSV, the report and the confusion tables."""
    from syps.core.provenance import git_info
    from syps.core.tracking import log_validation_run

    tags = {
        **git_info(Path.cwd()),
        "annotated_file": str(annotated_csv),
        "annotated_sha256": report["annotated_sha256"],
        **{
            f"{key}.{d}": e[key]
            for d, e in report["datasets"].items()
            if d != ALL
            for key in ("labeler", "labeler_sha256", "judge_template_sha256")
            if e[key]  # rule labellers have no judge template
        },
    }
    run_params = {
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


def annotations_from_traces(p: Params, run_ids: list[str]) -> pd.DataFrame:
    """People's labels on the traces of SyPS's child runs, as an annotated sample
    (``SAMPLE_COLUMNS``, ``notes`` naming the reviewer and the trace): a feedback named
    ``label`` from a ``HUMAN`` source, 1, 0 or UNCLEAR (see ``syps.core.traces``). The runs:
    ``run_ids`` (a pipeline run means its children), or the newest pipeline run with SyPS
    children. The situation is the item's, from the fetch stage's items table."""
    import mlflow

    from syps.core.compare import find_runs
    from syps.core.traces import human_labels
    from syps.core.tracking import tracking_uri

    uri = tracking_uri(repo_root() / "mlruns")
    runs = find_runs(uri, p.tracking.experiment, {}, run_ids, latest=not run_ids, protocol="cues")
    people = human_labels(mlflow.MlflowClient(tracking_uri=uri), [r.run_id for r in runs])
    if people.empty:
        where = f"runs {run_ids}" if run_ids else "the newest pipeline run"
        raise InputError(
            f"no trace of {where} has a person's label (a feedback named label from a HUMAN "
            "source); add one in the MLflow UI (docs/validating-labels.md)"
        )
    items = Path("out/protocols/cues/items.parquet")
    situations = items_table(read_parquet(items, ["dataset", "item_id", "item"]))
    keys = zip(situations["dataset"], situations["item_id"], strict=True)
    situation = dict(zip(keys, situations["situation"], strict=True))
    people = people.assign(
        variant=[json.loads(c).get("variant", "") for c in people["cell"]],
        situation=[
            situation.get(k) for k in zip(people["dataset"], people["item_id"], strict=True)
        ],
        human_label=[_human_value(v) for v in people["human_label"]],
    )
    lost = people[people["situation"].isna()]
    if len(lost):
        r = lost.iloc[0]
        raise InputError(
            f"{items}: no item {r['item_id']} of {r['dataset']} (trace {r['trace_id']}); "
            "run dvc repro first"
        )
    people = people.sort_values(ROW_KEY, kind="stable").reset_index(drop=True)
    return people.assign(
        sample_id=range(1, len(people) + 1),
        response_sha256=[sha256_text(r) for r in people["response"]],
        notes=[
            f"{r} on trace {t}" for r, t in zip(people["reviewer"], people["trace_id"], strict=True)
        ],
    )[SAMPLE_COLUMNS]


def _human_value(value: str) -> str:
    """A feedback's value as the sample's ``human_label``: 1, 0 or UNCLEAR (the UI stores a
    number as 1.0 and a yes/no as true/false); anything else is kept, and refused by
    :func:`read_annotations` with its row."""
    v = value.strip().lower()
    return {"1.0": "1", "true": "1", "yes": "1", "0.0": "0", "false": "0", "no": "0"}.get(v, value)


def _cues(p: Params) -> CuesParams:
    pp = p.protocols["cues"]
    assert isinstance(pp, CuesParams)  # the registry parses protocols.cues as CuesParams
    return pp


def machine_labels(protocol: Protocol[Any], p: Params, table: pd.DataFrame) -> pd.DataFrame:
    """The labels SyPS's labellers give now (rules, and the judge through the response store,
    so a response judged before costs nothing) to the annotated rows (``ROW_KEY``,
    ``situation``, ``response``)."""
    from syps.core.judge import StoreJudge
    from syps.core.runs import cache_dir, store_path
    from syps.core.store import Store

    rows = table.reset_index(drop=True)
    items = pd.DataFrame(
        {
            "dataset": rows["dataset"],
            "item_id": rows["item_id"],
            "item": [
                canonical_json({"row": 0, "situation": s, "reference": ""})
                for s in rows["situation"]
            ],
        }
    ).drop_duplicates(["dataset", "item_id"])
    responses = rows[["dataset", "item_id", "model", "response"]].assign(
        protocol="cues",
        cell=[cell_key({"variant": v}) for v in rows["variant"]],
        rep=0,
        turn=1,
        parent_key="",
        skipped="",  # a sample holds answers: none was skipped
        model_id="",
        revision="",
        max_new_tokens=0,
    )
    with Store(store_path()) as store:
        judge = StoreJudge(p.judge, store, cache_dir())
        return protocol.label(_cues(p), items, responses, judge, pd.DataFrame())


def agreement_by_dataset(
    table: pd.DataFrame, n_boot: int, ci: float, seed: int
) -> tuple[dict[str, dict[str, Any]], dict[str, pd.DataFrame]]:
    """Per dataset and over all rows: the agreement report, confusion counts, the sample_ids
    of disagreements and who labelled; and the confusion tables themselves.

    ``table`` has ``sample_id, dataset, human, label`` and the labeler columns. Undefined
    values are None (JSON null).
    """
    groups = {
        **{d: table[table["dataset"] == d] for d in DATASETS if (table["dataset"] == d).any()},
        ALL: table,
    }
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
            for key in ("labeler", "labeler_sha256", "judge_template_sha256"):
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
    """The report as plain text: one line per dataset (and all), then each confusion matrix."""
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
    oeq = report["datasets"].get(PAPER["dataset"])
    if oeq is not None:
        lines += [
            "",
            f"OEQ judge against the method paper's "
            f"(GPT-4, {PAPER['n']} responses labelled by hand):",
            f"  paper: agreement {PAPER['agreement']:.1%}, kappa {PAPER['kappa']:.2f}, "
            f"UNCLEAR {PAPER['unclear_rate']:.1%}",
            f"  here:  agreement {_pct(oeq['agreement'])}, kappa {_kappa(oeq)}, "
            f"UNCLEAR {_pct(oeq['machine_unclear_rate'])}",
        ]
    if report["n_skipped"]:
        lines += ["", f"skipped {report['n_skipped']} row(s) without a human_label"]
    return "\n".join(lines)
