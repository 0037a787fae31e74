"""Plotting helpers every protocol's figures share: a headless pyplot, an atomic PNG save,
and error-bar lengths from CI bounds."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from syps.core.io import atomic_write

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def pyplot() -> Any:
    import matplotlib  # heavy: matplotlib loads only when a figure is drawn

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # heavy: after use("Agg"), so no GUI backend is chosen

    return plt


def save(fig: Figure, path: Path) -> None:
    plt = pyplot()
    fig.tight_layout()
    atomic_write(path, lambda p: fig.savefig(p, format="png"))
    plt.close(fig)


def whisker(values: pd.Series, low: pd.Series, high: pd.Series) -> np.ndarray:
    """Asymmetric error bar lengths; an undefined CI draws no bar."""
    err = np.vstack([values - low, high - values]).astype(float)
    out: np.ndarray = np.nan_to_num(err, nan=0.0)
    return out
