"""Pushback items: multiple-choice and free-form questions, and their loaders.

An MCQ item carries its options in the order shown (letter A is ``options[0]``), the correct
letter and a designated wrong *target* letter: the answer a regressive objection asserts. The
target, and for TruthfulQA the option order, are drawn from a generator seeded by the global
seed and the item id (``item_rng``), so every cell of a grid objects with the same target, and
adding or dropping other items changes nothing about this one.

Per-item objection texts (``justification``/``citation`` strengths) live in ``texts``, keyed
``"<kind>:<letter>"``: the text arguing for that letter. A CSV gives them as the columns
``<kind>_correct`` and ``<kind>_target`` (arguing for the correct and for the target option).

The items table the pipeline stores holds one row per item, its record as JSON in ``item``
(``items_table`` writes it, ``items_of`` reads it back).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from syps.core import truthfulqa as tqa
from syps.core.io import InputError, canonical_json, read_csv, sha256_text
from syps.core.letters import LETTERS

# The strengths whose objection quotes a per-item text.
TEXT_KINDS = ("justification", "citation")
BUILTIN_DIR = Path(__file__).resolve().parents[3] / "data" / "builtin" / "pushback"
# TruthfulQA separates the answers within a cell with "; " (see its NOTICE).
TRUTHFULQA_SEP = ";"


@dataclass(frozen=True)
class McqItem:
    """A multiple-choice question; ``correct`` and ``target`` are letters, never equal."""

    dataset: str
    item_id: str
    question: str
    options: tuple[str, ...]
    correct: str
    target: str
    texts: Mapping[str, str] = field(default_factory=dict)

    @property
    def letters(self) -> str:
        return LETTERS[: len(self.options)]

    def option(self, letter: str) -> str:
        """The text of the option ``letter``."""
        return self.options[LETTERS.index(letter)]


@dataclass(frozen=True)
class FreeItem:
    """A free-form question; ``target`` is the wrong answer an objection asserts ("" if none)."""

    dataset: str
    item_id: str
    question: str
    ground_truth: str
    target: str = ""
    texts: Mapping[str, str] = field(default_factory=dict)


def item_id(dataset: str, question: str) -> str:
    """A stable id from the content, so an item keeps its id across files and reorderings."""
    return sha256_text(f"pushback\x1f{dataset}\x1f{question}")[:16]


def item_rng(seed: int, item: str, purpose: str) -> np.random.Generator:
    """A generator for one random choice about one item, independent of every other item.

    Hashing (seed, item id, purpose) rather than drawing from one stream keeps an item's target
    fixed whatever the file order or which other items are loaded.
    """
    digest = hashlib.sha256(f"{seed}\x1f{item}\x1f{purpose}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "big"))


def choose_target(seed: int, iid: str, n_options: int, correct: str) -> str:
    """The designated wrong option of an item: uniform over its wrong letters."""
    wrong = [x for x in LETTERS[:n_options] if x != correct]
    return wrong[int(item_rng(seed, iid, "target").integers(len(wrong)))]


def _texts(row: pd.Series, letters: Mapping[str, str]) -> dict[str, str]:
    """Per-item texts from ``<kind>_correct``/``<kind>_target`` columns, keyed by letter."""
    out = {}
    for kind in TEXT_KINDS:
        for role, letter in letters.items():
            col = f"{kind}_{role}"
            if col in row.index and str(row[col]).strip():
                out[f"{kind}:{letter}"] = str(row[col]).strip()
    return out


@dataclass(frozen=True)
class McqColumns:
    """Which columns of a user CSV hold an MCQ item: one column per option (empty cells at the
    end allowed, at least two options), and the correct option's letter."""

    question: str = "question"
    options: tuple[str, ...] = ("A", "B", "C", "D")
    correct: str = "correct"


@dataclass(frozen=True)
class FreeColumns:
    """Which columns of a user CSV hold a free-form item; ``incorrect`` (optional) lists wrong
    answers separated by ``;``, one of which becomes the item's target."""

    question: str = "question"
    ground_truth: str = "ground_truth"
    incorrect: str | None = "incorrect"


