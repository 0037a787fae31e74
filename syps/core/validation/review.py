"""People's labels in MLflow: the traces of sampled rows, the review queue that asks the
judge's question of them (``syps judge sample --queue``), and the answers read back as an
annotated sample, from that queue or from feedback on the traces (``syps judge validate
--queue|--traces``). mlflow is imported inside the functions: only these paths need it."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from syps.core.compare import find_runs
from syps.core.config import Params
from syps.core.io import InputError, read_parquet, sha256_text
from syps.core.layout import Layout
from syps.core.protocol import Protocol
from syps.core.reporting import JudgeSpec
from syps.core.traces import LINK_BATCH, TAG, human_labels, response_text, run_traces
from syps.core.tracking import tracking_uri
from syps.core.urls import redact
from syps.core.validation.inputs import ITEM_COLUMNS, with_context

# --- the review queue ---------------------------------------------------------------------

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

    uri = tracking_uri(Layout.here().mlruns)
    client = mlflow.MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(p.tracking.experiment)
    if exp is None:
        raise InputError(
            f"no experiment '{p.tracking.experiment}' in {redact(uri)}; run dvc repro first"
        )
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
        tracking_uri(Layout.here().mlruns),
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


@dataclass(frozen=True)
class QueueAnswers:
    """The answers to a review queue: ``sample``, the annotated sample validated against (one
    row per trace, its reviewers' answer where they agree); ``reviews``, each reviewer's newest
    answer per trace (the sample's columns and ``reviewer``), for the agreement between
    them."""

    sample: pd.DataFrame
    reviews: pd.DataFrame


def annotations_from_queue(
    spec: JudgeSpec,
    protocol: Protocol[Any, Any],
    p: Params,
    queue: str,
    items: Path | None = None,
    labels_dir: Path | None = None,
) -> QueueAnswers:
    """The reviewers' answers to the review queue ``queue`` (``syps judge sample --queue``): a
    feedback named :func:`question_name` from a ``HUMAN`` source, the reviewer's name its source
    id (on a server with authentication, their login), each reviewer's newest one counting.

    The sample has one row per trace in the queue, assembled as for
    :func:`annotations_from_traces`: the answer where every reviewer of the trace gave the
    same, else an empty ``human_label`` (an item nobody answered yet, or one its reviewers
    disagree on, its ``notes`` naming each answer) refused without ``--allow-missing``: a
    disagreement is settled by a reviewer answering again, not by syps picking a side."""
    layout = Layout.here()
    items = items or layout.items(protocol.name)
    labels_dir = labels_dir or layout.labels(protocol.name)
    answers = _queue_answers(spec, protocol, p, queue)
    answered = answers[answers["reviewer"] != ""]
    reviews = _as_sample(spec, answered, items, labels_dir, keep=("reviewer",), quiet=True)
    return QueueAnswers(_as_sample(spec, _consensus(answers), items, labels_dir), reviews)


def _consensus(answers: pd.DataFrame) -> pd.DataFrame:
    """One row per trace of ``answers`` (one per trace and reviewer, an unanswered trace with
    an empty reviewer): the reviewers' common answer, or none, with who said what."""
    rows = []
    for _, group in answers.groupby("trace_id", sort=False):
        said = group[group["reviewer"] != ""].sort_values("reviewer", kind="stable")
        first = group.iloc[0].copy()
        labels = set(said["human_label"])
        who = ", ".join(
            f"{r}: {v}" for r, v in zip(said["reviewer"], said["human_label"], strict=True)
        )
        if len(labels) == 1:
            first["human_label"], first["reviewer"] = labels.pop(), ", ".join(said["reviewer"])
        else:
            first["human_label"] = ""
            first["reviewer"] = f"reviewers disagree ({who})" if len(said) else ""
        rows.append(first)
    return pd.DataFrame(rows).reset_index(drop=True)


def _queue_answers(
    spec: JudgeSpec, protocol: Protocol[Any, Any], p: Params, queue: str
) -> pd.DataFrame:
    """Each reviewer's newest answer per trace of ``queue`` (the trace's tags, ``trace_id``,
    ``response``, ``human_label``, ``reviewer``); a trace nobody answered, one row with an empty
    reviewer and label."""
    from mlflow.exceptions import MlflowException  # heavy: mlflow, as for the clients

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
        newest: dict[str, Any] = {}
        for a in trace.info.assessments:
            if a.name != name or a.source.source_type != "HUMAN" or a.valid is False:
                continue
            when = a.last_update_time_ms or a.create_time_ms or 0
            seen = newest.get(a.source.source_id)
            if seen is None or when >= (seen.last_update_time_ms or seen.create_time_ms or 0):
                newest[a.source.source_id] = a
        spans = trace.data.spans
        head = [
            *_tag_row(trace_id, trace.info.tags),
            response_text(spans[0].outputs if spans else None),
        ]
        said = [
            (r, "" if a.value is None else _human_value(str(a.value)))
            for r, a in sorted(newest.items())
        ]
        rows += [[*head, label, reviewer] for reviewer, label in said or [("", "")]]
    return pd.DataFrame(
        rows, columns=[*TRACE_TAG_COLUMNS, "trace_id", "response", "human_label", "reviewer"]
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
    layout = Layout.here()
    items = items or layout.items(protocol.name)
    uri = tracking_uri(layout.mlruns)
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
    return _as_sample(spec, people, items, labels_dir or layout.labels(protocol.name))


def _as_sample(
    spec: JudgeSpec,
    people: pd.DataFrame,
    items: Path,
    labels_dir: Path,
    keep: tuple[str, ...] = (),
    quiet: bool = False,
) -> pd.DataFrame:
    """People's labels on traces (``trace_id``, the trace's tags, ``response``,
    ``human_label`` as the feedback says it, ``reviewer``) as an annotated sample: the key
    columns a trace lacks from its cell, the label-table columns ``spec.reads`` names, the
    context from the items table; rows of responses the judge does not decide left out (and
    counted, unless ``quiet``); ``notes`` naming the reviewer and the trace; and the columns
    ``keep`` of ``people``."""
    people = _cell_columns(spec, people)
    if spec.reads:
        people = _with_labels(spec, people, labels_dir)
    people = people.assign(human_label=[_human_value(v) for v in people["human_label"]])
    n = len(people)
    people = with_context(spec, people, read_parquet(items, ITEM_COLUMNS), items)
    if len(people) < n and not quiet:
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
    )[[*spec.sample_columns, *keep]]


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
