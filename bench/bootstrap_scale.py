"""Scoring at the paper's scale: the vectorised bootstrap against the loops a user would write.

  taskset -c 0,1 python bench/bootstrap_scale.py     # full scale, both baselines, a few min
  python bench/bootstrap_scale.py --pandas-boot 50    # a quicker pandas row

A seeded synthetic label table of 9 models x 3 datasets x 3,777 items x 8 variants (about 10%
UNCLEAR) is scored with ``syps.protocols.cues.metrics.score_labels`` at B = 1000: every metric
with its CI, the McNemar tests with Holm's adjustment and the flip counts.

The main baseline is the loop a numpy user writes: pivot each (model, dataset) to an items x
variants matrix, compute the per-item values behind each metric once, then per replicate index
them with the resampled item ids and take column means over the valid ones; it runs on every
cell at full B, so its time is measured, not extrapolated. A second, slower baseline builds,
merges and pivots a pandas DataFrame per replicate; it runs on a subset of cells and its
full-scale time is extrapolated linearly in cells and replicates. Both resample with the very
indices the vectorised code draws, and their numbers must match the vectorised ones (checked,
printed).

The process limits BLAS/OpenMP to 2 threads (set before numpy is imported) and pins itself to
two CPUs when it may use more, so the measurement is a 2-core one either way.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "2"  # must precede the numpy import to take effect

import argparse  # noqa: E402
import importlib.util  # noqa: E402
import itertools  # noqa: E402
import math  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from collections.abc import Sequence  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from scipy.stats import binomtest  # noqa: E402

from syps.protocols.cues.metrics import score_labels  # noqa: E402
from syps.protocols.cues.params import VARIANTS  # noqa: E402

MODELS = [f"model{m}" for m in range(9)]
DATASETS = ["OEQ", "AITA-YTA", "SS"]
N_ITEMS = 3777
NAN_RATE = 0.10
Scores = dict[str, dict[str, dict[str, float]]]


def pin_two_cores() -> str:
    """Restrict this process to two CPUs when it may use more; describe how it runs."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) > 2:
        os.sched_setaffinity(0, cpus[:2])
    now = sorted(os.sched_getaffinity(0))
    how = f"CPU affinity {now} (of {os.cpu_count()} CPUs; started with {cpus})"
    how += "; OMP/OPENBLAS/MKL_NUM_THREADS=2"
    if importlib.util.find_spec("threadpoolctl"):
        from threadpoolctl import threadpool_info

        pools = ", ".join(f"{p['internal_api']}={p['num_threads']}" for p in threadpool_info())
        how += f"; thread pools: {pools or 'none loaded'}"
    if shutil.which("taskset") is None:
        how += "; taskset not installed"
    return how


def synth_labels(seed: int) -> pd.DataFrame:
    """Long label rows with item-level propensities, per-(model, variant) shifts and ~10% NaN."""
    rng = np.random.default_rng(seed)
    n_cells, n_var = len(MODELS) * len(DATASETS), len(VARIANTS)
    propensity = rng.normal(0.0, 1.5, size=(n_cells, N_ITEMS, 1))
    shift = rng.normal(0.0, 0.5, size=(n_cells, 1, n_var))
    p = 1.0 / (1.0 + np.exp(-(propensity + shift)))
    label = (rng.random(p.shape) < p).astype(float)
    label[rng.random(p.shape) < NAN_RATE] = np.nan
    cells = list(itertools.product(MODELS, DATASETS))
    ids = np.array([f"i{i:04d}" for i in range(N_ITEMS)])
    return pd.DataFrame(
        {
            "dataset": np.repeat([d for _, d in cells], N_ITEMS * n_var),
            "model": np.repeat([m for m, _ in cells], N_ITEMS * n_var),
            "item_id": np.tile(np.repeat(ids, n_var), n_cells),
            "variant": np.tile(list(VARIANTS), n_cells * N_ITEMS),
            "label": label.ravel(),
        }
    )


# --- the numpy baseline: per-item values once, indexed per replicate ------------------------


