"""The ``syps`` command line: every pipeline stage, a standalone scorer, and judge validation."""

from __future__ import annotations

import inspect
import json
import math
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from syps import pipeline
from syps.backends import BackendError
from syps.config import ConfigError
from syps.io import InputError
from syps.protocols import stages as pstages
from syps.protocols.cues.datasets import labeling_summary
from syps.protocols.cues.lint import lint
from syps.runs import repo_root

app = typer.Typer(
    help="SyPS: how an LLM's sycophancy shifts when the same situation is told with different "
    "social cues. `dvc repro` runs the whole pipeline; these commands run one step.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Click's plain help: typer's rich help labels every flag (--force, even --help) `<bool>`
    # as if it took a value.
    rich_markup_mode=None,
)


def run_stage(fn: Callable[..., None]) -> None:
    """Run a pipeline function as a command; a bad input ends with its message and exit code 2."""
    stage = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)
    stage.command()(stage_command(fn))
    stage()


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


# Help for the stage commands' positional paths, by parameter name (the functions live in
# pipeline.py and lint.py, which know nothing of the CLI); in brackets what dvc.yaml passes.
_PARAMS_HELP = "parameters file [params.yaml]"
_ITEMS_HELP = "items table, written by fetch [out/items.parquet]"
_PROMPTS_HELP = "prompts table, written by variants [out/prompts.parquet]"
STAGE_ARGS: dict[Callable[..., None], dict[str, str]] = {
    pipeline.fetch: {"params": _PARAMS_HELP, "out": "items table to write [out/items.parquet]"},
    pipeline.variants: {
        "params": _PARAMS_HELP,
        "items": _ITEMS_HELP,
        "out": "prompts table to write [out/prompts.parquet]",
    },
    lint: {
        "params": _PARAMS_HELP,
        "items": _ITEMS_HELP,
        "prompts": _PROMPTS_HELP,
        "out": "lint report to write, also on failure [out/lint.json]",
    },
    pipeline.generate: {
        "params": _PARAMS_HELP,
        "prompts": _PROMPTS_HELP,
        "model": "the model's name under `models` in the parameters file [smollm2-135m]",
        "out": "responses table to write [out/responses/<model>.parquet]",
    },
    pipeline.label: {
        "params": _PARAMS_HELP,
        "items": _ITEMS_HELP,
        "responses": "responses table, written by generate [out/responses/<model>.parquet]",
        "out": "labels table to write [out/labels/<model>.parquet]",
    },
    pipeline.score: {
        "params": _PARAMS_HELP,
        "items": _ITEMS_HELP,
        "prompts": _PROMPTS_HELP,
        "responses": "directory of <model>.parquet responses, one per model [out/responses]",
        "labels": "directory of <model>.parquet labels, one per model [out/labels]",
        "data_dvc": "the data's .dvc file; the md5 of data/ is read from the dvc.lock beside it "
        "[data.dvc]",
        "metrics": "metrics file to write [metrics.json]",
        "plots": "directory to write the plot data (CSV) into [out/plots]",
        "figures": "directory to write the figures (PNG) into [out/figures]",
        "flips": "directory to write the flip tables (CSV, HTML) into [out/flips]",
        "tracks": "directory of the protocols' MLflow bundles, <protocol>.json [out/tracks]",
    },
}


def stage_command(fn: Callable[..., None]) -> Callable[..., None]:
    """``fn`` as a command: bad input exits 2, and every positional argument has its help."""
    command = _friendly(fn)
    helps = STAGE_ARGS.get(fn, {})
    signature = inspect.signature(fn, eval_str=True)
    parameters = [
        p.replace(annotation=Annotated[p.annotation, typer.Argument(help=helps[p.name])])
        if p.name in helps
        else p
        for p in signature.parameters.values()
    ]
    # typer reads a command's parameters from its signature.
    command.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
    return command


app.command("fetch", help="Read the configured datasets into the normalised items table.")(
    stage_command(pipeline.fetch)
)
app.command("variants", help="Render every item under every variant P0..P7.")(
    stage_command(pipeline.variants)
)
app.command(
    "lint", help="Check that every variant differs from P0 only in its cue (before generate)."
)(stage_command(lint))
app.command("generate", help="Generate a response to every prompt with one model of params.")(
    stage_command(pipeline.generate)
)
app.command("label", help=f"Label responses: {labeling_summary()}.")(stage_command(pipeline.label))
app.command(
    "report",
    help="Score all models' labels, write metrics and plots, log to MLflow, print the summary "
    "(the score stage).",
)(stage_command(pipeline.score))


