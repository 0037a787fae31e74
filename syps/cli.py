"""The ``syps`` command line: every pipeline stage, a standalone scorer, judge validation, and
the views of the results (compare, audit, the MLflow UI, plan)."""

from __future__ import annotations

import inspect
import json
import math
import os
import shlex
import shutil
import sys
import textwrap
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
import typer

from syps.core.audit import load_audit, render_audit, render_diff, render_metric_traces
from syps.core.compare import (
    VALIDATION,
    compare_table,
    compare_tables,
    every_metric,
    find_runs,
    find_validation_runs,
    parse_tags,
)
from syps.core.config import ScoreParams
from syps.core.io import InputError, write_text
from syps.core.layout import Layout
from syps.core.params import load_params
from syps.core.pipeline import score_settings
from syps.core.plan import (
    PRIOR_DISCORDANCE,
    held_stages,
    plan,
    power_plan,
    render,
    render_power,
)
from syps.core.power import ALPHA, POWER
from syps.core.presets import PRESETS_DIR, build, preset_file
from syps.core.protocol import Protocol, ScoreSettings
from syps.core.runs import cache_dir, store_location
from syps.core.stores import copy_store, is_store_url, open_store
from syps.core.tracking import existing_store
from syps.core.urls import redact
from syps.core.validation import judge_sample, judge_validate, spec_of
from syps.protocols import DEFAULT_PROTOCOL, PROTOCOLS
from syps.stage import STAGES, stage_command
from syps.stage import friendly as _friendly

app = typer.Typer(
    help="syps: a data-versioned experiment tracker for LLM sycophancy research. `dvc repro` "
    "runs every study design (protocol) through one pipeline; these commands run one stage, "
    "score a table, validate the labellers and read the results.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Click's plain help: typer's rich help labels every flag (--force, even --help) `<bool>`
    # as if it took a value.
    rich_markup_mode=None,
)


stage_app = typer.Typer(
    help="Run one pipeline stage by hand, exactly as `dvc repro` runs it (see dvc.yaml).",
    no_args_is_help=True,
    rich_markup_mode=None,
)
for _name, (_fn, _help) in STAGES.items():
    _where = "Give it the paths dvc.yaml passes (the stage's cmd there)."
    stage_app.command(_name, help=f"{_help}\n\n{_where}")(stage_command(_fn, PROTOCOLS))
app.add_typer(stage_app, name="stage")


def _score_help() -> str:
    # \b keeps click from re-wrapping the list into one paragraph, so wrap it here.
    lines = [
        textwrap.fill(
            e.report.table.columns, 78, initial_indent=f"{name}: ", subsequent_indent="    "
        )
        for name, e in PROTOCOLS.items()
        if e.report.table is not None
    ]
    return (
        "Score a table; print its metrics as JSON (undefined: null). Usable on tables from "
        "outside the pipeline. The columns of each protocol's table ([optional]):\n\n"
        "\b\n" + "\n".join(lines)
    )


def _table_options() -> dict[str, tuple[Any, list[str]]]:
    """Every protocol's own ``syps score`` options: name -> (its option, the protocols)."""
    out: dict[str, tuple[Any, list[str]]] = {}
    for name, entry in PROTOCOLS.items():
        for opt, spec in (entry.report.table.options if entry.report.table else {}).items():
            if opt in out:
                out[opt][1].append(name)
            else:
                out[opt] = (spec, [name])
    return out


def score_cmd(
    labels: Path,
    protocol: str,
    bootstrap: int | None,
    ci: float | None,
    seed: int | None,
    **options: Any,
) -> None:
    """``syps score``: a protocol's table scored, printed as JSON."""
    scorable = [n for n, e in PROTOCOLS.items() if e.report.table is not None]
    table = PROTOCOLS[protocol].report.table if protocol in PROTOCOLS else None
    if table is None:
        what = "has no table scorer" if protocol in PROTOCOLS else "is no protocol"
        raise typer.BadParameter(
            f"{protocol!r} {what}; the protocols with one: {', '.join(scorable)}",
            param_hint="--protocol",
        )
    if ci is not None and not 0 < ci < 1:
        raise typer.BadParameter("must lie strictly between 0 and 1", param_hint="--ci")
    given = {name: value for name, value in options.items() if value is not None}
    accepted = table.options
    for name in given:
        if name not in accepted:
            users = _table_options()[name][1]
            raise typer.BadParameter(
                f"applies only to --protocol {' or '.join(users)}, not {protocol}",
                param_hint=f"--{name}",
            )

    def run() -> None:
        overrides = {"bootstrap": bootstrap, "ci": ci, "seed": seed}
        settings, params = _score_setup(protocol, overrides, sorted(given))
        scored = _score_protocol_table(protocol, labels, settings, params, given)
        print(json.dumps(scored, indent=2, sort_keys=True))

    _friendly(run)()


