"""The types every backend speaks (requests, results, sampling, option scores, the
``Backend`` interface) and the checks they share; ``syps.core.backends`` loads the backends and
re-exports these. Backend modules import from here, so nothing imports back into the package.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

import numpy as np

from syps.core.config import ModelSpec
from syps.core.io import sha256_text

Messages = list[dict[str, str]]


@dataclass(frozen=True)
class GenRequest:
    """One prompt to complete; ``key`` identifies it (the prompt sha256, which also seeds its
    sampling), ``where`` names it for people in errors (``dataset/item_id/variant``)."""

    key: str
    messages: Messages
    max_new_tokens: int
    where: str = ""


@dataclass(frozen=True)
class GenResult:
    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: Literal["stop", "length"]


@dataclass(frozen=True)
class SamplingParams:
    temperature: float
    top_p: float
    seed: int

    def key_fields(self) -> dict[str, float | int]:
        """The parameters that can change an output: greedy decoding ignores top_p and seed."""
        if self.temperature == 0:
            return {"temperature": 0.0}
        return {"temperature": self.temperature, "top_p": self.top_p, "seed": self.seed}


def longest_first(lengths: Sequence[int], max_new: Sequence[int] | None = None) -> list[int]:
    """Indices by decreasing (max_new_tokens, prompt length).

    Similar lengths then share a batch (little padding), equal max_new_tokens stay together,
    and an out-of-memory batch shows up at the start of a run rather than hours in.
    """
    new = max_new if max_new is not None else [0] * len(lengths)
    return sorted(range(len(lengths)), key=lambda i: (-new[i], -lengths[i]))


class BackendError(RuntimeError):
    """A request failed for good (retries exhausted or a non-retryable error).

    Requests that completed before it were already passed to ``on_results``.
    """


def prompt_seed(seed: int, key: str) -> int:
    """A per-prompt seed from the run seed and the prompt key (fits a signed 32-bit int).

    Sampling per prompt rather than per batch makes a sample independent of which prompts
    share its batch, and of what a resumed run still had to generate.
    """
    return int(sha256_text(f"{seed}:{key}")[:8], 16) & 0x7FFFFFFF


# Called with request indices and their results as soon as a batch (or request) completes,
# so the caller can persist them before the next one starts.
OnGenerated = Callable[[list[int], list[GenResult]], None]
OnScored = Callable[[list[int], "OptionScores"], None]


@dataclass(frozen=True)
class OptionScores:
    """A judge's answers: per prompt, each option's log-probability and the raw first answer.

    ``raw`` is what the model itself would have said first (the greedy token, or the text a
    server returned), kept as evidence: a judge whose raw answer is neither option is scored
    only relative to the options, and a reader of the label should be able to see that.
    """

    logprobs: np.ndarray  # (prompts, options)
    raw: list[str]
    # (prompts, 2): prompt and completion tokens per prompt, as an API server counted them;
    # None where the backend does not count (a local model costs nothing per token).
    tokens: np.ndarray | None = None

    def rows(self, idx: Sequence[int]) -> OptionScores:
        tokens = None if self.tokens is None else self.tokens[list(idx)]
        return OptionScores(self.logprobs[list(idx)], [self.raw[i] for i in idx], tokens)

    def usage(self, row: int) -> dict[str, int]:
        """Row ``row``'s token counts as store-record fields; empty when not counted."""
        if self.tokens is None:
            return {}
        return {
            "prompt_tokens": int(self.tokens[row, 0]),
            "completion_tokens": int(self.tokens[row, 1]),
        }


class Backend(Protocol):
    """What every model provider implements."""

    model_id: str
    revision: str

    def generate(
        self,
        requests: Sequence[GenRequest],
        sampling: SamplingParams,
        on_results: OnGenerated | None = None,
    ) -> list[GenResult]:
        """Complete every request; results are in request order."""
        ...

    def option_logprobs(
        self,
        prompts: Sequence[Messages],
        options: Sequence[str],
        on_results: OnScored | None = None,
    ) -> OptionScores:
        """Log-probability of each option as the first answer token, and the raw first answer."""
        ...


# Where a GPU driver is, torch may see a GPU; where none is, it cannot (so "auto" is decided
# without importing torch on a CPU machine). NVIDIA's, then ROCm's (torch.cuda covers both).
_GPU_DRIVERS = (Path("/proc/driver/nvidia"), Path("/dev/kfd"))


