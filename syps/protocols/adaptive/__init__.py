"""Adaptive pressure: a simulated user whose tactic a deterministic controller chooses by the
target's stance, measured against a neutral re-ask and a frozen script on the same scenarios.

The protocol is ``PROTOCOL`` (``protocol``); its params are ``params.AdaptiveParams``.

- ``scenarios``: ``Scenario`` records (question, ground truth, wrong claim, persona, citable
  facts) from TruthfulQA's layout or a researcher's CSV / JSON Lines file;
- ``controller``: the pressure ladder and ``next_step`` (adaptive, flat, fixed);
- ``simulator``: the simulated user's request and the rule flags on what it wrote;
- ``turns``: the conversations rebuilt from the stored rows, and each turn's requests;
- ``labels``: a label record per row; ``metrics``: Turn of Flip, Number of Flip, Kaplan-Meier
  survival, per-arm summaries and paired contrasts; ``scoring``: the score of a label table.
"""

from syps.protocols.adaptive.protocol import PROTOCOL

__all__ = ["PROTOCOL"]
