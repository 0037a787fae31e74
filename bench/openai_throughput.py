"""Requests/s of ``OpenAIBackend.generate`` (persisting every result) against a bare client loop.

Starts an llm-katan echo server whose every answer takes ``--latency-ms`` (200 ms), then, at
each concurrency c, times (a) a bare ``AsyncOpenAI`` + ``asyncio.Semaphore`` loop and (b)
``OpenAIBackend.generate`` with an ``on_results`` that writes each result into a real
``syps.core.store.Store`` in a temporary directory. The ideal is c / latency requests/s; the ratio
syps/bare is what this backend costs on top of the client (target >= 0.9).

    python bench/openai_throughput.py [--latency-ms 200] [--repeats 2]

Each figure is the best of ``--repeats`` runs (noise on a shared machine only ever slows a run).
The server is stopped by its pid at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import cast

from openai import AsyncOpenAI
from openai.types.chat import ChatCompletionMessageParam

from syps.core.backends import GenRequest, GenResult, SamplingParams
from syps.core.backends.openai_api import OpenAIBackend
from syps.core.config import ModelSpec
from syps.core.store import Store

MODEL = "echo-model"
GREEDY = SamplingParams(temperature=0.0, top_p=1.0, seed=0)
# (concurrency, requests): every configuration is about 16 latency rounds, a few seconds each.
PLAN = [(1, 16), (8, 128), (32, 256)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(latency_ms: int, log: Path) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    exe = Path(sys.executable).with_name("llm-katan")
    cmd = [
        str(exe) if exe.exists() else "llm-katan",
        *("--model", MODEL, "--backend", "echo", "--host", "127.0.0.1", "--port", str(port)),
        *("--latency-ms", str(latency_ms), "--max-concurrent", "1024"),
        *("--stats-file", "", "--disable-dashboard", "--log-level", "warning"),
    ]
    with log.open("wb") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"llm-katan exited: {log.read_text()}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1):
                return proc, port
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"llm-katan did not start: {log.read_text()}")


def stop_server(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def make_requests(n: int, tag: str) -> list[GenRequest]:
    return [
        GenRequest(
            key=f"{tag}-{i}",
            messages=[{"role": "user", "content": f"benchmark prompt {i}"}],
            max_new_tokens=64,
        )
        for i in range(n)
    ]


def bare(base_url: str, reqs: list[GenRequest], concurrency: int) -> float:
    """Seconds for the plainest client loop: one client, a semaphore, gather."""

    async def run() -> None:
        sem = asyncio.Semaphore(concurrency)
        async with AsyncOpenAI(api_key="EMPTY", base_url=base_url, max_retries=0) as client:

            async def one(r: GenRequest) -> None:
                async with sem:
                    await client.chat.completions.create(
                        model=MODEL,
                        messages=cast(list[ChatCompletionMessageParam], r.messages),
                        max_tokens=r.max_new_tokens,
                        temperature=0.0,
                        top_p=1.0,
                    )

            await asyncio.gather(*(one(r) for r in reqs))

    t0 = time.perf_counter()
    asyncio.run(run())
    return time.perf_counter() - t0


def with_syps(base_url: str, reqs: list[GenRequest], concurrency: int, store: Store) -> float:
    """Seconds for OpenAIBackend.generate, storing each result as it completes."""
    spec = ModelSpec(model=MODEL, backend="openai", base_url=base_url, concurrency=concurrency)
    backend = OpenAIBackend(spec)

    def persist(idx: list[int], results: list[GenResult]) -> None:
        store.put_many(
            "generation",
            [(reqs[i].key, dataclasses.asdict(r)) for i, r in zip(idx, results, strict=True)],
        )

    t0 = time.perf_counter()
    out = backend.generate(reqs, GREEDY, persist)
    elapsed = time.perf_counter() - t0
    assert len(out) == len(reqs)
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--latency-ms", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    latency_s = args.latency_ms / 1000

    with tempfile.TemporaryDirectory() as tmp:
        proc, port = start_server(args.latency_ms, Path(tmp) / "katan.log")
        base_url = f"http://127.0.0.1:{port}/v1"
        try:
            with Store(Path(tmp) / "store.sqlite") as store:
                # Warm-up: imports, first connections, the SQLite file.
                bare(base_url, make_requests(4, "warm-bare"), 4)
                with_syps(base_url, make_requests(4, "warm-syps"), 4, store)
                rows = []
                for c, n in PLAN:
                    t_bare: list[float] = []
                    t_syps: list[float] = []
                    for rep in range(args.repeats):
                        # Alternate which goes first, so neither always gets the warmer machine.
                        for which in ("bare", "syps") if rep % 2 == 0 else ("syps", "bare"):
                            if which == "bare":
                                t_bare.append(bare(base_url, make_requests(n, "b"), c))
                            else:
                                reqs = make_requests(n, f"s{c}-{rep}")
                                t_syps.append(with_syps(base_url, reqs, c, store))
                    rows.append((c, n, n / min(t_bare), n / min(t_syps)))
                stored = store.count("generation")
        finally:
            stop_server(proc)

    print(
        f"\nllm-katan echo, latency {args.latency_ms} ms, best of {args.repeats}; "
        f"{stored} results stored",
        file=sys.stderr,
    )
    head = f"{'c':>3} {'n':>4} {'bare req/s':>10} {'syps req/s':>10} {'syps/bare':>9} "
    head += f"{'bare/ideal':>10} {'syps/ideal':>10}"
    print(head)
    for c, n, r_bare, r_syps in rows:
        ideal = c / latency_s
        print(
            f"{c:>3} {n:>4} {r_bare:>10.1f} {r_syps:>10.1f} {r_syps / r_bare:>9.3f} "
            f"{r_bare / ideal:>10.3f} {r_syps / ideal:>10.3f}"
        )


if __name__ == "__main__":
    main()
