"""Compare logged pipeline runs: read the MLflow child runs back into a model x dataset table.

A pipeline run is a parent run with one child per (protocol, model, dataset), laid out as
:mod:`syps.core.runlayout` says; judge-validation runs share the experiment and are never part of a
pipeline comparison: :func:`find_validation_runs` reads them as rows of their own (``syps compare
--validation``). mlflow is imported lazily, as in :mod:`syps.core.tracking`.
"""

from __future__ import annotations

import math
import unicodedata
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from syps.core.audit import find_pipeline_run
from syps.core.io import InputError
from syps.core.legacy import current_name
from syps.core.params import Protocols
from syps.core.protocol import headline_of, protocol_order
from syps.core.report import CI_BOUNDS, LOW_SUPPORT, LOW_SUPPORT_NOTE, support
from syps.core.runlayout import (
    KIND_TAG,
    child_metrics,
    child_protocol,
    children_filter,
    is_pipeline_parent,
    parent_of,
)
from syps.core.urls import redact

if TYPE_CHECKING:
    import mlflow
    from mlflow.entities import Run


COUNT_PREFIXES = ("n_", "flips_")
COUNT_SUFFIXES = ("_n", "_ci_reps", "_low_support")
VALIDATION = "judge-validation"  # the KIND_TAG of a syps judge validate run
# What a judge-validation row shows by default (``syps.core.validation``'s keys).
VALIDATION_METRICS = ["agreement", "kappa", "judged_rate", "corrected_rate"]


@dataclass(frozen=True)
class ComparedRun:
    """One child run (one protocol, model and dataset) with the pipeline run it belongs to."""

    run_id: str
    experiment_id: str
    model: str
    dataset: str
    parent_id: str
    parent_name: str
    metrics: dict[str, float]
    protocol: str = ""
    kind: str = "pipeline"
    """``pipeline``, or ``judge-validation`` for one dataset (or ``all``) of a validation run:
    ``model`` then names the judge, the parent is the run itself."""


def parse_tags(pairs: list[str]) -> dict[str, str]:
    """``["k=v", ...]`` as a dict; the value may itself contain ``=``."""
    tags = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise InputError(f"tag filter '{pair}' is not of the form key=value")
        tags[key] = value
    return tags


def find_runs(
    tracking_uri: str,
    experiment: str,
    tags: dict[str, str],
    run_ids: list[str],
    latest: bool,
    protocol: str | None = None,
) -> list[ComparedRun]:
    """The child runs to compare, newest parent first.

    Without ``run_ids``: the children of the pipeline runs of ``experiment`` whose tags include
    ``tags``, of only the newest such run when ``latest``. With ``run_ids``: each id is a parent
    (meaning all its children) or a child run, from any experiment; ``tags`` still filter their
    parents and ``latest`` does not apply. With ``protocol``, only that protocol's children
    (``latest`` then means the newest run that has some).
    """
    import mlflow  # heavy: slow to import, and only reading runs back needs it

    # A protocol's old name (``syps``) means it under its name now, as its children are read.
    protocol = None if protocol is None else current_name(protocol)
    client = mlflow.MlflowClient(tracking_uri=tracking_uri)
    if run_ids:
        parents, chosen = _parents_of_ids(client, tracking_uri, run_ids)
    else:
        exp = client.get_experiment_by_name(experiment)
        if exp is None:
            raise InputError(f"no experiment '{experiment}' in {redact(tracking_uri)}")
        parents = [
            r for r in _search(client, exp.experiment_id, "") if is_pipeline_parent(r.data.tags)
        ]
        if not parents:
            raise InputError(f"experiment '{experiment}' has no pipeline runs (run dvc repro)")
        chosen = {}
    matching = [p for p in parents if all(p.data.tags.get(k) == v for k, v in tags.items())]
    if not matching:
        where = f"run ids {run_ids}" if run_ids else f"experiment '{experiment}'"
        raise InputError(f"no pipeline run in {where} has tags {tags}")
    out = []
    for parent in matching:
        pid = parent.info.run_id
        children = chosen.get(pid) or _search(
            client, parent.info.experiment_id, children_filter(pid)
        )
        if not children:
            raise InputError(f"pipeline run {pid} ('{parent.info.run_name}') has no child runs")
        runs = [_compared(client, child, parent) for child in children]
        runs = [r for r in runs if protocol is None or r.protocol == protocol]
        if runs and latest and not run_ids:
            return runs
        out += runs
    if not out:
        raise InputError(f"no child run of protocol '{protocol}' in the pipeline runs chosen")
    return out


