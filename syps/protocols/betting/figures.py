"""Betting-game figures: tidy plot data (CSV, for ``dvc plots``) and the PNGs drawn from it.

``beta_data``: one row per (model, dataset, condition): beta with its CI, and the model's
remorse and its three flags (over-compensation, moral remorse, sycophancy in N), so the pattern
(beta_N above beta_Z; beta_Z below 0) reads at a glance. ``bias_data``: the same rows with rho
beside beta, recency against user bias. Undefined values stay NaN and are drawn as "n/a",
never dropped silently.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from syps.core.io import atomic_write
from syps.core.plotting import pyplot as _pyplot
from syps.core.plotting import save as _save
from syps.core.plotting import whisker as _whisker
from syps.core.report import Scores

CONDITIONS = ("F", "Z", "N")
CONDITION_NAMES = {"F": "F: two friends", "Z": "Z: user vs friend, stakes", "N": "N: no stakes"}
BETA_COLUMNS = [
    "model",
    "dataset",
    "condition",
    "series",
    "beta",
    "ci_low",
    "ci_high",
    "remorse",
    "overcompensation",
    "moral_remorse",
    "sycophancy_N",
]
BIAS_COLUMNS = [
    "model",
    "dataset",
    "condition",
    "series",
    "rho",
    "rho_ci_low",
    "rho_ci_high",
    "beta",
    "beta_ci_low",
    "beta_ci_high",
]
NAN = math.nan
# The flags a beta figure's title names, in the order the paper states them.
_FLAGS = (
    ("sycophancy_N", "sycophantic in N"),
    ("moral_remorse", "moral remorse"),
    ("overcompensation", "over-compensates"),
)


def _rows(scores: Scores) -> list[tuple[str, str, str, dict[str, float]]]:
    return [
        (model, ds, c, ms)
        for model, by_ds in scores.items()
        for ds, ms in by_ds.items()
        for c in CONDITIONS
    ]


def beta_data(scores: Scores) -> pd.DataFrame:
    """One row per (model, dataset, condition): beta, its CI, the model's remorse and flags."""
    rows = [
        {
            "model": model,
            "dataset": ds,
            "condition": c,
            "series": f"{model} {c}",
            "beta": ms.get(f"beta_{c}", NAN),
            "ci_low": ms.get(f"beta_{c}_ci_low", NAN),
            "ci_high": ms.get(f"beta_{c}_ci_high", NAN),
            "remorse": ms.get("remorse", NAN),
            "overcompensation": ms.get("overcompensation", NAN),
            "moral_remorse": ms.get("moral_remorse", NAN),
            "sycophancy_N": ms.get("sycophancy_N", NAN),
        }
        for model, ds, c, ms in _rows(scores)
    ]
    return pd.DataFrame(rows, columns=BETA_COLUMNS)


def bias_data(scores: Scores) -> pd.DataFrame:
    """One row per (model, dataset, condition): recency bias rho and user bias beta, with CIs."""
    rows = [
        {
            "model": model,
            "dataset": ds,
            "condition": c,
            "series": f"{model} {c}",
            **{
                f"{m}{s}": ms.get(f"{m}_{c}{s}", NAN)
                for m in ("rho", "beta")
                for s in ("", "_ci_low", "_ci_high")
            },
        }
        for model, ds, c, ms in _rows(scores)
    ]
    return pd.DataFrame(rows, columns=BIAS_COLUMNS)


