"""How a design's results are shown, audited and planned: the optional half of the contract.

A protocol (``syps.core.protocol.Protocol``) writes what makes it a design (its items, the
requests of each turn, a label per response, its scores); everything else it may say about its
results lives in one :class:`Reporting` object, ``Protocol.report``, whose every field has a
default that does the expected thing for a design with no figures, no tables and nothing to
flag. The core's readers (the score and mlflow stages, ``syps compare``, ``syps audit``, ``syps
plan``, ``syps judge``, ``syps score``) read it; a protocol sets only the fields it has.

The types the hooks speak in live here too: what ``figures`` is handed (:class:`Scored`) and
returns (:class:`Drawn`), how ``syps score`` reads a table made elsewhere (:class:`TableScorer`),
a headline contrast to plan (:class:`PowerContrast`) and a labeller to validate
(:class:`JudgeSpec`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

import pandas as pd

from syps.core.config import ProtocolParams
from syps.core.report import Scores
from syps.core.verdicts import Judge, JudgeLabel, ScoreSettings

# A protocol's params type and the type its items are read into (``Protocol.read_items``):
# ``Protocol[CuesParams, pd.DataFrame]``, so that mypy checks every hook with the protocol's own.
P = TypeVar("P", bound=ProtocolParams)
I = TypeVar("I")  # noqa: E741 (the items, as the type parameters of the contract read)

Artifact = Path | tuple[Path, str]


@dataclass(frozen=True)
class Drawn:
    """What a protocol's ``figures`` wrote: the PNGs its parent run logs, and per (model,
    dataset) the files its child run logs, each as (path, artifact folder; "" for the top)."""

    figures: list[Path]
    children: Mapping[tuple[str, str], list[tuple[Path, str]]] = field(default_factory=dict)


@dataclass(frozen=True)
class Scored(Generic[I]):
    """What ``figures`` draws from: the scores (``{model: {dataset: {metric: value}}}``), the
    label table of every model, the items (as ``Protocol.read_items`` reads them), the score
    settings, and the three folders it writes into: PNGs into ``figures`` (nothing else: the
    ``dvc plots`` page shows that folder), any other file a run logs (tables, HTML pages) under
    ``tables``, the figures' data (CSV/JSON for ``dvc plots``) into ``plots``."""

    scores: Scores
    labels: pd.DataFrame
    items: I
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
    # (protocol, params, rows, judge): the protocol is the Protocol this spec belongs to, typed
    # Any here because the contract's module imports this one.
    relabel: Callable[[Any, Any, pd.DataFrame, Judge], pd.DataFrame]
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


def relabeled(found: Sequence[JudgeLabel]) -> pd.DataFrame:
    """Judge labels as the columns a ``JudgeSpec.relabel`` returns, in order."""
    return pd.DataFrame(
        {
            "label": [j.value for j in found],
            "labeler": [j.labeler for j in found],
            "labeler_sha256": [j.labeler_sha256 for j in found],
            "judge_template_sha256": [j.template_sha256 for j in found],
        }
    )


# The defaults of the hooks: what a design without figures, tags, flags or plans gets.


def no_figures(params: Any, scored: Scored[Any]) -> Drawn:
    """No figures."""
    return Drawn([])


def no_tags(params: Any) -> dict[str, str]:
    """No run tags beyond the template set's hash."""
    return {}


def nothing_flagged(params: Any, items: Any, labels: pd.DataFrame) -> pd.DataFrame:
    """Nothing flagged, nothing expected."""
    return pd.DataFrame({"flagged": False, "expected": ""}, index=labels.index)


def no_summary(scores: Scores, ci: float) -> str | None:
    """No summary table."""
    return None


def as_they_are(artifacts: Sequence[Artifact], traces: pd.DataFrame, out: Path) -> list[Artifact]:
    """A child's artifacts as they are."""
    return list(artifacts)


def no_contrasts(params: Any, items: Any, labels: pd.DataFrame | None) -> list[PowerContrast]:
    """No headline contrast to plan."""
    return []


def every_cell(key: str) -> list[dict[str, str]] | None:
    """Every cell of the child behind any metric."""
    return None


