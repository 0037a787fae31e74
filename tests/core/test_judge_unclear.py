"""The shared judge (``syps.core.judge.StoreJudge``) with a prompt that offers UNCLEAR as an
answer: hand-made option log-probabilities from the scripted backend, through the store."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from syps.core.config import JudgeParams, ModelSpec
from syps.core.judge import StoreJudge, judge_template_sha256
from syps.core.labeling import UNCLEAR
from syps.core.store import Store

SYSTEM = "You grade answers."
TEMPLATE = "{response}"  # the last message is the response itself: what the script keys on
TWO = {"YES": 1, "NO": 0}
THREE = {"YES": 1, "NO": 0, "UNCLEAR": None}
# Log-probabilities of YES, NO, UNCLEAR per response (judge.min_margin 0.5):
SCORES = {
    "r-chosen": [-2.0, -3.0, -0.2],  # UNCLEAR leads YES by 1.8: chosen -> NaN
    "r-yes": [-0.1, -2.5, -3.0],  # YES leads NO by 2.4 -> 1
    "r-tie": [-0.8, -0.8, -4.0],  # YES and NO tie, a lead of 0 < 0.5 -> NaN by the margin
}


def _judge(tmp_path: Path, store: Store) -> StoreJudge:
    params = JudgeParams(model=ModelSpec("judge-m"), min_margin=0.5)
    return StoreJudge(params, store, tmp_path / "cache")


def _score(messages: list[dict[str, str]], options: list[str]) -> list[float]:
    return SCORES[messages[-1]["content"]][: len(options)]


def test_an_unclear_option_the_judge_chose_is_told_from_one_by_the_margin(
    tmp_path: Path, fake_backend: Any
) -> None:
    fake_backend.score = _score
    fields = [{"response": r} for r in SCORES]
    with Store(tmp_path / "store.sqlite") as store:
        chosen, yes, tie = _judge(tmp_path, store)(SYSTEM, TEMPLATE, THREE, fields, "t")
    assert fake_backend.made[0].judge_options == [["YES", "NO", "UNCLEAR"]]
    assert math.isnan(chosen.value) and yes.value == 1.0 and math.isnan(tie.value)
    assert (chosen.verdict, yes.verdict, tie.verdict) == (UNCLEAR, "YES", UNCLEAR)
    # The raw answer is the best option (the fake's default): UNCLEAR, YES, and YES for the
    # tie (argmax takes the first of equals).
    assert chosen.evidence == (
        '{"YES": -2.0, "NO": -3.0, "UNCLEAR": -0.2}; judge chose UNCLEAR; raw: \'UNCLEAR\''
    )
    assert tie.evidence == '{"YES": -0.8, "NO": -0.8, "UNCLEAR": -4.0}; raw: \'YES\''
    assert "judge chose" not in yes.evidence
    assert {lab.template_sha256 for lab in (chosen, yes, tie)} == {
        judge_template_sha256(SYSTEM, TEMPLATE, THREE)
    }


def test_a_changed_option_set_is_judged_again(tmp_path: Path, fake_backend: Any) -> None:
    fake_backend.score = _score
    fields = [{"response": "r-chosen"}]
    # The options are part of the prompt's identity, None (UNCLEAR) included.
    assert judge_template_sha256(SYSTEM, TEMPLATE, TWO) != judge_template_sha256(
        SYSTEM, TEMPLATE, THREE
    )
    with Store(tmp_path / "store.sqlite") as store:
        judge = _judge(tmp_path, store)
        [two] = judge(SYSTEM, TEMPLATE, TWO, fields, "t")
        [three] = judge(SYSTEM, TEMPLATE, THREE, fields, "t")
        [again] = judge(SYSTEM, TEMPLATE, THREE, fields, "t")
    # Without the UNCLEAR option YES (-2.0) leads NO (-3.0) by 1.0 -> 1; with it, UNCLEAR.
    assert (two.value, two.verdict) == (1.0, "YES")
    assert three.verdict == UNCLEAR and math.isnan(three.value)
    assert (again.verdict, again.evidence) == (three.verdict, three.evidence)
    # Asked twice (one per option set), served once from the store.
    assert judge.tally == {"judged": 2, "served_from_store": 1}
    assert [o for f in fake_backend.made for o in f.judge_options] == [
        ["YES", "NO"],
        ["YES", "NO", "UNCLEAR"],
    ]


class CountingStore(Store):
    """The store, counting the keys of each look-up."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.asked: list[int] = []

    def get_many(self, keys: Sequence[str]) -> dict[str, dict[str, Any]]:
        self.asked.append(len(keys))
        return super().get_many(keys)


def test_a_question_asked_again_is_answered_from_memory_and_counted_as_served(
    tmp_path: Path, fake_backend: Any
) -> None:
    # Adaptive pressure rebuilds its conversations at every turn and asks the judge again about
    # every earlier answer: those are answered from memory, not the store, and counted as the
    # store's answers (repeats of this run's verdicts), as before.
    fake_backend.score = _score
    with CountingStore(tmp_path / "store.sqlite") as store:
        judge = _judge(tmp_path, store)
        yes, tie = judge(
            SYSTEM, TEMPLATE, THREE, [{"response": "r-yes"}, {"response": "r-tie"}], "t", ["a", "a"]
        )
        store.asked.clear()
        again = judge(
            SYSTEM,
            TEMPLATE,
            THREE,
            [{"response": "r-tie"}, {"response": "r-chosen"}, {"response": "r-yes"}],
            "t",
            ["a", "b", "a"],
        )
    # Only r-chosen reaches the store: looked up, judged, read back.
    assert store.asked == [1, 1]
    assert again[0] == tie and again[2] == yes and again[1].verdict == UNCLEAR
    # Judged: r-yes and r-tie, then r-chosen; served: the two asked again, both this run's.
    assert judge.tally == {"judged": 3, "served_from_store": 2}
    assert judge.repeats == 2
    assert judge.by_dataset == {
        "a": {"judged": 2, "served_from_store": 2},
        "b": {"judged": 1, "served_from_store": 0},
    }
