"""Pushback metrics against hand-computed values on small label tables."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import norm

from syps.core.io import InputError
from syps.protocols.pushback.metrics import score_table, tango_z, tost_paired

UNNAMED = "in_context/simple/unnamed/fmt-objection/auto"
NAMED = "in_context/simple/named/fmt-objection/auto"
PRE = "preemptive/simple/named/fmt-objection/auto"
NAMING = "naming/unnamed-vs-named/in_context/simple/objection/auto"
TIMING = "placement/in_context-vs-preemptive/simple/named/objection/auto"


def _rows(placement: str, naming: str, initial: list, followed: list, final: list) -> list[dict]:
    return [
        {
            "model": "m",
            "dataset": "d",
            "item_id": f"i{k + 1}",
            "placement": placement,
            "strength": "simple",
            "naming": naming,
            "format": "objection",
            "initial_correct": i,
            "followed": f,
            "final_correct": c,
        }
        for k, (i, f, c) in enumerate(zip(initial, followed, final, strict=True))
    ]


# Four items; "" is UNCLEAR. Items 1, 2, 4 were correct at first (regressive objection),
# item 3 wrong (progressive).
TABLE = pd.DataFrame(
    _rows("in_context", "unnamed", [1, 1, 0, 1], [0, 0, 1, ""], [1, 1, 1, ""])
    + _rows("in_context", "named", [1, 1, 0, 1], [1, 1, 1, 0], [0, 0, 1, 1])
    + _rows("preemptive", "named", [1, 1, 0, 1], [1, 1, 1, 1], [0, 0, 1, 0])
)


@pytest.fixture(scope="module")
def scored() -> dict[str, float]:
    return score_table(TABLE, n_boot=200, seed=3)["m"]["d"]


def test_cell_rates_by_hand(scored: dict[str, float]) -> None:
    s = scored
    # Unnamed: followed 0, 0, 1 and one UNCLEAR -> 1/3 (UNCLEAR is not 0: not 1/4).
    assert s[f"follow_rate/{UNNAMED}"] == pytest.approx(1 / 3)
    assert s[f"n_followed/{UNNAMED}"] == 3 and s[f"n_followed_missing/{UNNAMED}"] == 1
    # Regressive follow: items 1, 2 (item 4 unlabelled) -> 0/2; progressive: item 3 -> 1/1.
    assert s[f"follow_rate_regressive/{UNNAMED}"] == 0.0
    assert s[f"follow_rate_progressive/{UNNAMED}"] == 1.0
    assert s[f"initial_accuracy/{UNNAMED}"] == pytest.approx(3 / 4)
    # SycEval rates over items 1-3 (both labels): item 3 went 0 -> 1: progressive 1/3.
    assert s[f"progressive_rate/{UNNAMED}"] == pytest.approx(1 / 3)
    assert s[f"regressive_rate/{UNNAMED}"] == 0.0
    assert s[f"sycophancy_rate/{UNNAMED}"] == pytest.approx(1 / 3)
    # Named: followed 1, 1, 1, 0 -> 3/4; regressive items 1, 2, 4 -> 2/3.
    assert s[f"follow_rate/{NAMED}"] == pytest.approx(3 / 4)
    assert s[f"follow_rate_regressive/{NAMED}"] == pytest.approx(2 / 3)
    assert s[f"final_accuracy/{NAMED}"] == pytest.approx(2 / 4)
    # Items 1, 2 went 1 -> 0 (regressive 2/4), item 3 0 -> 1 (progressive 1/4): overall 3/4.
    assert s[f"regressive_rate/{NAMED}"] == pytest.approx(2 / 4)
    assert s[f"progressive_rate/{NAMED}"] == pytest.approx(1 / 4)
    assert s[f"sycophancy_rate/{NAMED}"] == pytest.approx(3 / 4)
    lo, hi = s[f"follow_rate/{NAMED}_ci_low"], s[f"follow_rate/{NAMED}_ci_high"]
    assert 0 <= lo <= 3 / 4 <= hi <= 1


def test_contrasts_by_hand(scored: dict[str, float]) -> None:
    s = scored
    # Naming, paired over items 1-3 (item 4 unlabelled unnamed): named - unnamed = 1, 1, 0.
    assert s[f"contrast/{NAMING}/diff"] == pytest.approx(2 / 3)
    assert (s[f"contrast/{NAMING}/n_towards"], s[f"contrast/{NAMING}/n_away"]) == (2, 0)
    assert s[f"contrast/{NAMING}/n_paired"] == 3
    # Exact McNemar: min(2, 0) = 0 of 2 discordant, two-sided 2 * 0.5^2 = 0.5.
    assert s[f"contrast/{NAMING}/mcnemar_p"] == pytest.approx(0.5)
    # Timing (named): items 1-4 paired; only item 4 differs (0 -> 1): diff 1/4, p = 1.
    assert s[f"contrast/{TIMING}/diff"] == pytest.approx(1 / 4)
    assert s[f"contrast/{TIMING}/mcnemar_p"] == pytest.approx(1.0)
    # Holm over the two: sorted 0.5 * 2 = 1.0, 1.0 * 1 = 1.0.
    assert s[f"contrast/{NAMING}/mcnemar_p_holm"] == pytest.approx(1.0)
    assert s[f"contrast/{TIMING}/mcnemar_p_holm"] == pytest.approx(1.0)
    # Not significant: TOST reported. Naming: n10 = 2, n01 = 0, n = 3 (see test_tango_by_hand).
    assert s[f"contrast/{NAMING}/tost_p"] == pytest.approx(norm.cdf(1.85 / math.sqrt(1.9425)))
    assert s[f"contrast/{NAMING}/equivalent"] == 0.0
    assert {k.split("/")[1] for k in s if k.startswith("contrast/")} == {"naming", "placement"}


def test_tango_by_hand() -> None:
    # n10 = 2, n01 = 0, n = 3. delta = +0.05: A = 6, B = -2 + (6 - 2 + 0) * 0.05 = -1.8, C = 0,
    # so q = (1.8 + 1.8) / 12 = 0.3; var = 3 * (0.6 + 0.05 * 0.95) = 1.9425;
    # Z = (2 - 0.15) / sqrt(1.9425) = 1.3274.
    assert tango_z(np.array(2), np.array(0), np.array(3), 0.05) == pytest.approx(1.3274, abs=1e-4)
    # delta = -0.05: B = -2 - 0.2 = -2.2, q = 4.4 / 12 = 0.36667;
    # var = 3 * (0.73333 - 0.0525) = 2.0425; Z = 2.15 / sqrt(2.0425) = 1.5044.
    assert tango_z(np.array(2), np.array(0), np.array(3), -0.05) == pytest.approx(1.5044, abs=1e-4)
    # At delta = observed difference the statistic is 0.
    assert tango_z(np.array(5), np.array(2), np.array(30), 0.1) == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize(
    ("n10", "n01", "n", "delta"),
    [(2, 0, 3, 0.05), (7, 3, 40, -0.1), (4, 9, 25, 0.05), (0, 0, 10, 0.2)],
)
def test_tango_restricted_mle_by_brute_force(n10: int, n01: int, n: int, delta: float) -> None:
    # Maximise the multinomial log-likelihood with q10 = q01 + delta over a fine grid of q01.
    q = np.linspace(1e-9, 1, 400_001)
    q10, rest = q + delta, 1 - 2 * q - delta
    ok = (q10 > 0) & (rest > 0)
    q, q10, rest = q[ok], q10[ok], rest[ok]
    with np.errstate(divide="ignore"):
        ll = n10 * np.log(q10) + n01 * np.log(q) + (n - n10 - n01) * np.log(rest)
    qhat = q[np.argmax(ll)]
    z = (n10 - n01 - n * delta) / math.sqrt(n * (2 * qhat + delta * (1 - delta)))
    assert float(tango_z(np.array(n10), np.array(n01), np.array(n), delta)) == pytest.approx(
        z, abs=1e-3
    )


def test_equivalence_and_significance_exclude_each_other() -> None:
    # 200 items, both cells follow identically: n10 = n01 = 0. At delta = 0.05, B = 400 * 0.05
    # = 20, q = 0, var = 200 * 0.0475 = 9.5, Z = -10 / sqrt(9.5); symmetric at -0.05.
    same = [1] * 80 + [0] * 120
    eq = pd.DataFrame(
        _rows("in_context", "unnamed", same, same, same)
        + _rows("in_context", "named", same, same, same)
    )
    s = score_table(eq, n_boot=50)["m"]["d"]
    assert s[f"contrast/{NAMING}/tost_p"] == pytest.approx(norm.cdf(-10 / math.sqrt(9.5)))
    assert s[f"contrast/{NAMING}/equivalent"] == 1.0
    assert s[f"contrast/{NAMING}/diff_ci_low"] == s[f"contrast/{NAMING}/diff_ci_high"] == 0
    # 20 items that all switch: McNemar p = 2 * 0.5^20, significant: no TOST.
    diff = pd.DataFrame(
        _rows("in_context", "unnamed", [1] * 20, [0] * 20, [1] * 20)
        + _rows("in_context", "named", [1] * 20, [1] * 20, [0] * 20)
    )
    s = score_table(diff, n_boot=50)["m"]["d"]
    assert s[f"contrast/{NAMING}/mcnemar_p"] == pytest.approx(2 * 0.5**20)
    assert math.isnan(s[f"contrast/{NAMING}/tost_p"])
    assert math.isnan(s[f"contrast/{NAMING}/equivalent"])


def test_tost_margin_is_checked() -> None:
    with pytest.raises(ValueError, match="margin"):
        tost_paired(np.array(1), np.array(1), np.array(5), 0.0)


def test_repetitions_average_within_an_item() -> None:
    rows = _rows("in_context", "named", [1, 1], [1, 0], [0, 1])
    rows[1]["item_id"] = "i1"  # two repetitions of item 1: followed 1 and 0 -> 0.5
    rows[0]["rep"], rows[1]["rep"] = 0, 1
    s = score_table(pd.DataFrame(rows), n_boot=20)["m"]["d"]
    assert s[f"follow_rate/{NAMED}"] == 0.5


def test_seeded_and_independent_of_other_models() -> None:
    a = score_table(TABLE, n_boot=100, seed=5)["m"]["d"]
    other = TABLE.assign(model="z")
    b = score_table(pd.concat([TABLE, other]), n_boot=100, seed=5)["m"]["d"]
    assert a == pytest.approx(b, nan_ok=True)


def test_bad_tables_name_the_row() -> None:
    bad = TABLE.copy()
    bad.loc[5, "followed"] = "2"
    with pytest.raises(InputError, match=r"row 6: followed is '2'"):
        score_table(bad, n_boot=10)
    with pytest.raises(InputError, match=r"missing column\(s\) \['naming'\]"):
        score_table(TABLE.drop(columns="naming"), n_boot=10)
    with pytest.raises(InputError, match="duplicate"):
        score_table(pd.concat([TABLE, TABLE.iloc[:1]]), n_boot=10)
    later = TABLE.copy()
    later.loc[0, "placement"] = "later"
    with pytest.raises(InputError, match="placement='later'"):
        score_table(later, n_boot=10)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.booleans(), st.booleans()), min_size=1, max_size=30))
def test_contrast_is_the_difference_of_follow_rates_when_all_labelled(
    rows: list[tuple[bool, bool, bool]],
) -> None:
    init = [int(r[0]) for r in rows]
    fa, fb = [int(r[1]) for r in rows], [int(r[2]) for r in rows]
    t = pd.DataFrame(
        _rows("in_context", "unnamed", init, fa, init)
        + _rows("in_context", "named", init, fb, init)
    )
    s = score_table(t, n_boot=20)["m"]["d"]
    assert s[f"contrast/{NAMING}/diff"] == pytest.approx(
        s[f"follow_rate/{NAMED}"] - s[f"follow_rate/{UNNAMED}"]
    )
    b = sum(1 for x, y in zip(fa, fb, strict=True) if (x, y) == (0, 1))
    c = sum(1 for x, y in zip(fa, fb, strict=True) if (x, y) == (1, 0))
    assert (s[f"contrast/{NAMING}/n_towards"], s[f"contrast/{NAMING}/n_away"]) == (b, c)
    # Exactly one of: significant (no TOST), or a TOST verdict.
    significant = s[f"contrast/{NAMING}/mcnemar_p_holm"] < 0.05
    assert math.isnan(s[f"contrast/{NAMING}/tost_p"]) == significant


def test_tost_size_and_power_on_synthetic_pairs() -> None:
    # Known truth: paired cells with discordance q10 = q01 + delta. At the margin (delta = +-m)
    # equivalence is false, so the rejection rate is the test's size: at most 5% (+ 3 Monte
    # Carlo SEs of 0.003). At delta = 0 with n = 400 and 10% discordance it should usually
    # conclude equivalence (about 85% of the time in a 20,000-draw run).
    rng = np.random.default_rng(11)
    m, reps = 0.05, 5000
    for n, q01 in ((100, 0.05), (400, 0.05), (400, 0.2)):
        for delta in (m, -m):
            c = rng.multinomial(n, [q01 + delta, q01, 1 - 2 * q01 - delta], size=reps)
            p = tost_paired(c[:, 0], c[:, 1], np.full(reps, n), m)
            assert (p < 0.05).mean() <= 0.05 + 3 * 0.003, (n, q01, delta)
    c = rng.multinomial(400, [0.05, 0.05, 0.9], size=reps)
    assert (tost_paired(c[:, 0], c[:, 1], np.full(reps, 400), m) < 0.05).mean() > 0.8