def _score_help() -> str:
    import textwrap

    from syps.protocols import TABLE_SCORERS

    # \b keeps click from re-wrapping the list into one paragraph, so wrap it here.
    lines = [
        textwrap.fill(scorer.columns, 78, initial_indent=f"{name}: ", subsequent_indent="    ")
        for name, scorer in TABLE_SCORERS.items()
    ]
    return (
        "Score a table; print its metrics as JSON. Usable on tables from outside the pipeline.\n\n"
        "--protocol syps (default): LABELS has columns dataset, model, item_id, variant, label "
        "(1|0; empty: UNCLEAR); prints {model: {dataset: {metric: value}}}.\n\n"
        "Other protocols print {model: {metric: value}} (undefined: null); their columns "
        "([optional]):\n\n"
        "\b\n" + "\n".join(lines)
    )


def _protocol_names() -> list[str]:
    from syps.protocols import TABLE_SCORERS

    return ["syps", *TABLE_SCORERS]


@app.command("score", help=_score_help())
def score_cmd(
    labels: Annotated[
        Path, typer.Argument(help="CSV (or parquet for syps): the table to score, see above")
    ],
    protocol: Annotated[
        str,
        typer.Option(help=f"whose table it is: {' | '.join(_protocol_names())}"),
    ] = "syps",
    bootstrap: Annotated[
        int | None,
        typer.Option(help="bootstrap resamples (default: the protocol's; syps 1000)", min=1),
    ] = None,
    ci: Annotated[float, typer.Option(help="confidence level")] = 0.95,
    seed: Annotated[int, typer.Option(help="bootstrap seed")] = 0,
    weights: Annotated[
        Path | None,
        typer.Option(help="discernment only: CSV arg_id, q of label-confidence weights"),
    ] = None,
    k: Annotated[
        float | None,
        typer.Option(help="discernment only: threshold k in sigma0 units [2]", min=0),
    ] = None,
    margin: Annotated[
        float | None, typer.Option(help="pushback only: equivalence (TOST) margin [0.05]")
    ] = None,
) -> None:
    from syps.protocols import TABLE_SCORERS

    if protocol not in _protocol_names():
        raise typer.BadParameter(
            f"{protocol!r} is none of {', '.join(_protocol_names())}", param_hint="--protocol"
        )
    if not 0 < ci < 1:
        raise typer.BadParameter("must lie strictly between 0 and 1", param_hint="--ci")
    if margin is not None and not 0 < margin < 1:
        raise typer.BadParameter("must lie strictly between 0 and 1", param_hint="--margin")
    given = {
        name: value
        for name, value in {"weights": weights, "k": k, "margin": margin}.items()
        if value is not None
    }
    accepted = TABLE_SCORERS[protocol].options if protocol in TABLE_SCORERS else {}
    for name in given:
        if name not in accepted:
            users = [p for p, s in TABLE_SCORERS.items() if name in s.options]
            raise typer.BadParameter(
                f"applies only to --protocol {' or '.join(users)}, not {protocol}",
                param_hint=f"--{name}",
            )

    def run() -> None:
        if protocol in TABLE_SCORERS:
            scored = _score_protocol_table(protocol, labels, bootstrap, ci, seed, given)
            print(json.dumps(scored, indent=2, sort_keys=True))
            return
        from syps.io import jsonable
        from syps.protocols.cues.metrics import LABEL_COLUMNS, score_labels

        table = _read_labels(labels, LABEL_COLUMNS)
        scores = score_labels(table, 1000 if bootstrap is None else bootstrap, ci, seed)
        print(json.dumps(jsonable(scores), indent=2, sort_keys=True))

    _friendly(run)()


def _score_protocol_table(
    protocol: str,
    path: Path,
    bootstrap: int | None,
    ci: float,
    seed: int,
    options: dict[str, Any],
) -> dict[str, dict[str, float | bool | None]]:
    """A protocol's table scored as JSON-ready ``{model: {metric: value}}``: NaN as null,
    booleans kept (numpy's too)."""
    import numpy as np

    from syps.protocols import TABLE_SCORERS

    scorer = TABLE_SCORERS[protocol]
    read, score_table = scorer.load()
    kwargs = {name: scorer.convert(name, value) for name, value in options.items()}
    if bootstrap is not None:  # otherwise the protocol's own default
        kwargs["n_boot"] = bootstrap
    try:
        table = read(str(path))
        scores = score_table(table, ci=ci, seed=seed, source=str(path), **kwargs)
    except InputError:
        raise  # already names the file and row
    except ValueError as e:
        # The cores check their input with InputError; a ValueError left is still the table's
        # (a weights pool without both classes, bytes that are not UTF-8).
        raise InputError(f"{path}: {e}") from None

    def value(v: Any) -> float | bool | None:
        if isinstance(v, bool | np.bool_):
            return bool(v)
        f = float(v)
        return None if math.isnan(f) else f

    return {str(m): {str(name): value(v) for name, v in ms.items()} for m, ms in scores.items()}


