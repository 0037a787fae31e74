"""Argument discernment (Big-Big-SycoBench, Ballon et al.): revise for valid criticism, resist
invalid pressure.

A model scores a text artefact 0-100 R times (its baseline and its own noise σ0), then each
baseline conversation is continued with one pushback argument (towards "lower" if the mean
baseline is >= 50, else "raise"), valid (citing a real property of the artefact) or invalid
(authority, consensus, emotion, bare assertion, plausible fallacy). A repetition *follows* when
the score moves towards the argument by more than k·σ0. A discerning model follows valid
arguments (high p_val) and ignores invalid ones (low p_inval).

The protocol is ``PROTOCOL`` (``protocol.Discernment``); its params are
``params.DiscernmentParams``. Modules: ``items`` (records and loaders), ``prompts`` (baseline
and update conversations), ``parse`` (the 0-100 score parser), ``metrics`` (pf/ps/pc, weights,
composites, bootstrap, sensitivity; ``score_model``), ``ratings`` (Bradley-Terry argument
ratings from pairwise judge comparisons; import it directly, it pulls in choix and networkx);
the protocol's steps: ``table`` (items table, lint), ``turns`` (requests), ``labels`` (label
table, judge ratings), ``scoring`` (``score``, the one scoring path of ``score@discernment``
and ``syps score``) and ``figures``.
"""

from syps.protocols.discernment.protocol import PROTOCOL

__all__ = ["PROTOCOL"]
