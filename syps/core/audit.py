"""Audit a logged pipeline run from the MLflow store alone: which data, templates, models,
settings and code produced its numbers, and what changed between two runs.

Everything read here was written by the mlflow stage (see :func:`syps.core.pipeline.mlflow`), laid
out as :mod:`syps.core.runlayout` says: the parent run's tags (hashes, model revisions, settings,
versions), its artifacts ``params.yaml`` and each protocol's ``protocols/<name>/templates.json``,
and each child run's protocol, params and metrics. A colleague
who has only a copy of ``mlruns/`` can audit: artifacts are read from that copy even though
MLflow recorded them under the absolute path of the machine that ran the pipeline.
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from syps.core.config import read_yaml
from syps.core.io import InputError
from syps.core.legacy import current_name
from syps.core.params import Protocols
from syps.core.protocol import headline_of, protocol_order
from syps.core.runlayout import (
    KIND_TAG,
    PARAMS,
    PROTOCOLS_DIR,
    TEMPLATES,
    TRACE_INDEX,
    child_metrics,
    child_protocol,
    children_filter,
    parent_of,
    protocol_templates,
)
from syps.core.traces import SKIPPED, UNCLEAR, cell_name, read_trace_index
from syps.core.tracking import existing_store, on_server

if TYPE_CHECKING:
    import mlflow
    from mlflow.entities import Run


@dataclass(frozen=True)
class AuditChild:
    """One child run: its protocol, name, params and metrics, and its trace index (None where
    it logged none: no traces, or logged before syps wrote one)."""

    protocol: str
    name: str
    params: dict[str, str]
    metrics: dict[str, float]
    traces: pd.DataFrame | None = None


@dataclass(frozen=True)
class Audit:
    """One pipeline run as an audit reads it."""

    run_id: str
    name: str
    experiment_id: str
    start_time: int
    tags: dict[str, str]
    params_yaml: str
    children: list[AuditChild]
    # Each protocol's template set (protocols/<name>/templates.json), by protocol.
    protocol_templates: dict[str, Any]


def load_audit(mlruns: Path, run: str, protocols: Protocols) -> Audit:
    """The pipeline run ``run`` names (see :func:`find_pipeline_run`) from ``mlruns``, or from
    the tracking server ``MLFLOW_TRACKING_URI`` names, its children in the order of
    ``protocols`` (the registry)."""
    import mlflow  # heavy: slow to import, and only reading runs back needs it

    client = mlflow.MlflowClient(tracking_uri=existing_store(mlruns))
    parent = find_pipeline_run(client, run)
    if not on_server():
        return _load_audit(client, parent, protocols, lambda r: _artifact_dir(client, r, mlruns))
    # A server's artifacts are read from a copy of the runs' own, fetched for this audit.
    with tempfile.TemporaryDirectory() as tmp:

        def fetched(r: Run) -> Path:
            dest = Path(tmp) / r.info.run_id
            dest.mkdir()
            return Path(client.download_artifacts(r.info.run_id, "", str(dest)))

        return _load_audit(client, parent, protocols, fetched)


def _load_audit(
    client: mlflow.MlflowClient,
    parent: Run,
    protocols: Protocols,
    folder_of: Callable[[Run], Path],
) -> Audit:
    """The audit of ``parent``, its artifacts and its children's read from ``folder_of``."""
    artifacts = folder_of(parent)
    try:
        params_yaml = (artifacts / PARAMS).read_text(encoding="utf-8")
    except OSError as e:
        raise InputError(
            f"run {parent.info.run_id}: cannot read its {PARAMS} under {artifacts} ({e}); runs "
            "logged before the audit trail existed have none"
        ) from None
    children = client.search_runs([parent.info.experiment_id], children_filter(parent.info.run_id))
    return Audit(
        run_id=parent.info.run_id,
        name=parent.info.run_name or "",
        experiment_id=parent.info.experiment_id,
        start_time=parent.info.start_time,
        tags=dict(parent.data.tags),
        params_yaml=params_yaml,
        children=sorted(
            (
                AuditChild(
                    child_protocol(c.data.tags, c.data.params),
                    c.info.run_name or "",
                    dict(c.data.params),
                    child_metrics(client, c, folder),
                    _trace_index(folder),
                )
                for c in children
                for folder in [folder_of(c)]
            ),
            key=lambda c: (protocol_order(list(protocols))(c.protocol), c.name),
        ),
        protocol_templates=_protocol_templates(artifacts, parent.info.run_id),
    )


