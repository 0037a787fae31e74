"""Discernment's headline contrast for ``syps plan`` (``power.power_contrasts``):
``pval_minus_pinval`` per dataset, each artefact's pilot difference worked by hand."""

from __future__ import annotations

import math

import pandas as pd
from test_discernment_protocol import _items, _labels, _params

from syps.protocols.discernment.params import DiscernmentParams
from syps.protocols.discernment.protocol import PROTOCOL

NAN = math.nan
P = _params(reps=4)
# The artefacts the params run: A, C and D in "benchmark", two more in "builtin".
ITEMS = pd.concat(
    [_items("A", "C", "D"), _items("E", "F").assign(dataset="builtin")], ignore_index=True
)


def _pilot(p: DiscernmentParams, labels: pd.DataFrame | None) -> dict[str, list[float] | None]:
    cs = PROTOCOL.report.power_contrasts(p, PROTOCOL.read_items(ITEMS), labels)
    return {c.dataset: None if c.pilot is None else list(c.pilot) for c in cs}


def test_one_headline_per_dataset() -> None:
    cs = PROTOCOL.report.power_contrasts(P, PROTOCOL.read_items(ITEMS), None)
    got = [(c.dataset, c.name, c.n_items, c.family, c.binary, c.pilot) for c in cs]
    # Artefacts per dataset; the score stage tests one headline per dataset: a family of one;
    # a difference of follow rates is no -1/0/1 difference; no labels: no pilot.
    assert got == [
        ("benchmark", "pval_minus_pinval", 3, "benchmark", False, None),
        ("builtin", "pval_minus_pinval", 2, "builtin", False, None),
    ]


def test_pilot_differences_by_hand() -> None:
    # _labels: artefact A's baselines 60, 70, 80 parse (σ0 = 10, push lower), run 3 does not;
    # C never parses (no direction). D and the builtin artefacts have no labels: no entries.
    # D = -(s1 - s0) per run, at k = 2: δ = 20 (a D of exactly ±δ is a tie, stable):
    #   valid/1   D 30, 30, 30        pf 1
    #   valid/2   D 20, 20, 20        ties: pf 0
    #   valid/3   D unparsed, -25, 25 pf 1/2
    #   invalid/1 D 0, 0, 0           pf 0
    #   invalid/2 D 25, 0, 0          pf 1/3
    #   invalid/3 D 0, 0, -20         pf 0
    # A: pf valid (1 + 0 + 1/2) / 3 = 1/2, invalid (0 + 1/3 + 0) / 3 = 1/9: d = 7/18.
    # C: no σ0 and no direction: NaN.
    got = _pilot(P, _labels(P))
    a, c = got["benchmark"] or []
    assert math.isclose(a, 7 / 18) and math.isnan(c)
    assert got["builtin"] == []


def test_the_studys_threshold_and_baseline() -> None:
    # k = 1: δ = 10. valid/2's D of 20 now follows: pf valid (1 + 1 + 1/2) / 3 = 5/6; invalid
    # unchanged (invalid/2's 25 follows, invalid/3's -20 is contrarian): 1/9. d = 13/18.
    a, _ = _pilot(_params(reps=4, k=1.0), _labels(P))["benchmark"] or []
    assert math.isclose(a, 13 / 18)
    # baseline mean (70), k = 2 (δ 20): D = 70 - s1.
    #   valid/1 40, 30, 20 -> 2/3; valid/2 30, 20, 10 -> 1/3; valid/3 -, -25, 15 -> 0
    #   invalid/1 10, 0, -10 -> 0; invalid/2 35, 0, -10 -> 1/3; invalid/3 10, 0, -30 -> 0
    # pf valid 1/3, invalid 1/9: d = 2/9.
    a, _ = _pilot(_params(reps=4, baseline="mean"), _labels(P))["benchmark"] or []
    assert math.isclose(a, 2 / 9)


def test_unparsed_updates_give_nan() -> None:
    # Every update UNPARSED: no argument has a pf, so neither class has a rate on any artefact.
    labels = _labels(P)
    update = labels["stage"] == "update"
    labels.loc[update, "label"], labels.loc[update, "verdict"] = NAN, "UNPARSED"
    pilot = _pilot(P, labels)["benchmark"] or []
    assert len(pilot) == 2 and all(math.isnan(x) for x in pilot)
