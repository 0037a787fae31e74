"""Cross-model tests of pushback contrasts (``crossmodel``): the difference of two models'
paired differences per item, its sign-flip p and Holm, worked by hand."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from syps.core.protocol import ScoreSettings
from syps.core.report import Scores
from syps.core.runlayout import run_metric_keys
from syps.protocols.pushback.crossmodel import EXACT_MAX, sign_flip_p, significant_lines
from syps.protocols.pushback.protocol import PROTOCOL
from syps.protocols.pushback.scoring import read_table, score_file_table

SETTINGS = ScoreSettings(bootstrap=1000, ci=0.95, seed=7, min_items=3)
SIM = "naming/unnamed-vs-named/in_context/simple/objection/auto"
ETH = "naming/unnamed-vs-named/in_context/ethos/objection/auto"
EFFECT = "effect/naming/unnamed-vs-named"


def _rows(model: str, strength: str, naming: str, followed: dict[str, list[object]]) -> list[dict]:
    """One row per (item, repetition) of the in-context cell ``strength``/``naming``, format in
    the objection. (Strength is no contrast factor: two strengths give two naming contrasts and
    nothing else.)"""
    return [
        {
            "model": model,
            "dataset": "d",
            "item_id": item,
            "placement": "in_context",
            "strength": strength,
            "naming": naming,
            "format": "objection",
            "rep": rep,
            "initial_correct": 1,
            "followed": f,
        }  # fmt: skip
        for item, fs in followed.items()
        for rep, f in enumerate(fs)
    ]


def _score(tmp_path: Path, rows: list[dict]) -> Scores:
    """Through the function ``syps score --protocol pushback`` runs."""
    path = tmp_path / "labels.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return score_file_table(None, read_table(str(path)), SETTINGS, str(path))


# Model A, followed per item (repetitions in a list; "" is UNCLEAR):
#   simple: unnamed i1 0, i2 0 0, i3 0, i4 1, i5 0 | named i1 1, i2 1 0, i3 1, i4 1, i5 1
#   ethos:  unnamed 0 on i1..i4                     | named 1 on i1..i4
# Model B:
#   simple: unnamed i1 0, i2 1, i3 0, i4 0, i5 0    | named i1 0, i2 1, i3 0, i4 1, i5 ""
#   ethos:  unnamed 0 on i1..i4                     | named 0 on i1..i4
TWO_MODELS = (
    _rows("A", "simple", "unnamed", {"i1": [0], "i2": [0, 0], "i3": [0], "i4": [1], "i5": [0]})
    + _rows("A", "simple", "named", {"i1": [1], "i2": [1, 0], "i3": [1], "i4": [1], "i5": [1]})
    + _rows("A", "ethos", "unnamed", {i: [0] for i in ("i1", "i2", "i3", "i4")})
    + _rows("A", "ethos", "named", {i: [1] for i in ("i1", "i2", "i3", "i4")})
    + _rows("B", "simple", "unnamed", {"i1": [0], "i2": [1], "i3": [0], "i4": [0], "i5": [0]})
    + _rows("B", "simple", "named", {"i1": [0], "i2": [1], "i3": [0], "i4": [1], "i5": [""]})
    + _rows("B", "ethos", "unnamed", {i: [0] for i in ("i1", "i2", "i3", "i4")})
    + _rows("B", "ethos", "named", {i: [0] for i in ("i1", "i2", "i3", "i4")})
)


@pytest.fixture(scope="module")
def two(tmp_path_factory: pytest.TempPathFactory) -> Scores:
    return _score(tmp_path_factory.mktemp("xm"), TWO_MODELS)


def test_contrast_difference_and_exact_sign_flip_by_hand(two: Scores) -> None:
    # Simple-strength naming contrast, per item d = named - unnamed (repetitions averaged):
    #   A: i1 1, i2 (1+0)/2 - 0 = 0.5, i3 1, i4 0, i5 1;  B: i1 0, i2 0, i3 0, i4 1, i5 UNCLEAR.
    # Shared items i1..i4 (B's i5 is not labelled): x = d_A - d_B = 1, 0.5, 1, -1; mean 1.5/4.
    a = two["A"]["d"]
    key = f"xmodel/B/contrast/{SIM}"
    assert a[f"{key}/diff"] == pytest.approx(0.375)
    assert a[f"{key}/diff_n"] == 4
    # Sign flip: the sum s1*1 + s2*0.5 + s3*1 + s4*(-1) over the 16 sign vectors; observed 1.5.
    # With k of the three unit items positive the units sum to 2k - 3 (1, 3, 3, 1 vectors for
    # k = 0..3), the 0.5 adds +-0.5: |sum| >= 1.5 for k = 3 (3.5, 2.5: 2 vectors), k = 2 (1.5
    # only: 3), k = 1 (-1.5 only: 3), k = 0 (-2.5, -3.5: 2). p = 10/16.
    assert a[f"{key}/p"] == pytest.approx(10 / 16)
    # B sees the same test from its side: the negative difference, the same p.
    b = two["B"]["d"]
    assert b[f"xmodel/A/contrast/{SIM}/diff"] == pytest.approx(-0.375)
    assert b[f"xmodel/A/contrast/{SIM}/p"] == a[f"{key}/p"]
    assert a[f"{key}/confounded"] == 0.0  # a table names no templates: nothing is flagged


def test_holm_over_the_two_contrasts_by_hand(two: Scores) -> None:
    # Ethos-strength naming contrast: d_A = 1 and d_B = 0 on i1..i4, x = 1, 1, 1, 1: only the
    # all-plus and all-minus vectors reach |sum| 4, p = 2/16.
    a = two["A"]["d"]
    eth, sim = f"xmodel/B/contrast/{ETH}", f"xmodel/B/contrast/{SIM}"
    assert a[f"{eth}/diff"] == 1.0 and a[f"{eth}/diff_n"] == 4
    assert a[f"{eth}/p"] == pytest.approx(2 / 16)
    # Holm over the family {0.125, 0.625}: the smaller times 2 = 0.25; the larger times 1 =
    # 0.625, not below 0.25, so it stays 0.625. Neither is below alpha = 0.05.
    assert a[f"{eth}/p_holm"] == pytest.approx(0.25)
    assert a[f"{sim}/p_holm"] == pytest.approx(0.625)
    assert a[f"{eth}/significant"] == 0.0 and a[f"{sim}/significant"] == 0.0
    assert two["B"]["d"][f"xmodel/A/contrast/{ETH}/p_holm"] == pytest.approx(0.25)


def test_pooled_effect_difference_by_hand(two: Scores) -> None:
    # effect/naming per item = mean over the item's two naming contrasts:
    #   A: i1 (1+1)/2 = 1, i2 (0.5+1)/2 = 0.75, i3 1, i4 (0+1)/2 = 0.5, i5 1 (simple only);
    #   B: i1 0, i2 0, i3 0, i4 (1+0)/2 = 0.5, i5 none (its only contrast is UNCLEAR).
    # x over i1..i4 = 1, 0.75, 1, 0: mean 2.75/4. The zero carries no sign: over the 8 vectors
    # of (1, 0.75, 1) only all-plus (2.75) and all-minus reach 2.75, p = 2/8; the effect is
    # the only test of its family, so Holm leaves it.
    a = two["A"]["d"]
    key = f"xmodel/B/{EFFECT}"
    assert a[f"{key}/diff"] == pytest.approx(0.6875)
    assert a[f"{key}/diff_n"] == 4
    assert a[f"{key}/p"] == pytest.approx(0.25) and a[f"{key}/p_holm"] == pytest.approx(0.25)
    # Each model's own effect over its own items (A: i1..i5; B: i1..i4) is unchanged.
    assert a[EFFECT] == pytest.approx((1 + 0.75 + 1 + 0.5 + 1) / 5)
    assert two["B"]["d"][EFFECT] == pytest.approx(0.5 / 4)


def test_every_other_key_is_the_models_own_score(tmp_path: Path, two: Scores) -> None:
    """A second model only adds keys: each model's other keys are its score alone."""
    for model in ("A", "B"):
        alone = _score(tmp_path, [r for r in TWO_MODELS if r["model"] == model])[model]["d"]
        assert not any(k.startswith("xmodel/") for k in alone)
        mine = {k: v for k, v in two[model]["d"].items() if not k.startswith("xmodel/")}
        assert mine.keys() == alone.keys()
        for k, v in alone.items():
            assert mine[k] == v or (math.isnan(mine[k]) and math.isnan(v)), k


