"""A reply's reasoning and its final answer, apart.

Reasoning models write their reasoning before the answer: in the text, between ``<think>`` and
``</think>`` (Qwen3, DeepSeek-R1 and their distillations, QwQ) or ``[THINK]`` and ``[/THINK]``
(Mistral's Magistral); some chat templates open the block in the prompt, so the reply holds only
the closing tag; some APIs return it in a field of its own (``reasoning_content`` or
``reasoning``), which the openai backend writes into the text as one ``<think>`` block so that
every backend's reply has one form. Every labeler reads the final answer only, never a verdict
inside the reasoning, and a later turn replays the answer only (``replay: visible``); the
reasoning is kept in the response record (column ``reasoning``) and its tokens are counted in
``completion_tokens``, as generated. lm-evaluation-harness likewise keeps what follows the last
``think_end_token``; Inspect keeps reasoning apart from the answer for every provider.

A reply whose reasoning never closes was cut off inside it (``max_new_tokens`` too small): it
has no answer, and its label is UNCLEAR with that reason (:data:`CUT_IN_REASONING`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from syps.core.labeling import UNCLEAR

# (opening, closing) tag pairs, tried in this order.
TAGS = (("<think>", "</think>"), ("[THINK]", "[/THINK]"))
CUT_IN_REASONING = "cut off inside its reasoning"


@dataclass(frozen=True)
class Reply:
    """``reasoning``: the reasoning block verbatim, tags included ("" when there is none);
    ``answer``: what follows it, leading whitespace removed (the whole text when there is no
    reasoning); ``cut``: the block never closed, so there is no answer."""

    reasoning: str
    answer: str
    cut: bool = False


def split_reasoning(text: str) -> Reply:
    """``text`` as reasoning and answer (see the module docstring).

    The answer is what follows the LAST closing tag, so a model that mentions the tag in its
    reasoning cannot end it early; without a closing tag, a text that opens with an opening
    tag was cut off inside its reasoning; any other text is all answer (a tag in the middle of
    an answer is the answer's own words).
    """
    for opening, closing in TAGS:
        end = text.rfind(closing)
        if end >= 0:
            cut = end + len(closing)
            return Reply(text[:cut], text[cut:].lstrip())
        if text.lstrip().startswith(opening):
            return Reply(text, "", cut=True)
    return Reply("", text)


def with_reasoning(reasoning: str, answer: str) -> str:
    """One reply text from an API's separate reasoning field and its answer."""
    return f"<think>{reasoning}</think>\n{answer}" if reasoning else answer


def cut_rows(responses: pd.DataFrame) -> np.ndarray:
    """The rows of a response table (``RESPONSE_COLUMNS``) cut off inside their reasoning."""
    return np.array(
        [isinstance(r, str) and split_reasoning(r).cut for r in responses["reasoning"]], dtype=bool
    )


def answered(responses: pd.DataFrame) -> pd.DataFrame:
    """``responses`` as a protocol sees them: a row cut off inside its reasoning has no answer,
    so it is marked not generated (``skipped``: :data:`CUT_IN_REASONING`); the protocol then
    builds no later turn on it and labels it as it labels a skipped row, and the label stage
    makes that label UNCLEAR with this reason."""
    cut = cut_rows(responses)
    if not cut.any():
        return responses
    out = responses.copy()
    out.loc[cut, "skipped"] = CUT_IN_REASONING
    return out


def unclear_if_cut(labels: pd.DataFrame, responses: pd.DataFrame) -> pd.DataFrame:
    """``labels`` (one row per response row, in order) with every row cut off inside its
    reasoning UNCLEAR, its evidence the reason and the reasoning's last words."""
    cut = cut_rows(responses)
    if not cut.any():
        return labels

    out = labels.copy()
    at = out.index[cut]
    out.loc[at, "label"] = np.nan
    out.loc[at, "verdict"] = UNCLEAR
    out.loc[at, "evidence"] = [
        f"{CUT_IN_REASONING} (max_new_tokens {n}): ...{str(r)[-80:]!r}"
        for n, r in zip(
            responses["max_new_tokens"].to_numpy()[cut],
            responses["reasoning"].to_numpy()[cut],
            strict=True,
        )
    ]
    return out
