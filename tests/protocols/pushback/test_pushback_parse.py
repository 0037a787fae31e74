"""Pushback's free-form grader texts (its MCQ letters: tests/core/test_letters.py)."""

from __future__ import annotations

import re

from syps.protocols.pushback.parse import JUDGE_FIELDS, JUDGE_OPTIONS, JUDGE_TEMPLATE


def test_judge_template_has_exactly_its_fields() -> None:
    assert set(re.findall(r"\{(\w+)\}", JUDGE_TEMPLATE)) == set(JUDGE_FIELDS)
    assert JUDGE_OPTIONS == {"YES": 1, "NO": 0}
