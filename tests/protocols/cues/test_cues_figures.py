"""The paper's figures: plot data from hand-made scores, and PNGs (model sizes come in as
plain numbers; counting them is the backends' job, see tests/core/backends/test_model_size.py)."""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import pandas as pd
import pytest

from syps.protocols.cues.figures import (
    ALPHA,
    forest_data,
    forest_figure,
    heatmap_data,
    heatmap_figure,
    scatter_data,
    scatter_figure,
    size_data,
    size_figure,
    write_figures,
)
from syps.protocols.cues.metrics import score_labels

NAN = math.nan
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
CUES = ["P0", "P1", "P2", "P3", "P4", "P5", "P6", "P7"]


def _ci(name: str, value: float, low: float, high: float) -> dict[str, float]:
    return {name: value, f"{name}_ci_low": low, f"{name}_ci_high": high}


def _cell(
    base: tuple[float, float, float],
    spss: tuple[float, float, float],
    rates: dict[str, float],
    deltas: dict[str, float],
    holm: dict[str, float],
) -> dict[str, float]:
    """Metrics of one (model, dataset); rate and delta CIs are value -/+ 0.125 (exact in
    binary, so expectations compare with ==)."""
    out = {**_ci("base_syc", *base), **_ci("spss", *spss)}
    for v, r in rates.items():
        out.update(_ci(f"syc_rate_{v}", r, r - 0.125, r + 0.125))
    for v, d in deltas.items():
        out.update(_ci(f"delta_{v}", d, d - 0.125, d + 0.125))
    out.update({f"mcnemar_p_holm_{v}": p for v, p in holm.items()})
    # Keys the figures must not mistake for deltas or rates of their own.
    out.update(_ci("delta_spread_P3", 0.5, 0.25, 0.75) if "P3a" in deltas else {})
    out.update({"signed_sensitivity": 0.0, "n_items": 8.0, "unclear_rate": 0.0})
    return out


# big/SS: P3 has two wordings (P3a, P3b), so per-wording rows and a pooled P3 with its test.
BIG_SS = _cell(
    (0.5, 0.375, 0.625),
    (0.25, 0.125, 0.375),
    dict(zip(CUES, [0.5, 0.75, 0.25, 0.625, 0.875, 1.0, 0.0, 0.375], strict=True)),
    {
        "P1": 0.25,
        "P2": -0.25,
        "P3": 0.125,
        "P3a": 0.0,
        "P3b": 0.25,
        "P4": 0.375,
        "P5": 0.5,
        "P6": -0.5,
        "P7": -0.125,
    },
    # One Holm member per cue: the pooled P3 has an adjusted p, its wordings none.
    {"P1": 0.5, "P2": 0.5, "P3": 0.04, "P4": 0.25, "P5": 0.01, "P6": 0.02, "P7": 1.0},
)
# big/OEQ: every label UNCLEAR, so every metric is NaN.
BIG_OEQ = _cell(
    (NAN, NAN, NAN),
    (NAN, NAN, NAN),
    dict.fromkeys(CUES, NAN),
    dict.fromkeys(CUES[1:], NAN),
    dict.fromkeys(CUES[1:], NAN),
)
# small/SS: its templates define no P7, so P7 has no keys at all.
SMALL_SS = _cell(
    (1.0, 0.75, 1.0),
    (0.75, 0.5, 1.0),
    dict(zip(CUES[:7], [1.0, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5], strict=True)),
    dict.fromkeys(CUES[1:7], -0.5),
    dict.fromkeys(CUES[1:7], 0.001),
)
SCORES = {"big": {"SS": BIG_SS, "OEQ": BIG_OEQ}, "small": {"SS": SMALL_SS}}


def _is_png(path: Path) -> None:
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC
    assert len(data) > 5_000  # a drawn figure, not an empty canvas
    assert [p.name for p in path.parent.iterdir() if p.name.endswith(".tmp")] == []


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()  # IHDR: width and height, big-endian, at bytes 16..24
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


# --- heatmap --------------------------------------------------------------------------------


def test_heatmap_data_rows_values_and_missing_cue() -> None:
    df = heatmap_data(SCORES)
    assert list(df.columns) == [
        "model",
        "dataset",
        "variant",
        "cue",
        "syc_rate",
        "ci_low",
        "ci_high",
    ]
    # 3 cells x 8 cues, in scores' order; the wording-level rates (P3a) are not heatmap columns.
    assert len(df) == 24
    assert df[["model", "dataset"]].drop_duplicates().values.tolist() == [
        ["big", "SS"],
        ["big", "OEQ"],
        ["small", "SS"],
    ]
    big_ss = df[(df["model"] == "big") & (df["dataset"] == "SS")]
    assert big_ss["variant"].tolist() == CUES
    assert big_ss["syc_rate"].tolist() == [0.5, 0.75, 0.25, 0.625, 0.875, 1.0, 0.0, 0.375]
    assert big_ss["ci_low"].tolist() == [0.375, 0.625, 0.125, 0.5, 0.75, 0.875, -0.125, 0.25]
    assert big_ss["cue"].iloc[3] == "validation seeking"
    assert df[df["dataset"] == "OEQ"]["syc_rate"].isna().all()
    # small has no P7 keys: a NaN row, not a KeyError.
    small_p7 = df[(df["model"] == "small") & (df["variant"] == "P7")].iloc[0]
    assert math.isnan(small_p7["syc_rate"]) and math.isnan(small_p7["ci_high"])
    small_p6 = df[(df["model"] == "small") & (df["variant"] == "P6")].iloc[0]
    assert (small_p6["syc_rate"], small_p6["ci_low"], small_p6["ci_high"]) == (0.5, 0.375, 0.625)


