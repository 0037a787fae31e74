"""The paper's diagnostics of discernment: the follow rate by push, lower against raise, per
class with bootstrap CIs (Fig. 5; one figure across (model, dataset)); and per (model, dataset)
the initial scoring overview (each artefact's baseline mean ± SD coloured by its push, and the
baseline means by the item's anchor band: Figs. B1, B2) and each artefact's revision rate
against its σ0 (Fig. B6). Plot data as CSV (``dvc plots``), PNGs drawn from it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from syps.core.plotting import pyplot, whisker
from syps.core.report import Scores
from syps.core.reporting import Drawn
from syps.protocols.discernment.figures import na, per_dataset, save_png, write_csv
from syps.protocols.discernment.items import DIRECTIONS, Entry
from syps.protocols.discernment.metrics import CLASSES, RATES, Baseline, artefact_revision
from syps.protocols.discernment.params import DiscernmentParams
from syps.protocols.discernment.scoring import baseline_overview, scores_table

INITIAL_COLUMNS = [
    "model",
    "dataset",
    "artefact_id",
    "anchor_band",
    "n_baseline",
    "baseline_mean",
    "baseline_sd",
    "push",
    "band",
    "row",
]
PUSH_COLUMNS = [
    "model",
    "dataset",
    "validity",
    "push",
    "row",
    *(f"{r}{s}" for r in RATES for s in ("", "_ci_low", "_ci_high")),
    "n_artefacts",
]
REVISION_COLUMNS = ["model", "dataset", "artefact_id", "sigma0", "revision_rate", "n_arguments"]
PUSH_COLOURS = {"lower": "tab:blue", "raise": "tab:orange", "none": "grey"}


def _anchor_bands(items: Sequence[Entry]) -> dict[tuple[str, str], str]:
    """Each item's ``anchor_band`` by (dataset, item_id), from its artefact."""
    return {(e.dataset, e.item_id): e.artefact.anchor_band for e in items}


def initial_scoring_data(labels: pd.DataFrame, items: Sequence[Entry]) -> pd.DataFrame:
    """Per (model, dataset, artefact): its baseline mean and SD over the parsed repetitions,
    its push, the band of its mean, and the item's own ``anchor_band`` ("" where the items do
    not give one); ``row`` names the bar (model | dataset | anchor band | artefact)."""
    bands = _anchor_bands(items)
    parts = []
    for (model, dataset), lab in labels.groupby(["model", "dataset"], sort=True):
        st = baseline_overview(lab).assign(model=str(model), dataset=str(dataset))
        st["anchor_band"] = [bands.get((str(dataset), a), "") for a in st["artefact_id"]]
        parts.append(st)
    if not parts:
        return pd.DataFrame(columns=INITIAL_COLUMNS)
    out = pd.concat(parts, ignore_index=True)
    out["row"] = [
        " | ".join(x)
        for x in zip(
            out["model"], out["dataset"], out["anchor_band"], out["artefact_id"], strict=True
        )
    ]
    return out[INITIAL_COLUMNS]


def lower_vs_raise_data(scores: Scores) -> pd.DataFrame:
    """Per (model, dataset, class, push): pf, ps and pc of the artefacts given that push with
    their bootstrap CIs and the artefacts behind them; ``row`` names the bar."""
    rows = []
    for model, ds in scores.items():
        for dataset, ms in ds.items():
            for cls in CLASSES:
                for d in DIRECTIONS:
                    key = f"{cls}_{d}"
                    rates = {
                        f"{r}{s}": ms.get(f"{r}_{key}{s}", math.nan)
                        for r in RATES
                        for s in ("", "_ci_low", "_ci_high")
                    }
                    n = ms.get(f"n_artefacts_{key}", math.nan)
                    row = f"{model} | {dataset} | {cls} | {d}"
                    rows.append([model, dataset, cls, d, row, *rates.values(), n])
    return pd.DataFrame(rows, columns=PUSH_COLUMNS)


def revision_data(table: pd.DataFrame, k: float, baseline: Baseline) -> pd.DataFrame:
    """Per (model, dataset, artefact with a σ0): σ0 and its revision rate at threshold ``k``
    (``metrics.artefact_revision``), from a scores table (``metrics.COLUMNS`` plus ``dataset``)."""
    return per_dataset(
        table, lambda t: artefact_revision(t, k, baseline=baseline), list(REVISION_COLUMNS)
    )


