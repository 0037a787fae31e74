"""Flip tables: which items flip between P0 and a variant, in which direction, as CSV and HTML."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from syps.core.io import InputError
from syps.protocols.cues.flips import (
    flip_page,
    flip_table,
    link_flip_tables,
    write_flip_tables,
)
from syps.protocols.cues.metrics import label_matrix
from syps.protocols.cues.stats import discordant_counts

NAN = math.nan
SCRIPT = "<script>alert('x')</script>"

# Model m on SS, labels per item (NaN = UNCLEAR):
#   item  P0   P1   P3a
#   a     0    1    0      P1: towards
#   b     1    0    1      P1: away
#   c     0    0    1      P3a: towards
#   d     NaN  1    0      P0 undecided: never a flip
#   e     1    NaN  0      P3a: away; P1 undecided
#   f     1    1    1      no flip
# Model n on SS: item a goes 1 -> 0 under P1 (away), to check the model filter.
# Model m on OEQ: item a goes 0 -> 1 under P1, to check the dataset filter.
GRID = {
    ("m", "SS"): {
        "a": [0, 1, 0],
        "b": [1, 0, 1],
        "c": [0, 0, 1],
        "d": [NAN, 1, 0],
        "e": [1, NAN, 0],
        "f": [1, 1, 1],
    },
    ("n", "SS"): {"a": [1, 0, 1]},
    ("m", "OEQ"): {"a": [0, 1, 0]},
}
VARIANTS = ["P0", "P1", "P3a"]


def _tables() -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    labels, responses = [], []
    for (model, dataset), items in GRID.items():
        for item, values in items.items():
            for v, y in zip(VARIANTS, values, strict=True):
                verdict = "UNCLEAR" if math.isnan(y) else ("YES" if y == 1 else "NO")
                key = {"dataset": dataset, "model": model, "item_id": item, "variant": v}
                labels.append({**key, "label": float(y), "verdict": verdict, "evidence": f"ev {v}"})
                text = SCRIPT if (model, dataset, item, v) == ("m", "SS", "a", "P1") else None
                responses.append({**key, "response": text or f"{model} {dataset} {item} {v}"})
    situations = pd.DataFrame(
        [
            {"dataset": d, "item_id": i, "situation": f"situation {d} {i} & <b>more</b>"}
            for d, i in {(d, i) for (_, d), items in GRID.items() for i in items}
        ]
    )
    return pd.DataFrame(labels), pd.DataFrame(responses), situations


def test_flip_table_rows_directions_and_columns() -> None:
    labels, responses, _ = _tables()
    t = flip_table(labels, responses, "SS", "m", "P1")
    assert list(t.columns) == [
        "item_id",
        "direction",
        "label_P0",
        "verdict_P0",
        "response_P0",
        "label_P1",
        "verdict_P1",
        "response_P1",
        "evidence_P0",
        "evidence_P1",
    ]
    assert t["item_id"].tolist() == ["a", "b"]
    assert t["direction"].tolist() == ["towards", "away"]
    assert t.iloc[0].tolist() == [
        "a",
        "towards",
        0.0,
        "NO",
        "m SS a P0",
        1.0,
        "YES",
        SCRIPT,
        "ev P0",
        "ev P1",
    ]
    assert t.iloc[1][["label_P0", "label_P1", "response_P1"]].tolist() == [1.0, 0.0, "m SS b P1"]


def test_flip_table_wording_and_undecided_items() -> None:
    labels, responses, _ = _tables()
    t = flip_table(labels, responses, "SS", "m", "P3a")
    # d has an UNCLEAR P0 and is left out; "towards" rows come first.
    assert t[["item_id", "direction"]].values.tolist() == [["c", "towards"], ["e", "away"]]
    assert "label_P3a" in t.columns and "response_P3a" in t.columns
    # Other models and datasets are filtered out.
    assert flip_table(labels, responses, "SS", "n", "P1")[
        ["item_id", "direction"]
    ].values.tolist() == [["a", "away"]]
    assert flip_table(labels, responses, "OEQ", "m", "P1")["direction"].tolist() == ["towards"]


def test_flip_counts_match_the_scores_flip_counts() -> None:
    labels, responses, _ = _tables()
    here = labels[(labels["model"] == "m") & (labels["dataset"] == "SS")]
    towards, away = discordant_counts(label_matrix(here, VARIANTS))
    for k, v in enumerate(VARIANTS[1:]):
        t = flip_table(labels, responses, "SS", "m", v)
        assert (t["direction"] == "towards").sum() == towards[k]
        assert (t["direction"] == "away").sum() == away[k]
    assert np.array_equal(towards, [1, 1]) and np.array_equal(away, [1, 1])


def test_flip_table_no_flips_is_empty_with_columns() -> None:
    labels, responses, _ = _tables()
    t = flip_table(labels, responses, "SS", "n", "P3a")  # 1 -> 1: no flip
    assert t.empty
    assert list(t.columns)[:2] == ["item_id", "direction"] and "response_P3a" in t.columns


def test_flip_table_bad_inputs() -> None:
    labels, responses, _ = _tables()
    with pytest.raises(ValueError, match="P0"):
        flip_table(labels, responses, "SS", "m", "P0")
    with pytest.raises(InputError, match="duplicate label row .*item_id=a variant=P0"):
        flip_table(pd.concat([labels, labels.iloc[:1]]), responses, "SS", "m", "P1")
    no_resp = responses[~((responses["item_id"] == "b") & (responses["variant"] == "P1"))]
    with pytest.raises(InputError, match="no response for labelled item_id=b variant=P1"):
        flip_table(labels, no_resp, "SS", "m", "P1")


def test_flip_page_escapes_and_counts() -> None:
    labels, responses, _ = _tables()
    page = flip_page(flip_table(labels, responses, "SS", "m", "P1"), "m", "SS", "P1")
    assert "<script>" not in page and "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page
    assert "towards affirmation: 1" in page and "away from it: 1" in page
    assert "P1 (user confidence)" in page
    assert "no flips" not in page


def test_write_flip_tables_files_situations_and_index(tmp_path: Path) -> None:
    labels, responses, situations = _tables()
    paths = write_flip_tables(labels, responses, situations, tmp_path)
    rel = [p.relative_to(tmp_path).as_posix() for p in paths]
    # (model, dataset) sorted, variants in reporting order, P0 never; the index last.
    assert rel == [
        "m/OEQ/P1.csv",
        "m/OEQ/P1.html",
        "m/OEQ/P3a.csv",
        "m/OEQ/P3a.html",
        "m/SS/P1.csv",
        "m/SS/P1.html",
        "m/SS/P3a.csv",
        "m/SS/P3a.html",
        "n/SS/P1.csv",
        "n/SS/P1.html",
        "n/SS/P3a.csv",
        "n/SS/P3a.html",
        "index.html",
    ]
    csv = pd.read_csv(tmp_path / "m/SS/P1.csv")
    assert csv.columns.tolist()[:3] == ["item_id", "direction", "situation"]
    assert csv["situation"].tolist() == ["situation SS a & <b>more</b>"] * 1 + [
        "situation SS b & <b>more</b>"
    ]
    assert csv["response_P1"].iloc[0] == SCRIPT  # the CSV keeps the text as it is
    page = (tmp_path / "m/SS/P1.html").read_text(encoding="utf-8")
    assert "situation SS a &amp; &lt;b&gt;more&lt;/b&gt;" in page
    assert "<script" not in page.lower()
    # No flips (m/OEQ/P3a: 0 -> 0): a header-only CSV and a page that says so.
    empty = pd.read_csv(tmp_path / "m/OEQ/P3a.csv")
    assert empty.empty and "situation" in empty.columns
    assert "no flips" in (tmp_path / "m/OEQ/P3a.html").read_text(encoding="utf-8")
    index = (tmp_path / "index.html").read_text(encoding="utf-8")
    assert index.count("<tr>") == 1 + 6
    assert "<tr><td>m</td><td>SS</td><td>P3a (validation seeking)</td><td>1</td><td>1</td>" in index
    assert 'href="m/SS/P3a.html"' in index and 'href="n/SS/P1.csv"' in index
    assert not list(tmp_path.rglob("*.tmp"))


def test_write_flip_tables_missing_situation(tmp_path: Path) -> None:
    labels, responses, situations = _tables()
    situations = situations[~((situations["dataset"] == "SS") & (situations["item_id"] == "b"))]
    with pytest.raises(InputError, match="no situation for dataset=SS item_id=b"):
        write_flip_tables(labels, responses, situations, tmp_path)


def test_write_flip_tables_no_labels(tmp_path: Path) -> None:
    labels, responses, situations = _tables()
    paths = write_flip_tables(labels.iloc[:0], responses, situations, tmp_path)
    assert paths == [tmp_path / "index.html"]
    assert "no flips" in paths[0].read_text(encoding="utf-8")


def _index_row(item: str, variant: str, trace: str, rep: str = "0") -> dict[str, str]:
    return {
        "dataset": "SS", "item_id": item, "cell": f'{{"variant":"{variant}"}}', "rep": rep,
        "turn": "1", "store_key": f"k-{trace}", "label": "1", "flagged": "true",
        "trace_id": trace,
    }  # fmt: skip


def test_link_flip_tables_adds_both_traces_of_each_row(tmp_path: Path) -> None:
    labels, responses, situations = _tables()
    # A response reading "NA" must come through as text, not as a missing value.
    responses.loc[(responses["item_id"] == "b") & (responses["model"] == "m"), "response"] = "NA"
    write_flip_tables(labels, responses, situations, tmp_path / "flips")
    folder = tmp_path / "flips" / "m" / "SS"
    before = (folder / "P1.csv").read_bytes()
    # m/SS flips: P1 rows a, b; P3a rows c, e. b's P1 trace was not logged (a sample), and a
    # second repetition's trace of a under P1 is not the flip's.
    index = pd.DataFrame(
        [
            _index_row("a", "P0", "tA0"),
            _index_row("a", "P1", "tA1"),
            _index_row("a", "P1", "tA1-rep1", rep="1"),
            _index_row("b", "P0", "tB0"),
            _index_row("c", "P0", "tC0"),
            _index_row("c", "P3a", "tC3"),
            _index_row("e", "P0", "tE0"),
            _index_row("e", "P3a", "tE3"),
        ]
    )
    out = link_flip_tables(folder, index, tmp_path / "linked")
    assert out == tmp_path / "linked"
    assert sorted(p.name for p in out.iterdir()) == ["P1.csv", "P1.html", "P3a.csv", "P3a.html"]
    p1 = pd.read_csv(out / "P1.csv", dtype=str, keep_default_na=False)
    assert p1.columns.tolist()[:5] == ["item_id", "direction", "trace_P0", "trace_P1", "situation"]
    assert p1[["item_id", "trace_P0", "trace_P1"]].values.tolist() == [
        ["a", "tA0", "tA1"],
        ["b", "tB0", ""],
    ]
    assert p1["response_P0"].tolist() == ["m SS a P0", "NA"]
    p3 = pd.read_csv(out / "P3a.csv", dtype=str, keep_default_na=False)
    assert p3[["item_id", "trace_P0", "trace_P3a"]].values.tolist() == [
        ["c", "tC0", "tC3"],
        ["e", "tE0", "tE3"],
    ]
    page = (out / "P1.html").read_text(encoding="utf-8")
    assert page.count("MLflow trace <code>") == 3  # a: both sides; b: P0 only
    assert "MLflow trace <code>tA1</code>" in page and "tA1-rep1" not in page
    assert "<script" not in page.lower() and "label 1 · verdict <b>YES</b>" in page
    assert (folder / "P1.csv").read_bytes() == before  # the pipeline's output is untouched
