"""``syps plan``: what a ``dvc repro`` would send, and what it would cost, before it sends anything.

Per stage, model and protocol: the requests the stage makes, how many the response store
already holds, how many would be sent, the input tokens of those (counted with the model's own
tokenizer and chat template for hf models, loaded without weights; estimated for API models,
see :func:`estimate_tokens`), their output tokens (an upper bound: ``max_new_tokens`` each; one
token per judge verdict) and, where ``models.<name>.price`` (``judge.model.price`` for the
judge) is set, the cost at that price.

Nothing is generated, no weights are loaded, and no server is asked. Later turns of a
conversation protocol depend on answers that may not exist yet: the plan counts the children
of the answers that are in the store and says how many answers it could not see (their
children are known only once they exist), so the counts of such a turn are a lower bound.
Likewise a judge verdict on an answer not generated yet cannot be known: a label row whose
stage has such answers says how many (its counts are then a lower bound).

A (protocol, model) whose generate and label stages DVC holds up to date (``dvc.lock``'s hashes
match their dependencies and params: :class:`Held`) is not rebuilt: ``dvc repro`` runs neither,
so nothing of it would be sent, and its requests are read from what those stages wrote (the
distinct store keys of each turn's answered rows, the label rows the judge gave). Rebuilding
every conversation to find it all in the store cost the plan 86.6 s at the papers' scale.
"""

from __future__ import annotations

import math
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from syps.core.backends import model_identity
from syps.core.backends.hf_resolve import resolve
from syps.core.config import LOCAL_BACKENDS, JudgeParams, ModelSpec, Params
from syps.core.conversation import converse, simulator_role
from syps.core.io import canonical_json, read_parquet
from syps.core.judge import StoreJudge
from syps.core.layout import Layout
from syps.core.params import Protocols
from syps.core.power import ALPHA, POWER, Design, items_needed, mde, second_moment
from syps.core.protocol import TARGET
from syps.core.stores import ResponseStore

Messages = list[dict[str, str]]

# OpenAI's rule of thumb for English text: about 4 characters per token; each message adds a
# few tokens of chat framing (role markers), 4 here, and the reply's start 2 more.
CHARS_PER_TOKEN = 4
TOKENS_PER_MESSAGE = 4
TOKENS_PER_REPLY = 2


def estimate_tokens(messages: Sequence[dict[str, str]]) -> int:
    """Input tokens of a chat prompt when the model's tokenizer is not at hand (API models)."""
    text = sum(math.ceil(len(m["content"]) / CHARS_PER_TOKEN) for m in messages)
    return text + TOKENS_PER_MESSAGE * len(messages) + TOKENS_PER_REPLY


@dataclass(frozen=True)
class PlanRow:
    stage: str
    protocol: str
    model: str
    requests: int
    in_store: int
    to_send: int
    input_tokens: int  # of the requests to send
    output_tokens: int  # upper bound: max_new_tokens each (1 per judge verdict)
    cost: float | None  # USD at the model's price; None when no price is set
    note: str = ""


def token_counter(spec: ModelSpec, cache_dir: Path) -> tuple[Callable[[Messages], int], bool]:
    """A prompt-token counter for ``spec`` and whether it is exact.

    hf, vllm: the model's tokenizer and chat template (``ChatEncoder``, as generation encodes), read
    from the local files or the GGUF's metadata, never the weights. API models: the estimate.
    """
    if spec.backend not in LOCAL_BACKENDS:
        return estimate_tokens, False
    # heavy: transformers (and torch, which syps.core.backends.hf imports) only for hf/vllm specs
    from transformers import AutoTokenizer

    from syps.core.backends.hf import ChatEncoder

    resolved = resolve(spec, cache_dir)
    if resolved.gguf:
        gguf = Path(resolved.source)
        tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    else:
        kwargs = {"revision": resolved.hf_revision} if resolved.hf_revision else {}
        tok = AutoTokenizer.from_pretrained(resolved.source, **kwargs)
    encoder = ChatEncoder(tok)
    return (lambda messages: len(encoder.encode(messages))), True


def cost(spec: ModelSpec, input_tokens: int, output_tokens: int) -> float | None:
    if spec.price is None:
        return None
    return (input_tokens * spec.price.input + output_tokens * spec.price.output) / 1e6


class _Counters:
    """One token counter per model spec, made on first use."""

    def __init__(self, cache_dir: Path):
        self.cache_dir = cache_dir
        self._made: dict[str, tuple[Callable[[Messages], int], bool]] = {}

    def __call__(self, spec: ModelSpec) -> tuple[Callable[[Messages], int], bool]:
        key = repr(spec)
        if key not in self._made:
            self._made[key] = token_counter(spec, self.cache_dir)
        return self._made[key]