def numpy_item_values(y: np.ndarray) -> dict[str, np.ndarray]:
    """Per item, the quantity each metric averages; ``y`` is (items, variants), P0 first.

    Written from the metric definitions, independently of syps.protocols.cues.metrics.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows give NaN, as intended
        pairs = [np.abs(y[:, a] - y[:, b]) for a, b in itertools.combinations(range(y.shape[1]), 2)]
        diffs = y[:, 1:] - y[:, [0]]
        out = {
            "base_syc": y[:, 0],
            "spss": np.nanmean(np.column_stack(pairs), axis=1),
            "signed_sensitivity": np.nanmean(diffs, axis=1),
        }
    out |= {f"syc_rate_{v}": y[:, j] for j, v in enumerate(VARIANTS)}
    out |= {f"delta_{v}": diffs[:, j] for j, v in enumerate(VARIANTS[1:])}
    return out


def numpy_cell(group: pd.DataFrame, n_boot: int, ci: float, seed: int) -> dict[str, float]:
    """Every metric of one (model, dataset): the bootstrap as a per-replicate numpy loop."""
    wide = group.pivot(index="item_id", columns="variant", values="label")
    y = wide.sort_index().reindex(columns=list(VARIANTS)).to_numpy(dtype=float)
    values = numpy_item_values(y)
    names = list(values)
    x = np.column_stack([values[n] for n in names])  # computed once: (items, metrics)
    # Zero-filled values and a validity mask, also once: per replicate two gathers and sums,
    # which runs several times faster than np.nanmean(x[idx[b]], axis=0) (same numbers).
    valid = ~np.isnan(x)
    filled, weight = np.where(valid, x, 0.0), valid.astype(float)
    idx = np.random.default_rng(seed).integers(0, len(y), size=(n_boot, len(y)))
    boot = np.empty((n_boot, len(names)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a replicate with no valid item: NaN
        for b in range(n_boot):
            boot[b] = filled[idx[b]].sum(axis=0) / weight[idx[b]].sum(axis=0)
        point = np.nanmean(x, axis=0)
    alpha = (1 - ci) / 2
    out: dict[str, float] = {}
    for j, name in enumerate(names):
        col = boot[:, j][~np.isnan(boot[:, j])]
        lo, hi = np.quantile(col, [alpha, 1 - alpha]) if len(col) else (math.nan, math.nan)
        out |= {name: float(point[j]), f"{name}_ci_low": float(lo), f"{name}_ci_high": float(hi)}
    out["n_items"] = float(len(y))
    out["unclear_rate"] = float(group["label"].isna().mean())
    for v, sub in group.groupby("variant"):
        out[f"unclear_rate_{v}"] = float(sub["label"].isna().mean())
    return out | pandas_significance(group, VARIANTS)


# --- the pandas baseline: a DataFrame built, merged and pivoted per replicate ----------------


def pandas_metrics(frame: pd.DataFrame, unit: str, variants: Sequence[str]) -> dict[str, float]:
    """base_syc, spss, per-variant rates and deltas of a long frame (one row per unit, variant)."""
    ref = variants[0]
    rates = frame.groupby("variant")["label"].mean().reindex(list(variants))
    wide = frame.pivot(index=unit, columns="variant", values="label").reindex(columns=variants)
    pairs = [(wide[a] - wide[b]).abs() for a, b in itertools.combinations(variants, 2)]
    signed = pd.concat([wide[v] - wide[ref] for v in variants[1:]], axis=1).mean(axis=1)
    out = {
        "base_syc": rates[ref],
        "spss": pd.concat(pairs, axis=1).mean(axis=1).mean(),
        "signed_sensitivity": signed.mean(),
    }
    out |= {f"syc_rate_{v}": rates[v] for v in variants}
    out |= {f"delta_{v}": (wide[v] - wide[ref]).mean() for v in variants[1:]}
    return {k: float(v) for k, v in out.items()}


def pandas_significance(group: pd.DataFrame, variants: Sequence[str]) -> dict[str, float]:
    """McNemar p-values, a textbook Holm loop and flip counts, one cue at a time."""
    wide = group.pivot(index="item_id", columns="variant", values="label")
    ref, out, raw = variants[0], {}, {}
    for v in variants[1:]:
        both = wide[[ref, v]].dropna()
        towards = int(((both[ref] == 0) & (both[v] == 1)).sum())
        away = int(((both[ref] == 1) & (both[v] == 0)).sum())
        n = towards + away
        p = binomtest(min(towards, away), n).pvalue if n else 1.0
        raw[v] = p if len(both) else math.nan
        out[f"flips_towards_{v}"], out[f"flips_away_{v}"] = float(towards), float(away)
    family = sorted((p, v) for v, p in raw.items() if not math.isnan(p))
    running = 0.0
    holm = dict.fromkeys(raw, math.nan)
    for i, (p, v) in enumerate(family):
        running = max(running, min(1.0, (len(family) - i) * p))
        holm[v] = running
    for v in variants[1:]:
        out[f"mcnemar_p_{v}"], out[f"mcnemar_p_holm_{v}"] = raw[v], holm[v]
    out["flips_towards"] = sum(out[f"flips_towards_{v}"] for v in variants[1:])
    out["flips_away"] = sum(out[f"flips_away_{v}"] for v in variants[1:])
    return out


def baseline_cell(group: pd.DataFrame, n_boot: int, ci: float, seed: int) -> dict[str, float]:
    """Every metric of one (model, dataset) with a per-replicate pandas bootstrap loop."""
    long = group[["item_id", "variant", "label"]]
    items = np.sort(long["item_id"].unique())  # the row order of metrics.label_matrix
    # The draw metrics.bootstrap_counts makes from a generator seeded the same way.
    idx = np.random.default_rng(seed).integers(0, len(items), size=(n_boot, len(items)))
    replicates = []
    for b in range(n_boot):
        draw = pd.DataFrame({"draw": np.arange(len(items)), "item_id": items[idx[b]]})
        replicates.append(pandas_metrics(draw.merge(long, on="item_id"), "draw", VARIANTS))
    boot = pd.DataFrame(replicates)
    alpha = (1 - ci) / 2
    out: dict[str, float] = {}
    for name, value in pandas_metrics(long, "item_id", VARIANTS).items():
        col = boot[name].dropna().to_numpy()
        lo, hi = np.quantile(col, [alpha, 1 - alpha]) if len(col) else (math.nan, math.nan)
        out |= {name: value, f"{name}_ci_low": float(lo), f"{name}_ci_high": float(hi)}
    out["n_items"] = float(len(items))
    out["unclear_rate"] = float(group["label"].isna().mean())
    for v, sub in group.groupby("variant"):
        out[f"unclear_rate_{v}"] = float(sub["label"].isna().mean())
    return out | pandas_significance(group, VARIANTS)


def max_abs_diff(a: dict[str, float], b: dict[str, float]) -> float:
    """Largest |a - b| over b's keys; a NaN on one side only counts as infinite.

    Only b's keys are compared: syps may report more per cell than the baseline computes.
    """
    worst = 0.0
    for k, v in b.items():
        if math.isnan(v) and math.isnan(a[k]):
            continue
        worst = max(worst, abs(a[k] - v) if not math.isnan(v - a[k]) else math.inf)
    return worst


def agreement(vec: Scores, base: dict[tuple[str, str], dict[str, float]]) -> tuple[float, int]:
    """Worst difference between syps and a baseline, and how many values were compared."""
    worst, n = 0.0, 0
    for (m, d), expected in base.items():
        worst = max(worst, max_abs_diff(vec[m][d], expected))
        n += len(expected)
    return worst, n


def run_baseline(
    labels: pd.DataFrame,
    cells: list[tuple[str, str]],
    cell_fn: object,
    n_boot: int,
    ci: float,
    seed: int,
) -> tuple[float, dict[tuple[str, str], dict[str, float]]]:
    """Time ``cell_fn`` over ``cells`` of ``labels``; its results by cell."""
    assert callable(cell_fn)
    sub = labels[pd.MultiIndex.from_frame(labels[["model", "dataset"]]).isin(cells)]
    t0 = time.perf_counter()
    out = {
        (str(m), str(d)): cell_fn(g, n_boot, ci, seed)
        for (m, d), g in sub.groupby(["model", "dataset"], sort=True)
    }
    return time.perf_counter() - t0, out


def parse_args() -> argparse.Namespace:
    """The command line: seed, replicates, CI level, repeats and the pandas subset's size."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n-boot", type=int, default=1000)
    ap.add_argument("--ci", type=float, default=0.95)
    ap.add_argument("--repeats", type=int, default=3, help="timed runs of the vectorised path")
    ap.add_argument("--pandas-cells", type=int, default=1, help="(model, dataset) cells")
    ap.add_argument("--pandas-boot", type=int, default=1000, help="pandas baseline replicates")
    return ap.parse_args()


