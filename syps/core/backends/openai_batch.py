"""The OpenAI Batch API behind ``OpenAIBackend`` (``mode: batch``): half the price, no latency.

The missing requests are written as JSONL (one chat-completions body per line, in request
order; ``custom_id`` the sha256 of the body, so a line reads the same whatever else is sent
with it), uploaded (``files.create``, purpose ``batch``), and a batch is created
over them (``/v1/chat/completions``, window 24h). Its id goes to a small sidecar file *before*
any waiting: ``<batch_dir>/<tag>.json``, where ``tag`` is the sha256 of the server address and
the exact JSONL. A run killed while it waits therefore finds the same file when it is started
again with the same missing requests, and resumes polling the same batch instead of paying for
a second one. (A kill in the instant between ``batches.create`` returning and the sidecar being
written still loses the id; nothing else does.)

Polling backs off exponentially (``poll_base_s`` doubling up to ``poll_cap_s``). When the
batch ends, the output file's completions are handed to ``done`` in one call (one store
transaction), and only then is the sidecar removed: a run killed while storing resumes the
finished batch and downloads it again, for free. The error file's entries are sorted:
transient ones (429, 5xx, expired, or no line at all) are resubmitted once in a new batch; the
rest, and what fails twice, are reported per request in one ``BackendError`` after everything
that completed was handed on.
The caller passes only requests missing from its store, so nothing stored is ever resubmitted.

The control calls (upload, create, retrieve, download) use the client's own retries: they are
a handful per batch, where the online path's per-request policy and logging would add nothing.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal, Protocol

from openai import NotFoundError, OpenAI
from openai.types import Batch
from openai.types.chat import ChatCompletion

from syps.core.backends.base import BackendError
from syps.core.io import sha256_text

ENDPOINT: Final[Literal["/v1/chat/completions"]] = "/v1/chat/completions"
WINDOW: Final[Literal["24h"]] = "24h"
TERMINAL = frozenset({"completed", "failed", "expired", "cancelled"})
# A batch takes minutes to hours: the first look after 10 s, then at most every 5 minutes.
POLL_BASE_S = 10.0
POLL_CAP_S = 300.0
# Failed and expired entries get one new batch; a second failure is reported, not retried.
ROUNDS = 2
_SHOW = 5
_CONTEXT_WORDS = ("context length", "context_length_exceeded", "context size", "context window")

# Request i's name for people; request i's chat-completions body; what to do with completions.
NameOf = Callable[[int], str]
BodyOf = Callable[[int], dict[str, Any]]
Done = Callable[[list[tuple[int, ChatCompletion]]], None]


class BatchBackend(Protocol):
    """What a batch needs of ``openai_api.OpenAIBackend``: its server, model and settings
    (typed here so this module does not import the one that imports it)."""

    model_id: str
    base_url: str
    max_retries: int
    timeout_s: float
    batch_dir: Path | None
    poll_base_s: float
    poll_cap_s: float
    _api_key: str

    def _scrub(self, text: str) -> str: ...


@dataclass
class Outcome:
    """What one batch gave: completions by request index, and errors by request index as
    ``(transient, text)``."""

    completions: dict[int, ChatCompletion] = field(default_factory=dict)
    errors: dict[int, tuple[bool, str]] = field(default_factory=dict)


def batch_jsonl(indices: Sequence[int], body: BodyOf) -> tuple[str, dict[str, int]]:
    """The Batch API input, one line per request, and request index by ``custom_id``.

    A ``custom_id`` is the sha256 of the line's body (cut to 56 hex digits) and the body's
    occurrence number, within the 64 characters the API allows: the resubmitted failures of a
    batch then read exactly as a rerun with only those requests missing would write them, so a
    run killed during the second batch resumes it too.
    """
    lines = []
    ids: dict[str, int] = {}
    seen: dict[str, int] = {}
    for i in indices:
        text = json.dumps(body(i), sort_keys=True, ensure_ascii=False)
        digest = sha256_text(text)[:56]
        seen[digest] = seen.get(digest, -1) + 1
        cid = f"{digest}-{seen[digest]}"
        ids[cid] = i
        lines.append(
            f'{{"body": {text}, "custom_id": "{cid}", "method": "POST", "url": "{ENDPOINT}"}}'
        )
    return "\n".join(lines) + "\n", ids


def sidecar_path(batch_dir: Path, base_url: str, jsonl: str) -> Path:
    """Where the batch for exactly these requests at this server records its id."""
    return batch_dir / (sha256_text(f"{base_url}\n{jsonl}") + ".json")


def parse_results(text: str, ids: dict[str, int]) -> Outcome:
    """Sort the lines of a batch's output or error file by request index.

    A 200 response is a completion; any other, or an ``error`` entry, is an error, transient
    for 429, 5xx and an expired batch. Lines naming no request of ours are ignored.
    """
    out = Outcome()
    for raw in text.splitlines():
        if not raw.strip():
            continue
        line = json.loads(raw)
        i = ids.get(str(line.get("custom_id", "")))
        if i is None:
            continue
        response = line.get("response") or {}
        status = int(response.get("status_code") or 0)
        body = response.get("body") or {}
        if status == 200 and isinstance(body, dict) and "choices" in body:
            out.completions[i] = ChatCompletion.model_construct(**body)
            continue
        error = line.get("error") or (body.get("error") if isinstance(body, dict) else None)
        error = error if isinstance(error, dict) else {}
        code = str(error.get("code") or "")
        message = str(error.get("message") or error or "no result")
        transient = status == 429 or status >= 500 or code == "batch_expired" or status == 0
        text_of = f"HTTP {status}: {message}" if status else f"{code or 'error'}: {message}"
        out.errors[i] = (transient and not _is_overflow(message, code), text_of)
    return out


def _is_overflow(message: str, code: str) -> bool:
    text = f"{code} {message}".lower()
    return any(w in text for w in _CONTEXT_WORDS)


def run_batch(
    backend: BatchBackend, n: int, name_of: NameOf, body: BodyOf, done: Done, what: str, fix: str
) -> None:
    """Complete requests 0..n-1 through the Batch API; see the module docstring."""
    if backend.batch_dir is None:
        raise BackendError(
            f"model {backend.model_id!r}: batch mode needs a directory for batch ids"
        )
    client = OpenAI(
        api_key=backend._api_key,
        base_url=backend.base_url,
        timeout=backend.timeout_s,
        max_retries=backend.max_retries,
    )
    todo = list(range(n))
    failed: dict[int, str] = {}
    with client:
        for round_ in range(1, ROUNDS + 1):
            outcome, sidecar = _one_batch(backend, client, backend.batch_dir, todo, body, what)
            if outcome.completions:
                done(sorted(outcome.completions.items()))
            sidecar.unlink(missing_ok=True)  # stored: the batch id has done its job
            again = [i for i in todo if i not in outcome.completions and outcome.errors[i][0]]
            failed.update({i: t for i, (transient, t) in outcome.errors.items() if not transient})
            if not again:
                break
            if round_ == ROUNDS:
                failed.update({i: outcome.errors[i][1] for i in again})
                break
            print(
                f"batch: {len(again)} request(s) failed or expired transiently; resubmitting "
                "them once in a new batch",
                file=sys.stderr,
            )
            todo = again
    if failed:
        raise BackendError(backend._scrub(_failure_message(backend, n, failed, name_of, fix)))


def _failure_message(
    backend: BatchBackend, n: int, failed: dict[int, str], name_of: NameOf, fix: str
) -> str:
    shown = [f"  {name_of(i)}: {failed[i]}" for i in sorted(failed)[:_SHOW]]
    if len(failed) > _SHOW:
        shown.append(f"  ... and {len(failed) - _SHOW} more")
    hint = f"\n{fix}" if any(_is_overflow(t, "") for t in failed.values()) else ""
    return (
        f"{backend.base_url}: model {backend.model_id!r}: {len(failed)} of {n} batch request(s) "
        f"failed for good (transient failures were resubmitted once); the {n - len(failed)} "
        f"others were stored, and a rerun sends only the failed ones:\n" + "\n".join(shown) + hint
    )


def _one_batch(
    backend: BatchBackend,
    client: OpenAI,
    batch_dir: Path,
    indices: list[int],
    body: BodyOf,
    what: str,
) -> tuple[Outcome, Path]:
    jsonl, ids = batch_jsonl(indices, body)
    sidecar = sidecar_path(batch_dir, str(backend.base_url), jsonl)
    batch = _resume(client, sidecar)
    if batch is None:
        upload = client.files.create(
            file=("requests.jsonl", jsonl.encode("utf-8")), purpose="batch"
        )
        batch = client.batches.create(
            input_file_id=upload.id, endpoint=ENDPOINT, completion_window=WINDOW
        )
        _write_json(
            sidecar,
            {
                "batch_id": batch.id,
                "input_file_id": upload.id,
                "base_url": backend.base_url,
                "model": backend.model_id,
                "requests": len(indices),
                "created": time.time(),
            },
        )
        print(f"batch {batch.id}: {what} {len(indices)} request(s) submitted", file=sys.stderr)
    batch = _poll(client, batch, backend.poll_base_s, backend.poll_cap_s)
    if batch.status == "failed":
        sidecar.unlink(missing_ok=True)  # a rerun submits again (a fixed input, say)
        errors = batch.errors.data if batch.errors and batch.errors.data else []
        why = "; ".join(f"{e.code}: {e.message}" for e in errors) or "no reason given"
        raise BackendError(
            backend._scrub(
                f"{backend.base_url}: model {backend.model_id!r}: batch {batch.id} failed as a "
                f"whole ({why}); nothing of it was stored"
            )
        )
    outcome = Outcome()
    for file_id in (batch.output_file_id, batch.error_file_id):
        if file_id:
            part = parse_results(client.files.content(file_id).text, ids)
            outcome.completions.update(part.completions)
            outcome.errors.update(part.errors)
    for i in indices:
        if i not in outcome.completions and i not in outcome.errors:
            outcome.errors[i] = (True, f"no result: the batch ended {batch.status}")
    if batch.status == "cancelled":  # someone stopped it: report, do not pay again
        for i in indices:
            if i not in outcome.completions:
                outcome.errors[i] = (False, f"batch {batch.id} was cancelled")
    return outcome, sidecar


def _resume(client: OpenAI, sidecar: Path) -> Batch | None:
    """The batch a previous run created for exactly these requests, if it left one."""
    if not sidecar.exists():
        return None
    batch_id = json.loads(sidecar.read_text(encoding="utf-8"))["batch_id"]
    try:
        batch = client.batches.retrieve(batch_id)
    except NotFoundError:
        print(f"batch {batch_id}: gone from the server; submitting again", file=sys.stderr)
        sidecar.unlink()
        return None
    print(f"batch {batch_id}: resuming ({batch.status})", file=sys.stderr)
    return batch


def _poll(client: OpenAI, batch: Batch, base_s: float, cap_s: float) -> Batch:
    wait = base_s
    seen: tuple[str, int] | None = None
    while batch.status not in TERMINAL:
        time.sleep(wait)
        wait = min(cap_s, wait * 2)
        batch = client.batches.retrieve(batch.id)
        counts = batch.request_counts
        now = (batch.status, counts.completed if counts else 0)
        if now != seen:
            seen = now
            total = counts.total if counts else "?"
            print(f"batch {batch.id}: {now[0]}, {now[1]}/{total} done", file=sys.stderr)
    return batch


def _write_json(path: Path, data: dict[str, Any]) -> None:
    """Atomically: a reader never sees half a sidecar."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, sort_keys=True), encoding="utf-8")
    os.replace(tmp, path)
