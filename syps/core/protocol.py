"""The contract between the core and a study design ("protocol"), owned by the core.

A protocol is one object, ``PROTOCOL`` in ``syps/protocols/<name>/__init__.py``, an instance of a
subclass of :class:`Protocol`. The core (``syps.core.conversation``, ``syps.core.pipeline``) owns
everything shared: the response store, the backends, repetitions and their per-request seeds,
the lineage columns, the judge, the stages and MLflow. A protocol owns only what makes it that
design: its items, the conversations of each turn, its labels, its metrics and figures, its lint.
The core imports no protocol: the stages are handed the protocol object by their entry points.

A design writes at most seven members: ``name``, ``params_type`` (the class it is typed by:
``Protocol[EchoParams]``), ``headline_metrics``, ``load_items``, ``requests``, ``label`` and
``score``. Every other hook has a default here that
does the expected thing for a single-turn design with no figures, and a design overrides only
what it has (``syps.core.rates`` makes the common label and metric short).

The flow per (protocol, model), turn by turn (``turns`` rounds):

1. ``requests(params, items, turn, previous, judge)`` builds the requests of round ``turn`` from
   the items and the rows of earlier rounds (``previous``: the core's response rows; the
   protocol parses a parent's response itself where the child depends on it). A child whose
   parent failed or did not parse is not requested: it is returned as a :class:`Skipped` row
   naming why, and the core writes it to the responses table, so it is counted per cell, never
   dropped.
2. The core keys every request by model identity, generation settings, the full message list
   and the repetition index (``syps.core.store.generation_key``), serves what the store has,
   loads the model only for what it lacks, and stores each batch as it finishes.
3. ``label`` turns every response row into a label record (value or UNCLEAR, with evidence);
   ``score`` turns the label table into metrics; ``figures`` draws them.

Before any of this, when params are loaded, the core checks every template text the protocol
declares in ``template_specs`` (``syps.core.templating.check_templates``): a placeholder nothing
fills, or one a template needs and lacks, stops the run with one line naming the params key.

A protocol never reads the study's params.yaml (it may read its own folder's, its defaults), never
touches the store or MLflow, and never imports torch.
"""

from __future__ import annotations

import json
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar
from typing import Protocol as TypingProtocol

import pandas as pd

from syps.core.config import ProtocolParams
from syps.core.io import canonical_json
from syps.core.report import CI_BOUNDS
from syps.core.report import Scores as Scores  # re-exported: what a score returns
from syps.core.templating import TemplateSpec

Message = dict[str, str]

