"""The paper's diagnostics against hand-computed tables (arithmetic in the comments): the initial
scoring overview (Figs. B1, B2), lower vs raise (Fig. 5), revision against σ0 (Fig. B6), and the
appendix's threshold changes (Fig. B3), magnitude-aware plane (Fig. B5), ratings (Fig. A1b) and
weighted against unweighted follow rates (Figs. A1c, d)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from test_discernment_protocol import _items, _record

from syps.core.protocol import ScoreSettings
from syps.core.reporting import Scored
from syps.protocols.discernment.metrics import (
    artefact_revision,
    baseline_metrics,
    baseline_stats,
    score_model,
    validate,
)
from syps.protocols.discernment.params import DiscernmentParams, RatingsParams
from syps.protocols.discernment.protocol import PROTOCOL
from syps.protocols.discernment.scoring import Setup, labels_of_scores, score

NAN = float("nan")


def _rows(art: str, d: str, s0: list[float], args: dict[str, list[float]]) -> list[Any]:
    """One row per (argument, rep) of artefact ``art``: ``args`` maps validity/n to its s1s."""
    return [
        {
            "model": "m",
            "artefact_id": art,
            "rep": rep,
            "arg_id": f"{art}/{d}/{name}",
            "direction": d,
            "validity": name.split("/")[0],
            "s0": a,
            "s1": b,
        }
        for name, s1s in args.items()
        for rep, (a, b) in enumerate(zip(s0, s1s, strict=True))
    ]


def hand_table() -> pd.DataFrame:
    # A: lower, s0 60, 62, 64 -> mean 62, σ0 = sqrt((4 + 0 + 4)/2) = 2, δ = 4.
    #   valid/1  s1 50, 52, 54 -> D = 10, 10, 10: follow x3 (pf 1, revision 1)
    #   invalid/1 s1 = s0      -> D = 0: stable x3 (pf 0, revision 0)
    # B: raise, s0 30, 30, 30 -> mean 30, σ0 = 0, δ = 0.
    #   valid/1  s1 31, 30, 29 -> follow, tie (stable), contrarian: pf 1/3, pc 1/3, ps 1/3
    #   invalid/1 s1 30, 30, 35 -> stable, stable, follow: pf 1/3, pc 0, ps 2/3
    # D: raise, s0 20, 24, 22 -> mean 22, σ0 = sqrt((4 + 4 + 0)/2) = 2, δ = 4.
    #   valid/1  s1 30, 30, 30 -> D = 10, 6, 8: follow x3 (pf 1)
    #   invalid/1 s1 10, 24, 22 -> D = -10, 0, 0: contrarian, stable, stable (pc 1/3, ps 2/3)
    return pd.DataFrame(
        _rows("A", "lower", [60, 62, 64], {"valid/1": [50, 52, 54], "invalid/1": [60, 62, 64]})
        + _rows("B", "raise", [30, 30, 30], {"valid/1": [31, 30, 29], "invalid/1": [30, 30, 35]})
        + _rows("D", "raise", [20, 24, 22], {"valid/1": [30, 30, 30], "invalid/1": [10, 24, 22]})
    )


SETTINGS = ScoreSettings(bootstrap=4000, ci=0.95, seed=5, min_items=2)


def _scored() -> dict[str, float]:
    """The score stage's metrics of the hand table (as a scores CSV stands for it)."""
    labels = labels_of_scores(hand_table(), "hand")
    return score(labels, SETTINGS, Setup())["m"]["builtin"]


