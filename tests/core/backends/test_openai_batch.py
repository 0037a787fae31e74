"""``mode: batch`` against a local Files + Batches server (tests/stub_batch.py), through the real
``openai`` client: a batch that completes, one that completes partially, one that expires, and
a run killed with SIGKILL while it polls, resumed without a second batch."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from stub_batch import BatchServer, stub_batch

from syps.core.backends import GenRequest, GenResult, OptionScores, SamplingParams
from syps.core.backends.openai_api import BackendError, OpenAIBackend
from syps.core.backends.openai_batch import batch_jsonl, parse_results
from syps.core.config import ModelSpec
from syps.core.store import Store
from syps.protocols import PROTOCOLS

GREEDY = SamplingParams(temperature=0.0, top_p=1.0, seed=0)
TESTS = Path(__file__).resolve().parents[2]


@pytest.fixture
def server() -> Iterator[BatchServer]:
    with stub_batch() as s:
        yield s


def backend(base_url: str, batch_dir: Path) -> OpenAIBackend:
    spec = ModelSpec(model="m", backend="openai", base_url=base_url, mode="batch", max_retries=0)
    return OpenAIBackend(spec, batch_dir=batch_dir, poll_base_s=0.01, poll_cap_s=0.05)


def requests(n: int, marks: dict[int, str] | None = None) -> list[GenRequest]:
    marks = marks or {}
    return [
        GenRequest(
            key=f"key{i:03d}",
            messages=[
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": f"prompt number {i}{marks.get(i, '')}"},
            ],
            max_new_tokens=16,
            where=f"OEQ/item{i:03d}/P0",
        )
        for i in range(n)
    ]


class Recorder:
    def __init__(self) -> None:
        self.calls: list[list[int]] = []
        self.results: dict[int, GenResult] = {}

    def __call__(self, idx: list[int], res: list[GenResult]) -> None:
        self.calls.append(list(idx))
        self.results.update(zip(idx, res, strict=True))


def _last(body: dict[str, object]) -> str:
    messages = body["messages"]
    assert isinstance(messages, list)
    return str(messages[-1]["content"])


def test_a_batch_that_completes(server: BatchServer, tmp_path: Path) -> None:
    rec = Recorder()
    out = backend(server.base_url, tmp_path).generate(requests(4), GREEDY, rec)
    assert [r.text for r in out] == [f"ok: prompt number {i}" for i in range(4)]
    # Usage as the server counted it: 2 + 3 prompt words, 4 answer words.
    assert {(r.prompt_tokens, r.completion_tokens, r.finish_reason) for r in out} == {
        (5, 4, "stop")
    }
    # One batch; every completion handed on in one call (one store transaction).
    assert server.created == 1 and rec.calls == [[0, 1, 2, 3]]
    # Each line is the body the online path sends.
    assert server.bodies[0][0] == {
        "model": "m",
        "messages": requests(1)[0].messages,
        "max_tokens": 16,
        "temperature": 0.0,
        "top_p": 1.0,
    }
    assert list(tmp_path.iterdir()) == []  # the batch id is forgotten once stored


def test_a_batch_that_completes_partially(
    server: BatchServer, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    marks = {1: " [fail]", 3: " [fail]", 4: " [too-long]", 5: " [error]"}
    reqs = requests(6, marks)
    rec = Recorder()
    with pytest.raises(BackendError) as err:
        backend(server.base_url, tmp_path).generate(reqs, GREEDY, rec)
    # Round 1 answered 0 and 2; the transient failures (1, 3, 5) went into a second batch,
    # the context overflow (4) did not; the second answered 1 and 3.
    assert server.created == 2
    assert [_last(b) for b in server.bodies[1]] == [
        reqs[i].messages[-1]["content"] for i in (1, 3, 5)
    ]
    assert rec.calls == [[0, 2], [1, 3]]
    assert rec.results[1].text == "ok: prompt number 1 [fail]"
    msg = str(err.value)
    assert "2 of 6 batch request(s) failed for good" in msg
    assert "OEQ/item004/P0 (prompt key004): HTTP 400: This model's maximum context length" in msg
    assert "OEQ/item005/P0 (prompt key005): HTTP 500: The server had an error" in msg
    assert "generation.max_new_tokens" in msg  # the overflow's fix
    assert "resubmitting them once" in capfd.readouterr().err


def test_a_batch_that_expires(server: BatchServer, tmp_path: Path) -> None:
    server.expire_next = 2  # the first batch answers 2 lines, then expires
    rec = Recorder()
    out = backend(server.base_url, tmp_path).generate(requests(5), GREEDY, rec)
    assert [r.text for r in out] == [f"ok: prompt number {i}" for i in range(5)]
    assert server.batches["batch_0"]["status"] == "expired"
    # Only the expired three were resubmitted, as their own batch.
    assert server.created == 2 and len(server.inputs[1]) == 3
    assert server.inputs[1] == server.inputs[0][2:]
    assert rec.calls == [[0, 1], [2, 3, 4]]


def test_a_batch_that_fails_as_a_whole(server: BatchServer, tmp_path: Path) -> None:
    server.fail_next = True
    rec = Recorder()
    with pytest.raises(
        BackendError, match=r"batch batch_0 failed as a whole \(invalid_json: Line 1"
    ):
        backend(server.base_url, tmp_path).generate(requests(2), GREEDY, rec)
    assert rec.calls == [] and list(tmp_path.iterdir()) == []
    # Its id is forgotten: a rerun submits again instead of resuming the failed batch.
    out = backend(server.base_url, tmp_path).generate(requests(2), GREEDY)
    assert len(out) == 2 and server.created == 2


def test_judge_options_through_a_batch(server: BatchServer, tmp_path: Path) -> None:
    prompts = [r.messages for r in requests(3)]
    scored = backend(server.base_url, tmp_path).option_logprobs(prompts, ["ok:", "no"])
    # The stub returns no logprobs: scored by the text, "ok: ..." chosen.
    assert scored.logprobs.tolist() == [[0.0, -np.inf]] * 3
    assert scored.tokens is not None and scored.tokens.tolist() == [[5, 4]] * 3
    assert {(b["max_tokens"], b["logprobs"], b["top_logprobs"]) for b in server.bodies[0]} == {
        (1, True, 20)
    }
    assert isinstance(scored, OptionScores) and server.created == 1


def test_custom_ids_follow_the_body_not_the_position() -> None:
    bodies = [{"a": 1}, {"a": 2}, {"a": 1}]
    text, ids = batch_jsonl([0, 1, 2], lambda i: bodies[i])
    sub, sub_ids = batch_jsonl([1, 2], lambda i: bodies[i])
    # A repeated body gets its own id; a subset's lines read as they did in the whole.
    assert len(ids) == 3 and sorted(ids.values()) == [0, 1, 2]
    assert text.splitlines()[1:] != sub.splitlines()  # the repeat is now the first of its body
    assert sub.splitlines()[0] == text.splitlines()[1]
    assert all(len(c) <= 64 for c in ids)
    # Lines for ids not ours are ignored; an entry without a response is transient.
    (cid,) = [c for c, i in sub_ids.items() if i == 1]
    got = parse_results(
        f'{{"custom_id": "{cid}", "response": null, "error": {{"code": "batch_expired", '
        '"message": "expired"}}\n{"custom_id": "other", "response": null}\n',
        sub_ids,
    )
    assert got.errors == {1: (True, "batch_expired: expired")} and got.completions == {}


# -- kill -9 while polling, then resume -----------------------------------------------------------
def run_study(base_url: str, batch_dir: str, store: str, n: int) -> None:
    """What the generate stage does: look up the store, send only the misses, store each."""
    reqs = requests(n)
    with Store(Path(store)) as s:
        have = s.get_many([r.key for r in reqs])
        todo = [r for r in reqs if r.key not in have]

        def persist(idx: list[int], res: list[GenResult]) -> None:
            s.put_many(
                "generation", [(todo[i].key, vars(r)) for i, r in zip(idx, res, strict=True)]
            )

        backend(base_url, Path(batch_dir)).generate(todo, GREEDY, persist)


def test_kill_9_while_polling_then_resume_without_a_second_batch(
    server: BatchServer, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    batches, store = tmp_path / "batches", tmp_path / "store.sqlite"
    run_study(server.base_url, str(batches), str(store), 2)  # 2 requests already stored
    assert server.created == 1
    server.hold = True
    looked_up = server.retrieves
    code = (
        f"import sys; sys.path[:0] = [{str(TESTS)!r}, {str(TESTS / 'core' / 'backends')!r}]\n"
        "import test_openai_batch as t\n"
        f"t.run_study({server.base_url!r}, {str(batches)!r}, {str(store)!r}, 5)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS.parent), str(TESTS)])},
        start_new_session=True,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        # Polling has begun once the new batch was looked up twice (in_progress, held).
        while server.created < 2 or server.retrieves < looked_up + 2:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, "the batch run never started polling"
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL
    # The killed run sent only the 3 requests missing from the store, and left its batch id.
    assert len(server.inputs[1]) == 3 and len(list(batches.iterdir())) == 1
    server.hold = False
    run_study(server.base_url, str(batches), str(store), 5)
    assert "batch batch_1: resuming" in capfd.readouterr().err
    assert server.created == 2  # resumed, not paid for twice
    with Store(store) as s:
        stored = s.get_many([r.key for r in requests(5)])
    assert [stored[f"key{i:03d}"]["text"] for i in range(5)] == [
        f"ok: prompt number {i}" for i in range(5)
    ]
    assert list(batches.iterdir()) == []
    # Everything stored: a rerun creates no batch at all.
    run_study(server.base_url, str(batches), str(store), 5)
    assert server.created == 2


# -- through the generate stage -------------------------------------------------------------------
def test_generate_stage_in_batch_mode_sends_only_what_the_store_lacks(
    server: BatchServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pandas as pd
    import yaml
    from conftest import read_params

    from syps.core import pipeline

    repo = TESTS.parent
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DVC_ROOT", str(tmp_path))

    def study(limit: int) -> pd.DataFrame:
        raw = read_params()
        for name, block in raw["protocols"].items():
            block["enabled"] = name == "cues"  # SyPS alone
        data = raw["protocols"]["cues"]["data"]
        data["limit"] = limit
        data["files"] = {
            d: str(repo / f"data/builtin/{f}.csv")
            for d, f in (("OEQ", "OEQ"), ("AITA-YTA", "AITA"), ("SS", "SS"))
        }
        raw["models"] = {
            "api": {"backend": "openai", "model": "m", "base_url": server.base_url}
            | {"mode": "batch", "identity": "stub-weights"}
        }
        params = tmp_path / "params.yaml"
        params.write_text(yaml.safe_dump(raw))
        d = Path("out/protocols/cues")
        pipeline.fetch(params, PROTOCOLS["cues"], d / "items.parquet")
        pipeline.variants(
            params,
            PROTOCOLS["cues"],
            d / "items.parquet",
            d / "lint.json",
            d / "conversations.parquet",
        )
        out = d / "responses" / "api.parquet"
        pipeline.generate(
            params,
            PROTOCOLS["cues"],
            "api",
            d / "items.parquet",
            d / "conversations.parquet",
            out,
        )
        return pd.read_parquet(out)

    server.instant = True  # the stage polls every 10 s at first; the stub need not be polled
    first = study(1)
    assert server.created == 1 and len(server.inputs[0]) == 24
    second = study(2)
    # The 24 stored responses were not resubmitted: the new batch holds only the 24 new ones.
    assert server.created == 2 and len(server.inputs[1]) == 24
    assert not {_last(b) for b in server.bodies[0]} & {_last(b) for b in server.bodies[1]}
    assert len(second) == 48 and second["response"].str.startswith("ok: ").all()
    assert second["prompt_tokens"].gt(0).all() and second["completion_tokens"].gt(0).all()
    pd.testing.assert_frame_equal(
        first.reset_index(drop=True),
        second[second["store_key"].isin(first["store_key"])].reset_index(drop=True),
    )
    assert list((tmp_path / ".cache" / "batches").iterdir()) == []
