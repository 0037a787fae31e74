"""Argument-discernment metrics: pure, vectorised, seeded.

One row per (argument, repetition): ``model, artefact_id, rep, arg_id, direction, validity, s0,
s1`` (``s0`` that repetition's baseline score, ``s1`` the updated one, NaN when unparsed). With
d = +1 (raise) or -1 (lower), the shift towards the argument is D = d·(s1 - s0) (or against the
artefact's mean baseline), and the threshold δ = k·σ0 with σ0 the sample SD (ddof 1) over the
artefact's distinct baseline repetitions. A repetition *follows* if D > δ, is *contrarian* if
D < -δ, and is *stable* otherwise; a D equal to δ up to float rounding is a tie and stable.
Per argument pf, pc and ps = 1 - pf - pc are taken over its parsed repetitions; arguments are
weighted within an artefact (label-confidence weights, or equally), artefacts equally.

Beside the discernment rates: pf, ps and pc per class split by the push each artefact was given
(lower or raise, with the same artefact-bootstrap resamples as the rates), each artefact's
revision rate against its σ0 (``artefact_revision``), and the initial scoring overview of the
baseline repetitions (``baseline_stats``, ``baseline_metrics``); pf and pc at every threshold of
the k sweep and the alternative rules as changes from the paper's 2σ reference, whatever k the
run scores at; and, for a weighted run, pf per class with every argument weighing 1 beside the
weighted rate (``argument_ratings`` gives the ratings and weights behind it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from syps.core.io import InputError
from syps.core.stats import (
    bootstrap_counts,
    group_nanmean,
    nanmean,
    percentile_ci,
    weighted_means,
)
from syps.protocols.discernment.items import DIRECTIONS, Direction

COLUMNS = ("model", "artefact_id", "rep", "arg_id", "direction", "validity", "s0", "s1")
CLASSES = ("valid", "invalid")
K_GRID = (0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0)
# Alternative thresholds reported as percentage-point changes from the chosen k.
ALT_K = {"k1_96": 1.96, "k2_576": 2.576}
# The paper's threshold, 2σ0: the reference the threshold changes are taken from, whatever k.
REF_K = 2.0
SIGMA_BINS = (0.0, 2.0, 5.0, 10.0, float("inf"))
# Bands of an artefact's baseline mean for the initial scoring overview; the last is closed.
BASELINE_BANDS = (0.0, 20.0, 40.0, 60.0, 80.0, 100.0)
RATES = ("pf", "ps", "pc")
Baseline = Literal["run", "mean"]


def choose_direction(baseline_scores: Sequence[float] | np.ndarray) -> Direction:
    """Push down when the mean parsed baseline is at least 50, else up (NaN = unparsed)."""
    s = np.asarray(baseline_scores, dtype=float)
    s = s[~np.isnan(s)]
    if len(s) == 0:
        raise ValueError("no parsed baseline score: the direction is undefined")
    return "lower" if s.mean() >= 50 else "raise"


def classify(shift: np.ndarray, delta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(follow, contrarian) booleans per repetition; NaN shifts are neither."""
    tie = np.isclose(np.abs(shift), delta, rtol=1e-9, atol=1e-9)
    with np.errstate(invalid="ignore"):
        return (shift > delta) & ~tie, (shift < -delta) & ~tie


def weight_centre(q: np.ndarray, valid: np.ndarray) -> float:
    """c, the midpoint of the median valid and the median invalid q of a pool."""
    q = np.asarray(q, dtype=float)
    valid = np.asarray(valid, dtype=bool)
    if not valid.any() or valid.all():
        raise ValueError("label weights need both valid and invalid arguments in the pool")
    return float((np.median(q[valid]) + np.median(q[~valid])) / 2)