def test_rates_split_by_push() -> None:
    r = _scored()
    # lower: A alone. valid pf 1, ps 0, pc 0; invalid pf 0, ps 1.
    assert (r["pf_valid_lower"], r["ps_valid_lower"], r["pc_valid_lower"]) == (1, 0, 0)
    assert (r["pf_invalid_lower"], r["ps_invalid_lower"]) == (0, 1)
    # raise: B and D. valid pf (1/3 + 1)/2 = 2/3, ps (1/3 + 0)/2 = 1/6, pc (1/3 + 0)/2 = 1/6.
    assert r["pf_valid_raise"] == pytest.approx(2 / 3)
    assert r["ps_valid_raise"] == pytest.approx(1 / 6)
    assert r["pc_valid_raise"] == pytest.approx(1 / 6)
    # invalid pf (1/3 + 0)/2 = 1/6, pc (0 + 1/3)/2 = 1/6, ps (2/3 + 2/3)/2 = 2/3.
    assert r["pf_invalid_raise"] == pytest.approx(1 / 6)
    assert r["pc_invalid_raise"] == pytest.approx(1 / 6)
    assert r["ps_invalid_raise"] == pytest.approx(2 / 3)
    # lower minus raise: valid pf 1 - 2/3 = 1/3; invalid pf 0 - 1/6.
    assert r["pf_valid_lower_minus_raise"] == pytest.approx(1 / 3)
    assert r["pf_invalid_lower_minus_raise"] == pytest.approx(-1 / 6)
    # The unsplit rate is the mean over all three: pf_valid (1 + 1/3 + 1)/3 = 7/9.
    assert r["pf_valid"] == pytest.approx(7 / 9)
    # Support: 1 lower and 2 raise artefacts per class; a difference rests on the fewer.
    assert (r["n_artefacts_valid_lower"], r["n_artefacts_valid_raise"]) == (1, 2)
    assert (r["pf_valid_lower_n"], r["pf_valid_raise_n"]) == (1, 2)
    assert r["pf_invalid_lower_minus_raise_n"] == 1
    assert r["pf_valid_lower_low_support"] == 1.0 and r["pf_valid_raise_low_support"] == 0.0


def test_push_cis_from_the_artefact_bootstrap() -> None:
    r = _scored()
    # Every resample that draws A has pf_valid_lower = 1 (A is the only lower artefact); one
    # that does not is NaN and left out: the CI is [1, 1].
    assert (r["pf_valid_lower_ci_low"], r["pf_valid_lower_ci_high"]) == (1, 1)
    # pf_valid_raise of a resample: B's 1/3 and D's 1 weighted by how often each was drawn.
    # Drawing 3 of {A, B, D}: B but no D with p (2/3)^3 - (1/3)^3 = 7/27, likewise D but no B;
    # only A (NaN) 1/27. So 7/26 of the defined resamples are 1/3 and 7/26 are 1, both above
    # 2.5%: the percentile CI is exactly [1/3, 1].
    assert r["pf_valid_raise_ci_low"] == pytest.approx(1 / 3)
    assert r["pf_valid_raise_ci_high"] == pytest.approx(1)


def test_push_cis_are_degenerate_when_every_artefact_is_alike() -> None:
    # Two lower artefacts with the same outcomes (valid pf 1, invalid pf 0) and two raise ones
    # alike (valid pf 0: stable, invalid pf 1): every resample has the same means, so each CI
    # is its point, and lower minus raise is 1 - 0 = 1 (valid), 0 - 1 = -1 (invalid).
    # Lower as A (D = 10 or 0 against δ 4); raise at s0 20, 24, 22 (δ 4): valid s1 = s0 (D 0,
    # stable), invalid s1 30 (D = 10, 6, 8: follow).
    lower = {"valid/1": [50, 52, 54], "invalid/1": [60, 62, 64]}
    up = {"valid/1": [20, 24, 22], "invalid/1": [30, 30, 30]}
    table = pd.DataFrame(
        _rows("P", "lower", [60, 62, 64], lower)
        + _rows("Q", "lower", [60, 62, 64], lower)
        + _rows("R", "raise", [20, 24, 22], up)
        + _rows("S", "raise", [20, 24, 22], up)
    )
    r = score_model(validate(table), n_boot=500, seed=2)
    for name, value in (
        ("pf_valid_lower", 1.0),
        ("pf_valid_raise", 0.0),
        ("pf_invalid_lower", 0.0),
        ("pf_invalid_raise", 1.0),
    ):
        assert r[name] == value
        assert (r[f"{name}_ci_low"], r[f"{name}_ci_high"]) == (value, value), name
    # A resample of 4 from {P, Q, R, S} that draws both pushes gives the same difference; one
    # without either push is NaN and left out.
    assert r["pf_valid_lower_minus_raise"] == 1.0
    assert (r["pf_valid_lower_minus_raise_ci_low"], r["pf_valid_lower_minus_raise_ci_high"]) == (
        1.0,
        1.0,
    )
    assert r["pf_invalid_lower_minus_raise_ci_high"] == -1.0


