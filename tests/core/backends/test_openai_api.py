"""OpenAIBackend against real llm-katan echo servers on 127.0.0.1 (nothing is patched).

Every server this module needs is started once, all at the same time (each takes ~1.5 s to
import FastAPI), and stopped by its own pid at teardown. The echo text holds a timestamp, so
tests compare its stable parts only.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from dataclasses import replace

import numpy as np
import pytest
from katan import MODEL, Katan, free_port, start_katan, stop_katans, wait_ready
from openai import APIStatusError, OpenAI
from stub_openai import ERRORS, OVERFLOWS, REASONING, REASONING_ROUTES, StubServer, stub_openai

from syps.core.backends import GenRequest, GenResult, OptionScores, SamplingParams
from syps.core.backends.openai_api import (
    BackendError,
    OpenAIBackend,
    backoff_s,
    finish_reason,
    is_context_overflow,
    option_scores_from_text,
    option_scores_from_top,
    retry_after_s,
)
from syps.core.config import ConfigError, ModelSpec

GREEDY = SamplingParams(temperature=0.0, top_p=1.0, seed=0)
SECRET = "sk-test-Zq8v3uNotARealKey0123456789"
RATE_LIMIT_AFTER = 5

# name -> extra llm-katan flags; "validated" expects a key other than SECRET, so it answers 401
# with a body that quotes the key it received.
SERVERS: dict[str, list[str]] = {
    "plain": [],
    "slow": ["--latency-ms", "200"],
    "flaky": ["--error-rate", "0.3"],
    "ratelimited": ["--rate-limit-after", str(RATE_LIMIT_AFTER)],
    "stalled": ["--latency-ms", "1000"],
    "validated": ["--validate-keys", "--api-keys", "openai=the-expected-key"],
}


@pytest.fixture(scope="module")
def katan(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Katan]]:
    logs = tmp_path_factory.mktemp("katan")
    servers: dict[str, Katan] = {}
    try:
        for name, flags in SERVERS.items():
            servers[name] = start_katan(flags, logs / f"{name}.log")
        for k in servers.values():
            wait_ready(k)
        yield servers
    finally:
        stop_katans(list(servers.values()))


def spec(base_url: str, **kw: object) -> ModelSpec:
    base = ModelSpec(model=MODEL, backend="openai", base_url=base_url, concurrency=8)
    return replace(base, **kw)  # type: ignore[arg-type]


def requests(n: int, max_new_tokens: int = 32) -> list[GenRequest]:
    return [
        GenRequest(
            key=f"key{i:03d}",
            messages=[
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": f"prompt number {i}"},
            ],
            max_new_tokens=max_new_tokens,
        )
        for i in range(n)
    ]


class Recorder:
    """An on_results callback that remembers every call."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[int], list[GenResult]]] = []

    def __call__(self, idx: list[int], res: list[GenResult]) -> None:
        self.calls.append((list(idx), list(res)))

    @property
    def indices(self) -> list[int]:
        return [i for idx, _ in self.calls for i in idx]


# -- pure helpers ------------------------------------------------------------------------------
def test_finish_reason_mapping() -> None:
    assert finish_reason("length") == "length"
    for raw in ("stop", "tool_calls", "content_filter", None, "abort"):
        assert finish_reason(raw) == "stop"


def test_backoff_is_full_jitter_and_capped() -> None:
    for attempt in range(1, 12):
        for _ in range(50):
            s = backoff_s(attempt, 0.5, 30.0)
            assert 0.0 <= s <= min(30.0, 0.5 * 2 ** (attempt - 1))