def _trace_index(artifacts: Path) -> pd.DataFrame | None:

    path = artifacts / TRACE_INDEX
    return read_trace_index(path) if path.is_file() else None


def _protocol_templates(artifacts: Path, run_id: str) -> dict[str, Any]:
    """Each ``protocols/<name>/templates.json`` under the run's artifacts, by protocol name (a
    run logged before SyPS was a protocol holds SyPS's at the top)."""
    out: dict[str, Any] = {}
    folder = artifacts / PROTOCOLS_DIR
    found = sorted(folder.glob(f"*/{TEMPLATES}")) if folder.is_dir() else []
    legacy = [artifacts / TEMPLATES] if (artifacts / TEMPLATES).is_file() else []
    for path in [*legacy, *found]:
        name = current_name(path.parent.name if path in found else "")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as e:
            raise InputError(
                f"run {run_id}: cannot read {protocol_templates(name)} ({e})"
            ) from None
        if not isinstance(data, dict):
            raise InputError(f"run {run_id}: {protocol_templates(name)} is not a JSON object")
        out[name] = data
    return out


def find_pipeline_run(client: mlflow.MlflowClient, run: str, where: str = "") -> Run:
    """The pipeline run ``run`` names, as a person would type it: a run id, of the pipeline run
    or of one of its children (which means its parent); its name; any prefix of either id; the
    name without the ``.N`` that a rerun's name ends with (``355bf03-21e0930f`` for
    ``355bf03-21e0930f.3``); or the git commit it ran on, as 7 or more hex digits of its sha
    (the short sha a name starts with).

    A whole id or name settles it. Otherwise every pipeline run that fits counts, and one fitting
    several is an error listing them: silently taking the newest would audit a run the user
    did not mean. ``where`` ends the message when nothing fits (`` in <store>``).
    """
    from mlflow.exceptions import MlflowException  # heavy: mlflow, as for the client passed in

    try:
        found = client.get_run(run)
    except MlflowException:
        found = None
    if found is not None:
        parent_id = parent_of(found.data.tags)
        return client.get_run(parent_id) if parent_id else found
    want = run.lower()
    commit = len(want) >= 7 and all(c in "0123456789abcdef" for c in want)
    rerun = re.compile(re.escape(run) + r"\.[0-9]+")
    named: dict[str, list[str]] = {}  # parent id -> how it matched: the whole name
    fits: dict[str, list[str]] = {}  # the same, by a prefix, a name's stem or the commit
    for r in _all_runs(client):
        tags = r.data.tags
        if KIND_TAG in tags:
            continue  # a judge validation is not a pipeline run
        parent_id = parent_of(tags) or r.info.run_id
        if r.info.run_id.startswith(want):
            fits.setdefault(parent_id, []).append(f"id {r.info.run_id}")
        if parent_of(tags) is not None:
            continue  # a child is named after its model and dataset, not its run
        name = r.info.run_name or ""
        if name == run:
            named.setdefault(parent_id, []).append("name")
        if rerun.fullmatch(name):
            fits.setdefault(parent_id, []).append(f"name {name}")
        sha = tags.get("git_commit", "")  # the full sha (syps.core.provenance.git_info)
        if commit and sha.startswith(want):
            fits.setdefault(parent_id, []).append(f"git commit {sha[:12]}")
    matches = named or fits
    if not matches:
        raise InputError(f"no pipeline run with id, id prefix, name or git commit '{run}'{where}")
    parents = sorted(
        (client.get_run(pid) for pid in matches),
        key=lambda r: r.info.start_time,
        reverse=True,
    )
    if len(parents) > 1:
        lines = [
            f"  {r.info.run_id}  {r.info.run_name or '-'}  {_when(r.info.start_time)}  "
            f"(matched by {', '.join(matches[r.info.run_id])})"
            for r in parents
        ]
        raise InputError(
            f"'{run}' is ambiguous: {len(parents)} pipeline runs match it; give its whole name "
            "or id, or more of the id:\n" + "\n".join(lines)
        )
    return parents[0]