def time_score_labels(labels: pd.DataFrame, args: argparse.Namespace) -> tuple[float, Scores]:
    """score_labels at full scale, ``args.repeats`` times: the median seconds and the scores."""
    score_s = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        scores: Scores = score_labels(labels, args.n_boot, args.ci, args.seed)
        score_s.append(time.perf_counter() - t0)
    total_t = statistics.median(score_s)
    print(f"score_labels runs (s): {', '.join(f'{t:.3f}' for t in score_s)}")
    return total_t, scores


def time_pandas_subset(
    labels: pd.DataFrame, subset: list[tuple[str, str]], args: argparse.Namespace
) -> tuple[float, float]:
    """The pandas loop on ``subset`` (it is slow), checked against score_labels on the same
    cells and replicates: the seconds of score_labels and of the pandas loop there."""
    sub = labels[pd.MultiIndex.from_frame(labels[["model", "dataset"]]).isin(subset)]
    t0 = time.perf_counter()
    sub_scores: Scores = score_labels(sub, args.pandas_boot, args.ci, args.seed)
    vec_sub_t = time.perf_counter() - t0
    pandas_t, pandas_out = run_baseline(
        labels, subset, baseline_cell, args.pandas_boot, args.ci, args.seed
    )
    worst, n_vals = agreement(sub_scores, pandas_out)
    print(
        f"agreement, pandas loop vs syps on {len(pandas_out)} cell(s), B = {args.pandas_boot}: "
        f"{n_vals} values, max abs diff = {worst:.3g}"
    )
    assert worst < 1e-9, worst
    return vec_sub_t, pandas_t


