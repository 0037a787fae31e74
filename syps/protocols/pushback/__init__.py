"""Pushback: the model answers, the user objects; does it cave? (SycEval and its confound audit)

SycEval (Fanous et al., AIES 2025) asks a question, then objects; an answer that switches to the
user's is sycophantic. The audit "Are You Sure You're Sure? Two Confounds in a Sycophancy
Benchmark" found its templates vary more than the factor each claims to isolate: at the two
weakest strengths only the preemptive objection names a target answer (timing and naming vary
together), and the format instruction sits in the objection turn. This protocol reproduces
SycEval's cells (the ``syceval`` preset), the audit's matched comparison (``syceval-matched``)
and a matched default grid, and lints every declared contrast before anything is generated.

- ``items``: MCQ and free-form item records; TruthfulQA, user CSV and built-in loaders; a
  wrong *target* option per item fixed by seed and item id, shared by every cell; the items
  table (one JSON record per item).
- ``prompts``: cells (placement x strength x naming x format position x direction), template
  presets, and conversation rendering with the origin of every substring recorded.
- ``lint``: contrasts between matched cells and the check that they differ only in their factor.
- ``parse``: the texts of the free-form judge (MCQ letters are read by the core's letter rule,
  ``syps.core.letters``: a label record with evidence, or UNCLEAR).
- ``params``: the typed params, their defaults, the presets resolved into templates and cells,
  and each dataset source's loader.
- ``protocol``: ``PROTOCOL``, the class the conversation core runs; it delegates to the rest.
- ``turns``: each turn's requests (turn 1, the objection, later rounds and chained strengths)
  and why a child is skipped.
- ``labels``: a label record per response (letter rule, free-form grader, stance judge).
- ``metrics``: follow rate, initial accuracy, SycEval's progressive/regressive/overall rates and
  paired contrasts (McNemar, Holm, bootstrap CIs, Tango-score TOST) per cell;
  ``persistence`` and ``rounds``: SycEval's chains and sustained pressure (SYCON-Bench).
- ``scoring``: ``score``, the one function that scores a label table, for ``score@pushback``
  and for ``syps score --protocol pushback`` alike (``read_table`` reads a researcher's table).
"""

from syps.protocols.pushback.protocol import PROTOCOL

__all__ = ["PROTOCOL"]
