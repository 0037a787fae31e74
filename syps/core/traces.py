"""Every conversation as an MLflow trace, with its label as an assessment.

One trace per label row (one turn of one conversation, skipped ones included), linked to the
child run of its (protocol, model, dataset), so that run's Traces tab lists them:

- the span (type ``CHAT_MODEL``) holds the message list sent as ``{"messages": [...]}`` and the
  response as an OpenAI chat completion, so MLflow's UI renders them as a conversation (a
  reasoning model's reasoning as the message's ``reasoning_content``);
- tags for everything a reader filters by (``syps.protocol``, ``syps.dataset``, ``syps.item``,
  ``syps.cell`` and one ``syps.cell.<factor>`` per factor, ``syps.rep``, ``syps.turn``,
  ``syps.model``, ``syps.store_key``, ``syps.served_from_store``, ``syps.label``, ...); a later
  turn names its parent's store key and trace (``syps.parent_key``, ``syps.parent_trace``);
- the session is the item (``<protocol>/<model>/<dataset>/<item>``), so an item's turns and
  repetitions read as one thread;
- the feedback ``label``: the value (1.0, 0.0, a score), ``UNCLEAR`` or ``SKIPPED``, with the
  evidence (or the skip reason) as its rationale and the labeler as its source (``LLM_JUDGE``
  for the judge, ``CODE`` for a rule), the verdict and the labeler's sha256 in its metadata; a
  judged row adds the feedback ``judge_margin`` (the lead of the winning option, in nats, from
  the evidence; where no other option was scored the lead is unbounded, which a tracking
  server's JSON cannot carry as a number, so it is the label's metadata ``judge_margin: inf``
  instead, on every store alike); where the protocol has a right answer, the expectation
  ``expected``.

A person's own label is a feedback named ``label`` from a ``HUMAN`` source, added in the UI;
:func:`human_labels` reads them back (``syps judge validate --traces``).

``tracking.traces`` chooses what is logged: ``all``; ``none``; or ``sample``: per (dataset, cell)
of each child, up to ``tracking.trace_sample`` rows of each of three kinds, drawn with the run
seed: those without a label (UNCLEAR, skipped), those the protocol flags (a flip, a cave), and
the rest. Each kind is bounded because flags are not rare at scale: a model that flips on half
of SyPS's 70,000 conversations would have 35,000 flagged traces, minutes of MLflow writes per
model (docs/performance.md gives the cost a trace). The trace index (and a cues response's
``trace_<variant>``) says which rows have a trace; the label tables hold every row.
"""

from __future__ import annotations

import json
import math
import secrets
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from syps.core.io import InputError, sha256_text
from syps.core.protocol import SIMULATOR

if TYPE_CHECKING:
    import mlflow

KEYS = ["dataset", "item_id", "cell", "rep", "turn"]
LABEL_FIELDS = ["label", "verdict", "evidence", "labeler", "labeler_sha256"]
RESPONSE_FIELDS = ["model", "store_key", "parent_key", "skipped", "messages", "response"]
# Response columns a trace carries where the table has them.
OPTIONAL_FIELDS = [
    "finish_reason",
    "prompt_tokens",
    "completion_tokens",
    "reasoning",
    "prompt_sha256",  # the hash of the bytes sent (syps.core.protocol.RESPONSE_COLUMNS)
    "role",  # a simulated user's turn is marked with the simulator's identity
    "model_id",
    "revision",
]
# What a trace's label feedback says for a row without a value.
UNCLEAR, SKIPPED = "UNCLEAR", "SKIPPED"
LABEL = "label"  # the feedback's name, the machine's and a person's alike
TAG = "syps."


def conversations(
    responses: pd.DataFrame, labels: pd.DataFrame, review: pd.DataFrame | None = None
) -> pd.DataFrame:
    """One row per label row: the response row (messages, response, store key, skip reason) with
    its label record and the protocol's ``review`` columns (``flagged``, ``expected``; aligned
    with ``labels``' index). Rows are matched on (dataset, item, cell, rep, turn)."""
    lab = labels[[*KEYS, *LABEL_FIELDS]].copy()
    if review is None:
        review = pd.DataFrame(index=labels.index)
    lab["flagged"] = review.get("flagged", pd.Series(False, index=labels.index)).astype(bool)
    lab["expected"] = review.get("expected", pd.Series("", index=labels.index)).astype(str)
    fields = [*RESPONSE_FIELDS, *(c for c in OPTIONAL_FIELDS if c in responses)]
    resp = responses[[*KEYS, *fields]].copy()
    for frame in (lab, resp):
        frame["rep"] = frame["rep"].astype(int)
        frame["turn"] = frame["turn"].astype(int)
    rows = resp.merge(lab, on=KEYS, how="inner", validate="one_to_one")
    if not len(rows) == len(resp) == len(lab):
        raise InputError(
            f"{len(lab)} label rows and {len(resp)} response rows share {len(rows)} keys: "
            "the labels are out of date (run dvc repro)"
        )
    return rows