def _row(
    counters: _Counters,
    spec: ModelSpec,
    stage: str,
    protocol: str,
    model: str,
    requests: int,
    pending: Sequence[tuple[Messages, int]],
    note: str = "",
) -> PlanRow:
    count, exact = counters(spec)
    n_in = sum(count(m) for m, _ in pending)
    n_out = sum(n for _, n in pending)
    if pending and not exact:
        note = "; ".join(filter(None, [note, "input tokens estimated (4 characters a token)"]))
    return PlanRow(
        stage,
        protocol,
        model,
        requests,
        requests - len(pending),
        len(pending),
        n_in,
        n_out,
        cost(spec, n_in, n_out),
        note,
    )


HELD_NOTE = "up to date in dvc.lock: dvc repro runs neither stage (counted from their tables)"
# The label table keeps no verdict key: its judged rows count a verdict two rows share twice.
HELD_LABEL_NOTE = "up to date in dvc.lock: dvc repro runs neither stage (rows the judge labelled)"


@dataclass(frozen=True)
class Held:
    """The stages DVC holds up to date (by name, ``generate@cues-<model>``) and the layout
    their outputs lie in."""

    stages: frozenset[str]
    layout: Layout

    def rows(
        self, name: str, model: str, spec: ModelSpec, sim_spec: ModelSpec, judge: ModelSpec
    ) -> list[PlanRow] | None:
        """The plan's rows of ``model`` under protocol ``name`` from its generate and label
        stages' tables, when DVC holds both up to date and both tables read; else None (the
        plan rebuilds them)."""
        if not {f"generate@{name}-{model}", f"label@{name}-{model}"} <= self.stages:
            return None
        try:
            sent = pd.read_parquet(
                self.layout.table(name, "generate", model),
                columns=["turn", "role", "store_key", "skipped"],
            )
            labelers = pd.read_parquet(self.layout.table(name, "label", model), columns=["labeler"])
        except (OSError, ValueError, KeyError):  # missing or unreadable: rebuild instead
            return None
        sent = sent[sent["skipped"] == ""]
        out = []
        for (turn, role), g in sent.groupby(["turn", "role"], sort=True):
            who, by = (spec, "") if role == TARGET else (sim_spec, " (simulator)")
            stage = f"generate@{name}-{model} turn {turn}{by}"
            n = int(g["store_key"].nunique())
            out.append(PlanRow(stage, name, model, n, n, 0, 0, 0, cost(who, 0, 0), HELD_NOTE))
        n = int(labelers["labeler"].astype(str).str.startswith("judge:").sum())
        if n:
            out.append(
                PlanRow(f"label@{name}-{model}", name, "judge", n, n, 0, 0, 0, cost(judge, 0, 0),
                        HELD_LABEL_NOTE)
            )  # fmt: skip
        return out


def held_stages(params: Path) -> Held | None:
    """The stages DVC holds up to date, asked of DVC (``dvc status``: the hashes of each stage's
    dependencies and params against dvc.lock), with none of the stages upstream of them stale
    (a stale upstream stage reruns first and may change what they read), when ``params`` is the
    study's own params.yaml in the working directory's DVC project; else None (another params
    file: dvc.lock says nothing of it)."""
    root = Path.cwd()
    if not (root / "dvc.yaml").is_file() or params.resolve() != (root / "params.yaml").resolve():
        return None
    # heavy: DVC, only for a plan of the study itself
    from dvc.exceptions import DvcException
    from dvc.repo import Repo

    try:
        with Repo(str(root)) as repo:
            stale = set(repo.status())
            graph = repo.index.graph  # an edge from each stage to a stage it depends on
            held = {s.addressing for s in graph.nodes if not _upstream(graph, s) & stale}
    except DvcException as e:  # not a DVC project, its lock held by a running repro, ...
        print(f"syps plan: dvc status failed ({e}); every request rebuilt", file=sys.stderr)
        return None
    return Held(frozenset(held), Layout.of(root))


def _upstream(graph: Any, stage: Any) -> set[str]:
    """The names of ``stage`` and of every stage it depends on, directly or not, in DVC's stage
    graph."""
    seen, todo = {stage}, [stage]
    while todo:
        for up in graph.successors(todo.pop()):
            if up not in seen:
                seen.add(up)
                todo.append(up)
    return {s.addressing for s in seen}