def _all_runs(client: mlflow.MlflowClient) -> list[Run]:
    """Every active run of every experiment, across result pages."""
    runs: list[Run] = []
    ids = [e.experiment_id for e in client.search_experiments()]
    token = None
    while ids:
        page = client.search_runs(ids, "", max_results=1000, page_token=token)
        runs += page
        token = page.token
        if not token:
            break
    return runs


def _when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M UTC")


def _artifact_dir(client: mlflow.MlflowClient, run: Run, mlruns: Path) -> Path:
    """The run's artifact folder inside ``mlruns``.

    MLflow records absolute URIs; syps puts an experiment's artifacts in ``mlruns/artifacts``
    (see :mod:`syps.core.tracking`), so the run's folder is its URI relative to the experiment's
    location, under the given store. That keeps the audit working on a copy made elsewhere.
    """
    base = str(client.get_experiment(run.info.experiment_id).artifact_location).rstrip("/")
    uri = str(run.info.artifact_uri)
    if not uri.startswith(base + "/"):
        raise InputError(f"run {run.info.run_id}: artifacts at {uri}, outside {base}")
    return mlruns / "artifacts" / uri[len(base) + 1 :]


# --- one run --------------------------------------------------------------------------------


def render_audit(a: Audit, protocols: Protocols) -> str:
    """The chain from data and code to numbers, as plain text."""
    t = a.tags
    when = _when(a.start_time)
    dirty = {"true": "uncommitted changes", "false": "clean"}.get(t.get("git_dirty", ""), "?")
    versions = ", ".join(
        f"{k.removeprefix('version.')} {v}"
        for k, v in sorted(t.items())
        if k.startswith("version.")
    )
    lines = [
        f"run       {a.run_id} ({a.name}), experiment {a.experiment_id}, {when}",
        f"code      git {t.get('git_commit', '?')} ({dirty}); {versions}",
        f"data      md5 {t.get('data_md5', '?')} (dvc.lock); data.dvc {t.get('data_dvc_md5', '?')}",
    ]
    for key in sorted(k for k in t if k.startswith("model.") and k.endswith(".model_id")):
        m = key.removeprefix("model.").removesuffix(".model_id")
        lines.append(
            f"model     {m}: {t[key]} @ {t.get(f'model.{m}.revision', '?')}\n"
            f"          spec {t.get(f'model.{m}.spec', '?')}"
        )
    lines.append(f"seed      {t.get('seed', '?')}")
    lines.append(
        f"judge     {t.get('judge.labeler', '(no judged rows)')}\n"
        f"          spec {t.get('judge.spec', '?')}"
    )
    # What this pipeline run's generate and label stages did (their own log lines).
    for key in sorted(k for k in t if k.startswith("run_log.")):
        stage, _, model = key.removeprefix("run_log.").rpartition(".")
        lines.append(f"this run  {stage} {model}: {t[key].split(': ', 1)[-1]}")
    names = sorted(
        {c.protocol for c in a.children} | a.protocol_templates.keys(),
        key=protocol_order(list(protocols)),
    )
    for protocol in names:
        lines += _render_protocol(a, protocol, protocols)
    return "\n".join(lines)