def _score_setup(
    protocol: str, overrides: dict[str, Any], options: list[str]
) -> tuple[ScoreSettings, Any]:
    """The settings ``syps score`` scores with, and the protocol's params (None outside a
    repository). In a repository (a dvc.yaml and params.yaml at or above the working directory)
    the study's, as its score stage has them (``seed``, ``score``, ``models``,
    ``protocols.<protocol>``), said in one line on stderr; outside one the defaults. Either
    way the options given replace what they name."""
    study = find_study()
    if study is None:
        settings = ScoreSettings(
            bootstrap=ScoreParams.bootstrap, ci=0.95, seed=0, min_items=ScoreParams.min_items
        )
        params = None
    else:
        p = load_params(study, {protocol: PROTOCOLS[protocol]}, complete=False)
        # The stage's UNCLEAR threshold stops a run; a table scored by hand is reported whole.
        settings = replace(score_settings(p), max_unclear=1.0, model_max_unclear={})
        params = p.protocols[protocol]
    given = {k: v for k, v in overrides.items() if v is not None}
    settings = replace(settings, **given)
    if study is not None:
        mine = ", ".join(f"{k} {getattr(settings, k)}" for k in ("seed", "bootstrap", "ci"))
        changed = [f"--{k}" for k in given] + [f"--{o}" for o in options]
        print(
            f"syps score: as the study in {study} scores it ({mine}, score.min_items "
            f"{settings.min_items}, protocols.{protocol})"
            + (f"; {' '.join(changed)} as given" if changed else ""),
            file=sys.stderr,
        )
    return settings, params


def _score_command() -> Callable[..., None]:
    """``score_cmd`` with one typed option per protocol option (typer reads the signature)."""
    base = [
        inspect.Parameter(
            "labels",
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
            annotation=Annotated[Path, typer.Argument(help="the table to score, see above")],
        ),
        inspect.Parameter(
            "protocol",
            inspect.Parameter.KEYWORD_ONLY,
            default=DEFAULT_PROTOCOL,
            annotation=Annotated[str, typer.Option(help="whose table it is")],
        ),
        inspect.Parameter(
            "bootstrap",
            inspect.Parameter.KEYWORD_ONLY,
            default=None,
            annotation=Annotated[
                int | None,
                typer.Option(
                    help=f"bootstrap resamples [the study's, else {ScoreParams.bootstrap}]",
                    min=1,
                ),
            ],
        ),
        inspect.Parameter(
            "ci",
            inspect.Parameter.KEYWORD_ONLY,
            default=None,
            annotation=Annotated[
                float | None, typer.Option(help="confidence level [the study's, else 0.95]")
            ],
        ),
        inspect.Parameter(
            "seed",
            inspect.Parameter.KEYWORD_ONLY,
            default=None,
            annotation=Annotated[
                int | None, typer.Option(help="bootstrap seed [the study's, else 0]")
            ],
        ),
    ]
    extra = [
        inspect.Parameter(
            name,
            inspect.Parameter.KEYWORD_ONLY,
            default=None,
            annotation=Annotated[
                spec.type | None, typer.Option(help=f"{' and '.join(users)} only: {spec.help}")
            ],
        )
        for name, (spec, users) in _table_options().items()
    ]

    def command(**kwargs: Any) -> None:
        score_cmd(**kwargs)

    command.__signature__ = inspect.Signature([*base, *extra])  # type: ignore[attr-defined]
    command.__doc__ = score_cmd.__doc__
    return command


app.command("score", help=_score_help())(_score_command())


