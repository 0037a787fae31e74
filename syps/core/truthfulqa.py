"""TruthfulQA's generation CSV (Lin et al., 2022; Apache-2.0, its NOTICE beside every copy):
the one home of its layout, which every design that reads it shares.

Columns ``Type, Category, Question, Best Answer, Correct Answers, Incorrect Answers, Source``;
a cell of answers separates them with ``"; "``.
"""

from __future__ import annotations

QUESTION = "Question"
BEST = "Best Answer"
CORRECT = "Correct Answers"
INCORRECT = "Incorrect Answers"
CATEGORY = "Category"
SEPARATOR = "; "


def answers(cell: str) -> list[str]:
    """The answers of one cell, in the file's order, stripped, empty ones dropped."""
    return [a.strip() for a in str(cell).split(SEPARATOR) if a.strip()]