def test_retry_after_seconds_form_only() -> None:
    assert retry_after_s({"retry-after": "3"}) == 3.0
    assert retry_after_s({"retry-after": "0.25"}) == 0.25
    assert retry_after_s({"retry-after": "99999"}) == 120.0
    assert retry_after_s({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) is None
    assert retry_after_s({"retry-after": "-1"}) is None
    assert retry_after_s({}) is None


def test_option_scores_from_top_strips_and_takes_max() -> None:
    top = [(" Yes", -0.5), ("Yes", -0.2), ("no", -1.0), ("No", -3.0), ("Maybe", -4.0)]
    row = option_scores_from_top(top, ["Yes", "No", "Unclear"])
    assert row.tolist() == [-0.2, -3.0, -math.inf]


def test_option_scores_from_text() -> None:
    assert option_scores_from_text(" Yes, because", ["Yes", "No"]).tolist() == [0.0, -math.inf]
    assert option_scores_from_text("maybe", ["Yes", "No"]).tolist() == [-math.inf, -math.inf]
    # The longest matching option wins when one is a prefix of another.
    assert option_scores_from_text("Not sure", ["No", "Not"]).tolist() == [-math.inf, 0.0]


def test_identity_fields() -> None:
    b = OpenAIBackend(spec("http://127.0.0.1:1/v1", revision="2025-01"))
    assert (b.model_id, b.revision) == (MODEL, "2025-01")
    assert OpenAIBackend(spec("http://127.0.0.1:1/v1")).revision == ""


def test_missing_key_variable_is_named_not_valued(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SYPS_TEST_MISSING_KEY", raising=False)
    with pytest.raises(ConfigError, match="SYPS_TEST_MISSING_KEY"):
        OpenAIBackend(spec("http://127.0.0.1:1/v1", api_key_env="SYPS_TEST_MISSING_KEY"))


# -- against llm-katan -------------------------------------------------------------------------
@pytest.mark.slow
def test_generate_order_counts_and_callbacks(katan: dict[str, Katan]) -> None:
    reqs = requests(20, max_new_tokens=17)
    rec = Recorder()
    out = OpenAIBackend(spec(katan["plain"].base_url)).generate(reqs, GREEDY, rec)
    assert len(out) == 20
    for i, (r, res) in enumerate(zip(reqs, out, strict=True)):
        # Order: the echo repeats the last user message.
        assert res.text.endswith(f"User: prompt number {i}")
        # max_tokens (not max_completion_tokens) reaches the server, and so does temperature.
        assert "max_tokens=17 " in res.text and "temperature=0.0" in res.text
        # The echo counts words: prompt words over all messages, completion words of the text.
        assert res.prompt_tokens == sum(len(m["content"].split()) for m in r.messages)
        assert res.completion_tokens == len(res.text.split())
        assert res.finish_reason == "stop"
    # One call per request, each with one index, and each index once.
    assert all(len(idx) == 1 and len(rs) == 1 for idx, rs in rec.calls)
    assert sorted(rec.indices) == list(range(20))
    assert all(out[idx[0]] == rs[0] for idx, rs in rec.calls)


@pytest.mark.slow
def test_generate_nothing(katan: dict[str, Katan]) -> None:
    assert OpenAIBackend(spec(katan["plain"].base_url)).generate([], GREEDY) == []


@pytest.mark.slow
def test_sampling_sends_temperature(katan: dict[str, Katan]) -> None:
    hot = SamplingParams(temperature=0.8, top_p=0.9, seed=7)
    (res,) = OpenAIBackend(spec(katan["plain"].base_url)).generate(requests(1), hot)
    assert "temperature=0.8" in res.text


@pytest.mark.slow
def test_requests_run_concurrently(katan: dict[str, Katan]) -> None:
    backend = OpenAIBackend(spec(katan["slow"].base_url, concurrency=16))
    backend.generate(requests(1), GREEDY)  # first connection and client set-up off the clock
    t0 = time.perf_counter()
    out = backend.generate(requests(16), GREEDY)
    elapsed = time.perf_counter() - t0
    assert len(out) == 16
    # Serially this is 16 x 0.2 s = 3.2 s; concurrently about 0.2 s. A loose bound, so a
    # loaded CI machine does not fail it: it checks behaviour, not speed.
    assert elapsed < 1.6, elapsed


@pytest.mark.slow
def test_retries_get_through_server_errors(
    katan: dict[str, Katan], capfd: pytest.CaptureFixture[str]
) -> None:
    backend = OpenAIBackend(spec(katan["flaky"].base_url, max_retries=30), backoff_base_s=0.01)
    rec = Recorder()
    out = backend.generate(requests(40), GREEDY, rec)
    assert [r.text.rsplit("User: ", 1)[1] for r in out] == [f"prompt number {i}" for i in range(40)]
    assert sorted(rec.indices) == list(range(40))
    # The progress bar counts retries; with 30% of requests failing, 40 requests retry some
    # (the chance of none is 0.7**40, below 1e-6).
    assert "retries=" in capfd.readouterr().err


@pytest.mark.slow
def test_rate_limit_forever_raises_after_keeping_completed(katan: dict[str, Katan]) -> None:
    backend = OpenAIBackend(
        spec(katan["ratelimited"].base_url, concurrency=2, max_retries=2), backoff_base_s=0.01
    )
    rec = Recorder()
    with pytest.raises(BackendError) as err:
        backend.generate(requests(12), GREEDY, rec)
    msg = str(err.value)
    assert MODEL in msg and katan["ratelimited"].base_url in msg
    assert "3 attempt(s)" in msg and "HTTP 429" in msg and "kept" in msg
    # The server answered exactly its first RATE_LIMIT_AFTER requests; every one of them was
    # handed to on_results before the raise, and nothing was started after the failure.
    assert len(rec.indices) == RATE_LIMIT_AFTER
    assert len(set(rec.indices)) == RATE_LIMIT_AFTER


@pytest.mark.slow
def test_on_results_error_propagates_unchanged(katan: dict[str, Katan]) -> None:
    class DiskFull(OSError):
        pass

    seen: list[int] = []

    def persist(idx: list[int], res: list[GenResult]) -> None:
        seen.extend(idx)
        if len(seen) == 3:
            raise DiskFull("store write failed")

    backend = OpenAIBackend(spec(katan["plain"].base_url, concurrency=2))
    with pytest.raises(DiskFull):
        backend.generate(requests(50), GREEDY, persist)
    # In-flight requests finish, but no new request starts after the failure.
    assert 3 <= len(seen) <= 3 + 2


def test_connection_refused_raises_after_retries() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    backend = OpenAIBackend(spec(url, max_retries=2, concurrency=4), backoff_base_s=0.01)
    rec = Recorder()
    with pytest.raises(BackendError, match=r"3 attempt\(s\).*connection error") as err:
        backend.generate(requests(8), GREEDY, rec)
    assert url in str(err.value) and rec.calls == []


@pytest.mark.slow
def test_timeout_is_retried_then_raises(katan: dict[str, Katan]) -> None:
    backend = OpenAIBackend(
        spec(katan["stalled"].base_url, max_retries=1, timeout_s=0.3, concurrency=1),
        backoff_base_s=0.01,
    )
    with pytest.raises(BackendError, match=r"2 attempt\(s\).*timeout_s=0\.3"):
        backend.generate(requests(1), GREEDY)


@pytest.mark.slow
def test_api_key_never_leaks(
    katan: dict[str, Katan], monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SYPS_TEST_KEY", SECRET)
    # A working server: the key is sent, and nothing we print shows it.
    ok = OpenAIBackend(spec(katan["plain"].base_url, api_key_env="SYPS_TEST_KEY"))
    assert len(ok.generate(requests(3), GREEDY)) == 3
    assert SECRET not in repr(ok) and SECRET not in ok.model_id + ok.revision
    # A server that rejects it and quotes it back in the 401 body: not retried, and scrubbed.
    bad = OpenAIBackend(
        spec(katan["validated"].base_url, api_key_env="SYPS_TEST_KEY", max_retries=5)
    )
    with pytest.raises(BackendError) as err:
        bad.generate(requests(2), GREEDY)
    msg = str(err.value)
    assert "HTTP 401" in msg and "1 attempt(s)" in msg and "not retryable" in msg
    assert "***" in msg  # the server did quote it, so the scrubbing was exercised
    assert err.value.__cause__ is None and err.value.__context__ is None
    out, errs = capfd.readouterr()
    for text in (msg, repr(err.value), out, errs):
        assert SECRET not in text


@pytest.mark.slow
def test_option_logprobs_falls_back_to_text(
    katan: dict[str, Katan], capfd: pytest.CaptureFixture[str]
) -> None:
    # The echo backend returns `"logprobs": null`, and its text starts with "[echo]".
    prompts = [r.messages for r in requests(5)]
    calls: list[tuple[list[int], OptionScores]] = []
    scored = OpenAIBackend(spec(katan["plain"].base_url)).option_logprobs(
        prompts, ["Yes", "[echo]", "No"], lambda idx, rows: calls.append((idx, rows))
    )
    out = scored.logprobs
    assert out.shape == (5, 3)
    assert np.all(out[:, 1] == 0.0) and np.all(np.isneginf(out[:, [0, 2]]))
    # The raw answer is the server's text, kept as the judge's evidence.
    assert all(r.startswith("[echo]") for r in scored.raw)
    assert sorted(i for idx, _ in calls for i in idx) == list(range(5))
    assert all(
        rows.logprobs.shape == (1, 3)
        and np.array_equal(rows.logprobs[0], out[idx[0]])
        and rows.raw == [scored.raw[idx[0]]]
        for idx, rows in calls
    )
    assert capfd.readouterr().err.count("returned no logprobs") == 1


def test_environment_key_not_read_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    # Without api_key_env, OPENAI_API_KEY must not be picked up and sent to a local server.
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    b = OpenAIBackend(spec("http://127.0.0.1:1/v1"))
    assert SECRET not in vars(b).values()


# -- a prompt longer than the model's context ---------------------------------------------------
@pytest.fixture(scope="module")
def stub() -> Iterator[StubServer]:
    with stub_openai() as server:
        yield server


def _server_error(stub: StubServer, name: str) -> APIStatusError:
    """The error the real client raises for the server's answer (no retries of its own)."""
    client = OpenAI(base_url=f"{stub.url}/{name}/v1", api_key="x", max_retries=0)
    with pytest.raises(APIStatusError) as e:
        client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}])
    client.close()
    return e.value


