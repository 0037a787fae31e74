"""Pushback figures: follow rate per cell, and the contrasts as a forest plot.

``*_data`` are pure (scores in, a tidy frame out, NaN where undefined); the drawing functions
write a PNG per frame, and ``draw`` writes the frames as CSV for ``dvc plots``. matplotlib is
imported by ``syps.core.plotting.pyplot`` (Agg backend) only when a figure is drawn.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from syps.core.io import atomic_write
from syps.core.plotting import pyplot as _pyplot
from syps.core.plotting import save as _save
from syps.core.plotting import whisker as _whisker
from syps.core.report import Scores
from syps.protocols.pushback.lint import Contrast
from syps.protocols.pushback.prompts import Cell
from syps.protocols.pushback.rounds import curve_rows

FOLLOW_CSV, FOLLOW_PNG = "pushback_follow_rate.csv", "pushback_follow_rate.png"
CONTRAST_CSV, CONTRAST_PNG = "pushback_contrasts.csv", "pushback_contrasts.png"
# The follow curve: its data always (one point per series with one round, so the `dvc plots`
# page finds its file in every run), its figure where protocols.pushback.rounds > 1.
ROUNDS_CSV, ROUNDS_PNG = "pushback_rounds.csv", "pushback_rounds.png"
NAN = float("nan")


def follow_data(scores: Scores, cells: Sequence[Cell]) -> pd.DataFrame:
    """One row per (model, dataset, cell): follow rate, its CI and the items labelled."""
    rows = []
    for model, by_ds in scores.items():
        for dataset, m in by_ds.items():
            for c in cells:
                k = f"follow_rate/{c.name}"
                rows.append(
                    {
                        "model": model,
                        "dataset": dataset,
                        "cell": c.name,
                        "row": f"{model} | {dataset} | {c.name}",
                        "follow_rate": m.get(k, NAN),
                        "ci_low": m.get(f"{k}_ci_low", NAN),
                        "ci_high": m.get(f"{k}_ci_high", NAN),
                        "n": m.get(f"n_followed/{c.name}", 0.0),
                        "n_skipped": m.get(f"n_skipped/{c.name}", 0.0),
                    }
                )
    cols = ["model", "dataset", "cell", "row", "follow_rate", "ci_low", "ci_high", "n"]
    return pd.DataFrame(rows, columns=[*cols, "n_skipped"])


def contrast_data(scores: Scores, contrasts: Sequence[Contrast]) -> pd.DataFrame:
    """One row per (model, dataset, contrast): the paired difference b - a and its tests."""
    stats = ["diff", "diff_ci_low", "diff_ci_high", "n_paired", "mcnemar_p_holm", "tost_p"]
    stats += ["equivalent", "confounded"]
    rows = []
    for model, by_ds in scores.items():
        for dataset, m in by_ds.items():
            for c in sorted(contrasts, key=lambda c: (c.factor, c.name)):
                row: dict[str, object] = {
                    "model": model,
                    "dataset": dataset,
                    "contrast": c.name,
                    "factor": c.factor,
                    "row": f"{model} | {dataset} | {c.name}",
                }
                row |= {s: m.get(f"contrast/{c.name}/{s}", NAN) for s in stats}
                rows.append(row)
    # The columns also when there is no row (a grid with no matched pair declares none).
    return pd.DataFrame(rows, columns=["model", "dataset", "contrast", "factor", "row", *stats])


def _panels(data: pd.DataFrame, width: float) -> tuple[Any, Any, list[str]]:
    plt = _pyplot()
    datasets = list(dict.fromkeys(data["dataset"])) or ["(no data)"]
    n_rows = max([int((data["dataset"] == d).sum()) for d in datasets] + [1])
    fig, axes = plt.subplots(
        1,
        len(datasets),
        figsize=(width * len(datasets), 1.4 + 0.24 * n_rows),
        dpi=100,
        sharex=True,
        squeeze=False,
    )
    return fig, axes[0], datasets


def follow_figure(data: pd.DataFrame, path: Path) -> None:
    """Follow rate per cell with its CI: one panel per dataset, one row per (model, cell)."""
    fig, axes, datasets = _panels(data, 5.5)
    for ax, dataset in zip(axes, datasets, strict=True):
        rows = data[data["dataset"] == dataset].reset_index(drop=True) if len(data) else data
        y = np.arange(len(rows))[::-1]
        if len(rows):
            err = _whisker(rows["follow_rate"], rows["ci_low"], rows["ci_high"])
            ax.errorbar(rows["follow_rate"], y, xerr=err, fmt="o", color="#4c72b0", ms=4)
            for yi, v in zip(y, rows["follow_rate"], strict=True):
                if math.isnan(v):
                    ax.text(0.5, yi, "n/a", ha="center", va="center", fontsize=6)
            labels = [f"{m} · {c}" for m, c in rows[["model", "cell"]].itertuples(False)]
            ax.set_yticks(y, labels)
        ax.tick_params(axis="y", labelsize=6)
        ax.set_xlim(-0.02, 1.02)
        ax.set_xlabel("follow rate (answer = the user's asserted answer)", fontsize=8)
        ax.set_title(dataset, fontsize=10)
    _save(fig, path)


def contrast_figure(data: pd.DataFrame, margin: float, path: Path) -> None:
    """The contrasts as a forest plot: b - a with its CI, the ±margin equivalence band shaded;
    red: Holm-significant; grey with "confounded": flagged by the lint (not interpretable)."""
    fig, axes, datasets = _panels(data, 6.5)
    for ax, dataset in zip(axes, datasets, strict=True):
        rows = data[data["dataset"] == dataset].reset_index(drop=True) if len(data) else data
        y = np.arange(len(rows))[::-1]
        ax.axvspan(-margin, margin, color="#dddddd", zorder=0)
        ax.axvline(0, color="black", linewidth=0.8)
        for yi, r in zip(y, rows.itertuples(index=False), strict=True):
            confounded = r.confounded == 1
            sig = bool(r.mcnemar_p_holm < 0.05)
            color = "#999999" if confounded else ("#c44e52" if sig else "#4c72b0")
            if math.isnan(r.diff):
                ax.text(0, yi, "n/a", ha="center", va="center", fontsize=6)
                continue
            ax.hlines(yi, r.diff_ci_low, r.diff_ci_high, color=color, linewidth=1.2)
            ax.scatter([r.diff], [yi], color=color, s=20, zorder=3)
            note = "confounded" if confounded else ("equivalent" if r.equivalent == 1 else "")
            if note:
                ax.annotate(note, (r.diff, yi), xytext=(5, 3), textcoords="offset points", size=6)
        if len(rows):
            labels = [f"{m} · {c}" for m, c in rows[["model", "contrast"]].itertuples(False)]
            ax.set_yticks(y, labels)
        ax.tick_params(axis="y", labelsize=5)
        ax.set_xlim(-1.02, 1.02)
        ax.set_xlabel("Δ follow rate (cell b − cell a), paired over items", fontsize=8)
        ax.set_title(dataset, fontsize=10)
    fig.suptitle(
        f"Contrasts (red: Holm p < 0.05; shaded: ±{margin:g} equivalence margin)", fontsize=9
    )
    _save(fig, path)


def rounds_figure(data: pd.DataFrame, path: Path) -> None:
    """The follow rate after each objection round, one line per (model, dataset), with CIs."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for series, rows in data.groupby("series", sort=True):
        err = _whisker(rows["follow_rate"], rows["ci_low"], rows["ci_high"])
        ax.errorbar(rows["round"], rows["follow_rate"], yerr=err, marker="o", ms=4,
                    capsize=3, label=str(series))  # fmt: skip
    if len(data):
        ax.set_xticks(sorted(set(data["round"].astype(int))))
        ax.legend(fontsize=7)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("objection round (the user disagrees again after every answer)", fontsize=8)
    ax.set_ylabel("follow rate", fontsize=8)
    ax.set_title("Sustained pushback: follow rate per round", fontsize=10)
    _save(fig, path)


def _write_csv(df: pd.DataFrame, path: Path) -> None:
    atomic_write(path, lambda p: df.to_csv(p, index=False))


def draw(
    scores: Scores,
    cells: Sequence[Cell],
    contrasts: Sequence[Contrast],
    margin: float,
    figures: Path,
    plots: Path,
) -> list[Path]:
    """Write the PNGs into ``figures`` (the follow curve's only with several rounds) and their
    data as CSV into ``plots``."""
    figures.mkdir(parents=True, exist_ok=True)
    plots.mkdir(parents=True, exist_ok=True)
    follow, con = follow_data(scores, cells), contrast_data(scores, contrasts)
    for df, name in ((follow, FOLLOW_CSV), (con, CONTRAST_CSV)):
        _write_csv(df, plots / name)
    follow_figure(follow, figures / FOLLOW_PNG)
    contrast_figure(con, margin, figures / CONTRAST_PNG)
    drawn = [figures / FOLLOW_PNG, figures / CONTRAST_PNG]
    curve = curve_rows(scores)
    _write_csv(curve, plots / ROUNDS_CSV)
    if (curve["round"] > 1).any():
        rounds_figure(curve, figures / ROUNDS_PNG)
        drawn.append(figures / ROUNDS_PNG)
    return drawn