def find_validation_runs(
    tracking_uri: str,
    experiment: str,
    run_ids: list[str],
    latest: bool,
    protocol: str | None = None,
) -> list[ComparedRun]:
    """Judge-validation runs (``syps judge validate``) as rows, newest run first: one per
    dataset the run reports and ``all``, ``model`` naming the judge (``judge syc``), the
    metrics those the run logged as ``<dataset>/<key>``. Without ``run_ids``: those of
    ``experiment`` (of ``protocol``'s judges only, where given), only the newest when
    ``latest``."""
    import mlflow  # heavy: as for find_runs
    from mlflow.exceptions import MlflowException

    client = mlflow.MlflowClient(tracking_uri=tracking_uri)
    if run_ids:
        runs = []
        for run_id in dict.fromkeys(run_ids):
            try:
                run = client.get_run(run_id)
            except MlflowException:
                raise InputError(f"no run {run_id} in {redact(tracking_uri)}") from None
            if run.data.tags.get(KIND_TAG) != VALIDATION:
                raise InputError(f"run {run_id} is not a {VALIDATION} run (syps judge validate)")
            runs.append(run)
    else:
        exp = client.get_experiment_by_name(experiment)
        if exp is None:
            raise InputError(f"no experiment '{experiment}' in {redact(tracking_uri)}")
        runs = [
            r
            for r in _search(client, exp.experiment_id, f"tags.`{KIND_TAG}` = '{VALIDATION}'")
            if protocol is None or r.data.params.get("protocol") == protocol
        ]
        if not runs:
            of = "" if protocol is None else f" of protocol '{protocol}'"
            raise InputError(
                f"experiment '{experiment}' has no {VALIDATION} runs{of} (syps judge validate)"
            )
        runs = runs[:1] if latest else runs
    out = []
    for run in runs:
        by_dataset: dict[str, dict[str, float]] = {}
        for key, value in run.data.metrics.items():
            dataset, _, metric = key.partition("/")
            by_dataset.setdefault(dataset, {})[metric] = value
        out += [
            ComparedRun(
                run_id=run.info.run_id,
                experiment_id=run.info.experiment_id,
                model=f"judge {run.data.params.get('judge', '?')}",
                dataset=dataset,
                parent_id=run.info.run_id,
                parent_name=run.info.run_name or run.info.run_id,
                metrics=metrics,
                protocol=run.data.params.get("protocol", ""),
                kind=VALIDATION,
            )
            for dataset, metrics in by_dataset.items()
        ]
    return out


def _search(client: mlflow.MlflowClient, experiment_id: str, filter_string: str) -> list[Run]:
    """All active runs matching ``filter_string``, newest first, across result pages."""
    runs: list[Run] = []
    token = None
    while True:
        page = client.search_runs(
            [experiment_id],
            filter_string,
            order_by=["attributes.start_time DESC"],
            page_token=token,
        )
        runs += page
        token = page.token
        if not token:
            return runs


def _parents_of_ids(
    client: mlflow.MlflowClient, tracking_uri: str, run_ids: list[str]
) -> tuple[list[Run], dict[str, list[Run]]]:
    """The parents of ``run_ids`` (newest first), and the children picked per parent id.

    A parent id maps to no entry in the second value: all its children are wanted.
    """
    from mlflow.exceptions import MlflowException  # heavy: mlflow, as for the client passed in

    parents: dict[str, Run] = {}
    chosen: dict[str, list[Run]] = {}
    for run_id in dict.fromkeys(run_ids):
        try:
            run = client.get_run(run_id)
        except MlflowException:
            # What a person types for a pipeline run, as `syps audit` reads it (an id prefix,
            # the printed name, the git commit); a string fitting several runs lists them.
            run = find_pipeline_run(client, run_id, where=f" in {redact(tracking_uri)}")
            run_id = run.info.run_id
        if run.info.lifecycle_stage != "active":
            raise InputError(f"run {run_id} is deleted")
        if KIND_TAG in run.data.tags:
            kind = run.data.tags[KIND_TAG]
            raise InputError(
                f"run {run_id} is a {kind} run, not part of a pipeline run"
                + ("; syps compare --validation shows it" if kind == VALIDATION else "")
            )
        parent_id = parent_of(run.data.tags)
        if parent_id is None:
            parents[run_id] = run
            chosen.pop(run_id, None)
            continue
        if parent_id not in parents:
            parents[parent_id] = client.get_run(parent_id)
            chosen[parent_id] = []
        if parent_id in chosen:
            chosen[parent_id].append(run)
    ordered = sorted(parents.values(), key=lambda r: r.info.start_time, reverse=True)
    return ordered, chosen


