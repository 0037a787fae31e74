"""The contract between the core and a study design ("protocol"), owned by the core.

A protocol is one object, ``PROTOCOL`` in ``syps/protocols/<name>/__init__.py``: a
:class:`Protocol`, typed by its params and by the type it reads its items into
(``Protocol[EchoParams, list[EchoItem]]``), whose slots are plain functions. The core
(``syps.core.conversation``, ``syps.core.pipeline``) owns everything shared: the response store,
the backends, repetitions and their per-request seeds, the lineage columns, the judge, the
stages and MLflow. A protocol owns only what makes it that design, and writes exactly that:

- ``name`` and ``params_type`` (its frozen params dataclass);
- ``load_items``: its items as a table (``dataset, item_id, item``; ``item`` a JSON record),
  and ``read_items``: that table read into the protocol's own records, once per stage;
- ``requests``: the conversations of each turn;
- ``label``: a label record per response (value or UNCLEAR, with its evidence);
- ``score``: its metrics from the label table.

Every other slot has a default for a single-turn design (``turns``, ``template_specs``,
``lint``, ``auxiliary``), and what a protocol says about its results (figures, headline
metrics, tables, judges, traces, power) is one optional object, ``report``
(``syps.core.reporting.Reporting``). ``syps.core.rates`` makes the common label and metric
short.

The flow per (protocol, model), turn by turn (``turns`` rounds):

1. ``requests(params, items, turn, previous, judge)`` builds the requests of round ``turn`` from
   the items and the rows of earlier rounds (``previous``: the core's response rows; the
   protocol parses a parent's response itself where the child depends on it). A child whose
   parent failed or did not parse is not requested: it is returned as a :class:`Skipped` row
   naming why, and the core writes it to the responses table, so it is counted per cell, never
   dropped. The first turn is built once, by the ``variants`` stage, which lints it
   (``lint(params, items, conversations)``) and writes it; ``generate`` sends those bytes.
2. The core keys every request by model identity, generation settings, the full message list
   and the repetition index (``syps.core.store.generation_key``), serves what the store has,
   loads the model only for what it lacks, and stores each batch as it finishes.
3. ``label`` turns every response row into a label record; ``score`` turns the label table
   into metrics; ``report.figures`` draws them.

Before any of this, when params are loaded, the core checks every template text the protocol
declares in ``template_specs`` (``syps.core.templating.check_templates``): a placeholder nothing
fills, or one a template needs and lacks, stops the run with one line naming the params key.

A protocol never reads the study's params.yaml (it may read its own folder's, its defaults), never
touches the store or MLflow, and never imports torch.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic

import pandas as pd

from syps.core.io import canonical_json
from syps.core.report import CI_BOUNDS, Scores
from syps.core.reporting import I, P, Reporting
from syps.core.templating import TemplateSpec
from syps.core.verdicts import Judge as Judge
from syps.core.verdicts import JudgeLabel as JudgeLabel
from syps.core.verdicts import ScoreSettings as ScoreSettings

Message = dict[str, str]

# Who answers a request: the model under study (``target``) or the simulated user of a
# multi-turn design (``simulator``, the top-level ``simulator`` block of params.yaml), whose
# turns go through the response store keyed by the simulator's own identity and sampling.
TARGET, SIMULATOR = "target", "simulator"
ROLES = (TARGET, SIMULATOR)

# The columns the core writes to every response row (generate's table, syps.core.layout).
LINEAGE_COLUMNS = ["protocol", "dataset", "item_id", "cell", "rep", "turn", "parent_key"]
RESPONSE_COLUMNS = [
    *LINEAGE_COLUMNS,
    "role",  # TARGET, or SIMULATOR for a simulated user's turn (its model columns are its own)
    "store_key",  # "" for a skipped row
    "skipped",  # "" for a generated row; else why it was not requested
    "model",
    "model_id",
    "revision",
    "max_new_tokens",
    "temperature",
    "top_p",
    "seed",
    "messages",  # the full conversation sent, JSON: the bytes its key is taken over
    "prompt_sha256",  # sha256 of those bytes ("" for a skipped row)
    # The final answer: what labelers read and later turns replay (syps.core.reasoning).
    "response",
    # The reasoning block before it, verbatim ("" for none); never labelled, never replayed.
    "reasoning",
    "prompt_tokens",
    "completion_tokens",
    "finish_reason",
]
# The columns every label row has, besides ``model``, the lineage and the protocol's own columns.
LABEL_COLUMNS = ["label", "verdict", "evidence", "labeler", "labeler_sha256"]
# The conversations a stage sends, one row per request (or skipped child): the lineage, the
# answer length, the messages as the exact bytes sent and their hash, and why a child was not
# requested ("" for a request). ``variants@<p>`` writes the first turn's, linted.
CONVERSATION_COLUMNS = [
    *LINEAGE_COLUMNS,
    "max_new_tokens",
    "messages",
    "prompt_sha256",
    "skipped",
]


def cell_key(cell: Mapping[str, str]) -> str:
    """The ``cell`` column: the factor values as canonical JSON (sorted keys)."""
    return canonical_json({str(k): str(v) for k, v in cell.items()})


@dataclass(frozen=True)
class Request:
    """One conversation to complete.

    ``cell`` holds the factor values that define the condition; ``rep`` is the repetition
    (0 .. reps-1). When ``Protocol.fan_out_reps`` is true the core repeats every root request
    (``parent_key`` "") as reps 0 .. reps-1 and leaves a child's ``rep`` as the protocol set
    it: the rep of its parent, so that repetition r of a conversation continues repetition r
    of its first turn. When false, the protocol sets every ``rep`` itself. ``parent_key`` is
    the store key of the response this conversation continues, or that decided it (a
    preemptive objection's direction comes from an unpressured answer); "" on a first turn.
    ``max_new_tokens`` overrides the protocol's ``generation.max_new_tokens`` (the
    simulator's ``max_new_tokens`` for a simulator request) when set.

    ``role`` SIMULATOR sends the request to the simulated user (``simulator`` in params)
    instead of the model under study: its messages are the simulator's own request (its
    instructions and the conversation so far, as the protocol writes them), its answer the
    next user turn. A simulator request is never fanned out over repetitions: it keeps the
    ``rep`` the protocol gave it. The first turn is the target's alone (it is what the variants
    stage lints).
    """

    dataset: str
    item_id: str
    cell: Mapping[str, str]
    turn: int
    messages: Sequence[Message]
    rep: int = 0
    parent_key: str = ""
    max_new_tokens: int | None = None
    role: str = TARGET


@dataclass(frozen=True)
class Skipped:
    """A child not requested because of its parent (failed, cut off, or not parseable)."""

    dataset: str
    item_id: str
    cell: Mapping[str, str]
    turn: int
    reason: str
    rep: int = 0
    parent_key: str = ""
    role: str = TARGET


@dataclass(frozen=True)
class Turn:
    requests: list[Request]
    skipped: list[Skipped] = field(default_factory=list)


def one_turn(params: Any) -> int:
    """One round of requests."""
    return 1


def no_templates(params: Any, where: str) -> list[TemplateSpec]:
    """No template text to check."""
    return []


def placeholders_checked(params: Any, items: Any, conversations: pd.DataFrame) -> dict[str, Any]:
    """The templates' placeholders were checked when params were loaded; nothing more."""
    return {"conversations": len(conversations), "checks": ["template placeholders"]}