def _read_labels(path: Path, required: list[str]) -> Any:
    import pandas as pd

    from syps.io import read_parquet

    if path.suffix == ".parquet":
        # The user's own file, perhaps: "rerun the stage" is advice for stage outputs only.
        fix = "if it is out/labels/<model>.parquet, rerun `dvc repro`; otherwise write it again"
        table = read_parquet(path, required, recovery=fix)
    else:
        from syps.io import read_csv

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
    from syps.protocols.cues.report import summary_table

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
    rich_markup_mode=None,
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
    protocol: Annotated[
        str | None,
        typer.Option(help="only the child runs of this protocol (syps, pushback, ...)"),
    ] = None,
    metric: Annotated[
        list[str] | None,
        typer.Option(
            help="metric column (repeatable; default: each protocol's headline metrics, for "
            "SyPS base_syc spss signed_sensitivity unclear_rate n_items)"
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

    By default the children of the latest pipeline run, of every protocol (a protocol column
    appears where some child is not SyPS's); judge-validation runs never appear.
    """
    from syps.compare import compare_table, default_metrics, find_runs, parse_tags
    from syps.io import write_text
    from syps.tracking import tracking_uri

    def run() -> None:
        store = mlruns or repo_root() / "mlruns"
        # Opening a missing sqlite store would create an empty one; say what is missing instead.
        if not (store / "mlflow.db").is_file():
            raise InputError(f"{store}: no MLflow store (mlflow.db) here; run dvc repro first")
        runs = find_runs(
            tracking_uri(store),
            experiment,
            parse_tags(tag or []),
            run_id or [],
            not all_runs,
            protocol,
        )
        columns = metric or default_metrics(runs)
        table = compare_table(runs, columns, "markdown" if markdown else "text")
        if out is None:
            print(table)
        else:
            write_text(table + "\n", out)

    _friendly(run)()


@app.command("audit")
def audit_cmd(
    run: Annotated[
        str,
        typer.Argument(
            help="a pipeline run: its id or a child's (any unambiguous prefix), or its name"
        ),
    ],
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
        store = mlruns or repo_root() / "mlruns"
        first = load_audit(store, run)
        print(
            render_audit(first) if other is None else render_diff(first, load_audit(store, other))
        )

    _friendly(go)()


def find_repo_root(start: Path | None = None) -> Path:
    """The syps repository: ``$DVC_ROOT`` (set by DVC), else the nearest directory at or above
    ``start`` (the working directory) holding a dvc.yaml, else ``start`` itself."""
    if os.environ.get("DVC_ROOT"):
        return Path(os.environ["DVC_ROOT"]).resolve()
    here = (start or Path.cwd()).resolve()
    return next((d for d in (here, *here.parents) if (d / "dvc.yaml").is_file()), here)


def ui_command(mlruns: Path, host: str, port: int, workers: int) -> list[str]:
    """The `mlflow ui` command line over the store ``mlruns`` (an absolute sqlite URI, so it
    works from any directory)."""
    from syps.tracking import tracking_uri

    return [
        sys.executable,
        "-m",
        "mlflow",
        "ui",
        "--backend-store-uri",
        tracking_uri(mlruns),
        "--host",
        host,
        "--port",
        str(port),
        "--workers",
        str(workers),
    ]


@app.command("ui")
def ui_cmd(
    mlruns: Annotated[
        Path | None,
        typer.Option(
            help="MLflow store directory (default: mlruns/ of the repository around "
            "the working directory)"
        ),
    ] = None,
    host: Annotated[str, typer.Option(help="interface to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="port to listen on")] = 5000,
    workers: Annotated[
        int, typer.Option(help="server worker processes (MLflow's default is 4)", min=1)
    ] = 1,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="print the mlflow command instead of running it")
    ] = False,
) -> None:
    """Start the MLflow UI on this repository's runs, from any directory inside it.

    One worker is plenty for one researcher and leaves the CPU to the pipeline.
    """

    def run() -> None:
        root = find_repo_root()
        store = (mlruns or root / "mlruns").resolve()
        # Opening a missing sqlite store would create an empty one; say what is missing instead.
        if not (store / "mlflow.db").is_file():
            raise InputError(f"{store}: no MLflow store (mlflow.db) here; run dvc repro first")
        cmd = ui_command(store, host, port, workers)
        if dry_run:
            print(" ".join(cmd))
            return
        print(f"MLflow UI on http://{host}:{port} (Ctrl-C stops it)", file=sys.stderr)
        # The server replaces this process, so Ctrl-C reaches it directly; from the repository
        # root, where MLflow would put any default ./mlartifacts.
        os.chdir(root)
        os.execv(cmd[0], cmd)

    _friendly(run)()


@app.command("plan")
def plan_cmd(
    params: Annotated[Path, typer.Argument(help=_PARAMS_HELP)] = Path("params.yaml"),
) -> None:
    """Print what `dvc repro` would send: per stage, model and protocol, the requests, how many
    the response store holds, how many would be sent, their input tokens (the model's tokenizer
    for hf models, an estimate for API models), output tokens (an upper bound) and cost at
    `models.<name>.price`. Sends nothing and loads no weights."""

    def run() -> None:
        from syps.config import load_params
        from syps.plan import plan, render
        from syps.runs import cache_dir, store_path
        from syps.store import Store

        p = load_params(params)
        with Store(store_path()) as store:
            rows = plan(p, Path.cwd(), store, cache_dir())
        print(render(rows))

    _friendly(run)()


# The conversation protocols' steps (syps/protocols/stages.py), one command each under
# `syps protocol`; dvc.yaml runs them per protocol (and per model) through stages/p_*.py.
_PROTOCOL_HELP = "the protocol's name under `protocols` in the parameters file [pushback]"
_P_ITEMS_HELP = "the protocol's items table [out/protocols/<protocol>/items.parquet]"
STAGE_ARGS.update(
    {
        pstages.items: {
            "params": _PARAMS_HELP,
            "protocol": _PROTOCOL_HELP,
            "out": "items table to write [out/protocols/<protocol>/items.parquet]",
        },
        pstages.lint: {
            "params": _PARAMS_HELP,
            "protocol": _PROTOCOL_HELP,
            "items": _P_ITEMS_HELP,
            "out": "lint report to write, also on failure [out/protocols/<protocol>/lint.json]",
        },
        pstages.aux: {
            "params": _PARAMS_HELP,
            "protocol": _PROTOCOL_HELP,
            "items": _P_ITEMS_HELP,
            "out": "table to write [out/protocols/<protocol>/aux.parquet]",
        },
        pstages.converse: {
            "params": _PARAMS_HELP,
            "protocol": _PROTOCOL_HELP,
            "model": "the model's name under `models` in the parameters file [smollm2-135m]",
            "items": _P_ITEMS_HELP,
            "out": "responses table to write [out/protocols/<protocol>/responses/<model>.parquet]",
        },
        pstages.label: {
            "params": _PARAMS_HELP,
            "protocol": _PROTOCOL_HELP,
            "model": "the model's name under `models` in the parameters file [smollm2-135m]",
            "items": _P_ITEMS_HELP,
            "responses": "responses table, written by converse "
            "[out/protocols/<protocol>/responses/<model>.parquet]",
            "aux": "the protocol's auxiliary table [out/protocols/<protocol>/aux.parquet]",
            "out": "labels table to write [out/protocols/<protocol>/labels/<model>.parquet]",
        },
        pstages.score: {
            "params": _PARAMS_HELP,
            "protocol": _PROTOCOL_HELP,
            "labels": "directory of <model>.parquet labels [out/protocols/<protocol>/labels]",
            "metrics": "metrics file to write [metrics/<protocol>.json]",
            "plots": "directory for the plot data [plots/<protocol>]",
            "figures": "directory for the figures [out/protocols/<protocol>/figures]",
            "track": "the MLflow bundle the score stage logs [out/tracks/<protocol>.json]",
        },
    }
)
protocol_app = typer.Typer(
    help="Run one step of a conversation protocol (pushback, discernment, betting).",
    no_args_is_help=True,
    rich_markup_mode=None,
)
protocol_app.command("items", help="Load the protocol's items.")(stage_command(pstages.items))
protocol_app.command("lint", help="Lint the protocol's conversations (before generation).")(
    stage_command(pstages.lint)
)
protocol_app.command("aux", help="Model-independent data (e.g. judge ratings of arguments).")(
    stage_command(pstages.aux)
)
protocol_app.command("converse", help="Run every turn for one model, through the store.")(
    stage_command(pstages.converse)
)
protocol_app.command("label", help="Label one model's responses.")(stage_command(pstages.label))
protocol_app.command("score", help="Score every model; metrics, plots, figures, MLflow bundle.")(
    stage_command(pstages.score)
)
app.add_typer(protocol_app, name="protocol")


if __name__ == "__main__":
    app()
