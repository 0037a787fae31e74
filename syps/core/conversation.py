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

Every turn is first laid out as a conversation table (``CONVERSATION_COLUMNS``): one row per
request, its messages encoded once (:func:`conversation_json`), the bytes its key is taken over,
stored in its response row and hashed into ``prompt_sha256``. The first turn's table is what the
``variants`` stage renders, lints and writes (:func:`first_turn`); ``generate`` sends exactly
those rows. Later turns are built from the stored earlier answers.

A design with a simulated user (``syps.core.protocol.SIMULATOR``) gives some requests of a later
turn to the simulator: they are looked up, generated and stored as the target's are, keyed by
the simulator's identity and sampling, and their rows (role ``simulator``, the simulator's model
columns) sit in the same table, so the target's next turn is built from a stored user turn and
a rerun, a resume or an edit behaves for user turns exactly as for answers.

The protocols know nothing of this: they build requests from items and earlier rows
(the contract, ``syps.core.protocol``).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from syps.core.backends import (
    Backend,
    GenRequest,
    GenResult,
    SamplingParams,
    model_identity,
)
from syps.core.config import ConvGeneration, ModelSpec, ProtocolParams, SimulatorParams
from syps.core.io import InputError, canonical_json, first_index, sha256_text
from syps.core.messages import conversation_json
from syps.core.protocol import (
    CONVERSATION_COLUMNS,
    RESPONSE_COLUMNS,
    ROLES,
    SIMULATOR,
    TARGET,
    JudgeLabel,
    Message,
    Protocol,
    Request,
    Skipped,
    Turn,
    cell_key,
)
from syps.core.reasoning import answered, split_reasoning
from syps.core.store import generation_key
from syps.core.stores import ResponseStore


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


@dataclass(frozen=True)
class Role:
    """Who answers a turn's requests of one role: the identity and sampling its store keys are
    taken over, the answer length its requests default to, and its backend (None: planning).
    The target's is built from :func:`converse`'s arguments; the simulator's is the
    ``simulator`` block's (:func:`simulator_role`)."""

    identity: Mapping[str, str]
    sampling: SamplingParams
    max_new_tokens: int
    backend: LazyBackend | None


def simulator_role(
    sim: SimulatorParams | None,
    seed: int,
    cache_dir: Path,
    loader: Callable[..., Backend] | None,
    target: tuple[Mapping[str, str], LazyBackend | None] | None = None,
) -> Role | None:
    """The simulated user (``simulator`` in params; None when there is none) as a
    :class:`Role`: its identity (checked now, before any work, as a model's is), its sampling
    under the run's seed, and a backend that loads it on first use (``loader`` None: planning).
    When it is the ``target`` model itself (``target``: its identity and backend; the same
    identity is the same weights, settings and number format), the target's backend serves
    both roles, so the weights load once."""
    if sim is None:
        return None
    identity = model_identity(sim.model, cache_dir, "simulator.model")
    sampling = SamplingParams(sim.temperature, sim.top_p, seed)
    backend: LazyBackend | None = None
    if loader is not None and target is not None and dict(target[0]) == identity:
        backend = target[1]
    elif loader is not None:
        backend = LazyBackend(sim.model, cache_dir, loader)
    return Role(identity, sampling, sim.max_new_tokens, backend)


class FirstTurnJudge:
    """The judge a first turn is built with: there is no answer yet to judge, so asking is a
    protocol bug."""

    dry = False

    def __call__(self, *args: Any, **kwargs: Any) -> list[JudgeLabel]:
        raise RuntimeError("the first turn is built before any answer: it has nothing to judge")


def _where(protocol: str, row: Mapping[str, Any]) -> str:
    cell = ",".join(f"{k}={v}" for k, v in json.loads(row["cell"]).items())
    return (
        f"{protocol}/{row['dataset']}/{row['item_id']} [{cell}] rep {row['rep']} turn {row['turn']}"
    )