def plan(
    p: Params,
    protocols: Protocols,
    root: Path,
    store: ResponseStore,
    cache_dir: Path,
    held: Held | None = None,
) -> list[PlanRow]:
    """Every request the pipeline under ``p`` would make, against ``store``: per enabled
    protocol, its model-independent judge verdicts, then per model each turn's generations and
    the label stage's verdicts; a model whose stages ``held`` holds up to date is read from
    their tables instead (and where every model is, the protocol's model-independent verdicts
    are not counted: its label stages send none)."""

    counters = _Counters(cache_dir)
    rows: list[PlanRow] = []
    sims = {m: p.simulator.model if p.simulator else s for m, s in p.models.items()}
    for name, pp in p.protocols.items():
        if not pp.enabled:
            continue
        proto = protocols[name]
        read = {
            m: held.rows(name, m, spec, sims[m], p.judge.model) if held else None
            for m, spec in p.models.items()
        }
        if all(r is not None for r in read.values()):
            rows += [r for model_rows in read.values() for r in model_rows or []]
            continue
        items = proto.read_items(proto.load_items(pp, root, p.seed))
        judge = StoreJudge(p.judge, store, cache_dir, dry=True)
        aux = proto.auxiliary(pp, items, judge)
        rows.append(_judge_row(counters, p.judge, f"label@{name} (all models)", name, judge))
        step = _Step(p, counters, store, cache_dir, name, proto, pp, items, aux)
        for model, spec in p.models.items():
            found = read[model]
            rows += found if found is not None else step.rebuilt(model, spec, sims[model])
    # A stage with nothing known yet is kept when it says why (answers not generated yet).
    return [r for r in rows if r.requests or r.note]


@dataclass(frozen=True)
class _Step:
    """One protocol's plan: what rebuilding a model's requests needs."""

    p: Params
    counters: _Counters
    store: ResponseStore
    cache_dir: Path
    name: str
    proto: Any
    pp: Any
    items: Any
    aux: Any

    def rebuilt(self, model: str, spec: ModelSpec, sim_spec: ModelSpec) -> list[PlanRow]:
        """``model``'s rows: its conversations built as the generate stage builds them, each
        request looked up in the store, and the labeler run with a judge that only counts."""
        p, name, store, cache_dir = self.p, self.name, self.store, self.cache_dir
        identity = model_identity(spec, cache_dir, f"models.{model}")
        gate = StoreJudge(p.judge, store, cache_dir, dry=True)
        simulator = (
            simulator_role(p.simulator, p.seed, cache_dir, None)
            if self.proto.uses_simulator
            else None
        )
        responses, counts = converse(
            self.proto,
            self.pp,
            self.items,
            model=model,
            identity=identity,
            seed=p.seed,
            store=store,
            backend=None,
            judge=gate,
            simulator=simulator,
        )
        rows, unseen = [], 0
        for (turn, role), c in counts.items():
            note = f"lower bound: {unseen} earlier answers not generated yet" if unseen else ""
            # The simulated user's calls are a row of their own, at the simulator's price.
            who, by = (spec, "") if role == TARGET else (sim_spec, " (simulator)")
            stage = f"generate@{name}-{model} turn {turn}{by}"
            rows.append(_row(self.counters, who, stage, name, model, c.distinct, c.pending, note))
            unseen += c.unknown_parents
        labeler = StoreJudge(p.judge, store, cache_dir, dry=True)
        self.proto.label(self.pp, self.items, responses, labeler, self.aux)
        labeler.pending += gate.pending
        labeler.seen |= gate.seen
        row = _judge_row(self.counters, p.judge, f"label@{name}-{model}", name, labeler)
        if unseen:
            # Verdicts on answers not generated yet are known only once they exist.
            note = f"lower bound where labels use the judge: {unseen} answers not generated yet"
            row = PlanRow(**{**row.__dict__, "note": note})
        return [*rows, row]


def _judge_row(
    counters: _Counters, judge: JudgeParams, stage: str, protocol: str, j: Any
) -> PlanRow:
    """The judge's row of a protocol step: verdicts asked, and those missing from the store
    (each counted once, however many steps would ask for it)."""

    pending = {canonical_json(m): m for m in j.pending}
    n = len(j.seen)  # distinct verdicts: one asked for twice is sent once
    return _row(
        counters, judge.model, stage, protocol, "judge", n, [(m, 1) for m in pending.values()]
    )


def render(rows: Sequence[PlanRow]) -> str:
    """The plan as a table, with totals."""
    if not rows:
        return "nothing to plan"
    df = pd.DataFrame([r.__dict__ for r in rows])
    total = {
        "stage": "total",
        "protocol": "",
        "model": "",
        **{
            c: int(df[c].sum())
            for c in ("requests", "in_store", "to_send", "input_tokens", "output_tokens")
        },
        "cost": df["cost"].sum() if df["cost"].notna().any() else None,
        "note": "",
    }
    df = pd.concat([df, pd.DataFrame([total])], ignore_index=True)
    df["cost"] = [f"${c:,.4f}" if c is not None and c == c else "-" for c in df["cost"]]
    return str(df.to_string(index=False))


