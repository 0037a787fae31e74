"""vLLM backend: local models through vLLM's offline engine (``vllm.LLM``), for GPUs and
clusters, and on a CPU through vLLM's CPU build.

Prompts are encoded here with the model's chat template (``ChatEncoder``, as the hf backend
encodes them) and given to the engine as token ids, so both local backends see the same tokens.
Each request carries its own seed (``prompt_seed``): a sample does not depend on which requests
share its batch. Results are handed to ``on_results`` as each request finishes, so a killed run
resumes from the store with only the unfinished ones left.

The engine core runs in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0`` unless the user sets
it): no child process is left behind by a killed stage, a failed start raises here with its
cause rather than in a child's log, and the engine starts without spawning and handshaking
with a child process. With ``tensor_parallel_size`` above 1 vLLM still starts one worker
per GPU; they watch this process and exit with it.

vllm is imported only when an engine is started.
"""

from __future__ import annotations

import itertools
import os
import sys
from collections.abc import Callable, Sequence
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
    local_dtype,
    prompt_seed,
)
from syps.core.backends.hf import ChatEncoder, HFBackend
from syps.core.backends.threads import thread_count
from syps.core.config import ModelSpec
from syps.core.io import InputError

INSTALL = (
    "install it with `bash setup.sh --vllm` (the CUDA build where an NVIDIA driver is, vLLM's "
    "CPU build elsewhere; see docs/many-models.md)"
)
# memory_share when params leave it out. On a GPU it is vLLM's gpu_memory_utilization (its
# default, 0.92, less a little for a second engine such as the judge's). On a CPU, vLLM's CPU
# build subtracts everything this process already holds from that share of the machine's RAM
# (the rest of the stage, another engine), so the engine here got a negative KV cache behind an
# hf model: there the share is of the RAM available at start, given to the KV cache as an
# explicit size (which also skips vLLM's warm-up pass), a tenth by default.
GPU_SHARE, CPU_SHARE = 0.9, 0.1


