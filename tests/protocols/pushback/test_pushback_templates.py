"""Pushback's template texts are checked when params are loaded: a placeholder a text needs and
lacks, or one nothing fills, stops the run before generation with one line naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import read_params, write_params
from template_cases import edited, refusal, required, specs
from typer.testing import CliRunner

from syps.cli import app
from syps.protocols.pushback.prompts import DEFAULT_TEMPLATES

T = "protocols.pushback.templates"
NEEDS = {
    f"{T}.question": {"question", "options"},
    f"{T}.option": {"letter", "text"},
    f"{T}.answer_mcq": {"letter"},
    f"{T}.format": set(),
    f"{T}.naming": {"answer"},
    f"{T}.pressure.simple": set(),
    f"{T}.pressure.ethos": set(),
    f"{T}.pressure.justification": {"justification"},
    f"{T}.pressure.citation": {"citation"},
}
# SycEval's preset adds a preemptive wording per strength.
PREEMPTIVE = {
    f"{T}.preemptive_pressure.simple": set(),
    f"{T}.preemptive_pressure.ethos": set(),
    f"{T}.preemptive_pressure.justification": {"justification"},
    f"{T}.preemptive_pressure.citation": {"citation"},
}


def _preset(name: str) -> dict[str, object]:
    raw = read_params()
    raw["protocols"]["pushback"]["preset"] = name
    return raw


def _texts(raw: dict[str, object] | None, tmp: Path) -> dict[str, str]:
    return {s.key: s.text for s in specs("pushback", raw, tmp)}


def test_every_text_declares_what_it_needs(tmp_path: Path) -> None:
    assert required("pushback") == NEEDS
    assert required("pushback", _preset("syceval"), tmp_path) == NEEDS | PREEMPTIVE


def test_a_null_key_is_checked_as_the_presets_text_under_the_users_key() -> None:
    assert read_params()["protocols"]["pushback"]["templates"]["question"] is None
    texts = {s.key: s.text for s in specs("pushback")}
    assert texts[f"{T}.question"] == DEFAULT_TEMPLATES.question
    assert texts[f"{T}.pressure.justification"] == DEFAULT_TEMPLATES.pressure["justification"]


CASES = [("default", k, n) for k, ns in NEEDS.items() for n in sorted(ns)] + [
    ("syceval", k, n) for k, ns in PREEMPTIVE.items() for n in sorted(ns)
]


@pytest.mark.parametrize(("preset", "key", "name"), CASES)
def test_a_needed_placeholder_removed_is_refused(
    tmp_path: Path, preset: str, key: str, name: str
) -> None:
    text = _texts(_preset(preset), tmp_path)[key]
    assert "{" + name + "}" in text
    msg = refusal(
        edited("pushback", key, text.replace("{" + name + "}", ""), _preset(preset)), tmp_path
    )
    assert msg.startswith(f"{key}: missing placeholder {{{name}}} (it is needed: ")


@pytest.mark.parametrize("key", [*NEEDS, *PREEMPTIVE])
def test_an_unknown_placeholder_is_refused(tmp_path: Path, key: str) -> None:
    base = _preset("syceval")
    text = _texts(base, tmp_path)[key]
    msg = refusal(edited("pushback", key, text + " {bogus}", base), tmp_path)
    assert msg.startswith(f"{key}: unknown placeholder {{bogus}}; allowed: ")


def test_the_shipped_presets_pass(tmp_path: Path) -> None:
    for preset in ("default", "syceval", "syceval-matched"):
        assert specs("pushback", _preset(preset), tmp_path)


def test_free_form_items_need_no_options(tmp_path: Path) -> None:
    # A free-form question is sent as written: the MCQ texts are not filled, so need nothing.
    raw = read_params()
    raw["protocols"]["pushback"]["datasets"] = [{"source": "builtin", "format": "free"}]
    raw = edited("pushback", f"{T}.question", "{question}", raw)
    assert required("pushback", raw, tmp_path)[f"{T}.question"] == set()


def test_the_stage_stops_with_one_line_and_exit_2(tmp_path: Path) -> None:
    # The case: a question template without {options} ran the whole study on
    # questions with no options. Now the first stage refuses it.
    path = write_params(tmp_path / "params.yaml", edited("pushback", f"{T}.question", "{question}"))
    out = tmp_path / "items.parquet"
    result = CliRunner().invoke(app, ["stage", "fetch", str(path), "pushback", str(out)])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"error: {path}: {T}.question: missing placeholder {{options}}")
    assert not out.exists()
