"""Tokens and cost of a run, split into what was generated now and what the store served.

A response served from the store costs nothing this time; its recorded usage (what it cost
when it was generated) is what the store saved. Pure: arrays in, named numbers out, for the
caller to log (an MLflow child run's metrics).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from syps.core.config import Price

# Prices are quoted per million tokens.
_PER = 1_000_000


def usage_summary(
    responses: pd.DataFrame, generated: Sequence[bool] | np.ndarray, price: Price | None
) -> dict[str, float]:
    """Tokens sent and received, and their cost, for the rows generated now and the rows served.

    ``responses`` needs ``prompt_tokens`` and ``completion_tokens`` (the responses table, or
    judge records as a frame); ``generated[i]`` says row ``i`` was produced by this run (a
    prompt repeated on several rows is produced once: only its first row is True). Returns
    ``tokens_sent``, ``tokens_received`` (this run), ``tokens_sent_served`` and
    ``tokens_received_served`` (rows served from the store, at their recorded usage), and, when
    ``price`` is given, ``cost_usd`` and ``cost_saved_usd`` at that price.
    """
    mask = np.asarray(generated, dtype=bool)
    if mask.shape != (len(responses),):
        raise ValueError(f"generated has shape {mask.shape}, expected ({len(responses)},)")
    sent = responses["prompt_tokens"].to_numpy(dtype=np.int64)
    received = responses["completion_tokens"].to_numpy(dtype=np.int64)
    out = {
        "tokens_sent": float(sent[mask].sum()),
        "tokens_received": float(received[mask].sum()),
        "tokens_sent_served": float(sent[~mask].sum()),
        "tokens_received_served": float(received[~mask].sum()),
    }
    if price is not None:
        out["cost_usd"] = cost_usd(out["tokens_sent"], out["tokens_received"], price)
        out["cost_saved_usd"] = cost_usd(
            out["tokens_sent_served"], out["tokens_received_served"], price
        )
    return out


def cost_usd(tokens_in: float, tokens_out: float, price: Price) -> float:
    """USD for ``tokens_in`` input and ``tokens_out`` output tokens at ``price``."""
    return (tokens_in * price.input + tokens_out * price.output) / _PER
