"""A real OpenAI-compatible server for tests: llm-katan's echo backend on 127.0.0.1.

Started with its own session, stopped by its own pid; nothing here patches a client.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

MODEL = "echo-model"


@dataclass
class Katan:
    proc: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_katan(flags: list[str], log: Path) -> Katan:
    port = free_port()
    cmd = [
        *_katan_cmd(),
        *("--model", MODEL, "--backend", "echo", "--host", "127.0.0.1", "--port", str(port)),
        *("--max-concurrent", "64", "--stats-file", "", "--disable-dashboard"),
        *("--log-level", "warning"),
        *flags,
    ]
    # A file, not a pipe: nobody reads the server's log while it runs, and a full pipe would
    # block the server. Its own session, so a stray signal to ours does not reach it.
    with log.open("wb") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
    return Katan(proc, port, log)


def _katan_cmd() -> list[str]:
    exe = Path(sys.executable).with_name("llm-katan")
    return [str(exe)] if exe.exists() else ["llm-katan"]


def wait_ready(k: Katan, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if k.proc.poll() is not None:
            raise RuntimeError(f"llm-katan exited with {k.proc.returncode}: {k.log.read_text()}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{k.port}/health", timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"llm-katan did not answer on port {k.port}: {k.log.read_text()}")


def stop_katans(servers: list[Katan]) -> None:
    """Terminate every server by its pid first, then wait, so their shutdowns overlap."""
    for k in servers:
        if k.proc.poll() is None:
            k.proc.send_signal(signal.SIGTERM)
    for k in servers:
        try:
            k.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            k.proc.kill()
            k.proc.wait(timeout=5)