# The kinds ``sample`` draws from apart, as named in their seeds; the rest's seed is the one a
# draw had when it was the only kind drawn, so those rows stay the ones earlier runs traced.
SAMPLE_KINDS = ("unlabelled", "flagged", "")


def choose(
    rows: pd.DataFrame,
    mode: str,
    per_cell: int,
    seed: int,
    model: str = "",
    factors: Sequence[str] | None = None,
) -> pd.DataFrame:
    """The rows to log under ``mode`` (see the module docstring), in their order.

    ``sample`` draws up to ``per_cell`` rows of each (dataset, cell) from each of its three
    kinds: UNCLEAR or skipped (``label`` NaN), ``flagged``, and the rest; uniformly without
    replacement, seeded by ``seed``, the group and the kind (so one group's draw does not depend
    on another's). A kind with no more rows than ``per_cell`` is kept whole. With ``factors``
    (the protocol's ``trace_cells``) a cell is its values of those factors alone."""
    if mode == "all":
        return rows
    if mode == "none":
        return rows.iloc[:0]
    unlabelled = rows["label"].isna().to_numpy()
    kind = np.where(unlabelled, 0, np.where(rows["flagged"].to_numpy(dtype=bool), 1, 2))
    keep = np.zeros(len(rows), dtype=bool)
    cells = rows["cell"]
    if factors is not None:
        within = _within(factors)
        cells = cells.map({c: within(c) for c in cells.unique()})
    for (dataset, cell), where in rows.groupby(["dataset", cells], sort=True).indices.items():
        for k, name in enumerate(SAMPLE_KINDS):
            pos = where[kind[where] == k]  # positions in rows
            if len(pos) > per_cell:
                group = f"{model}\n{dataset}\n{cell}" + (f"\n{name}" if name else "")
                derived = int(sha256_text(group)[:8], 16)
                pos = np.random.default_rng([seed, derived]).choice(pos, per_cell, replace=False)
            keep[pos] = True
    return rows[keep]


def _within(factors: Sequence[str]) -> Callable[[str], str]:
    """A cell (JSON) as its values of ``factors`` alone, in the cell's order."""

    def cell(c: str) -> str:
        kept = {k: v for k, v in json.loads(c).items() if k in factors} if c else {}
        return json.dumps(kept, separators=(",", ":")) if kept else ""

    return cell


def judge_margin(evidence: str) -> float | None:
    """The winning option's lead in nats, from a judge's evidence (``{"YES": -4.7, "NO": -6.9}``
    with the raw answer after it, as ``syps.core.judge`` writes it); None when the evidence is
    not that (a rule's). The evidence is rounded (``EVIDENCE_DECIMALS``): so is the margin."""
    try:
        scores, _ = json.JSONDecoder().raw_decode(evidence)
    except ValueError:
        return None
    if not isinstance(scores, dict) or len(scores) < 2:
        return None
    values = sorted((float(v) for v in scores.values() if v is not None), reverse=True)
    if not values:
        return None
    return values[0] - values[1] if len(values) > 1 else math.inf


def cell_name(cell: str) -> str:
    """``{"variant":"P3"}`` as ``variant=P3`` (factors joined by ``,``)."""
    return ",".join(f"{k}={v}" for k, v in json.loads(cell).items()) if cell else ""


@dataclass(frozen=True)
class TraceRecord:
    """What one trace holds: see the module docstring."""

    name: str
    session: str
    messages: list[dict[str, str]]
    response: str | None
    finish_reason: str
    tags: dict[str, str]
    parent_key: str
    store_key: str
    value: float | str
    rationale: str
    labeler: str
    metadata: dict[str, str]
    margin: float | None
    expected: str
    usage: dict[str, int] | None = None
    reasoning: str = ""  # a reasoning model's reasoning, kept out of the answer and the replay