# --- power before the run (``syps.core.power``) ------------------------------------------------

# Without labels to learn from, the second moment E[d²] of the item-level difference assumed
# (the discordant share for a binary label per condition); ``syps plan --discordance`` sets it.
PRIOR_DISCORDANCE = 0.3
POWER_COLUMNS = [
    "protocol",
    "dataset",
    "contrast",
    "items",
    "family",
    "alpha_each",
    "psi",
    "psi_from",
    "mde",
]


def pilot_labels(root: Path, name: str, models: Sequence[str]) -> tuple[pd.DataFrame | None, str]:
    """Every model's label table of an earlier run of protocol ``name`` in the study at
    ``root`` (its layout's label tables, those that exist), concatenated, and the files it read
    (for the plan to say where its pilot came from); None and "" without any."""
    paths = [Layout.of(root).table(name, "label", m) for m in models]
    found = [x for x in paths if x.is_file()]
    if not found:
        return None, ""
    tables = [read_parquet(x) for x in found]
    where = ", ".join(str(x.relative_to(root)) for x in found)
    return pd.concat(tables, ignore_index=True), where


def power_plan(
    p: Params,
    protocols: Protocols,
    root: Path,
    *,
    alpha: float = ALPHA,
    power: float = POWER,
    prior: float = PRIOR_DISCORDANCE,
    effect: float | None = None,
) -> pd.DataFrame:
    """``POWER_COLUMNS`` per headline contrast of every enabled protocol
    (``Protocol.power_contrasts``): the items the params run, the Holm family's size and the
    level each contrast is planned at (α/m), the second moment ψ of the item-level difference
    and where it came from (the pilot's labels where at least ``score.min_items`` items give a
    positive one, else ``prior``),
    and the minimum detectable effect at ``power``; with ``effect``, also ``items_needed``
    for it."""
    rows = []
    for name, pp in p.protocols.items():
        if not pp.enabled:
            continue
        proto = protocols[name]
        items = proto.read_items(proto.load_items(pp, root, p.seed))
        labels, files = pilot_labels(root, name, list(p.models))
        contrasts = proto.report.power_contrasts(pp, items, labels)
        family = Counter(c.family for c in contrasts)
        for c in contrasts:
            design = Design(alpha, power, family[c.family])
            pilot = np.asarray(c.pilot if c.pilot is not None else [], float)
            used = int(np.isfinite(pilot).sum())
            psi = second_moment(pilot)
            least = p.score.min_items
            if c.pilot is not None and used >= least and psi > 0:
                source = f"pilot: {used} items of {files}"
            else:
                if c.pilot is None:
                    why = "no labels"
                elif used < least:
                    why = f"pilot: {used} items < score.min_items {least}"
                else:
                    why = f"pilot: ψ 0 on {used} items"
                psi, source = prior, f"prior --discordance ({why})"
            row = {
                "protocol": name,
                "dataset": c.dataset,
                "contrast": c.name,
                "items": c.n_items,
                "family": family[c.family],
                "alpha_each": alpha / family[c.family],
                "psi": psi,
                "psi_from": source,
                "mde": float(mde(c.n_items, psi, design, binary=c.binary)),
            }
            if effect is not None:
                row["items_needed"] = float(items_needed(psi, effect, design, binary=c.binary))
            rows.append(row)
    columns = [*POWER_COLUMNS, *(["items_needed"] if effect is not None else [])]
    return pd.DataFrame(rows, columns=columns)


def render_power(table: pd.DataFrame, power: float, effect: float | None) -> str:
    """The power table with a line that says what it assumed."""
    if table.empty:
        return "no headline contrasts to plan (no enabled protocol declares any)"
    head = (
        f"power {power:g}, two-sided, a Holm family of m contrasts planned at alpha/m; items are "
        "the unit; mde: the smallest mean item-level difference detectable at the items run "
        "(none: no effect the discordance allows is); psi: E[d^2] of that difference "
        "(for one binary label per condition, the share of discordant items)"
    )
    if effect is not None:
        head += f"; items_needed: for an effect of {effect:g}"
    df = table.copy()
    for c in ("alpha_each", "psi", "mde"):
        df[c] = [f"{v:.4g}" if v == v else "none" for v in df[c]]
    if "items_needed" in df:
        df["items_needed"] = [f"{v:.0f}" if v == v else "none" for v in df["items_needed"]]
    return head + "\n" + str(df.to_string(index=False))