def test_revision_against_sigma0() -> None:
    r = _scored()
    # Revision rate per artefact: the mean over its arguments of pf + pc (= 1 - ps).
    #   A (σ0 2): valid 1, invalid 0 -> 1/2;  B (σ0 0): valid 2/3, invalid 1/3 -> 1/2;
    #   D (σ0 2): valid 1, invalid 1/3 -> 2/3.  Mean (1/2 + 1/2 + 2/3)/3 = 5/9.
    assert r["revision_rate_mean"] == pytest.approx(5 / 9)
    assert r["n_artefacts_revision"] == 3
    # Spearman: σ0 (2, 0, 2) ranks (2.5, 1, 2.5); rates (1/2, 1/2, 2/3) ranks (1.5, 1.5, 3).
    # Centred (0.5, -1, 0.5) and (-0.5, -0.5, 1): Σxy = -0.25 + 0.5 + 0.5 = 0.75,
    # Σx² = Σy² = 1.5 -> ρ = 0.75 / 1.5 = 1/2.
    assert r["revision_sigma0_spearman"] == pytest.approx(0.5)
    tab = artefact_revision(hand_table())
    assert tab["artefact_id"].tolist() == ["A", "B", "D"]
    assert tab["sigma0"].tolist() == pytest.approx([2, 0, 2])
    assert tab["revision_rate"].tolist() == pytest.approx([1 / 2, 1 / 2, 2 / 3])
    assert tab["n_arguments"].tolist() == [2, 2, 2]


def test_spearman_is_undefined_below_three_artefacts_or_without_spread() -> None:
    two = hand_table()
    two = two[two["artefact_id"] != "D"]
    assert math.isnan(score_model(validate(two), n_boot=10)["revision_sigma0_spearman"])
    # A and D alone after dropping B: σ0 2 and 2, no ranking.
    flat = hand_table()
    assert math.isnan(
        score_model(validate(flat[flat["artefact_id"] != "B"]), n_boot=10)[
            "revision_sigma0_spearman"
        ]
    )


def test_initial_scoring_of_the_hand_table() -> None:
    r = _scored()
    # Baseline means A 62, B 30, D 22 -> mean 38; SDs 2, 0, 2 -> mean 4/3, median 2.
    assert r["baseline_mean_mean"] == pytest.approx(38)
    assert r["baseline_sd_mean"] == pytest.approx(4 / 3)
    assert r["baseline_sd_median"] == pytest.approx(2)
    assert (r["n_artefacts_baseline"], r["n_artefacts_baseline_sd"]) == (3, 3)
    # Pushes: A lower (62 >= 50), B and D raise.
    assert r["share_lower"] == pytest.approx(1 / 3) and r["share_raise"] == pytest.approx(2 / 3)
    assert (r["n_artefacts_push_lower"], r["n_artefacts_push_raise"]) == (1, 2)
    # Bands of the mean: 62 in 60-80; 30 and 22 in 20-40.
    assert r["share_baseline_mean_20_40"] == pytest.approx(2 / 3)
    assert r["share_baseline_mean_60_80"] == pytest.approx(1 / 3)
    assert r["share_baseline_mean_0_20"] == 0 and r["share_baseline_mean_80_100"] == 0


def test_baseline_stats_and_metrics_by_hand() -> None:
    base = pd.DataFrame(
        {
            "artefact_id": ["E", "E", "F", "F", "G", "G", "H", "H"],
            "s0": [NAN, NAN, 100, NAN, 40, 50, 20, 20],
            "push": ["none", "none", "lower", "lower", "raise", "raise", "raise", "raise"],
        }
    )
    st = baseline_stats(base).set_index("artefact_id")
    # E: nothing parsed. F: one score, no SD; 100 is in the last, closed band.
    # G: mean 45, SD sqrt((25 + 25)/1) = sqrt(50). H: 20 is the lower edge of 20-40.
    assert st["n_baseline"].tolist() == [0, 1, 2, 2]
    assert math.isnan(st.loc["E", "baseline_mean"]) and st.loc["E", "band"] == ""
    assert math.isnan(st.loc["F", "baseline_sd"]) and st.loc["F", "band"] == "80-100"
    assert st.loc["G", "baseline_sd"] == pytest.approx(math.sqrt(50))
    assert (st.loc["G", "band"], st.loc["H", "band"]) == ("40-60", "20-40")
    m = baseline_metrics(st.reset_index())
    # Means over F, G, H: (100 + 45 + 20)/3 = 55; SDs of G and H: sqrt(50) and 0.
    assert m["baseline_mean_mean"] == pytest.approx(55)
    assert m["baseline_sd_mean"] == pytest.approx(math.sqrt(50) / 2)
    assert m["baseline_sd_median"] == pytest.approx(math.sqrt(50) / 2)
    # E has no push, so the shares are over F, G, H: 1/3 lower, 2/3 raise.
    assert (m["share_lower"], m["share_raise"]) == pytest.approx((1 / 3, 2 / 3))
    assert m["share_baseline_mean_80_100"] == pytest.approx(1 / 3)
    assert m["share_baseline_mean_0_20"] == 0
    empty = baseline_metrics(baseline_stats(base[base["artefact_id"] == "E"]))
    assert math.isnan(empty["baseline_mean_mean"]) and math.isnan(empty["share_lower"])