def conversation_table(
    protocol: Protocol[Any, Any], built: Turn, gen: ConvGeneration, max_new_tokens: int = 0
) -> tuple[pd.DataFrame, list[Sequence[Message]]]:
    """A turn's requests and skipped children as the conversations they send
    (``CONVERSATION_COLUMNS``), in the order the protocol built them, skipped ones after; and
    each request row's messages as the protocol gave them (what a backend is handed).

    Root requests (no parent) are repeated ``gen.reps`` times, rep 0 .. reps-1, when the core
    fans repetitions out; a child keeps the rep the protocol gave it (its parent's: repetition
    r of a conversation continues repetition r of its first turn); a simulator request is never
    repeated. The answer length is the request's own, else ``max_new_tokens`` when given (the
    simulator's), else the protocol's ``generation.max_new_tokens``. The messages are encoded
    once here: the exact bytes keyed, sent and stored."""
    fan_out = protocol.fan_out_reps
    rows: list[dict[str, Any]] = []
    messages: list[Sequence[Message]] = []
    for r in built.requests:
        encoded = conversation_json(r.messages)
        length = r.max_new_tokens or max_new_tokens or gen.max_new_tokens
        repeat = fan_out and not r.parent_key and r.role == TARGET
        for rep in range(gen.reps) if repeat else [r.rep]:
            rows.append(
                {
                    **_lineage(protocol.name, r, rep),
                    "max_new_tokens": length,
                    "messages": encoded,
                    "prompt_sha256": sha256_text(encoded),
                    "skipped": "",
                }
            )
            messages.append(r.messages)
    for k in built.skipped:
        rows.append(
            {
                **_lineage(protocol.name, k, k.rep),
                "max_new_tokens": 0,
                "messages": "",
                "prompt_sha256": "",
                "skipped": k.reason or "skipped",
            }
        )
    table = pd.DataFrame(rows, columns=CONVERSATION_COLUMNS)
    return table.astype({"rep": int, "turn": int, "max_new_tokens": int}), messages


def first_turn(protocol: Protocol[Any, Any], params: ProtocolParams, items: Any) -> pd.DataFrame:
    """The first turn's conversations (``CONVERSATION_COLUMNS``): what the variants stage lints
    and writes, and what generate sends. ``items`` as the protocol reads them."""
    empty = pd.DataFrame({c: pd.Series(dtype=object) for c in RESPONSE_COLUMNS})
    built = protocol.requests(params, items, 1, empty, FirstTurnJudge())
    if any(r.role != TARGET for r in built.requests) or any(
        k.role != TARGET for k in built.skipped
    ):
        raise ValueError(f"{protocol.name}: the first turn is the target's; no simulator turn")
    return conversation_table(protocol, built, params.generation)[0]


def conversations_params_sha256(protocol: Protocol[Any, Any], params: ProtocolParams) -> str:
    """What a conversations file records it was rendered under: the protocol and its params."""
    return sha256_text(canonical_json({"protocol": protocol.name, "params": asdict(params)}))


def check_conversations(
    table: pd.DataFrame, protocol: Protocol[Any, Any], params: ProtocolParams, source: str
) -> None:
    """Refuse a first turn rendered for another protocol or under other params (a stale file
    run by hand): generate must send what variants linted for the params it runs."""
    got = table.attrs.get("params_sha256")
    if got != conversations_params_sha256(protocol, params):
        raise InputError(
            f"{source}: rendered for other protocols.{protocol.name} params than the params "
            "file holds (or by an older syps); run dvc repro, which renders and lints it again"
        )


