"""OpenAI-compatible chat-completions backend: OpenAI, vLLM, SGLang, llama.cpp, llm-katan ...

Requests run concurrently (at most ``spec.concurrency`` in flight) on an event loop started with
``asyncio.run`` on the calling thread, like the HF backend's generate loop: no thread of ours runs
beside it (asyncio resolves host names, and the client probes the platform once, in asyncio's
short-lived executor threads). Each completed request is handed to ``on_results`` at once, so
the caller can persist it; a crash, an interrupt or a request that fails for good loses only the
requests still in flight.

Retries are ours, not the client's (its ``max_retries`` is 0): the client's built-in policy
caps its backoff at 8 s and cannot tell us how many attempts a request took, while a long
evaluation against a shared server needs a longer, jittered backoff and an error that says
exactly what failed. Each retry prints one line naming the request, the error and the wait,
and ``OpenAIBackend.retries`` counts them per error kind for the caller to log.

With ``mode: batch`` the same request bodies go through the Batch API instead
(``syps.core.backends.openai_batch``); what a completion becomes is the same code either way.

The API key is read from the environment variable *named* by ``spec.api_key_env``. It is held in
private attributes and the client only, and every error message built here is scrubbed of it:
some servers quote the presented key back in their 401 body.
"""

from __future__ import annotations

import asyncio
import math
import os
import random
import sys
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, cast

import numpy as np
from openai import (
    APIConnectionError,
    APIError,
    APIStatusError,
    APITimeoutError,
    AsyncOpenAI,
)
from openai.types.chat import ChatCompletion
from openai.types.chat.chat_completion import Choice
from tqdm import tqdm

from syps.core.backends.base import (
    FIX_JUDGE,
    BackendError,
    GenRequest,
    GenResult,
    Messages,
    OnGenerated,
    OnScored,
    OptionScores,
    SamplingParams,
    judge_prompt_name,
    prompt_seed,
)
from syps.core.backends.openai_batch import (
    POLL_BASE_S,
    POLL_CAP_S,
    BodyOf,
    Done,
    NameOf,
    run_batch,
)
from syps.core.config import ConfigError, ModelSpec
from syps.core.reasoning import with_reasoning

# Full-jitter exponential backoff (AWS architecture blog): attempt k sleeps U(0, min(cap,
# base * 2**(k-1))). Jitter spreads the retries of many concurrent requests that failed together
# (one 503 burst, one rate-limit window) instead of sending them back in lockstep.
BACKOFF_BASE_S = 0.5
BACKOFF_CAP_S = 30.0
# A Retry-After longer than this is clipped: an evaluation should not stall for an hour on one
# header; the request still has its remaining attempts after the clipped wait.
RETRY_AFTER_MAX_S = 120.0
# The most alternatives the OpenAI API returns per position; vLLM accepts more, but 20 is
# portable and plenty for a handful of answer options.
TOP_LOGPROBS = 20
# Local servers (vLLM, llama.cpp, llm-katan) want *some* bearer token, and the client refuses to
# start without one; this placeholder is not a secret.
LOCAL_API_KEY = "EMPTY"
# Progress-bar redraws at most this often: per-completion updates then cost a counter increment.
_BAR_MININTERVAL_S = 0.5
_MAX_ERROR_CHARS = 300
# How servers say that a prompt plus max_tokens does not fit the model: OpenAI's error code,
# llama.cpp's error type, and the wording of vLLM ("This model's maximum context length is"),
# SGLang ("longer than the model's context length") and llama.cpp ("exceeds the available
# context size").
_CONTEXT_CODES = frozenset({"context_length_exceeded", "exceed_context_size_error"})
_CONTEXT_WORDS = ("context length", "context_length_exceeded", "context size", "context window")
_KEPT = (
    "Requests that completed before this were passed to on_results and kept; no new request "
    "was started after it"
)
FIX_GENERATE = (
    "Shorten or remove this item in the dataset's CSV, lower generation.max_new_tokens, or serve "
    "a model with a longer context."
)


def backoff_s(attempt: int, base_s: float = BACKOFF_BASE_S, cap_s: float = BACKOFF_CAP_S) -> float:
    """Seconds to sleep before retry number ``attempt`` (1-based): full-jitter exponential."""
    return random.uniform(0.0, min(cap_s, base_s * 2.0 ** (attempt - 1)))