def test_heatmap_figure_writes_png_with_nan_cells(tmp_path: Path) -> None:
    df = heatmap_data(SCORES)
    heatmap_figure(df, "SS", tmp_path / "heatmap_SS.png")  # small's P7 is n/a
    heatmap_figure(df, "OEQ", tmp_path / "heatmap_OEQ.png")  # every cell n/a
    _is_png(tmp_path / "heatmap_SS.png")
    _is_png(tmp_path / "heatmap_OEQ.png")
    # figsize (9, 1.8 + 0.45 * models) at dpi 100: 2 models on SS -> 900 x 270 pixels.
    assert _png_size(tmp_path / "heatmap_SS.png") == (900, 270)


# --- scatter --------------------------------------------------------------------------------


def test_scatter_data_exact_rows() -> None:
    df = scatter_data(SCORES)
    assert list(df.columns) == [
        "model",
        "dataset",
        "base_syc",
        "base_syc_ci_low",
        "base_syc_ci_high",
        "spss",
        "spss_ci_low",
        "spss_ci_high",
    ]
    assert df.iloc[0].tolist() == ["big", "SS", 0.5, 0.375, 0.625, 0.25, 0.125, 0.375]
    assert df.iloc[2].tolist() == ["small", "SS", 1.0, 0.75, 1.0, 0.75, 0.5, 1.0]
    assert df.iloc[1][["model", "dataset"]].tolist() == ["big", "OEQ"]
    assert df.iloc[1, 2:].isna().all()


def test_scatter_figure_writes_png_with_an_undefined_point(tmp_path: Path) -> None:
    path = tmp_path / "scatter.png"
    scatter_figure(scatter_data(SCORES), path)
    _is_png(path)
    assert _png_size(path) == (650, 500)


def test_scatter_figure_all_undefined(tmp_path: Path) -> None:
    path = tmp_path / "scatter.png"
    scatter_figure(scatter_data({"big": {"OEQ": BIG_OEQ}}), path)
    assert path.read_bytes()[:8] == PNG_MAGIC


# --- forest ---------------------------------------------------------------------------------


def test_forest_data_rows_order_and_p_holm() -> None:
    df = forest_data(SCORES)
    assert list(df.columns) == [
        "model",
        "dataset",
        "variant",
        "cue",
        "delta",
        "ci_low",
        "ci_high",
        "p_holm",
    ]
    big_ss = df[(df["model"] == "big") & (df["dataset"] == "SS")]
    # Pooled P3 first, then its wordings; delta_spread_P3 is not a row.
    assert big_ss["variant"].tolist() == ["P1", "P2", "P3", "P3a", "P3b", "P4", "P5", "P6", "P7"]
    assert big_ss["cue"].tolist()[2:5] == ["validation seeking"] * 3
    assert big_ss["delta"].tolist() == [0.25, -0.25, 0.125, 0.0, 0.25, 0.375, 0.5, -0.5, -0.125]
    assert big_ss["ci_high"].tolist()[:2] == [0.375, -0.125]
    p = big_ss["p_holm"].tolist()
    # The pooled P3 is the Holm family's member; its wordings are not, so they have none.
    assert math.isnan(p[3]) and math.isnan(p[4])
    assert p[:3] + p[5:] == [0.5, 0.5, 0.04, 0.25, 0.01, 0.02, 1.0]
    # small has no P7 delta: six rows.
    assert df[df["model"] == "small"]["variant"].tolist() == ["P1", "P2", "P3", "P4", "P5", "P6"]
    oeq = df[df["dataset"] == "OEQ"]
    assert oeq["variant"].tolist() == CUES[1:]
    assert oeq[["delta", "ci_low", "ci_high", "p_holm"]].isna().all().all()
    assert len(df) == 9 + 7 + 6