def records(protocol: str, rows: pd.DataFrame, generated: Iterable[str] = ()) -> list[TraceRecord]:
    """The trace of each row; ``generated``: the store keys generated in this pipeline run (the
    others were served from the store, or from an earlier run's output)."""
    fresh = set(generated)
    out = []
    for r in rows.sort_values("turn", kind="stable").to_dict("records"):
        skipped = str(r.get("skipped", "") or "")
        label = r["label"]
        value: float | str
        if skipped:
            value = SKIPPED
        elif label is None or (isinstance(label, float) and math.isnan(label)):
            value = UNCLEAR
        else:
            value = float(label)
        cell = str(r["cell"])
        tags = {
            f"{TAG}protocol": protocol,
            f"{TAG}model": str(r["model"]),
            f"{TAG}dataset": str(r["dataset"]),
            f"{TAG}item": str(r["item_id"]),
            f"{TAG}cell": cell,
            **{f"{TAG}cell.{k}": str(v) for k, v in (json.loads(cell) if cell else {}).items()},
            f"{TAG}rep": str(r["rep"]),
            f"{TAG}turn": str(r["turn"]),
            f"{TAG}store_key": str(r["store_key"]),
            f"{TAG}served_from_store": str(
                bool(r["store_key"]) and r["store_key"] not in fresh
            ).lower(),
            f"{TAG}label": value if isinstance(value, str) else f"{value:g}",
            f"{TAG}verdict": str(r["verdict"]),
            f"{TAG}flagged": str(bool(r["flagged"])).lower(),
        }
        if r.get("prompt_sha256"):
            tags[f"{TAG}prompt_sha256"] = str(r["prompt_sha256"])
        if r["parent_key"]:
            tags[f"{TAG}parent_key"] = str(r["parent_key"])
        if skipped:
            tags[f"{TAG}skipped"] = skipped
        if r.get("role") == SIMULATOR:
            # A user turn a simulated user wrote: what wrote it, beside the model under study.
            tags[f"{TAG}role"] = SIMULATOR
            tags[f"{TAG}simulator"] = f"{r.get('model_id', '')}@{r.get('revision', '')}"
        labeler = str(r["labeler"])
        margin = judge_margin(str(r["evidence"])) if labeler.startswith("judge:") else None
        out.append(
            TraceRecord(
                name="/".join(
                    x for x in (protocol, str(r["dataset"]), cell_name(cell), f"turn{r['turn']}")
                ),
                session=f"{protocol}/{r['model']}/{r['dataset']}/{r['item_id']}",
                messages=json.loads(r["messages"]) if r.get("messages") else [],
                response=None if skipped else str(r["response"]),
                finish_reason=str(r.get("finish_reason", "") or ""),
                tags=tags,
                parent_key=str(r["parent_key"]),
                store_key=str(r["store_key"]),
                value=value,
                rationale=skipped or str(r["evidence"]),
                labeler=labeler,
                metadata={
                    "verdict": str(r["verdict"]),
                    "labeler_sha256": str(r["labeler_sha256"]),
                },
                margin=margin,
                expected=str(r["expected"]),
                usage=None if skipped else _usage(r),
                reasoning=str(r.get("reasoning", "") or ""),
            )
        )
    return out


TRACE_INDEX_COLUMNS = [*KEYS, "store_key", "label", "flagged", "trace_id", "prompt_sha256"]
# Columns an index written by an earlier syps may lack, read as "".
LATER_INDEX_COLUMNS = ["prompt_sha256"]


def trace_index(traces: Sequence[TraceRecord], ids: Sequence[str]) -> pd.DataFrame:
    """The index of logged ``traces`` (their ids ``ids``, as :func:`log_traces` returns them):
    one row each, in order, with the columns ``TRACE_INDEX_COLUMNS`` (``label``: the value,
    ``UNCLEAR`` or ``SKIPPED``; ``flagged``: ``true``/``false``; ``prompt_sha256``: the hash of
    the prompt sent, "" for a skipped row), all text as the trace's tags hold it."""
    if len(traces) != len(ids):
        raise ValueError(f"{len(traces)} traces but {len(ids)} trace ids")
    fields = ["dataset", "item", "cell", "rep", "turn", "store_key", "label", "flagged"]
    rows = [
        [t.tags[f"{TAG}{f}"] for f in fields] + [i, t.tags.get(f"{TAG}prompt_sha256", "")]
        for t, i in zip(traces, ids, strict=True)
    ]
    return pd.DataFrame(rows, columns=TRACE_INDEX_COLUMNS, dtype=str)


