"""syps.core.rates: the label table of a rule and a rate with its item-bootstrap CI, against
values worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from syps.core.protocol import LABEL_COLUMNS, LINEAGE_COLUMNS, ScoreSettings
from syps.core.rates import rate_scores, rule_labels

SETTINGS = ScoreSettings(bootstrap=2000, ci=0.95, seed=0, min_items=1)
nan = math.nan


def _labels(rows: list[tuple[str, str, int, float]]) -> pd.DataFrame:
    """(model, item_id, rep, label) rows of one dataset."""
    return pd.DataFrame(
        {
            "model": [m for m, *_ in rows],
            "dataset": "d",
            "item_id": [i for _, i, _, _ in rows],
            "rep": [r for _, _, r, _ in rows],
            "label": [v for *_, v in rows],
        }
    )


def test_a_rate_is_the_mean_over_items_of_each_items_mean_over_its_labelled_rows() -> None:
    # Item a: reps 1, 0, UNCLEAR -> 1/2 (UNCLEAR left out, not 0); b: 1 -> 1; c: 0, 0 -> 0.
    # Rate = (1/2 + 1 + 0) / 3 = 1/2, on 3 items, one UNCLEAR row.
    rows = [("m", "a", 0, 1.0), ("m", "a", 1, 0.0), ("m", "a", 2, nan), ("m", "b", 0, 1.0)]
    rows += [("m", "c", 0, 0.0), ("m", "c", 1, 0.0)]
    got = rate_scores(_labels(rows), "hit_rate", SETTINGS)["m"]["d"]
    assert got["hit_rate"] == 0.5
    assert (got["hit_rate_n"], got["n_unclear"]) == (3.0, 1.0)
    # Resampling the three item means (1/2, 1, 0): a resample's mean is 0 only when it draws c
    # three times, P = 1/27 = 3.7%, and 1 only when it draws b three times, also 3.7%; both
    # above 2.5%, so the 95% interval is [0, 1] (2000 resamples: 3.7% +- 0.4%).
    assert (got["hit_rate_ci_low"], got["hit_rate_ci_high"]) == (0.0, 1.0)


def test_items_that_agree_give_a_ci_of_no_width_and_models_are_scored_apart() -> None:
    rows = [("m1", "a", 0, 1.0), ("m1", "b", 0, 1.0), ("m2", "a", 0, 0.0), ("m2", "b", 0, nan)]
    got = rate_scores(_labels(rows), "r", SETTINGS)
    assert (got["m1"]["d"]["r"], got["m1"]["d"]["r_ci_low"], got["m1"]["d"]["r_ci_high"]) == (
        1.0,
        1.0,
        1.0,
    )
    assert got["m2"]["d"]["r"] == 0.0 and got["m2"]["d"]["r_n"] == 1.0


def test_no_labelled_item_is_nan_not_zero() -> None:
    got = rate_scores(_labels([("m", "a", 0, math.nan)]), "r", SETTINGS)["m"]["d"]
    assert all(math.isnan(got[k]) for k in ("r", "r_ci_low", "r_ci_high"))
    assert (got["r_n"], got["n_unclear"]) == (0.0, 1.0)


def test_rule_labels_keep_the_lineage_and_say_the_verdict() -> None:
    responses = pd.DataFrame({c: ["x", "y"] for c in LINEAGE_COLUMNS} | {"model": ["m", "m"]})
    responses.index = [5, 9]
    got = rule_labels(responses, [1.0, nan], ["blue", "?"], "rule:t", "0" * 64)
    assert list(got.columns) == [*LINEAGE_COLUMNS, "model", *LABEL_COLUMNS]
    assert list(got["verdict"]) == ["1", "UNCLEAR"] and list(got["evidence"]) == ["blue", "?"]
    assert got["label"].iloc[0] == 1.0 and np.isnan(got["label"].iloc[1])
    assert list(got.index) == [0, 1] and list(got["item_id"]) == ["x", "y"]
    with pytest.raises(ValueError, match="2 responses, 1 values"):
        rule_labels(responses, [1.0], ["a", "b"], "rule:t", "0" * 64)