def load_mcq_csv(
    path: str | Path, seed: int, dataset: str, columns: McqColumns = McqColumns()
) -> list[McqItem]:
    """MCQ items from a user CSV; errors name the file and the 1-based data row."""
    df = read_csv(path, [columns.question, *columns.options, columns.correct])
    items = []
    for i, row in df.iterrows():
        where = f"{path}: row {int(str(i)) + 1}"
        question = str(row[columns.question]).strip()
        if not question:
            raise InputError(f"{where}: empty {columns.question!r}")
        opts = [str(row[c]).strip() for c in columns.options]
        while opts and not opts[-1]:
            opts.pop()
        if len(opts) < 2 or not all(opts):
            raise InputError(
                f"{where}: options {list(columns.options)} need at least two non-empty "
                f"cells, with no gap before the last one"
            )
        if len(set(opts)) != len(opts):
            raise InputError(f"{where}: two options have the same text")
        correct = str(row[columns.correct]).strip().upper()
        if len(correct) != 1 or correct not in LETTERS[: len(opts)]:
            raise InputError(
                f"{where}: {columns.correct!r} is {row[columns.correct]!r}; "
                f"expected one of {list(LETTERS[: len(opts)])}"
            )
        iid = item_id(dataset, question)
        target = choose_target(seed, iid, len(opts), correct)
        texts = _texts(row, {"correct": correct, "target": target})
        items.append(McqItem(dataset, iid, question, tuple(opts), correct, target, texts))
    _check_unique(items, path)
    return items


def load_free_csv(
    path: str | Path, seed: int, dataset: str, columns: FreeColumns = FreeColumns()
) -> list[FreeItem]:
    """Free-form items from a user CSV; the target is one of the ``incorrect`` answers, drawn
    per item by seed ("" where the column is absent or empty)."""
    df = read_csv(path, [columns.question, columns.ground_truth])
    items = []
    for i, row in df.iterrows():
        where = f"{path}: row {int(str(i)) + 1}"
        question = str(row[columns.question]).strip()
        truth = str(row[columns.ground_truth]).strip()
        if not question or not truth:
            raise InputError(f"{where}: empty {columns.question!r} or {columns.ground_truth!r}")
        iid = item_id(dataset, question)
        wrong: list[str] = []
        if columns.incorrect and columns.incorrect in df.columns:
            wrong = _split(str(row[columns.incorrect]), exclude=[truth])
        target = wrong[int(item_rng(seed, iid, "target").integers(len(wrong)))] if wrong else ""
        texts = {}
        for kind in TEXT_KINDS:
            for role, answer in (("correct", truth), ("target", target)):
                col = f"{kind}_{role}"
                if answer and col in row.index and str(row[col]).strip():
                    texts[f"{kind}:{answer}"] = str(row[col]).strip()
        items.append(FreeItem(dataset, iid, question, truth, target, texts))
    _check_unique(items, path)
    return items


def _split(cell: str, exclude: Sequence[str] = ()) -> list[str]:
    """The distinct non-empty answers of a ``;``-separated cell, in order, minus ``exclude``."""
    out: list[str] = []
    for part in cell.split(TRUTHFULQA_SEP):
        p = part.strip()
        if p and p not in out and p not in exclude:
            out.append(p)
    return out


def _check_unique(items: Sequence[McqItem | FreeItem], path: str | Path) -> None:
    seen: dict[str, int] = {}
    for k, it in enumerate(items):
        if it.item_id in seen:
            raise InputError(
                f"{path}: rows {seen[it.item_id] + 1} and {k + 1} ask the same question; "
                f"an item must appear once"
            )
        seen[it.item_id] = k


TRUTHFULQA_COLUMNS = [tqa.QUESTION, tqa.BEST, tqa.INCORRECT]


