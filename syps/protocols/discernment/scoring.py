"""Scoring a discernment label table: ``score``, the one function both ``score@discernment``
and ``syps score --protocol discernment`` run.

Per (model, dataset), from the label rows (the label stage's, or those :func:`read_table` makes
of a scores CSV): the issue's scores table (``scores_table``), then ``metrics.score_model`` on
it, with each stage's unparsed share over every generated response, the support of each metric
with a CI (``<metric>_n``, ``<metric>_low_support``), the artefacts without a direction, the
skipped count per cell (``n_skipped/<baseline|valid|invalid>``) and the initial scoring overview
of the baseline repetitions (``baseline_overview``, ``metrics.baseline_metrics``); where the
judge rated the arguments, the ratings' budget diagnostic (``ratings_tau_b/<budget>``,
``ratings_budget_converged``; Fig. A1a).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np
import pandas as pd

from syps.core.io import InputError, read_parquet
from syps.core.protocol import ScoreSettings
from syps.core.report import Scores
from syps.protocols.discernment.items import DIRECTIONS, NO_DIRECTION
from syps.protocols.discernment.metrics import (
    CLASSES,
    COLUMNS,
    Baseline,
    argument_ratings,
    baseline_metrics,
    baseline_stats,
    read_scores,
    score_model,
    validate,
)
from syps.protocols.discernment.params import BUILTIN, NAME, DiscernmentParams, RatingsParams
from syps.protocols.discernment.parse import PARSED, UNPARSED
from syps.protocols.discernment.ratings_budget import budget_metrics, read_budget

# Setup.weights: each argument's rating q from its own label rows (the label stage's ``q``).
FROM_LABELS: Literal["labels"] = "labels"
Weights = Mapping[str, float] | Literal["labels"] | None
# A scores CSV without a ``dataset`` column is one dataset, named as the default items' are.
DEFAULT_DATASET = BUILTIN
# The label-table columns ``score`` reads (``q`` too where the setup weighs from the labels).
LABELS_READ = [
    "model",
    "dataset",
    "item_id",
    "rep",
    "stage",
    "arg_id",
    "direction",
    "validity",
    "label",
    "verdict",
]
TABLE_COLUMNS = (
    "model, artefact_id, rep, arg_id, direction (raise|lower), validity (valid|invalid), s0, s1 "
    f"(baseline and updated score 0-100; empty: unparsed), [dataset] ({DEFAULT_DATASET}), [q] "
    "(the argument's rating: label-confidence weights); CSV, or the label stage's parquet"
)


def scores_table(labels: pd.DataFrame) -> pd.DataFrame:
    """The label table as the issue's scores table (``metrics.COLUMNS`` plus ``dataset``): one
    row per (argument, repetition) with a direction; ``s0`` that repetition's parsed baseline."""
    base = labels[labels["stage"] == "baseline"][["model", "dataset", "item_id", "rep", "label"]]
    base = base.rename(columns={"label": "s0"})
    up = labels[(labels["stage"] == "update") & labels["direction"].isin(DIRECTIONS)]
    up = up[["model", "dataset", "item_id", "rep", "arg_id", "direction", "validity", "label"]]
    tab = up.rename(columns={"label": "s1"}).merge(
        base, on=["model", "dataset", "item_id", "rep"], how="left", validate="many_to_one"
    )
    tab = tab.rename(columns={"item_id": "artefact_id"})
    return tab[["dataset", *COLUMNS]].reset_index(drop=True)


def _cell_name(stage: str, validity: str) -> str:
    return "baseline" if stage == "baseline" else validity


def _rate(labels: pd.DataFrame) -> float:
    gen = labels[labels["verdict"] != "SKIPPED"]
    return float((gen["verdict"] != PARSED).mean()) if len(gen) else math.nan