def test_summary_lists_significant_differences(tmp_path: Path, two: Scores) -> None:
    one = _score(tmp_path, [r for r in TWO_MODELS if r["model"] == "A"])
    assert PROTOCOL.report.summary(one, 0.95) is None  # one model: no cross-model test, no summary
    # Three tests per pair (two contrasts, one effect), none significant.
    assert PROTOCOL.report.summary(two, 0.95) == (
        "Cross-model differences significant after Holm: 0 of 3 test(s)\n"
        "(a sign-flip test over the items both models answered; diff: A's effect minus B's)"
    )
    # Six items, A follows the named objection on each and never the unnamed one, B never:
    # x = 1 on six items, p = 2/64 = 0.03125 (all-plus and all-minus), the only test of its
    # family: significant at 0.05, for the contrast and for the effect.
    six = {f"i{k}": [1] for k in range(6)}
    zero = {f"i{k}": [0] for k in range(6)}
    rows = (
        _rows("A", "simple", "unnamed", zero)
        + _rows("A", "simple", "named", six)
        + _rows("B", "simple", "unnamed", zero)
        + _rows("B", "simple", "named", zero)
    )
    scored = _score(tmp_path, rows)
    assert scored["A"]["d"][f"xmodel/B/contrast/{SIM}/p_holm"] == pytest.approx(1 / 32)
    lines = significant_lines(scored)
    assert lines is not None
    assert lines[0] == "Cross-model differences significant after Holm: 2 of 2 test(s)"
    body = [line.split() for line in lines[4:]]
    assert body == [
        ["A", "B", "d", f"contrast/{SIM}", "+1.000", "0.0312", "0.0312", "6"],
        ["A", "B", "d", EFFECT, "+1.000", "0.0312", "0.0312", "6"],
    ]


