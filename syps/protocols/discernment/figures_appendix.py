"""The appendix of discernment's figures: pf and pc per class under each threshold rule as
changes from the paper's 2σ0 (Fig. B3) and the magnitude-aware plane, mf - mc for invalid
against valid arguments (Fig. B5), across (model, dataset); where the arguments are rated, pf
weighted beside unweighted (Figs. A1c, d) and per (model, dataset) the densities of the valid
and the invalid arguments' ratings (Fig. A1b); where the judge rated them, the ratings' budget
diagnostic (Fig. A1a). Plot data as CSV (``dvc plots``), PNGs drawn from it.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import gaussian_kde

from syps.core.plotting import pyplot, whisker
from syps.core.report import Scores
from syps.core.reporting import Drawn
from syps.protocols.discernment.figures import na, save_png, write_csv
from syps.protocols.discernment.metrics import CLASSES, K_GRID, REF_K, k_key, threshold_rules
from syps.protocols.discernment.params import DiscernmentParams
from syps.protocols.discernment.ratings_budget import BUDGET_COLUMNS, converged_budget, read_budget
from syps.protocols.discernment.scoring import RATINGS_COLUMNS, ratings_table, setup_of

THRESHOLD_COLUMNS = [
    "model",
    "dataset",
    "rule",
    "k",
    "validity",
    "rate",
    "value",
    "change_pp",
    "row",
]
MAGNITUDE_COLUMNS = [
    "model",
    "dataset",
    "x_mf_minus_mc_invalid",
    "x_ci_low",
    "x_ci_high",
    "y_mf_minus_mc_valid",
    "y_ci_low",
    "y_ci_high",
]
WEIGHTING_COLUMNS = [
    "model",
    "dataset",
    "validity",
    "weighting",
    "pf",
    "pf_ci_low",
    "pf_ci_high",
    "n_artefacts",
    "weighted_minus_unweighted",
    "weighted_minus_unweighted_ci_low",
    "weighted_minus_unweighted_ci_high",
    "row",
]
CLASS_COLOURS = {"valid": "tab:green", "invalid": "tab:red"}
REF = k_key(REF_K)


def threshold_changes_data(scores: Scores) -> pd.DataFrame:
    """Per (model, dataset, threshold rule, class, rate pf|pc): the rate under the rule and
    its change from the 2σ0 reference in percentage points (0 at the reference itself), rules
    in the order of k with ``p95`` last; ``row`` names the bar."""
    rules = sorted(threshold_rules().items(), key=lambda r: (math.isnan(r[1]), r[1]))
    rows = []
    for model, ds in scores.items():
        for dataset, ms in ds.items():
            for rule, k in rules:
                for cls in CLASSES:
                    for rate in ("pf", "pc"):
                        key = f"{rate}_{cls}_{rule}"
                        v = ms.get(key, math.nan)
                        ref = math.nan if math.isnan(v) else 0.0
                        change = ref if rule == REF else ms.get(f"{key}_minus_{REF}_pp", math.nan)
                        row = f"{model} | {dataset} | {cls} {rate} | {rule}"
                        rows.append([model, dataset, rule, k, cls, rate, v, change, row])
    return pd.DataFrame(rows, columns=THRESHOLD_COLUMNS)


def magnitude_plane_data(scores: Scores) -> pd.DataFrame:
    """The magnitude-aware plane: per (model, dataset) mf - mc for invalid (x) and valid (y)
    arguments with their bootstrap CIs."""
    rows = [
        [model, dataset]
        + [
            ms.get(f"mf_minus_mc_{cls}{s}", math.nan)
            for cls in ("invalid", "valid")
            for s in ("", "_ci_low", "_ci_high")
        ]
        for model, ds in scores.items()
        for dataset, ms in ds.items()
    ]
    return pd.DataFrame(rows, columns=MAGNITUDE_COLUMNS)


def weighting_data(scores: Scores) -> pd.DataFrame:
    """Per (model, dataset, class) of a weighted run: pf weighted and unweighted, each with its
    bootstrap CI and support, and the weighted minus the unweighted rate with its CI (on both
    rows of the class); empty for a run
    whose arguments weigh 1 (no ``pf_<class>_unweighted``: there the two are equal)."""
    rows = []
    for model, ds in scores.items():
        for dataset, ms in ds.items():
            if f"pf_{CLASSES[0]}_unweighted" not in ms:
                continue
            for cls in CLASSES:
                diff = [ms[f"pf_{cls}_minus_unweighted{s}"] for s in ("", "_ci_low", "_ci_high")]
                for weighting, key in (
                    ("weighted", f"pf_{cls}"),
                    ("unweighted", f"pf_{cls}_unweighted"),
                ):
                    cis = [ms.get(f"{key}{s}", math.nan) for s in ("", "_ci_low", "_ci_high", "_n")]
                    row = f"{model} | {dataset} | {cls} | {weighting}"
                    rows.append([model, dataset, cls, weighting, *cis, *diff, row])
    return pd.DataFrame(rows, columns=WEIGHTING_COLUMNS)


def _threshold_figure(data: pd.DataFrame, k: float, path: Path) -> None:
    """B3: pf and pc per class under each threshold rule, as changes from 2σ0 (pp): the k
    sweep as lines, 1.96σ0 and 2.576σ0 as squares on them, the p95 rule at the right."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    kmax = max(K_GRID)
    p95_x = kmax + 0.8
    sweep = {k_key(kk) for kk in K_GRID}
    groups = list(data.groupby(["model", "dataset"], sort=False))
    for ax, rate in zip(axes, ("pf", "pc"), strict=True):
        ax.axhline(0, color="grey", lw=0.5)
        ax.axvline(REF_K, color="k", ls=":", lw=0.8, label="2σ0 reference")
        if k != REF_K:
            ax.axvline(k, color="tab:purple", ls="--", lw=0.8, label=f"run's k = {k:g}")
        for i, ((model, dataset), sub) in enumerate(groups):
            for cls, ls in (("valid", "-"), ("invalid", "--")):
                one = sub[(sub["rate"] == rate) & (sub["validity"] == cls)]
                on = one["rule"].isin(sweep).to_numpy()
                style = {"color": f"C{i % 10}", "ms": 4}
                label = f"{model} / {dataset}: {cls}"
                ax.plot(one["k"][on], one["change_pp"][on], ls, marker="o", label=label, **style)
                alt = one[~on & one["k"].notna()]
                ax.plot(alt["k"], alt["change_pp"], "s", mfc="none", **style)
                p95 = one[one["rule"] == "p95"]
                ax.plot([p95_x] * len(p95), p95["change_pp"], "D", mfc="none", **style)
        ticks = [*np.arange(0, kmax + 0.5, 1.0), p95_x]
        ax.set_xticks(ticks, [*(f"{t:g}" for t in ticks[:-1]), "p95"])
        ax.set(xlabel="threshold δ = k·σ0 (□: 1.96, 2.576)", title=f"{rate}: change from 2σ0")
    axes[0].set_ylabel("change from k = 2 (percentage points)")
    if not groups:
        na(axes[0], "no scores")
    axes[1].legend(fontsize=7)
    fig.suptitle("Fig. B3: threshold alternatives against the 2σ0 reference")
    save_png(fig, path)