def _support_n(key: str, ms: dict[str, float]) -> float:
    """The artefacts metric ``key`` rests on: those of its class (and push, for a metric split
    by push); a composite rests on both classes, a lower-minus-raise difference on both pushes;
    an unweighted rate on its class's artefacts with a parsed argument, zero weight or not."""
    n = {c: ms.get(f"n_artefacts_{c}", 0.0) for c in CLASSES}
    for c in CLASSES:
        if key.endswith(f"_{c}_unweighted"):
            return n[c] + ms.get(f"n_artefacts_zero_weight_{c}", 0.0)
        if key.endswith(f"_{c}_minus_unweighted"):
            return n[c]
        by_push = {d: ms.get(f"n_artefacts_{c}_{d}", 0.0) for d in DIRECTIONS}
        if key.endswith(f"_{c}_lower_minus_raise"):
            return min(by_push.values())
        for d in DIRECTIONS:
            if key.endswith(f"_{c}_{d}"):
                return by_push[d]
    if key.endswith("_valid") or key == "pval":
        return n["valid"]
    if key.endswith("_invalid") or key == "pinval":
        return n["invalid"]
    return min(n.values())


def _support(ms: dict[str, float], min_items: int) -> None:
    """``<metric>_n`` (the artefacts a CI rests on, ``_support_n``) and ``<metric>_low_support``
    (1.0 when below ``min_items``) for every metric with a CI."""
    for key in [k[: -len("_ci_low")] for k in ms if k.endswith("_ci_low")] + ["pval", "pinval"]:
        n = _support_n(key, ms)
        ms[f"{key}_n"] = n
        ms[f"{key}_low_support"] = float(n < min_items)


def baseline_overview(lab: pd.DataFrame) -> pd.DataFrame:
    """``metrics.baseline_stats`` of one (model, dataset)'s label rows: its baseline rows'
    scores (NaN unparsed) and each artefact's push as its update rows carry it ("none" where
    no baseline parsed, so nothing was pushed)."""
    base = lab[lab["stage"] == "baseline"]
    up = lab[(lab["stage"] == "update") & lab["direction"].isin(DIRECTIONS)]
    push = up.groupby("item_id")["direction"].first().to_dict()
    return baseline_stats(
        pd.DataFrame(
            {
                "artefact_id": base["item_id"].astype(str).to_numpy(),
                "s0": base["label"].to_numpy(dtype=float),
                "push": [push.get(i, NO_DIRECTION) for i in base["item_id"]],
            }
        )
    )


@dataclass(frozen=True)
class Setup:
    """What scoring needs besides the labels: the threshold ``k`` (in σ0), the ``baseline``
    shifts are measured from, the arguments' label-confidence ``weights`` (``FROM_LABELS``: each
    argument's q on its label rows; a mapping arg_id -> q; None: every argument weighs 1) and
    the unparsed share a stage may have (``max_unparsed``; above it scoring fails), and the
    Kendall τb a ratings budget must exceed to count as converged (``tau_threshold``)."""

    k: float = DiscernmentParams.k
    baseline: Baseline = DiscernmentParams.baseline
    weights: Weights = None
    max_unparsed: float = DiscernmentParams.max_unparsed
    tau_threshold: float = RatingsParams.tau_threshold


def setup_of(p: DiscernmentParams) -> Setup:
    """The scoring setup of a configured study: its k, baseline and unparsed limit, weighted
    by the label rows' q whenever it rates the arguments (``ratings.source`` not ``none``)."""
    weights = FROM_LABELS if p.ratings.source != "none" else None
    return Setup(p.k, p.baseline, weights, p.max_unparsed, p.ratings.tau_threshold)


def _weights(lab: pd.DataFrame, tab: pd.DataFrame, weights: Weights) -> Mapping[str, float] | None:
    """The q per argument of one (model, dataset): ``weights`` itself, or (``FROM_LABELS``) the
    q on the label rows of the arguments in its scores table ``tab``."""
    if not isinstance(weights, str):
        return weights
    qs = lab[lab["arg_id"].isin(tab["arg_id"]) & lab["q"].notna()].drop_duplicates("arg_id")
    return dict(zip(qs["arg_id"], qs["q"].astype(float), strict=True))


RATINGS_COLUMNS = ["model", "dataset", "arg_id", "validity", "q", "w", "c"]


