"""The ``syps`` command line: every pipeline stage, plus a standalone scorer."""

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
        table = read_parquet(path, required)
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
