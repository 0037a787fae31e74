"""A real HTTP server on 127.0.0.1 that answers every chat completion with one fixed error.

llm-katan can simulate 429, 500, 503 and 504 but not a prompt that is too long for the model,
so this serves the error bodies OpenAI, vLLM, SGLang and llama.cpp send for that. The route's
first path segment picks the body: ``base_url = f"{server.url}/{name}/v1"``. Nothing patches a
client; the server counts the requests it got per name.

The routes ``reasoning_content`` and ``reasoning`` answer every chat completion as a reasoning
model's server does: ``completion`` with the reasoning (``REASONING``) in a message field of
that name beside the answer.

The route ``user`` answers as a simulated user in character (``user_turn``: one sentence that
names a digest of the request, so each request gets its own answer and the same request the
same one, and no rule of the adaptive protocol flags it). With ``hold`` set to n, the n-th
request on that route waits until ``release`` is set, after setting ``held``: a test kills its
client there, with exactly n - 1 answers sent when requests go one at a time.

The route ``fail-once-<status>`` answers instead: a prompt whose last message holds ``[fail]``
gets HTTP ``<status>`` the first time it is sent on that route, and every other request a chat
completion (see ``completion``), so a test knows exactly which requests were retried.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# name -> (HTTP status, JSON body), as each server sends it.
ERRORS: dict[str, tuple[int, dict[str, Any]]] = {
    "openai": (
        400,
        {
            "error": {
                "message": "This model's maximum context length is 8192 tokens. However, your "
                "messages resulted in 9000 tokens. Please reduce the length of the messages.",
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
        },
    ),
    # vLLM before 0.8 answered with a flat body, later versions nest it under "error".
    "vllm-flat": (
        400,
        {
            "object": "error",
            "message": "This model's maximum context length is 2048 tokens. However, you "
            "requested 2100 tokens (2068 in the messages, 32 in the completion). Please reduce "
            "the length of the messages or completion.",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        },
    ),
    "vllm": (
        400,
        {
            "error": {
                "message": "This model's maximum context length is 2048 tokens. However, you "
                "requested 2100 tokens. Please reduce the length of the messages or completion.",
                "type": "BadRequestError",
                "param": None,
                "code": 400,
            }
        },
    ),
    "sglang": (
        400,
        {
            "object": "error",
            "message": "The input (5000 tokens) is longer than the model's context length "
            "(4096 tokens).",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        },
    ),
    "llamacpp": (
        400,
        {
            "error": {
                "code": 400,
                "message": "the request exceeds the available context size, try increasing it",
                "type": "exceed_context_size_error",
                "n_prompt_tokens": 5000,
                "n_ctx": 4096,
            }
        },
    ),
    # Not about the context: a malformed request, a bad key, and a 5xx (transient, whatever
    # its text says).
    "bad-request": (
        400,
        {"error": {"message": "Invalid JSON in request body", "type": "invalid_request_error"}},
    ),
    "unauthorized": (
        401,
        {"error": {"message": "Incorrect API key provided", "code": "invalid_api_key"}},
    ),
    "server-error": (
        500,
        {"error": {"message": "KV cache full: maximum context length of the batch reached"}},
    ),
}
OVERFLOWS = ["openai", "vllm-flat", "vllm", "sglang", "llamacpp"]
REASONING_ROUTES = ("reasoning_content", "reasoning")
REASONING = "The user insists on D. The evidence still says B."
FAIL_MARK = "[fail]"


def completion(body: dict[str, Any]) -> dict[str, Any]:
    """A chat completion for a request body: ``ok: <last message>``, with usage counted in
    words (prompt: every message's words; completion: the answer's words), so a test can
    compute the counts by hand."""
    last = body["messages"][-1]["content"]
    text = f"ok: {last}"
    prompt_words = sum(len(m["content"].split()) for m in body["messages"])
    return {
        "id": "chatcmpl-" + hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest(),
        "object": "chat.completion",
        "created": 0,
        "model": body["model"],
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_words,
            "completion_tokens": len(text.split()),
            "total_tokens": prompt_words + len(text.split()),
        },
    }


def user_turn(body: dict[str, Any]) -> dict[str, Any]:
    """A chat completion in a simulated user's voice, one per distinct request."""
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:8]
    out = completion(body)
    out["choices"][0]["message"]["content"] = f"I am still not convinced, friend {digest}."
    return out


@dataclass
class StubServer:
    url: str
    hits: Counter[str] = field(default_factory=Counter)
    hold: int | None = None
    held: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)


@contextmanager
def stub_openai() -> Iterator[StubServer]:
    """Serve ``ERRORS`` on a free port until the block ends."""
    server = StubServer("")
    failed: set[str] = set()
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            request = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            name = self.path.strip("/").split("/")[0]
            with lock:
                server.hits[name] += 1
                nth = server.hits[name]
            status, body = ERRORS.get(name, (404, {"error": {"message": f"no route {name}"}}))
            if name == "user":
                if nth == server.hold:
                    server.held.set()
                    server.release.wait(timeout=120)
                status, body = 200, user_turn(json.loads(request))
            if name in REASONING_ROUTES:
                status, body = 200, completion(json.loads(request))
                body["choices"][0]["message"][name] = REASONING
            if name.startswith("fail-once-"):
                sent = json.loads(request)
                last = sent["messages"][-1]["content"]
                with lock:  # once per route and prompt
                    fail = FAIL_MARK in last and f"{name}\n{last}" not in failed
                    failed.add(f"{name}\n{last}")
                status, body = (
                    (int(name.rsplit("-", 1)[1]), {"error": {"message": "simulated, try again"}})
                    if fail
                    else (200, completion(sent))
                )
            data = json.dumps(body).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except OSError:  # the client is gone (killed while its request was held)
                pass

        def log_message(self, format: str, *args: Any) -> None:
            pass  # quiet: the tests assert on what the client reports

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.release.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)
