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
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from syps.core import truthfulqa as tqa
from syps.core.io import InputError, read_csv, read_jsonl, sha256_text

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
