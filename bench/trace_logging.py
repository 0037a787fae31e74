"""What logging every conversation as an MLflow trace costs, in one run here.

  python bench/trace_logging.py [--rows 50000] [--fluent-rows 1000]

Three ways, each into its own fresh SQLite store (``sqlite:///.../mlflow.db``, as syps uses):

- ``no traces``: the child run alone (params, metrics), as the mlflow stage logged it before;
- ``mlflow per trace``: what a user of MLflow's API writes, ``mlflow.start_span`` for each
  conversation (messages in, the answer out, the tags, the session) and ``mlflow.log_feedback``
  for its label (on ``--fluent-rows`` rows only: at about 90 ms a trace, 50,000 would take over
  an hour);
- ``batch writer``: ``syps.core.traces.log_traces``, the same traces and assessments in batches.

On the default run's own conversations (``out/protocols/*``, after ``dvc repro``) and on a
synthetic table of ``--rows`` two-turn conversations (seeded). Prints seconds, ms per trace and
the ratio to the per-trace path.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from syps.core import traces as tr
from syps.core.params import load_params
from syps.core.tracking import ChildRun, log_pipeline_run, tracking_uri
from syps.protocols import PROTOCOLS

ROOT = Path(__file__).resolve().parents[1]


def synthetic(n: int, seed: int = 0) -> list[tr.TraceRecord]:
    """``n`` rows: half first turns, half their follow-ups, with lengths like the default run's
    (a 600-character question, a 200-character answer), a tenth of them UNCLEAR."""
    rng = np.random.default_rng(seed)
    half = n // 2
    item = [f"i{k}" for k in range(half)] * 2
    turn = [1] * half + [2] * (n - half)
    ask = "x" * 600
    messages = [json.dumps([{"role": "user", "content": ask}])] * half + [
        json.dumps(
            [
                {"role": "user", "content": ask},
                {"role": "assistant", "content": "y" * 200},
                {"role": "user", "content": "Are you sure?"},
            ]
        )
    ] * (n - half)
    label = np.where(rng.random(n) < 0.1, np.nan, rng.integers(0, 2, n).astype(float))
    rows = pd.DataFrame(
        {
            "dataset": "synthetic",
            "item_id": item[:n],
            "cell": json.dumps({"cond": "a"}),
            "rep": 0,
            "turn": turn,
            "parent_key": [""] * half + [f"k{k}" for k in range(n - half)],
            "store_key": [f"k{k}" for k in range(half)] + [f"f{k}" for k in range(n - half)],
            "skipped": "",
            "model": "m",
            "messages": messages,
            "response": "y" * 200,
            "label": label,
            "verdict": np.where(np.isnan(label), "UNCLEAR", "A"),
            "evidence": "A.",
            "labeler": "rule:bench",
            "labeler_sha256": "0" * 64,
            "flagged": False,
            "expected": "A",
        }
    )
    return tr.records("bench", rows)


def default_run() -> list[tr.TraceRecord]:
    """The default run's conversations, as the mlflow stage builds them (every row)."""
    from syps.core.pipeline import child_traces, read_bundles, read_stage_logs

    os.chdir(ROOT)
    p = load_params(ROOT / "params.yaml", PROTOCOLS)
    bundles = read_bundles(p, ROOT / "out" / "tracks")
    per_child = child_traces(p, PROTOCOLS, bundles, read_stage_logs(p, bundles))
    return [t for records in per_child.values() for t in records]


def fluent(mlruns: Path, records: list[tr.TraceRecord]) -> None:
    """One child run, then each trace with MLflow's per-trace API."""
    os.environ["MLFLOW_ENABLE_ASYNC_TRACE_LOGGING"] = "false"
    import mlflow
    from mlflow.entities import AssessmentSource, SpanType

    parent = log_pipeline_run(mlruns, "bench", "fluent", {}, [ChildRun("c", {}, {}, protocol="x")])
    client = mlflow.MlflowClient(tracking_uri=tracking_uri(mlruns))
    (child,) = client.search_runs(
        [client.get_run(parent).info.experiment_id], f"tags.`mlflow.parentRunId` = '{parent}'"
    )
    mlflow.set_tracking_uri(tracking_uri(mlruns))
    mlflow.set_experiment(experiment_id=child.info.experiment_id)
    for t in records:
        with mlflow.start_span(t.name, SpanType.CHAT_MODEL, run_id=child.info.run_id) as span:
            span.set_inputs({"messages": t.messages})
            answer = {"role": "assistant", "content": t.response}
            span.set_outputs({"choices": [{"index": 0, "message": answer}]})
            mlflow.update_current_trace(tags=t.tags, session_id=t.session)
        mlflow.log_feedback(
            trace_id=span.trace_id,
            name="label",
            value=t.value,
            rationale=t.rationale,
            source=AssessmentSource(source_type="CODE", source_id=t.labeler),
        )


def timed(label: str, fn: object, n: int, base: float | None = None) -> float:
    start = time.perf_counter()
    fn()  # type: ignore[operator]
    s = time.perf_counter() - start
    per = 1000 * s / n if n else 0.0
    rate = f"{per:8.2f} ms/trace" if n else " " * 16
    ratio = f"{base / per:6.1f}x the per-trace rate" if base else ""
    print(f"  {label:<22} {n:>7} traces {s:9.1f} s {rate} {ratio}", flush=True)
    return per


def _child(mlruns: Path, name: str, traces: list[tr.TraceRecord] | None = None) -> None:
    child = ChildRun("c", {}, {}, protocol="x", traces=traces or [])
    log_pipeline_run(mlruns, "bench", name, {}, [child])


def compare(title: str, records: list[tr.TraceRecord], fluent_rows: int) -> None:
    """Each way into a store of its own, created (MLflow's schema migrations) before timing."""
    print(title, flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        stores = [Path(tmp) / k for k in "abcd"]
        for store in stores:
            _child(store, "warm-up")
        some = records[:fluent_rows]
        timed("no traces", lambda: _child(stores[0], "none"), 0)
        per = timed("mlflow per trace", lambda: fluent(stores[1], some), len(some))
        timed("batch writer", lambda: _child(stores[2], "batch", some), len(some), per)
        if len(records) > len(some):
            timed("batch writer", lambda: _child(stores[3], "all", records), len(records), per)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=50_000)
    ap.add_argument("--fluent-rows", type=int, default=1_000)
    args = ap.parse_args()
    compare("default run (out/protocols, after dvc repro)", default_run(), args.fluent_rows)
    compare(f"synthetic, {args.rows} rows", synthetic(args.rows), args.fluent_rows)


if __name__ == "__main__":
    main()