def _compared(client: mlflow.MlflowClient, child: Run, parent: Run) -> ComparedRun:
    params = child.data.params
    if "model" not in params or "dataset" not in params:
        raise InputError(f"run {child.info.run_id} has no 'model' and 'dataset' params")
    return ComparedRun(
        run_id=child.info.run_id,
        experiment_id=child.info.experiment_id,
        model=params["model"],
        dataset=params["dataset"],
        parent_id=parent.info.run_id,
        parent_name=parent.info.run_name or parent.info.run_id,
        metrics=child_metrics(client, child),
        protocol=child_protocol(child.data.tags, params),
    )


def compare_table(
    runs: list[ComparedRun],
    metrics: list[str],
    fmt: Literal["text", "markdown"] = "text",
    width: int = 0,
    *,
    protocols: Protocols,
) -> str:
    """Model x dataset rows, one column per metric: ``value [ci_low, ci_high]`` where both
    bounds were logged, else the value. Where the run logged the metric's support, ``n=`` the
    items behind it follows, and a † marks a CI on fewer than ``score.min_items`` items,
    explained in a note under the table.

    With runs of several parents, a run column names each row's parent and rows of the same
    model and dataset sit together, in the order of ``runs``. Where the runs are of several
    protocols, a first column names each row's protocol, in registry order (``protocols``). NaN
    (undefined) shows as
    ``n/a``, a metric the run did not log as ``-``.

    With ``width`` (text only), the metric columns are wrapped into blocks, one under the
    other and each repeating the row's first columns, so that a line takes at most ``width``
    terminal columns (:func:`columns`: the low-support † counted as two) where a block of one
    metric column fits.
    """
    if not runs:
        raise InputError("no runs to compare")
    unknown = [m for m in metrics if not any(m in r.metrics for r in runs)]
    if unknown:
        raise InputError(f"metric(s) {unknown} not logged by any of the runs compared")
    labels = _parent_labels(runs)
    order = protocol_order(list(protocols))
    several = len(labels) > 1
    # A table of one protocol's runs needs no protocol column.
    mixed = len({r.protocol for r in runs}) > 1
    header = [
        *(["protocol"] if mixed else []),
        "model",
        "dataset",
        *(["run"] if several else []),
        *metrics,
    ]
    rows = [
        [
            *([r.protocol] if mixed else []),
            r.model,
            r.dataset,
            *([labels[r.parent_id]] if several else []),
            *(_cell(r.metrics, m) for m in metrics),
        ]
        for r in sorted(runs, key=lambda r: (order(r.protocol), r.model, r.dataset))
    ]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    # What each column takes on a terminal: the budget the blocks are cut to.
    spans = [max(columns(row[i]) for row in [header, *rows]) for i in range(len(header))]
    marked = any(LOW_SUPPORT in cell for row in rows for cell in row)
    if fmt == "markdown":
        line = "| " + " | ".join(f"{{:<{w}}}" for w in widths) + " |"
        rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
        md = [line.format(*header), rule, *(line.format(*r) for r in rows)]
        return "\n".join(md + (["", LOW_SUPPORT_NOTE] if marked else []))
    keys = len(header) - len(metrics)
    blocks: list[list[int]] = []
    used = 0
    for i in range(keys, len(header)):
        if not blocks or (width and used + 2 + spans[i] > width):
            blocks.append([])
            used = sum(spans[:keys]) + 2 * (keys - 1)
        blocks[-1].append(i)
        used += 2 + spans[i]
    table: list[str] = []
    for cols in blocks or [[]]:
        shown = [*range(keys), *cols]
        line = "  ".join(f"{{:<{widths[i]}}}" for i in shown)
        rule = line.format(*("-" * widths[i] for i in shown))
        lines = [line.format(*(row[i] for i in shown)) for row in [header, *rows]]
        table += ([""] if table else []) + [x.rstrip() for x in [lines[0], rule, *lines[1:]]]
    return "\n".join(table + ([LOW_SUPPORT_NOTE] if marked else []))