def retry_after_s(headers: Mapping[str, str]) -> float | None:
    """A ``Retry-After`` header in its seconds form, clipped to ``RETRY_AFTER_MAX_S``.

    The HTTP-date form and malformed values give None (the caller falls back to backoff).
    ``headers`` should be case-insensitive (httpx headers are); a plain dict needs lower case.
    """
    raw = headers.get("retry-after")
    if raw is None:
        return None
    try:
        value = float(raw.strip())
    except ValueError:
        return None
    if not math.isfinite(value) or value < 0:
        return None
    return min(value, RETRY_AFTER_MAX_S)


def is_retryable_status(status: int) -> bool:
    """429 (rate limit), 408 (request timeout) and every 5xx are transient; other 4xx are not:
    a malformed request or a bad key fails the same way on every attempt."""
    return status in (408, 429) or status >= 500


def is_context_overflow(e: APIStatusError) -> bool:
    """Whether a client error says the prompt does not fit the model's context.

    Such a request fails the same way on every attempt, so it is never retried, and its error
    names the item rather than only the HTTP status.
    """
    if not 400 <= e.status_code < 500 or is_retryable_status(e.status_code):
        return False
    if e.code in _CONTEXT_CODES or e.type in _CONTEXT_CODES:
        return True
    text = f"{_server_message(e)} {e.message}".lower()
    return any(w in text for w in _CONTEXT_WORDS)


def request_name(r: GenRequest) -> str:
    """A request as people know it: its item and variant, and the prompt sha256."""
    return f"{r.where} (prompt {r.key})" if r.where else f"prompt {r.key}"


def finish_reason(raw: str | None) -> Literal["stop", "length"]:
    """Map the server's finish reason onto ours: only a token-limit stop is ``length``."""
    return "length" if raw == "length" else "stop"


def option_scores_from_top(top: Sequence[tuple[str, float]], options: Sequence[str]) -> np.ndarray:
    """Log-probability per option from ``(token, logprob)`` alternatives at the first position.

    A token matches an option when both are equal after stripping whitespace (case-sensitive),
    so " Yes" and "Yes" both count for "Yes"; the larger logprob wins when several match. An
    option absent from the alternatives gets -inf.
    """
    out = np.full(len(options), -np.inf)
    wanted = [o.strip() for o in options]
    for token, logprob in top:
        t = token.strip()
        for j, w in enumerate(wanted):
            if t == w and logprob > out[j]:
                out[j] = logprob
    return out


def option_scores_from_text(text: str, options: Sequence[str]) -> np.ndarray:
    """Fallback for servers that return no logprobs: 0.0 for the option the stripped text starts
    with (the longest such option, when one is a prefix of another), -inf for the others.

    This only says which option the model *chose* greedily, not how sure it was, so a judge
    margin above zero cannot be honoured beyond "chosen vs not".
    """
    out = np.full(len(options), -np.inf)
    stripped = text.strip()
    matches = [j for j, o in enumerate(options) if o.strip() and stripped.startswith(o.strip())]
    if matches:
        out[max(matches, key=lambda j: len(options[j].strip()))] = 0.0
    return out