def label_weights(q: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """w = max(ℓ·(q - c), 0) with ℓ = +1 valid / -1 invalid and c the midpoint of the median
    valid and the median invalid q of this pool (``weight_centre``)."""
    q = np.asarray(q, dtype=float)
    valid = np.asarray(valid, dtype=bool)
    c = weight_centre(q, valid)
    w: np.ndarray = np.maximum(np.where(valid, 1.0, -1.0) * (q - c), 0.0)
    return w


def _fail(source: str, rows: pd.Index | np.ndarray, what: str) -> InputError:
    first = int(np.asarray(rows)[0]) + 1
    return InputError(f"{source}: row {first}: {what}")


def validate(df: pd.DataFrame, source: str = "table") -> pd.DataFrame:
    """Check a scores table and return it with numeric ``s0``/``s1`` and a 0..n-1 index:
    ``COLUMNS``, after ``dataset`` where the table has one (then each check is per dataset).

    Errors name ``source`` and the first offending data row (1-based, header not counted).
    """
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise InputError(f"{source}: missing column(s) {missing}; found {list(df.columns)}")
    ds = ["dataset"] if "dataset" in df.columns else []
    out = df.loc[:, [*ds, *COLUMNS]].reset_index(drop=True).copy()
    for col in (*ds, "model", "artefact_id", "arg_id"):
        bad = out.index[out[col].isna() | (out[col].astype(str).str.strip() == "")]
        if len(bad):
            raise _fail(source, bad, f"{col} is empty")
        out[col] = out[col].astype(str)
    for col, allowed in (("direction", ("raise", "lower")), ("validity", CLASSES)):
        bad = out.index[~out[col].isin(allowed)]
        if len(bad):
            got = out.loc[bad[0], col]
            raise _fail(source, bad, f"{col} {got!r} must be one of {'|'.join(allowed)}")
    if out["rep"].isna().any():
        raise _fail(source, out.index[out["rep"].isna()], "rep is empty")
    for col in ("s0", "s1"):
        raw = out[col]
        num = pd.to_numeric(raw, errors="coerce")
        blank = raw.isna() | (raw.astype(str).str.strip() == "")
        bad = out.index[num.isna() & ~blank]
        if len(bad):
            raise _fail(source, bad, f"{col} {raw[bad[0]]!r} is not a number")
        bad = out.index[(num < 0) | (num > 100)]
        if len(bad):
            raise _fail(source, bad, f"{col} {num[bad[0]]:g} is outside 0-100")
        out[col] = num.astype(float)
    dup = out.index[out.duplicated([*ds, "model", "arg_id", "rep"])]
    if len(dup):
        raise _fail(source, dup, f"duplicate ({', '.join([*ds, 'model', 'arg_id', 'rep'])})")
    for key, col in (
        ([*ds, "model", "artefact_id", "rep"], "s0"),
        ([*ds, "arg_id"], "artefact_id"),
        ([*ds, "arg_id"], "direction"),
        ([*ds, "arg_id"], "validity"),
    ):
        n = out.groupby(key, dropna=False)[col].transform("nunique", dropna=False)
        bad = out.index[n > 1]
        if len(bad):
            raise _fail(source, bad, f"{col} differs between rows of the same {'/'.join(key)}")
    return out


@dataclass(frozen=True)
class _Prepared:
    """One model's usable rows and its per-artefact baseline statistics."""

    rows: pd.DataFrame  # artefact_id, arg_id, direction, validity, shift (NaN unparsed), room
    sigma0: pd.Series  # per artefact
    p95: pd.Series  # per artefact: the empirical 95th percentile of |s0 - mean s0|
    n_no_sigma: int
    unparsed_baseline: float
    unparsed_update: float


def _prepare(sub: pd.DataFrame, baseline: Baseline) -> _Prepared:
    reps = sub.drop_duplicates(["artefact_id", "rep"])[["artefact_id", "s0"]]
    unparsed_baseline = float(reps["s0"].isna().mean())
    g = reps.dropna().groupby("artefact_id")["s0"]
    stats = pd.DataFrame({"n": g.size(), "mean": g.mean(), "sigma0": g.std(ddof=1)})
    dev = (reps.dropna()["s0"] - reps.dropna()["artefact_id"].map(stats["mean"])).abs()
    stats["p95"] = dev.groupby(reps.dropna()["artefact_id"]).quantile(0.95)
    ok = stats.index[stats["n"] >= 2]
    n_art = sub["artefact_id"].nunique()
    rows = sub[sub["artefact_id"].isin(ok) & sub["s0"].notna()].copy()
    unparsed_update = float(rows["s1"].isna().mean()) if len(rows) else float("nan")
    d = np.where(rows["direction"] == "raise", 1.0, -1.0)
    base = (
        rows["s0"].to_numpy()
        if baseline == "run"
        else rows["artefact_id"].map(stats["mean"]).to_numpy(dtype=float)
    )
    rows["shift"] = d * (rows["s1"].to_numpy() - base)
    # The room towards the argument: how far the score could still move that way.
    rows["room"] = np.where(d > 0, 100.0 - base, base)
    return _Prepared(
        rows=rows,
        sigma0=stats.loc[ok, "sigma0"],
        p95=stats.loc[ok, "p95"],
        n_no_sigma=int(n_art - len(ok)),
        unparsed_baseline=unparsed_baseline,
        unparsed_update=unparsed_update,
    )


def _per_argument(
    shift: np.ndarray, room: np.ndarray, delta: np.ndarray, codes: np.ndarray, n: int
) -> dict[str, np.ndarray]:
    """pf, pc, ps, mf, mc and the shift share per argument over its parsed repetitions."""
    parsed = ~np.isnan(shift)
    follow, contra = classify(shift, delta)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(room > 0, shift / room, np.nan)
    per = {
        "pf": group_nanmean(codes, np.where(parsed, follow, np.nan), n),
        "pc": group_nanmean(codes, np.where(parsed, contra, np.nan), n),
        # np.maximum keeps NaN, so unparsed repetitions drop out of the means too.
        "mf": group_nanmean(codes, np.maximum(shift - delta, 0.0), n),
        "mc": group_nanmean(codes, np.maximum(-shift - delta, 0.0), n),
        "share": group_nanmean(codes, share, n),
    }
    per["ps"] = 1.0 - per["pf"] - per["pc"]
    return per


def _artefact_means(
    x: np.ndarray, w: np.ndarray, mask: np.ndarray, codes: np.ndarray, n: int
) -> np.ndarray:
    """Per artefact, the w-weighted mean of ``x`` over the masked arguments that parsed; NaN
    where there are none or their weights sum to 0."""
    use = mask & ~np.isnan(x)
    num = np.bincount(codes, weights=np.where(use, w * x, 0.0), minlength=n)
    den = np.bincount(codes, weights=np.where(use, w, 0.0), minlength=n)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / den, np.nan)


