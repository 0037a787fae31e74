"""A two-turn protocol and a scripted backend for the conversation core's tests.

The protocol ("toy"): each item is a question; turn 1 asks it (``t1`` template, ``{question}``);
turn 2, one per cell ``tone`` in ``tones``, replays the turn-1 answer verbatim and objects
(``t2`` template, ``{tone}``). A turn-1 answer containing "SKIP" is "unparseable": its children
are skipped with the reason ``parent unparsed``.

The backend (``ToyBackend``: the suite's ``fakes.FakeBackend`` with the toy script) answers
from its input alone, so every expectation is derived by hand:
``"<item's question word> <first 8 hex of sha256(messages JSON)> s<seed % 1000>"``, where the
seed is ``prompt_seed(sampling.seed, request.key)`` when sampling and 0 when greedy; a question
containing "skipme" answers "SKIP ...". It answers in batches of ``batch`` requests (3), calling
``on_results`` after each, and records every request it was sent (``sent``).

With ``simulate`` (``SIM_PROTOCOL``, the same design with a simulated user) turn 2 is the
simulated user's: per parseable turn-1 answer and tone, one simulator request, its system
message ``sim_system`` filled with ``{tone}`` and its user message ``"The assistant said:
<answer>"``; turn 3 continues each simulator turn: the turn-1 conversation, the answer, and the
simulator's text as the user's message. A skipped parent skips its simulator turns (role
simulator, reason ``parent unparsed``).

``register_toy(monkeypatch)`` puts the protocol in the registry for one test.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from fakes import FakeBackend, Reply, Score

from syps.core.backends import GenResult
from syps.core.config import ConvGeneration, ProtocolParams
from syps.core.io import LintError, canonical_json
from syps.core.protocol import SIMULATOR, Protocol, Request, Skipped, Turn
from syps.core.reporting import Drawn, Reporting, Scored
from syps.core.templating import TemplateSpec


@dataclass(frozen=True, kw_only=True)
class ToyParams(ProtocolParams):
    t1: str = "Q: {question}"
    t2: str = "I object ({tone})."
    tones: list[str] = field(default_factory=lambda: ["plain", "firm"])
    questions: list[str] = field(default_factory=lambda: ["alpha?", "beta?", "skipme gamma?"])
    simulate: bool = False
    sim_system: str = "Play a {tone} user."


def load_items(params: ToyParams, root: Path, seed: int) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "dataset": "toy",
            "item_id": [f"q{i}" for i in range(len(params.questions))],
            "item": [canonical_json({"question": q}) for q in params.questions],
        }
    )


def read_items(items: pd.DataFrame) -> dict[str, str]:
    """Each item's question by item id."""
    return {str(r.item_id): json.loads(r.item)["question"] for r in items.itertuples()}


def requests(
    params: ToyParams, questions: dict[str, str], turn: int, previous: pd.DataFrame, judge: Any
) -> Turn:
    if turn == 1:
        return Turn(
            [
                Request(
                    "toy",
                    iid,
                    {"tone": "-"},
                    1,
                    [{"role": "user", "content": params.t1.format(question=q)}],
                )
                for iid, q in questions.items()
            ]
        )
    if params.simulate:
        return _simulated(params, turn, previous)
    reqs: list[Request] = []
    skipped: list[Skipped] = []
    for parent in previous[previous["turn"] == 1].itertuples():
        for tone in params.tones:
            cell = {"tone": tone}
            if "SKIP" in parent.response:
                skipped.append(
                    Skipped(
                        "toy",
                        parent.item_id,
                        cell,
                        2,
                        "parent unparsed",
                        parent.rep,
                        parent.store_key,
                    )
                )
                continue
            messages = [
                *json.loads(parent.messages),
                {"role": "assistant", "content": parent.response},
                {"role": "user", "content": params.t2.format(tone=tone)},
            ]
            reqs.append(
                Request("toy", parent.item_id, cell, 2, messages, parent.rep, parent.store_key)
            )
    # Repetitions of turn 2 continue the repetition of their parent: no second fan-out.
    return Turn(reqs, skipped)


def _simulated(params: ToyParams, turn: int, previous: pd.DataFrame) -> Turn:
    """Turn 2: the simulated user's turns; turn 3: the target's answers to them."""
    by_key = {r.store_key: r for r in previous.itertuples() if r.store_key}
    reqs: list[Request] = []
    skipped: list[Skipped] = []
    if turn == 2:
        for parent in previous[previous["turn"] == 1].itertuples():
            for tone in params.tones:
                cell = {"tone": tone}
                if "SKIP" in parent.response:
                    skipped.append(
                        Skipped(
                            "toy",
                            parent.item_id,
                            cell,
                            2,
                            "parent unparsed",
                            parent.rep,
                            parent.store_key,
                            role=SIMULATOR,
                        )
                    )
                    continue
                messages = [
                    {"role": "system", "content": params.sim_system.format(tone=tone)},
                    {"role": "user", "content": f"The assistant said: {parent.response}"},
                ]
                reqs.append(
                    Request(
                        "toy",
                        parent.item_id,
                        cell,
                        2,
                        messages,
                        parent.rep,
                        parent.store_key,
                        role=SIMULATOR,
                    )
                )
        return Turn(reqs, skipped)
    for user in previous[(previous["turn"] == 2) & (previous["skipped"] == "")].itertuples():
        first = by_key[user.parent_key]
        messages = [
            *json.loads(first.messages),
            {"role": "assistant", "content": first.response},
            {"role": "user", "content": user.response},
        ]
        reqs.append(
            Request(
                "toy", user.item_id, json.loads(user.cell), 3, messages, user.rep, user.store_key
            )
        )
    return Turn(reqs)


