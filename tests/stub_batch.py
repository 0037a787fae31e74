"""A real HTTP server on 127.0.0.1 with the Files and Batches endpoints the Batch API path uses.

``POST /v1/files`` (multipart upload), ``GET /v1/files/{id}/content``, ``POST /v1/batches``
and ``GET /v1/batches/{id}``, answering as OpenAI documents them; nothing patches a client.
Each input line is answered by ``stub_openai.completion`` unless its last message holds a
marker:

- ``[error]``: a 500 entry in the error file, every time;
- ``[fail]``: a 500 entry the first time that prompt is in a batch, a completion after;
- ``[too-long]``: a 400 ``context_length_exceeded`` entry (not worth resubmitting).

Knobs a test sets on ``BatchServer``: ``hold`` keeps every batch ``in_progress``;
``expire_next = k`` makes the next batch created expire after answering its first k lines
(the rest are ``batch_expired`` entries); ``fail_next`` makes the next batch fail as a whole
(as when the input file is rejected); ``instant`` finishes each batch as it is created (a run
through the stages then waits for no poll). The server counts batches created and records each
batch's input ``custom_id``s and the prompts it answered.
"""

from __future__ import annotations

import email.parser
import email.policy
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from stub_openai import completion


@dataclass
class BatchServer:
    url: str
    hold: bool = False
    expire_next: int | None = None
    fail_next: bool = False
    instant: bool = False
    files: dict[str, bytes] = field(default_factory=dict)
    batches: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Per batch, in creation order: the custom_ids of its input, and its input bodies.
    inputs: list[list[str]] = field(default_factory=list)
    bodies: list[list[dict[str, Any]]] = field(default_factory=list)
    retrieves: int = 0
    failed_once: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    @property
    def created(self) -> int:
        return len(self.batches)


def _answer(server: BatchServer, line: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
    """(ok, output line) for one input line."""
    body = line["body"]
    last = body["messages"][-1]["content"]
    cid = line["custom_id"]
    status, error = 200, None
    if "[error]" in last or ("[fail]" in last and last not in server.failed_once):
        server.failed_once.add(last)
        status, error = 500, {"message": "The server had an error", "type": "server_error"}
    elif "[too-long]" in last:
        status, error = (
            400,
            {
                "message": "This model's maximum context length is 8192 tokens.",
                "type": "invalid_request_error",
                "code": "context_length_exceeded",
            },
        )
    resp_body = completion(body) if status == 200 else {"error": error}
    return status == 200, {
        "id": f"batch_req_{cid}",
        "custom_id": cid,
        "response": {"status_code": status, "request_id": "req", "body": resp_body},
        "error": None,
    }


def _finish(server: BatchServer, batch: dict[str, Any]) -> None:
    lines = [json.loads(x) for x in server.files[batch["input_file_id"]].decode().splitlines()]
    expire = batch.pop("_expire_after")
    out, err = [], []
    for k, line in enumerate(lines):
        if expire is not None and k >= expire:
            err.append(
                {
                    "id": f"batch_req_{line['custom_id']}",
                    "custom_id": line["custom_id"],
                    "response": None,
                    "error": {"code": "batch_expired", "message": "This request expired."},
                }
            )
            continue
        ok, result = _answer(server, line)
        (out if ok else err).append(result)
    for name, rows in (("output_file_id", out), ("error_file_id", err)):
        if rows:
            fid = f"file-{name[:3]}-{batch['id']}"
            server.files[fid] = "".join(json.dumps(r) + "\n" for r in rows).encode()
            batch[name] = fid
    batch["status"] = "expired" if expire is not None else "completed"
    batch["request_counts"] = {"total": len(lines), "completed": len(out), "failed": len(err)}


def _upload(server: BatchServer, content_type: str, raw: bytes) -> dict[str, Any]:
    """Keep an uploaded file (the client sends multipart/form-data, which the email parser reads
    as MIME); the file object OpenAI answers with."""
    head = f"Content-Type: {content_type}\r\n\r\n".encode()
    msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + raw)
    parts = {
        p.get_param("name", header="content-disposition"): p.get_payload(decode=True)
        for p in msg.iter_parts()  # type: ignore[attr-defined]
    }
    fid = f"file-{len(server.files)}"
    server.files[fid] = parts["file"]
    return {
        "id": fid,
        "object": "file",
        "bytes": len(parts["file"]),
        "created_at": int(time.time()),
        "filename": "requests.jsonl",
        "purpose": parts["purpose"].decode(),
        "status": "processed",
    }


