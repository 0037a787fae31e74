"""The ``syps`` command line: every pipeline stage, a standalone scorer, and judge validation."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from syps import pipeline
from syps.backends import BackendError
from syps.config import ConfigError
from syps.io import InputError
from syps.lint import lint

app = typer.Typer(
    help="SyPS: how an LLM's sycophancy shifts when the same situation is told with different "
    "social cues. `dvc repro` runs the whole pipeline; these commands run one step.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def run_stage(fn: Callable[..., None]) -> None:
    """Run a pipeline function as a command; a bad input ends with its message and exit code 2."""
    typer.run(_friendly(fn))


def _friendly(fn: Callable[..., None]) -> Callable[..., None]:
    import functools

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        try:
            fn(*args, **kwargs)
        except (ConfigError, InputError, BackendError) as e:
            print(f"error: {e}", file=sys.stderr)
            raise typer.Exit(2) from None

    return wrapper


app.command("fetch", help="Read the configured datasets into the normalised items table.")(
    _friendly(pipeline.fetch)
)
app.command("variants", help="Render every item under every variant P0..P7.")(
    _friendly(pipeline.variants)
)
app.command(
    "lint", help="Check that every variant differs from P0 only in its cue (before generate)."
)(_friendly(lint))
app.command("generate", help="Generate a response to every prompt with one model of params.")(
    _friendly(pipeline.generate)
)
app.command("label", help="Label responses: rules for AITA-YTA and SS, the judge for OEQ.")(
    _friendly(pipeline.label)
)
app.command(
    "report",
    help="Score all models' labels, write metrics and plots, log to MLflow, print the summary.",
)(_friendly(pipeline.score))


@app.command("score")
def score_cmd(
    labels: Annotated[
        Path, typer.Argument(help="CSV or parquet: dataset, model, item_id, variant, label")
    ],
    bootstrap: Annotated[int, typer.Option(help="bootstrap resamples", min=1)] = 1000,
    ci: Annotated[float, typer.Option(help="confidence level")] = 0.95,
    seed: Annotated[int, typer.Option(help="bootstrap seed")] = 0,
) -> None:
    """Score a label table; print {model: {dataset: {metric: value}}} as JSON.

    An empty label or NaN is UNCLEAR. Usable on labels from outside the pipeline.
    """
    from syps.metrics import LABEL_COLUMNS, score_labels
    from syps.report import jsonable

    if not 0 < ci < 1:
        raise typer.BadParameter("must lie strictly between 0 and 1", param_hint="--ci")

    def run() -> None:
        table = _read_labels(labels, LABEL_COLUMNS)
        print(
            json.dumps(jsonable(score_labels(table, bootstrap, ci, seed)), indent=2, sort_keys=True)
        )

    _friendly(run)()


def _read_labels(path: Path, required: list[str]) -> Any:
    import pandas as pd

    from syps.io import read_parquet

    if path.suffix == ".parquet":
        # The user's own file, perhaps: "rerun the stage" is advice for stage outputs only.
        fix = "if it is out/labels/<model>.parquet, rerun `dvc repro`; otherwise write it again"
        table = read_parquet(path, required, recovery=fix)
    else:
        from syps.data import read_csv

        table = read_csv(path, required)
    label = pd.to_numeric(table["label"].replace("", None), errors="coerce")
    bad = table["label"].notna() & (table["label"].astype(str) != "") & label.isna()
    bad |= label.notna() & ~label.isin([0, 1])
    if bad.any():
        row = int(bad.to_numpy().nonzero()[0][0]) + 1
        value = table["label"].iloc[row - 1]
        raise InputError(f"{path}: row {row}: label '{value}' is not 0, 1 or empty")
    return table.assign(label=label.astype(float))


@app.command("summary")
def summary_cmd(
    metrics: Annotated[Path, typer.Argument(help="metrics.json written by the score stage")],
    ci: Annotated[float, typer.Option(help="confidence level the CIs were computed at")] = 0.95,
) -> None:
    """Print the model x dataset summary table of a metrics.json."""
    from syps.report import summary_table

    def run() -> None:
        try:
            raw = json.loads(metrics.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as e:
            raise InputError(f"{metrics}: cannot read metrics ({e})") from None
        try:
            scores = {
                str(m): {
                    str(d): {str(k): (math.nan if v is None else float(v)) for k, v in ms.items()}
                    for d, ms in ds.items()
                }
                for m, ds in raw.items()
            }
            print(summary_table(scores, ci))
        except (AttributeError, TypeError, ValueError, KeyError) as e:
            raise InputError(
                f"{metrics}: not a metrics file shaped {{model: {{dataset: {{metric: value}}}}}}"
                f" ({type(e).__name__}: {e})"
            ) from None

    _friendly(run)()


judge = typer.Typer(
    help="Validate the labellers against human labels: draw a sample to annotate, then measure "
    "agreement and Cohen's kappa on it.",
    no_args_is_help=True,
)
app.add_typer(judge, name="judge")

ParamsOption = Annotated[Path, typer.Option("--params", help="params file")]


@judge.command(
    "sample",
    help="Draw responses, stratified by model, dataset and variant, into a CSV to annotate.\n\n"
    "Fill its human_label column with 1 (sycophantic), 0 (not) or UNCLEAR, leave the other "
    "columns as they are, then run `syps judge validate` on it.",
)
def judge_sample_cmd(
    out: Annotated[Path, typer.Option(help="CSV to write")] = Path("judge_sample.csv"),
    params: ParamsOption = Path("params.yaml"),
    n: Annotated[int, typer.Option("--n", help="responses to draw", min=1)] = 500,
    seed: Annotated[int | None, typer.Option(help="sampling seed (default: params seed)")] = None,
    dataset: Annotated[
        list[str] | None, typer.Option(help="only this dataset (repeatable; default: all)")
    ] = None,
    model: Annotated[
        list[str] | None, typer.Option(help="only this model (repeatable; default: all)")
    ] = None,
    responses: Annotated[Path, typer.Option(help="directory of <model>.parquet responses")] = Path(
        "out/responses"
    ),
    items: Annotated[Path, typer.Option(help="items table")] = Path("out/items.parquet"),
    force: Annotated[bool, typer.Option("--force", help="overwrite an existing --out")] = False,
) -> None:
    """Draw a stratified sample of responses to annotate by hand."""
    from syps.annotate import judge_sample

    _friendly(judge_sample)(
        params, out, n, seed, dataset or None, model or None, responses, items, force
    )


@judge.command(
    "validate",
    help="Measure the labellers as configured now against the human labels of an annotated "
    "sample: agreement, Cohen's kappa with a bootstrap CI, confusion matrix, UNCLEAR rates.\n\n"
    "Prints the table, writes the report JSON and logs one MLflow run tagged "
    "syps.kind=judge-validation.",
)
def judge_validate_cmd(
    annotated: Annotated[Path, typer.Argument(help="the sample CSV with human_label filled in")],
    params: ParamsOption = Path("params.yaml"),
    report: Annotated[
        Path | None, typer.Option(help="report JSON (default: <csv stem>.validation.json)")
    ] = None,
    allow_missing: Annotated[
        bool,
        typer.Option("--allow-missing", help="skip rows whose human_label is empty, not fail"),
    ] = False,
) -> None:
    """Validate the labellers against an annotated sample."""
    from syps.annotate import judge_validate

    def run() -> None:
        judge_validate(params, annotated, report, allow_missing)

    _friendly(run)()


@app.command("compare")
def compare_cmd(
    experiment: Annotated[
        str, typer.Option(help="MLflow experiment of the pipeline runs")
    ] = "syps",
    tag: Annotated[
        list[str] | None,
        typer.Option(help="only pipeline runs with this tag, as key=value (repeatable)"),
    ] = None,
    run_id: Annotated[
        list[str] | None,
        typer.Option(
            "--run-id", help="a pipeline (parent) run, or one child run, by id (repeatable)"
        ),
    ] = None,
    all_runs: Annotated[
        bool, typer.Option("--all", help="every pipeline run of the experiment, not the latest")
    ] = False,
    metric: Annotated[
        list[str] | None,
        typer.Option(
            help="metric column (repeatable; default: base_syc spss signed_sensitivity "
            "unclear_rate n_items)"
        ),
    ] = None,
    markdown: Annotated[bool, typer.Option("--markdown", help="a markdown table")] = False,
    out: Annotated[
        Path | None, typer.Option(help="write the table here instead of printing")
    ] = None,
    mlruns: Annotated[
        Path | None, typer.Option(help="MLflow store directory (default: <repo>/mlruns)")
    ] = None,
) -> None:
    """Print a model x dataset table of the metrics, with CIs, of logged pipeline runs.

    By default the children of the latest pipeline run; judge-validation runs never appear.
    """
    from syps.compare import DEFAULT_METRICS, compare_table, find_runs, parse_tags
    from syps.io import write_text
    from syps.tracking import tracking_uri

    def run() -> None:
        store = mlruns or pipeline.repo_root() / "mlruns"
        # Opening a missing sqlite store would create an empty one; say what is missing instead.
        if not (store / "mlflow.db").is_file():
            raise InputError(f"{store}: no MLflow store (mlflow.db) here; run dvc repro first")
        runs = find_runs(
            tracking_uri(store), experiment, parse_tags(tag or []), run_id or [], not all_runs
        )
        table = compare_table(runs, metric or DEFAULT_METRICS, "markdown" if markdown else "text")
        if out is None:
            print(table)
        else:
            write_text(table + "\n", out)

    _friendly(run)()


@app.command("audit")
def audit_cmd(
    run: Annotated[str, typer.Argument(help="a pipeline run: its id, a child's id, or its name")],
    other: Annotated[
        str | None, typer.Argument(help="a second run: show what changed from RUN to it")
    ] = None,
    mlruns: Annotated[
        Path | None, typer.Option(help="MLflow store directory (default: <repo>/mlruns)")
    ] = None,
) -> None:
    """Show the chain behind a run's numbers (data hash, every template's exact text and
    sha256, models and revisions, generation and judge settings, code, counts), or with a
    second run, what changed. Reads only the MLflow store, so a copy of mlruns/ is enough."""
    from syps.audit import load_audit, render_audit, render_diff

    def go() -> None:
        store = mlruns or pipeline.repo_root() / "mlruns"
        first = load_audit(store, run)
        print(
            render_audit(first) if other is None else render_diff(first, load_audit(store, other))
        )

    _friendly(go)()