def converse(
    protocol: Protocol[Any, Any],
    params: ProtocolParams,
    items: Any,
    *,
    model: str,
    identity: Mapping[str, str],
    seed: int,
    store: ResponseStore,
    backend: LazyBackend | None,
    judge: Any,
    first: pd.DataFrame | None = None,
    simulator: Role | None = None,
) -> tuple[pd.DataFrame, dict[tuple[int, str], TurnCounts]]:
    """Run every turn of ``protocol`` for one model; the response rows and the counts per
    (turn, role).

    ``items`` as the protocol reads them; ``first`` the first turn's conversations as the
    variants stage wrote them (None: built here, as ``first_turn`` builds them). The rows
    (``RESPONSE_COLUMNS``) hold every request of every turn and every skipped child, in the
    order the protocol built them, a turn's target rows before its simulator rows.
    ``simulator``: who answers the requests the protocol gives role SIMULATOR (the simulated
    user); a protocol that asks for one without it is refused.

    ``backend`` None plans instead (``syps plan``): nothing is generated; a request missing
    from the store is counted and listed (``TurnCounts.pending``) and left out of the rows, so
    the next turn sees only the answers that exist (its requests are then a lower bound, and
    ``unknown_parents`` says how many answers it could not see).
    """
    gen = params.generation
    roles = {
        TARGET: Role(
            identity, SamplingParams(gen.temperature, gen.top_p, seed), gen.max_new_tokens, backend
        )
    }
    if simulator is not None:
        roles[SIMULATOR] = simulator
    rows = pd.DataFrame({c: pd.Series(dtype=object) for c in RESPONSE_COLUMNS})
    counts: dict[tuple[int, str], TurnCounts] = {}
    parts: list[tuple[str, pd.DataFrame, list[Sequence[Message]] | None]]
    for turn in range(1, protocol.turns(params) + 1):
        if turn == 1:
            table = first if first is not None else first_turn(protocol, params, items)
            parts = [(TARGET, table, None)]
        else:
            built = protocol.requests(params, items, turn, answered(rows), judge)
            parts = []
            for role in ROLES:
                mine = Turn(
                    [r for r in built.requests if r.role == role],
                    [k for k in built.skipped if k.role == role],
                )
                if role != TARGET and not (mine.requests or mine.skipped):
                    continue
                if role not in roles:
                    raise InputError(
                        f"{protocol.name} turn {turn}: asks the simulated user for a turn, "
                        "but params have no `simulator` block"
                    )
                parts.append(
                    (role, *conversation_table(protocol, mine, gen, roles[role].max_new_tokens))
                )
            unknown = {r.role for r in built.requests} | {k.role for k in built.skipped}
            unknown -= set(ROLES)
            if unknown:
                raise ValueError(f"{protocol.name} turn {turn}: unknown role(s) {sorted(unknown)}")
        for role, part, messages in parts:
            new, counts[turn, role] = _run_turn(
                protocol.name,
                turn,
                part,
                messages,
                model=model,
                role=role,
                who=roles[role],
                store=store,
            )
            rows = new if rows.empty else pd.concat([rows, new], ignore_index=True)
    return rows.astype({"rep": int, "turn": int}), counts


def _run_turn(
    protocol: str,
    turn: int,
    table: pd.DataFrame,
    given: Sequence[Sequence[Message]] | None,
    *,
    model: str,
    role: str,
    who: Role,
    store: ResponseStore,
) -> tuple[pd.DataFrame, TurnCounts]:
    """One turn of :func:`converse` for one role: its conversation ``table`` looked up in the
    store, the missing ones generated by ``who`` (its backend None: listed as pending), its
    response rows and counts.

    ``given`` the message lists the protocol built for the table's request rows, or None for
    the first turn, whose messages are read back from the table's JSON."""
    sampling, backend = who.sampling, who.backend
    asked = table[table["skipped"] == ""].reset_index(drop=True)
    keys = [
        generation_key(who.identity, m, int(n), sampling.key_fields(), replicate=int(r))
        for m, n, r in zip(asked["messages"], asked["max_new_tokens"], asked["rep"], strict=True)
    ]
    first_of = first_index(keys)
    records = store.get_many(keys)
    todo = [k for k in first_of if k not in records]
    tc = TurnCounts(
        requests=len(keys),
        distinct=len(first_of),
        generated=len(todo),
        served_from_store=len(keys) - len(todo),
        skipped=len(table) - len(asked),
    )
    if backend is not None:
        who_line = "" if role == TARGET else " (simulated user)"
        print(f"{protocol} {model} turn {turn}{who_line}: {tc.line()}", file=sys.stderr)

    # The message lists to hand the backend: the protocol's, or the first turn's bytes
    # read back (the file variants wrote holds them only as the JSON that is keyed).
    sent = {
        k: [
            dict(m)
            for m in (given[i] if given is not None else json.loads(asked["messages"].iat[i]))
        ]
        for k in todo
        for i in [first_of[k]]
    }
    if todo and backend is None:
        tc.pending = [(sent[k], int(asked["max_new_tokens"].iat[first_of[k]])) for k in todo]
        tc.unknown_parents = len(todo)
    elif todo and backend is not None:
        _generate(
            protocol,
            [asked.iloc[first_of[k]] for k in todo],
            [sent[k] for k in todo],
            todo,
            store,
            backend.get(),
            sampling,
            records,
            tc,
        )
    return _response_rows(table, asked, keys, records, model, role, who), tc