def no_auxiliary(params: Any, items: Any, judge: Judge) -> pd.DataFrame:
    """No model-independent data."""
    return pd.DataFrame()


@dataclass(frozen=True, kw_only=True)
class Protocol(Generic[P, I]):
    """A study design: its slots are functions (see the module docstring).

    - ``read_items(table)``: the items table (``load_items``' columns, as the fetch stage wrote
      it) read into the protocol's own records, which every other slot is handed as ``items``.
    - ``requests(params, items, turn, previous, judge)``: the requests of round ``turn``
      (1-based). ``previous`` holds the response rows (``RESPONSE_COLUMNS``) of rounds before
      ``turn`` for one model, skipped rows included. ``judge`` is there for a child that
      depends on a judged parent (a free-form answer's correctness); a rule-parsed parent needs
      none, and the first turn is built without one (the judge then refuses to be asked).
    - ``label(params, items, responses, judge, aux)``: one label row per response row: the
      lineage columns, ``model``, the protocol's own columns and ``LABEL_COLUMNS`` (``label``
      NaN when UNCLEAR or skipped; ``verdict`` then says which).
    - ``score(params, labels, settings)``: ``{model: {dataset: {metric key: value}}}`` from the
      label table of every model. Metric keys: ``<metric>`` or ``<metric>/<cell name>``, CIs as
      ``<key>_ci_low`` / ``<key>_ci_high``, support as ``<key>_n``; counts of skipped children
      per cell as ``n_skipped/<cell name>``.
    - ``turns(params)``: how many rounds of requests it makes.
    - ``template_specs(params, where)``: every template text the protocol sends, as
      ``syps.core.templating.TemplateSpec``: the text as it is rendered (the preset's where the
      user's key is null), the ``{name}`` placeholders its renderer cannot do without
      (``required``) and those it fills (``allowed``; empty for a text sent as is). ``where`` is
      the block's key path (``protocols.<name>``). The core refuses a bad template when params
      are loaded, before anything is generated.
    - ``lint(params, items, conversations)``: check the first turn's conversations (the
      ``CONVERSATION_COLUMNS`` table the variants stage writes and generate sends) before
      anything is generated; the report (JSON-able) when they pass. Raises
      ``syps.core.io.LintError`` (one line per violation) when they do not.
    - ``auxiliary(params, items, judge)``: model-independent data (e.g. argument ratings from
      pairwise judge comparisons) the label stage computes through the store and hands to
      ``label`` as ``aux``.
    - ``fan_out_reps``: whether the core repeats each root request ``generation.reps`` times
      (rep 0..R-1); when False the protocol sets ``Request.rep`` itself.
    - ``needs_sampling_for_reps``: refuse greedy decoding with reps > 1 (repetitions of a
      greedy request are identical, so there is no variance to measure).
    - ``uses_simulator``: its later turns give requests to the simulated user (``Request.role``
      SIMULATOR); the core then needs the top-level ``simulator`` block and refuses to run
      without it.
    - ``report``: how its results are shown, audited and planned
      (``syps.core.reporting.Reporting``).
    """

    name: str
    params_type: type[P]
    load_items: Callable[[P, Path, int], pd.DataFrame]
    read_items: Callable[[pd.DataFrame], I]
    requests: Callable[[P, I, int, pd.DataFrame, Judge], Turn]
    label: Callable[[P, I, pd.DataFrame, Judge, pd.DataFrame], pd.DataFrame]
    score: Callable[[P, pd.DataFrame, ScoreSettings], Scores]
    turns: Callable[[P], int] = one_turn
    template_specs: Callable[[P, str], list[TemplateSpec]] = no_templates
    lint: Callable[[P, I, pd.DataFrame], dict[str, Any]] = placeholders_checked
    auxiliary: Callable[[P, I, Judge], pd.DataFrame] = no_auxiliary
    fan_out_reps: bool = True
    needs_sampling_for_reps: bool = True
    uses_simulator: bool = False
    report: Reporting[P, I] = field(default_factory=Reporting)

    @property
    def run_prefix(self) -> str:
        """Child runs are named ``<run_prefix>/<model>/<dataset>`` (``<model>/<dataset>`` when
        empty): ``report.run_prefix``, the protocol's name unless it sets one."""
        prefix = self.report.run_prefix
        return self.name if prefix is None else prefix

    def templates(self, params: P) -> dict[str, Any]:
        """``report.templates``, or each of ``template_specs`` by its key below the block."""
        if self.report.templates is not None:
            return self.report.templates(params)
        where = f"protocols.{self.name}"
        return {s.key.removeprefix(f"{where}."): s.text for s in self.template_specs(params, where)}