def _render_protocol(a: Audit, protocol: str, protocols: Protocols) -> list[str]:
    """A protocol's template set, as logged, and its children's headline metrics."""
    lines = [f"protocol  {protocol}"]
    if protocol in a.protocol_templates:
        text = json.dumps(a.protocol_templates[protocol], indent=2, ensure_ascii=False)
        lines.append(f"  templates ({protocol_templates(protocol)})")
        lines += [f"    {line}" for line in text.splitlines()]
    else:
        lines.append(f"  templates: none logged ({protocol_templates(protocol)} is absent)")
    for child in (c for c in a.children if c.protocol == protocol):
        lines.append(f"  {child.name}")
        heads = headline_of(protocols, protocol, child.metrics)
        names = [m for m in heads if m in child.metrics]
        width = max([len(m) for m in names] + [1])
        lines += [f"    {m:<{width}}  {_num(child.metrics[m])}" for m in names]
        if child.traces is not None:
            lines.append(
                f"    traces: {_trace_counts(child.traces)} ({TRACE_INDEX}; "
                f"--metric {child.params.get('dataset', '')}.<metric> lists a metric's)"
            )
    return lines


def _trace_counts(index: pd.DataFrame) -> str:
    n = len(index)
    flagged = int((index["flagged"] == "true").sum())
    unclear = int((index["label"] == UNCLEAR).sum())
    skipped = int((index["label"] == SKIPPED).sum())
    return f"{n} logged, {flagged} flagged, {unclear} UNCLEAR, {skipped} skipped"


# --- from a metric to its traces ------------------------------------------------------------


def render_metric_traces(a: Audit, metric: str, protocols: Protocols) -> str:
    """The traces a metric rests on, per child run that has it: ``metric`` is a child's metric
    key (``delta_P3``: every child with it) or ``<dataset>.<key>`` (``SS.delta_P3``: the
    children of that dataset). Each trace's row names its id, item, cell, repetition, turn,
    label and flag; flagged rows (a flip, a cave) first. Which cells a metric is computed from
    is its protocol's to say (``metric_cells``); a protocol that does not say lists every
    cell of the child."""

    datasets = {c.params.get("dataset", "") for c in a.children}
    head, _, rest = metric.partition(".")
    dataset, key = (head, rest) if rest and head in datasets else ("", metric)
    chosen = [
        c
        for c in a.children
        if key in c.metrics and (not dataset or c.params.get("dataset") == dataset)
    ]
    if not chosen:
        where = f" of dataset {dataset}" if dataset else ""
        raise InputError(f"run {a.run_id}: no child run{where} has the metric {key!r}")
    lines: list[str] = []
    for child in chosen:
        m = child.metrics
        ci = (
            f" [{_num(m[key + '_ci_low'])}, {_num(m[key + '_ci_high'])}]"
            if f"{key}_ci_low" in m and f"{key}_ci_high" in m
            else ""
        )
        support = f" (n={_num(m[key + '_n'])})" if f"{key}_n" in m else ""
        lines.append(f"{child.name}  {key} = {_num(m[key])}{ci}{support}")
        if child.traces is None:
            lines.append(
                f"  no trace index ({TRACE_INDEX}): no traces were logged (tracking.traces: "
                "none), or the run was logged before syps wrote one"
            )
            continue
        proto = protocols.get(child.protocol)
        cells = proto.report.metric_cells(key) if proto is not None else None
        rows = child.traces[_in_cells(child.traces["cell"], cells)]
        rows = rows.assign(_order=(rows["flagged"] != "true").astype(int)).sort_values(
            ["_order", "item_id", "cell", "rep", "turn"], kind="stable"
        )
        which = (
            "every cell"
            if cells is None
            else "; ".join(",".join(f"{k}={v}" for k, v in c.items()) for c in cells)
        )
        lines.append(f"  cells: {which}; traces: {_trace_counts(rows)}")
        # The prompt: the first 12 hex digits of the sha256 of the bytes sent (the response
        # and label rows' prompt_sha256; "-" for a skipped row or a run logged before it).
        table = [["trace", "item", "cell", "rep", "turn", "label", "flagged", "prompt"]] + [
            [
                r.trace_id,
                r.item_id,
                cell_name(r.cell),
                r.rep,
                r.turn,
                r.label,
                r.flagged,
                r.prompt_sha256[:12] or "-",
            ]
            for r in rows.itertuples(index=False)
        ]
        widths = [max(len(str(r[i])) for r in table) for i in range(len(table[0]))]
        lines += [
            "  " + "  ".join(f"{str(v):<{w}}" for v, w in zip(r, widths, strict=True)).rstrip()
            for r in table
        ]
    return "\n".join(lines)


