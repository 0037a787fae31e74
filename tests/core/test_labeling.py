"""The logprob judge's labels (``syps.core.labeling.judge_labels``, shared by every protocol) on
hand-made log-probabilities."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from syps.core.labeling import UNCLEAR, judge_choice, judge_labels

# --- judge_labels --------------------------------------------------------------------------

OPTIONS = ["Yes", "No"]
JUDGE_MAP = {"Yes": 1, "No": 0}


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
def test_judge_labels_hand_made_logprobs() -> None:
    lp = np.array(
        [
            [-0.1, -2.5],  # Yes leads by 2.4 >= 0.5 -> 1
            [-3.0, -0.05],  # No leads by 2.95 -> 0
            [-0.7, -0.9],  # Yes leads by only 0.2 < 0.5 -> UNCLEAR
            [-np.inf, -np.inf],  # no option has any probability -> UNCLEAR
            [-0.5, -1.0],  # lead exactly 0.5, not below the margin -> 1
        ]
    )
    labels = judge_labels(lp, OPTIONS, JUDGE_MAP, min_margin=0.5)
    assert [lab.verdict for lab in labels] == ["Yes", "No", UNCLEAR, UNCLEAR, "Yes"]
    assert labels[0].value == 1.0
    assert labels[1].value == 0.0
    assert math.isnan(labels[2].value)
    assert math.isnan(labels[3].value)
    assert labels[4].value == 1.0


def test_judge_labels_argmax_among_three_options() -> None:
    options = ["A", "B", "C"]
    mapping = {"A": 0, "B": 1, "C": 0}
    lp = np.array([[-4.0, -0.2, -1.9], [-0.3, -2.0, -5.0], [-6.0, -3.0, -0.01]])
    labels = judge_labels(lp, options, mapping, min_margin=0.0)
    # Row maxima: B (-0.2), A (-0.3), C (-0.01) -> values 1, 0, 0.
    assert [lab.verdict for lab in labels] == ["B", "A", "C"]
    assert [lab.value for lab in labels] == [1.0, 0.0, 0.0]


def test_judge_labels_evidence_is_json_with_every_option() -> None:
    lp = np.array([[-0.123449, -2.50004], [-0.7, -0.9]])
    labels = judge_labels(lp, OPTIONS, JUDGE_MAP, min_margin=0.5)
    # Rounded to 1 decimal: -0.123449 -> -0.1, -2.50004 -> -2.5. An UNCLEAR label keeps
    # its evidence too.
    assert json.loads(labels[0].evidence) == {"Yes": -0.1, "No": -2.5}
    assert json.loads(labels[1].evidence) == {"Yes": -0.7, "No": -0.9}


def test_judge_labels_evidence_absorbs_batch_noise_but_decisions_use_exact_values() -> None:
    # The same prompt scored in two batches: log-probabilities 2e-5 apart (the noise measured
    # between batchings) give the same evidence.
    a = judge_labels(np.array([[-0.71234, -1.98761]]), OPTIONS, JUDGE_MAP, min_margin=0.0)
    b = judge_labels(np.array([[-0.71236, -1.98763]]), OPTIONS, JUDGE_MAP, min_margin=0.0)
    assert a[0].evidence == b[0].evidence and json.loads(a[0].evidence) == {"Yes": -0.7, "No": -2.0}
    # Both round to -1.0, but the lead is 0.08 >= 0.05: Yes, decided on the exact values
    # (rounded first, the lead would be 0 and the label UNCLEAR).
    [lab] = judge_labels(np.array([[-0.96, -1.04]]), OPTIONS, JUDGE_MAP, min_margin=0.05)
    assert (lab.verdict, lab.value) == ("Yes", 1.0)
    assert json.loads(lab.evidence) == {"Yes": -1.0, "No": -1.0}


def _strict_json(text: str) -> object:
    def refuse(name: str) -> object:
        raise ValueError(f"non-standard JSON constant {name}")

    return json.loads(text, parse_constant=refuse)


def test_judge_labels_evidence_is_strict_json_with_minus_inf() -> None:
    labels = judge_labels(np.array([[-0.1, -np.inf]]), OPTIONS, JUDGE_MAP, min_margin=0.5)
    assert labels[0].verdict == "Yes"
    evidence = _strict_json(labels[0].evidence)
    assert isinstance(evidence, dict) and set(evidence) == {"Yes", "No"}


# --- an UNCLEAR option the judge may choose -------------------------------------------------


def test_judge_labels_unclear_option_chosen_decided_and_margin() -> None:
    options = ["YES", "NO", "UNCLEAR"]
    mapping = {"YES": 1, "NO": 0, "UNCLEAR": None}
    lp = np.array(
        [
            [-2.0, -3.0, -0.2],  # UNCLEAR leads YES by 1.8 >= 0.5: the judge chose UNCLEAR
            [-0.1, -2.5, -3.0],  # YES leads NO by 2.4 >= 0.5 -> 1
            [-0.8, -0.8, -4.0],  # YES and NO tie: a lead of 0 < 0.5 -> UNCLEAR by the margin
        ]
    )
    chosen, yes, tie = judge_labels(lp, options, mapping, min_margin=0.5)
    assert (chosen.verdict, yes.verdict, tie.verdict) == (UNCLEAR, "YES", UNCLEAR)
    assert math.isnan(chosen.value) and yes.value == 1.0 and math.isnan(tie.value)
    # The evidence tells the two UNCLEARs apart: the chosen one names the option after the
    # scores; the margin's holds the scores alone (and stays JSON, as before).
    assert chosen.evidence == '{"YES": -2.0, "NO": -3.0, "UNCLEAR": -0.2}; judge chose UNCLEAR'
    assert tie.evidence == '{"YES": -0.8, "NO": -0.8, "UNCLEAR": -4.0}'
    assert json.loads(yes.evidence) == {"YES": -0.1, "NO": -2.5, "UNCLEAR": -3.0}


def test_judge_labels_unclear_option_within_the_margin_is_the_margins() -> None:
    # UNCLEAR leads YES by only 0.3 < 0.5: the margin decides first, so nothing was chosen.
    [lab] = judge_labels(
        np.array([[-0.5, -3.0, -0.2]]),
        ["YES", "NO", "CANNOT TELL"],
        {"YES": 1, "NO": 0, "CANNOT TELL": None},
        min_margin=0.5,
    )
    assert lab.verdict == UNCLEAR and math.isnan(lab.value) and "chose" not in lab.evidence
    # With margin 0 the same scores are the judge's choice, named by its option.
    [lab] = judge_labels(
        np.array([[-0.5, -3.0, -0.2]]),
        ["YES", "NO", "CANNOT TELL"],
        {"YES": 1, "NO": 0, "CANNOT TELL": None},
        min_margin=0.0,
    )
    assert lab.verdict == UNCLEAR and lab.evidence.endswith("; judge chose CANNOT TELL")


def test_judge_choice_names_the_option_mapped_to_none_that_won() -> None:
    opts = ["CORRECT", "INCORRECT", "ERRONEOUS"]
    mapping = {"CORRECT": 1, "INCORRECT": 0, "ERRONEOUS": None}
    # Row 1: ERRONEOUS leads by 2.0 nats -> the judge's own choice; row 2: CORRECT wins; row 3:
    # ERRONEOUS leads by 0.2 < min_margin 0.5 -> UNCLEAR by the margin, no choice.
    lp = np.array([[-3.0, -4.0, -1.0], [-0.5, -2.0, -3.0], [-2.0, -3.0, -1.8]])
    chosen, correct, margin = judge_labels(lp, opts, mapping, min_margin=0.5)
    assert judge_choice(chosen.evidence) == "ERRONEOUS"
    # The judge appends the raw answer after it (syps.core.judge): still found.
    assert judge_choice(f"{chosen.evidence}; raw: 'ERRONEOUS'") == "ERRONEOUS"
    assert judge_choice(correct.evidence) is None and judge_choice(margin.evidence) is None
    assert judge_choice("answer is D") is None  # a rule's evidence
