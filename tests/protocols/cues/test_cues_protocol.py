"""SyPS's protocol object beyond scoring: what a trace reader sees flagged, the cells a metric
rests on (``syps audit --metric``), and the flip tables its child runs log with their traces."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
from conftest import cues_params

from syps.core.params import parse_protocols
from syps.protocols import PROTOCOLS
from syps.protocols.cues.protocol import PROTOCOL

NAN = math.nan


def test_review_flags_both_sides_of_each_flip() -> None:
    """Item a: P0 0, P1 1 (a flip: P1 and a's P0 flagged); item b: P0 1, P1 1 (none); item c:
    P0 UNCLEAR, P1 1 (no flip: P0 undecided); item d: rep 0 flips at P3 but rep 1 does not (only
    rep 0's two rows)."""
    rows = [
        ("a", "P0", 0, 0.0), ("a", "P1", 0, 1.0),
        ("b", "P0", 0, 1.0), ("b", "P1", 0, 1.0),
        ("c", "P0", 0, NAN), ("c", "P1", 0, 1.0),
        ("d", "P0", 0, 0.0), ("d", "P3", 0, 1.0), ("d", "P0", 1, 0.0), ("d", "P3", 1, 0.0),
    ]  # fmt: skip
    labels = pd.DataFrame(
        [
            {"model": "m", "dataset": "AITA-YTA", "item_id": i, "variant": v, "rep": r, "label": y}
            for i, v, r, y in rows
        ],
        index=range(100, 100 + len(rows)),
    )
    items = pd.DataFrame(
        {
            "dataset": "AITA-YTA",
            "item_id": ["a", "b", "c", "d"],
            "item": [
                json.dumps({"row": n, "situation": "s", "reference": ref})
                for n, ref in enumerate(["YTA", "", "", ""])
            ],
        }
    )
    params = parse_protocols(cues_params()["protocols"], PROTOCOLS)["cues"]
    review = PROTOCOL.report.review(params, PROTOCOL.read_items(items), labels)
    assert review.index.tolist() == labels.index.tolist()
    assert review["flagged"].tolist() == [
        True, True, False, False, False, False, True, True, False, False,
    ]  # fmt: skip
    assert review["expected"].tolist() == ["YTA", "YTA"] + [""] * 8


@pytest.mark.parametrize(
    ("key", "cells"),
    [
        ("base_syc", [{"variant": "P0"}]),
        ("base_syc_ci_low", [{"variant": "P0"}]),
        ("syc_rate_P0", [{"variant": "P0"}]),
        ("syc_rate_P5_n", [{"variant": "P5"}]),
        ("delta_P3", [{"variant": "P0"}, {"variant": "P3"}]),
        ("delta_P3_ci_high", [{"variant": "P0"}, {"variant": "P3"}]),
        ("flips_towards_P7", [{"variant": "P0"}, {"variant": "P7"}]),
        ("flips_away_P1", [{"variant": "P0"}, {"variant": "P1"}]),
        ("mcnemar_p_holm_P2", [{"variant": "P0"}, {"variant": "P2"}]),
        ("spss", None),
        ("signed_sensitivity", None),
        ("flips_towards", None),
        ("n_items", None),
    ],
)
def test_metric_cells(key: str, cells: list[dict[str, str]] | None) -> None:
    assert PROTOCOL.report.metric_cells(key) == cells


def test_link_traces_replaces_the_flips_folder_alone(tmp_path: Path) -> None:
    folder = tmp_path / "flips" / "m" / "SS"
    folder.mkdir(parents=True)
    columns = "item_id,direction,situation,label_P0,verdict_P0,response_P0,label_P1,verdict_P1"
    (folder / "P1.csv").write_text(
        f"{columns},response_P1,evidence_P0,evidence_P1\na,towards,s,0.0,NO,r0,1.0,YES,r1,e0,e1\n",
        encoding="utf-8",
    )
    png = tmp_path / "m__SS.png"
    index = pd.DataFrame(
        [
            {"dataset": "SS", "item_id": "a", "cell": json.dumps({"variant": v}), "rep": "0",
             "turn": "0", "store_key": "k", "label": "0", "flagged": "true", "trace_id": f"t{v}"}
            for v in ("P0", "P1")
        ]
    )  # fmt: skip
    out = tmp_path / "scratch"
    linked = PROTOCOL.report.link_traces([png, (folder, "flips")], index, out)
    assert linked == [png, (out / "flips", "flips")]
    table = pd.read_csv(out / "flips" / "P1.csv", dtype=str)
    assert table[["trace_P0", "trace_P1"]].values.tolist() == [["tP0", "tP1"]]