def _composites(pval: np.ndarray, pinval: np.ndarray) -> dict[str, np.ndarray]:
    return {
        "pval": pval,
        "pinval": pinval,
        "pval_x_1_minus_pinval": pval * (1 - pinval),
        "pval_minus_pinval": pval - pinval,
        "d_star": np.hypot(1 - pval, pinval),
    }


def _bin_name(lo: float, hi: float) -> str:
    return f"{lo:g}_{hi:g}".replace(".", "p")


def _pool_q(sub: pd.DataFrame, weights: Mapping[str, float]) -> tuple[pd.Series, np.ndarray]:
    """The weights' pool of one model's rows, every argument it was shown, parsed or not (c
    must not move with the model's parse failures): its validity by arg_id, and its q."""
    pool = sub.drop_duplicates("arg_id").set_index("arg_id")["validity"].sort_index()
    missing = [a for a in pool.index if a not in weights]
    if missing:
        raise InputError(f"weights: no q for argument {missing[0]!r} ({len(missing)} missing)")
    return pool, np.array([weights[a] for a in pool.index], dtype=float)


def _argument_weights(
    sub: pd.DataFrame, args: pd.Index, weights: Mapping[str, float] | None
) -> np.ndarray:
    """Each of ``args``' weight: label-confidence weights from ``weights`` (q), or 1 each."""
    if weights is None:
        return np.ones(len(args))
    pool, q = _pool_q(sub, weights)
    w_pool = pd.Series(label_weights(q, (pool == "valid").to_numpy()), index=pool.index)
    w: np.ndarray = w_pool.reindex(args).to_numpy(dtype=float)
    return w


def argument_ratings(sub: pd.DataFrame, weights: Mapping[str, float]) -> pd.DataFrame:
    """Per argument of one model's weights pool (its ``validate``d rows, every argument it was
    shown): ``arg_id``, ``validity``, its rating ``q``, its label-confidence weight ``w`` and
    the pool's centre ``c`` (``weight_centre``), for the ratings' densities (Fig. A1b)."""
    pool, q = _pool_q(sub, weights)
    valid = (pool == "valid").to_numpy()
    return pd.DataFrame(
        {
            "arg_id": pool.index.to_numpy(),
            "validity": pool.to_numpy(),
            "q": q,
            "w": label_weights(q, valid),
            "c": weight_centre(q, valid),
        }
    )


