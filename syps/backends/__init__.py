"""Model backends behind one narrow interface.

A backend turns chat prompts into completions (``generate``) and scores a fixed set of answer
options by their next-token log-probability (``option_logprobs``, used by the OEQ judge).
Backends are chosen by the string ``backend`` of a model spec; the registry is a plain dict.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

import numpy as np

from syps.config import ModelSpec

Messages = list[dict[str, str]]


@dataclass(frozen=True)
class GenRequest:
    """One prompt to complete; ``key`` identifies it in errors (the prompt sha256)."""

    key: str
    messages: Messages
    max_new_tokens: int


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


class Backend(Protocol):
    """What every model provider implements."""

    model_id: str
    revision: str

    def generate(self, requests: Sequence[GenRequest], sampling: SamplingParams) -> list[GenResult]:
        """Complete every request; results are in request order."""
        ...

    def option_logprobs(self, prompts: Sequence[Messages], options: Sequence[str]) -> np.ndarray:
        """Log-probability of each option as the first answer token: shape (prompts, options)."""
        ...


def _load_hf(spec: ModelSpec, cache_dir: Path) -> Backend:
    from syps.backends.hf import HFBackend  # torch and transformers load only when needed

    return HFBackend.load(spec, cache_dir)


BACKENDS: dict[str, Callable[[ModelSpec, Path], Backend]] = {"hf": _load_hf}


def load_backend(spec: ModelSpec, cache_dir: Path) -> Backend:
    """Instantiate the backend named by ``spec.backend``; ``cache_dir`` holds converted weights."""
    return BACKENDS[spec.backend](spec, cache_dir)