class OpenAIBackend:
    """A model served behind an OpenAI-compatible ``/v1/chat/completions`` endpoint."""

    def __init__(
        self,
        spec: ModelSpec,
        *,
        backoff_base_s: float = BACKOFF_BASE_S,
        backoff_cap_s: float = BACKOFF_CAP_S,
        batch_dir: Path | None = None,
        poll_base_s: float | None = None,
        poll_cap_s: float | None = None,
    ) -> None:
        """Check the spec and read the API key; no request is sent until ``generate``.

        ``batch_dir`` holds the ids of batches in flight (``mode: batch``; see
        ``syps.core.backends.openai_batch``). ``backoff_*`` and ``poll_*`` are not in params: they
        exist so tests can make retries and polling fast without patching anything.
        """
        if not spec.base_url:
            raise ConfigError(f"model {spec.model!r}: base_url is required for the openai backend")
        if spec.api_key_env:
            key = os.environ.get(spec.api_key_env)
            if not key:
                # Name the variable, never a value.
                raise ConfigError(
                    f"model {spec.model!r}: api_key_env names the environment variable "
                    f"{spec.api_key_env}, which is not set (or empty)"
                )
            self._api_key = key
            self._secret: str | None = key
        else:
            self._api_key = LOCAL_API_KEY
            self._secret = None
        self.model_id = spec.model
        self.revision = spec.revision or ""
        self.base_url = spec.base_url
        self.concurrency = spec.concurrency
        self.max_retries = spec.max_retries
        self.timeout_s = spec.timeout_s
        self.backoff_base_s = backoff_base_s
        self.backoff_cap_s = backoff_cap_s
        self.mode = spec.mode
        self.batch_dir = batch_dir
        self.poll_base_s = POLL_BASE_S if poll_base_s is None else poll_base_s
        self.poll_cap_s = POLL_CAP_S if poll_cap_s is None else poll_cap_s
        # Set by each generate/option_logprobs call (also when it raises): retries made, per
        # error kind ("HTTP 429", "HTTP 503", "timeout", "connection").
        self.retries: Counter[str] = Counter()

    def __repr__(self) -> str:
        return f"OpenAIBackend(model={self.model_id!r}, base_url={self.base_url!r})"

    # -- the Backend interface -----------------------------------------------------------------
    def generate(
        self,
        requests: Sequence[GenRequest],
        sampling: SamplingParams,
        on_results: OnGenerated | None = None,
    ) -> list[GenResult]:
        """Complete every request; results are in request order.

        ``on_results([i], [result])`` is called as each request completes. If a request fails
        for good, requests in flight still finish (and are passed on), no new one starts, and
        ``BackendError`` is raised. In batch mode, ``on_results`` gets every completion of a
        batch in one call, and ``BackendError`` names every request that failed for good.
        """
        results: list[GenResult | None] = [None] * len(requests)
        sample = sampling.temperature > 0

        def body(i: int) -> dict[str, Any]:
            r = requests[i]
            out: dict[str, Any] = {
                "model": self.model_id,
                "messages": r.messages,
                # max_tokens, not max_completion_tokens: openai marks it deprecated, but only
                # for OpenAI's own reasoning models; vLLM, SGLang, llama.cpp and llm-katan read
                # max_tokens, and llm-katan silently ignores max_completion_tokens (it would
                # fall back to its server default of 512).
                "max_tokens": r.max_new_tokens,
                "temperature": sampling.temperature,
                "top_p": sampling.top_p,
            }
            if sample:
                # A seed only matters when sampling; greedy output must not depend on it.
                # Per prompt, so identical prompts in replicates or reruns are drawn alike.
                out["seed"] = prompt_seed(sampling.seed, r.key)
            return out

        def done(items: list[tuple[int, ChatCompletion]]) -> None:
            idx = [i for i, _ in items]
            res = [self._gen_result(c, request_name(requests[i])) for i, c in items]
            for i, r in zip(idx, res, strict=True):
                results[i] = r
            if on_results is not None:
                on_results(idx, res)

        self._run_all(
            len(requests), lambda i: request_name(requests[i]), body, done, "generate", FIX_GENERATE
        )
        return [r for r in results if r is not None]

    def option_logprobs(
        self,
        prompts: Sequence[Messages],
        options: Sequence[str],
        on_results: OnScored | None = None,
    ) -> OptionScores:
        """Log-probability of each option as the first answer token: shape (prompts, options).

        One greedy token is requested with its top ``TOP_LOGPROBS`` alternatives; each option
        takes the logprob of the alternative equal to it (see ``option_scores_from_top``),
        -inf when absent. A server that returns no logprobs at all (llm-katan's echo backend,
        some llama.cpp builds) is scored from the generated text instead: 0.0 for the option
        the text starts with, -inf for the rest (see ``option_scores_from_text``); a warning
        says so once. ``raw`` is the text the server returned. ``on_results([i], scores)`` gets
        one row per completion (every completion of a batch, in batch mode); ``tokens`` holds
        the prompt and completion tokens the server counted.
        """
        out = np.full((len(prompts), len(options)), -np.inf)
        raw = [""] * len(prompts)
        tokens = np.zeros((len(prompts), 2), dtype=np.int64)
        warned = False

        def body(i: int) -> dict[str, Any]:
            return {
                "model": self.model_id,
                "messages": prompts[i],
                "max_tokens": 1,
                "temperature": 0.0,
                "logprobs": True,
                "top_logprobs": TOP_LOGPROBS,
            }

        def one(i: int, completion: ChatCompletion) -> None:
            nonlocal warned
            choice = self._first_choice(completion, judge_prompt_name(i, prompts[i]))
            content = choice.logprobs.content if choice.logprobs is not None else None
            if content:
                first = content[0]
                top = [(t.token, t.logprob) for t in first.top_logprobs]
                row = option_scores_from_top([(first.token, first.logprob), *top], options)
            else:
                if not warned:
                    warned = True
                    tqdm.write(
                        f"warning: {self.base_url} returned no logprobs for {self.model_id}; "
                        "scoring judge options by the generated text (chosen 0.0, others -inf)",
                        file=sys.stderr,
                    )
                row = option_scores_from_text(choice.message.content or "", options)
            out[i] = row
            raw[i] = choice.message.content or ""
            tokens[i] = _usage(completion)

        def done(items: list[tuple[int, ChatCompletion]]) -> None:
            for i, completion in items:
                one(i, completion)
            if on_results is not None:
                idx = [i for i, _ in items]
                on_results(idx, OptionScores(out, raw, tokens).rows(idx))

        self._run_all(
            len(prompts), lambda i: judge_prompt_name(i, prompts[i]), body, done, "judge", FIX_JUDGE
        )
        return OptionScores(out, raw, tokens)

    # -- machinery -----------------------------------------------------------------------------
    def _run_all(
        self, n: int, name_of: NameOf, body: BodyOf, done: Done, what: str, fix: str
    ) -> None:
        """Send requests 0..n-1 (``body(i)`` is the chat-completions request); ``done`` gets
        completions as they arrive, as ``[(i, completion), ...]``.

        Online: concurrently, one completion per call. Batch: through the Batch API, every
        completion of a batch in one call. ``name_of(i)`` names request ``i`` in errors;
        ``fix`` says what to do about a prompt that does not fit the model's context.
        """
        self.retries = Counter()
        if n == 0:
            return
        if self.mode == "batch":
            run_batch(self, n, name_of, body, done, what, fix)
            return
        asyncio.run(self._run_async(n, name_of, body, done, what, fix))

    def _client(self) -> AsyncOpenAI:
        return AsyncOpenAI(
            api_key=self._api_key,
            base_url=self.base_url,
            timeout=self.timeout_s,
            max_retries=0,  # ours, see the module docstring
        )

    async def _run_async(
        self, n: int, name_of: NameOf, body: BodyOf, done: Done, what: str, fix: str
    ) -> None:
        # The first failure (a BackendError, or whatever on_results raised) is re-raised once the
        # requests in flight have finished; later ones would only repeat it.
        failure: BaseException | None = None
        sem = asyncio.Semaphore(self.concurrency)

        # A fresh client per asyncio.run: its connection pool belongs to the event loop it was
        # first used on, and each call here runs on a new loop.
        client = self._client()
        async with client:
            with tqdm(
                total=n,
                desc=f"{what} {self.model_id}",
                unit="req",
                file=sys.stderr,
                mininterval=_BAR_MININTERVAL_S,
            ) as bar:

                def on_retry(name: str, attempt: int, kind: str, last: str, wait: float) -> None:
                    self.retries[kind] += 1
                    bar.set_postfix_str(f"retries={self.retries.total()}", refresh=False)
                    # One line per retry, so a flaky server shows which requests it hit and why.
                    tqdm.write(
                        self._scrub(
                            f"retry {attempt}/{self.max_retries} of {name}: {last}; "
                            f"waiting {wait:.2f} s"
                        ),
                        file=sys.stderr,
                    )

                async def one(i: int) -> None:
                    nonlocal failure
                    try:
                        completion = await self._with_retries(
                            client, body(i), name_of(i), fix, on_retry
                        )
                        done([(i, completion)])
                        bar.update(1)
                    except Exception as e:  # recorded, re-raised once the rest have drained
                        if failure is None:
                            failure = e
                    finally:
                        sem.release()

                # Tasks are created only as slots free up, so a run of 100k prompts holds at
                # most `concurrency` tasks, and a failure stops new requests at once.
                tasks: set[asyncio.Task[None]] = set()
                for i in range(n):
                    await sem.acquire()
                    if failure is not None:
                        sem.release()
                        break
                    task = asyncio.create_task(one(i))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
                if tasks:
                    await asyncio.wait(tasks)
        if failure is not None:
            raise failure

    async def _with_retries(
        self,
        client: AsyncOpenAI,
        body: dict[str, Any],
        name: str,
        fix: str,
        on_retry: Callable[[str, int, str, str, float], None],
    ) -> ChatCompletion:
        """One request with up to ``max_retries`` retries on transient errors; ``on_retry``
        gets the request's name, the retry number, the error kind and text, and the wait."""
        attempts = 0
        while True:
            attempts += 1
            wait: float | None = None
            overflow = False
            try:
                # Typed loosely: the body is plain JSON, shared with the batch path.
                return cast(ChatCompletion, await client.chat.completions.create(**body))
            except APIStatusError as e:
                # Scrubbed before it is cut: a long key cut short would escape the scrub.
                kind = f"HTTP {e.status_code}"
                last = f"HTTP {e.status_code}: {_clip(self._scrub(_server_message(e)))}"
                overflow = is_context_overflow(e)
                retryable = is_retryable_status(e.status_code) and not overflow
                wait = retry_after_s(e.response.headers)
            except APITimeoutError:
                kind = "timeout"
                last = f"no response within timeout_s={self.timeout_s:g}"
                retryable = True
            except APIConnectionError as e:
                cause = e.__cause__ or e
                kind = "connection"
                last = f"connection error: {type(cause).__name__}: {cause}"
                retryable = True
            except APIError as e:  # e.g. a response that is not a chat completion
                kind = type(e).__name__
                last = f"{type(e).__name__}: {e.message}"
                retryable = False
            # Built outside the except blocks, so the raised error chains no openai exception,
            # whose message may hold a server's echo of the API key.
            if overflow:
                raise BackendError(self._context_message(name, last, fix))
            if not retryable or attempts > self.max_retries:
                raise BackendError(self._failure_message(name, attempts, last, retryable))
            if wait is None:
                wait = backoff_s(attempts, self.backoff_base_s, self.backoff_cap_s)
            on_retry(name, attempts, kind, last, wait)
            await asyncio.sleep(wait)

    def _failure_message(self, name: str, attempts: int, last: str, retryable: bool) -> str:
        why = (
            f"retries exhausted (max_retries={self.max_retries})" if retryable else "not retryable"
        )
        msg = (
            f"{self.base_url}: model {self.model_id!r}: request for {name} failed after "
            f"{attempts} attempt(s), {why}; last error: {last}. {_KEPT}"
        )
        return self._scrub(msg)

    def _context_message(self, name: str, last: str, fix: str) -> str:
        msg = (
            f"{name} does not fit the context of model {self.model_id!r} at {self.base_url} "
            f"(not retried; the server said {last}). {fix} {_KEPT}"
        )
        return self._scrub(msg)

    def _scrub(self, text: str) -> str:
        return text.replace(self._secret, "***") if self._secret else text

    def _first_choice(self, completion: ChatCompletion, name: str) -> Choice:
        if not completion.choices:
            raise BackendError(
                self._scrub(
                    f"{self.base_url}: model {self.model_id!r}: the response for {name} "
                    "holds no choices"
                )
            )
        return completion.choices[0]

    def _gen_result(self, completion: ChatCompletion, name: str) -> GenResult:
        choice = self._first_choice(completion, name)
        prompt_tokens, completion_tokens = _usage(completion)
        return GenResult(
            # A separate reasoning field becomes the text's reasoning block: one form for every
            # backend's replies (syps.core.reasoning), its tokens in completion_tokens as the
            # server counts them.
            text=with_reasoning(_reasoning_field(choice.message), choice.message.content or ""),
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            finish_reason=finish_reason(choice.finish_reason),
        )