def compare_tables(
    runs: list[ComparedRun],
    fmt: Literal["text", "markdown"] = "text",
    width: int = 0,
    *,
    protocols: Protocols,
) -> str:
    """Each protocol's runs as a table of their own, under a line naming the protocol, with its
    headline metrics (:func:`default_metrics`), in registry order; one protocol's runs as one
    table with no such line."""
    names = sorted({r.protocol for r in runs}, key=protocol_order(list(protocols)))
    parts, marked = [], False
    for protocol in names:
        own = [r for r in runs if r.protocol == protocol]
        shown = default_metrics(own, protocols=protocols)
        lines = compare_table(own, shown, fmt, width, protocols=protocols).split("\n")
        marked |= lines[-1] == LOW_SUPPORT_NOTE
        table = "\n".join(x for x in lines if x != LOW_SUPPORT_NOTE).rstrip("\n")
        parts.append(table if len(names) == 1 else f"{protocol}:\n{table}")
    return "\n\n".join(parts) + (f"\n{LOW_SUPPORT_NOTE}" if marked else "")


def every_metric(runs: list[ComparedRun]) -> list[str]:
    """Every metric the runs logged (their metrics tables' included) but CI bounds, which the
    value's cell shows, sorted."""
    return sorted({k for r in runs for k in r.metrics if not k.endswith(CI_BOUNDS)})


def default_metrics(runs: list[ComparedRun], *, protocols: Protocols) -> list[str]:
    """The columns when none are asked for: each protocol's headline metrics (see
    :func:`syps.core.protocol.headline_of`; for judge-validation rows ``VALIDATION_METRICS``),
    in registry order, each metric once, each only where its runs logged it (a key may name a
    cell, and a run need not have every cell)."""
    out: list[str] = []
    for protocol in sorted({r.protocol for r in runs}, key=protocol_order(list(protocols))):
        own = [r for r in runs if r.protocol == protocol]
        logged = {k for r in own for k in r.metrics}
        names = (
            VALIDATION_METRICS
            if all(r.kind == VALIDATION for r in own)
            else headline_of(protocols, protocol, logged)
        )
        out += [m for m in names if m not in out and m in logged]
    return out


def columns(text: str) -> int:
    """The terminal columns ``text`` may take: two for a character a terminal may draw two
    columns wide (East Asian wide, fullwidth or ambiguous, as the low-support † is: CJK locales
    draw it wide), one for any other. Counting † as one let a table cut to 160 characters run
    past 160 columns (and bytes: † is three in UTF-8) wherever a line carried the mark."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WFA" else 1 for ch in text)


def _parent_labels(runs: list[ComparedRun]) -> dict[str, str]:
    """Parent id -> its run name, with a short id added where two parents share a name."""
    names = {r.parent_id: r.parent_name for r in runs}
    counts = {n: list(names.values()).count(n) for n in names.values()}
    return {pid: n if counts[n] == 1 else f"{n} ({pid[:8]})" for pid, n in names.items()}


def _cell(metrics: dict[str, float], name: str) -> str:
    if name not in metrics:
        return "-"
    v = metrics[name]
    lo, hi = metrics.get(f"{name}_ci_low"), metrics.get(f"{name}_ci_high")
    if math.isnan(v):
        return "n/a"
    if lo is not None and hi is not None:
        return f"{v:.3f} [{lo:.3f}, {hi:.3f}]{support(metrics, name)}"
    # MLflow stores counts (n_items, flips_*, *_n) as floats; show them as the integers they are.
    count = name == "n" or name.startswith(COUNT_PREFIXES) or name.endswith(COUNT_SUFFIXES)
    return f"{v:.0f}" if count else f"{v:.3f}"
