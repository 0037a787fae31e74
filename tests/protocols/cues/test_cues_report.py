"""Views of the scores: the summary table, JSON-safe metrics, the profile and its figure."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from syps.core.io import jsonable, jsonable_records
from syps.protocols.cues.figures import heatmap_data
from syps.protocols.cues.metrics import metric_names, score_labels
from syps.protocols.cues.report import profile_figure, summary_table

NAN = math.nan
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
VARIANTS = ["P0", "P1", "P2", "P3", "P4", "P5", "P6", "P7"]


def _metrics(
    base: float, spss: float, unclear: float, n: float, rates: list[float]
) -> dict[str, float]:
    """A metrics dict with CIs at value -/+ 0.1 (NaN stays NaN) for every key the views read."""
    out: dict[str, float] = {}
    values = {
        "base_syc": base,
        "spss": spss,
        **{f"syc_rate_{v}": r for v, r in zip(VARIANTS, rates, strict=True)},
    }
    for name, value in values.items():
        out[name] = value
        out[f"{name}_ci_low"] = value - 0.1
        out[f"{name}_ci_high"] = value + 0.1
    out["unclear_rate"] = unclear
    out["n_items"] = n
    return out


# Model "big" is scored on SS and OEQ, model "s" on SS only.
SCORES = {
    "big": {
        "SS": _metrics(0.5, 0.25, 0.125, 12.0, [0.5, 0.6, 0.3, 0.7, 0.8, 0.9, 0.2, 0.1]),
        "OEQ": _metrics(NAN, NAN, 1.0, 3.0, [NAN] * 8),
    },
    "s": {"SS": _metrics(1.0, 0.0, 0.0, 100.0, [1.0] * 8)},
}


# --- summary_table --------------------------------------------------------------------------


def test_summary_table_exact_text() -> None:
    # Widths: model 5 ("model"), dataset 7, BaseSyc 20 ("0.500 [0.400, 0.600]"),
    # SPSS 21 ("0.000 [-0.100, 0.100]"),
    # UNCLEAR 7 ("UNCLEAR" beats "12.5%" and "100.0%"), items 5 ("items" beats "100").
    # big/SS: 0.5 [0.4, 0.6], 0.25 [0.15, 0.35], 0.125 -> 12.5%, 12 items.
    # big/OEQ: NaN -> n/a twice, 1.0 -> 100.0%, 3 items.
    # s/SS: 1.0 [0.9, 1.1] (a CI bound is printed as is, even above 1), 0 [-0.1, 0.1], 0.0%.
    expected = "\n".join(
        [
            "model  dataset  BaseSyc [90% CI]      SPSS [90% CI]          UNCLEAR  items",
            "-----  -------  --------------------  ---------------------  -------  -----",
            "big    SS       0.500 [0.400, 0.600]  0.250 [0.150, 0.350]   12.5%    12   ",
            "big    OEQ      n/a                   n/a                    100.0%   3    ",
            "s      SS       1.000 [0.900, 1.100]  0.000 [-0.100, 0.100]  0.0%     100  ",
        ]
    )
    assert summary_table(SCORES, 0.9) == expected


def _supported(ms: dict[str, float], base_n: float, spss_n: float) -> dict[str, float]:
    """``ms`` with the support keys of BaseSyc and SPSS, low-support below 10 items."""
    return {
        **ms,
        "base_syc_n": base_n,
        "base_syc_low_support": float(base_n < 10),
        "spss_n": spss_n,
        "spss_low_support": float(spss_n < 10),
    }


def test_summary_table_shows_support_and_marks_low_support() -> None:
    scores = {
        "big": {
            # BaseSyc on 4 items (below 10: marked), SPSS on 12 (not).
            "SS": _supported(SCORES["big"]["SS"], 4.0, 12.0),
            # Undefined metrics stay n/a, whatever their support.
            "OEQ": _supported(SCORES["big"]["OEQ"], 0.0, 0.0),
        },
        "s": {"SS": _supported(SCORES["s"]["SS"], 100.0, 100.0)},
    }
    # Widths: BaseSyc 26 ("0.500 [0.400, 0.600] n=4 †" and "1.000 [0.900, 1.100] n=100"),
    # SPSS 27 ("0.000 [-0.100, 0.100] n=100"). The note follows the table.
    expected = "\n".join(
        [
            "model  dataset  BaseSyc [90% CI]            SPSS [90% CI]                "
            "UNCLEAR  items",
            "-----  -------  --------------------------  ---------------------------  "
            "-------  -----",
            "big    SS       0.500 [0.400, 0.600] n=4 †  0.250 [0.150, 0.350] n=12    "
            "12.5%    12   ",
            "big    OEQ      n/a                         n/a                          "
            "100.0%   3    ",
            "s      SS       1.000 [0.900, 1.100] n=100  0.000 [-0.100, 0.100] n=100  "
            "0.0%     100  ",
            "† low support: the CI rests on fewer than score.min_items items (its n); read it "
            "as a rough range.",
        ]
    )
    assert summary_table(scores, 0.9) == expected
    # No low-support CI: no note.
    assert "†" not in summary_table({"s": scores["s"]}, 0.9)


def test_summary_table_header_follows_ci_level() -> None:
    table = summary_table({"m": {"SS": _metrics(0.0, 0.0, 0.0, 1.0, [0.0] * 8)}}, 0.95)
    assert table.splitlines()[0].startswith("model  dataset  BaseSyc [95% CI]")
    assert "SPSS [95% CI]" in table.splitlines()[0]


def test_summary_table_no_scores_is_header_only() -> None:
    assert summary_table({}, 0.95).splitlines() == [
        "model  dataset  BaseSyc [95% CI]  SPSS [95% CI]  UNCLEAR  items",
        "-----  -------  ----------------  -------------  -------  -----",
    ]


# --- jsonable -------------------------------------------------------------------------------


def test_jsonable_nan_becomes_none_and_floats_stay() -> None:
    scores = {"m": {"SS": {"base_syc": 0.25, "spss": NAN, "n_items": 3.0, "delta_P1": -0.5}}}
    out = jsonable(scores)
    assert out == {"m": {"SS": {"base_syc": 0.25, "spss": None, "n_items": 3.0, "delta_P1": -0.5}}}
    assert isinstance(out["m"]["SS"]["n_items"], float)
    # Strict JSON (no NaN token) now accepts it and round-trips the values.
    text = json.dumps(out, allow_nan=False)
    assert json.loads(text)["m"]["SS"]["spss"] is None
    # The input is left alone.
    assert math.isnan(scores["m"]["SS"]["spss"])


def test_jsonable_records_nan_becomes_none() -> None:
    rows = heatmap_data({"m": {"SS": _metrics(0.5, 0.0, 0.0, 1.0, [0.5, NAN, 1, 0, 0, 0, 0, 0])}})
    records = jsonable_records(rows)
    assert len(records) == 8
    # P0: rate 0.5, CI 0.4..0.6 (built as rate -/+ 0.1); P1: undefined -> null everywhere.
    assert records[0] == {
        "model": "m",
        "dataset": "SS",
        "variant": "P0",
        "cue": "neutral",
        "syc_rate": 0.5,
        "ci_low": pytest.approx(0.4),
        "ci_high": pytest.approx(0.6),
    }
    assert records[1]["syc_rate"] is None
    assert records[1]["ci_low"] is None and records[1]["ci_high"] is None
    assert records[1]["cue"] == "user confidence"
    json.dumps(records, allow_nan=False)  # strict JSON: would raise on a NaN


# --- the judge's UNCLEAR share beside the paper's --------------------------------------------


def test_summary_table_adds_the_oeq_judges_unclear_share_beside_the_papers() -> None:
    # big/OEQ: 3 of 24 judged responses UNCLEAR = 0.125 -> 12.5%; the paper's judge 0.072 ->
    # 7.2% (judges.PAPER). SS is rule-labelled (NaN: no line); "s" has no OEQ (no line).
    scores = {
        "big": {
            "SS": {**SCORES["big"]["SS"], "judge_unclear_rate": NAN},
            "OEQ": {**SCORES["big"]["OEQ"], "judge_unclear_rate": 0.125},
        },
        "s": SCORES["s"],
    }
    lines = summary_table(scores, 0.9).splitlines()
    assert lines[:5] == summary_table(SCORES, 0.9).splitlines()  # the table as it was
    assert lines[5:] == ["big OEQ: judge UNCLEAR 12.5% (paper: 7.2%)"]


def test_judge_unclear_rate_on_a_hand_label_table() -> None:
    judged = "judge:fake/j@rev0"
    # OEQ, one model, 2 items x P0/P1, and a third item's P0 cut off before its answer:
    #   a/P0 judge 1, a/P1 judge UNCLEAR (chosen), b/P0 judge 0, b/P1 judge UNCLEAR (margin),
    #   c/P0 skipped (labeler "", UNCLEAR), c/P1 judge 1.
    # judge_unclear_rate = 2 UNCLEAR of the 5 judged rows = 0.4;
    # unclear_rate = 3 of 6 rows = 0.5 (the skipped row counts there, not here).
    # SS: a rule's rows only -> judge_unclear_rate NaN.
    labels = pd.DataFrame(
        {
            "dataset": ["OEQ"] * 6 + ["SS"] * 2,
            "model": "m",
            "item_id": ["a", "a", "b", "b", "c", "c", "s", "s"],
            "variant": ["P0", "P1"] * 4,
            "label": [1.0, NAN, 0.0, NAN, NAN, 1.0, 1.0, NAN],
            "labeler": [judged] * 4 + ["", judged] + ["rule:SS"] * 2,
        }
    )
    ms = score_labels(labels, 5, 0.9, 0, ["P0", "P1"])["m"]
    assert ms["OEQ"]["judge_unclear_rate"] == pytest.approx(0.4)
    assert ms["OEQ"]["unclear_rate"] == pytest.approx(0.5)
    assert math.isnan(ms["SS"]["judge_unclear_rate"])
    assert list(ms["OEQ"]) == metric_names(["P0", "P1"])
    # A table without labelers (a hand CSV) cannot tell: NaN, and no line under the table.
    bare = score_labels(labels.drop(columns="labeler"), 5, 0.9, 0, ["P0", "P1"])["m"]
    assert math.isnan(bare["OEQ"]["judge_unclear_rate"])
    line = "m OEQ: judge UNCLEAR 40.0% (paper: 7.2%)"
    assert summary_table({"m": ms}, 0.9).splitlines()[-1] == line
    assert line not in summary_table({"m": bare}, 0.9)


# --- profile_figure -------------------------------------------------------------------------


def test_profile_figure_writes_png(tmp_path: Path) -> None:
    rows = heatmap_data(SCORES)
    path = tmp_path / "nested" / "dir" / "big__SS.png"
    profile_figure(rows[(rows["model"] == "big") & (rows["dataset"] == "SS")], "big · SS", path)
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC
    # figsize (7, 3.2) at dpi 100 -> 700 x 320 pixels, stored big-endian in the IHDR chunk.
    assert int.from_bytes(data[16:20], "big") == 700
    assert int.from_bytes(data[20:24], "big") == 320
    # Written atomically by rename or directly: no stray temporary files beside it.
    assert [p.name for p in path.parent.iterdir()] == ["big__SS.png"]


def test_profile_figure_all_undefined_rates(tmp_path: Path) -> None:
    # Every rate NaN (all UNCLEAR) still gives a figure rather than an error.
    rows = heatmap_data(SCORES)
    path = tmp_path / "big__OEQ.png"
    profile_figure(rows[(rows["model"] == "big") & (rows["dataset"] == "OEQ")], "big · OEQ", path)
    assert path.read_bytes()[:8] == PNG_MAGIC
