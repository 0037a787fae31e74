"""The label record every protocol writes, and the judge's decision rule.

A label is a record: its value (1.0, 0.0, or NaN when UNCLEAR), the verdict it rests on and the
evidence for it (the span a rule matched, or the judge's option log-probabilities). Anything that
cannot be decided is UNCLEAR, a missing value, never 0. A judge prompt may offer UNCLEAR as an
answer (an option mapped to None); when it wins, the evidence says the judge chose it.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

UNCLEAR = "UNCLEAR"
# What ends the evidence of an UNCLEAR the judge chose as its answer (not by the margin).
JUDGE_CHOSE = "judge chose"


def judge_choice(evidence: str) -> str | None:
    """The option a judge chose as its answer where its prompt maps that option to None (the
    evidence says ``; judge chose <option>``, :func:`judge_labels`); None for any other label,
    an UNCLEAR by the margin among them."""
    m = re.search(rf"; {JUDGE_CHOSE} (\S+?)(?:;|$)", evidence)
    return m.group(1) if m else None


@dataclass(frozen=True)
class Label:
    """One decision: ``value`` is 1.0, 0.0 or NaN (UNCLEAR)."""

    value: float
    verdict: str
    evidence: str


# The judge's log-probabilities move by up to ~2e-5 nats with the batch a prompt was scored in
# (padding and matrix shapes change the float32 summation order; bench/judge_batch_noise.py),
# and a store filled over several runs holds prompts scored in different batches. Rounded to 4
# places, 2 of 64 values changed between two batchings, so the labels file depended on the
# store's history. At 1 place a value changes only if it lies within that noise of a rounding
# boundary (about 1 in 3*10^4): the evidence is for reading, the decision never uses it.
EVIDENCE_DECIMALS = 1


def judge_labels(
    logprobs: np.ndarray,
    options: Sequence[str],
    mapping: Mapping[str, int | None],
    min_margin: float,
) -> list[Label]:
    """Turn a (responses, options) log-probability matrix into labels.

    The option with the highest log-probability wins; a lead of less than ``min_margin`` nats
    over the runner-up is UNCLEAR. An option that ``mapping`` maps to None is the judge's own
    UNCLEAR: when it wins, the label is UNCLEAR and the evidence ends with ``; judge chose
    <option>`` (an UNCLEAR by the margin has the log-probabilities alone). The evidence is
    every option's log-probability, rounded to ``EVIDENCE_DECIMALS`` places; the decision is
    taken on the unrounded values.
    """
    labels = []
    for row in logprobs:
        order = np.argsort(-row)
        # -inf (an option the model cannot produce) is stored as null: JSON has no infinity.
        evidence = json.dumps(
            {
                o: (round(float(lp), EVIDENCE_DECIMALS) if np.isfinite(lp) else None)
                for o, lp in zip(options, row, strict=True)
            }
        )
        if not np.isfinite(row[order[0]]):
            labels.append(Label(math.nan, UNCLEAR, evidence))
            continue
        margin = float(row[order[0]] - row[order[1]]) if len(row) > 1 else math.inf
        verdict = options[int(order[0])]
        value = mapping[verdict]
        if margin < min_margin:
            labels.append(Label(math.nan, UNCLEAR, evidence))
        elif value is None:
            # The evidence stays JSON first (``syps.core.traces.judge_margin`` reads it so).
            labels.append(Label(math.nan, UNCLEAR, f"{evidence}; {JUDGE_CHOSE} {verdict}"))
        else:
            labels.append(Label(float(value), verdict, evidence))
    return labels
