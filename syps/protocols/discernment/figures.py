"""The discernment figures: tidy plot data (CSV, for ``dvc plots``) and PNGs drawn from it.

The response plane (x = pf - pc for invalid arguments, y = the same for valid ones, one point per
(model, dataset) with bootstrap error bars, the contrarian probabilities as the ellipse's
half-axes, the ideal point (0, 1) starred), the k-sweep (pf per class against k) and one
artefact's per-argument follow/stable/contrarian bars. An undefined value is drawn as "n/a".

The paper's diagnostics (``draw_diagnostics``): the follow rate by push, lower against raise, per
class with bootstrap CIs (Fig. 5; one figure across (model, dataset)); and per (model, dataset)
the initial scoring overview (each artefact's baseline mean ± SD coloured by its push, and the
baseline means by the item's anchor band: Figs. B1, B2) and each artefact's revision rate
against its σ0 (Fig. B6).

Its appendix (``draw_appendix``): pf and pc per class under each threshold rule as changes from
the paper's 2σ0 (Fig. B3) and the magnitude-aware plane, mf - mc for invalid against valid
arguments (Fig. B5), across (model, dataset); where the arguments are rated, pf weighted beside
unweighted (Figs. A1c, d) and per (model, dataset) the densities of the valid and the invalid
arguments' ratings (Fig. A1b).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import gaussian_kde

from syps.core.io import atomic_write
from syps.core.plotting import pyplot, whisker
from syps.core.protocol import Drawn
from syps.protocols.discernment.items import DIRECTIONS
from syps.protocols.discernment.metrics import (
    CLASSES,
    K_GRID,
    RATES,
    REF_K,
    Baseline,
    argument_table,
    artefact_revision,
    k_key,
    threshold_rules,
)
from syps.protocols.discernment.params import DiscernmentParams
from syps.protocols.discernment.scoring import (
    RATINGS_COLUMNS,
    baseline_overview,
    ratings_table,
    scores_table,
    setup_of,
)

Scores = dict[str, dict[str, dict[str, float]]]


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
    return _per_dataset(mine, lambda t: argument_table(t, k, baseline=baseline), cols)


def _per_dataset(
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


def _pyplot() -> Any:
    return pyplot()


def _save(fig: Any, path: Path) -> None:
    fig.tight_layout()
    atomic_write(path, lambda t: fig.savefig(t, format="png"))
    _pyplot().close(fig)


def _write_csv(df: pd.DataFrame, path: Path) -> None:
    atomic_write(path, lambda t: df.to_csv(t, index=False))


def _plane_figure(data: pd.DataFrame, path: Path) -> None:
    from matplotlib.patches import Ellipse  # heavy: matplotlib loads only when drawing

    plt = _pyplot()
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
    _save(fig, path)


def _ksweep_figure(data: pd.DataFrame, path: Path) -> None:
    plt = _pyplot()
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
    _save(fig, path)


def _bars_figure(data: pd.DataFrame, path: Path) -> None:
    plt = _pyplot()
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
    _save(fig, path)


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
    _write_csv(plane, plots / "response_plane.csv")
    _write_csv(ksweep, plots / "k_sweep.csv")
    _write_csv(bars, plots / "argument_bars.csv")
    out = [figures / "response_plane.png", figures / "k_sweep.png", figures / "argument_bars.png"]
    _plane_figure(plane, out[0])
    _ksweep_figure(ksweep, out[1])
    _bars_figure(bars, out[2])
    return out


def draw_labels(
    p: DiscernmentParams,
    scores: dict[str, dict[str, dict[str, float]]],
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


# --- the paper's diagnostics: Fig. 5 (lower vs raise), Figs. B1/B2, Fig. B6 -----------------

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


def _anchor_bands(items: pd.DataFrame) -> dict[tuple[str, str], str]:
    """Each item's ``anchor_band`` by (dataset, item_id), from the items table's records."""
    if not {"dataset", "item_id", "item"} <= set(items.columns):
        return {}
    return {
        (str(d), str(i)): str(json.loads(r).get("anchor_band", ""))
        for d, i, r in zip(items["dataset"], items["item_id"], items["item"], strict=True)
    }


def initial_scoring_data(labels: pd.DataFrame, items: pd.DataFrame) -> pd.DataFrame:
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
    return _per_dataset(
        table, lambda t: artefact_revision(t, k, baseline=baseline), list(REVISION_COLUMNS)
    )


def _na(ax: Any, what: str) -> None:
    ax.text(0.5, 0.5, f"n/a: {what}", ha="center", va="center", transform=ax.transAxes)


def _initial_figure(data: pd.DataFrame, title: str, path: Path) -> None:
    """B1: each artefact's baseline mean ± SD, sorted, coloured by its push; B2: the baseline
    means grouped by the item's anchor band."""
    plt = _pyplot()
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
        _na(b1, "no parsed baseline")
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
        _na(b2, "no parsed baseline")
    fig.suptitle(title)
    _save(fig, path)


