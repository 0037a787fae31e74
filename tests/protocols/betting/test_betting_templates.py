"""Betting's template texts are checked when params are loaded: a body lacking a field, or any
text holding a placeholder nothing fills, stops the run before generation with one line naming
the key (a body without {claim_last} used to fail in the lint with 289 lines that never named it).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from template_cases import edited, refusal, required, specs

from syps.protocols.betting.prompts import DEFAULT_TEMPLATES, FIELDS

T = "protocols.betting.templates"
BODY_TEXT = DEFAULT_TEMPLATES.F.body  # the folder's params.yaml: every premise's body
# What the renderer fills (prompts.FIELDS), every one of them needed.
BODY = {
    "premise", "question", "name_first", "claim_first", "name_last", "claim_last", "choice_1",
    "choice_2",
}  # fmt: skip
NEEDS: dict[str, set[str]] = {f"{T}.system": set()}
for _p in ("F", "Z", "N"):
    NEEDS |= {f"{T}.{_p}.{k}": set() for k in ("premise", "names[0]", "names[1]")}
    NEEDS |= {f"{T}.{_p}.{k}": set() for k in ("choices[0]", "choices[1]")}
    NEEDS[f"{T}.{_p}.body"] = BODY


def test_every_text_declares_what_it_needs() -> None:
    assert set(FIELDS) == BODY
    assert required("betting") == NEEDS
    texts = {s.key: s.text for s in specs("betting")}
    assert texts[f"{T}.Z.body"] == BODY_TEXT == DEFAULT_TEMPLATES.Z.body == DEFAULT_TEMPLATES.N.body


@pytest.mark.parametrize(("key", "name"), [(k, n) for k, ns in NEEDS.items() for n in sorted(ns)])
def test_a_needed_field_removed_is_refused(tmp_path: Path, key: str, name: str) -> None:
    msg = refusal(edited("betting", key, BODY_TEXT.replace("{" + name + "}", "")), tmp_path)
    assert msg.startswith(f"{key}: missing placeholder {{{name}}} (it is needed: ")


@pytest.mark.parametrize("key", list(NEEDS))
def test_an_unknown_placeholder_is_refused(tmp_path: Path, key: str) -> None:
    text = {s.key: s.text for s in specs("betting")}[key]
    msg = refusal(edited("betting", key, text + " {bogus}"), tmp_path)
    assert msg.startswith(f"{key}: unknown placeholder {{bogus}}; allowed: ")


def test_other_braces_are_plain_text(tmp_path: Path) -> None:
    body = BODY_TEXT + ' Reply as JSON: {"side": 1}.'
    raw = edited("betting", f"{T}.F.body", body)
    assert {s.key: s.text for s in specs("betting", raw, tmp_path)}[f"{T}.F.body"] == body