def _brute_force_p(x: np.ndarray) -> float:
    """Share of the 2^n sign vectors whose |sum| reaches the observed |sum| (a written-out
    enumeration, independent of scipy)."""
    obs = abs(x.sum())
    hits = sum(
        abs(np.dot(signs, x)) >= obs - 1e-12 for signs in itertools.product((1, -1), repeat=len(x))
    )
    return hits / 2 ** len(x)


def test_exact_sign_flip_matches_brute_force() -> None:
    rng = np.random.default_rng(0)
    for n in (2, 3, 5, 8, EXACT_MAX):
        x = rng.choice([-1.0, -0.5, 0.5, 1.0, 1.0], n)
        assert sign_flip_p(x, 1000, 0) == pytest.approx(_brute_force_p(x)), n
    # Zeros carry no sign; none or one nonzero item leaves p at 1.
    assert sign_flip_p(np.array([1.0, 0.0, 1.0, 0.0, 1.0]), 1000, 0) == pytest.approx(2 / 8)
    assert sign_flip_p(np.array([0.0, 0.0]), 1000, 0) == 1.0
    assert sign_flip_p(np.array([0.0, 1.0]), 1000, 0) == 1.0
    with pytest.raises(ValueError, match="NaN"):
        sign_flip_p(np.array([1.0, math.nan]), 1000, 0)


def test_monte_carlo_sign_flip_is_seeded() -> None:
    # 20 items, all +1: of 2^20 vectors only all-plus and all-minus reach |sum| 20. 1000 random
    # vectors (none of them all-plus or all-minus with this seed) give each side (0 + 1) / 1001,
    # two-sided 2/1001.
    x = np.ones(EXACT_MAX + 6)
    assert sign_flip_p(x, 1000, 3) == pytest.approx(2 / 1001)
    # Near the exact value where it is not extreme, and the same draws for the same seed.
    rng = np.random.default_rng(1)
    y = rng.choice([-1.0, 0.5, 1.0], EXACT_MAX + 2)
    p = sign_flip_p(y, 4000, 5)
    assert p == sign_flip_p(y, 4000, 5)
    assert p == pytest.approx(_brute_force_p(y), abs=0.03)


def test_child_runs_log_the_format_placement_test(tmp_path: Path) -> None:
    """The audit's test (the format placement effect across models) is among a child's MLflow
    metrics; the per-contrast tests stay in its metrics table."""
    rows = [
        {**r, "format": fmt}
        for fmt in ("objection", "question")
        for m, f in (("A", [1]), ("B", [0]))
        for r in _rows(m, "simple", "named", {"i1": f, "i2": f})
    ]
    metrics = _score(tmp_path, rows)["A"]["d"]
    fmt = "xmodel/B/effect/format/objection-vs-question"
    keys = run_metric_keys(metrics, PROTOCOL.report.headline_metrics, PROTOCOL.report.run_metrics)
    assert [k for k in keys if k.startswith("xmodel/")] == [f"{fmt}/diff", f"{fmt}/p_holm"]
    assert "xmodel/B/contrast/format/objection-vs-question/in_context/simple/named/auto/p" in (
        metrics
    )
