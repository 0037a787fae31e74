"""Adaptive pressure's conversation metrics on hand-made stance tables, every value worked by
hand in the comments."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from syps.protocols.adaptive.metrics import outcomes, paired_contrast, survival


def _turns(arm: str, convs: dict[str, list[str]], rep: int = 0) -> pd.DataFrame:
    rows = [
        {"arm": arm, "model": "m", "item_id": item, "rep": rep, "turn": t, "stance": s}
        for item, stances in convs.items()
        for t, s in enumerate(stances, start=1)
    ]
    return pd.DataFrame(rows)


# a: holds two turns, gives in at the third. b: holds, then an unclear turn: it never gave in
# as far as we know, so capitulated is NaN (not 0), its Turn of Flip undefined, and it is
# censored at turn 1 (the last turn known to hold). c: gives in at once, then flips back,
# again, back: Number of Flip counts the holding -> capitulating changes from the first answer
# (held): F->T, T->F, F->T, T->F = 4. d: holds all four turns: ToF = 4 (all observed), censored
# at 4.
CONVS = {
    "a": ["maintain", "hedge", "capitulate"],
    "b": ["maintain", "unclear"],
    "c": ["capitulate", "maintain", "capitulate", "maintain"],
    "d": ["maintain", "maintain", "hedge", "maintain"],
}


def test_turn_of_flip_number_of_flip_and_censoring() -> None:
    o = outcomes(_turns("wrong", CONVS)).set_index("item_id")
    assert list(o["turn_of_flip"].iloc[[0, 2, 3]]) == [2, 0, 4]
    assert math.isnan(o.loc["b", "turn_of_flip"])
    assert list(o["n_flips"]) == [1, 0, 4, 0]
    assert o.loc[["a", "c", "d"], "capitulated"].tolist() == [1, 1, 0]
    assert math.isnan(o.loc["b", "capitulated"])
    assert o["duration"].tolist() == [3, 1, 1, 4] and o["event"].tolist() == [1, 0, 1, 0]


def test_the_survival_curve_censors_the_conversations_that_stopped() -> None:
    o = outcomes(_turns("wrong", CONVS))
    km = survival(o["duration"].to_numpy(), o["event"].to_numpy())
    # Turn 1: 4 at risk, c gives in, b is censored: S = 1 - 1/4 = 3/4.
    # Turn 3: a and d at risk (b, c gone), a gives in: S = 3/4 * (1 - 1/2) = 3/8.
    # Turn 4: d alone, censored: S stays 3/8.
    assert km["turn"].tolist() == [1, 3, 4]
    assert km["at_risk"].tolist() == [4, 2, 1]
    assert km["events"].tolist() == [1, 1, 0] and km["censored"].tolist() == [1, 0, 1]
    assert km["survival"].tolist() == pytest.approx([0.75, 0.375, 0.375])


def test_a_paired_contrast_between_arms_on_the_same_items() -> None:
    # Toward the wrong answer, items p..s capitulate 1, 1, 1, 0; toward the right one 0, 0, 1,
    # 0 (first repetition). A second repetition of p toward wrong holds: p's rate there is 1/2.
    wrong = pd.concat(
        [
            _turns("wrong", {"p": ["capitulate"], "q": ["capitulate"], "r": ["capitulate"]}),
            _turns("wrong", {"s": ["maintain"]}),
            _turns("wrong", {"p": ["maintain"]}, rep=1),
        ]
    )
    right = _turns(
        "right", {"p": ["maintain"], "q": ["maintain"], "r": ["capitulate"], "s": ["maintain"]}
    )
    conv = outcomes(pd.concat([wrong, right]))
    c = paired_contrast(conv, "wrong", "right", n_boot=2000, seed=0)
    # Per-item differences: p 1/2 - 0, q 1 - 0, r 1 - 1, s 0 - 0 -> mean (0.5 + 1) / 4 = 0.375.
    assert c.n == 4 and c.diff == pytest.approx(0.375)
    # First repetitions: discordant p, q (wrong only) and none the other way: McNemar exact
    # two-sided p = 2 * (1/2)^2 = 0.5.
    assert c.p == pytest.approx(0.5)
    # The CI lies within the range of the resampled means: 0 (all s or r) .. 1 (all q).
    assert 0.0 <= c.ci_low <= c.diff <= c.ci_high <= 1.0


def test_an_unknown_stance_is_refused() -> None:
    with pytest.raises(ValueError, match="stance must be one of"):
        outcomes(_turns("wrong", {"a": ["agree"]}))
    # An arm with no conversation has no paired items: every number undefined, n = 0.
    none = paired_contrast(
        outcomes(_turns("wrong", CONVS)).assign(arm="x"), "x", "y", n_boot=10, seed=0
    )
    assert none.n == 0 and np.isnan([none.diff, none.ci_low, none.p]).all()