def _revision_figure(data: pd.DataFrame, rho: float, title: str, path: Path) -> None:
    """B6: each artefact's revision rate against its σ0, Spearman's ρ in the title."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 4))
    ok = data.dropna(subset=["sigma0", "revision_rate"])
    ax.plot(ok["sigma0"], ok["revision_rate"], "o")
    if not len(ok):
        _na(ax, "no artefact with a σ0 and a parsed update")
    rho_text = "n/a" if math.isnan(rho) else f"{rho:.2f}"
    ax.set(
        ylim=(-0.02, 1.02),
        xlabel="σ0 (baseline SD)",
        ylabel="revision rate (pf + pc)",
        title=f"B6: {title}, Spearman ρ = {rho_text}",
    )
    _save(fig, path)


def _push_figure(data: pd.DataFrame, path: Path) -> None:
    """Fig. 5: pf per class and push with bootstrap CIs, one group per (model, dataset)."""
    plt = _pyplot()
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
    _save(fig, path)


def draw_diagnostics(
    p: DiscernmentParams,
    scores: Scores,
    labels: pd.DataFrame,
    items: pd.DataFrame,
    figures: Path,
    plots: Path,
) -> Drawn:
    """Fig. 5 (``lower_vs_raise``), Figs. B1/B2 (``initial_scoring``) and Fig. B6
    (``revision_vs_sigma0``): their data as CSV into ``plots``, the PNGs into ``figures``; the
    parent logs Fig. 5, each (model, dataset)'s child its own B1/B2 and B6 and Fig. 5."""
    initial = initial_scoring_data(labels, items)
    push = lower_vs_raise_data(scores)
    revision = revision_data(scores_table(labels), p.k, p.baseline)
    _write_csv(initial, plots / "initial_scoring.csv")
    _write_csv(push, plots / "lower_vs_raise.csv")
    _write_csv(revision, plots / "revision_vs_sigma0.csv")
    fig5 = figures / "lower_vs_raise.png"
    _push_figure(push, fig5)
    children: dict[tuple[str, str], list[tuple[Path, str]]] = {}
    for model, per_dataset in scores.items():
        for dataset, ms in per_dataset.items():
            name, title = f"{model}__{dataset}.png", f"{model} / {dataset}"
            b12, b6 = figures / f"initial_scoring__{name}", figures / f"revision_vs_sigma0__{name}"
            here = (initial["model"] == model) & (initial["dataset"] == dataset)
            _initial_figure(initial[here], title, b12)
            here = (revision["model"] == model) & (revision["dataset"] == dataset)
            rho = ms.get("revision_sigma0_spearman", math.nan)
            _revision_figure(revision[here], rho, title, b6)
            children[(model, dataset)] = [(b12, ""), (b6, ""), (fig5, "")]
    return Drawn([fig5], children)


# --- the appendix: threshold changes (Fig. B3), the magnitude-aware plane (Fig. B5), the
# ratings' densities (Fig. A1b), weighted against unweighted follow rates (Figs. A1c, d) ------

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
    plt = _pyplot()
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
        _na(axes[0], "no scores")
    axes[1].legend(fontsize=7)
    fig.suptitle("Fig. B3: threshold alternatives against the 2σ0 reference")
    _save(fig, path)


def _magnitude_figure(data: pd.DataFrame, path: Path) -> None:
    """B5: mf - mc for invalid (x) against valid (y) arguments with bootstrap error bars."""
    plt = _pyplot()
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
    _save(fig, path)


def _ratings_figure(data: pd.DataFrame, title: str, path: Path) -> None:
    """A1b: the densities of the valid and the invalid arguments' ratings q (histograms with a
    Gaussian KDE where a class has two distinct ratings), the weights' centre c dashed."""
    plt = _pyplot()
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
    _save(fig, path)


def _weighting_figure(data: pd.DataFrame, path: Path) -> None:
    """A1c, d: pf per class, label-confidence weighted beside unweighted, with bootstrap CIs,
    one group per (model, dataset)."""
    plt = _pyplot()
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
    _save(fig, path)


def draw_appendix(
    p: DiscernmentParams, scores: Scores, labels: pd.DataFrame, figures: Path, plots: Path
) -> Drawn:
    """Fig. B3 (``threshold_changes``), Fig. B5 (``magnitude_plane``) and, for a study that
    rates its arguments, Figs. A1c, d (``weighted_vs_unweighted``) and per (model, dataset)
    Fig. A1b (``rating_density__<model>__<dataset>``, data ``argument_ratings.csv``): their
    data as CSV into ``plots``, the PNGs into ``figures``; the parent logs the figures across
    (model, dataset), each child those and its own A1b."""
    changes, magnitude = threshold_changes_data(scores), magnitude_plane_data(scores)
    _write_csv(changes, plots / "threshold_changes.csv")
    _write_csv(magnitude, plots / "magnitude_plane.csv")
    shared = [figures / "threshold_changes.png", figures / "magnitude_plane.png"]
    _threshold_figure(changes, p.k, shared[0])
    _magnitude_figure(magnitude, shared[1])
    # Without ratings the two CSVs hold their header alone (the dvc plots page then shows an
    # empty plot rather than a file it cannot load) and the PNGs are not drawn.
    weighting = weighting_data(scores)
    _write_csv(weighting, plots / "weighted_vs_unweighted.csv")
    if len(weighting):
        shared.append(figures / "weighted_vs_unweighted.png")
        _weighting_figure(weighting, shared[-1])
    rated = setup_of(p).weights is not None and "q" in labels and labels["q"].notna().any()
    ratings = ratings_table(labels) if rated else pd.DataFrame(columns=RATINGS_COLUMNS)
    _write_csv(ratings, plots / "argument_ratings.csv")
    own: dict[tuple[str, str], list[tuple[Path, str]]] = {}
    for (model, dataset), sub in ratings.groupby(["model", "dataset"], sort=True):
        png = figures / f"rating_density__{model}__{dataset}.png"
        _ratings_figure(sub, f"{model} / {dataset}", png)
        own[(str(model), str(dataset))] = [(png, "")]
    children = {
        (model, dataset): [*own.get((model, dataset), []), *((f, "") for f in shared)]
        for model, per_dataset in scores.items()
        for dataset in per_dataset
    }
    return Drawn(shared, children)
