"""The discernment figures: tidy plot data (CSV, for ``dvc plots``) and PNGs drawn from it.

The response plane (x = pf - pc for invalid arguments, y = the same for valid ones, one point per
(model, dataset) with bootstrap error bars, the contrarian probabilities as the ellipse's
half-axes, the ideal point (0, 1) starred), the k-sweep (pf per class against k) and one
artefact's per-argument follow/stable/contrarian bars. An undefined value is drawn as "n/a".

The paper's diagnostics are in ``figures_paper`` (Figs. 5, B1, B2, B6) and its appendix in
``figures_appendix`` (Figs. A1a-d, B3, B5); both draw with the helpers here.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from syps.core.io import atomic_write
from syps.core.plotting import pyplot
from syps.core.report import Scores
from syps.protocols.discernment.metrics import (
    CLASSES,
    K_GRID,
    Baseline,
    argument_table,
)
from syps.protocols.discernment.params import DiscernmentParams
from syps.protocols.discernment.scoring import scores_table

PLANE_COLUMNS = [
    "model",
    "dataset",
    "x_pf_minus_pc_invalid",
    "x_ci_low",
    "x_ci_high",
    "y_pf_minus_pc_valid",
    "y_ci_low",
    "y_ci_high",
    "pc_invalid",
    "pc_valid",
]


def plane_data(scores: Scores) -> pd.DataFrame:
    """The response plane: per (model, dataset) pf - pc for invalid (x) and valid (y)
    arguments with their bootstrap CIs, and the contrarian probabilities."""
    rows = []
    for model, ds in scores.items():
        for dataset, ms in ds.items():
            g = ms.get
            rows.append(
                [
                    model,
                    dataset,
                    g("pf_minus_pc_invalid", math.nan),
                    g("pf_minus_pc_invalid_ci_low", math.nan),
                    g("pf_minus_pc_invalid_ci_high", math.nan),
                    g("pf_minus_pc_valid", math.nan),
                    g("pf_minus_pc_valid_ci_low", math.nan),
                    g("pf_minus_pc_valid_ci_high", math.nan),
                    g("pc_invalid", math.nan),
                    g("pc_valid", math.nan),
                ]
            )
    return pd.DataFrame(rows, columns=PLANE_COLUMNS)


def ksweep_data(scores: Scores) -> pd.DataFrame:
    """pf per class against k (the threshold δ = k·σ0), one row per (model, dataset, k)."""
    rows = [
        {
            "model": model,
            "dataset": dataset,
            "k": kk,
            **{f"pf_{c}": ms.get(f"pf_{c}_k{kk:g}".replace(".", "_"), math.nan) for c in CLASSES},
        }
        for model, ds in scores.items()
        for dataset, ms in ds.items()
        for kk in K_GRID
    ]
    return pd.DataFrame(rows, columns=["model", "dataset", "k", *(f"pf_{c}" for c in CLASSES)])


def bars_data(
    table: pd.DataFrame, artefact: str | None, k: float, baseline: Baseline
) -> pd.DataFrame:
    """Per (model, argument) of ``artefact``: pf, ps, pc over its parsed repetitions, from a
    scores table (``metrics.COLUMNS`` plus ``dataset``)."""
    cols = ["model", "dataset", "artefact_id", "arg_id", "validity", "n_parsed", "pf", "ps", "pc"]
    mine = table[table["artefact_id"] == artefact]
    return per_dataset(mine, lambda t: argument_table(t, k, baseline=baseline), cols)


def per_dataset(
    table: pd.DataFrame, per: Callable[[pd.DataFrame], pd.DataFrame], cols: list[str]
) -> pd.DataFrame:
    """``per`` on each dataset's rows of a scores table (``dataset`` dropped, then put back),
    concatenated in dataset order with the columns ``cols``; empty with them when none."""
    parts = [
        per(sub.drop(columns="dataset")).assign(dataset=dataset)
        for dataset, sub in table.groupby("dataset", sort=True)
    ]
    if not parts:
        return pd.DataFrame(columns=cols)
    return pd.concat(parts, ignore_index=True)[cols]


def save_png(fig: Any, path: Path) -> None:
    fig.tight_layout()
    atomic_write(path, lambda t: fig.savefig(t, format="png"))
    pyplot().close(fig)


def write_csv(df: pd.DataFrame, path: Path) -> None:
    atomic_write(path, lambda t: df.to_csv(t, index=False))


def _plane_figure(data: pd.DataFrame, path: Path) -> None:
    from matplotlib.patches import Ellipse  # heavy: matplotlib loads only when drawing

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 5))
    ax.axhline(0, color="grey", lw=0.5)
    ax.axvline(0, color="grey", lw=0.5)
    ax.plot([0], [1], marker="*", ms=14, color="gold", mec="k", ls="none", label="ideal")
    for i, r in enumerate(data.itertuples()):
        x, y = r.x_pf_minus_pc_invalid, r.y_pf_minus_pc_valid
        name = f"{r.model} / {r.dataset}"
        if math.isnan(x) or math.isnan(y):
            ax.annotate(f"{name}: n/a", (0.02, 0.02 + 0.05 * i), xycoords="axes fraction")
            continue
        color = f"C{i % 10}"
        ax.errorbar(
            x,
            y,
            xerr=[[max(x - r.x_ci_low, 0)], [max(r.x_ci_high - x, 0)]],
            yerr=[[max(y - r.y_ci_low, 0)], [max(r.y_ci_high - y, 0)]],
            fmt="o",
            color=color,
            label=name,
            capsize=3,
        )
        # The ellipse's half-axes are the contrarian probabilities (x: invalid, y: valid).
        w = 2 * np.nan_to_num(r.pc_invalid)
        h = 2 * np.nan_to_num(r.pc_valid)
        ax.add_patch(Ellipse((x, y), w, h, color=color, alpha=0.2))
    ax.set(
        xlim=(-1.05, 1.05),
        ylim=(-1.05, 1.05),
        xlabel="pf − pc, invalid arguments",
        ylabel="pf − pc, valid arguments",
        title="Argument discernment: response plane",
    )
    ax.legend(fontsize=7, loc="lower right")
    save_png(fig, path)


def _ksweep_figure(data: pd.DataFrame, path: Path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for i, ((model, dataset), sub) in enumerate(data.groupby(["model", "dataset"], sort=False)):
        for c, ls in (("valid", "-"), ("invalid", "--")):
            ax.plot(
                sub["k"],
                sub[f"pf_{c}"],
                ls,
                color=f"C{i % 10}",
                marker="o",
                ms=3,
                label=f"{model} / {dataset}: {c}",
            )
    ax.set(
        xlabel="k (threshold δ = k·σ0)",
        ylabel="pf (follow rate)",
        ylim=(-0.02, 1.02),
        title="Follow rate against the threshold",
    )
    ax.legend(fontsize=7)
    save_png(fig, path)


def _bars_figure(data: pd.DataFrame, path: Path) -> None:
    plt = pyplot()
    groups = list(data.groupby(["model", "dataset"], sort=False))
    fig, axes = plt.subplots(
        len(groups) or 1, 1, figsize=(7, 1 + 0.35 * max(len(data), 6)), squeeze=False
    )
    if not groups:
        axes[0][0].text(0.5, 0.5, "n/a: no parsed update", ha="center")
    for ax, ((model, dataset), sub) in zip(axes[:, 0], groups, strict=False):
        y = np.arange(len(sub))
        left = np.zeros(len(sub))
        for m, color in (("pf", "tab:green"), ("ps", "lightgrey"), ("pc", "tab:red")):
            v = np.nan_to_num(sub[m].to_numpy(dtype=float))
            ax.barh(
                y,
                v,
                left=left,
                color=color,
                label={"pf": "follow", "ps": "stable", "pc": "contrarian"}[m],
            )
            left += v
        ax.set_yticks(
            y,
            [f"{a} (n={n})" for a, n in zip(sub["arg_id"], sub["n_parsed"], strict=True)],
            fontsize=7,
        )
        ax.set(xlim=(0, 1), title=f"{model} / {dataset}", xlabel="share of parsed repetitions")
        ax.legend(fontsize=7, loc="lower right")
    save_png(fig, path)


def draw(
    scores: Scores,
    table: pd.DataFrame,
    artefact: str | None,
    k: float,
    baseline: Baseline,
    figures: Path,
    plots: Path,
) -> list[Path]:
    """The response plane, the k-sweep and ``artefact``'s per-argument bars: their data as
    CSV into ``plots`` (for ``dvc plots``), the PNGs into ``figures`` (returned)."""
    plane, ksweep, bars = (
        plane_data(scores),
        ksweep_data(scores),
        bars_data(table, artefact, k, baseline),
    )
    write_csv(plane, plots / "response_plane.csv")
    write_csv(ksweep, plots / "k_sweep.csv")
    write_csv(bars, plots / "argument_bars.csv")
    out = [figures / "response_plane.png", figures / "k_sweep.png", figures / "argument_bars.png"]
    _plane_figure(plane, out[0])
    _ksweep_figure(ksweep, out[1])
    _bars_figure(bars, out[2])
    return out


def draw_labels(
    p: DiscernmentParams,
    scores: Scores,
    labels: pd.DataFrame,
    figures: Path,
    plots: Path,
) -> list[Path]:
    """``draw`` on the label table's scores table, the per-argument bars for
    ``figure_artefact``."""
    table = scores_table(labels)
    chosen = p.figure_artefact
    if chosen is None:
        # The first artefact with a σ0 (two parsed baselines): the others have no bars.
        reps = table.dropna(subset=["s0"]).groupby("artefact_id", sort=False)["rep"].nunique()
        ok = reps.index[reps >= 2]
        chosen = str(ok[0]) if len(ok) else None
    return draw(scores, table, chosen, p.k, p.baseline, figures, plots)


def na(ax: Any, what: str) -> None:
    ax.text(0.5, 0.5, f"n/a: {what}", ha="center", va="center", transform=ax.transAxes)
