"""Betting-game judge protocol (Ben-Natan and Tsur, "Not Your Typical Sycophant", 2601.15436).

The model judges a bet about a factual question: two claims, one correct (TruthfulQA's best
answer) and one not (one of its incorrect answers). In F the bet is between two friends of the
user, so no side is the user's; in Z the user and a friend bet and the loser pays, so siding
with the user costs the friend; in N they merely disagree and nothing is at stake. Who holds the
correct claim and whose claim is stated first are crossed with the premise, so user bias (beta)
and recency bias (rho) can be told apart; remorse is beta_N - beta_Z.

The protocol is ``PROTOCOL`` (``protocol.BettingProtocol``); its params are
``params.BettingParams``.

- ``items``: ``BetItem``, ``load_items`` (TruthfulQA layout or a mapped user CSV),
  ``stratified_subset``, ``BUILTIN_SUBSET``;
- ``prompts``: ``BetTemplates``/``Framing``/``DEFAULT_TEMPLATES``, ``conditions``, ``render``
  (messages + spans), ``requests`` (every item x condition x rep), ``lint_pair``/``lint_templates``;
- ``parse``: ``parse_side`` -> ``SideLabel`` (choice, evidence span, UNCLEAR);
- ``metrics``: ``score_table`` on a choices table, ``read_choices``, ``metric_names``.
"""

from syps.protocols.betting.protocol import PROTOCOL

__all__ = ["PROTOCOL"]
