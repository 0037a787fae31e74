"""The conversation core: a protocol's turns, through the response store, for one model.

A request is a conversation: the model, the generation settings, the full message list and the
repetition index. Its store key (``syps.core.store.generation_key``) covers all of it, so a turn-2
key contains the exact turn-1 text the model gave: editing a turn-1 template changes the turn-1
keys and, through the replayed answers, the keys of their descendants only; editing a turn-2
template changes the turn-2 keys only; reverting either finds everything in the store.

Each turn is looked up in the store first; the model is loaded only if some request of some
turn is missing, and at most once per run. Every finished batch is stored at once, so a run
killed between (or within) turns resumes where it stopped and, since each request's sampling
seed is derived from its own key (``syps.core.backends.prompt_seed``), gives the same outputs.

The protocols know nothing of this: they build requests from items and earlier rows
(the contract, ``syps.core.protocol``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd

from syps.core.backends import (
    Backend,
    GenRequest,
    GenResult,
    SamplingParams,
)
from syps.core.config import ModelSpec, ProtocolParams
from syps.core.io import canonical_json, first_index
from syps.core.protocol import RESPONSE_COLUMNS, Protocol, Request, Skipped, cell_key
from syps.core.reasoning import answered, split_reasoning
from syps.core.store import Store, generation_key


def conversation_json(messages: Sequence[Mapping[str, str]]) -> str:
    """The exact bytes a conversation's key is taken over."""
    return canonical_json([{"role": m["role"], "content": m["content"]} for m in messages])


@dataclass
class TurnCounts:
    """What one turn did: rows requested, generated now (or, planning, to send), served by the
    store, skipped. Planning only: ``unknown_parents`` counts earlier answers not yet generated,
    whose children cannot be known yet, and ``pending`` holds each request to send as
    (messages, max_new_tokens)."""

    requests: int = 0
    distinct: int = 0  # distinct conversations among the requests (a repeated one is sent once)
    generated: int = 0
    served_from_store: int = 0
    skipped: int = 0
    unknown_parents: int = 0
    pending: list[tuple[list[dict[str, str]], int]] = field(default_factory=list)
    # The store keys generated now (not planning), and the backend's retries per error kind.
    fresh: list[str] = field(default_factory=list)
    retries: dict[str, int] = field(default_factory=dict)

    def line(self) -> str:
        """The turn's counts as the generate stage prints them."""
        return (
            f"{self.requests} requests, {self.served_from_store} in the store, "
            f"{self.generated} to generate, {self.skipped} skipped"
        )


class LazyBackend:
    """Loads the model on first use only, and once: a run whose every turn is in the store
    never loads it."""

    def __init__(self, spec: ModelSpec, cache_dir: Path, loader: Callable[..., Backend]):
        self.spec, self.cache_dir, self.loader = spec, cache_dir, loader
        self._backend: Backend | None = None

    @property
    def loaded(self) -> bool:
        return self._backend is not None

    def get(self) -> Backend:
        if self._backend is None:
            self._backend = self.loader(self.spec, self.cache_dir)
        return self._backend


def _expand(protocol: Protocol[Any], requests: list[Request], reps: int) -> list[Request]:
    """Each root request (no parent) ``reps`` times, rep 0 .. reps-1, when the core fans
    repetitions out; a child keeps the rep the protocol gave it (its parent's: repetition r of
    a conversation continues repetition r of its first turn)."""
    if not protocol.fan_out_reps:
        return requests
    out: list[Request] = []
    for r in requests:
        out.extend([replace(r, rep=k) for k in range(reps)] if not r.parent_key else [r])
    return out


def _where(protocol: str, r: Request | Skipped) -> str:
    cell = ",".join(f"{k}={v}" for k, v in r.cell.items())
    return f"{protocol}/{r.dataset}/{r.item_id} [{cell}] rep {r.rep} turn {r.turn}"