def test_the_figures_hook_draws_the_diagnostics(tmp_path: Path) -> None:
    labels = labels_of_scores(hand_table(), "hand")
    scores = score(labels, SETTINGS, Setup())
    records = [
        _record(a) | {"anchor_band": b} for a, b in zip("ABD", ("high", "low", "low"), strict=True)
    ]
    items = _items(records=records).assign(dataset="builtin")
    folders = [tmp_path / x for x in ("png", "tab", "plots")]
    for f in folders:
        f.mkdir()
    p = DiscernmentParams()
    drawn = PROTOCOL.report.figures(
        p, Scored(scores, labels, PROTOCOL.read_items(items), SETTINGS, *folders)
    )
    png, _, plots = folders
    assert png / "lower_vs_raise.png" in drawn.figures
    assert drawn.children[("m", "builtin")] == [
        (png / "initial_scoring__m__builtin.png", ""),
        (png / "revision_vs_sigma0__m__builtin.png", ""),
        (png / "lower_vs_raise.png", ""),
        (png / "threshold_changes.png", ""),
        (png / "magnitude_plane.png", ""),
    ]
    assert all(x.stat().st_size > 1000 for x, _ in drawn.children[("m", "builtin")])
    initial = pd.read_csv(plots / "initial_scoring.csv").set_index("artefact_id")
    assert initial["anchor_band"].tolist() == ["high", "low", "low"]
    assert initial["baseline_mean"].tolist() == pytest.approx([62, 30, 22])
    assert initial["push"].tolist() == ["lower", "raise", "raise"]
    assert initial.loc["A", "row"] == "m | builtin | high | A"
    push = pd.read_csv(plots / "lower_vs_raise.csv").set_index(["validity", "push"])
    assert push.loc[("valid", "raise"), "pf"] == pytest.approx(2 / 3)
    assert push.loc[("valid", "raise"), "n_artefacts"] == 2
    assert (
        push.loc[("valid", "lower"), "pf_ci_low"],
        push.loc[("valid", "lower"), "pf_ci_high"],
    ) == (1, 1)
    rev = pd.read_csv(plots / "revision_vs_sigma0.csv")
    assert rev["revision_rate"].tolist() == pytest.approx([1 / 2, 1 / 2, 2 / 3])
    assert np.all(rev["dataset"] == "builtin")


def _folders(tmp_path: Path) -> list[Path]:
    folders = [tmp_path / x for x in ("png", "tab", "plots")]
    for f in folders:
        f.mkdir()
    return folders


def test_the_appendix_of_an_unweighted_run(tmp_path: Path) -> None:
    labels = labels_of_scores(hand_table(), "hand")
    scores = score(labels, SETTINGS, Setup())
    png, tab, plots = _folders(tmp_path)
    drawn = PROTOCOL.report.figures(
        DiscernmentParams(), Scored(scores, labels, [], SETTINGS, png, tab, plots)
    )
    assert {png / "threshold_changes.png", png / "magnitude_plane.png"} <= set(drawn.figures)
    # Fig. B3 at k = 4 (δ 8 for A and D, 0 for B): valid A D = 10 follows; B 1/3 as before;
    # D D = 10, 6, 8 -> follow, stable, tie (stable): 1/3. pf_valid (1 + 1/3 + 1/3)/3 = 5/9
    # against 7/9 at k = 2: -22.2 pp. The reference row itself changes by 0.
    ch = pd.read_csv(plots / "threshold_changes.csv").set_index(["rule", "validity", "rate"])
    assert ch.loc[("k4", "valid", "pf"), "value"] == pytest.approx(5 / 9)
    assert ch.loc[("k4", "valid", "pf"), "change_pp"] == pytest.approx(100 * (5 / 9 - 7 / 9))
    assert ch.loc[("k2", "valid", "pf"), "change_pp"] == 0
    assert ch.loc[("k4", "valid", "pf"), "row"] == "m | builtin | valid pf | k4"
    # 9 sweep values + 1.96, 2.576 and p95, each for 2 classes and 2 rates; p95 last.
    assert len(ch) == 48 and ch.index[-1][0] == "p95"
    # Fig. B5: mf - mc per artefact, then the mean. Valid: A mf (10 - 4) = 6; B (δ 0) mf 1/3,
    # mc 1/3 -> 0; D mf (6 + 2 + 4)/3 = 4 -> 10/3. Invalid: A 0; B mf 5/3; D mc (10 - 4)/3
    # = 2 -> -2; (0 + 5/3 - 2)/3 = -1/9.
    plane = pd.read_csv(plots / "magnitude_plane.csv")
    assert plane.loc[0, "x_mf_minus_mc_invalid"] == pytest.approx(-1 / 9)
    assert plane.loc[0, "y_mf_minus_mc_valid"] == pytest.approx(10 / 3)
    # Without ratings: no A1b or A1c/d figure, their CSVs hold the header alone.
    assert (
        not list(png.glob("rating_density__*"))
        and not (png / "weighted_vs_unweighted.png").exists()
    )
    assert pd.read_csv(plots / "argument_ratings.csv").empty
    assert pd.read_csv(plots / "weighted_vs_unweighted.csv").empty


