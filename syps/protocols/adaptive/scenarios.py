"""Adaptive pressure's scenario records (issue 47, in progress): what a simulated user argues
about, so that every model meets comparable pressure.

A scenario is a question with its ground truth, the false claim the user presses toward, the
persona the simulator plays and the facts it may cite (a simulator turn citing anything else is
flagged, never counted). A researcher brings them as a CSV or a JSON Lines file:

- ``question``, ``ground_truth``, ``wrong_claim``: required, non-empty;
- ``persona``: optional (empty: the simulator's instructions alone set the voice);
- ``facts``: optional; in a CSV one cell with the facts separated by ``"; "`` (TruthfulQA's
  separator), in JSON Lines a list of strings.

A scenario's id is a hash of its dataset and question, so it keeps its id across files and
reorderings; two scenarios with one question in one dataset are refused.

A multiple-choice scenario (``read_mcq``: the shipped ``data/builtin/pushback/mcq.csv`` or a CSV
in its layout, ``question, A, B, ..., correct``) shows its options under the question; its
ground truth is the correct option, its wrong claim one other option drawn per scenario by the
seed, and its answers are read by the core's letter rule (``syps.core.letters``), not the judge.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from syps.core import truthfulqa as tqa
from syps.core.io import InputError, read_csv, read_jsonl, sha256_text
from syps.core.letters import LETTERS

REQUIRED = ["question", "ground_truth", "wrong_claim"]
FACTS_SEP = ";"


@dataclass(frozen=True)
class Scenario:
    dataset: str
    scenario_id: str
    question: str
    ground_truth: str
    wrong_claim: str
    persona: str = ""
    facts: tuple[str, ...] = ()
    # A multiple-choice scenario's options (A first), its correct letter and the wrong claim's.
    options: tuple[str, ...] = ()
    correct: str = ""
    wrong: str = ""


def scenario_id(dataset: str, question: str) -> str:
    """A stable id from the content."""
    return sha256_text(f"adaptive\x1f{dataset}\x1f{question}")[:16]


def _facts(value: Any, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        return tuple(f.strip() for f in value.split(FACTS_SEP) if f.strip())
    if isinstance(value, list) and all(isinstance(f, str) for f in value):
        return tuple(f.strip() for f in value if f.strip())
    raise InputError(f"{where}: facts must be a list of strings (JSON Lines) or one text")


def _scenario(dataset: str, rec: dict[str, Any], where: str) -> Scenario:
    text = {}
    for key in [*REQUIRED, "persona"]:
        value = rec.get(key, "")
        if not isinstance(value, str):
            raise InputError(f"{where}: {key} must be a text, got {type(value).__name__}")
        text[key] = value.strip()
    empty = [k for k in REQUIRED if not text[k]]
    if empty:
        raise InputError(f"{where}: empty {', '.join(empty)}")
    if text["ground_truth"] == text["wrong_claim"]:
        raise InputError(f"{where}: wrong_claim is the ground truth")
    return Scenario(
        dataset,
        scenario_id(dataset, text["question"]),
        text["question"],
        text["ground_truth"],
        text["wrong_claim"],
        text["persona"],
        _facts(rec.get("facts", ""), where),
    )


def read_scenarios(path: str | Path, dataset: str) -> list[Scenario]:
    """The scenarios of a CSV or JSON Lines file (by its suffix: ``.csv``, ``.jsonl``)."""
    path = Path(path)
    if path.suffix == ".csv":
        table = read_csv(path, REQUIRED).to_dict("records")
        rows = [(f"{path}: row {i}", r) for i, r in enumerate(table, start=1)]
    elif path.suffix == ".jsonl":
        rows = [(f"{path}: line {n}", r) for n, r in read_jsonl(path, REQUIRED)]
    else:
        raise InputError(f"{path}: scenarios must be a .csv or a .jsonl file")
    where = [w for w, _ in rows]
    out = [_scenario(dataset, {str(k): v for k, v in r.items()}, w) for w, r in rows]
    return _unique(out, where, path)


def _unique(out: list[Scenario], where: list[str], path: Path | str) -> list[Scenario]:
    """``out``, refused when it is empty or two scenarios ask one question."""
    seen: dict[str, str] = {}
    for s, w in zip(out, where, strict=True):
        if s.scenario_id in seen:
            raise InputError(f"{w}: the same question as {seen[s.scenario_id]}")
        seen[s.scenario_id] = w
    if not out:
        raise InputError(f"{path}: no scenarios")
    return out


# The shipped TruthfulQA subset (24 rows, Apache-2.0: its NOTICE beside it), relative to the
# repository root.
BUILTIN = Path("data/builtin/betting/truthfulqa_subset.csv")


def read_truthfulqa(path: str | Path, dataset: str) -> list[Scenario]:
    """Scenarios from TruthfulQA's layout: the best answer is the ground truth, the first
    incorrect answer the wrong claim (the file lists the canonical misconception first); no
    persona and no citable facts (the fabricated-evidence rung then has none to cite, and a
    cited source is flagged)."""
    table = read_csv(path, [tqa.QUESTION, tqa.BEST, tqa.INCORRECT]).to_dict("records")
    out = []
    for i, r in enumerate(table, start=1):
        wrong = [a for a in tqa.answers(str(r[tqa.INCORRECT])) if a != str(r[tqa.BEST]).strip()]
        rec = {
            "question": r[tqa.QUESTION],
            "ground_truth": r[tqa.BEST],
            "wrong_claim": wrong[0] if wrong else "",
        }
        out.append(_scenario(dataset, rec, f"{path}: row {i}"))
    return _unique(out, [f"{path}: row {i}" for i in range(1, len(out) + 1)], path)


# The shipped multiple-choice items (pushback's built-in sample, written for this project).
BUILTIN_MCQ = Path("data/builtin/pushback/mcq.csv")


def wrong_letter(seed: int, sid: str, correct: str, n: int) -> str:
    """The option a multiple-choice scenario's wrong claim is: one of the ``n - 1`` others,
    drawn from the seed and the scenario's id (the same draw on every run and every model)."""
    k = int(sha256_text(f"adaptive-wrong\x1f{seed}\x1f{sid}")[:8], 16) % (n - 1)
    others = [c for c in LETTERS[:n] if c != correct]
    return others[k]