def lint(
    params: ToyParams, questions: dict[str, str], conversations: pd.DataFrame
) -> dict[str, Any]:
    if "{tone}" not in params.t2:
        raise LintError("t2: the objection does not vary with the tone")
    return {"checked": len(params.tones)}


def label(
    params: ToyParams,
    questions: dict[str, str],
    responses: pd.DataFrame,
    judge: Any,
    aux: pd.DataFrame,
) -> pd.DataFrame:
    """label 1 when the answer is not SKIP; NaN (UNCLEAR) when it is; NaN when skipped."""
    skipped = responses["skipped"] != ""
    unclear = responses["response"].str.startswith("SKIP")
    return responses.assign(
        label=[float("nan") if s or u else 1.0 for s, u in zip(skipped, unclear, strict=True)],
        verdict=[
            "SKIPPED" if s else "UNCLEAR" if u else "ANSWERED"
            for s, u in zip(skipped, unclear, strict=True)
        ],
        evidence=[r if s else "" for r, s in zip(responses["skipped"], skipped, strict=True)],
        labeler="rule:toy",
        labeler_sha256="0" * 64,
    )


def score(params: ToyParams, labels: pd.DataFrame, settings: Any) -> dict[str, Any]:
    """answered/<tone> = mean label over turn-2 rows of that tone; n_skipped/<tone>."""
    out: dict[str, Any] = {}
    t2 = labels[labels["turn"] == 2]
    for (model, dataset), g in t2.groupby(["model", "dataset"]):
        m: dict[str, float] = {}
        for cell, gc in g.groupby("cell"):
            tone = json.loads(str(cell))["tone"]
            m[f"answered/{tone}"] = float(gc["label"].mean())
            m[f"n_skipped/{tone}"] = float((gc["verdict"] == "SKIPPED").sum())
        out.setdefault(str(model), {})[str(dataset)] = m
    return out


def figures(params: ToyParams, scored: Scored[dict[str, str]]) -> Drawn:
    (scored.plots / "answered.json").write_text(json.dumps(scored.scores), encoding="utf-8")
    return Drawn([])


def template_specs(params: ToyParams, where: str) -> list[TemplateSpec]:
    return [
        TemplateSpec(f"{where}.t1", params.t1, frozenset({"question"}), frozenset({"question"})),
        # {tone} is left to the lint, so that a lint failure can be tested.
        TemplateSpec(f"{where}.t2", params.t2, frozenset(), frozenset({"tone"})),
    ]


def templates(params: ToyParams) -> dict[str, Any]:
    return {"t1": params.t1, "t2": params.t2, "tones": params.tones}


PROTOCOL: Protocol[ToyParams, dict[str, str]] = Protocol(
    name="toy",
    params_type=ToyParams,
    load_items=load_items,
    read_items=read_items,
    requests=requests,
    label=label,
    score=score,
    turns=lambda params: 3 if params.simulate else 2,
    template_specs=template_specs,
    lint=lint,
    report=Reporting(
        headline_metrics=("answered",),
        run_metrics=("hit_rate",),
        run_prefix="toy",
        figures=figures,
        templates=templates,
    ),
)


# The toy with a simulated user (``simulate: true`` in its params).
SIM_PROTOCOL = dataclasses.replace(PROTOCOL, uses_simulator=True)


def toy_text(messages: Sequence[dict[str, str]], seed: int) -> str:
    digest = hashlib.sha256(json.dumps(list(messages), sort_keys=True).encode()).hexdigest()
    word = messages[0]["content"].split()[1] if messages else "?"
    prefix = "SKIP " if "skipme" in messages[0]["content"] else ""
    return f"{prefix}{word} {digest[:8]} s{seed % 1000}"


def toy_reply(messages: Sequence[dict[str, str]], seed: int) -> GenResult:
    return GenResult(toy_text(messages, seed), 5, 3, "stop")


def _no_judge(messages: Any, options: Any) -> Any:
    raise AssertionError("the toy protocol uses no judge")


@dataclass
class ToyBackend(FakeBackend):
    """The suite's scripted backend with the toy script (see the module docstring)."""

    model_id: str = "toy-model"
    revision: str = "r0"
    reply: Reply | None = toy_reply
    score: Score | None = _no_judge
    seeded: bool = True
    batch: int | None = 3


def register_toy(mp: pytest.MonkeyPatch, only: bool = True) -> None:
    """Register the toy protocol for one test (``only``: as the only protocol, so that params
    need no other protocol's block)."""
    from syps.protocols import PROTOCOLS as registry

    if only:
        # Last first: monkeypatch undoes in reverse, so the registry gets its order back.
        for name in reversed(list(registry)):
            mp.delitem(registry, name)
    mp.setitem(registry, "toy", PROTOCOL)


def toy_generation(reps: int = 1, temperature: float = 0.0) -> ConvGeneration:
    return ConvGeneration(max_new_tokens=8, temperature=temperature, top_p=1.0, reps=reps)