@dataclass(frozen=True, kw_only=True)
class Reporting(Generic[P, I]):
    """How a protocol's results are shown, audited and planned; every field has a default.

    - ``headline_metrics``: what ``syps compare`` and ``syps audit`` show by default for its
      runs, and the DVC metrics file (``metrics/summary/<p>.json``) holds with their CIs.
    - ``run_metrics``: which metrics a child run logs as MLflow metrics, beside the headline
      metrics with their companions (``_ci_low``, ``_ci_high``, ``_n``, ``_low_support``) and
      the counts of what the stages did: patterns matched against the whole key (``fnmatch``:
      ``delta_P?``). Every metric, these included, is in the child's metrics table
      (``syps.core.runlayout``).
    - ``run_prefix``: child runs are named ``<run_prefix>/<model>/<dataset>``
      (``<model>/<dataset>`` when empty); None: the protocol's name.
    - ``table``: how ``syps score --protocol <name>`` scores a table made elsewhere (None: it
      cannot).
    - ``judges``: its labellers that ``syps judge sample|validate`` measure against people's
      labels (``--judge <name>``; the first by default).
    - ``trace_cells``: the factors of a cell within which ``tracking.traces: sample`` draws
      (``syps.core.traces.choose``); None: the whole cell. A protocol whose cells name a part
      of an item (discernment's ``arg_id``) names its conditions here, or a sample would be
      every row.
    - ``figures(params, scored)``: write the figures (see :class:`Scored` for the folders);
      what was written for the parent run and for each child.
    - ``templates(params)``: every template as it is rendered, placeholders marking where an
      item goes: the artifact an audit reads (``protocols/<name>/templates.json`` in MLflow).
      None: each of ``Protocol.template_specs`` by its key below the block.
    - ``run_tags(params)``: tags for the pipeline run that say which texts produced the
      numbers beyond the template set's hash (e.g. each variant's template sha256).
    - ``review(params, items, labels)``: what a reader of the traces needs beyond the label
      record (``syps.core.traces``), indexed like ``labels`` (one model's label table):
      ``flagged``, a row every trace sample keeps (a flip, a cave), and ``expected``, the
      answer the protocol counts as right ("" where it has none).
    - ``summary(scores, ci)``: the table ``syps summary`` and the score stage print.
    - ``link_traces(artifacts, traces, out)``: a child run's ``artifacts`` (from
      ``Drawn.children``) as that run logs them once its conversations are traces: ``traces``
      is its trace index (``syps.core.traces.TRACE_INDEX_COLUMNS``, all text). A table that
      lists conversations is written again under ``out`` with each row's trace id and logged
      in its place; the files in the pipeline's outputs stay as they are (a trace id is a fact
      of one run).
    - ``power_contrasts(params, items, labels)``: the headline contrasts ``syps plan`` prints
      the power of, for the ``items`` the params will run, with each one's item-level
      differences in ``labels`` (every model's label tables of an earlier run, concatenated;
      None where there are none).
    - ``metric_cells(key)``: the cells a child's metric ``key`` is computed from, each as the
      factor values a trace's cell must have (``[{"variant": "P0"}, {"variant": "P3"}]`` for
      SyPS's ``delta_P3``), so ``syps audit --metric`` lists the traces behind it; None: every
      cell of the child.
    """

    headline_metrics: Sequence[str] = ()
    run_metrics: Sequence[str] = ()
    run_prefix: str | None = None
    table: TableScorer | None = None
    judges: Sequence[JudgeSpec] = ()
    trace_cells: Sequence[str] | None = None
    figures: Callable[[P, Scored[I]], Drawn] = no_figures
    templates: Callable[[P], dict[str, Any]] | None = None
    run_tags: Callable[[P], dict[str, str]] = no_tags
    review: Callable[[P, I, pd.DataFrame], pd.DataFrame] = nothing_flagged
    summary: Callable[[Scores, float], str | None] = no_summary
    link_traces: Callable[[Sequence[Artifact], pd.DataFrame, Path], list[Artifact]] = as_they_are
    power_contrasts: Callable[[P, I, pd.DataFrame | None], list[PowerContrast]] = no_contrasts
    metric_cells: Callable[[str], list[dict[str, str]] | None] = every_cell
