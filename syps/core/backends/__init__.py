"""Model backends behind one narrow interface.

A backend turns chat prompts into completions (``generate``) and scores a fixed set of answer
options by their next-token log-probability (``option_logprobs``, used by the OEQ judge).
Backends are chosen by the string ``backend`` of a model spec; the registry is a plain dict.

Each entry also has a cheap ``identity``: what names the model's outputs (backend, model id,
revision or weights hash) without loading any weights, so the response store can be consulted
before deciding whether a model needs loading at all.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from syps.core.backends.base import (
    FIX_JUDGE,
    Backend,
    BackendError,
    GenRequest,
    GenResult,
    Messages,
    OnGenerated,
    OnScored,
    OptionScores,
    SamplingParams,
    check_context,
    device_dtype,
    judge_prompt_name,
    local_dtype,
    longest_first,
    prompt_seed,
)
from syps.core.backends.hf_resolve import COMMIT, ModelSpecError, resolve
from syps.core.backends.threads import passive_wait
from syps.core.config import LOCAL_BACKENDS, ModelSpec
from syps.core.io import InputError
from syps.core.runs import batch_dir

# Before any backend loads torch (and with it libgomp, which reads the policy once).
passive_wait()

__all__ = [
    "Backend",
    "BackendEntry",
    "BackendError",
    "FIX_JUDGE",
    "GenRequest",
    "GenResult",
    "Messages",
    "OnGenerated",
    "OnScored",
    "OptionScores",
    "SamplingParams",
    "check_context",
    "device_dtype",
    "judge_prompt_name",
    "load_backend",
    "local_dtype",
    "longest_first",
    "model_identity",
    "model_size",
    "prompt_seed",
]


@dataclass(frozen=True)
class BackendEntry:
    identity: Callable[[ModelSpec, Path], dict[str, str]]
    load: Callable[[ModelSpec, Path], Backend]


def _hf_identity(spec: ModelSpec, cache_dir: Path) -> dict[str, str]:
    """The weights' id and revision (or hash) and, unless it is float32, the dtype: every key
    the store holds from before the dtype was a setting is a float32 one (syps generated in
    bf16 only on CUDA, where its HF path had never run), so they stay valid."""
    r = resolve(spec, cache_dir)
    identity = {"backend": "hf", "model_id": r.model_id, "revision": r.revision}
    dtype = local_dtype(spec)
    if dtype != "float32":
        identity["dtype"] = dtype
    return identity


def _hf_load(spec: ModelSpec, cache_dir: Path) -> Backend:
    import torch  # heavy: torch and transformers load only when a model is needed

    devices = spec.devices
    if devices is None:
        devices = [f"cuda:{i}" for i in range(torch.cuda.device_count())] or ["cpu"]
    if len(devices) > 1:
        # heavy: tqdm and multiprocessing, of use only beside torch (its workers load the model)
        from syps.core.backends.hf_parallel import ParallelHFBackend

        return ParallelHFBackend(spec, cache_dir, devices)
    from syps.core.backends.hf import HFBackend  # heavy: imports torch and transformers

    return HFBackend.load(spec, cache_dir, devices[0])


def _openai_identity(spec: ModelSpec, cache_dir: Path) -> dict[str, str]:
    """An API model is named by what determines its outputs: the served model id and the
    revision or weights identity the user declares. Only when neither is declared does the
    server address stand in for them (a ``base_url`` key), since then nothing else tells two
    deployments of one name apart. Timeouts, concurrency, retries and the batch mode change
    how a response is fetched, never what it says, so they stay out."""
    identity = {"backend": "openai", "model_id": spec.model, "revision": spec.revision or ""}
    if spec.identity is not None:
        identity["identity"] = spec.identity
    elif spec.revision is None:
        identity["base_url"] = str(spec.base_url)
    return identity


def _openai_load(spec: ModelSpec, cache_dir: Path) -> Backend:
    from syps.core.backends.openai_api import OpenAIBackend  # heavy: imports openai

    # Batch ids sit in the clone's .cache/, wherever the response store is.
    return OpenAIBackend(spec, batch_dir=batch_dir())


def _vllm_identity(spec: ModelSpec, cache_dir: Path) -> dict[str, str]:
    """The weights as for hf, and every engine setting that changes an answer: the dtype
    (always: this backend has no keys from before the dtype was a setting), the tensor-parallel
    size (a split model sums its all-reduces in another order) and eager mode (CUDA graphs and
    compiled kernels fuse operations). The memory share and the maximum length only decide
    what fits, so they stay out."""
    r = resolve(spec, cache_dir)
    identity = {
        "backend": "vllm",
        "model_id": r.model_id,
        "revision": r.revision,
        "dtype": local_dtype(spec),
        "tensor_parallel_size": str(spec.tensor_parallel_size),
    }
    if spec.enforce_eager:
        identity["enforce_eager"] = "true"
    return identity


def _vllm_load(spec: ModelSpec, cache_dir: Path) -> Backend:
    from syps.core.backends.vllm_engine import VLLMBackend  # heavy: imports vllm and torch

    return VLLMBackend.load(spec, cache_dir)


BACKENDS: dict[str, BackendEntry] = {
    "hf": BackendEntry(_hf_identity, _hf_load),
    "vllm": BackendEntry(_vllm_identity, _vllm_load),
    "openai": BackendEntry(_openai_identity, _openai_load),
}


def model_identity(spec: ModelSpec, cache_dir: Path, key: str) -> dict[str, str]:
    """What names this model's outputs, computed without loading it.

    Also the check that the spec names a model this machine can load (a local directory, a
    known embedded model, a hub id in the local cache or on a reachable hub), so a typo fails
    before any work. ``key`` is where the spec sits in params (``models.<name>`` or
    ``judge.model``); the error names the field at fault under it.
    """
    try:
        identity = BACKENDS[spec.backend].identity(spec, cache_dir)
    except ModelSpecError as e:
        raise InputError(f"{key}.{e.field}: {e}") from None
    commit = identity["revision"]
    if spec.backend in LOCAL_BACKENDS and COMMIT.fullmatch(commit) and spec.revision != commit:
        # A branch or tag moves when the hub is updated: say which weights this run means.
        print(
            f"warning: {key}.model {spec.model} is not pinned to a commit: this run uses "
            f"commit {commit}, which {spec.revision or 'main'!r} names in the local Hugging Face "
            f"cache; set "
            f"{key}.revision: {commit} to keep these weights",
            file=sys.stderr,
        )
    if "base_url" in identity and key not in _WARNED_ADDRESS:
        _WARNED_ADDRESS.add(key)
        print(
            f"warning: {key} declares neither revision nor identity, so its stored responses "
            f"are keyed by the server address {spec.base_url}: serving the same weights at "
            f"another address generates everything again; set {key}.identity (e.g. the weights' "
            f"sha256 or release name) to key them by the weights",
            file=sys.stderr,
        )
    return identity


# Specs already warned about in this process: the address warning is said once.
_WARNED_ADDRESS: set[str] = set()


def model_size(spec: ModelSpec, cache_dir: Path) -> float | None:
    """The model's parameter count, for the SPSS-vs-size figure: ``spec.size`` if set, else
    counted from a local model's config (see :func:`syps.core.backends.hf.parameter_count`); None
    when it cannot be known locally (an API model, a hub model not in the local cache)."""
    if spec.size is not None:
        return spec.size
    if spec.backend not in LOCAL_BACKENDS:
        return None
    from syps.core.backends.hf import parameter_count  # heavy: imports torch; never in scoring

    return parameter_count(spec, cache_dir)


def load_backend(spec: ModelSpec, cache_dir: Path) -> Backend:
    """Instantiate the backend named by ``spec.backend``; ``cache_dir`` holds converted weights."""
    return BACKENDS[spec.backend].load(spec, cache_dir)