class Registry(MutableMapping[str, "Protocol[Any, Any]"]):
    """The protocols by name, in the order listings show them: each entry the ``PROTOCOL`` of a
    package, imported when it is first looked up (a stage imports its own protocol alone, so
    the code it runs is the code dvc.yaml declares it depends on). A plain dict from name to
    package, with the import deferred; tests may set an entry to a protocol object."""

    def __init__(self, packages: Mapping[str, str]):
        self._entries: dict[str, str | Protocol[Any, Any]] = dict(packages)

    def __getitem__(self, name: str) -> Protocol[Any, Any]:
        entry = self._entries[name]
        if isinstance(entry, str):
            entry = importlib.import_module(entry).PROTOCOL
            self._entries[name] = entry
        return entry

    def __setitem__(self, name: str, protocol: Protocol[Any, Any]) -> None:
        self._entries[name] = protocol

    def __delitem__(self, name: str) -> None:
        del self._entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)


def protocol_order(names: Sequence[str]) -> Callable[[str], tuple[int, str]]:
    """A sort key over protocol names: the order of ``names`` (the registry's), unknown names
    after, by name."""
    rank = {n: i for i, n in enumerate(names)}
    return lambda name: (rank.get(name, len(rank)), name)


def headline_of(
    protocols: Mapping[str, Protocol[Any, Any]], name: str, logged: Iterable[str] = ()
) -> list[str]:
    """The metrics ``syps compare`` and ``syps audit`` show by default for ``name``'s child
    runs: the protocol's ``headline_metrics``, or, for a protocol this version does not know,
    every key in ``logged`` (the metrics its runs logged) but CI bounds, sorted."""
    if name in protocols:
        return [str(m) for m in protocols[name].report.headline_metrics]
    return sorted(k for k in set(logged) if not k.endswith(CI_BOUNDS))