def _magnitude_figure(data: pd.DataFrame, path: Path) -> None:
    """B5: mf - mc for invalid (x) against valid (y) arguments with bootstrap error bars."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 5))
    ax.axhline(0, color="grey", lw=0.5)
    ax.axvline(0, color="grey", lw=0.5)
    ends = data[MAGNITUDE_COLUMNS[2:]].to_numpy(dtype=float)
    lim = max(1.0, float(np.nanmax(np.abs(ends))) * 1.1) if np.isfinite(ends).any() else 1.0
    for i, r in enumerate(data.itertuples()):
        x, y = r.x_mf_minus_mc_invalid, r.y_mf_minus_mc_valid
        name = f"{r.model} / {r.dataset}"
        if math.isnan(x) or math.isnan(y):
            ax.annotate(f"{name}: n/a", (0.02, 0.02 + 0.05 * i), xycoords="axes fraction")
            continue
        ax.errorbar(
            x,
            y,
            xerr=[[max(x - r.x_ci_low, 0)], [max(r.x_ci_high - x, 0)]],
            yerr=[[max(y - r.y_ci_low, 0)], [max(r.y_ci_high - y, 0)]],
            fmt="o",
            color=f"C{i % 10}",
            label=name,
            capsize=3,
        )
    ax.set(
        xlim=(-lim, lim),
        ylim=(-lim, lim),
        xlabel="mf − mc, invalid arguments (score points)",
        ylabel="mf − mc, valid arguments (score points)",
        title="Fig. B5: magnitude-aware plane",
    )
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="lower right")
    save_png(fig, path)


def _ratings_figure(data: pd.DataFrame, title: str, path: Path) -> None:
    """A1b: the densities of the valid and the invalid arguments' ratings q (histograms with a
    Gaussian KDE where a class has two distinct ratings), the weights' centre c dashed."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    q = data["q"].to_numpy(dtype=float)
    bins = np.histogram_bin_edges(q, bins=min(20, max(len(q) // 2, 1)))
    pad = (q.max() - q.min()) * 0.2 or 1.0
    grid = np.linspace(q.min() - pad, q.max() + pad, 200)
    for cls in CLASSES:
        qc = data.loc[data["validity"] == cls, "q"].to_numpy(dtype=float)
        colour = CLASS_COLOURS[cls]
        ax.hist(qc, bins, density=True, alpha=0.35, color=colour, label=f"{cls} (n={len(qc)})")
        if len(np.unique(qc)) >= 2:
            ax.plot(grid, gaussian_kde(qc)(grid), color=colour)
    c = float(data["c"].iloc[0])
    ax.axvline(c, color="k", ls="--", lw=0.8, label=f"c = {c:.3g} (weights' centre)")
    ax.set(xlabel="argument rating q", ylabel="density", title=f"Fig. A1b: {title}")
    ax.legend(fontsize=7)
    save_png(fig, path)


def _weighting_figure(data: pd.DataFrame, path: Path) -> None:
    """A1c, d: pf per class, label-confidence weighted beside unweighted, with bootstrap CIs,
    one group per (model, dataset)."""
    plt = pyplot()
    groups = list(data.groupby(["model", "dataset"], sort=False))
    fig, ax = plt.subplots(figsize=(1.5 + 2.2 * max(len(groups), 1), 4))
    bars = [(c, w) for c in CLASSES for w in ("weighted", "unweighted")]
    for j, (cls, w) in enumerate(bars):
        sub = data[(data["validity"] == cls) & (data["weighting"] == w)]
        x = np.arange(len(sub)) + (j - 1.5) * 0.2
        pf = sub["pf"].to_numpy(dtype=float)
        ax.bar(
            x,
            np.nan_to_num(pf),
            0.2,
            color=CLASS_COLOURS[cls],
            alpha=1.0 if w == "weighted" else 0.45,
            yerr=whisker(sub["pf"], sub["pf_ci_low"], sub["pf_ci_high"]),
            capsize=2,
            label=f"{cls}, {w}",
        )
        for xi in x[np.isnan(pf)]:
            ax.text(xi, 0.02, "n/a", rotation=90, ha="center", fontsize=7)
        if w == "unweighted":
            # The change the weighting made, with its CI, over each class's pair of bars.
            d = sub[[f"weighted_minus_unweighted{s}" for s in ("", "_ci_low", "_ci_high")]]
            for xi, (v, lo, hi) in zip(x - 0.1, d.to_numpy(dtype=float), strict=True):
                text = "Δ n/a" if math.isnan(v) else f"Δ {v:+.2f}\n[{lo:+.2f}, {hi:+.2f}]"
                ax.text(xi, 1.0, text, ha="center", va="top", fontsize=6)
    ax.set_xticks(range(len(groups)), [f"{m} / {d}" for (m, d), _ in groups], fontsize=7)
    ax.set(
        ylim=(0, 1.1),
        ylabel="pf (follow rate)",
        title="Figs. A1c, d: follow rate, weighted vs unweighted",
    )
    ax.legend(fontsize=7)
    save_png(fig, path)


def draw_budget(table: pd.DataFrame, threshold: float, png: Path, csv: Path) -> None:
    """``table`` (``ratings_budget.BUDGET_COLUMNS``) as a CSV and as a PNG: τb against the
    comparisons per argument, the threshold dashed and the first budget over it marked."""
    write_csv(table[BUDGET_COLUMNS], csv)
    _budget_figure(table, threshold, png)


def _budget_figure(table: pd.DataFrame, threshold: float, path: Path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(table["budget"], table["tau_b"], marker="o", color="C0")
    ax.axhline(threshold, color="k", ls="--", lw=0.8, label=f"threshold {threshold:g}")
    first = converged_budget(table, threshold)
    if not math.isnan(first):
        ax.axvline(first, color="C2", ls=":", lw=0.8, label=f"first over it: {first:g}")
    ax.set(
        xlabel="comparisons per argument (budget)",
        ylabel="Kendall τb vs the full budget",
        title="Fig. A1a: rating convergence",
    )
    ax.legend(fontsize=7)
    save_png(fig, path)


def draw_appendix(
    p: DiscernmentParams, scores: Scores, labels: pd.DataFrame, figures: Path, plots: Path
) -> Drawn:
    """Fig. B3 (``threshold_changes``), Fig. B5 (``magnitude_plane``) and, for a study that
    rates its arguments, Figs. A1c, d (``weighted_vs_unweighted``) and per (model, dataset)
    Fig. A1b (``rating_density__<model>__<dataset>``, data ``argument_ratings.csv``), for one
    whose judge rated them, Fig. A1a (``ratings_budget``, the labels' budget diagnostic): their
    data as CSV into ``plots``, the PNGs into ``figures``; the parent logs the figures across
    (model, dataset), each child those and its own A1b."""
    changes, magnitude = threshold_changes_data(scores), magnitude_plane_data(scores)
    write_csv(changes, plots / "threshold_changes.csv")
    write_csv(magnitude, plots / "magnitude_plane.csv")
    shared = [figures / "threshold_changes.png", figures / "magnitude_plane.png"]
    _threshold_figure(changes, p.k, shared[0])
    _magnitude_figure(magnitude, shared[1])
    # Without ratings the two CSVs hold their header alone (the dvc plots page then shows an
    # empty plot rather than a file it cannot load) and the PNGs are not drawn.
    weighting = weighting_data(scores)
    write_csv(weighting, plots / "weighted_vs_unweighted.csv")
    if len(weighting):
        shared.append(figures / "weighted_vs_unweighted.png")
        _weighting_figure(weighting, shared[-1])
    budget = read_budget(labels)
    if isinstance(budget, pd.DataFrame):
        shared.append(figures / "ratings_budget.png")
        draw_budget(budget, p.ratings.tau_threshold, shared[-1], plots / "ratings_budget.csv")
    else:
        write_csv(pd.DataFrame(columns=BUDGET_COLUMNS), plots / "ratings_budget.csv")
    rated = setup_of(p).weights is not None and "q" in labels and labels["q"].notna().any()
    ratings = ratings_table(labels) if rated else pd.DataFrame(columns=RATINGS_COLUMNS)
    write_csv(ratings, plots / "argument_ratings.csv")
    own: dict[tuple[str, str], list[tuple[Path, str]]] = {}
    for (model, dataset), sub in ratings.groupby(["model", "dataset"], sort=True):
        png = figures / f"rating_density__{model}__{dataset}.png"
        _ratings_figure(sub, f"{model} / {dataset}", png)
        own[(str(model), str(dataset))] = [(png, "")]
    children = {
        (model, dataset): [*own.get((model, dataset), []), *((f, "") for f in shared)]
        for model, by_dataset in scores.items()
        for dataset in by_dataset
    }
    return Drawn(shared, children)
