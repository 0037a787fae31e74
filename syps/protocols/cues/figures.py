"""The paper's figures: tidy plot data (CSV, for ``dvc plots``) and PNGs drawn from it.

Every ``*_data`` function is pure: scores in, one tidy DataFrame out, NaN where a metric is
undefined. Every ``*_figure`` function draws one such frame and writes a PNG atomically; an
undefined value is drawn as "n/a" rather than dropped silently or turned into an error.
"""

from __future__ import annotations

import math
import re
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from syps.core.io import atomic_write
from syps.core.plotting import pyplot, save, whisker
from syps.core.report import Scores
from syps.protocols.cues.params import VARIANT_NAMES, VARIANTS, cue_of, order_variants

if TYPE_CHECKING:
    pass

NAN = math.nan
ALPHA = 0.05  # a Holm-adjusted p below this marks a delta as significant
_DELTA_KEY = re.compile(r"^delta_(P[0-7][a-z]?)$")  # not delta_spread_*, not the _ci_ keys

HEATMAP_COLUMNS = ["model", "dataset", "variant", "cue", "syc_rate", "ci_low", "ci_high"]
SCATTER_COLUMNS = [
    "model",
    "dataset",
    "base_syc",
    "base_syc_ci_low",
    "base_syc_ci_high",
    "spss",
    "spss_ci_low",
    "spss_ci_high",
]
FOREST_COLUMNS = ["model", "dataset", "variant", "cue", "delta", "ci_low", "ci_high", "p_holm"]
SIZE_COLUMNS = ["model", "size_params", "mean_spss"]


# --- plot data ------------------------------------------------------------------------------


def heatmap_data(scores: Scores) -> pd.DataFrame:
    """One row per (model, dataset, cue P0..P7) with the cue's pooled sycophancy rate and CI.

    A cue the dataset's templates do not define has no ``syc_rate_<cue>`` key: its row is NaN,
    so every heatmap has the same eight columns.
    """
    rows = [
        {
            "model": model,
            "dataset": dataset,
            "variant": v,
            "cue": VARIANT_NAMES[v],
            "syc_rate": ms.get(f"syc_rate_{v}", NAN),
            "ci_low": ms.get(f"syc_rate_{v}_ci_low", NAN),
            "ci_high": ms.get(f"syc_rate_{v}_ci_high", NAN),
        }
        for model, ds in scores.items()
        for dataset, ms in ds.items()
        for v in VARIANTS
    ]
    return pd.DataFrame(rows, columns=HEATMAP_COLUMNS)


def scatter_data(scores: Scores) -> pd.DataFrame:
    """One row per (model, dataset): BaseSyc and SPSS with their CIs."""
    rows = [
        {"model": model, "dataset": dataset, **{c: ms[c] for c in SCATTER_COLUMNS[2:]}}
        for model, ds in scores.items()
        for dataset, ms in ds.items()
    ]
    return pd.DataFrame(rows, columns=SCATTER_COLUMNS)


def forest_data(scores: Scores) -> pd.DataFrame:
    """One row per (model, dataset, variant id with a delta): the delta against P0 and its CI.

    The variant ids are those with a ``delta_<id>`` key: each cue P1..P7 (pooled over its
    wordings) and, where a cue has several wordings, each wording (``P3a``), in reporting
    order. ``p_holm`` is the cue's Holm-adjusted p (McNemar, or for a pooled cue the exact
    permutation test of ``syps.core.stats.pooled_permutation_p``): the cues are the family's
    members, so a wording's row has none (NaN) and is never starred.
    """
    rows = []
    for model, ds in scores.items():
        for dataset, ms in ds.items():
            ids = [m.group(1) for m in map(_DELTA_KEY.match, ms) if m]
            for v in order_variants(ids):
                rows.append(
                    {
                        "model": model,
                        "dataset": dataset,
                        "variant": v,
                        "cue": VARIANT_NAMES[cue_of(v)],
                        "delta": ms[f"delta_{v}"],
                        "ci_low": ms[f"delta_{v}_ci_low"],
                        "ci_high": ms[f"delta_{v}_ci_high"],
                        "p_holm": ms.get(f"mcnemar_p_holm_{v}", NAN),
                    }
                )
    return pd.DataFrame(rows, columns=FOREST_COLUMNS)


def size_data(scores: Scores, sizes: Mapping[str, float | None]) -> pd.DataFrame:
    """One row per model: its parameter count (NaN if unknown) and its SPSS averaged over the
    datasets where SPSS is defined (NaN if it is defined on none)."""
    rows = []
    for model, ds in scores.items():
        spss = [ms["spss"] for ms in ds.values() if not math.isnan(ms["spss"])]
        size = sizes.get(model)
        rows.append(
            {
                "model": model,
                "size_params": NAN if size is None else float(size),
                "mean_spss": float(np.mean(spss)) if spss else NAN,
            }
        )
    return pd.DataFrame(rows, columns=SIZE_COLUMNS)


# --- figures --------------------------------------------------------------------------------