def ratings_table(labels: pd.DataFrame) -> pd.DataFrame:
    """Per (model, dataset, argument in its weights pool): the rating ``q`` on its label rows,
    its label-confidence weight ``w`` and the pool's centre ``c`` (``metrics.argument_ratings``),
    as a study that rates its arguments scores them; empty without an update row."""
    table = scores_table(labels)
    parts = []
    for (model, dataset), lab in labels.groupby(["model", "dataset"], sort=True):
        tab = table[(table["model"] == model) & (table["dataset"] == dataset)]
        if len(tab):
            q = _weights(lab, tab, FROM_LABELS)
            parts.append(argument_ratings(tab, q or {}).assign(model=model, dataset=dataset))
    if not parts:
        return pd.DataFrame(columns=RATINGS_COLUMNS)
    return pd.concat(parts, ignore_index=True)[RATINGS_COLUMNS]


def _score_one(
    lab: pd.DataFrame, tab: pd.DataFrame, settings: ScoreSettings, setup: Setup, where: str
) -> dict[str, float]:
    """Every metric of one (model, dataset) (``where``): its label rows ``lab`` and its
    validated scores table ``tab``; see the module docstring."""
    if len(tab):
        ms = score_model(
            tab,
            _weights(lab, tab, setup.weights),
            setup.k,
            baseline=setup.baseline,
            n_boot=settings.bootstrap,
            seed=settings.seed,
            ci=settings.ci,
        )
    else:
        ms = {}
    # The unparsed share of each stage over every generated response (the metrics' own
    # rates leave out artefacts without a direction).
    ms["unparsed_rate_baseline"] = _rate(lab[lab["stage"] == "baseline"])
    ms["unparsed_rate_update"] = _rate(lab[lab["stage"] == "update"])
    for stage in ("baseline", "update"):
        r = ms[f"unparsed_rate_{stage}"]
        if r > setup.max_unparsed:
            raise InputError(
                f"protocols.{NAME}.max_unparsed: {where}: {r:.0%} of the {stage} "
                f"responses did not parse (limit {setup.max_unparsed:.0%})"
            )
    for h in ("pval", "pinval", "pval_minus_pinval", "d_star"):
        ms.setdefault(h, math.nan)
    _support(ms, settings.min_items)
    no_direction = lab[(lab["stage"] == "update") & (lab["direction"] == NO_DIRECTION)]
    ms["n_artefacts_no_direction"] = float(no_direction["item_id"].nunique())
    ms.update(baseline_metrics(baseline_overview(lab)))
    sk = lab[lab["verdict"] == "SKIPPED"]
    names = [_cell_name(s, v) for s, v in zip(sk["stage"], sk["validity"], strict=True)]
    for cell in ("baseline", *CLASSES):
        ms[f"n_skipped/{cell}"] = float(names.count(cell))
    return ms


def score(
    labels: pd.DataFrame, settings: ScoreSettings, setup: Setup, source: str = "labels"
) -> Scores:
    """``{model: {dataset: {metric: value}}}`` from a label table (the label stage's, or one
    :func:`read_table` read): the one function both ``score@discernment`` and ``syps score
    --protocol discernment`` run. Columns: ``LABELS_READ`` (``stage`` baseline|update,
    ``label`` the parsed score, NaN unparsed; ``verdict`` PARSED, UNPARSED or SKIPPED), and
    ``q`` where ``setup.weights`` is ``FROM_LABELS``. A scores table that fails ``validate``
    is an error naming ``source`` and the (model, dataset). Where the labels carry the judge
    ratings' budget diagnostic (``ratings_budget.BUDGET_COLUMN``) every (model, dataset) gets
    its ``ratings_budget.budget_metrics``: the same values in each, as the ratings are shared."""
    table = scores_table(labels)
    try:
        budget = read_budget(labels)
    except ValueError as e:
        raise InputError(f"{source}: {e}") from e
    shared = budget_metrics(budget, setup.tau_threshold) if isinstance(budget, pd.DataFrame) else {}
    out: Scores = {}
    for (model, dataset), lab in labels.groupby(["model", "dataset"], sort=True):
        where = f"{model}/{dataset}"
        tab = table[(table["model"] == model) & (table["dataset"] == dataset)]
        tab = validate(tab.drop(columns="dataset"), f"{source} of {where}")
        ms = _score_one(lab, tab, settings, setup, where)
        out.setdefault(str(model), {})[str(dataset)] = ms | shared
    return out