def _generate(
    protocol: str,
    conversations: Sequence[pd.Series],
    messages: Sequence[list[dict[str, str]]],
    keys: list[str],
    store: ResponseStore,
    backend: Any,
    sampling: SamplingParams,
    records: dict[str, Any],
    tc: TurnCounts,
) -> None:
    """Generate the ``conversations`` (one per store key of ``keys``, none in the store yet;
    ``messages`` their message lists), saving each batch to the store as the backend finishes
    it; adds their records to ``records`` and their keys and the backend's retries to ``tc``."""
    gen_requests = [
        GenRequest(
            k,  # the store key seeds this request's sampling
            m,
            int(c["max_new_tokens"]),
            _where(protocol, c),
        )
        for k, c, m in zip(keys, conversations, messages, strict=True)
    ]

    def persist(idx: list[int], results: list[GenResult]) -> None:
        done = [(keys[i], asdict(r)) for i, r in zip(idx, results, strict=True)]
        store.put_many("generation", done)

    results = backend.generate(gen_requests, sampling, persist)
    records.update({k: asdict(r) for k, r in zip(keys, results, strict=True)})
    tc.fresh = list(keys)
    # API backends count the retries of their last call per error kind; local ones make none.
    tc.retries = dict(getattr(backend, "retries", {}))


def _lineage(protocol: str, r: Request | Skipped, rep: int) -> dict[str, Any]:
    """Where a request or a skipped child belongs: the lineage columns."""
    return {
        "protocol": protocol,
        "dataset": r.dataset,
        "item_id": r.item_id,
        "cell": cell_key(r.cell),
        "rep": rep,
        "turn": r.turn,
        "parent_key": r.parent_key,
    }


def _response_rows(
    table: pd.DataFrame,
    asked: pd.DataFrame,
    keys: Sequence[str],
    records: Mapping[str, Mapping[str, Any]],
    model: str,
    role: str,
    who: Role,
) -> pd.DataFrame:
    """A turn's response rows (``RESPONSE_COLUMNS``) of one role: each request with its answer
    from ``records`` (requests missing there, when planning, are left out), then each skipped
    child, as ``table`` orders them. ``model`` is the model under study (whose conversations
    these are); the identity and sampling columns are those of who answered (``role``)."""
    identity, sampling = who.identity, who.sampling
    have = [k in records for k in keys]
    done = asked[have].reset_index(drop=True)
    found = [records[k] for k, h in zip(keys, have, strict=True) if h]
    replies = [split_reasoning(rec["text"]) for rec in found]
    # What every row of the turn shares, generated or skipped: the model and its settings.
    shared = {
        "role": role,
        "model": model,
        "model_id": identity["model_id"],
        "revision": identity["revision"],
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "seed": sampling.seed,
    }
    out = done.assign(
        store_key=[k for k, h in zip(keys, have, strict=True) if h],
        **shared,
        response=[r.answer for r in replies],
        reasoning=[r.reasoning for r in replies],
        prompt_tokens=[rec["prompt_tokens"] for rec in found],
        completion_tokens=[rec["completion_tokens"] for rec in found],
        finish_reason=[rec["finish_reason"] for rec in found],
    )
    skipped = table[table["skipped"] != ""].reset_index(drop=True)
    gone = skipped.assign(
        store_key="",
        **shared,
        response="",
        reasoning="",
        prompt_tokens=0,
        completion_tokens=0,
        finish_reason="",
    )
    return pd.concat([out, gone], ignore_index=True)[RESPONSE_COLUMNS]