def _firsts(values: pd.Series) -> list[str]:
    """Distinct values in order of first appearance (models and datasets keep scores' order)."""
    return [str(v) for v in dict.fromkeys(values)]


def heatmap_figure(data: pd.DataFrame, dataset: str, path: Path) -> None:
    """Models (rows) x cues P0..P7 (columns) of ``dataset``, each cell annotated with its rate.

    The colour scale is fixed to 0..1 so heatmaps of different datasets compare; an undefined
    rate is a grey "n/a" cell.
    """
    plt = pyplot()
    rows = data[data["dataset"] == dataset]
    models = _firsts(rows["model"])
    grid = (
        rows.pivot(index="model", columns="variant", values="syc_rate")
        .reindex(index=models, columns=list(VARIANTS))
        .to_numpy(dtype=float)
    )
    cmap = plt.get_cmap("viridis").with_extremes(bad="#d9d9d9")
    fig, ax = plt.subplots(figsize=(9, 1.8 + 0.45 * max(len(models), 1)), dpi=100)
    image = ax.imshow(np.ma.masked_invalid(grid), cmap=cmap, vmin=0, vmax=1, aspect="auto")
    for i, j in np.ndindex(grid.shape):
        v = grid[i, j]
        text, colour = ("n/a", "#555555") if math.isnan(v) else (f"{v:.2f}", _ink(v))
        ax.text(j, i, text, ha="center", va="center", fontsize=8, color=colour)
    names = [textwrap.fill(VARIANT_NAMES[v], 14) for v in VARIANTS]
    ax.set_xticks(range(len(VARIANTS)), [f"{v}\n{n}" for v, n in zip(VARIANTS, names, strict=True)])
    ax.tick_params(axis="x", labelsize=7)
    ax.set_yticks(range(len(models)), models, fontsize=8)
    ax.set_title(f"Sycophancy rate per cue · {dataset}", fontsize=10)
    fig.colorbar(image, ax=ax, label="sycophancy rate")
    save(fig, path)


def _ink(v: float) -> str:
    """Text colour readable on viridis: dark on the bright (high) end, white on the dark end."""
    return "black" if v > 0.6 else "white"


def scatter_figure(data: pd.DataFrame, path: Path) -> None:
    """BaseSyc (x) against SPSS (y) with both CIs as whiskers: one point per (model, dataset),
    one marker per dataset, each point labelled with its model. Undefined points are left out
    and listed in the title."""
    plt = pyplot()
    markers = ["o", "s", "^", "D", "v", "P", "X", "*"]
    fig, ax = plt.subplots(figsize=(6.5, 5), dpi=100)
    defined = data.dropna(subset=["base_syc", "spss"])
    for k, dataset in enumerate(_firsts(data["dataset"])):
        rows = defined[defined["dataset"] == dataset]
        if rows.empty:
            continue  # no legend entry for a dataset with nothing drawn
        ax.errorbar(
            rows["base_syc"],
            rows["spss"],
            xerr=whisker(rows["base_syc"], rows["base_syc_ci_low"], rows["base_syc_ci_high"]),
            yerr=whisker(rows["spss"], rows["spss_ci_low"], rows["spss_ci_high"]),
            fmt=markers[k % len(markers)],
            capsize=3,
            label=dataset,
        )
        for x, y, model in zip(rows["base_syc"], rows["spss"], rows["model"], strict=True):
            ax.annotate(model, (x, y), xytext=(4, 4), textcoords="offset points", fontsize=7)
    ax.set_xlim(-0.02, 1.02)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("BaseSyc (sycophancy rate at P0)")
    ax.set_ylabel("SPSS (prompt sensitivity)")
    missing = data.loc[data.index.difference(defined.index)]
    title = "BaseSyc vs SPSS"
    if len(missing):
        cells = ", ".join(f"{m}/{d}" for m, d in missing[["model", "dataset"]].itertuples(False))
        title += f"\nn/a: {cells}"
    ax.set_title(title, fontsize=10)
    if len(defined):
        ax.legend(title="dataset", fontsize=8)
    save(fig, path)