def score_labels(p: DiscernmentParams, labels: pd.DataFrame, settings: ScoreSettings) -> Scores:
    """``score@discernment``: the label stage's table of every model scored as configured."""
    return score(labels, settings, setup_of(p))


def _verdicts(scores: pd.Series) -> np.ndarray:
    """PARSED where a score is given, else UNPARSED."""
    out: np.ndarray = np.where(scores.notna(), PARSED, UNPARSED)
    return out


def labels_of_scores(df: pd.DataFrame, source: str) -> pd.DataFrame:
    """The label table a scores CSV (``TABLE_COLUMNS``, as ``metrics.read_scores`` reads it)
    stands for: a baseline row per (dataset, model, artefact, rep) with label ``s0`` and an
    update row per CSV row with label ``s1`` (in file order), each PARSED where a score is
    given, else UNPARSED; ``q`` the argument's rating (NaN without a ``q`` column). Errors
    name ``source`` and the first bad data row."""
    df = df.reset_index(drop=True)
    tab = validate(df, source)
    if "dataset" not in tab.columns:
        tab.insert(0, "dataset", DEFAULT_DATASET)
    q = pd.Series(np.nan, index=tab.index)
    if "q" in df.columns:
        q = pd.to_numeric(df["q"], errors="coerce")
        bad = tab.index[q.isna() & df["q"].notna()]
        if len(bad):
            raise InputError(f"{source}: row {bad[0] + 1}: q {df['q'][bad[0]]!r} is not a number")
        first = q.groupby([tab["dataset"], tab["arg_id"]]).transform("first")
        bad = tab.index[(q != first) & ~(q.isna() & first.isna())]
        if len(bad):
            arg = tab["arg_id"][bad[0]]
            raise InputError(f"{source}: row {bad[0] + 1}: q differs between rows of {arg!r}")
    tab = tab.rename(columns={"artefact_id": "item_id"})
    base = tab.drop_duplicates(["dataset", "model", "item_id", "rep"])
    baseline = base[["dataset", "model", "item_id", "rep"]].assign(
        stage="baseline", arg_id="", direction="", validity="", label=base["s0"], q=np.nan
    )
    update = tab[["dataset", "model", "item_id", "rep", "arg_id", "direction", "validity"]]
    update = update.assign(stage="update", label=tab["s1"], q=q.astype(float))
    out = pd.concat([baseline, update], ignore_index=True)
    return out.assign(verdict=_verdicts(out["label"]))[[*LABELS_READ, "q"]]


def read_table(path: str) -> pd.DataFrame:
    """A discernment label table for :func:`score`: the label stage's parquet as it is, or a
    scores CSV (``TABLE_COLUMNS``) through :func:`labels_of_scores`; a missing column or a bad
    row is an error naming the file (and the row)."""
    if path.endswith(".parquet"):
        return read_parquet(path, LABELS_READ)
    return labels_of_scores(read_scores(path), path)


def score_file_table(
    params: DiscernmentParams | None,
    table: pd.DataFrame,
    settings: ScoreSettings,
    source: str,
    weights: Mapping[str, float] | None = None,
    k: float | None = None,
) -> Scores:
    """``syps score --protocol discernment``: :func:`score` over a table :func:`read_table`
    read. In a repository (``params``, the study's block) as the score stage scores it: its
    threshold, baseline, unparsed limit and weighting (:func:`setup_of`). Outside one (None):
    at threshold ``k`` (default 2), the default baseline and no unparsed limit, the arguments
    weighed by the table's own ``q`` where it has one (the label stage's parquet of a study
    that rates its arguments, or a CSV's ``q`` column), else every argument 1, as under
    ``ratings.source: none``. ``weights`` (``--weights``, arg_id -> q) and ``k``, where given,
    override either."""
    if k is not None and k < 0:
        raise InputError(f"--k: must be >= 0, got {k:g}")
    if params is not None:
        setup = setup_of(params)
    else:
        rated = "q" in table.columns and bool(table["q"].notna().any())
        setup = Setup(DiscernmentParams.k, weights=FROM_LABELS if rated else None)
    if k is not None:
        setup = replace(setup, k=k)
    if weights is not None:
        setup = replace(setup, weights=weights)
    return score(table, settings, setup, source)
