"""The judge against people: its labels of the sampled rows again as configured now (through
the response store), agreement and kappa per dataset, and each dataset's judged rate corrected
by the people's labels (prediction-powered inference)."""

from __future__ import annotations

import math
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from syps.core.agreement import CATEGORIES, agreement_report, confusion
from syps.core.config import Params, ProtocolParams
from syps.core.io import InputError, read_parquet
from syps.core.judge import StoreJudge
from syps.core.ppi import ppi_mean, stratum_weights
from syps.core.protocol import Protocol
from syps.core.reporting import JudgeSpec
from syps.core.runs import cache_dir, store_location
from syps.core.stores import open_store
from syps.core.traces import SKIPPED
from syps.core.validation.inputs import HUMAN_VALUES, ITEM_COLUMNS, label_rows, with_context

# What the relabel returns per row; judge_template_sha256 may be left out ("": a rule).
MACHINE_COLUMNS = ["label", "labeler", "labeler_sha256", "judge_template_sha256"]
LABELER_KEYS = ["labeler", "labeler_sha256", "judge_template_sha256"]
ALL = "all"
# The corrected rate of each group (see corrected_rates), logged as <dataset>/<key>.
PPI_KEYS = [
    "judged_rate",
    "judged_rate_n",
    "n_judged_unclear",
    "corrected_rate",
    "corrected_rate_ci_low",
    "corrected_rate_ci_high",
    "corrected_rate_se",
    "corrected_rate_n",
    "corrected_rate_low_support",
]


def machine_labels(
    spec: JudgeSpec,
    protocol: Protocol[Any, Any],
    p: Params,
    own: ProtocolParams,
    table: pd.DataFrame,
    dry: bool = False,
) -> tuple[pd.DataFrame, int]:
    """The labels the judge as configured now (``p.judge``; ``own``: the protocol's params)
    gives the rows of ``table``, through the response store (a prompt judged before costs
    nothing), in row order: ``MACHINE_COLUMNS``; and how many verdicts the store lacked. With
    ``dry`` those are not asked (their rows' label is NaN): the judge never loads."""
    rows = table.reset_index(drop=True)
    with open_store(store_location()) as store:
        judge = StoreJudge(p.judge, store, cache_dir(), dry=dry)
        out = spec.relabel(protocol, own, rows, judge).reset_index(drop=True)
    if "judge_template_sha256" not in out.columns:
        out = out.assign(judge_template_sha256="")
    lacking = [c for c in MACHINE_COLUMNS if c not in out.columns]
    if len(out) != len(rows) or lacking:
        raise RuntimeError(
            f"judge {spec.name}: relabel gave {len(out)} rows for {len(rows)}"
            + (f", without {lacking}" if lacking else "")
        )
    return out.assign(label=out["label"].astype(float)), judge.tally["judged"]


def population_rows(
    spec: JudgeSpec, sample: pd.DataFrame, labels_dir: Path, items: Path
) -> tuple[pd.DataFrame | None, str | None]:
    """Every label row the judge decides of the (model, dataset) pairs ``sample`` names (a
    skipped row, with no response, is none), with what it reads: the population whose rate the
    sample corrects. (None, why) where the label tables or the items cannot be read: the
    report then says why it has no corrected rate (a sample annotated elsewhere still
    validates)."""
    pairs = set(zip(sample["model"].astype(str), sample["dataset"].astype(str), strict=True))
    try:
        table = label_rows(spec, sorted({m for m, _ in pairs}), labels_dir)
        keep = [
            pair in pairs
            for pair in zip(table["model"].astype(str), table["dataset"].astype(str), strict=True)
        ]
        table = table[keep]
        if "verdict" in table.columns:
            table = table[table["verdict"].astype(str) != SKIPPED]
        rows = with_context(spec, table, read_parquet(items, ITEM_COLUMNS), items)
    except InputError as e:
        return None, str(e)
    # As the sample's rows are: text, in a fixed order.
    out = rows[[*spec.columns, "response"]].astype(str)
    return out.sort_values(list(spec.key), kind="stable").reset_index(drop=True), None


def ppi_strata(spec: JudgeSpec) -> list[str]:
    """The strata the rectifier is weighted by: the sample's, with model and dataset."""
    return list(dict.fromkeys(["model", "dataset", *spec.strata]))