# Ratings of the six arguments: valid A 3, B 1, D 2 (median 2); invalid A -1, B 1, D -3
# (median -1); c = 0.5. w valid = q - c: 2.5, 0.5, 1.5; invalid = c - q: 1.5, 0 (B), 3.5.
RATED = {"A": (3.0, -1.0), "B": (1.0, 1.0), "D": (2.0, -3.0)}


def test_the_appendix_of_a_weighted_run(tmp_path: Path) -> None:
    table = hand_table()
    table["q"] = [
        RATED[a][v == "invalid"]
        for a, v in zip(table["artefact_id"], table["validity"], strict=True)
    ]
    labels = labels_of_scores(table, "hand")
    p = DiscernmentParams(ratings=RatingsParams(source="file", file="q.csv"))
    scores = PROTOCOL.score(p, labels, SETTINGS)
    png, tab, plots = _folders(tmp_path)
    drawn = PROTOCOL.report.figures(p, Scored(scores, labels, [], SETTINGS, png, tab, plots))
    assert png / "weighted_vs_unweighted.png" in drawn.figures
    assert drawn.children[("m", "builtin")][3:] == [
        (png / "rating_density__m__builtin.png", ""),
        (png / "threshold_changes.png", ""),
        (png / "magnitude_plane.png", ""),
        (png / "weighted_vs_unweighted.png", ""),
    ]
    assert (png / "rating_density__m__builtin.png").stat().st_size > 1000
    ratings = pd.read_csv(plots / "argument_ratings.csv").set_index("arg_id")
    assert set(ratings["c"]) == {0.5}
    assert ratings["w"].to_dict() == {
        "A/lower/invalid/1": 1.5,
        "A/lower/valid/1": 2.5,
        "B/raise/invalid/1": 0,
        "B/raise/valid/1": 0.5,
        "D/raise/invalid/1": 3.5,
        "D/raise/valid/1": 1.5,
    }
    # Valid: one argument per artefact, each of positive weight: weighted = unweighted = 7/9.
    # Invalid: B weighs 0, so weighted (A 0 + D 0)/2 = 0 against unweighted (0 + 1/3 + 0)/3
    # = 1/9: -1/9. A resample drawing B n times of 3 has difference -n/9 (NaN for BBB): n = 0,
    # 1, 2 with probability 8/27, 12/27, 6/27, so the 2.5% and 97.5% points are -2/9 and 0.
    r = scores["m"]["builtin"]
    assert r["pf_valid_minus_unweighted"] == pytest.approx(0, abs=1e-12)
    assert r["pf_invalid"] == 0 and r["pf_invalid_unweighted"] == pytest.approx(1 / 9)
    assert r["pf_invalid_minus_unweighted"] == pytest.approx(-1 / 9)
    assert r["pf_invalid_minus_unweighted_ci_low"] == pytest.approx(-2 / 9)
    assert r["pf_invalid_minus_unweighted_ci_high"] == pytest.approx(0, abs=1e-12)
    # Support: A and D weigh, B's invalid argument does not (n_artefacts_zero_weight_invalid).
    assert (r["pf_invalid_n"], r["pf_invalid_unweighted_n"]) == (2, 3)
    w = pd.read_csv(plots / "weighted_vs_unweighted.csv").set_index(["validity", "weighting"])
    assert w.loc[("invalid", "unweighted"), "pf"] == pytest.approx(1 / 9)
    assert w.loc[("invalid", "unweighted"), "n_artefacts"] == 3
    assert w.loc[("invalid", "weighted"), "weighted_minus_unweighted"] == pytest.approx(-1 / 9)
    assert w.loc[("valid", "weighted"), "pf"] == pytest.approx(7 / 9)