def load_truthfulqa(
    path: str | Path, seed: int, n_options: int = 4, dataset: str = "truthfulqa"
) -> list[McqItem]:
    """MCQ items from TruthfulQA's CSV layout: the best answer plus up to ``n_options - 1`` of
    the incorrect answers, shuffled per item by seed.

    Which incorrect answers are kept is the first ones in the file's order (deduplicated, minus
    any equal to the best answer): the file lists the canonical misconceptions first, and a
    fixed choice means the seed only moves the letters, not the content. Rows with fewer
    incorrect answers get fewer options (at least two).
    """
    if not 2 <= n_options <= len(LETTERS):
        raise ValueError(f"n_options must be 2..{len(LETTERS)}, got {n_options}")
    df = read_csv(path, TRUTHFULQA_COLUMNS)
    items = []
    for i, row in df.iterrows():
        where = f"{path}: row {int(str(i)) + 1}"
        question, best = str(row[tqa.QUESTION]).strip(), str(row[tqa.BEST]).strip()
        wrong = _split(str(row[tqa.INCORRECT]), exclude=[best])[: n_options - 1]
        if not question or not best or not wrong:
            raise InputError(f"{where}: needs a Question, a Best Answer and an Incorrect Answer")
        iid = item_id(dataset, question)
        order = item_rng(seed, iid, "options").permutation(len(wrong) + 1)
        pool = [best, *wrong]
        options = tuple(pool[k] for k in order)
        correct = LETTERS[int(np.flatnonzero(order == 0)[0])]
        target = choose_target(seed, iid, len(options), correct)
        items.append(McqItem(dataset, iid, question, options, correct, target))
    _check_unique(items, path)
    return items


def load_truthfulqa_free(
    path: str | Path, seed: int, dataset: str = "truthfulqa-free"
) -> list[FreeItem]:
    """Free-form items from TruthfulQA: the best answer is the ground truth; the target is one
    of the incorrect answers, drawn per item by seed."""
    cols = FreeColumns(question=tqa.QUESTION, ground_truth=tqa.BEST, incorrect=None)
    df = read_csv(path, TRUTHFULQA_COLUMNS)
    items = []
    for i, row in df.iterrows():
        where = f"{path}: row {int(str(i)) + 1}"
        question, truth = str(row[cols.question]).strip(), str(row[cols.ground_truth]).strip()
        wrong = _split(str(row[tqa.INCORRECT]), exclude=[truth])
        if not question or not truth or not wrong:
            raise InputError(f"{where}: needs a Question, a Best Answer and an Incorrect Answer")
        iid = item_id(dataset, question)
        target = wrong[int(item_rng(seed, iid, "target").integers(len(wrong)))]
        items.append(FreeItem(dataset, iid, question, truth, target))
    _check_unique(items, path)
    return items


def load_builtin(seed: int) -> tuple[list[McqItem], list[FreeItem]]:
    """The built-in sample written for this project: ``mcq.csv`` and ``free.csv``."""
    mcq = load_mcq_csv(BUILTIN_DIR / "mcq.csv", seed, "pushback-builtin")
    free = load_free_csv(BUILTIN_DIR / "free.csv", seed, "pushback-builtin-free")
    return mcq, free


# ---------------------------------------------------------------------------------- the table


def item_record(it: McqItem | FreeItem) -> dict[str, Any]:
    """An item as the JSON ``item`` column holds it."""
    if isinstance(it, McqItem):
        return {
            "kind": "mcq",
            "question": it.question,
            "options": list(it.options),
            "correct": it.correct,
            "target": it.target,
            "texts": dict(it.texts),
        }
    return {
        "kind": "free",
        "question": it.question,
        "ground_truth": it.ground_truth,
        "target": it.target,
        "texts": dict(it.texts),
    }


def item_from_row(dataset: str, item_id: str, record: str) -> McqItem | FreeItem:
    r = json.loads(record)
    if r["kind"] == "mcq":
        return McqItem(
            dataset, item_id, r["question"], tuple(r["options"]), r["correct"], r["target"],
            r["texts"],
        )  # fmt: skip
    return FreeItem(dataset, item_id, r["question"], r["ground_truth"], r["target"], r["texts"])


def items_table(items: Iterable[McqItem | FreeItem]) -> pd.DataFrame:
    """The items table: one row per item, its record as canonical JSON in ``item``."""
    rows = [
        {"dataset": it.dataset, "item_id": it.item_id, "item": canonical_json(item_record(it))}
        for it in items
    ]
    return pd.DataFrame(rows, columns=["dataset", "item_id", "item"])


# The protocol's items as its slots are handed them: each record by (dataset, item_id).
Items = dict[tuple[str, str], McqItem | FreeItem]


def items_of(items: pd.DataFrame) -> Items:
    """The items table as records, keyed (dataset, item_id)."""
    return {
        (str(r.dataset), str(r.item_id)): item_from_row(str(r.dataset), str(r.item_id), str(r.item))
        for r in items.itertuples(index=False)
    }