# Where OpenAI-compatible servers put a reasoning model's reasoning: vLLM, SGLang and DeepSeek's
# API in reasoning_content; OpenRouter and newer vLLM in reasoning.
REASONING_FIELDS = ("reasoning_content", "reasoning")


def _reasoning_field(message: Any) -> str:
    """The reasoning a server returned beside the answer ("" where none): a field the openai
    client's message type does not declare, so read from its extra fields."""
    extra = getattr(message, "model_extra", None) or {}
    for name in REASONING_FIELDS:
        value = extra.get(name, getattr(message, name, None))
        if isinstance(value, str) and value:
            return value
    return ""


def _usage(completion: ChatCompletion) -> tuple[int, int]:
    """Prompt and completion tokens as the server counted them.

    Responses are not validated strictly, so a server may leave usage (or a field of it) out
    entirely: count 0 rather than fail a completed request over bookkeeping.
    """
    usage = completion.usage
    return (
        int(getattr(usage, "prompt_tokens", None) or 0),
        int(getattr(usage, "completion_tokens", None) or 0),
    )


def _server_message(e: APIStatusError) -> str:
    """The server's own error message when the body has one, else the client's summary."""
    body = e.body
    text = body.get("message") if isinstance(body, dict) else None
    return str(text) if text else e.message


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_ERROR_CHARS else text[:_MAX_ERROR_CHARS] + "..."