# The columns the core writes to every response row (out/protocols/<p>/responses/<model>.parquet).
LINEAGE_COLUMNS = ["protocol", "dataset", "item_id", "cell", "rep", "turn", "parent_key"]
RESPONSE_COLUMNS = [
    *LINEAGE_COLUMNS,
    "store_key",  # "" for a skipped row
    "skipped",  # "" for a generated row; else why it was not requested
    "model",
    "model_id",
    "revision",
    "max_new_tokens",
    "temperature",
    "top_p",
    "seed",
    "messages",  # the full conversation sent, JSON
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


def item_values(items: pd.DataFrame, labels: pd.DataFrame, field: str) -> pd.Series:
    """Each label row's item's ``field`` (from the item record), as text ("" where the item
    has none), indexed like ``labels``."""
    value = {
        (d, i): str(json.loads(rec).get(field, "") or "")
        for d, i, rec in zip(items["dataset"], items["item_id"], items["item"], strict=True)
    }
    return pd.Series(
        [value.get((d, i), "") for d, i in zip(labels["dataset"], labels["item_id"], strict=True)],
        index=labels.index,
        dtype=object,
    )


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
    ``max_new_tokens`` overrides the protocol's ``generation.max_new_tokens`` when set.
    """

    dataset: str
    item_id: str
    cell: Mapping[str, str]
    turn: int
    messages: Sequence[Message]
    rep: int = 0
    parent_key: str = ""
    max_new_tokens: int | None = None


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


@dataclass(frozen=True)
class Turn:
    requests: list[Request]
    skipped: list[Skipped] = field(default_factory=list)


@dataclass(frozen=True)
class ScoreSettings:
    """The shared scoring settings (``score`` and ``seed`` in params) and what a score needs to
    know of each model: its own UNCLEAR threshold (``models.<name>.max_unclear``, None: the
    shared ``score.max_unclear``) and its size in parameters (None: unknown)."""

    bootstrap: int
    ci: float
    seed: int
    min_items: int
    max_unclear: float = 1.0
    model_max_unclear: Mapping[str, float | None] = field(default_factory=dict)
    model_sizes: Mapping[str, float | None] = field(default_factory=dict)

    def unclear_limit(self, model: str) -> float:
        """The UNCLEAR share a (model, dataset, cell) may have before the score stage fails."""
        own = self.model_max_unclear.get(model)
        return self.max_unclear if own is None else own


@dataclass(frozen=True)
class Drawn:
    """What a protocol's ``figures`` wrote: the PNGs its parent run logs, and per (model,
    dataset) the files its child run logs, each as (path, artifact folder; "" for the top)."""

    figures: list[Path]
    children: Mapping[tuple[str, str], list[tuple[Path, str]]] = field(default_factory=dict)


@dataclass(frozen=True)
class JudgeLabel:
    """A judge's verdict on one prompt: ``value`` is the option's label (1.0 or 0.0), NaN when
    UNCLEAR (the lead of the best option is below ``judge.min_margin``, or the judge chose an
    option the prompt maps to None, which its evidence says)."""

    value: float
    verdict: str
    evidence: str
    labeler: str
    labeler_sha256: str
    template_sha256: str


class Judge(TypingProtocol):
    """The shared LLM judge (``judge.model`` in params), through the response store.

    ``template`` is filled from each mapping in ``fields`` (every ``{name}`` must be given);
    the option with the highest next-token log-probability wins, UNCLEAR below
    ``judge.min_margin`` or where ``options`` maps it to None. A verdict is never computed
    twice for the same judge, template and prompt.
    """

    dry: bool
    """Planning (``syps plan``): a verdict missing from the store is counted, not asked for, and
    comes back UNCLEAR; a protocol may skip what it derives from verdicts only for its outputs
    (never what decides which requests are made)."""

    def __call__(
        self,
        system: str,
        template: str,
        options: Mapping[str, int | None],
        fields: Sequence[Mapping[str, str]],
        where: str,
        datasets: Sequence[str] | None = None,
    ) -> list[JudgeLabel]: ...


# A protocol's params type: a protocol class is ``Protocol[ItsParams]``, so that mypy checks each
# method with the protocol's own params type.
P = TypeVar("P", bound=ProtocolParams)


@dataclass(frozen=True)
class Scored:
    """What ``figures`` draws from: the scores (``{model: {dataset: {metric: value}}}``), the
    label table of every model, the items, the score settings, and the three folders it writes
    into: PNGs into ``figures`` (nothing else: the ``dvc plots`` page shows that folder), any
    other file a run logs (tables, HTML pages) under ``tables``, the figures' data (CSV/JSON for
    ``dvc plots``) into ``plots``."""

    scores: dict[str, dict[str, dict[str, float]]]
    labels: pd.DataFrame
    items: pd.DataFrame
    settings: ScoreSettings
    figures: Path
    tables: Path
    plots: Path


@dataclass(frozen=True)
class TableOption:
    """An option of ``syps score --protocol <name>``: its help, the type it is given as, and a
    converter applied to its value (None: passed as given)."""

    help: str
    type: type
    convert: Callable[[Any], Any] | None = None


@dataclass(frozen=True)
class TableScorer:
    """How ``syps score --protocol <name> TABLE`` reads and scores a table made elsewhere:
    ``columns`` documents the table; ``read(path)`` loads it (checking its columns);
    ``score(table, settings, source, **options)`` returns its metrics as the score stage does
    (``{model: {dataset: {metric: value}}}``; ``settings`` from the command line, ``source``
    the file, for errors); ``options`` are the protocol's own CLI options, by name."""

    columns: str
    read: Callable[[str], pd.DataFrame]
    score: Callable[..., Mapping[str, Any]]
    options: Mapping[str, TableOption] = field(default_factory=dict)


@dataclass(frozen=True)
class PowerContrast:
    """One headline contrast as ``syps plan`` plans its power (``syps.core.power``): the mean
    over items of an item-level paired difference, tested against 0 within a Holm ``family``
    (the contrasts the score stage adjusts together; the dataset's name where it adjusts
    none). ``n_items`` is the items the params will run; ``pilot`` the item-level differences
    (one per (model, item), repetitions and wordings averaged first, NaN where an item has
    none) that earlier labels give, None without labels; ``binary`` when every item's
    difference is -1, 0 or 1 (one binary label per condition: McNemar's case)."""

    dataset: str
    name: str
    n_items: int
    family: str
    pilot: Sequence[float] | None = None
    binary: bool = False