def converse(
    protocol: Protocol[Any],
    params: ProtocolParams,
    items: pd.DataFrame,
    *,
    model: str,
    identity: Mapping[str, str],
    seed: int,
    store: Store,
    backend: LazyBackend | None,
    judge: Any,
) -> tuple[pd.DataFrame, dict[int, TurnCounts]]:
    """Run every turn of ``protocol`` for one model; the response rows and per-turn counts.

    The rows (``RESPONSE_COLUMNS``) hold every request of every turn and every skipped child,
    in the order the protocol built them.

    ``backend`` None plans instead (``syps plan``): nothing is generated; a request missing
    from the store is counted and listed (``TurnCounts.pending``) and left out of the rows, so
    the next turn sees only the answers that exist (its requests are then a lower bound, and
    ``unknown_parents`` says how many answers it could not see).
    """
    gen = params.generation
    sampling = SamplingParams(gen.temperature, gen.top_p, seed)
    rows = pd.DataFrame({c: pd.Series(dtype=object) for c in RESPONSE_COLUMNS})
    counts: dict[int, TurnCounts] = {}
    for turn in range(1, protocol.turns(params) + 1):
        built = protocol.requests(params, items, turn, answered(rows), judge)
        requests = _expand(protocol, built.requests, gen.reps)
        max_new = [r.max_new_tokens or gen.max_new_tokens for r in requests]
        keys = [
            generation_key(
                identity, conversation_json(r.messages), n, sampling.key_fields(), replicate=r.rep
            )
            for r, n in zip(requests, max_new, strict=True)
        ]
        first = first_index(keys)
        records = store.get_many(keys)
        todo = [k for k in first if k not in records]
        tc = counts[turn] = TurnCounts(
            requests=len(keys),
            distinct=len(first),
            generated=len(todo),
            served_from_store=len(keys) - len(todo),
            skipped=len(built.skipped),
        )
        if backend is not None:
            print(f"{protocol.name} {model} turn {turn}: {tc.line()}", file=sys.stderr)
        if todo and backend is None:
            tc.pending = [
                ([dict(m) for m in requests[first[k]].messages], max_new[first[k]]) for k in todo
            ]
            tc.unknown_parents = len(todo)
        elif todo and backend is not None:
            _generate(
                protocol.name,
                [requests[first[k]] for k in todo],
                [max_new[first[k]] for k in todo],
                todo,
                store,
                backend.get(),
                sampling,
                records,
                tc,
            )
        new = pd.DataFrame(
            [
                _row(protocol.name, r, k, n, records[k], model, identity, sampling)
                for r, k, n in zip(requests, keys, max_new, strict=True)
                if k in records  # always, unless planning
            ]
            + [_skipped_row(protocol.name, s, model, identity, sampling) for s in built.skipped],
            columns=RESPONSE_COLUMNS,
        )
        rows = new if rows.empty else pd.concat([rows, new], ignore_index=True)
    return rows.astype({"rep": int, "turn": int}), counts


def _generate(
    protocol: str,
    requests: Sequence[Request],
    max_new: Sequence[int],
    keys: list[str],
    store: Store,
    backend: Any,
    sampling: SamplingParams,
    records: dict[str, Any],
    tc: TurnCounts,
) -> None:
    """Generate ``requests`` (one per store key of ``keys``, none in the store yet), saving
    each batch to the store as the backend finishes it; adds their records to ``records`` and
    their keys and the backend's retries to ``tc``."""
    gen_requests = [
        GenRequest(
            k,  # the store key seeds this request's sampling
            [dict(m) for m in r.messages],
            n,
            _where(protocol, r),
        )
        for k, r, n in zip(keys, requests, max_new, strict=True)
    ]

    def persist(idx: list[int], results: list[GenResult]) -> None:
        done = [(keys[i], asdict(r)) for i, r in zip(idx, results, strict=True)]
        store.put_many("generation", done)

    results = backend.generate(gen_requests, sampling, persist)
    records.update({k: asdict(r) for k, r in zip(keys, results, strict=True)})
    tc.fresh = list(keys)
    # API backends count the retries of their last call per error kind; local ones make none.
    tc.retries = dict(getattr(backend, "retries", {}))


def _lineage(
    protocol: str,
    r: Request | Skipped,
    model: str,
    identity: Mapping[str, str],
    sampling: SamplingParams,
) -> dict[str, Any]:
    """The columns a generated row and a skipped one share: where it belongs, and with what."""
    return {
        "protocol": protocol,
        "dataset": r.dataset,
        "item_id": r.item_id,
        "cell": cell_key(r.cell),
        "rep": r.rep,
        "turn": r.turn,
        "parent_key": r.parent_key,
        "model": model,
        "model_id": identity["model_id"],
        "revision": identity["revision"],
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "seed": sampling.seed,
    }


def _row(
    protocol: str,
    r: Request,
    key: str,
    max_new: int,
    rec: Mapping[str, Any],
    model: str,
    identity: Mapping[str, str],
    sampling: SamplingParams,
) -> dict[str, Any]:
    reply = split_reasoning(rec["text"])
    return {
        **_lineage(protocol, r, model, identity, sampling),
        "store_key": key,
        "skipped": "",
        "max_new_tokens": max_new,
        "messages": conversation_json(r.messages),
        "response": reply.answer,
        "reasoning": reply.reasoning,
        "prompt_tokens": rec["prompt_tokens"],
        "completion_tokens": rec["completion_tokens"],
        "finish_reason": rec["finish_reason"],
    }


def _skipped_row(
    protocol: str,
    s: Skipped,
    model: str,
    identity: Mapping[str, str],
    sampling: SamplingParams,
) -> dict[str, Any]:
    return {
        **_lineage(protocol, s, model, identity, sampling),
        "store_key": "",
        "skipped": s.reason or "skipped",
        "max_new_tokens": 0,
        "messages": "",
        "response": "",
        "reasoning": "",
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "finish_reason": "",
    }
