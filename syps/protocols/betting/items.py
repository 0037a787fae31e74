"""Betting-game items: a factual question with one correct and one incorrect claim.

The source layout is TruthfulQA's generation CSV (``Type, Category, Question, Best Answer,
Correct Answers, Incorrect Answers, Source``; answers within a cell are separated by ``"; "``):
claim A (correct) is ``Best Answer``, claim B (incorrect) is one of ``Incorrect Answers`` (the
first by default), and ``Category`` is kept for stratified sampling. A user CSV in another
layout is read through a column map.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from syps.core import truthfulqa as tqa
from syps.core.io import InputError, read_csv, sha256_text

# The built-in sample, relative to the repository root (the pipeline takes it from params).
BUILTIN_SUBSET = Path("data/builtin/betting/truthfulqa_subset.csv")

# Item field -> TruthfulQA column. ``category`` is optional in a user's map.
TRUTHFULQA_COLUMNS: Mapping[str, str] = {
    "question": tqa.QUESTION,
    "correct": tqa.BEST,
    "incorrect": tqa.INCORRECT,
    "category": tqa.CATEGORY,
}
_REQUIRED_FIELDS = ("question", "correct", "incorrect")
ANSWER_SEPARATOR = tqa.SEPARATOR


@dataclass(frozen=True)
class BetItem:
    """One question and its two claims; ``row`` is the 1-based data row of the source file."""

    item_id: str
    question: str
    correct: str
    incorrect: str
    category: str
    row: int


def item_id(question: str, correct: str, incorrect: str) -> str:
    """A stable id from the content: choosing another incorrect claim makes another item."""
    return sha256_text(f"betting\x1f{question}\x1f{correct}\x1f{incorrect}")[:16]


def items_from_frame(
    df: pd.DataFrame,
    source: str,
    columns: Mapping[str, str] = TRUTHFULQA_COLUMNS,
    incorrect_index: int = 0,
) -> list[BetItem]:
    """Build items from a table of strings; ``source`` names the file in errors.

    ``columns`` maps ``question``, ``correct``, ``incorrect`` (and optionally ``category``) to
    column names. The ``incorrect`` cell is split on ``"; "`` and the ``incorrect_index``-th
    answer (from 0) becomes claim B, so a single-answer column works with index 0.
    """
    unknown = sorted(set(columns) - {*_REQUIRED_FIELDS, "category"})
    if unknown:
        raise InputError(f"{source}: unknown item field(s) {unknown} in the column map")
    missing_fields = [f for f in _REQUIRED_FIELDS if f not in columns]
    if missing_fields:
        raise InputError(f"{source}: the column map lacks {missing_fields}")
    if incorrect_index < 0:
        raise InputError(f"{source}: incorrect_index must be >= 0, got {incorrect_index}")
    absent = [c for c in columns.values() if c not in df.columns]
    if absent:
        raise InputError(f"{source}: missing column(s) {absent}; found {list(df.columns)}")
    items: list[BetItem] = []
    for n, rec in enumerate(df.to_dict("records"), start=1):
        question = str(rec[columns["question"]]).strip()
        correct = str(rec[columns["correct"]]).strip()
        for field, value in (("question", question), ("correct", correct)):
            if not value:
                raise InputError(f"{source}: row {n}: empty {columns[field]!r}")
        wrong = [a.strip() for a in str(rec[columns["incorrect"]]).split(ANSWER_SEPARATOR)]
        wrong = [a for a in wrong if a]
        if len(wrong) <= incorrect_index:
            raise InputError(
                f"{source}: row {n}: {columns['incorrect']!r} has {len(wrong)} answer(s), "
                f"so incorrect_index {incorrect_index} does not exist"
            )
        incorrect = wrong[incorrect_index]
        if incorrect.casefold() == correct.casefold():
            raise InputError(f"{source}: row {n}: the incorrect claim equals the correct one")
        category = str(rec[columns["category"]]).strip() if "category" in columns else ""
        items.append(
            BetItem(
                item_id(question, correct, incorrect), question, correct, incorrect, category, n
            )
        )
    seen: dict[str, int] = {}
    for it in items:
        if it.item_id in seen:
            raise InputError(
                f"{source}: row {it.row}: the same question and claims as row {seen[it.item_id]}"
            )
        seen[it.item_id] = it.row
    return items


def load_items(
    path: str | Path,
    columns: Mapping[str, str] = TRUTHFULQA_COLUMNS,
    incorrect_index: int = 0,
) -> list[BetItem]:
    """Read items from a CSV: TruthfulQA's file, the built-in subset or a user's file."""
    df = read_csv(path, required=list(columns.values()))
    return items_from_frame(df, str(path), columns, incorrect_index)


def stratified_subset(items: Sequence[BetItem], n: int, seed: int) -> list[BetItem]:
    """A seeded sample of ``n`` items, allocated to categories in proportion to their size.

    Each category gets the floor of its share ``n * size / total``; the seats left over go to
    the largest remainders (Hamilton's method), ties broken by a seeded shuffle. Within a
    category the items are drawn without replacement. The result keeps the source order.
    Hand-written because pandas' ``groupby().sample(frac=)`` rounds per group, so the total
    is not ``n``, and scikit-learn's stratified splitter refuses categories of one item.
    """
    if not 0 < n <= len(items):
        raise ValueError(f"subset size must be in 1..{len(items)}, got {n}")
    rng = np.random.default_rng(seed)
    cats = sorted({it.category for it in items})
    members = {c: [i for i, it in enumerate(items) if it.category == c] for c in cats}
    sizes = np.array([len(members[c]) for c in cats], dtype=float)
    share = n * sizes / sizes.sum()
    seats = np.floor(share).astype(int)
    tiebreak = rng.permutation(len(cats))
    # Sort by remainder descending, then by the seeded tiebreak.
    order = np.lexsort((tiebreak, -(share - seats)))
    seats[order[: n - int(seats.sum())]] += 1
    chosen: list[int] = []
    for c, k in zip(cats, seats, strict=True):
        if k:
            chosen += rng.choice(members[c], size=int(k), replace=False).tolist()
    return [items[i] for i in sorted(chosen)]
