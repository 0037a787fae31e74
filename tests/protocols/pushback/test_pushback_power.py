"""Pushback's headline contrasts for ``syps plan`` (``power.power_contrasts``): one per
declared contrast and dataset, a Holm family per dataset, each pilot difference worked by hand."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
from test_pushback_escalation import ETHOS, PRE_ETHOS, SIMPLE, TWO, _label
from test_pushback_protocol import GRID4, LABELS, _params

from syps.core.reporting import PowerContrast
from syps.protocols.pushback.prompts import Cell
from syps.protocols.pushback.protocol import PROTOCOL

NAN = math.nan
# The items the params run: d holds LABELS' four items and one more, e has no labels.
ITEMS = pd.DataFrame(
    {"dataset": ["d"] * 5 + ["e"] * 2, "item_id": ["i1", "i2", "i3", "i4", "i5", "x1", "x2"]}
)


def _keys(items: pd.DataFrame) -> dict[tuple[str, str], Any]:
    """The items as the power hook is handed them; it counts their keys alone, so the records
    (which these tables leave out) stay None."""
    return dict.fromkeys(zip(items["dataset"], items["item_id"], strict=True))


REST = "simple/objection/auto"
NAMING_IC = f"contrast/naming/unnamed-vs-named/in_context/{REST}"
NAMING_PRE = f"contrast/naming/unnamed-vs-named/preemptive/{REST}"
PLACE_U = "contrast/placement/in_context-vs-preemptive/simple/unnamed/objection/auto"
PLACE_N = "contrast/placement/in_context-vs-preemptive/simple/named/objection/auto"


def _pilots(cs: list[PowerContrast], dataset: str) -> dict[str, list[float] | None]:
    return {c.name: None if c.pilot is None else list(c.pilot) for c in cs if c.dataset == dataset}


def _same(got: list[float] | None, want: list[float]) -> bool:
    """Equal lists, NaN equal to NaN."""
    return got is not None and len(got) == len(want) and np.allclose(got, want, equal_nan=True)


def test_one_contrast_per_declared_contrast_and_dataset() -> None:
    cs = PROTOCOL.report.power_contrasts(GRID4, _keys(ITEMS), None)
    # placement x naming (format objection, simple, auto): two naming contrasts (one per
    # placement) and two placement contrasts (one per naming), in every dataset.
    names = {NAMING_IC, NAMING_PRE, PLACE_U, PLACE_N}
    assert {c.name for c in cs if c.dataset == "d"} == names
    assert {c.name for c in cs if c.dataset == "e"} == names
    # n_items: the items the params run per dataset; one Holm family per dataset, so m = 4.
    assert {(c.dataset, c.n_items, c.family) for c in cs} == {("d", 5, "d"), ("e", 2, "e")}
    # One repetition: each item's difference is -1, 0 or 1 (McNemar's case); no labels: None.
    assert all(c.binary and c.pilot is None for c in cs)


def test_pilot_differences_by_hand() -> None:
    # LABELS (model m, dataset d), followed per item i1..i4 in each cell's objection (turn 2;
    # None: a skipped child, so NaN):
    #   in-context unnamed 0, 0, 1, None   in-context named 1, 0, 1, 1
    #   preemptive unnamed 0, 1, 1, 0      preemptive named 1, 1, 1, 1
    # d = cell b - cell a per item (b named / preemptive, a unnamed / in context):
    #   naming in context:   1-0, 0-0, 1-1, NaN  = 1, 0, 0, NaN
    #   naming preemptive:   1-0, 1-1, 1-1, 1-0  = 1, 0, 0, 1
    #   placement unnamed:   0-0, 1-0, 1-1, NaN  = 0, 1, 0, NaN
    #   placement named:     1-1, 1-0, 1-1, 1-1  = 0, 1, 0, 0
    # i5 is run but not in the pilot: no entry. Dataset e: no labels of its own, no entries.
    cs = PROTOCOL.report.power_contrasts(GRID4, _keys(ITEMS), LABELS)
    d = _pilots(cs, "d")
    assert _same(d[NAMING_IC], [1, 0, 0, NAN])
    assert _same(d[NAMING_PRE], [1, 0, 0, 1])
    assert _same(d[PLACE_U], [0, 1, 0, NAN])
    assert _same(d[PLACE_N], [0, 1, 0, 0])
    assert all(v == [] for v in _pilots(cs, "e").values())


def test_repetitions_are_averaged_and_models_stacked() -> None:
    # Model m2: LABELS again as rep 0, and a rep 1 in which the in-context named cell holds on
    # every item (0). A turn-3 row (a later round) is not the cell's objection: left out.
    rep1 = LABELS.assign(model="m2", rep=1)
    ic_named = (rep1["placement"] == "in_context") & (rep1["naming"] == "named")
    rep1.loc[ic_named & (rep1["turn"] == 2), "followed"] = 0.0
    later = LABELS[LABELS["turn"] == 2].assign(model="m2", turn=3, followed=1.0)
    labels = pd.concat([LABELS, LABELS.assign(model="m2"), rep1, later], ignore_index=True)
    p = _params(grid={"formats": ["objection"]}, generation={"reps": 2})
    cs = PROTOCOL.report.power_contrasts(p, _keys(ITEMS), labels)
    # Two repetitions: an item's difference is a mean, no longer -1, 0 or 1.
    assert not any(c.binary for c in cs)
    # m2, naming in context: named (1+0)/2, (0+0)/2, (1+0)/2, (1+0)/2 = .5, 0, .5, .5;
    # unnamed (rep 1 as rep 0) 0, 0, 1, NaN -> d = .5, 0, -.5, NaN; after m's 1, 0, 0, NaN.
    d = _pilots(cs, "d")
    assert _same(d[NAMING_IC], [1, 0, 0, NAN, 0.5, 0, -0.5, NAN])
    # m2, placement named: preemptive named 1, 1, 1, 1 minus in-context named .5, 0, .5, .5.
    assert _same(d[PLACE_N], [0, 1, 0, 0, 0.5, 1, 0.5, 0.5])


def test_chained_escalation_takes_each_strength_at_its_own_turn() -> None:
    # Chained: in context, simple is turn 2 and ethos turn 3 of one conversation; preemptive
    # cells are turn 2. Followed: i1 simple 0, ethos 1, preemptive 1 and 1; i2 simple 1,
    # ethos 0, preemptive 0 and 0. Placement contrasts (preemptive - in context):
    #   simple: i1 1 - 0 = 1, i2 0 - 1 = -1;  ethos: i1 1 - 1 = 0, i2 0 - 0 = 0.
    p = _params(lint="warn", **TWO)
    pre_simple = Cell("preemptive", "simple", "named", "objection")
    rows = []
    for item, (s, e), pre in (("i1", (0.0, 1.0), 1.0), ("i2", (1.0, 0.0), 0.0)):
        rows += [_label(item, c, 1, 0) for c in (SIMPLE, ETHOS, pre_simple, PRE_ETHOS)]
        rows += [_label(item, SIMPLE, 2, s), _label(item, ETHOS, 3, e)]
        rows += [_label(item, pre_simple, 2, pre), _label(item, PRE_ETHOS, 2, pre)]
    items = pd.DataFrame({"dataset": ["d", "d"], "item_id": ["i1", "i2"]})
    d = _pilots(PROTOCOL.report.power_contrasts(p, _keys(items), pd.DataFrame(rows)), "d")
    place = "contrast/placement/in_context-vs-preemptive"
    assert d == {
        f"{place}/simple/named/objection/auto": [1.0, -1.0],
        f"{place}/ethos/named/objection/auto": [0.0, 0.0],
    }


def test_labels_without_a_pilot_give_nan() -> None:
    # Every objection UNCLEAR: no item has both cells of any contrast labelled.
    unclear = LABELS.assign(followed=NAN)
    for pilot in _pilots(
        PROTOCOL.report.power_contrasts(GRID4, _keys(ITEMS), unclear), "d"
    ).values():
        assert _same(pilot, [NAN] * 4)
    # Labels of other cells only (the format-question grid's): none of these contrasts' cells.
    other = LABELS.assign(format="question")
    for pilot in _pilots(PROTOCOL.report.power_contrasts(GRID4, _keys(ITEMS), other), "d").values():
        assert _same(pilot, [NAN] * 4)
