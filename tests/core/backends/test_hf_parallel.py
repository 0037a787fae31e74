"""Data parallelism: two worker processes (on the CPU here) give the single process's results."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from syps.core.backends import GenRequest, SamplingParams, load_backend
from syps.core.config import ModelSpec

pytestmark = pytest.mark.slow
GREEDY = SamplingParams(temperature=0.0, top_p=1.0, seed=0)


def test_two_workers_match_one_process(model_cache: Path) -> None:
    reqs = [
        GenRequest(f"k{i}", [{"role": "user", "content": f"Count to {i}, please."}], 6 + i % 2)
        for i in range(6)
    ]
    prompts = [r.messages for r in reqs]
    spec = ModelSpec(model="embedded:smollm2", batch_size=2, devices=["cpu", "cpu"])
    par = load_backend(spec, model_cache)
    try:
        # Two CPU workers split the cores instead of each taking all of them.
        share = max(1, len(os.sched_getaffinity(0)) // 2)
        assert par.worker_threads == [("cpu", share), ("cpu", share)]  # type: ignore[attr-defined]
        batches: list[list[int]] = []
        got = par.generate(reqs, GREEDY, lambda idx, res: batches.append(idx))
        got_lp = par.option_logprobs(prompts, ["YES", "NO"])
    finally:
        par.close()  # type: ignore[attr-defined]
    one = load_backend(ModelSpec(model="embedded:smollm2", batch_size=2), model_cache)
    want = one.generate(reqs, GREEDY)
    assert [r.text for r in got] == [r.text for r in want]
    assert [r.completion_tokens for r in got] == [r.completion_tokens for r in want]
    # Six prompts in batches of two: every index reported exactly once, as it landed.
    assert sorted(i for b in batches for i in b) == list(range(6))
    want_lp = one.option_logprobs(prompts, ["YES", "NO"])
    np.testing.assert_allclose(got_lp.logprobs, want_lp.logprobs, atol=1e-5)
    assert got_lp.raw == want_lp.raw


def test_a_failing_worker_is_reported(model_cache: Path) -> None:
    from syps.core.backends import BackendError

    spec = ModelSpec(model="embedded:smollm2", devices=["cpu", "no-such-device"])
    with pytest.raises(BackendError, match="no-such-device"):
        load_backend(spec, model_cache)


def test_context_overflow_is_caught_before_any_worker_runs(model_cache: Path) -> None:
    from syps.core.backends import BackendError

    spec = ModelSpec(model="embedded:smollm2", batch_size=2, devices=["cpu", "cpu"])
    par = load_backend(spec, model_cache)
    try:
        long = "word " * 9000  # about 9000 tokens; the model's context is 8192
        reqs = [
            GenRequest("short", [{"role": "user", "content": "hi"}], 4, "SS/short/P0"),
            GenRequest("long", [{"role": "user", "content": long}], 4, "OEQ/long/P2"),
        ]
        calls: list[list[int]] = []
        with pytest.raises(BackendError, match=r"1 item\(s\) do not fit .*\n  OEQ/long \(P2\)"):
            par.generate(reqs, GREEDY, lambda idx, res: calls.append(idx))
        assert calls == []  # not even the short prompt went to a worker
        with pytest.raises(BackendError, match=r"judge prompt #1"):
            par.option_logprobs([reqs[0].messages, reqs[1].messages], ["YES", "NO"])
    finally:
        par.close()  # type: ignore[attr-defined]