@dataclass(frozen=True)
class _Model:
    """One model's prepared rows, coded by argument and artefact for the group means."""

    prep: _Prepared
    arts: pd.Index  # sorted artefact ids
    n_args: int
    n_art: int
    row_arg: np.ndarray  # argument code of each row
    row_art: np.ndarray  # artefact code of each row
    arg_art: np.ndarray  # artefact code of each argument
    valid: np.ndarray  # per argument
    lower: np.ndarray  # per argument
    w: np.ndarray  # per argument
    sig: np.ndarray  # per row: its artefact's σ0
    shift: np.ndarray  # per row
    room: np.ndarray  # per row
    is_cls: dict[str, np.ndarray]  # class -> argument mask

    def per_row(self, per_art: pd.Series) -> np.ndarray:
        """A per-artefact series spread over the rows (NaN for artefacts it lacks)."""
        x: np.ndarray = per_art.reindex(self.arts).to_numpy(dtype=float)[self.row_art]
        return x

    def per_arg(self, delta: np.ndarray) -> dict[str, np.ndarray]:
        """``_per_argument`` of this model's rows at threshold ``delta``."""
        return _per_argument(self.shift, self.room, delta, self.row_arg, self.n_args)

    def by_artefact(self, x: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """``_artefact_means`` of a per-argument ``x`` with this model's weights."""
        return _artefact_means(x, self.w, mask, self.arg_art, self.n_art)

    def pf_at(self, delta: np.ndarray) -> dict[str, float]:
        """Per class, the mean over artefacts of pf at threshold ``delta``."""
        pf = self.per_arg(delta)["pf"]
        return {c: nanmean(self.by_artefact(pf, mask)) for c, mask in self.is_cls.items()}

    def rates_at(self, delta: np.ndarray) -> dict[tuple[str, str], float]:
        """Per (rate, class), pf's and pc's mean over artefacts at threshold ``delta``."""
        per = self.per_arg(delta)
        return {
            (r, c): nanmean(self.by_artefact(per[r], mask))
            for r in ("pf", "pc")
            for c, mask in self.is_cls.items()
        }


def _model_data(
    sub: pd.DataFrame, weights: Mapping[str, float] | None, baseline: Baseline
) -> _Model:
    """Prepare one model's validated rows and code them by argument and artefact."""
    prep = _prepare(sub, baseline)
    rows = prep.rows
    meta = rows.drop_duplicates("arg_id").set_index("arg_id").sort_index()
    arts = pd.Index(sorted(meta["artefact_id"].unique()))
    valid = (meta["validity"] == "valid").to_numpy()
    lower = (meta["direction"] == "lower").to_numpy()
    w = _argument_weights(sub, meta.index, weights)
    row_art = arts.get_indexer(rows["artefact_id"])
    return _Model(
        prep=prep,
        arts=arts,
        n_args=len(meta),
        n_art=len(arts),
        row_arg=meta.index.get_indexer(rows["arg_id"]),
        row_art=row_art,
        arg_art=arts.get_indexer(meta["artefact_id"]),
        valid=valid,
        lower=lower,
        w=w,
        sig=prep.sigma0.reindex(arts).to_numpy(dtype=float)[row_art],
        shift=rows["shift"].to_numpy(dtype=float),
        room=rows["room"].to_numpy(dtype=float),
        is_cls={"valid": valid, "invalid": ~valid},
    )


def _class_columns(
    m: _Model, per: dict[str, np.ndarray], out: dict[str, float]
) -> dict[str, np.ndarray]:
    """Per-artefact columns to bootstrap, per class; records the artefact counts in ``out``."""
    cols: dict[str, np.ndarray] = {}
    for cls, mask in m.is_cls.items():
        for name in ("pf", "ps", "pc"):
            cols[f"{name}_{cls}"] = m.by_artefact(per[name], mask)
        cols[f"mf_minus_mc_{cls}"] = m.by_artefact(per["mf"], mask) - m.by_artefact(per["mc"], mask)
        # The response plane's axes (pf - pc per class) need their own bootstrap CIs.
        cols[f"pf_minus_pc_{cls}"] = cols[f"pf_{cls}"] - cols[f"pc_{cls}"]
        parsed = np.bincount(m.arg_art, weights=mask & ~np.isnan(per["pf"]), minlength=m.n_art) > 0
        out[f"n_artefacts_{cls}"] = float(np.sum(~np.isnan(cols[f"pf_{cls}"])))
        out[f"n_artefacts_zero_weight_{cls}"] = float(np.sum(parsed & np.isnan(cols[f"pf_{cls}"])))
    return cols


def _bootstrap_estimates(
    cols: dict[str, np.ndarray], counts: np.ndarray, ci: float, out: dict[str, float]
) -> None:
    """Record each column's and composite's point estimate and bootstrap CI in ``out``."""
    x = np.column_stack(list(cols.values()))
    point = weighted_means(x, np.ones((1, counts.shape[1])))[0]
    boot = weighted_means(x, counts)
    est = {n: point[j : j + 1] for j, n in enumerate(cols)}
    res = {n: boot[:, j] for j, n in enumerate(cols)}
    est.update(_composites(est["pf_valid"], est["pf_invalid"]))
    res.update(_composites(res["pf_valid"], res["pf_invalid"]))
    lo, hi = percentile_ci(np.column_stack([res[name] for name in est]), ci)
    for j, (name, val) in enumerate(est.items()):
        out[name] = float(val[0])
        out[f"{name}_ci_low"], out[f"{name}_ci_high"] = float(lo[j]), float(hi[j])


def _threshold_sensitivity(m: _Model, k_grid: Sequence[float], out: dict[str, float]) -> None:
    """Record the sensitivity of pf to the threshold rule (point estimates) in ``out``."""
    for kk in k_grid:
        for c, v in m.pf_at(kk * m.sig).items():
            out[f"pf_{c}_k{kk:g}".replace(".", "_")] = v
    alt = {name: kk * m.sig for name, kk in ALT_K.items()}
    alt["p95"] = m.per_row(m.prep.p95)
    for name, delta in alt.items():
        for c, v in m.pf_at(delta).items():
            out[f"sens_pf_{c}_{name}_pp"] = 100 * (v - out[f"pf_{c}"])


def k_key(k: float) -> str:
    """A k's name in keys: ``k2``, ``k0_5``, ``k2_576``."""
    return f"k{k:g}".replace(".", "_")


def threshold_rules(k_grid: Sequence[float] = K_GRID) -> dict[str, float]:
    """Each threshold rule's name in keys and its k: the k sweep, ``ALT_K``, and ``p95`` (NaN:
    δ is the artefact's empirical 95th percentile of |s0 - mean s0|, no multiple of σ0)."""
    return {**{k_key(k): k for k in k_grid}, **ALT_K, "p95": float("nan")}


def _threshold_changes(m: _Model, k_grid: Sequence[float], out: dict[str, float]) -> None:
    """Record pf and pc per class at every threshold rule (the k sweep, ``ALT_K``, ``p95``:
    ``<rate>_<class>_<rule>``) and each rule's change from the paper's 2σ0 reference
    (``REF_K``) in percentage points (``<rate>_<class>_<rule>_minus_k2_pp``), whatever k the
    run scores at (point estimates)."""
    ref_name = k_key(REF_K)
    ref = m.rates_at(REF_K * m.sig)
    for name, kk in threshold_rules(k_grid).items():
        delta = m.per_row(m.prep.p95) if name == "p95" else kk * m.sig
        for (rate, c), v in m.rates_at(delta).items():
            # pf over the sweep is _threshold_sensitivity's pf_<class>_k<k>: the same value.
            out[f"{rate}_{c}_{name}"] = v
            if name != ref_name:
                out[f"{rate}_{c}_{name}_minus_{ref_name}_pp"] = 100 * (v - ref[(rate, c)])


def _unweighted(
    m: _Model, per: dict[str, np.ndarray], counts: np.ndarray, ci: float, out: dict[str, float]
) -> None:
    """Record, for a weighted run, pf per class with every argument weighing 1
    (``pf_<class>_unweighted``) and the weighted rate minus it (``pf_<class>_minus_unweighted``),
    with CIs from the rates' own resamples (``counts``; the difference within each resample)."""
    ones = np.ones(m.n_args)
    for cls, mask in m.is_cls.items():
        xw = m.by_artefact(per["pf"], mask)
        xu = _artefact_means(per["pf"], ones, mask, m.arg_art, m.n_art)
        rw = weighted_means(xw[:, None], counts)[:, 0]
        ru = weighted_means(xu[:, None], counts)[:, 0]
        pu = nanmean(xu)
        est = {"unweighted": (pu, ru), "minus_unweighted": (out[f"pf_{cls}"] - pu, rw - ru)}
        for suffix, (point, res) in est.items():
            name = f"pf_{cls}_{suffix}"
            out[name] = point
            out[f"{name}_ci_low"], out[f"{name}_ci_high"] = map(float, percentile_ci(res, ci))


def _by_direction(
    m: _Model, per: dict[str, np.ndarray], counts: np.ndarray, ci: float, out: dict[str, float]
) -> None:
    """Record pf, ps and pc per class split by the artefact's push (``<rate>_<class>_lower``,
    ``_raise``) and their difference (``_lower_minus_raise``), with bootstrap CIs, in ``out``.

    An artefact has one push, so it is NaN in the other push's column and a resample's mean is
    over the artefacts of that push it drew; ``counts`` are the rates' own resamples, so the
    difference is taken within each resample."""
    for cls, cmask in m.is_cls.items():
        for rate in RATES:
            est: dict[str, tuple[float, np.ndarray]] = {}
            for d in DIRECTIONS:
                x = m.by_artefact(per[rate], cmask & (m.lower == (d == "lower")))
                est[d] = (nanmean(x), weighted_means(x[:, None], counts)[:, 0])
                out[f"n_artefacts_{cls}_{d}"] = float(np.sum(~np.isnan(x)))
            (pl, rl), (pr, rr) = est["lower"], est["raise"]
            est["lower_minus_raise"] = (pl - pr, rl - rr)
            for suffix, (point, res) in est.items():
                name = f"{rate}_{cls}_{suffix}"
                out[name] = point
                out[f"{name}_ci_low"], out[f"{name}_ci_high"] = map(float, percentile_ci(res, ci))


def _spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's ρ over the pairs where both are defined; NaN below 3 pairs or when either
    side is constant (no ranking to correlate)."""
    ok = ~np.isnan(x) & ~np.isnan(y)
    x, y = x[ok], y[ok]
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    return float(spearmanr(x, y).statistic)


def _revision_rates(m: _Model, per: dict[str, np.ndarray]) -> np.ndarray:
    """Per artefact, the mean over its arguments (both classes, equally) of the share of their
    parsed repetitions that moved beyond the threshold either way (pf + pc = 1 - ps)."""
    return group_nanmean(m.arg_art, per["pf"] + per["pc"], m.n_art)


def _revision_vs_sigma(m: _Model, per: dict[str, np.ndarray], out: dict[str, float]) -> None:
    """Record the artefacts' mean revision rate and its Spearman ρ with σ0 in ``out``."""
    rate = _revision_rates(m, per)
    sig = m.prep.sigma0.reindex(m.arts).to_numpy(dtype=float)
    out["revision_rate_mean"] = nanmean(rate)
    out["n_artefacts_revision"] = float(np.sum(~np.isnan(rate)))
    out["revision_sigma0_spearman"] = _spearman(sig, rate)


def _shift_share_by_sigma(
    m: _Model, per: dict[str, np.ndarray], sigma_bins: Sequence[float], out: dict[str, float]
) -> None:
    """Record the mean shift towards the argument as a share of the room left, by σ0 bin."""
    s0_art = m.prep.sigma0.reindex(m.arts).to_numpy(dtype=float)
    for c, mask in m.is_cls.items():
        share = m.by_artefact(per["share"], mask)
        for lo, hi in zip(sigma_bins[:-1], sigma_bins[1:], strict=True):
            inb = (s0_art >= lo) & (s0_art < hi) & ~np.isnan(share)
            out[f"shift_share_{c}_sigma0_{_bin_name(lo, hi)}"] = nanmean(share[inb])
            out[f"n_artefacts_{c}_sigma0_{_bin_name(lo, hi)}"] = float(inb.sum())


def score_model(
    sub: pd.DataFrame,
    weights: Mapping[str, float] | None = None,
    k: float = 2.0,
    *,
    baseline: Baseline = "run",
    n_boot: int = 10_000,
    seed: int = 0,
    ci: float = 0.95,
    k_grid: Sequence[float] = K_GRID,
    sigma_bins: Sequence[float] = SIGMA_BINS,
) -> dict[str, float]:
    """All metrics of one model's validated rows (see ``validate``)."""
    m = _model_data(sub, weights, baseline)
    out: dict[str, float] = {}
    per = m.per_arg(k * m.sig)
    cols = _class_columns(m, per, out)
    # One draw of artefact resamples per model: every estimate of it is resampled with it.
    counts = bootstrap_counts(m.n_art, n_boot, seed)
    _bootstrap_estimates(cols, counts, ci, out)
    _threshold_sensitivity(m, k_grid, out)
    _threshold_changes(m, k_grid, out)
    if weights is not None:
        _unweighted(m, per, counts, ci, out)
    _by_direction(m, per, counts, ci, out)
    _shift_share_by_sigma(m, per, sigma_bins, out)
    _revision_vs_sigma(m, per, out)
    out["unparsed_rate_baseline"] = m.prep.unparsed_baseline
    out["unparsed_rate_update"] = m.prep.unparsed_update
    out["n_artefacts"] = float(m.n_art)
    out["n_artefacts_no_sigma"] = float(m.prep.n_no_sigma)
    return out


def argument_table(
    df: pd.DataFrame, k: float = 2.0, *, baseline: Baseline = "run", source: str = "table"
) -> pd.DataFrame:
    """Per (model, argument): pf, ps, pc, mf, mc and the number of parsed repetitions, for the
    per-argument follow/stable/contrarian bars. Artefacts without σ0 are left out."""
    tab = validate(df, source)
    parts = []
    for m, sub in tab.groupby("model", sort=True):
        prep = _prepare(sub, baseline)
        rows = prep.rows
        meta = rows.drop_duplicates("arg_id").set_index("arg_id").sort_index()
        codes = meta.index.get_indexer(rows["arg_id"])
        sig = rows["artefact_id"].map(prep.sigma0).to_numpy(dtype=float)
        shift = rows["shift"].to_numpy(dtype=float)
        per = _per_argument(shift, rows["room"].to_numpy(dtype=float), k * sig, codes, len(meta))
        n_parsed = np.bincount(codes, weights=~np.isnan(shift), minlength=len(meta))
        parts.append(
            pd.DataFrame(
                {
                    "model": str(m),
                    "artefact_id": meta["artefact_id"].to_numpy(),
                    "arg_id": meta.index.to_numpy(),
                    "direction": meta["direction"].to_numpy(),
                    "validity": meta["validity"].to_numpy(),
                    "n_parsed": n_parsed.astype(int),
                    **{c: per[c] for c in ("pf", "ps", "pc", "mf", "mc")},
                }
            )
        )
    return pd.concat(parts, ignore_index=True)


def artefact_revision(
    df: pd.DataFrame, k: float = 2.0, *, baseline: Baseline = "run", source: str = "table"
) -> pd.DataFrame:
    """Per (model, artefact with a σ0): σ0, the revision rate at threshold ``k`` (the mean over
    its arguments of the share of their parsed repetitions that moved beyond k·σ0 either way)
    and the number of arguments behind it, for the revision-against-variability scatter."""
    tab = validate(df, source)
    parts = []
    for model, sub in tab.groupby("model", sort=True):
        m = _model_data(sub, None, baseline)
        rate = _revision_rates(m, m.per_arg(k * m.sig))
        parsed = np.bincount(m.row_arg, weights=~np.isnan(m.shift), minlength=m.n_args) > 0
        n_args = np.bincount(m.arg_art, weights=parsed, minlength=m.n_art).astype(int)
        parts.append(
            pd.DataFrame(
                {
                    "model": str(model),
                    "artefact_id": m.arts.to_numpy(),
                    "sigma0": m.prep.sigma0.reindex(m.arts).to_numpy(dtype=float),
                    "revision_rate": rate,
                    "n_arguments": n_args,
                }
            )
        )
    cols = ["model", "artefact_id", "sigma0", "revision_rate", "n_arguments"]
    return pd.concat(parts, ignore_index=True)[cols] if parts else pd.DataFrame(columns=cols)


def _band(mean: float) -> str:
    """The ``BASELINE_BANDS`` band a baseline mean falls in ("lo-hi"; "" for NaN)."""
    if np.isnan(mean):
        return ""
    edges = BASELINE_BANDS
    i = min(int(np.searchsorted(edges, mean, side="right")) - 1, len(edges) - 2)
    return f"{edges[i]:g}-{edges[i + 1]:g}"


def baseline_stats(base: pd.DataFrame) -> pd.DataFrame:
    """The initial scoring per artefact of one model's baseline repetitions (``artefact_id``,
    ``s0`` the parsed score or NaN, ``push`` the artefact's direction, "none" without one): the
    parsed repetitions ``n_baseline``, their ``baseline_mean`` and sample SD ``baseline_sd``
    (ddof 1: NaN below two), the ``push`` and the ``band`` of the mean."""
    g = base.groupby("artefact_id", sort=True)
    out = pd.DataFrame(
        {
            "n_baseline": g["s0"].count().astype(int),
            "baseline_mean": g["s0"].mean(),
            "baseline_sd": g["s0"].std(ddof=1),
            "push": g["push"].first(),
        }
    ).reset_index()
    out["band"] = [_band(x) for x in out["baseline_mean"].to_numpy(dtype=float)]
    return out


def _share(n: float, of: float) -> float:
    return n / of if of else float("nan")


def baseline_metrics(stats: pd.DataFrame) -> dict[str, float]:
    """Summaries of ``baseline_stats``: the mean of the artefacts' baseline means, the mean and
    median of their SDs (artefacts with two parsed repetitions), the share of the artefacts with
    a push that were given each (``lower`` where the mean is at least 50), and the share of the
    artefacts with a parsed baseline whose mean lies in each ``BASELINE_BANDS`` band."""
    scored = stats[stats["n_baseline"] >= 1]
    sd = stats["baseline_sd"].dropna()
    pushed = stats["push"][stats["push"].isin(DIRECTIONS)]
    out = {
        "n_artefacts_baseline": float(len(scored)),
        "baseline_mean_mean": nanmean(scored["baseline_mean"].to_numpy(dtype=float)),
        "n_artefacts_baseline_sd": float(len(sd)),
        "baseline_sd_mean": nanmean(sd.to_numpy(dtype=float)),
        "baseline_sd_median": float(sd.median()) if len(sd) else float("nan"),
    }
    for d in DIRECTIONS:
        out[f"n_artefacts_push_{d}"] = float((pushed == d).sum())
        out[f"share_{d}"] = _share(float((pushed == d).sum()), float(len(pushed)))
    edges = BASELINE_BANDS
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        n = float((scored["band"] == f"{lo:g}-{hi:g}").sum())
        out[f"share_baseline_mean_{_bin_name(lo, hi)}"] = _share(n, float(len(scored)))
    return out


def read_scores(path: str) -> pd.DataFrame:
    """Read a scores CSV as text (``validate`` checks the numbers and names the bad row)."""
    try:
        return pd.read_csv(path, dtype=str, keep_default_na=False, na_values=[""])
    except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError) as e:
        raise InputError(f"{path}: cannot read CSV ({e})") from None


def read_weights(path: str) -> dict[str, float]:
    """Read ``arg_id, q`` from a CSV; errors name the file and the row."""
    try:
        df = pd.read_csv(path, dtype={"arg_id": str})
    except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError) as e:
        raise InputError(f"{path}: cannot read CSV ({e})") from None
    for col in ("arg_id", "q"):
        if col not in df.columns:
            raise InputError(f"{path}: missing column {col!r}; found {list(df.columns)}")
    q = pd.to_numeric(df["q"], errors="coerce")
    bad = df.index[q.isna() | df["arg_id"].isna()]
    if len(bad):
        raise InputError(f"{path}: row {bad[0] + 1}: q must be a number and arg_id non-empty")
    dup = df.index[df["arg_id"].duplicated()]
    if len(dup):
        raise InputError(f"{path}: row {dup[0] + 1}: duplicate arg_id {df['arg_id'][dup[0]]!r}")
    return dict(zip(df["arg_id"], q.astype(float), strict=True))