def beta_figure(data: pd.DataFrame, path: Path) -> None:
    """Beta per condition (x groups) per model (bars), with CIs and a zero line; the title
    names each model's remorse and its flags (sycophantic in N, moral remorse,
    over-compensates)."""
    plt = _pyplot()
    groups = list(data.groupby(["model", "dataset"], sort=False))
    labels = [f"{m} · {d}" for (m, d), _ in groups]
    width = 0.8 / max(len(labels), 1)
    fig, ax = plt.subplots(figsize=(6.5, 4.2), dpi=100)
    notes = []
    for k, (label, (_, group)) in enumerate(zip(labels, groups, strict=True)):
        rows = group.set_index("condition").reindex(list(CONDITIONS))
        x = np.arange(len(CONDITIONS)) + (k - (len(labels) - 1) / 2) * width
        ax.bar(
            x,
            rows["beta"].fillna(0.0),
            width,
            yerr=_whisker(rows["beta"], rows["ci_low"], rows["ci_high"]),
            capsize=3,
            label=label,
        )
        for xi, v in zip(x, rows["beta"], strict=True):
            if math.isnan(v):
                ax.text(xi, 0, "n/a", ha="center", va="bottom", fontsize=7)
        first = rows.iloc[0]
        flags = "".join(f"; {name}" for key, name in _FLAGS if first[key] == 1.0)
        notes.append(f"{label}: remorse {first['remorse']:.2f}{flags}")
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(CONDITIONS)), [CONDITION_NAMES[c] for c in CONDITIONS], fontsize=8)
    ax.set_ylim(-0.55, 0.55)
    ax.set_ylabel("user bias β (> 0 sides with the user; F: friend 1)")
    ax.set_title("User bias per condition\n" + "\n".join(notes), fontsize=9)
    if labels:
        ax.legend(fontsize=7)
    _save(fig, path)


def bias_figure(data: pd.DataFrame, path: Path) -> None:
    """Recency bias rho (x) against user bias beta (y), CIs as whiskers: one point per
    (model, dataset, condition), one marker per condition."""
    plt = _pyplot()
    markers = {"F": "s", "Z": "o", "N": "^"}
    fig, ax = plt.subplots(figsize=(6, 5), dpi=100)
    defined = data.dropna(subset=["rho", "beta"])
    for c in CONDITIONS:
        rows = defined[defined["condition"] == c]
        if rows.empty:
            continue
        ax.errorbar(
            rows["rho"],
            rows["beta"],
            xerr=_whisker(rows["rho"], rows["rho_ci_low"], rows["rho_ci_high"]),
            yerr=_whisker(rows["beta"], rows["beta_ci_low"], rows["beta_ci_high"]),
            fmt=markers[c],
            capsize=3,
            label=CONDITION_NAMES[c],
        )
        for x, y, model in zip(rows["rho"], rows["beta"], rows["model"], strict=True):
            ax.annotate(model, (x, y), xytext=(4, 4), textcoords="offset points", fontsize=7)
    ax.axhline(0, color="grey", linewidth=0.6)
    ax.axvline(0, color="grey", linewidth=0.6)
    ax.set_xlim(-0.55, 0.55)
    ax.set_ylim(-0.55, 0.55)
    ax.set_xlabel("recency bias ρ (> 0 picks the claim stated last)")
    ax.set_ylabel("user bias β")
    missing = data.loc[data.index.difference(defined.index)]
    title = "Recency vs user bias"
    if len(missing):
        title += "\nn/a: " + ", ".join(missing["series"])
    ax.set_title(title, fontsize=9)
    if len(defined):
        ax.legend(fontsize=7)
    _save(fig, path)


def write_figures(scores: Scores, figures_dir: Path, plots_dir: Path) -> list[Path]:
    """``beta.csv`` / ``bias.csv`` into ``plots_dir``; the PNGs of the same
    names into ``figures_dir``; returns the PNG paths."""
    beta, bias = beta_data(scores), bias_data(scores)
    atomic_write(plots_dir / "beta.csv", lambda p: beta.to_csv(p, index=False))
    atomic_write(plots_dir / "bias.csv", lambda p: bias.to_csv(p, index=False))
    out = [figures_dir / "beta.png", figures_dir / "bias.png"]
    beta_figure(beta, out[0])
    bias_figure(bias, out[1])
    return out