def _initial_figure(data: pd.DataFrame, title: str, path: Path) -> None:
    """B1: each artefact's baseline mean ± SD, sorted, coloured by its push; B2: the baseline
    means grouped by the item's anchor band."""
    plt = pyplot()
    fig, (b1, b2) = plt.subplots(1, 2, figsize=(10, 4), width_ratios=(3, 2))
    sub = data[data["n_baseline"] >= 1].sort_values(["baseline_mean", "artefact_id"])
    x = np.arange(len(sub))
    for push, colour in PUSH_COLOURS.items():
        on = (sub["push"] == push).to_numpy()
        if on.any():
            sd = np.nan_to_num(sub["baseline_sd"].to_numpy(dtype=float)[on])
            b1.errorbar(
                x[on],
                sub["baseline_mean"].to_numpy(dtype=float)[on],
                yerr=sd,
                fmt="o",
                color=colour,
                capsize=2,
                label=f"push: {push}",
            )
    b1.axhline(50, color="grey", ls="--", lw=0.8)
    if len(sub) <= 40:
        b1.set_xticks(x, sub["artefact_id"], rotation=90, fontsize=7)
    b1.set(
        ylim=(-2, 102),
        xlabel="artefact (by baseline mean)",
        ylabel="baseline score",
        title="B1: baseline mean ± SD per artefact",
    )
    if len(sub):
        b1.legend(fontsize=7)
    else:
        na(b1, "no parsed baseline")
    bands = [b or "n/a" for b in sub["anchor_band"]]
    order = [b for b in ("low", "mid", "high") if b in bands] + sorted(
        set(bands) - {"low", "mid", "high"}
    )
    for i, band in enumerate(order):
        y = sub["baseline_mean"].to_numpy(dtype=float)[[b == band for b in bands]]
        b2.plot(np.full(len(y), i) + np.linspace(-0.15, 0.15, len(y)), y, "o", alpha=0.6)
        b2.plot([i - 0.3, i + 0.3], [y.mean()] * 2, color="k", lw=2)
    b2.set_xticks(range(len(order)), order)
    b2.set(
        ylim=(-2, 102),
        xlabel="anchor band (item)",
        ylabel="baseline mean",
        title="B2: baseline mean by anchor band",
    )
    if not order:
        na(b2, "no parsed baseline")
    fig.suptitle(title)
    save_png(fig, path)


def _revision_figure(data: pd.DataFrame, rho: float, title: str, path: Path) -> None:
    """B6: each artefact's revision rate against its σ0, Spearman's ρ in the title."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 4))
    ok = data.dropna(subset=["sigma0", "revision_rate"])
    ax.plot(ok["sigma0"], ok["revision_rate"], "o")
    if not len(ok):
        na(ax, "no artefact with a σ0 and a parsed update")
    rho_text = "n/a" if math.isnan(rho) else f"{rho:.2f}"
    ax.set(
        ylim=(-0.02, 1.02),
        xlabel="σ0 (baseline SD)",
        ylabel="revision rate (pf + pc)",
        title=f"B6: {title}, Spearman ρ = {rho_text}",
    )
    save_png(fig, path)


def _push_figure(data: pd.DataFrame, path: Path) -> None:
    """Fig. 5: pf per class and push with bootstrap CIs, one group per (model, dataset)."""
    plt = pyplot()
    groups = list(data.groupby(["model", "dataset"], sort=False))
    fig, ax = plt.subplots(figsize=(1.5 + 2.2 * max(len(groups), 1), 4))
    bars = [(c, d) for c in CLASSES for d in DIRECTIONS]
    for j, (cls, d) in enumerate(bars):
        sub = data[(data["validity"] == cls) & (data["push"] == d)]
        x = np.arange(len(sub)) + (j - 1.5) * 0.2
        pf = sub["pf"].to_numpy(dtype=float)
        colour = "tab:green" if cls == "valid" else "tab:red"
        ax.bar(
            x,
            np.nan_to_num(pf),
            0.2,
            color=colour,
            alpha=1.0 if d == "lower" else 0.45,
            yerr=whisker(sub["pf"], sub["pf_ci_low"], sub["pf_ci_high"]),
            capsize=2,
            label=f"{cls}, {d}",
        )
        for xi in x[np.isnan(pf)]:
            ax.text(xi, 0.02, "n/a", rotation=90, ha="center", fontsize=7)
    ax.set_xticks(range(len(groups)), [f"{m} / {d}" for (m, d), _ in groups], fontsize=7)
    ax.set(ylim=(0, 1.05), ylabel="pf (follow rate)", title="Fig. 5: follow rate, lower vs raise")
    ax.legend(fontsize=7)
    save_png(fig, path)


def draw_diagnostics(
    p: DiscernmentParams,
    scores: Scores,
    labels: pd.DataFrame,
    items: Sequence[Entry],
    figures: Path,
    plots: Path,
) -> Drawn:
    """Fig. 5 (``lower_vs_raise``), Figs. B1/B2 (``initial_scoring``) and Fig. B6
    (``revision_vs_sigma0``): their data as CSV into ``plots``, the PNGs into ``figures``; the
    parent logs Fig. 5, each (model, dataset)'s child its own B1/B2 and B6 and Fig. 5."""
    initial = initial_scoring_data(labels, items)
    push = lower_vs_raise_data(scores)
    revision = revision_data(scores_table(labels), p.k, p.baseline)
    write_csv(initial, plots / "initial_scoring.csv")
    write_csv(push, plots / "lower_vs_raise.csv")
    write_csv(revision, plots / "revision_vs_sigma0.csv")
    fig5 = figures / "lower_vs_raise.png"
    _push_figure(push, fig5)
    children: dict[tuple[str, str], list[tuple[Path, str]]] = {}
    for model, by_dataset in scores.items():
        for dataset, ms in by_dataset.items():
            name, title = f"{model}__{dataset}.png", f"{model} / {dataset}"
            b12, b6 = figures / f"initial_scoring__{name}", figures / f"revision_vs_sigma0__{name}"
            here = (initial["model"] == model) & (initial["dataset"] == dataset)
            _initial_figure(initial[here], title, b12)
            here = (revision["model"] == model) & (revision["dataset"] == dataset)
            rho = ms.get("revision_sigma0_spearman", math.nan)
            _revision_figure(revision[here], rho, title, b6)
            children[(model, dataset)] = [(b12, ""), (b6, ""), (fig5, "")]
    return Drawn([fig5], children)