def _score_protocol_table(
    protocol: str,
    path: Path,
    settings: ScoreSettings,
    params: Any,
    options: dict[str, Any],
) -> dict[str, Any]:
    """A protocol's table scored as JSON-ready ``{model: {dataset: {metric: value}}}``: NaN as
    null, booleans kept (numpy's too)."""
    scorer = PROTOCOLS[protocol].report.table
    assert scorer is not None  # score_cmd refuses a protocol without one
    kwargs = {
        name: value if convert is None else convert(value)
        for name, value in options.items()
        for convert in [scorer.options[name].convert]
    }
    try:
        table = scorer.read(str(path))
        scores = scorer.score(params, table, settings, str(path), **kwargs)
    except InputError:
        raise  # already names the file and row
    except ValueError as e:
        # The cores check their input with InputError; a ValueError left is still the table's
        # (a weights pool without both classes, bytes that are not UTF-8).
        raise InputError(f"{path}: {e}") from None

    def value(v: Any) -> Any:
        if isinstance(v, dict):
            return {str(k): value(x) for k, x in v.items()}
        if isinstance(v, bool | np.bool_):
            return bool(v)
        f = float(v)
        return None if math.isnan(f) else f

    out: dict[str, Any] = value(dict(scores))
    return out


@app.command("summary")
def summary_cmd(
    metrics: Annotated[Path, typer.Argument(help="metrics.json written by the score stage")],
    ci: Annotated[float, typer.Option(help="confidence level the CIs were computed at")] = 0.95,
) -> None:
    """Print the model x dataset summary table of a metrics.json."""
    protocol = PROTOCOLS[DEFAULT_PROTOCOL]

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
            print(protocol.report.summary(scores, ci))
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
# Where the help says a default path lies (relative to the study).
HELP_LAYOUT = Layout.of(Path())


ItemsOption = Annotated[
    Path | None, typer.Option(help=f"items table [{HELP_LAYOUT.items('<protocol>')}]")
]
JudgeOption = Annotated[
    str | None,
    typer.Option(
        "--judge",
        help="which of the protocol's judges ("
        + "; ".join(
            f"{name}: {', '.join(j.name for j in e.report.judges)}"
            for name, e in PROTOCOLS.items()
            if e.report.judges
        )
        + "; default: its first)",
    ),
]


@judge.command(
    "sample",
    help="Draw responses a protocol's judge labelled, stratified (SyPS: by model, dataset and "
    "variant), into a CSV to annotate.\n\n"
    "Fill its human_label column with 1, 0 or UNCLEAR (what 1 means is printed), leave the "
    "other columns as they are, then run `syps judge validate` on it.",
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
    protocol: Annotated[str, typer.Option(help="whose labels to validate")] = DEFAULT_PROTOCOL,
    responses: Annotated[
        Path | None,
        typer.Option(
            help="directory of <model>.parquet label tables holding each response "
            f"[{HELP_LAYOUT.labels('<protocol>')}]"
        ),
    ] = None,
    items: ItemsOption = None,
    force: Annotated[bool, typer.Option("--force", help="overwrite an existing --out")] = False,
    judge_name: JudgeOption = None,
    queue: Annotated[
        str | None,
        typer.Option(
            help="also attach the sampled responses' traces to this MLflow review queue "
            "(created, or reused, asking the judge's question), to answer in the MLflow UI"
        ),
    ] = None,
    run_id: Annotated[
        list[str] | None,
        typer.Option(
            "--run",
            help="with --queue: the traces of this run (repeatable; a pipeline run means its "
            "children; default: the newest pipeline run)",
        ),
    ] = None,
) -> None:
    """Draw a stratified sample of responses to annotate by hand."""

    def run() -> None:
        if run_id and queue is None:
            raise InputError("--run applies with --queue only")
        layout = Layout.here()
        proto = _protocol(protocol)
        judge_sample(
            spec_of(proto, judge_name),
            proto,
            load_params(params, PROTOCOLS),
            params,
            out,
            n,
            seed,
            dataset or None,
            model or None,
            responses or layout.labels(protocol),
            items or layout.items(protocol),
            force,
            queue,
            run_id or [],
        )

    _friendly(run)()