@dataclass(frozen=True)
class Reference:
    """A published check of a judge against people, printed beside ours for ``dataset``."""

    dataset: str
    who: str  # "the method paper's (GPT-4, 500 responses labelled by hand)"
    n: int
    agreement: float
    kappa: float
    unclear_rate: float
    short: str = "paper"  # how the printed line names it


@dataclass(frozen=True)
class JudgeSpec:
    """One labeller of a protocol as ``syps judge sample|validate`` measures it against
    people's labels (``syps.core.validation`` does the rest, the same for every judge).

    - ``name``: what ``--judge`` calls it; ``meaning``: what a person writes in
      ``human_label`` (1, 0 or UNCLEAR, and what 1 means).
    - ``key``: the label-table columns that name one labelled response (``model`` and
      ``dataset`` among them); ``strata``: the columns the sample is stratified by.
    - ``columns``: the sample's columns between ``sample_id`` and ``response``, in order: the
      key and what a person reads besides the response (the *context*: every column not in
      the key).
    - ``context(items, table)``: the context columns, indexed like ``table`` (label rows with
      their ``response``), None where the item is missing; ``items`` is the items table
      (``dataset, item_id, item``).
    - ``relabel(protocol, params, rows, judge)``: the labeller as configured now (``params``:
      the protocol's) on ``rows`` (the sample's columns, as text), in row order: ``label`` (1.0,
      0.0, NaN), ``labeler``, ``labeler_sha256`` and optionally ``judge_template_sha256``.
    - ``decides(table)``: which label rows the labeller decided (None: all); ``reads``: the
      label-table columns ``decides`` and ``context`` need beyond the key.
    - ``check(row)``: a sample row's own consistency (its context against its key), the
      error or None. ``datasets``: the datasets a row may name, in report order (empty: any).
    - ``reference``: a published check printed beside ours; ``traces``: whether a person's
      ``label`` on a trace is this labeller's label (so ``--traces`` can read it).
    """

    name: str
    meaning: str
    key: Sequence[str]
    columns: Sequence[str]
    strata: Sequence[str]
    context: Callable[[pd.DataFrame, pd.DataFrame], pd.DataFrame]
    relabel: Callable[[Protocol[Any], Any, pd.DataFrame, Judge], pd.DataFrame]
    decides: Callable[[pd.DataFrame], pd.Series] | None = None
    reads: Sequence[str] = ()
    check: Callable[[Mapping[str, str]], str | None] | None = None
    datasets: Sequence[str] = ()
    reference: Reference | None = None
    traces: bool = True

    def __post_init__(self) -> None:
        need = {"model", "dataset", *self.key, *self.strata}
        missing = sorted(need - set(self.columns))
        if missing or not {"model", "dataset"} <= set(self.key):
            raise ValueError(f"judge {self.name}: columns {list(self.columns)} lack {missing}")

    @property
    def shown(self) -> list[str]:
        """The context columns: what a person reads besides the response."""
        return [c for c in self.columns if c not in self.key]

    @property
    def sample_columns(self) -> list[str]:
        """The annotation CSV's columns, in order."""
        return ["sample_id", *self.columns, "response", "response_sha256", "human_label", "notes"]