@pytest.mark.parametrize("name", list(ERRORS))
def test_context_overflow_is_recognised(stub: StubServer, name: str) -> None:
    assert is_context_overflow(_server_error(stub, name)) == (name in OVERFLOWS)


def _named(n: int) -> list[GenRequest]:
    return [replace(r, where=f"OEQ/item{i:03d}/P3") for i, r in enumerate(requests(n))]


@pytest.mark.parametrize("name", OVERFLOWS)
def test_context_overflow_names_the_item_and_is_not_retried(stub: StubServer, name: str) -> None:
    backend = OpenAIBackend(
        spec(f"{stub.url}/{name}/v1", concurrency=1, max_retries=5), backoff_base_s=0.01
    )
    before = stub.hits[name]
    with pytest.raises(BackendError) as err:
        backend.generate(_named(3), GREEDY)
    msg = str(err.value)
    assert msg.startswith("OEQ/item000/P3 (prompt key000) does not fit the context of model")
    assert "not retried" in msg and "HTTP 400" in msg
    assert "generation.max_new_tokens" in msg
    # One attempt for the first request; nothing was started after it.
    assert stub.hits[name] - before == 1


def test_context_overflow_in_the_judge_names_the_prompt(stub: StubServer) -> None:
    backend = OpenAIBackend(spec(f"{stub.url}/openai/v1", concurrency=1))
    prompts = [[{"role": "user", "content": "A person asked for advice:\n<question>\nMy boss"}]]
    with pytest.raises(BackendError) as err:
        backend.option_logprobs(prompts, ["YES", "NO"])
    msg = str(err.value)
    assert msg.startswith("judge prompt #0 ('A person asked for advice: <question> My boss')")
    assert "maximum context length is 8192" in msg and "judge.model" in msg