def read_trace_index(path: Any) -> pd.DataFrame:
    """A trace index as :func:`trace_index` made it (every column text, nothing read as NaN;
    a column an earlier syps did not write, ``LATER_INDEX_COLUMNS``, as "")."""
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    for c in LATER_INDEX_COLUMNS:
        if c not in frame.columns:
            frame[c] = ""
    missing = [c for c in TRACE_INDEX_COLUMNS if c not in frame.columns]
    if missing:
        raise InputError(f"{path}: not a trace index (no column {missing[0]})")
    return frame


# Spans per store call and traces per run link: MLflow caps a link request at 100.
SPAN_BATCH, LINK_BATCH = 500, 100


def log_traces(
    client: mlflow.MlflowClient, experiment_id: str, run_id: str, traces: Sequence[TraceRecord]
) -> list[str]:
    """Log ``traces`` into the experiment, linked to ``run_id``; returns their trace ids.

    MLflow's own path (``mlflow.start_span`` per trace, then ``mlflow.log_feedback``) writes
    each trace in four transactions of about 65 statements, over ten times as long a trace as
    this path (``bench/trace_logging.py``; the figures are in docs/performance.md). This writes
    them in batches through the store's own batch entry points instead: one ``log_spans`` call
    for up to 500 traces (the store's OTLP ingest path, which creates each trace from its root
    span, its name from the ``mlflow.traceTag.mlflow.traceName`` attribute and its session from
    ``session.id``),
    the run link 100 at a time (``link_traces_to_run``), and the tags and assessments in one
    transaction, as MLflow's ``set_trace_tag`` and ``create_assessment`` write each (their
    ``SqlTraceTag`` and ``SqlAssessments`` rows), falling back to those calls where MLflow's
    trace rollups are on (they need their own bookkeeping per write). On a tracking server
    the tags travel as root-span attributes instead (one request with the spans, not one per
    tag) and the assessments one request each.
    Trace ids are made here, so a later turn names its parent's trace before either is
    written."""
    # heavy: mlflow and its OpenTelemetry SDK load only when traces are logged
    from mlflow.entities import Assessment
    from mlflow.entities.span import create_mlflow_span
    from mlflow.tracing.utils import generate_mlflow_trace_id_from_otel_trace_id
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.trace import SpanContext, Status, StatusCode, TraceFlags

    store = client._tracking_client.store
    # On a tracking server a tag is a request of its own (two or three a second measured against
    # a local basic-auth server: tests/test_secrets.py's run took minutes): there the
    # tags ride on the root span as ``mlflow.traceTag.<key>`` attributes, which the server's
    # OTLP ingest turns into the same tags, in the one request that carries the spans.
    on_server = not _sql_store(store)
    resource = Resource({"service.name": "syps"})
    start = time.time_ns()
    by_key: dict[str, str] = {}
    spans, ids = [], []
    tag_rows: list[tuple[str, str, str]] = []
    assessments: list[Assessment] = []
    for n, t in enumerate(traces):
        otel_id = secrets.randbits(128) or 1
        trace_id = generate_mlflow_trace_id_from_otel_trace_id(otel_id)
        tags = dict(t.tags)
        if t.parent_key in by_key:
            tags[f"{TAG}parent_trace"] = by_key[t.parent_key]
        if t.store_key:
            by_key.setdefault(t.store_key, trace_id)
        begin = start + n * 1000  # 1 us apart: the UI lists them in table order
        attributes = _span_attributes(t, trace_id)
        if on_server:
            attributes.update({f"mlflow.traceTag.{k}": v for k, v in tags.items()})
        else:
            tag_rows += [(trace_id, k, v) for k, v in tags.items()]
        context = SpanContext(otel_id, secrets.randbits(64) or 1, False, TraceFlags(1))
        otel = ReadableSpan(
            name=t.name,
            context=context,
            parent=None,
            resource=resource,
            attributes={k: json.dumps(v) for k, v in attributes.items()},
            start_time=begin,
            end_time=begin + 1000,
            status=Status(StatusCode.OK),
        )
        spans.append(create_mlflow_span(otel, trace_id))
        ids.append(trace_id)
        assessments += _assessments(t, trace_id, begin // 1_000_000)
    for k in range(0, len(spans), SPAN_BATCH):
        store.log_spans(experiment_id, spans[k : k + SPAN_BATCH])
    for k in range(0, len(ids), LINK_BATCH):
        client.link_traces_to_run(ids[k : k + LINK_BATCH], run_id)
    _write_tags_and_assessments(store, experiment_id, tag_rows, assessments)
    return ids


def _span_attributes(t: TraceRecord, trace_id: str) -> dict[str, Any]:
    """The root span's attributes as MLflow's OTLP ingest reads them: the trace, the span type,
    the messages sent and the answer as a chat completion, the session, the trace's name and
    the tokens."""
    attributes: dict[str, Any] = {
        "mlflow.traceRequestId": trace_id,
        "mlflow.spanType": "CHAT_MODEL",
        "mlflow.spanInputs": {"messages": t.messages},
        "session.id": t.session,
        "mlflow.traceTag.mlflow.traceName": t.name,
    }
    if t.response is not None:
        attributes["mlflow.spanOutputs"] = _completion(t.response, t.finish_reason, t.reasoning)
    if t.usage:
        attributes["mlflow.chat.tokenUsage"] = t.usage
    return attributes


def _assessments(t: TraceRecord, trace_id: str, at: int) -> list[Any]:
    """The assessments of one trace written by :func:`log_traces`: its label as feedback (with
    the judge's margin where there is one) and the protocol's expected answer, at ``at`` ms."""
    from mlflow.entities import AssessmentSource, Expectation, Feedback  # heavy: mlflow

    kind = "LLM_JUDGE" if t.labeler.startswith("judge:") else "CODE"
    source = AssessmentSource(source_type=kind, source_id=t.labeler or "none")
    unbounded = t.margin is not None and not math.isfinite(t.margin)
    out: list[Any] = [
        Feedback(
            name=LABEL,
            value=t.value,
            source=source,
            trace_id=trace_id,
            metadata={**t.metadata, "judge_margin": "inf"} if unbounded else t.metadata,
            rationale=t.rationale,
            create_time_ms=at,
            last_update_time_ms=at,
        )
    ]
    if t.margin is not None and not unbounded:
        out.append(
            Feedback(
                name="judge_margin",
                value=t.margin,
                source=source,
                trace_id=trace_id,
                create_time_ms=at,
                last_update_time_ms=at,
            )
        )
    if t.expected:
        out.append(
            Expectation(
                name="expected",
                value=t.expected,
                source=AssessmentSource(
                    source_type="CODE", source_id=f"protocol:{t.tags[TAG + 'protocol']}"
                ),
                trace_id=trace_id,
                create_time_ms=at,
                last_update_time_ms=at,
            )
        )
    return out


def _sql_store(store: Any) -> bool:
    """Whether ``store`` is MLflow's own SQL store (a local ``sqlite:///`` one), not a server's
    REST client."""
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore  # heavy: mlflow

    return isinstance(store, SqlAlchemyStore)


def _write_tags_and_assessments(
    store: Any,
    experiment_id: str,
    tags: Sequence[tuple[str, str, str]],
    assessments: Sequence[Any],
) -> None:
    """The tags (trace id, key, value) and assessments of traces this process just wrote, in
    one transaction (see :func:`log_traces`): the rows MLflow's ``set_trace_tag`` and
    ``create_assessment`` write, each tag checked as ``set_trace_tag`` checks it. Through
    those calls, one at a time, where the store is not MLflow's SQL store or its trace rollups
    are on. (As span attributes the tags would cost a merge, a query and an insert, each.)"""
    # heavy: mlflow (and SQLAlchemy) load only when traces are logged
    from mlflow.store.tracking.utils.sql_trace_rollups import rollups_enabled

    if not _sql_store(store) or rollups_enabled():
        for trace_id, key, value in tags:
            store.set_trace_tag(trace_id, key, value)
        for a in assessments:
            store.create_assessment(a)
        return
    # heavy: mlflow's SQL models, only for its own SQL store
    from mlflow.store.tracking.dbmodels.models import SqlAssessments, SqlTraceTag
    from mlflow.utils.validation import _validate_trace_tag

    rows: list[Any] = []
    for trace_id, key, value in tags:
        key, value = _validate_trace_tag(key, value)  # type: ignore[no-untyped-call]
        rows.append(SqlTraceTag(request_id=trace_id, key=key, value=value))
    for a in assessments:
        row = SqlAssessments.from_mlflow_entity(a)
        row.experiment_id = int(experiment_id)
        row.trace_timestamp_ms = a.create_time_ms  # the trace's start, as log_traces set it
        rows.append(row)
    with store.ManagedSessionMaker(read_only=False) as session:
        session.bulk_save_objects(rows)  # plain INSERTs: nothing to merge on new traces


def _usage(row: dict[str, Any]) -> dict[str, int] | None:
    """The tokens sent and received, as MLflow's ``mlflow.chat.tokenUsage`` holds them."""
    try:
        sent, got = int(row["prompt_tokens"]), int(row["completion_tokens"])
    except (KeyError, TypeError, ValueError):
        return None
    return {"input_tokens": sent, "output_tokens": got, "total_tokens": sent + got}


def _completion(response: str, finish_reason: str, reasoning: str = "") -> dict[str, Any]:
    """A response as the OpenAI chat completion MLflow renders as the assistant's message; a
    reasoning model's reasoning as the message's ``reasoning_content`` (the field DeepSeek's and
    vLLM's OpenAI-compatible servers use), only where there is some."""
    message = {"role": "assistant", "content": response}
    if reasoning:
        message["reasoning_content"] = reasoning
    return {
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": finish_reason or "stop",
            }
        ],
    }