def _protocol(name: str) -> Protocol[Any, Any]:
    """The protocol ``name``, or an error naming those with a judge to validate."""
    if name not in PROTOCOLS or not PROTOCOLS[name].report.judges:
        has = [n for n, e in PROTOCOLS.items() if e.report.judges]
        raise InputError(f"--protocol {name}: no judge validation; protocols with one: {has}")
    return PROTOCOLS[name]


@judge.command(
    "validate",
    help="Measure the labellers as configured now against the human labels of an annotated "
    "sample: agreement, Cohen's kappa with a bootstrap CI, confusion matrix, UNCLEAR rates, "
    "and each dataset's judged rate corrected for the judge's errors (prediction-powered "
    "inference).\n\n"
    "Prints the table, writes the report JSON and logs one MLflow run tagged "
    "syps.kind=judge-validation.",
)
def judge_validate_cmd(
    annotated: Annotated[
        Path | None,
        typer.Argument(help="the sample CSV with human_label filled in (or --traces)"),
    ] = None,
    params: ParamsOption = Path("params.yaml"),
    report: Annotated[
        Path | None, typer.Option(help="report JSON (default: <csv stem>.validation.json)")
    ] = None,
    allow_missing: Annotated[
        bool,
        typer.Option("--allow-missing", help="skip rows whose human_label is empty, not fail"),
    ] = False,
    protocol: Annotated[str, typer.Option(help="whose labels to validate")] = DEFAULT_PROTOCOL,
    traces: Annotated[
        bool,
        typer.Option(
            "--traces",
            help="read people's labels from the MLflow traces (a feedback named label from "
            "a HUMAN source) instead of a CSV",
        ),
    ] = False,
    run_id: Annotated[
        list[str] | None,
        typer.Option(
            "--run",
            help="with --traces: this run's traces (repeatable; a pipeline "
            "run means its children; default: the newest pipeline run)",
        ),
    ] = None,
    queue: Annotated[
        str | None,
        typer.Option(
            help="read the reviewers' answers to this MLflow review queue (syps judge sample "
            "--queue) instead of a CSV"
        ),
    ] = None,
    responses: Annotated[
        Path | None,
        typer.Option(
            help="directory of <model>.parquet label tables, for the corrected rates "
            f"[{HELP_LAYOUT.labels('<protocol>')}]"
        ),
    ] = None,
    items: ItemsOption = None,
    judge_name: JudgeOption = None,
) -> None:
    """Validate the labellers against an annotated sample."""

    def run() -> None:
        if [annotated is not None, traces, queue is not None].count(True) != 1:
            raise InputError("give the annotated CSV or --traces or --queue: exactly one")
        if run_id and not traces:
            raise InputError("--run applies with --traces only")
        proto = _protocol(protocol)
        judge_validate(
            spec_of(proto, judge_name),
            proto,
            load_params(params, PROTOCOLS),
            params,
            annotated,
            report,
            allow_missing,
            traces=(run_id or []) if traces else None,
            queue=queue,
            labels_dir=responses,
            items=items,
        )

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
            "--run-id",
            help="a pipeline (parent) run, or one child run, by id (repeatable); a pipeline run "
            "also by id prefix, name or git commit, as syps audit reads it",
        ),
    ] = None,
    all_runs: Annotated[
        bool, typer.Option("--all", help="every pipeline run of the experiment, not the latest")
    ] = False,
    protocol: Annotated[
        str | None,
        typer.Option(help="only the child runs of this protocol (a name in the registry)"),
    ] = None,
    metric: Annotated[
        list[str] | None,
        typer.Option(help="metric column (repeatable; default: each protocol's headline metrics)"),
    ] = None,
    all_metrics: Annotated[
        bool,
        typer.Option(
            "--all-metrics", help="every metric the runs logged, their metrics tables' included"
        ),
    ] = False,
    width: Annotated[
        int | None,
        typer.Option(
            help="wrap the metric columns to lines of this many terminal columns, a † counted "
            "as two (default: the terminal's width, 160 where there is none; 0: no wrapping)"
        ),
    ] = None,
    markdown: Annotated[bool, typer.Option("--markdown", help="a markdown table")] = False,
    out: Annotated[
        Path | None, typer.Option(help="write the table here instead of printing")
    ] = None,
    mlruns: Annotated[
        Path | None, typer.Option(help="MLflow store directory (default: <repo>/mlruns)")
    ] = None,
    validation: Annotated[
        bool,
        typer.Option(
            "--validation",
            help="judge-validation runs (syps judge validate) instead: a row per dataset, with "
            "agreement, kappa, the judged and the corrected rate (--run-id: those runs)",
        ),
    ] = False,
) -> None:
    """Print a model x dataset table of the metrics, with CIs, of logged pipeline runs.

    By default the children of the latest pipeline run, of every protocol, one table per
    protocol with its headline metrics, wrapped to fit the terminal; with --metric or
    --all-metrics one table (a protocol column appears where the runs are of several).
    Judge-validation runs appear only with --validation, one row per judge and dataset.
    """
    _friendly(_compare)(
        mlruns or Layout.here().mlruns,
        experiment,
        tag or [],
        run_id or [],
        not all_runs,
        protocol,
        metric or [],
        all_metrics,
        width,
        "markdown" if markdown else "text",
        out,
        validation,
    )


