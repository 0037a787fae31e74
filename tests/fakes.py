"""The suite's one scripted model backend and one scripted judge.

``FakeBackend`` implements the backend interface of ``syps.core.backends`` (``generate`` and
``option_logprobs``) from a script, and records every request it receives. ``FakeModels``
stands in for an entry of ``syps.core.backends.BACKENDS`` (``identity`` without loading,
``load`` recorded): install it with the ``fake_backend`` fixture of tests/conftest.py, or with
:func:`install_backend` where a fixture of a wider scope needs one. Every backend it loads is
configured as the ``FakeModels`` is at that moment, so a test may change the script (or make it
crash) between stages.

``FakeJudge`` stands in for the ``Judge`` protocol of ``syps.protocols.base`` (what a protocol
is handed), labels from a script and records every call; the ``fake_judge`` fixture gives one.

Scripts, so that every expectation follows by hand:

- ``reply``: a function of a request's messages (or, with ``seeded``, of its messages and its
  sampling seed: ``prompt_seed(sampling.seed, request.key)`` when sampling, 0 when greedy)
  returning the text or a whole ``GenResult``; or a mapping from the last message's content to
  the text. A text becomes ``GenResult(text, prompt_tokens=<characters of the last message>,
  completion_tokens=<words of the text>, "stop")``. Default: :func:`digest_reply`, distinct for
  every distinct conversation.
- ``score``: a function of a judge prompt's messages and the options returning each option's
  log-probability (the raw answer is then the best option) or ``(logprobs, raw)``; or a mapping
  from the last message's content to the log-probabilities. Default: the first option -0.1,
  every other -2.0.

Both answer in batches of ``batch`` requests (all at once when None), calling ``on_results``
after each. ``crash_after = k`` raises ``RuntimeError("fake crash in generate")`` (``... in
judge``) instead of starting batch k; ``on_batch(kind, k)``, when set, is called before batch k
of each call (``kind`` "generate" or "judge"), e.g. to pause a process a test then kills.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from syps.core.backends import (
    GenRequest,
    GenResult,
    OnGenerated,
    OnScored,
    OptionScores,
    SamplingParams,
    prompt_seed,
)
from syps.core.config import ModelSpec
from syps.core.labeling import judge_labels
from syps.core.protocol import JudgeLabel

Messages = list[dict[str, str]]
Reply = Callable[..., "str | GenResult"] | Mapping[str, str]
Score = (
    Callable[[Messages, Sequence[str]], "Sequence[float] | tuple[Sequence[float], str]"]
    | Mapping[str, Sequence[float]]
)
OnBatch = Callable[[str, int], None]


def digest_reply(messages: Sequence[Mapping[str, str]]) -> str:
    """``"Reply <first 12 hex of sha256(messages JSON)>."``: one text per conversation."""
    digest = hashlib.sha256(json.dumps(list(messages), sort_keys=True).encode()).hexdigest()
    return f"Reply {digest[:12]}."


def _last(messages: Sequence[Mapping[str, str]]) -> str:
    return messages[-1]["content"] if messages else ""


def _batches(n: int, size: int | None) -> list[list[int]]:
    step = size or max(n, 1)
    return [list(range(s, min(s + step, n))) for s in range(0, n, step)]


@dataclass
class FakeBackend:
    """A scripted backend (see the module docstring); records what it was asked."""

    model_id: str = "fake/model"
    revision: str = "rev0"
    reply: Reply | None = None
    score: Score | None = None
    seeded: bool = False
    batch: int | None = None
    crash_after: int | None = None
    on_batch: OnBatch | None = None
    # What it was asked: every generation request (in the order received), the sampling of
    # each generate call, every judge prompt, and the options of each option_logprobs call.
    requests: list[GenRequest] = field(default_factory=list)
    sampling: list[SamplingParams] = field(default_factory=list)
    judge_prompts: list[Messages] = field(default_factory=list)
    judge_options: list[list[str]] = field(default_factory=list)

    @property
    def sent(self) -> list[GenRequest]:
        return self.requests

    def answer(self, request: GenRequest, sampling: SamplingParams) -> GenResult:
        """The scripted result of one request."""
        messages = [dict(m) for m in request.messages]
        script: Any = self.reply or digest_reply
        if isinstance(script, Mapping):
            if _last(messages) not in script:
                raise AssertionError(f"no scripted reply for {_last(messages)!r}")
            out: str | GenResult = script[_last(messages)]
        elif self.seeded:
            seed = prompt_seed(sampling.seed, request.key) if sampling.temperature > 0 else 0
            out = script(messages, seed)
        else:
            out = script(messages)
        if isinstance(out, GenResult):
            return out
        return GenResult(out, len(_last(messages)), len(out.split()), "stop")

    def _start(self, kind: str, b: int) -> None:
        if self.on_batch is not None:
            self.on_batch(kind, b)
        if self.crash_after is not None and b == self.crash_after:
            raise RuntimeError(f"fake crash in {kind}")

    def generate(
        self,
        requests: Sequence[GenRequest],
        sampling: SamplingParams,
        on_results: OnGenerated | None = None,
    ) -> list[GenResult]:
        self.sampling.append(sampling)
        out: list[GenResult] = []
        for b, idx in enumerate(_batches(len(requests), self.batch)):
            self._start("generate", b)
            done = []
            for i in idx:
                self.requests.append(requests[i])
                done.append(self.answer(requests[i], sampling))
            out.extend(done)
            if on_results is not None:
                on_results(idx, done)
        return out

    def logprobs(self, messages: Messages, options: Sequence[str]) -> tuple[list[float], str]:
        """The scripted log-probabilities of one judge prompt and its raw answer."""
        script = self.score
        if script is None:
            got: Any = [-0.1] + [-2.0] * (len(options) - 1)
        elif isinstance(script, Mapping):
            got = script[_last(messages)]
        else:
            got = script(messages, options)
        if isinstance(got, tuple):
            values, raw = got
        else:
            values = got
            raw = options[int(np.argmax(values))]
        assert len(values) == len(options), (values, options)
        return [float(x) for x in values], str(raw)

    def option_logprobs(
        self,
        prompts: Sequence[Messages],
        options: Sequence[str],
        on_results: OnScored | None = None,
    ) -> OptionScores:
        self.judge_options.append(list(options))
        values = np.empty((len(prompts), len(options)))
        raws = [""] * len(prompts)
        for b, idx in enumerate(_batches(len(prompts), self.batch)):
            self._start("judge", b)
            for i in idx:
                self.judge_prompts.append([dict(m) for m in prompts[i]])
                row, raws[i] = self.logprobs(list(prompts[i]), options)
                values[i] = row
            if on_results is not None:
                on_results(idx, OptionScores(values[idx], [raws[i] for i in idx]))
        return OptionScores(values, raws)


@dataclass
class FakeModels:
    """Stands in for a ``BACKENDS`` entry: every model is a :class:`FakeBackend`.

    ``identity`` names a spec ``fake/<spec.model>`` at ``spec.revision`` (default ``rev0``)
    without loading anything; ``load`` records ``(spec.model, cache_dir)`` in ``loads`` and
    hands out a backend with the script and knobs set here at that moment.
    """

    reply: Reply | None = None
    score: Score | None = None
    seeded: bool = False
    batch: int | None = None
    crash_after: int | None = None
    on_batch: OnBatch | None = None
    backend: str = "hf"
    default_revision: str = "rev0"
    loads: list[tuple[str, Path]] = field(default_factory=list)
    made: list[FakeBackend] = field(default_factory=list)

    def identity(self, spec: ModelSpec, cache_dir: Path) -> dict[str, str]:
        return {
            "backend": self.backend,
            "model_id": f"fake/{spec.model}",
            "revision": spec.revision or self.default_revision,
        }

    def load(self, spec: ModelSpec, cache_dir: Path) -> FakeBackend:
        self.loads.append((spec.model, cache_dir))
        ident = self.identity(spec, cache_dir)
        fake = FakeBackend(
            ident["model_id"],
            ident["revision"],
            reply=self.reply,
            score=self.score,
            seeded=self.seeded,
            batch=self.batch,
            crash_after=self.crash_after,
            on_batch=self.on_batch,
        )
        self.made.append(fake)
        return fake

    @property
    def requests(self) -> list[GenRequest]:
        """Every generation request any loaded backend received, in order."""
        return [r for f in self.made for r in f.requests]

    @property
    def judge_prompts(self) -> list[Messages]:
        """Every judge prompt any loaded backend scored, in order."""
        return [p for f in self.made for p in f.judge_prompts]


def install_backend(mp: pytest.MonkeyPatch, name: str = "hf", **config: Any) -> FakeModels:
    """Put a :class:`FakeModels` (configured by ``config``) in place of ``BACKENDS[name]``."""
    import syps.core.backends

    fake = FakeModels(backend=name, **config)
    mp.setitem(syps.core.backends.BACKENDS, name, fake)
    return fake


@dataclass(frozen=True)
class JudgeCall:
    system: str
    template: str
    options: dict[str, int]
    fields: list[dict[str, str]]
    where: str
    datasets: list[str] | None


Verdict = Callable[[Mapping[str, str]], "float | tuple[float, str] | JudgeLabel"]


@dataclass
class FakeJudge:
    """Stands in for ``syps.protocols.base.Judge``: one label per field mapping, from a script.

    ``verdict`` is a function of a field mapping (the template's ``{name}`` values) returning a
    ``JudgeLabel``, a value (the verdict is then the option with that value, ``UNCLEAR`` for
    NaN) or ``(value, verdict)``; or a mapping from the ``response`` field to the value.
    Default: every prompt gets the first option. Evidence is the ``response`` field. Every
    call is recorded in ``calls``. ``logprobs`` instead scores each option (a function of the
    option names and the field mapping, one log-probability per option) and decides by the
    judge's own rule (``syps.core.labeling.judge_labels``, margin 0), evidence and all.
    """

    verdict: Verdict | Mapping[str, float] | None = None
    logprobs: Callable[[Sequence[str], Mapping[str, str]], Sequence[float]] | None = None
    labeler: str = "judge:fake"
    dry: bool = False  # a run's judge, not a plan's
    labeler_sha256: str = "sha-j"
    template_sha256: str = "sha-t"
    calls: list[JudgeCall] = field(default_factory=list)

    @property
    def fields(self) -> list[dict[str, str]]:
        """Every field mapping the judge was asked, over all calls."""
        return [f for c in self.calls for f in c.fields]

    def __call__(
        self,
        system: str,
        template: str,
        options: Mapping[str, int],
        fields: Sequence[Mapping[str, str]],
        where: str,
        datasets: Sequence[str] | None = None,
    ) -> list[JudgeLabel]:
        self.calls.append(
            JudgeCall(
                system,
                template,
                dict(options),
                [dict(f) for f in fields],
                where,
                None if datasets is None else list(datasets),
            )
        )
        return [self._label(options, f) for f in fields]

    def _label(self, options: Mapping[str, int], f: Mapping[str, str]) -> JudgeLabel:
        if self.logprobs is not None:
            names = list(options)
            row = np.array([self.logprobs(names, f)], dtype=float)
            (lab,) = judge_labels(row, names, options, 0.0)
            return JudgeLabel(
                lab.value,
                lab.verdict,
                lab.evidence,
                self.labeler,
                self.labeler_sha256,
                self.template_sha256,
            )
        script = self.verdict
        if script is None:
            got: Any = float(next(iter(options.values())))
        elif isinstance(script, Mapping):
            got = script[f["response"]]
        else:
            got = script(f)
        if isinstance(got, JudgeLabel):
            return got
        if isinstance(got, tuple):
            value, verdict = float(got[0]), str(got[1])
        else:
            value = float(got)
            names = [k for k, v in options.items() if v == value]
            verdict = "UNCLEAR" if math.isnan(value) or not names else names[0]
        return JudgeLabel(
            value,
            verdict,
            str(f.get("response", "")),
            self.labeler,
            self.labeler_sha256,
            self.template_sha256,
        )