class Protocol(Generic[P]):
    """A study design: subclass it, typed by its params
    (``class Betting(Protocol[BettingParams])``: that argument is its ``params_type``), set
    ``name`` and ``headline_metrics`` and write ``load_items``, ``requests``, ``label`` and
    ``score``; override any other member where the design has it."""

    name: str
    params_type: type[P]
    headline_metrics: Sequence[str]
    """The metrics `syps compare` shows by default for this protocol's runs."""
    fan_out_reps: bool = True
    """Whether the core repeats each root request ``generation.reps`` times (rep 0..R-1); when
    False the protocol sets ``Request.rep`` itself."""
    needs_sampling_for_reps: bool = True
    """Refuse greedy decoding with reps > 1: repetitions of a greedy request are identical, so
    there is no variance to measure."""
    run_metrics: Sequence[str] = ()
    """Which metrics a child run logs as MLflow metrics, beside the headline metrics with their
    CI bounds and support (``_ci_low``, ``_ci_high``, ``_n``, ``_low_support``) and the counts of
    what the stages did (``generated``, ...): patterns matched against the whole key
    (``fnmatch``: ``delta_P?``). Every metric, these included, is also in the child's metrics
    table (see :mod:`syps.core.runlayout`)."""
    table: TableScorer | None = None
    """How ``syps score --protocol <name>`` scores a table made elsewhere (None: it cannot)."""
    judges: Sequence[JudgeSpec] = ()
    """Its labellers that ``syps judge sample|validate`` measure against people's labels
    (``--judge <name>``; the first by default). Default: none."""
    trace_cells: Sequence[str] | None = None
    """The factors of a cell within which ``tracking.traces: sample`` draws
    (``syps.core.traces.choose``); None: the whole cell. A protocol whose cells name a part of
    an item (discernment's ``arg_id``) names its conditions here, or a sample would be every
    row."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """``params_type`` is the params class the subclass is typed by, unless it sets it."""
        super().__init_subclass__(**kwargs)
        if "params_type" in cls.__dict__:
            return
        for base in getattr(cls, "__orig_bases__", ()):
            args = typing.get_args(base)
            if typing.get_origin(base) is Protocol and args and isinstance(args[0], type):
                cls.params_type = args[0]

    @property
    def run_prefix(self) -> str:
        """Child runs are named ``<run_prefix>/<model>/<dataset>`` (``<model>/<dataset>`` when
        empty): the protocol's name."""
        return self.name

    # What a design must write.

    def load_items(self, params: P, root: Path, seed: int) -> pd.DataFrame:
        """The items: columns ``dataset, item_id, item`` (``item``: the record as JSON), one
        row per item, in a stable order. Paths in params are relative to ``root``."""
        raise NotImplementedError(f"{type(self).__name__}.load_items")

    def requests(
        self, params: P, items: pd.DataFrame, turn: int, previous: pd.DataFrame, judge: Judge
    ) -> Turn:
        """The requests of round ``turn`` (1-based). ``previous`` holds the response rows
        (``RESPONSE_COLUMNS``) of rounds before ``turn`` for one model, skipped rows included.
        ``judge`` is there for a child that depends on a judged parent (a free-form answer's
        correctness); a rule-parsed parent needs none."""
        raise NotImplementedError(f"{type(self).__name__}.requests")

    def label(
        self,
        params: P,
        items: pd.DataFrame,
        responses: pd.DataFrame,
        judge: Judge,
        aux: pd.DataFrame,
    ) -> pd.DataFrame:
        """One label row per response row: the lineage columns, ``model``, the protocol's own
        columns and ``LABEL_COLUMNS`` (``label`` NaN when UNCLEAR or skipped; ``verdict`` then
        says which)."""
        raise NotImplementedError(f"{type(self).__name__}.label")

    def score(
        self, params: P, labels: pd.DataFrame, settings: ScoreSettings
    ) -> dict[str, dict[str, dict[str, float]]]:
        """``{model: {dataset: {metric key: value}}}`` from the label table of every model.
        Metric keys: ``<metric>`` or ``<metric>/<cell name>``, CIs as ``<key>_ci_low`` /
        ``<key>_ci_high``, support as ``<key>_n``; counts of skipped children per cell as
        ``n_skipped/<cell name>``."""
        raise NotImplementedError(f"{type(self).__name__}.score")

    # Hooks with a default.

    def turns(self, params: P) -> int:
        """How many rounds of requests it makes under ``params``: one."""
        return 1

    def template_specs(self, params: P, where: str) -> list[TemplateSpec]:
        """Every template text the protocol sends, as ``syps.core.templating.TemplateSpec``: the
        text as it is rendered (the preset's where the user's key is null), the ``{name}``
        placeholders its renderer cannot do without (``required``) and those it fills
        (``allowed``; empty for a text sent as is). ``where`` is the block's key path
        (``protocols.<name>``), so each spec's ``key`` is the full path of the user's key. The
        core refuses a bad template (``check_templates``) when params are loaded, before
        anything is generated. Default: none."""
        return []

    def templates(self, params: P) -> dict[str, Any]:
        """Every template as it is rendered, placeholders marking where an item goes: the
        artifact an audit reads (``protocols/<name>/templates.json`` in MLflow). Default: each
        of ``template_specs`` by its key below the block."""
        where = f"protocols.{self.name}"
        return {s.key.removeprefix(f"{where}."): s.text for s in self.template_specs(params, where)}

    def lint(self, params: P, items: pd.DataFrame) -> dict[str, Any]:
        """Check the conversations before anything is generated; the report (JSON-able) when
        they pass. Raises ``syps.core.io.LintError`` (one line per violation) when they do not.
        Default: the templates' placeholders were checked when params were loaded; the report
        counts the items."""
        return {"protocol": self.name, "items": len(items), "checks": ["template placeholders"]}

    def auxiliary(self, params: P, items: pd.DataFrame, judge: Judge) -> pd.DataFrame:
        """Model-independent data (e.g. argument ratings from pairwise judge comparisons) the
        label stage computes through the store and hands to ``label``. Default: none."""
        return pd.DataFrame()

    def figures(self, params: P, scored: Scored) -> Drawn:
        """Write the figures (see :class:`Scored` for the folders); what was written for the
        parent run and for each child. Default: none."""
        return Drawn([])

    def run_tags(self, params: P) -> dict[str, str]:
        """Tags for the pipeline run that say which texts produced the numbers beyond the
        template set's hash (e.g. each variant's template sha256). Default: none."""
        return {}

    def review(self, params: P, items: pd.DataFrame, labels: pd.DataFrame) -> pd.DataFrame:
        """What a reader of the traces needs beyond the label record (``syps.core.traces``),
        indexed like ``labels`` (one model's label table): ``flagged``, a row every trace
        sample keeps (a flip, a cave), and ``expected``, the answer the protocol counts as
        right ("" where it has none). Default: nothing flagged, nothing expected."""
        return pd.DataFrame({"flagged": False, "expected": ""}, index=labels.index)

    def summary(self, scores: dict[str, dict[str, dict[str, float]]], ci: float) -> str | None:
        """The table ``syps summary`` and the score stage print of ``scores`` (CIs at ``ci``).
        Default: none."""
        return None

    def link_traces(
        self, artifacts: Sequence[Path | tuple[Path, str]], traces: pd.DataFrame, out: Path
    ) -> list[Path | tuple[Path, str]]:
        """A child run's ``artifacts`` (from ``Drawn.children``, a ``(path, folder)`` pair
        where the folder is not the top) as that run logs them once its conversations are
        traces: ``traces`` is its trace index (``syps.core.traces.TRACE_INDEX_COLUMNS``, all
        text). A table that lists conversations is written again under ``out`` with each
        row's trace id and logged in its place; the files in the pipeline's outputs stay as
        they are (a trace id is a fact of one run). Default: the artifacts as they are."""
        return list(artifacts)

    def power_contrasts(
        self, params: P, items: pd.DataFrame, labels: pd.DataFrame | None
    ) -> list[PowerContrast]:
        """The headline contrasts ``syps plan`` prints the power of, for the ``items`` the
        params will run, with each one's item-level differences in ``labels`` (every model's
        label tables of an earlier run, concatenated; None where there are none). Default:
        none."""
        return []

    def metric_cells(self, key: str) -> list[dict[str, str]] | None:
        """The cells a child's metric ``key`` is computed from, each as the factor values a
        trace's cell must have (``[{"variant": "P0"}, {"variant": "P3"}]`` for SyPS's
        ``delta_P3``), so ``syps audit --metric`` lists the traces behind it. Default (None):
        every cell of the child."""
        return None


def protocol_order(names: Sequence[str]) -> Callable[[str], tuple[int, str]]:
    """A sort key over protocol names: the order of ``names`` (the registry's), unknown names
    after, by name."""
    rank = {n: i for i, n in enumerate(names)}
    return lambda name: (rank.get(name, len(rank)), name)


def headline_of(
    protocols: Mapping[str, Protocol[Any]], name: str, logged: Iterable[str] = ()
) -> list[str]:
    """The metrics ``syps compare`` and ``syps audit`` show by default for ``name``'s child
    runs: the protocol's ``headline_metrics``, or, for a protocol this version does not know,
    every key in ``logged`` (the metrics its runs logged) but CI bounds, sorted."""
    if name in protocols:
        return [str(m) for m in protocols[name].headline_metrics]
    return sorted(k for k in set(logged) if not k.endswith(CI_BOUNDS))