def _compare(
    store: Path,
    experiment: str,
    tags: list[str],
    run_ids: list[str],
    latest: bool,
    protocol: str | None,
    metrics: list[str],
    all_metrics: bool,
    width: int | None,
    fmt: Literal["text", "markdown"],
    out: Path | None,
    validation: bool = False,
) -> None:
    """``syps compare``: the runs found, as one table (``metrics`` or ``all_metrics``) or one
    per protocol, printed or written to ``out``; with ``validation``, judge-validation runs."""
    uri = existing_store(store)
    if validation:
        if tags:
            raise InputError("--tag filters pipeline runs; it does not apply with --validation")
        runs = find_validation_runs(uri, experiment, run_ids, latest, protocol)
        runs = [r for r in runs if protocol is None or r.protocol == protocol]
        if not runs:
            raise InputError(f"no {VALIDATION} run of protocol '{protocol}' among those chosen")
    else:
        runs = find_runs(uri, experiment, parse_tags(tags), run_ids, latest, protocol)
    wrap = shutil.get_terminal_size((160, 24)).columns if width is None else width
    if metrics or all_metrics:
        table = compare_table(runs, metrics or every_metric(runs), fmt, wrap, protocols=PROTOCOLS)
    else:
        table = compare_tables(runs, fmt, wrap, protocols=PROTOCOLS)
    if out is None:
        print(table)
    else:
        write_text(table + "\n", out)


@app.command("audit")
def audit_cmd(
    run: Annotated[
        str,
        typer.Argument(
            help="a pipeline run: its id or a child's (any unambiguous prefix), its name (the "
            "printed name without .N will do) or its git commit (7 or more hex digits)"
        ),
    ],
    other: Annotated[
        str | None, typer.Argument(help="a second run: show what changed from RUN to it")
    ] = None,
    mlruns: Annotated[
        Path | None, typer.Option(help="MLflow store directory (default: <repo>/mlruns)")
    ] = None,
    metric: Annotated[
        str | None,
        typer.Option(
            help="list the traces a metric rests on: a child's metric key (delta_P3) or "
            "<dataset>.<key> (SS.delta_P3), flagged rows first"
        ),
    ] = None,
) -> None:
    """Show the chain behind a run's numbers (data hash, every template's exact text and
    sha256, models and revisions, generation and judge settings, code, counts), or with a
    second run, what changed, or with --metric, the conversations (MLflow traces) behind one
    number. Reads only the MLflow store, so a copy of mlruns/ is enough."""

    def go() -> None:
        store = mlruns or Layout.here().mlruns
        first = load_audit(store, run, PROTOCOLS)
        if metric is not None:
            if other is not None:
                raise InputError("--metric lists one run's traces: give one run, not two")
            print(render_metric_traces(first, metric, PROTOCOLS))
            return
        print(
            render_audit(first, PROTOCOLS)
            if other is None
            else render_diff(first, load_audit(store, other, PROTOCOLS))
        )

    _friendly(go)()


def find_study(start: Path | None = None) -> Path | None:
    """The params.yaml of the syps repository around ``start`` (the working directory): the
    one beside the nearest dvc.yaml (see :func:`find_repo_root`); None outside a repository."""
    root = find_repo_root(start)
    params = root / "params.yaml"
    return params if (root / "dvc.yaml").is_file() and params.is_file() else None


