"""The pressure controller, turn by turn, on hand-written stance sequences."""

from __future__ import annotations

import pytest

from syps.protocols.adaptive.controller import LADDER, RECOVERY, Step, next_step


def _run(answers: list[str], max_turns: int = 8, ladder: tuple[str, ...] = LADDER) -> list[Step]:
    """The steps the controller takes when the target answers ``answers`` (the first answer,
    then one per user turn), until it stops."""
    stances, levels, steps = [answers[0]], [], []
    for answer in answers[1:] + ["unused"]:
        step = next_step(stances, levels, max_turns=max_turns, ladder=ladder)
        steps.append(step)
        if step.stop:
            return steps
        levels.append(step.level)
        stances.append(answer)
    raise AssertionError("the controller did not stop")


def test_holding_climbs_the_ladder_hedging_presses_again() -> None:
    # First answer held; re-ask (0) -> maintain -> are_you_sure (1) -> hedge -> are_you_sure
    # again (1) -> maintain -> counter_assertion (2) -> capitulate -> recovery -> stop.
    steps = _run(["maintain", "maintain", "hedge", "maintain", "capitulate", "maintain"])
    assert [(s.tactic, s.level) for s in steps[:-1]] == [
        ("re_ask", 0),
        ("are_you_sure", 1),
        ("are_you_sure", 1),
        ("counter_assertion", 2),
        (RECOVERY, -1),
    ]
    assert steps[-1].stop == "capitulated"


def test_unclear_is_asked_again_and_the_top_rung_ends_it() -> None:
    ladder = ("re_ask", "authority")
    # re_ask -> unclear -> re_ask again -> maintain -> authority -> maintain -> past the top.
    steps = _run(["maintain", "unclear", "maintain", "maintain"], ladder=ladder)
    assert [s.tactic for s in steps[:-1]] == ["re_ask", "re_ask", "authority"]
    assert steps[-1] == Step("", -1, "ladder")


def test_max_turns_stops_a_conversation_that_holds() -> None:
    steps = _run(["maintain", "hedge", "hedge", "hedge"], max_turns=3)
    assert [s.tactic for s in steps] == ["re_ask", "re_ask", "re_ask", ""]
    assert steps[-1].stop == "max_turns"


def test_stances_and_turns_must_line_up() -> None:
    with pytest.raises(ValueError, match="need one more"):
        next_step(["maintain"], [0], max_turns=5)


def test_the_neutral_arm_re_asks_and_the_frozen_script_climbs_whatever_the_answer() -> None:
    def steps(answers: list[str], mode: str) -> list[tuple[str, int, str]]:
        stances, levels, out = [answers[0]], [], []
        for answer in answers[1:] + ["unused"]:
            s = next_step(stances, levels, max_turns=4, mode=mode)  # type: ignore[arg-type]
            out.append((s.tactic, s.level, s.stop))
            if s.stop:
                return out
            levels.append(s.level)
            stances.append(answer)
        raise AssertionError("the controller did not stop")

    # Flat: re_ask (0) each turn, hedged or held, to max_turns = 4.
    assert steps(["maintain", "hedge", "maintain", "unclear", "maintain"], "flat") == [
        ("re_ask", 0, ""),
        ("re_ask", 0, ""),
        ("re_ask", 0, ""),
        ("re_ask", 0, ""),
        ("", -1, "max_turns"),
    ]
    # Fixed: rungs 0, 1, 2 although the second answer hedged (adaptive would stay at 1);
    # a capitulation still gets its recovery turn, then stops.
    assert steps(["maintain", "maintain", "hedge", "capitulate", "maintain"], "fixed") == [
        ("re_ask", 0, ""),
        ("are_you_sure", 1, ""),
        ("counter_assertion", 2, ""),
        (RECOVERY, -1, ""),
        ("", -1, "capitulated"),
    ]


def test_sustained_pressure_repeats_the_first_tactic_through_a_capitulation() -> None:
    # SYCON-Bench: the counter-assertion five times whatever the answer; the capitulation at
    # turn 2 gets no recovery turn and does not stop the conversation. The neutral arm (flat)
    # re-asks whatever the ladder's first tactic is.
    ladder = ("counter_assertion",)
    stances, levels, out = ["maintain"], [], []
    for answer in ["maintain", "capitulate", "maintain", "capitulate", "hedge", "unused"]:
        s = next_step(stances, levels, max_turns=5, ladder=ladder, mode="sustained")
        out.append((s.tactic, s.stop))
        if s.stop:
            break
        levels.append(s.level)
        stances.append(answer)
    assert out == [("counter_assertion", "")] * 5 + [("", "max_turns")]
    assert next_step(["maintain"], [], max_turns=5, ladder=ladder, mode="flat") == Step("re_ask", 0)
