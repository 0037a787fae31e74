"""The ratings' budget diagnostic drawn (Big-Big-SycoBench Fig. A1a): Kendall's τb of each
budget's ranking against the reference budget's, with the convergence threshold, and its CSV.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from syps.core.io import atomic_write
from syps.core.plotting import pyplot
from syps.protocols.discernment.ratings_budget import BUDGET_COLUMNS, converged_budget


def draw_budget(table: pd.DataFrame, threshold: float, png: Path, csv: Path) -> None:
    """``table`` (``ratings_budget.BUDGET_COLUMNS``) as a CSV and as a PNG: τb against the
    comparisons per argument, the threshold dashed and the first budget over it marked."""
    atomic_write(csv, lambda t: table[BUDGET_COLUMNS].to_csv(t, index=False))
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
    fig.tight_layout()
    atomic_write(png, lambda t: fig.savefig(t, format="png"))
    plt.close(fig)
