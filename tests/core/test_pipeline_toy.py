"""The generic stages (syps.core.pipeline: fetch, variants, generate, label, score, and what the
mlflow stage logs) on the toy protocol of tests/toy_protocol.py, registered for the test as the
only protocol, with its scripted backend standing in for the "hf" backend.

Hand-derived (see test_conversation.py): 3 items, 2 tones; 9 response rows, 2 of them skipped
children of the "skipme" item; 7 generations cold (3 in turn 1, 4 in turn 2). Labels: turn-2
rows of the two parseable items answer (1.0), the skipped ones are NaN with verdict SKIPPED, so
answered/<tone> = 1.0 and n_skipped/<tone> = 1 for each tone.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from conftest import SHARED_PARAMS, read_params, write_params
from toy_protocol import ToyBackend, register_toy

import syps.core.backends
from syps.core import pipeline
from syps.core.backends import BackendEntry
from syps.core.config import ConfigError, Params
from syps.core.io import LintError
from syps.core.params import load_params
from syps.protocols import PROTOCOLS

MODEL = "smollm2-135m"  # the fixture params' model


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[ToyBackend]:
    """The toy protocol registered, a fake "hf" backend, and tmp_path as the project root."""
    register_toy(monkeypatch)
    loads: list[ToyBackend] = []

    def load(spec: object, cache: Path) -> ToyBackend:
        loads.append(ToyBackend())
        return loads[-1]

    entry = BackendEntry(
        lambda spec, cache: {"backend": "hf", "model_id": "toy", "revision": "r0"},
        load,  # type: ignore[arg-type]
    )
    monkeypatch.setitem(syps.core.backends.BACKENDS, "hf", entry)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DVC_ROOT", raising=False)
    return loads


def params(tmp_path: Path, **toy: object) -> Path:
    raw = read_params(SHARED_PARAMS)  # the shared keys; the toy is the only protocol
    raw["protocols"] = {"toy": toy}
    return write_params(tmp_path / "params.yaml", raw)


def run_all(p: Path, root: Path) -> Path:
    """Every stage of dvc.yaml for protocol ``toy`` and the one model, as dvc.yaml runs them."""
    d = root / "out" / "protocols" / "toy"
    items = d / "items.parquet"
    pipeline.fetch(p, PROTOCOLS["toy"], items)
    pipeline.variants(
        p,
        PROTOCOLS["toy"],
        items,
        d / "lint.json",
        d / "conversations.parquet",
    )
    pipeline.generate(
        p,
        PROTOCOLS["toy"],
        MODEL,
        items,
        items.parent / "conversations.parquet",
        d / "responses" / f"{MODEL}.parquet",
    )
    pipeline.label(
        p,
        PROTOCOLS["toy"],
        MODEL,
        items,
        d / "responses" / f"{MODEL}.parquet",
        d / "labels" / f"{MODEL}.parquet",
    )
    pipeline.score(
        p,
        PROTOCOLS["toy"],
        items,
        d / "labels",
        root / "metrics" / "toy.json",
        root / "plots" / "toy",
        d / "figures",
        root / "out" / "tracks" / "toy.json",
    )
    return d


def tracked(
    p: Params, root: Path
) -> tuple[dict[str, Any], list[dict[str, Any]], list[tuple[str, str]], dict[str, str]]:
    """What the mlflow stage would log: the bundles, the child runs, the run-log records they
    consume and the run_log tags."""
    bundles = pipeline.read_bundles(p, root / "out" / "tracks")
    logs = pipeline.read_stage_logs(p, bundles)
    children, consumed, tags = pipeline.tracked_children(p, bundles, logs)
    return bundles, children, consumed, tags


def test_stages_end_to_end_then_tracked(toy: list[ToyBackend], tmp_path: Path) -> None:
    from syps.core.provenance import provenance_tags

    p = params(tmp_path)
    d = run_all(p, tmp_path)
    assert len(toy) == 1 and len(toy[0].sent) == 7
    resp = pd.read_parquet(d / "responses" / f"{MODEL}.parquet")
    labels = pd.read_parquet(d / "labels" / f"{MODEL}.parquet")
    assert len(resp) == len(labels) == 9
    assert list(labels.loc[labels["verdict"] == "SKIPPED", "evidence"]) == ["parent unparsed"] * 2
    assert json.loads((d / "lint.json").read_text())["ok"] is True
    metrics = json.loads((tmp_path / "metrics" / "toy.json").read_text())
    assert metrics == {
        MODEL: {
            "toy": {
                "answered/plain": 1.0,
                "answered/firm": 1.0,
                "n_skipped/plain": 1.0,
                "n_skipped/firm": 1.0,
            }
        }
    }
    loaded = load_params(p, PROTOCOLS)
    bundles, children, consumed, tags = tracked(loaded, tmp_path)
    (child,) = children
    assert child["name"] == f"toy/{MODEL}/toy" and child["params"]["replay"] == "visible"
    assert child["params"]["generate_ran"] == "true" and child["params"]["label_ran"] == "true"
    assert child["metrics"]["generated"] == 7 and child["metrics"]["skipped"] == 2
    assert child["metrics"]["served_from_store"] == 0
    assert child["metrics"]["turn1_generated"] == 3 and child["metrics"]["turn2_generated"] == 4
    # each record with the folder its run log lies in (the layout's out/)
    out = tmp_path / "out"
    assert consumed == [(out, "generate.toy", MODEL), (out, "label.toy", MODEL)]
    assert set(tags) == {f"run_log.generate.toy.{MODEL}", f"run_log.label.toy.{MODEL}"}
    # The parent's artifacts: the plot data folder, with the template set in it.
    assert bundles["toy"]["plots"] == str(tmp_path / "plots" / "toy")
    assert bundles["toy"]["figures"] == []
    assert json.loads((tmp_path / "plots" / "toy" / "templates.json").read_text())["t2"] == (
        "I object ({tone})."
    )
    assert "protocol.toy.templates_sha256" in provenance_tags(loaded, bundles, children)
    # A rerun is served by the store and never loads the model.
    run_all(p, tmp_path)
    assert len(toy) == 1


def test_usage_and_cost_logged_for_what_was_generated_now(
    toy: list[ToyBackend], tmp_path: Path
) -> None:
    """The toy backend reports 5 prompt and 3 completion tokens per answer. Cold: 7 answers
    generated, 35 tokens sent and 21 received; at $2 / $4 per million tokens that costs
    (35 * 2 + 21 * 4) / 1e6 = 154e-6. The rerun generates nothing: 0 sent, 35 served, $0, and
    the store saved the same 154e-6."""
    from syps.core.runs import mark_run_log_logged

    raw = read_params(SHARED_PARAMS)  # the shared keys; the toy is the only protocol
    raw["protocols"] = {"toy": {}}
    raw["models"][MODEL]["price"] = {"input": 2.0, "output": 4.0}
    p = write_params(tmp_path / "params.yaml", raw)
    runs = []
    for _ in range(2):
        run_all(p, tmp_path)
        _, (child,), consumed, _ = tracked(load_params(p, PROTOCOLS), tmp_path)
        runs.append(child["metrics"])
        for folder, stage, m in consumed:
            mark_run_log_logged(folder, stage, m, "run-id")
    cold, warm = runs
    assert (cold["tokens_sent"], cold["tokens_received"]) == (35, 21)
    assert cold["cost_usd"] == pytest.approx(154e-6) and cold["cost_saved_usd"] == 0
    assert (warm["tokens_sent"], warm["tokens_sent_served"], warm["tokens_received_served"]) == (
        0,
        35,
        21,
    )
    assert warm["cost_usd"] == 0 and warm["cost_saved_usd"] == pytest.approx(154e-6)
    assert (warm["generated"], warm["served_from_store"]) == (0, 7)


def test_a_bundle_from_other_params_is_refused(toy: list[ToyBackend], tmp_path: Path) -> None:
    run_all(params(tmp_path), tmp_path)
    edited = params(tmp_path, t2="Nope ({tone}).")
    with pytest.raises(ConfigError, match=r"toy.json: written for other protocols.toy params"):
        pipeline.read_bundles(load_params(edited, PROTOCOLS), tmp_path / "out" / "tracks")


def test_the_bundle_references_its_metrics_file(toy: list[ToyBackend], tmp_path: Path) -> None:
    """The bundle names the metrics file and its hash instead of copying the numbers, is
    strict JSON, and a metrics file changed after it (stale) is refused; the child run's
    metrics come from the file, null (undefined) as NaN."""
    p = params(tmp_path)
    run_all(p, tmp_path)
    track = tmp_path / "out" / "tracks" / "toy.json"

    def no_constants(name: str) -> None:  # NaN, Infinity: not JSON
        raise AssertionError(f"{track} holds {name}")

    bundle = json.loads(track.read_text(), parse_constant=no_constants)
    metrics = tmp_path / "metrics" / "toy.json"
    assert bundle["metrics"] == str(metrics)
    assert bundle["metrics_sha256"] == hashlib.sha256(metrics.read_bytes()).hexdigest()
    assert all("metrics" not in c for c in bundle["children"])
    # an undefined metric: null in the file, NaN in the child run
    scores = json.loads(metrics.read_text())
    scores[MODEL]["toy"]["answered/plain"] = None
    metrics.write_text(json.dumps(scores))
    loaded = load_params(p, PROTOCOLS)
    with pytest.raises(ConfigError, match=r"toy.json: not the file .*toy.json was written with"):
        pipeline.read_bundles(loaded, tmp_path / "out" / "tracks")
    bundle["metrics_sha256"] = hashlib.sha256(metrics.read_bytes()).hexdigest()
    track.write_text(json.dumps(bundle))
    _, (child,), _, _ = tracked(loaded, tmp_path)
    assert math.isnan(child["metrics"]["answered/plain"])
    assert child["metrics"]["answered/firm"] == 1.0


def test_disabled_protocol_runs_nothing(toy: list[ToyBackend], tmp_path: Path) -> None:
    p = params(tmp_path, enabled=False)
    d = run_all(p, tmp_path)
    assert toy == []  # no model loaded
    assert len(pd.read_parquet(d / "responses" / f"{MODEL}.parquet")) == 0
    assert json.loads((tmp_path / "metrics" / "toy.json").read_text()) == {}
    _, children, consumed, _ = tracked(load_params(p, PROTOCOLS), tmp_path)
    assert children == [] and consumed == []


def test_lint_failure_writes_the_report_and_stops(toy: list[ToyBackend], tmp_path: Path) -> None:
    p = params(tmp_path, t2="I object.")
    d = tmp_path / "out" / "protocols" / "toy"
    pipeline.fetch(p, PROTOCOLS["toy"], d / "items.parquet")
    with pytest.raises(LintError, match="does not vary with the tone"):
        pipeline.variants(
            p,
            PROTOCOLS["toy"],
            d / "items.parquet",
            d / "lint.json",
            d / "conversations.parquet",
        )
    assert json.loads((d / "lint.json").read_text())["ok"] is False