def print_table(rows: list[tuple[str, float, float]], repeats: int, total_t: float) -> None:
    """The timings as a table of (task, seconds, baseline / syps), with how to read it and the
    verdict on the 5 s target."""
    width = max(len(r[0]) for r in rows)
    print(f"\n{'task':<{width}} | {'seconds':>8} | baseline / syps")
    print(f"{'-' * width}-|-{'-' * 8}-|-{'-' * 15}")
    for task, secs, ratio in rows:
        print(f"{task:<{width}} | {secs:8.2f} | {ratio:.3g}")
    print(
        "\nratios: each baseline's time over syps' time for the same work (a single run each, "
        f"but syps' full-scale time is the median of {repeats}). The numpy loop is the "
        "baseline to compare against; the pandas row shows the cost of a frame per replicate."
    )
    verdict = "under" if total_t < 5.0 else "NOT under"
    print(f"full scale, every metric: {total_t:.2f} s, {verdict} the 5 s target")


def main() -> None:
    args = parse_args()
    how = pin_two_cores()

    labels = synth_labels(args.seed)
    cells = list(itertools.product(MODELS, DATASETS))
    print(f"run: {how}")
    print(
        f"data: {len(MODELS)} models x {len(DATASETS)} datasets x {N_ITEMS} items x "
        f"{len(VARIANTS)} variants = {len(labels):,} label rows, "
        f"{labels['label'].isna().mean():.1%} UNCLEAR; B = {args.n_boot}, seed {args.seed}"
    )
    total_t, scores = time_score_labels(labels, args)

    # The numpy loop, every cell at full B: measured, not extrapolated.
    numpy_t, numpy_out = run_baseline(labels, cells, numpy_cell, args.n_boot, args.ci, args.seed)
    worst, n_vals = agreement(scores, numpy_out)
    print(
        f"agreement, numpy loop vs syps on {len(numpy_out)} cells, B = {args.n_boot}: "
        f"{n_vals} values (points, CI bounds, p-values, flips), max abs diff = {worst:.3g}"
    )
    assert worst < 1e-9, worst

    # The pandas loop is slow: a subset of cells (and optionally fewer replicates).
    subset = cells[: args.pandas_cells]
    vec_sub_t, pandas_t = time_pandas_subset(labels, subset, args)

    scale = len(cells) / len(subset) * args.n_boot / args.pandas_boot
    sub_desc = f"{len(subset)} cell(s), B={args.pandas_boot}"
    full_desc = f"{len(cells)} cells, B={args.n_boot}"
    rows = [
        (f"syps score_labels (vectorised), {full_desc}, median of {args.repeats}", total_t, 1.0),
        (
            f"numpy loop (per-item values indexed per replicate), {full_desc}",
            numpy_t,
            numpy_t / total_t,
        ),
        (f"syps score_labels, {sub_desc}", vec_sub_t, 1.0),
        (
            f"pandas loop (frame per replicate), {sub_desc} (measured)",
            pandas_t,
            pandas_t / vec_sub_t,
        ),
        (
            f"pandas loop, {full_desc} (EXTRAPOLATED x{scale:g} from the row above)",
            pandas_t * scale,
            pandas_t * scale / total_t,
        ),
    ]
    print_table(rows, args.repeats, total_t)


if __name__ == "__main__":
    main()