def read_mcq(path: str | Path, dataset: str, seed: int) -> list[Scenario]:
    """Multiple-choice scenarios from ``question, A, B, ..., correct`` (at least two options,
    no gap before the last); errors name the file and the 1-based row."""
    table = read_csv(path, ["question", "A", "B", "correct"])
    letters = [c for c in LETTERS if c in table.columns]
    out, where = [], []
    for i, r in enumerate(table.to_dict("records"), start=1):
        w = f"{path}: row {i}"
        opts = [str(r[c]).strip() for c in letters]
        while opts and not opts[-1]:
            opts.pop()
        if len(opts) < 2 or not all(opts) or len(set(opts)) != len(opts):
            raise InputError(f"{w}: the options need two or more distinct texts, no gap")
        correct = str(r["correct"]).strip().upper()
        if len(correct) != 1 or correct not in LETTERS[: len(opts)]:
            raise InputError(
                f"{w}: correct is {r['correct']!r}; expected one of {list(LETTERS[: len(opts)])}"
            )
        shown = [f"({c}) {o}" for c, o in zip(LETTERS, opts, strict=False)]
        question = "\n".join([str(r["question"]).strip(), *shown])
        sid = scenario_id(dataset, question)
        wrong = wrong_letter(seed, sid, correct, len(opts))
        rec = {
            "question": question,
            "ground_truth": shown[LETTERS.index(correct)],
            "wrong_claim": shown[LETTERS.index(wrong)],
        }
        s = _scenario(dataset, rec, w)
        out.append(replace(s, options=tuple(opts), correct=correct, wrong=wrong))
        where.append(w)
    return _unique(out, where, path)
