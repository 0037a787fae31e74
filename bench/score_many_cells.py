"""Scoring many models at once: `syps score` on one SyPS label table of many (model, dataset)
cells, as a nine-model study with many wordings produces.

    python bench/score_many_cells.py                 # 40 models x 10 datasets x 150 items
    python bench/score_many_cells.py --models 9 --datasets 3 --items 3777

A seeded table of models x datasets x items x the eight variants (about 40% sycophantic, 5%
UNCLEAR) is written as a CSV and scored by `python -m syps.cli score` in a fresh process (what
a user runs: imports, reading, 1,000 resamples, every metric and test, the JSON), three times;
the median is printed with the in-process time of the scoring alone
(``syps.protocols.cues.metrics.score_labels``) and its time per cell. Issue 36's target: under
5 s for 400 cells of 150 items on two cores. The default sizes are that case.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from syps.protocols.cues.metrics import score_labels
from syps.protocols.cues.params import VARIANTS


def table(models: int, datasets: int, items: int, seed: int = 0) -> pd.DataFrame:
    """The synthetic label table: one row per (model, dataset, item, variant)."""
    rng = np.random.default_rng(seed)
    shape = (models, datasets, items, len(VARIANTS))
    label = (rng.random(shape) < 0.4).astype(float)
    label[rng.random(shape) < 0.05] = np.nan
    m, d, i, v = np.meshgrid(
        np.arange(models), np.arange(datasets), np.arange(items), np.arange(len(VARIANTS)),
        indexing="ij",
    )  # fmt: skip
    return pd.DataFrame(
        {
            "model": np.char.add("m", m.ravel().astype(str)),
            "dataset": np.char.add("d", d.ravel().astype(str)),
            "item_id": np.char.add("i", i.ravel().astype(str)),
            "variant": np.array(VARIANTS)[v.ravel()],
            "label": label.ravel(),
        }
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", type=int, default=40)
    ap.add_argument("--datasets", type=int, default=10)
    ap.add_argument("--items", type=int, default=150)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    df = table(a.models, a.datasets, a.items)
    cells = a.models * a.datasets
    with tempfile.TemporaryDirectory() as tmp:
        csv = Path(tmp) / "labels.csv"
        df.to_csv(csv, index=False)
        walls = []
        for _ in range(a.repeats):
            t = time.perf_counter()
            subprocess.run(
                [sys.executable, "-m", "syps.cli", "score", str(csv)],
                check=True, stdout=subprocess.DEVNULL,
            )  # fmt: skip
            walls.append(time.perf_counter() - t)
    t = time.perf_counter()
    score_labels(df, 1000, 0.95, 0)
    inproc = time.perf_counter() - t
    print(f"{len(df):,} labels, {cells} (model, dataset) cells of {a.items} items, B = 1000")
    print(f"syps score (fresh process, median of {a.repeats}): {statistics.median(walls):.2f} s")
    print(f"score_labels in process: {inproc:.2f} s, {1000 * inproc / cells:.1f} ms a cell")


if __name__ == "__main__":
    main()
