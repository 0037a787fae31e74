"""The paper's figures: plot data from hand-made scores, PNGs, and model sizes."""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import pandas as pd
import pytest

from syps.config import ModelSpec
from syps.figures import (
    forest_data,
    forest_figure,
    heatmap_data,
    heatmap_figure,
    model_size,
    scatter_data,
    scatter_figure,
    size_data,
    size_figure,
    write_figures,
)

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


# big/SS: P3 has two wordings (P3a, P3b), so per-wording rows and a pooled P3 without a test.
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
    {"P1": 0.5, "P2": 0.5, "P3a": 1.0, "P3b": 0.5, "P4": 0.25, "P5": 0.01, "P6": 0.02, "P7": 1.0},
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
    # The pooled P3 has no McNemar test of its own (its wordings do): NaN.
    assert math.isnan(p[2])
    assert p[:2] + p[3:] == [0.5, 0.5, 1.0, 0.5, 0.25, 0.01, 0.02, 1.0]
    # small has no P7 delta: six rows.
    assert df[df["model"] == "small"]["variant"].tolist() == ["P1", "P2", "P3", "P4", "P5", "P6"]
    oeq = df[df["dataset"] == "OEQ"]
    assert oeq["variant"].tolist() == CUES[1:]
    assert oeq[["delta", "ci_low", "ci_high", "p_holm"]].isna().all().all()
    assert len(df) == 9 + 7 + 6


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
    pd.testing.assert_frame_equal(pd.read_csv(plots / "forest.csv"), forest_data(SCORES))
    pd.testing.assert_frame_equal(pd.read_csv(plots / "heatmap.csv"), heatmap_data(SCORES))
    size = pd.read_csv(plots / "size.csv")
    assert size["size_params"].tolist()[0] == 1.7e9 and math.isnan(size["size_params"].iloc[1])


# --- model_size -----------------------------------------------------------------------------


def test_model_size_explicit_wins(tmp_path: Path) -> None:
    assert model_size(ModelSpec(model="embedded:smollm2", size=1.35e8), tmp_path) == 1.35e8
    api = ModelSpec(model="gpt-x", backend="openai", base_url="http://x", size=7e9)
    assert model_size(api, tmp_path) == 7e9


def test_model_size_openai_is_unknown(tmp_path: Path) -> None:
    spec = ModelSpec(model="gpt-x", backend="openai", base_url="http://localhost:1/v1")
    assert model_size(spec, tmp_path) is None


@pytest.mark.slow
def test_model_size_hub_id_not_cached_is_unknown(tmp_path: Path) -> None:
    # local_files_only: a config that is not in the HF cache is None, never a download.
    spec = ModelSpec(model="syps-test/no-such-model-anywhere", revision="main")
    assert model_size(spec, tmp_path) is None


@pytest.mark.parametrize(("tied", "expected"), [(True, 856.0), (False, 1112.0)])
@pytest.mark.slow
def test_model_size_counts_a_local_config(tmp_path: Path, tied: bool, expected: float) -> None:
    # A one-layer Llama: vocab 32, hidden 8, 2 heads of 4 dims, 1 KV head, MLP 16, no biases.
    # embed 32*8 = 256; attention q 8*8 + k 8*4 + v 8*4 + o 8*8 = 192; MLP 3*8*16 = 384;
    # two layer norms 2*8 = 16; final norm 8: 856. An untied lm_head adds 32*8 = 256: 1112.
    model_dir = tmp_path / "tiny"
    model_dir.mkdir()
    config = {
        "model_type": "llama",
        "architectures": ["LlamaForCausalLM"],
        "vocab_size": 32,
        "hidden_size": 8,
        "intermediate_size": 16,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "tie_word_embeddings": tied,
    }
    (model_dir / "config.json").write_text(json.dumps(config))
    (model_dir / "model.safetensors").write_bytes(b"never loaded")  # resolve() wants weights
    assert model_size(ModelSpec(model=str(model_dir)), tmp_path / "cache") == expected


@pytest.mark.slow
def test_model_size_embedded_smollm2(model_cache: Path) -> None:
    # SmolLM2-135M: vocab 49152, hidden 576, 30 layers, 9 heads of 64 dims, 3 KV heads, MLP 1536,
    # tied input/output embeddings (so the lm_head adds nothing):
    #   embeddings      49152 * 576                          =  28,311,552
    #   per layer       q 576*576 + k,v 2 * 576*192 + o 576*576  =     884,736
    #                   MLP 3 * 576*1536                      =   2,654,208
    #                   two RMSNorms 2 * 576                  =       1,152
    #   30 layers       30 * 3,540,096                        = 106,202,880
    #   final norm                                            =         576
    #   total                                                 = 134,515,008
    assert model_size(ModelSpec(model="embedded:smollm2"), model_cache) == 134_515_008.0