def _in_cells(cells: pd.Series, wanted: list[dict[str, str]] | None) -> pd.Series:
    """Which trace cells (JSON) match one of ``wanted``'s factor values; every one for None."""
    if wanted is None:
        return pd.Series(True, index=cells.index)

    def match(cell: str) -> bool:
        values = {k: str(v) for k, v in (json.loads(cell) if cell else {}).items()}
        return any(all(values.get(k) == v for k, v in w.items()) for w in wanted)

    return cells.map(match).astype(bool)


def _quote(text: str) -> str:
    """Multi-line text on indented lines, so the exact bytes stay readable."""
    return json.dumps(text, ensure_ascii=False)


def _num(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:.0f}" if float(v).is_integer() else f"{v:.3f}"


# --- two runs -------------------------------------------------------------------------------


def render_diff(a: Audit, b: Audit) -> str:
    """What changed from run ``a`` to run ``b``: data, code, models, templates and params."""
    out = [f"--- {a.run_id} ({a.name})", f"+++ {b.run_id} ({b.name})"]
    skip = ("template_sha256.", "mlflow.")
    keys = sorted(k for k in a.tags.keys() | b.tags.keys() if not k.startswith(skip))
    changed = [k for k in keys if a.tags.get(k) != b.tags.get(k)]
    out.append("tags" + ("" if changed else ": no change"))
    for k in changed:
        out.append(f"  {k}: {a.tags.get(k, '(absent)')} -> {b.tags.get(k, '(absent)')}")
    for protocol in sorted(a.protocol_templates.keys() | b.protocol_templates.keys()):
        out += _protocol_template_diff(a, b, protocol)
    params = _flat_diff(read_yaml(a.params_yaml), read_yaml(b.params_yaml))
    out.append("params.yaml" + ("" if params else ": no change"))
    out += [f"  {line}" for line in params]
    return "\n".join(out)


def _protocol_template_diff(a: Audit, b: Audit, protocol: str) -> list[str]:
    """A protocol's template set, changed leaf by leaf (each a JSON value)."""
    head = protocol_templates(protocol)
    ta, tb = a.protocol_templates.get(protocol), b.protocol_templates.get(protocol)
    if ta is None or tb is None:
        return [f"{head}: {'added' if ta is None else 'removed'}"]
    changed = _flat_diff(ta, tb)
    return [head + ("" if changed else ": no change"), *(f"  {line}" for line in changed)]


def _flat_diff(a: Any, b: Any, path: str = "") -> list[str]:
    """Changed leaves of two nested mappings, as ``key.path: old -> new``."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [
            line
            for k in sorted(a.keys() | b.keys(), key=str)
            for line in _flat_diff(
                a.get(k, "(absent)"), b.get(k, "(absent)"), f"{path}.{k}" if path else str(k)
            )
        ]
    if a == b:
        return []
    return [f"{path}: {json.dumps(a, ensure_ascii=False)} -> {json.dumps(b, ensure_ascii=False)}"]