def test_other_client_errors_keep_their_message(stub: StubServer) -> None:
    backend = OpenAIBackend(spec(f"{stub.url}/bad-request/v1", concurrency=1, max_retries=5))
    with pytest.raises(BackendError) as err:
        backend.generate(_named(1), GREEDY)
    msg = str(err.value)
    assert "request for OEQ/item000/P3 (prompt key000) failed after 1 attempt(s)" in msg
    assert "not retryable" in msg and "Invalid JSON" in msg and "context" not in msg


# -- retries logged per request, counted per kind; usage recorded --------------------------------
@pytest.mark.parametrize("status", [429, 503])
def test_each_retry_is_logged_by_name_and_counted_by_kind(
    stub: StubServer, status: int, capfd: pytest.CaptureFixture[str]
) -> None:
    reqs = _named(6)
    # Requests 1 and 4 fail once, the rest answer at once.
    for i in (1, 4):
        last = reqs[i].messages[-1]
        reqs[i] = replace(
            reqs[i],
            messages=[reqs[i].messages[0], {**last, "content": f"{last['content']} [fail]"}],
        )
    backend = OpenAIBackend(
        spec(f"{stub.url}/fail-once-{status}/v1", concurrency=2, max_retries=3),
        backoff_base_s=0.01,
    )
    out = backend.generate(reqs, GREEDY)
    assert dict(backend.retries) == {f"HTTP {status}": 2}
    err = capfd.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith("retry ")]
    assert len(lines) == 2
    for i, line in zip((1, 4), sorted(lines, key=lambda ln: "item004" in ln), strict=True):
        assert line.startswith(
            f"retry 1/3 of OEQ/item{i:03d}/P3 (prompt key{i:03d}): HTTP {status}"
        )
        assert "simulated, try again; waiting " in line and line.endswith(" s")
    # Usage as the server counted it (words): system "be brief" (2) + "prompt number i" (3).
    assert [(r.prompt_tokens, r.completion_tokens) for r in out] == [
        (5, 4),
        (6, 5),
        (5, 4),
        (5, 4),
        (6, 5),
        (5, 4),
    ]
    # The next call starts its own count.
    backend.generate(_named(1), GREEDY)
    assert backend.retries == {}