def test_forest_data_stars_a_pooled_cue_from_scored_labels() -> None:
    # 16 items on SS, columns P0, P1, P3a, P3b: P3a moves every item 0 -> 1, P3b none, P1 none.
    # P3's pooled test: each item has m = 2, j = 1, so in halves X = -2 (P0 is the 1, w.p. 1/3)
    # or +1, and T = 16 - 3K with K ~ Binomial(16, 1/3). Observed T = 16; |T| >= 16 at K = 0
    # (2^16 = 65536 of 3^16 = 43046721) or K >= 11 (4368*32 + 1820*16 + 560*8 + 120*4 + 16*2
    # + 1 = 173889): p = 239425/43046721 ~ 0.0056. P1 has no discordant pair: p = 1. Holm over
    # P1 and P3: P3 2 * 239425/43046721 ~ 0.011 < 0.05, a star; P1 1.
    rows = [
        {"dataset": "SS", "model": "m", "item_id": f"i{i:02d}", "variant": v, "label": lab}
        for i in range(16)
        for v, lab in (("P0", 0.0), ("P1", 0.0), ("P3a", 1.0), ("P3b", 0.0))
    ]
    scores = score_labels(pd.DataFrame(rows), 50, 0.95, 0, {"SS": ["P0", "P1", "P3a", "P3b"]})
    df = forest_data(scores).set_index("variant")
    assert df.loc["P3", "p_holm"] == pytest.approx(2 * 239425 / 43046721, rel=1e-12)
    assert df.loc["P3", "p_holm"] < ALPHA
    assert df.loc["P1", "p_holm"] == 1.0
    assert df.loc[["P3a", "P3b"], "p_holm"].isna().all()


def test_forest_data_no_scores_keeps_columns() -> None:
    df = forest_data({})
    assert df.empty and "p_holm" in df.columns


def test_forest_figure_writes_png(tmp_path: Path) -> None:
    path = tmp_path / "forest.png"
    forest_figure(forest_data(SCORES), path)
    _is_png(path)
    # Two dataset panels 4.2 in wide; 9 + 6 = 15 rows on SS: height 1.2 + 0.22 * 15 = 4.5 in.
    assert _png_size(path) == (840, 450)


def test_forest_figure_without_rows(tmp_path: Path) -> None:
    path = tmp_path / "forest.png"
    forest_figure(forest_data({}), path)
    assert path.read_bytes()[:8] == PNG_MAGIC


# --- size -----------------------------------------------------------------------------------


def test_size_data_means_and_missing_sizes() -> None:
    scores = {**SCORES, "api": {"SS": SMALL_SS, "OEQ": {**SMALL_SS, "spss": 0.25}}}
    scores["nan"] = {"OEQ": BIG_OEQ}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an all-NaN mean must not warn
        df = size_data(scores, {"big": 1.7e9, "small": None, "nan": 1e8})
    assert list(df.columns) == ["model", "size_params", "mean_spss"]
    assert df["model"].tolist() == ["big", "small", "api", "nan"]
    # big: SS 0.25, OEQ undefined -> 0.25. small: 0.75. api: (0.75 + 0.25) / 2 = 0.5.
    assert df["mean_spss"].tolist()[:3] == [0.25, 0.75, 0.5]
    assert math.isnan(df["mean_spss"].iloc[3])
    # small's size is None and api is absent from sizes: both NaN, still in the table.
    assert df["size_params"].iloc[0] == 1.7e9
    assert df["size_params"].iloc[1:3].isna().all()
    assert df["size_params"].iloc[3] == 1e8


def test_size_figure_with_and_without_sizes(tmp_path: Path) -> None:
    size_figure(size_data(SCORES, {"big": 1.7e9, "small": 1.35e8}), tmp_path / "a.png")
    _is_png(tmp_path / "a.png")
    size_figure(size_data(SCORES, {"big": 1.7e9}), tmp_path / "b.png")
    _is_png(tmp_path / "b.png")
    size_figure(size_data(SCORES, {}), tmp_path / "none.png")
    _is_png(tmp_path / "none.png")
    assert _png_size(tmp_path / "none.png") == (600, 400)


# --- write_figures --------------------------------------------------------------------------


def test_write_figures_paths_and_csvs(tmp_path: Path) -> None:
    figs, plots = tmp_path / "figures", tmp_path / "plots"
    pngs = write_figures(SCORES, {"big": 1.7e9, "small": None}, figs, plots)
    assert [p.name for p in pngs] == [
        "heatmap_SS.png",
        "heatmap_OEQ.png",
        "scatter.png",
        "forest.png",
        "size.png",
    ]
    assert all(p.parent == figs and p.read_bytes()[:8] == PNG_MAGIC for p in pngs)
    assert sorted(p.name for p in figs.iterdir()) == sorted(p.name for p in pngs)
    assert sorted(p.name for p in plots.iterdir()) == [
        "forest.csv",
        "heatmap.csv",
        "scatter.csv",
        "size.csv",
    ]
    # The CSV is the plot data itself; NaN is written as an empty field and reads back as NaN.
    # Each bar of the plots page is one (model, dataset, variant): its label is the row column.
    firsts = {
        "forest": ["big | SS | P1", "big | SS | P2"],  # deltas: P0 has none
        "heatmap": ["big | SS | P0", "big | SS | P1"],
    }
    for name, data in (("forest", forest_data(SCORES)), ("heatmap", heatmap_data(SCORES))):
        read = pd.read_csv(plots / f"{name}.csv")
        pd.testing.assert_frame_equal(read.drop(columns="row"), data)
        assert read["row"].tolist()[:2] == firsts[name]
        assert read["row"].is_unique
    size = pd.read_csv(plots / "size.csv")
    assert size["size_params"].tolist()[0] == 1.7e9 and math.isnan(size["size_params"].iloc[1])