def _create(server: BatchServer, req: dict[str, Any]) -> dict[str, Any]:
    """Create a batch over an uploaded input file, recording its custom_ids and bodies, under
    the knobs set now (``expire_next``, ``fail_next``: both spent by it; ``instant``)."""
    assert req["endpoint"] == "/v1/chat/completions", req
    assert req["completion_window"] == "24h", req
    lines = [json.loads(x) for x in server.files[req["input_file_id"]].splitlines()]
    assert all(x["url"] == req["endpoint"] and x["method"] == "POST" for x in lines)
    bid = f"batch_{len(server.batches)}"
    server.inputs.append([x["custom_id"] for x in lines])
    server.bodies.append([x["body"] for x in lines])
    batch = {
        "id": bid,
        "object": "batch",
        "endpoint": req["endpoint"],
        "input_file_id": req["input_file_id"],
        "completion_window": "24h",
        "status": "validating",
        "created_at": int(time.time()),
        "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
        "_expire_after": server.expire_next,
    }
    if server.fail_next:
        batch["status"] = "failed"
        batch["errors"] = {
            "object": "list",
            "data": [{"code": "invalid_json", "message": "Line 1 is not valid JSON."}],
        }
    server.expire_next, server.fail_next = None, False
    server.batches[bid] = batch
    if server.instant and batch["status"] == "validating":
        _finish(server, batch)
    return batch


def _retrieve(server: BatchServer, bid: str) -> dict[str, Any]:
    """A batch as a poll sees it: validating on creation, in progress at the first poll,
    finished at the next (unless ``hold``)."""
    server.retrieves += 1
    batch = server.batches[bid]
    if batch["status"] == "validating":
        batch["status"] = "in_progress"
    elif batch["status"] == "in_progress" and not server.hold:
        _finish(server, batch)
    return batch


class _HTTPServer(ThreadingHTTPServer):
    """The HTTP server on a free local port, holding the state its handlers answer from."""

    def __init__(self, state: BatchServer) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.state = state


class _Handler(BaseHTTPRequestHandler):
    """Routes each request to the function that answers it, under the state's lock."""

    server: _HTTPServer

    def _send(self, status: int, data: bytes, ctype: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _json(self, obj: dict[str, Any], status: int = 200) -> None:
        self._send(status, json.dumps(obj).encode())

    def do_POST(self) -> None:
        state = self.server.state
        raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with state.lock:
            if self.path == "/v1/files":
                self._json(_upload(state, self.headers["Content-Type"], raw))
            elif self.path == "/v1/batches":
                self._json(_public(_create(state, json.loads(raw))))
            else:
                self._json({"error": {"message": f"no route {self.path}"}}, 404)

    def do_GET(self) -> None:
        state = self.server.state
        parts = self.path.strip("/").split("/")
        with state.lock:
            if parts[:2] == ["v1", "batches"] and parts[2] in state.batches:
                self._json(_public(_retrieve(state, parts[2])))
            elif parts[:2] == ["v1", "files"] and parts[-1] == "content":
                self._send(200, state.files[parts[2]], "application/octet-stream")
            else:
                self._json({"error": {"message": f"no route {self.path}"}}, 404)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def stub_batch() -> Iterator[BatchServer]:
    """Serve the Files and Batches endpoints on a free port until the block ends."""
    server = BatchServer("")
    httpd = _HTTPServer(server)
    server.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


def _public(batch: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in batch.items() if not k.startswith("_")}
