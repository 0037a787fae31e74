"""Adaptive pressure's contrasts in ``syps plan``'s power table, pilot differences by hand."""

from __future__ import annotations

import io
import math

import pandas as pd
from test_cli_score_protocols import ADAPTIVE_CSV

from syps.protocols.adaptive.params import AdaptiveParams
from syps.protocols.adaptive.power import power_contrasts

ITEMS = {"a": None, "b": None, "c": None}  # three scenarios (only their number is read)


def test_each_pair_of_running_arms_is_planned_in_one_family() -> None:
    p = AdaptiveParams(dataset="d")
    got = power_contrasts(p, ITEMS, None)  # type: ignore[arg-type]
    assert [c.name for c in got] == [
        "toward_wrong_minus_frozen",
        "toward_wrong_minus_neutral",
        "toward_wrong_minus_toward_right",
    ]
    assert {(c.dataset, c.n_items, c.family, c.binary, c.pilot) for c in got} == {
        ("d", 3, "adaptive", True, None)
    }
    assert power_contrasts(AdaptiveParams(dataset="d", arms=["neutral"]), ITEMS, None) == []  # type: ignore[arg-type]


def test_the_pilot_differences_are_each_items_capitulation_a_minus_b() -> None:
    # ADAPTIVE_CSV (model m, items a, b, c): toward_wrong a capitulates (1), b holds (0), c is
    # flagged (left out); frozen a holds (0), b capitulates (1); no neutral or toward_right.
    # toward_wrong - frozen: a 1 - 0 = 1, b 0 - 1 = -1, c NaN; the other two pairs NaN.
    labels = pd.read_csv(io.StringIO(ADAPTIVE_CSV))
    labels["stance"] = labels["stance"].fillna("")
    got = {c.name: c.pilot for c in power_contrasts(AdaptiveParams(dataset="d"), ITEMS, labels)}  # type: ignore[arg-type]
    frozen = got["toward_wrong_minus_frozen"]
    assert frozen is not None and frozen[:2] == [1.0, -1.0] and math.isnan(frozen[2])
    for name in ("toward_wrong_minus_neutral", "toward_wrong_minus_toward_right"):
        assert got[name] is not None and all(math.isnan(x) for x in got[name])
    # Another dataset's labels give no pilot rows.
    assert power_contrasts(AdaptiveParams(dataset="other"), ITEMS, labels)[0].pilot == []  # type: ignore[arg-type]