def corrected_rates(
    spec: JudgeSpec, sample: pd.DataFrame, population: pd.DataFrame, level: float, min_items: int
) -> dict[str, dict[str, Any]]:
    """Per dataset of ``sample`` and over all: the judge's rate over ``population`` (its
    ``label``: 1.0, 0.0, NaN) corrected by the people's labels (``human``) of the sample rows,
    with ``label`` the same judge's (:func:`syps.core.ppi.ppi_mean`): the keys ``PPI_KEYS``,
    None where undefined, and ``n_outside``, the sample rows that are no population row (a
    skipped response; label tables older than the sample), left out.

    The rectifier is weighted by each row's inverse sampling fraction over the strata
    (:func:`ppi_strata`, :func:`syps.core.ppi.stratum_weights`): ``syps judge sample``
    spreads the draws evenly over the strata, so a small stratum's rows are over-represented
    and would otherwise count its errors too often. A sample of a dataset (of all) stands for
    that dataset's population (of all of it). It is low-support
    (``corrected_rate_low_support`` 1.0) where fewer than ``min_items`` rows are behind it."""
    strata, key = ppi_strata(spec), list(spec.key)
    known = set(population[key].itertuples(index=False, name=None))
    inside = np.array(
        [k in known for k in sample[key].astype(str).itertuples(index=False, name=None)], bool
    )
    out: dict[str, dict[str, Any]] = {}
    for name in [*dict.fromkeys(sample["dataset"].astype(str)), ALL]:
        mine = np.ones(len(sample), bool) if name == ALL else (sample["dataset"] == name).to_numpy()
        pop = population if name == ALL else population[population["dataset"] == name]
        rows = sample[mine & inside]
        r = ppi_mean(
            pop["label"].to_numpy(float),
            rows["label"].to_numpy(float),
            rows["human"].to_numpy(float),
            stratum_weights(pop, rows, strata),
            level,
        )
        out[name] = {
            "judged_rate": _none_if_nan(r.raw),
            "judged_rate_n": r.N,
            "n_judged_unclear": r.unclear,
            "corrected_rate": _none_if_nan(r.estimate),
            "corrected_rate_ci_low": _none_if_nan(r.ci_low),
            "corrected_rate_ci_high": _none_if_nan(r.ci_high),
            "corrected_rate_se": _none_if_nan(r.se),
            "corrected_rate_n": r.n,
            "corrected_rate_low_support": float(r.n < min_items),
            "n_outside": int((mine & ~inside).sum()),
        }
    return out


def agreement_by_dataset(
    spec: JudgeSpec, table: pd.DataFrame, n_boot: int, ci: float, seed: int
) -> tuple[dict[str, dict[str, Any]], dict[str, pd.DataFrame]]:
    """Per dataset (in ``spec.datasets`` order, else by name) and over all rows: the agreement
    report, confusion counts, the sample_ids of disagreements and who labelled; and the
    confusion tables themselves.

    ``table`` has ``sample_id, dataset, human`` and ``MACHINE_COLUMNS``. Undefined values are
    None (JSON null).
    """
    present = set(table["dataset"])
    order = [d for d in spec.datasets if d in present] or sorted(present)
    groups = {**{d: table[table["dataset"] == d] for d in order}, ALL: table}
    out: dict[str, dict[str, Any]] = {}
    tables: dict[str, pd.DataFrame] = {}
    for name, g in groups.items():
        h, m = g["human"].to_numpy(float), g["label"].to_numpy(float)
        stats = agreement_report(h, m, n_boot, ci, seed)
        tables[name] = conf = confusion(h, m)
        entry: dict[str, Any] = {
            **{k: _none_if_nan(v) for k, v in stats.items()},
            "n": int(stats["n"]),
            "n_both_decided": int(stats["n_both_decided"]),
            "confusion": {r: {c: int(conf.at[r, c]) for c in CATEGORIES} for r in CATEGORIES},
            # Both decided, and differently: the rows to reread when judge and human disagree.
            "disagreements": [
                int(s)
                for s, hv, mv in zip(g["sample_id"], h, m, strict=True)
                if not (math.isnan(hv) or math.isnan(mv)) and hv != mv
            ],
        }
        if name != ALL:
            for key in LABELER_KEYS:
                entry[key] = str(g[key].iat[0])
        out[name] = entry
    return out, tables


def _none_if_nan(v: float) -> float | None:
    return None if math.isnan(v) else v


def reviewer_agreement(
    spec: JudgeSpec,
    reviews: pd.DataFrame,
    judged: np.ndarray,
    n_boot: int,
    ci: float,
    seed: int,
) -> dict[str, dict[str, dict[str, Any]]]:
    """Several people's answers to one review queue: each reviewer against the judge (its
    label of the same response, ``judged``: 1, 0 or NaN per row), and each pair of reviewers
    against each other over the responses both answered (``spec.key``), as
    :func:`syps.core.agreement.agreement_report` measures them (agreement and kappa over the
    rows both decided). ``reviews``: one row per response and reviewer, ``human_label`` 1, 0 or
    UNCLEAR. The report's ``reviewers`` block; a pair is named ``<a> ~ <b>``."""
    human = reviews["human_label"].str.strip().str.lower().map(HUMAN_VALUES).astype(float)
    rows = reviews.assign(human=human.to_numpy(), judged=np.asarray(judged, dtype=float))
    key = list(spec.key)

    def entry(a: np.ndarray, b: np.ndarray) -> dict[str, Any]:
        stats = agreement_report(a, b, n_boot, ci, seed)
        return {
            **{k: _none_if_nan(v) for k, v in stats.items()},
            "n": int(stats["n"]),
            "n_both_decided": int(stats["n_both_decided"]),
        }

    by = {str(r): g for r, g in rows.groupby("reviewer", sort=True)}
    out: dict[str, dict[str, dict[str, Any]]] = {
        "judge": {r: entry(g["human"].to_numpy(), g["judged"].to_numpy()) for r, g in by.items()},
        "pairs": {},
    }
    for a, b in combinations(sorted(by), 2):
        both = by[a][[*key, "human"]].merge(by[b][[*key, "human"]], on=key, suffixes=("_a", "_b"))
        if len(both):
            out["pairs"][f"{a} ~ {b}"] = entry(
                both["human_a"].to_numpy(), both["human_b"].to_numpy()
            )
    return out