def forest_figure(data: pd.DataFrame, path: Path) -> None:
    """Deltas against P0 with their CIs: one panel per dataset, one row per (model, variant).

    A filled marker and a star mark a cue whose Holm-adjusted p is below 0.05 (a wording's row
    never: see ``forest_data``); an undefined delta shows "n/a" on its row.
    """
    plt = pyplot()
    datasets = _firsts(data["dataset"]) or ["(no deltas)"]
    n_rows = max([int((data["dataset"] == d).sum()) for d in datasets] + [1])
    fig, axes = plt.subplots(
        1,
        len(datasets),
        figsize=(4.2 * len(datasets), 1.2 + 0.22 * n_rows),
        dpi=100,
        sharex=True,
        squeeze=False,
    )
    for ax, dataset in zip(axes[0], datasets, strict=True):
        rows = data[data["dataset"] == dataset].reset_index(drop=True)
        y = np.arange(len(rows))[::-1]  # first row at the top
        sig = (rows["p_holm"] < ALPHA).to_numpy()
        ax.hlines(y, rows["ci_low"], rows["ci_high"], color="#4c72b0", linewidth=1.2)
        ax.scatter(rows["delta"][~sig], y[~sig], facecolors="white", edgecolors="#4c72b0", s=18)
        ax.scatter(rows["delta"][sig], y[sig], color="#c44e52", s=22, zorder=3)
        for yi, delta, star in zip(y, rows["delta"], sig, strict=True):
            if math.isnan(delta):
                ax.text(0, yi, "n/a", ha="center", va="center", fontsize=6, color="#555555")
            elif star:
                ax.annotate("*", (delta, yi), xytext=(4, -2), textcoords="offset points")
        ax.axvline(0, color="black", linewidth=0.8)
        labels = [f"{m} · {v}" for m, v in rows[["model", "variant"]].itertuples(False)]
        ax.set_yticks(y, labels)
        ax.tick_params(axis="y", labelsize=6)
        ax.set_ylim(-0.8, max(len(rows), 1) - 0.2)
        ax.set_xlabel("Δ sycophancy rate vs P0", fontsize=8)
        ax.set_title(dataset, fontsize=10)
    fig.suptitle(f"Directional deltas (red *: cue's Holm-adjusted paired p < {ALPHA})", fontsize=9)
    save(fig, path)


def size_figure(data: pd.DataFrame, path: Path) -> None:
    """Mean SPSS against the parameter count on a log axis, each point labelled with its model.

    Models without a known size or SPSS are left out; with none left the figure still gets
    written, saying so in its title.
    """
    plt = pyplot()
    rows = data.dropna(subset=["size_params", "mean_spss"])
    fig, ax = plt.subplots(figsize=(6, 4), dpi=100)
    if len(rows):
        ax.scatter(rows["size_params"], rows["mean_spss"], color="#4c72b0")
        for x, y, model in zip(rows["size_params"], rows["mean_spss"], rows["model"], strict=True):
            ax.annotate(model, (x, y), xytext=(4, 4), textcoords="offset points", fontsize=7)
        ax.set_xscale("log")
        ax.margins(x=0.15, y=0.15)
        title = "Mean SPSS vs model size"
        left_out = [m for m in data["model"] if m not in set(rows["model"])]
        if left_out:
            title += f"\nno size or SPSS: {', '.join(left_out)}"
    else:
        title = "Mean SPSS vs model size: no model has both a known size and an SPSS"
    ax.set_xlabel("parameters (log scale)")
    ax.set_ylabel("SPSS, mean over datasets")
    ax.set_title(title, fontsize=9)
    save(fig, path)


# --- all of them ----------------------------------------------------------------------------


def _write_csv(df: pd.DataFrame, path: Path) -> None:
    atomic_write(path, lambda p: df.to_csv(p, index=False))


def write_figures(
    scores: Scores,
    sizes: Mapping[str, float | None],
    figures_dir: Path,
    plots_dir: Path,
    template_shas: Mapping[tuple[str, str], str] | None = None,
) -> list[Path]:
    """Write every figure's data as CSV to ``plots_dir`` and its PNG to ``figures_dir``.

    Data: ``heatmap.csv``, ``scatter.csv``, ``forest.csv``, ``size.csv``; the per-variant rows
    of heatmap and forest carry ``template_sha256`` from ``template_shas`` (keyed by dataset
    and variant id). Figures: one ``heatmap_<dataset>.png`` per dataset, ``scatter.png``,
    ``forest.png``, ``size.png``. Returns the PNG paths, in that order.
    """
    heat, scatter = heatmap_data(scores), scatter_data(scores)
    forest, size = forest_data(scores), size_data(scores, sizes)
    if template_shas is not None:
        heat, forest = (
            df.assign(
                template_sha256=[
                    template_shas.get((d, v), "")
                    for d, v in zip(df["dataset"], df["variant"], strict=True)
                ]
            )
            for df in (heat, forest)
        )
    # One bar per (model, dataset, variant) on the plots page: by variant alone DVC stacks the
    # datasets' rates into one bar.
    heat, forest = (
        df.assign(
            row=[
                f"{m} | {d} | {v}"
                for m, d, v in zip(df["model"], df["dataset"], df["variant"], strict=True)
            ]
        )
        for df in (heat, forest)
    )
    for df, name in ((heat, "heatmap"), (scatter, "scatter"), (forest, "forest"), (size, "size")):
        _write_csv(df, plots_dir / f"{name}.csv")
    pngs = [figures_dir / f"heatmap_{d}.png" for d in _firsts(heat["dataset"])]
    for d, path in zip(_firsts(heat["dataset"]), pngs, strict=True):
        heatmap_figure(heat, d, path)
    pngs += [figures_dir / f"{name}.png" for name in ("scatter", "forest", "size")]
    scatter_figure(scatter, pngs[-3])
    forest_figure(forest, pngs[-2])
    size_figure(size, pngs[-1])
    return pngs