def _last_line(e: BaseException) -> str:
    """An exception's message as one line: vLLM's often span several, the cause last."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    return f"{type(e).__name__}: {lines[-1] if lines else ''}"


class VLLMBackend:
    """A model served by an in-process ``vllm.LLM``."""

    def __init__(self, llm: Any, encoder: ChatEncoder, model_id: str, revision: str):
        self.llm = llm
        self.encoder = encoder
        self.tok = encoder.tok
        self.model_id = model_id
        self.revision = revision
        self._ids = itertools.count()

    @classmethod
    def load(cls, spec: ModelSpec, cache_dir: Path) -> VLLMBackend:
        # Before vllm reads its settings: the engine in this process, and its INFO log (several
        # lines per request batch) kept out of the stage's.
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
        try:
            # heavy (and optional): vllm loads only here, after the settings above are set
            import vllm
            from vllm.platforms import current_platform
        except ImportError as e:
            raise InputError(
                f"backend vllm ({spec.model}): the vLLM engine is not installed ({e}); {INSTALL}"
            ) from None
        import torch  # heavy: only once the engine is wanted (loaded already with vllm)

        # Its share of the cores, as the hf backend takes (see threads): set before the engine
        # starts, since vLLM's CPU worker then turns torch.set_num_threads into a no-op.
        torch.set_num_threads(thread_count())
        resolved, source = HFBackend._source(spec, cache_dir)
        encoder = HFBackend.tokenizer_only(spec, cache_dir)
        memory: dict[str, Any]
        if current_platform.is_cpu():
            import psutil  # heavy: a vllm dependency, only to size a CPU engine's memory

            share = spec.memory_share or CPU_SHARE
            memory = {"kv_cache_memory_bytes": int(share * psutil.virtual_memory().available)}
        else:
            memory = {"gpu_memory_utilization": spec.memory_share or GPU_SHARE}
        limit = spec.max_model_len
        if limit is not None and encoder.context is not None and limit > encoder.context:
            raise InputError(
                f"max_model_len {limit} of {resolved.model_id} exceeds its context of "
                f"{encoder.context} tokens; lower it or leave it out"
            )
        kwargs = {"revision": resolved.hf_revision} if resolved.hf_revision else {}
        try:
            llm = vllm.LLM(
                model=source,
                tokenizer=source,
                dtype=local_dtype(spec),  # the store key's dtype, auto resolved by the same rule
                max_model_len=limit,
                **memory,
                tensor_parallel_size=spec.tensor_parallel_size,
                enforce_eager=spec.enforce_eager,
                max_num_seqs=spec.batch_size,
                enable_prefix_caching=True,
                seed=0,  # requests carry their own seeds; this one only fixes the engine's
                **kwargs,
            )
        except Exception as e:  # vLLM raises many kinds; all mean the engine did not start
            raise BackendError(
                f"vLLM could not start {resolved.model_id} ({source}): {_last_line(e)}"
            ) from e
        # What this engine takes (max_model_len, else the model's own length) bounds a request.
        encoder.context = llm.llm_engine.model_config.max_model_len
        return cls(llm, encoder, resolved.model_id, resolved.revision)

    def _run(
        self,
        prompts: list[list[int]],
        params: list[Any],
        desc: str,
        on_done: Callable[[int, Any], None],
    ) -> None:
        """Queue every request and step the engine, calling ``on_done(index, output)`` as each
        one finishes (the engine's own loop, ``LLM.generate``, returns only at the end).
        Prompts are queued sorted by their token ids, so prompts that share a prefix (an
        item's variants, a conversation's turns) are scheduled together and the prefix cache
        computes that prefix once."""
        from vllm.inputs import TokensPrompt  # heavy: vllm, loaded already by load()

        engine = self.llm.llm_engine
        where: dict[str, int] = {}
        for i in sorted(range(len(prompts)), key=lambda i: prompts[i]):
            rid = f"syps-{next(self._ids)}"  # unique over the engine's life
            where[rid] = i
            engine.add_request(rid, TokensPrompt(prompt_token_ids=prompts[i]), params[i])
        with tqdm(total=len(prompts), desc=desc, unit="request", file=sys.stderr) as bar:
            while engine.has_unfinished_requests():
                done = [o for o in engine.step() if o.finished]
                for o in done:
                    on_done(where[o.request_id], o)
                bar.update(len(done))

    # -- the Backend interface -----------------------------------------------------------------
    def generate(
        self,
        requests: Sequence[GenRequest],
        sampling: SamplingParams,
        on_results: OnGenerated | None = None,
    ) -> list[GenResult]:
        from vllm import SamplingParams as VSampling  # heavy: vllm, loaded already by load()

        encoded = self.encoder.encode_requests(self.model_id, requests)
        params = [
            VSampling(
                temperature=sampling.temperature,
                top_p=sampling.top_p if sampling.temperature > 0 else 1.0,
                seed=prompt_seed(sampling.seed, r.key) if sampling.temperature else None,
                max_tokens=r.max_new_tokens,
                detokenize=False,  # decoded below, by the hf backend's rule
            )
            for r in requests
        ]
        results: dict[int, GenResult] = {}

        def done(k: int, out: Any) -> None:
            c = out.outputs[0]
            tokens = list(c.token_ids)
            stopped = c.finish_reason == "stop"
            # As the hf backend: the stop token is counted, not shown.
            result = GenResult(
                text=self.tok.decode(tokens[:-1] if stopped else tokens, skip_special_tokens=True),
                prompt_tokens=len(encoded[k]),
                completion_tokens=len(tokens),
                finish_reason="stop" if stopped else "length",
            )
            results[k] = result
            if on_results is not None:
                on_results([k], [result])

        self._run(encoded, params, f"generate {self.model_id}", done)
        return [results[i] for i in range(len(requests))]

    def option_logprobs(
        self,
        prompts: Sequence[Messages],
        options: Sequence[str],
        on_results: OnScored | None = None,
    ) -> OptionScores:
        """One one-token request per (prompt, option), restricted to the option's first token.

        With vLLM's default ``raw_logprobs`` mode the logprob returned for that token is the
        full log-softmax before the restriction, the value the hf judge reads; the returned
        entry of rank 1 is the unrestricted greedy token, the judge's raw answer. The requests
        of one prompt share it through the prefix cache, so each option costs about one token.
        """
        from vllm import SamplingParams as VSampling  # heavy: vllm, loaded already by load()

        first = self.encoder.option_tokens(self.model_id, options)
        encoded = self.encoder.encode_judge(self.model_id, prompts)
        n = len(options)
        out = np.full((len(prompts), n), np.nan)
        raw = [""] * len(prompts)
        left = [n] * len(prompts)

        def done(k: int, o: Any) -> None:
            i, j = divmod(k, n)
            step = o.outputs[0].logprobs[0]
            out[i, j] = step[first[j]].logprob
            top = next(t for t, lp in step.items() if lp.rank == 1)
            raw[i] = self.tok.decode([top])
            left[i] -= 1
            if left[i] == 0 and on_results is not None:
                on_results([i], OptionScores(out[[i]], [raw[i]]))

        # Request k is option k % n of prompt k // n.
        self._run(
            [e for e in encoded for _ in first],
            [
                VSampling(
                    temperature=0,
                    max_tokens=1,
                    logprobs=1,
                    allowed_token_ids=[f],
                    detokenize=False,
                )
                for _ in encoded
                for f in first
            ],
            f"judge {self.model_id} (requests: prompts x {n} options)",
            done,
        )
        return OptionScores(out, raw)
