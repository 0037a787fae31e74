"""Tokens and cost, generated now vs served from the store, against hand-computed values."""

from __future__ import annotations

import pandas as pd
import pytest

from syps.core.config import Price
from syps.core.usage import cost_usd, usage_summary

TABLE = pd.DataFrame({"prompt_tokens": [100, 200, 300, 400], "completion_tokens": [10, 20, 0, 40]})


def test_split_and_cost_by_hand() -> None:
    # Rows 0 and 2 generated now; 1 and 3 served.
    got = usage_summary(TABLE, [True, False, True, False], Price(input=2.5, output=10.0))
    assert got == {
        "tokens_sent": 400.0,
        "tokens_received": 10.0,
        "tokens_sent_served": 600.0,
        "tokens_received_served": 60.0,
        # (400 * 2.5 + 10 * 10) / 1e6 and (600 * 2.5 + 60 * 10) / 1e6
        "cost_usd": pytest.approx(0.0011),
        "cost_saved_usd": pytest.approx(0.0021),
    }


def test_without_a_price_tokens_only_and_all_served_costs_nothing() -> None:
    got = usage_summary(TABLE, [False] * 4, None)
    assert got == {
        "tokens_sent": 0.0,
        "tokens_received": 0.0,
        "tokens_sent_served": 1000.0,
        "tokens_received_served": 70.0,
    }
    assert usage_summary(TABLE, [False] * 4, Price(1.0, 1.0))["cost_usd"] == 0.0


def test_cost_per_million() -> None:
    assert cost_usd(1_000_000, 500_000, Price(input=0.15, output=0.6)) == pytest.approx(0.45)


def test_mask_of_the_wrong_length_is_refused() -> None:
    with pytest.raises(ValueError, match=r"expected \(4,\)"):
        usage_summary(TABLE, [True], None)
