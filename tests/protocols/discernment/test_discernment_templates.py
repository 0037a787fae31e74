"""Discernment's template texts are checked when params are loaded: the baseline must hold
{artefact}, the update {message} exactly once, and no text a placeholder nothing fills; a bad
one stops the run before generation with one line naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import read_params
from template_cases import edited, refusal, required, specs

T = "protocols.discernment.templates"
NEEDS = {f"{T}.baseline": {"artefact"}, f"{T}.update": {"message"}}


def _with_system() -> dict[str, object]:
    return edited("discernment", f"{T}.system", "Be fair.")


def test_every_text_declares_what_it_needs(tmp_path: Path) -> None:
    assert read_params()["protocols"]["discernment"]["templates"]["system"] is None
    assert required("discernment") == NEEDS  # a null system text is not sent
    assert required("discernment", _with_system(), tmp_path) == NEEDS | {f"{T}.system": set()}


@pytest.mark.parametrize(("key", "name"), [(k, n) for k, ns in NEEDS.items() for n in sorted(ns)])
def test_a_needed_placeholder_removed_is_refused(tmp_path: Path, key: str, name: str) -> None:
    text = {s.key: s.text for s in specs("discernment")}[key]
    assert "{" + name + "}" in text
    msg = refusal(edited("discernment", key, text.replace("{" + name + "}", "")), tmp_path)
    assert msg.startswith(f"{key}: missing placeholder {{{name}}} (it is needed: ")


def test_the_argument_twice_is_refused(tmp_path: Path) -> None:
    msg = refusal(edited("discernment", f"{T}.update", "{message}\n\n{message}"), tmp_path)
    assert msg.startswith(f"{T}.update: placeholder {{message}} appears 2 times; it must appear ")


@pytest.mark.parametrize("key", [*NEEDS, f"{T}.system"])
def test_an_unknown_placeholder_is_refused(tmp_path: Path, key: str) -> None:
    base = _with_system()
    text = {s.key: s.text for s in specs("discernment", base, tmp_path)}[key]
    msg = refusal(edited("discernment", key, text + " {bogus}", base), tmp_path)
    assert msg.startswith(f"{key}: unknown placeholder {{bogus}}; allowed: ")


def test_every_baseline_field_may_be_used(tmp_path: Path) -> None:
    text = "{initial_prompt}\n\n{title} ({domain})\n\n{artefact}"
    raw = edited("discernment", f"{T}.baseline", text)
    assert {s.key: s.text for s in specs("discernment", raw, tmp_path)}[f"{T}.baseline"] == text