def find_repo_root(start: Path | None = None) -> Path:
    """The syps repository: ``$DVC_ROOT`` (set by DVC), else the nearest directory at or above
    ``start`` (the working directory) holding a dvc.yaml, else ``start`` itself."""
    if os.environ.get("DVC_ROOT"):
        return Path(os.environ["DVC_ROOT"]).resolve()
    here = (start or Path.cwd()).resolve()
    return next((d for d in (here, *here.parents) if (d / "dvc.yaml").is_file()), here)


# MLflow 3's server also starts a job runner, which starts a huey queue consumer process per
# GenAI job type (LLM-judge scorers, online scoring, evaluation, prompt optimisation, issue
# detection) and one for periodic tasks: 8 processes of ~230 MB beside the one server worker,
# for jobs a viewer never runs. Runs, traces, review queues and label schemas are the server's
# own store reads and writes, so they work without them (checked against a running UI). A
# value already in the environment wins (MLFLOW_SERVER_ENABLE_JOB_EXECUTION=true runs them).
UI_ENV = {"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}


def ui_command(mlruns: Path, host: str, port: int, workers: int) -> list[str]:
    """The `mlflow ui` command line over the store ``mlruns`` (an absolute sqlite URI, so it
    works from any directory; or the database ``MLFLOW_TRACKING_URI`` names); it runs with
    :data:`UI_ENV` under the caller's environment."""
    return [
        sys.executable,
        "-m",
        "mlflow",
        "ui",
        "--backend-store-uri",
        existing_store(mlruns),
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
    """Start the MLflow UI on this repository's runs, from any directory inside it; with
    MLFLOW_TRACKING_URI set to a server, print its address instead (it serves the UI).

    One worker is plenty for one researcher and leaves the CPU to the pipeline; MLflow's GenAI
    job consumers are not started (MLFLOW_SERVER_ENABLE_JOB_EXECUTION=true starts them).
    """

    def run() -> None:
        root = find_repo_root()
        store = (mlruns or Layout.of(root).mlruns).resolve()
        uri = existing_store(store)
        if uri.startswith(("http://", "https://")):
            # The lab's server already serves its UI: nothing to start.
            print(f"MLflow UI: {redact(uri)} (MLFLOW_TRACKING_URI; unset it to serve {store})")
            return
        cmd = ui_command(store, host, port, workers)
        env = {**UI_ENV, **os.environ}
        if dry_run:
            print(" ".join([*(f"{k}={env[k]}" for k in UI_ENV), *cmd]))
            return
        print(f"MLflow UI on http://{host}:{port} (Ctrl-C stops it)", file=sys.stderr)
        # The server replaces this process, so Ctrl-C reaches it directly; from the repository
        # root, where MLflow would put any default ./mlartifacts.
        os.chdir(root)
        os.execve(cmd[0], cmd, env)

    _friendly(run)()


@app.command("plan")
def plan_cmd(
    params: Annotated[Path, typer.Argument(help="parameters file")] = Path("params.yaml"),
    mde: Annotated[
        float | None,
        typer.Option(
            "--mde", help="also print the items each headline contrast needs for this effect"
        ),
    ] = None,
    alpha: Annotated[float, typer.Option(help="two-sided level, over each Holm family")] = ALPHA,
    power: Annotated[float, typer.Option(help="the power wanted")] = POWER,
    discordance: Annotated[
        float,
        typer.Option(
            help="prior E[d^2] of an item's paired difference (the discordant share for a "
            "binary label), used where no earlier labels give one"
        ),
    ] = PRIOR_DISCORDANCE,
    rebuild: Annotated[
        bool,
        typer.Option(
            "--rebuild",
            help="build every request and look each up in the store, also for stages that "
            "dvc.lock holds up to date (what `dvc repro -f` would send)",
        ),
    ] = False,
) -> None:
    """Print what `dvc repro` would send: per stage, model and protocol, the requests, how many
    the response store holds, how many would be sent, their input tokens (the model's tokenizer
    for hf models, an estimate for API models), output tokens (an upper bound) and cost at
    `models.<name>.price`. A model's generate and label stages that dvc.lock holds up to date
    (for the repository's own params.yaml) would not run: they are counted from their tables,
    nothing to send. Then the power of each protocol's headline contrasts: the minimum
    detectable effect at the items the params run (paired, items the unit; Holm over the
    protocol's family), from the discordance of earlier labels where there are some, else the
    prior; with --mde, the items each contrast needs. Sends nothing and loads no weights."""

    def run() -> None:
        if not 0 < alpha < 1 or not 0 < power < 1:
            raise InputError(f"--alpha and --power must lie in (0, 1), got {alpha}, {power}")
        if not 0 < discordance <= 1:
            raise InputError(f"--discordance must lie in (0, 1], got {discordance}")
        if mde is not None and not 0 < mde <= 1:
            raise InputError(f"--mde must lie in (0, 1], got {mde}")
        p = load_params(params, PROTOCOLS)
        held = None if rebuild else held_stages(params)
        with open_store(store_location()) as store:
            rows = plan(p, PROTOCOLS, Path.cwd(), store, cache_dir(), held)
        print(render(rows))
        table = power_plan(
            p, PROTOCOLS, Path.cwd(), alpha=alpha, power=power, prior=discordance, effect=mde
        )
        print()
        print(render_power(table, power, mde))

    _friendly(run)()


@app.command("preset")
def preset_cmd(
    name: Annotated[str, typer.Argument(help="the preset: a file presets/<name>.yaml")],
    out: Annotated[
        Path | None,
        typer.Option(
            help="write the params file the preset makes of --params here (a .yaml), for "
            "`syps plan FILE`, instead of printing the -S arguments"
        ),
    ] = None,
    params: Annotated[
        Path | None,
        typer.Option(
            help="the params file the preset applies to (default: the repository's params.yaml)"
        ),
    ] = None,
    presets: Annotated[
        Path | None,
        typer.Option(help="the folder of preset files (default: the repository's presets/)"),
    ] = None,
) -> None:
    """Print a paper's design as `dvc exp run` arguments: one `-S key=value` per key the preset
    sets, shell-quoted, so that `eval "dvc exp run $(syps preset NAME)"` runs the paper's
    design. With --out, write the params file instead (what `dvc exp run -S` would make of
    params.yaml, comments kept), which `syps plan FILE` plans offline. Each preset is checked
    against the params as DVC would write them; a key that is not a params key is an error
    naming the preset file and the key."""

    def run() -> None:
        root = find_repo_root()
        path = preset_file(presets or root / PRESETS_DIR, name)
        base = params or root / "params.yaml"
        args = build(path, base, PROTOCOLS, out)
        if out is None:
            print(shlex.join(args))
        else:
            print(f"wrote {out}: {base} with {path} applied", file=sys.stderr)

    _friendly(run)()


store_app = typer.Typer(
    help="The response store: where every generation and judge verdict is kept by its key "
    "(an SQLite file, .cache/store.sqlite, unless SYPS_STORE names another file or a "
    "postgresql:// database).",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(store_app, name="store")


@store_app.command("copy")
def store_copy_cmd(
    src: Annotated[str, typer.Argument(help="the store to copy: an SQLite file or a URL")],
    dst: Annotated[
        str, typer.Argument(help="the store to copy into: an SQLite file or postgresql://...")
    ],
) -> None:
    """Copy every record of SRC into DST (SQLite or PostgreSQL, either way), a batch per
    transaction, and read each back: a key DST holds already keeps its record (a store keeps
    the first answer); one it holds with another record is counted and named on stderr. Prints
    the counts; SRC is not changed."""

    def run() -> None:
        if not is_store_url(src) and not Path(src).is_file():
            raise InputError(f"{src}: no such store (an SQLite file or a postgresql:// URL)")
        with open_store(src) as a, open_store(dst) as b:
            done = copy_store(a, b)
            print(done.line(a.location, b.location))
            if done.differ:
                print(
                    f"WARNING {b.location}: {len(done.differ):,} keys hold another record than "
                    f"in {a.location} (first: {done.differ[0]}); the destination's were kept",
                    file=sys.stderr,
                )

    _friendly(run)()


if __name__ == "__main__":
    app()
