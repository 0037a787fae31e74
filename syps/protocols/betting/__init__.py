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
- ``prompts``: ``BetTemplates``/``Framing``, ``DEFAULT_TEMPLATES`` (read from this folder's
  ``params.yaml``, the one place the default texts are written), ``conditions``, ``render``
  (messages + spans), ``requests`` (every item x condition x rep), ``lint_pair``/``lint_templates``;
- ``parse``: ``parse_side`` -> ``SideLabel`` (choice, evidence span, UNCLEAR);
- ``metrics``: the metrics of a choices table (``metric_names``, ``PER_CONDITION``).
- ``scoring``: ``score``, the one function that scores a label table, for ``score@betting``
  and ``syps score --protocol betting`` (``read_table``, ``score_file_table``).
"""

from syps.protocols.betting.protocol import PROTOCOL

__all__ = ["PROTOCOL"]