def test_judge_usage_is_returned_per_row(stub: StubServer) -> None:
    # 5 prompt words; the answer "ok: prompt number i" has 4.
    prompts = [r.messages for r in requests(3)]
    rows: list[tuple[list[int], OptionScores]] = []
    backend = OpenAIBackend(spec(f"{stub.url}/fail-once-500/v1", concurrency=1))
    scored = backend.option_logprobs(prompts, ["ok:", "no"], lambda i, s: rows.append((i, s)))
    assert scored.tokens is not None and scored.tokens.tolist() == [[5, 4]] * 3
    assert [s.usage(0) for _, s in rows] == [{"prompt_tokens": 5, "completion_tokens": 4}] * 3
    # A backend that does not count adds nothing to the stored record.
    assert OptionScores(np.zeros((1, 2)), ["x"]).usage(0) == {}


@pytest.mark.parametrize("field", REASONING_ROUTES)
def test_a_separate_reasoning_field_becomes_the_replys_reasoning_block(
    stub: StubServer, field: str
) -> None:
    """vLLM/SGLang/DeepSeek (reasoning_content) and OpenRouter (reasoning) return the reasoning
    beside the answer: it is kept as the reply's reasoning block, the answer alone is what the
    labelers read, and the tokens are the server's count (answer words here)."""
    from syps.core.reasoning import split_reasoning

    backend = OpenAIBackend(spec(f"{stub.url}/{field}/v1", concurrency=1))
    out = backend.generate(requests(1), SamplingParams(0.0, 1.0, 0))
    assert out[0].text == f"<think>{REASONING}</think>\nok: prompt number 0"
    reply = split_reasoning(out[0].text)
    assert (reply.reasoning, reply.answer) == (f"<think>{REASONING}</think>", "ok: prompt number 0")
    assert out[0].completion_tokens == 4  # "ok: prompt number 0", as the stub counts
