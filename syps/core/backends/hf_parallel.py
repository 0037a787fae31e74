"""Data parallelism for the HF backend: one worker process per device.

Each worker loads its own copy of the model on its device and decodes whole batches; the main
process only tokenises for sorting, hands out batches and collects results, so it can store
each batch as it lands. Processes, not threads: decoding holds the GIL between kernel launches,
and a second Python thread beside a generate loop was seen to slow it many times over.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from syps.core.backends.base import (
    BackendError,
    GenRequest,
    GenResult,
    Messages,
    OnGenerated,
    OnScored,
    OptionScores,
    SamplingParams,
    longest_first,
)
from syps.core.backends.threads import ENV, thread_count
from syps.core.config import ModelSpec


def _worker(
    spec: ModelSpec, cache_dir: Path, device: str, threads: int | None, tasks: Any, results: Any
) -> None:
    os.environ.setdefault("TQDM_DISABLE", "1")  # the main process draws the only bar
    if threads is not None:
        os.environ[ENV] = str(threads)  # read by HFBackend.load
    # heavy: torch and transformers (syps.core.backends.hf imports both) load in the worker,
    # after its environment is set
    import torch

    from syps.core.backends.hf import HFBackend

    try:
        backend = HFBackend.load(spec, cache_dir, device)
        results.put(("ready", device, backend.model_id, backend.revision, torch.get_num_threads()))
    except BaseException as e:  # reported to the main process, which raises it
        results.put(("error", device, f"{type(e).__name__}: {e}"))
        return
    while (task := tasks.get()) is not None:
        kind, batch_id, indices, payload = task
        try:
            if kind == "generate":
                reqs, sampling = payload
                out: Any = backend.generate(reqs, sampling)
            else:
                prompts, options = payload
                out = backend.option_logprobs(prompts, options)
            results.put(("done", batch_id, indices, out))
        except BaseException as e:
            results.put(("error", device, f"{type(e).__name__}: {e}"))
            return


class ParallelHFBackend:
    """The HF backend spread over several devices; same interface, results in request order."""

    def __init__(self, spec: ModelSpec, cache_dir: Path, devices: Sequence[str]):
        from syps.core.backends.hf import HFBackend  # heavy: imports torch and transformers

        # The main process needs only the tokenizer (to order and batch prompts), not the weights.
        self._tok_only = HFBackend.tokenizer_only(spec, cache_dir)
        self.batch_size = spec.batch_size
        # CPU workers split this process's share of the cores (see syps.core.backends.threads);
        # SYPS_THREADS, when set, is each worker's own count.
        cpus = sum(d.split(":")[0] == "cpu" for d in devices)
        share = max(1, thread_count() // cpus) if cpus > 1 and ENV not in os.environ else None
        ctx = mp.get_context("spawn")  # CUDA cannot be used in forked children
        self._tasks = ctx.Queue()
        self._results = ctx.Queue()
        self._procs = [
            ctx.Process(
                target=_worker,
                args=(spec, cache_dir, d, share if d.split(":")[0] == "cpu" else None)
                + (self._tasks, self._results),
                daemon=True,
            )
            for d in devices
        ]
        for p in self._procs:
            p.start()
        ready = [self._expect("ready") for _ in self._procs]
        ((self.model_id, self.revision),) = {r[2:4] for r in ready}
        # Each worker's torch threads, by device.
        self.worker_threads = sorted((r[1], r[4]) for r in ready)

    def _expect(self, kind: str) -> tuple[Any, ...]:
        while True:
            try:
                msg: tuple[Any, ...] = self._results.get(timeout=5)
            except queue.Empty:
                dead = [p for p in self._procs if not p.is_alive()]
                if dead:
                    self.close()
                    code = dead[0].exitcode
                    raise BackendError(f"a model worker died (exit code {code})") from None
                continue
            if msg[0] == "error":
                self.close()
                raise BackendError(f"model worker on {msg[1]} failed: {msg[2]}")
            if msg[0] == kind:
                return msg

    def _scatter(
        self, kind: str, batches: list[tuple[list[int], Any]], total: int, desc: str, on_batch: Any
    ) -> None:
        for batch_id, (indices, payload) in enumerate(batches):
            self._tasks.put((kind, batch_id, indices, payload))
        with tqdm(total=total, desc=desc, unit="prompt", file=sys.stderr) as bar:
            for _ in batches:
                _, _, indices, out = self._expect("done")
                on_batch(indices, out)
                bar.update(len(indices))

    def generate(
        self,
        requests: Sequence[GenRequest],
        sampling: SamplingParams,
        on_results: OnGenerated | None = None,
    ) -> list[GenResult]:
        from syps.core.backends.hf import prefix_order  # heavy: imports torch and transformers

        # Before any worker starts on a batch, as the single-device backend does.
        encoded = self._tok_only.encode_requests(self.model_id, requests)
        # Prompts sharing a prefix go to one worker, which computes the prefix once.
        order = prefix_order(encoded, [r.max_new_tokens for r in requests], self.batch_size)
        batches: list[tuple[list[int], Any]] = []
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            # Workers group by max_new_tokens themselves; a mixed chunk is just two batches there.
            batches.append((chunk, ([requests[i] for i in chunk], sampling)))
        results: dict[int, GenResult] = {}

        def on_batch(indices: list[int], out: list[GenResult]) -> None:
            results.update(zip(indices, out, strict=True))
            if on_results is not None:
                on_results(indices, out)

        self._scatter("generate", batches, len(requests), f"generate {self.model_id}", on_batch)
        return [results[i] for i in range(len(requests))]

    def option_logprobs(
        self,
        prompts: Sequence[Messages],
        options: Sequence[str],
        on_results: OnScored | None = None,
    ) -> OptionScores:
        lengths = [len(e) for e in self._tok_only.encode_judge(self.model_id, prompts)]
        order = longest_first(lengths)
        batches = [
            (chunk, ([prompts[i] for i in chunk], list(options)))
            for chunk in (
                order[s : s + self.batch_size] for s in range(0, len(order), self.batch_size)
            )
        ]
        out = np.empty((len(prompts), len(options)))
        raw = [""] * len(prompts)

        def on_batch(indices: list[int], scores: OptionScores) -> None:
            out[indices] = scores.logprobs
            for i, r in zip(indices, scores.raw, strict=True):
                raw[i] = r
            if on_results is not None:
                on_results(indices, scores)

        self._scatter("score", batches, len(prompts), f"judge {self.model_id}", on_batch)
        return OptionScores(out, raw)

    def close(self) -> None:
        for p in self._procs:
            if p.is_alive():
                self._tasks.put(None)
        for p in self._procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
