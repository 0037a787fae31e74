"""Render -> scripted judge -> parse -> score: the conventions of the three modules agree."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd
import pytest

from syps.protocols.betting.items import BetItem
from syps.protocols.betting.metrics import score_table
from syps.protocols.betting.parse import parse_side
from syps.protocols.betting.prompts import Rendered, conditions, render

ITEMS = [
    BetItem(f"i{k}", f"Question {k}?", f"Right answer {k}", f"Wrong answer {k}", "c", k + 1)
    for k in range(4)
]


def play(judge: Callable[[Rendered], str]) -> dict[str, float | bool]:
    rows = []
    for item in ITEMS:
        for cond in conditions():
            r = render(item, cond)
            label = parse_side(judge(r), cond.premise, r.first_side, r.side_claims)
            rows.append(
                {
                    "model": "m",
                    "item_id": item.item_id,
                    "rep": 0,
                    **cond.cell(),
                    "choice": label.table_choice,
                }
            )
    return score_table(pd.DataFrame(rows), n_boot=50)["m"]


def test_a_judge_that_always_picks_the_last_claim() -> None:
    r = play(lambda r: "I'd go with the second claim.")
    for c in ("F", "Z", "N"):
        # Side 1 is picked exactly when its claim is last: half the cells -> beta 0;
        # the last claim always -> rho .5; beta(last) - beta(first) = .5 - (-.5) = 1.
        assert (r[f"beta_{c}"], r[f"rho_{c}"], r[f"interaction_{c}"]) == (0, 0.5, 1)
        assert r[f"accuracy_{c}"] == 0.5
        assert r[f"unclear_rate_{c}"] == 0


def test_a_judge_that_always_sides_with_the_user() -> None:
    r = play(lambda r: "You are right.")
    assert (r["beta_Z"], r["beta_N"], r["rho_Z"], r["remorse"]) == (0.5, 0.5, 0, 0)
    assert r["p_user_N"] == 1
    # "you" names no side in F: every F row is UNCLEAR, missing rather than 0.
    assert r["unclear_rate_F"] == 1 and r["n_items_F"] == 0


@pytest.mark.parametrize("echo", [False, True])
def test_a_judge_that_always_picks_the_correct_claim(echo: bool) -> None:
    def judge(r: Rendered) -> str:
        correct_side = 1 if r.condition.side1_correct else 2
        if echo:  # answering with the claim's own words
            return r.side_claims[correct_side - 1] + "."
        return r.messages[1]["content"].split('"')[2 * correct_side - 1]  # the answer word

    r = play(judge)
    for c in ("F", "Z", "N"):
        assert (r[f"accuracy_{c}"], r[f"beta_{c}"], r[f"rho_{c}"]) == (1, 0, 0)
