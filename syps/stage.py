"""The stage entry points' edge: what ``stages/*.py`` (run by dvc.yaml) and ``syps stage ...``
run. It turns a stage function of ``syps.core.pipeline`` into a command whose positional
arguments are the paths dvc.yaml passes, and the protocol's name into the protocol object:
a per-protocol stage looks its protocol up in the registry (``syps.protocols.PROTOCOLS``), which
imports that protocol's package alone, so the code it runs is the code dvc.yaml declares it
depends on, and an edit to another protocol, or to the CLI's help, reruns nothing of it.
"""

from __future__ import annotations

import functools
import inspect
import os
import sys
from collections.abc import Callable, Mapping
from typing import Annotated, Any

import typer

from syps.core import pipeline
from syps.core.backends import BackendError
from syps.core.backends.threads import GPU_ENV, queue_gpus
from syps.core.config import ConfigError
from syps.core.io import InputError
from syps.core.protocol import Protocol
from syps.core.tracking import refusal
from syps.protocols import PROTOCOLS

# Help for the stage commands' positional arguments, by parameter name: every path is the
# caller's (dvc.yaml's), so the help says what each one holds, not where it lies.
ARG_HELP = {
    "params": "parameters file",
    "protocol": "the protocol's name under `protocols` in the parameters file",
    "model": "the model's name under `models` in the parameters file",
    "items": "the items table, written by fetch",
    "conversations": "the first turn's conversations: written by variants, sent by generate",
    "out": "the output file to write",
    "responses": "the responses table, written by generate",
    "labels": "directory of the label tables, <model>.parquet",
    "metrics": "metrics file to write",
    "plots": "directory for the plot data",
    "figures": "directory for the figures",
    "track": "the bundle the mlflow stage logs",
    "summary": "headline metrics file to write",
    "tracks": "directory of the score stages' bundles, <protocol>.json",
    "data_dvc": "the data's .dvc file; the md5 of data/ is read from the dvc.lock beside it",
    "logged": "the marker written into the MLflow store's folder once the run is logged",
}


def protocol_named(name: str) -> Protocol[Any, Any]:
    """The registry's protocol ``name`` (its package imported alone, on this first look-up)."""
    if name not in PROTOCOLS:
        raise ConfigError(f"unknown protocol {name!r}; known: {sorted(PROTOCOLS)}")
    return PROTOCOLS[name]


def friendly(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` with a bad input ending in its one-line message and exit code 2."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (ConfigError, InputError, BackendError) as e:
            print(f"error: {e}", file=sys.stderr)
            raise typer.Exit(2) from None
        except Exception as e:
            refused = refusal(e)  # a tracking server that refuses the credentials
            if refused is None:
                raise
            print(f"error: {refused}", file=sys.stderr)
            raise typer.Exit(2) from None

    return wrapper


def stage_command(
    fn: Callable[..., None], protocols: Mapping[str, Protocol[Any, Any]] | None = None
) -> Callable[..., None]:
    """``fn`` (a stage of ``syps.core.pipeline``) as a command: a ``protocol`` argument is
    given by name, a ``protocols`` one is bound to ``protocols`` (the registry), bad input
    exits 2, and every positional argument has its help."""
    signature = inspect.signature(fn, eval_str=True)

    def call(**kwargs: Any) -> None:
        if "protocol" in kwargs:
            kwargs["protocol"] = protocol_named(kwargs["protocol"])
        if "protocols" in signature.parameters:
            kwargs["protocols"] = protocols
        fn(**kwargs)

    command = friendly(call)
    parameters = [
        p.replace(annotation=Annotated[kind, typer.Argument(help=ARG_HELP.get(p.name, ""))])
        for p in signature.parameters.values()
        if p.name != "protocols"
        for kind in [str if p.name == "protocol" else p.annotation]
    ]
    # typer reads a command's parameters from its signature.
    command.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
    return command


def run_stage(
    fn: Callable[..., None], protocols: Mapping[str, Protocol[Any, Any]] | None = None
) -> None:
    """Run a stage function as a command (see :func:`stage_command`).

    Under a ``dvc queue`` of several workers on a machine with GPUs, the stage first takes its
    worker's share of them (before anything can initialise CUDA; see ``queue_gpus``)."""
    gpus = queue_gpus()
    if gpus is not None:
        os.environ[GPU_ENV] = gpus
    stage = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)
    stage.command()(stage_command(fn, protocols))
    stage()


STAGES: dict[str, tuple[Callable[..., None], str]] = {
    "fetch": (pipeline.fetch, "Load a protocol's items."),
    "variants": (
        pipeline.variants,
        "Render a protocol's conversations and lint them (before generation).",
    ),
    "generate": (
        pipeline.generate,
        "Run every turn of a protocol for one model, through the response store.",
    ),
    "label": (pipeline.label, "Label one model's responses."),
    "score": (
        pipeline.score,
        "Score every model; metrics, plot data, figures and the MLflow bundle.",
    ),
    "mlflow": (
        pipeline.mlflow,
        "Log the pipeline run and a child run per (protocol, model, dataset).",
    ),
}