def human_labels(client: mlflow.MlflowClient, run_ids: Sequence[str]) -> pd.DataFrame:
    """People's labels on the traces of ``run_ids``: the newest feedback named ``label`` from a
    ``HUMAN`` source on each trace, with the trace's tags (dataset, item, cell, model, rep,
    turn), its response and the reviewer. Columns: ``trace_id, model, dataset, item_id, cell,
    rep, turn, response, human_label, reviewer``."""
    rows = []
    for run_id in run_ids:
        run = client.get_run(run_id)
        for trace in run_traces(client, run.info.experiment_id, run_id):
            human = [
                a
                for a in trace.info.assessments
                if a.name == LABEL and a.source.source_type == "HUMAN" and a.valid is not False
            ]
            if not human:
                continue
            newest = max(human, key=lambda a: a.last_update_time_ms or a.create_time_ms or 0)
            tags = trace.info.tags
            spans = trace.data.spans
            response = response_text(spans[0].outputs if spans else None)
            rows.append(
                {
                    "trace_id": trace.info.trace_id,
                    "model": tags.get(f"{TAG}model", ""),
                    "dataset": tags.get(f"{TAG}dataset", ""),
                    "item_id": tags.get(f"{TAG}item", ""),
                    "cell": tags.get(f"{TAG}cell", ""),
                    "rep": tags.get(f"{TAG}rep", ""),
                    "turn": tags.get(f"{TAG}turn", ""),
                    "response": response,
                    "human_label": "" if newest.value is None else str(newest.value),
                    "reviewer": newest.source.source_id,
                }
            )
    return pd.DataFrame(
        rows,
        columns=[
            "trace_id",
            "model",
            "dataset",
            "item_id",
            "cell",
            "rep",
            "turn",
            "response",
            "human_label",
            "reviewer",
        ],
    )


def response_text(outputs: Any) -> str:
    """The response a trace holds, from its root span's ``outputs`` (the chat completion
    :func:`_completion` logs): the message's content, or "" where there is none (no span, no
    such field)."""
    try:
        return str(outputs["choices"][0]["message"]["content"])
    except (TypeError, KeyError, IndexError):
        return ""


def run_traces(
    client: mlflow.MlflowClient, experiment_id: str, run_id: str, *, spans: bool = True
) -> list[Any]:
    """Every trace of a run, page by page; without its spans where ``spans`` is False (its
    tags are enough to find a row's)."""
    traces: list[Any] = []
    token = None
    while True:
        page = client.search_traces(
            locations=[experiment_id],
            run_id=run_id,
            max_results=500,
            page_token=token,
            include_spans=spans,  # the response is the span's output
        )
        traces += list(page)
        token = page.token
        if not token:
            return traces