def device_dtype(dtype: str, device: str) -> str:
    """``dtype`` as a model runs it on ``device``: ``auto`` is bfloat16 on a CUDA device and
    float32 on any other (see :func:`local_dtype` for why)."""
    if dtype != "auto":
        return dtype
    return "bfloat16" if device.startswith("cuda") else "float32"


def local_dtype(spec: ModelSpec) -> str:
    """The dtype a local (``hf`` or ``vllm``) model runs in: ``spec.dtype``, or for ``auto``
    bfloat16 on a GPU and float32 on the CPU.

    Why those defaults: a GPU's matrix units run bf16 at about twice the fp32 rate (half the
    bytes per weight read) and bf16 is what models are released in; on a CPU, bf16 changes the
    tokens (``bench/hf_dtype.py``, docs/performance.md: 28 of 64 SyPS prompts kept their fp32
    greedy tokens, at 2.7x the speed on a CPU with AVX512-BF16) and is fast only on
    processors with bf16 instructions, so fp32 stays the default there, keeping the committed
    outputs, and bf16 is a choice (``dtype: bfloat16``). The devices are ``spec.devices``
    (bf16 where they are CUDA devices, as ``HFBackend.load`` decides; params refuse ``auto``
    over CUDA and other devices together, which would answer in two formats under one key),
    else every visible GPU, else the CPU."""
    if spec.dtype != "auto" or spec.devices is not None:
        # Every device's dtype is one: params refuse auto over CUDA and other devices.
        return device_dtype(spec.dtype, (spec.devices or ["cpu"])[0])
    if not any(p.exists() for p in _GPU_DRIVERS):
        return "float32"
    import torch  # heavy: only where a GPU driver is present, to ask whether CUDA works

    return device_dtype("auto", "cuda" if torch.cuda.is_available() else "cpu")


# Items listed in a context error; the rest are counted.
_SHOW_OVER = 5
FIX_JUDGE = (
    "A judge prompt holds the situation and the response: shorten or remove the item in the "
    "dataset's CSV, lower generation.max_new_tokens (shorter responses), or use a judge model "
    "with a longer context (judge.model)."
)


def check_context(
    model_id: str,
    limit: int | None,
    prompts: Sequence[tuple[str, str, int, int]],
    fix: str,
) -> None:
    """Fail before any decoding when a prompt plus its new tokens exceeds the model's context.

    ``prompts`` holds ``(item, variant, prompt tokens, new tokens)``; ``variant`` may be "".
    Truncating instead would silently change what is measured, and only for the longest items,
    so the policy is an error that names every offending item (the first few, then a count)
    and says how to fix it.
    """
    if limit is None:
        return
    over: dict[str, list[tuple[str, int, int]]] = {}
    for item, variant, n_prompt, n_new in prompts:
        if n_prompt + n_new > limit:
            over.setdefault(item, []).append((variant, n_prompt, n_new))
    if not over:
        return
    lines = []
    for item, rows in list(over.items())[:_SHOW_OVER]:
        variants = " ".join(v for v, _, _ in rows if v)
        _, n_prompt, n_new = max(rows, key=lambda r: r[1] + r[2])
        size = f"{n_prompt} prompt + {n_new} new = {n_prompt + n_new}" if n_new else n_prompt
        lines.append(f"  {item}{f' ({variants})' if variants else ''}: {size} tokens")
    if len(over) > _SHOW_OVER:
        lines.append(f"  ... and {len(over) - _SHOW_OVER} more item(s)")
    n_prompts = sum(len(rows) for rows in over.values())
    raise BackendError(
        f"{len(over)} item(s) do not fit the context of {model_id}: {limit} tokens for the "
        f"prompt and the new tokens together. Nothing was run; {n_prompts} of {len(prompts)} "
        f"prompt(s) are too long (per item, its longest):\n" + "\n".join(lines) + f"\n{fix}"
    )


def judge_prompt_name(i: int, messages: Messages) -> str:
    """A judge prompt carries no item name: its index and the start of its last turn."""
    text = " ".join(messages[-1]["content"].split()) if messages else ""
    return f"judge prompt #{i} ({text[:60]!r})"
