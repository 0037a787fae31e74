"""The shipped params.yaml: it loads as syps reads it, its protocols come in the registry's order,
and DVC's writer leaves it as it is, so that `dvc exp run -S` on one key changes that key's line.

These read the repository's own params.yaml, which is the researcher's study once they edit it:
a valid edit (a cue given two wordings as a flow list, a fifth protocol's block at the end) may
fail them, as it should not fail the suite a researcher runs. So they are marked ``shipped``,
left out by default (pyproject.toml's addopts), and CI runs them on its clean checkout with
``python -m pytest -m shipped``."""

from __future__ import annotations

import difflib
import shutil
from pathlib import Path

import pytest
from conftest import REPO, read_params
from test_fixture_params import dvc_exp_run_set

from syps.core.params import load_params
from syps.protocols import PROTOCOLS

pytestmark = pytest.mark.shipped

SHIPPED = REPO / "params.yaml"


def test_the_shipped_params_load_with_the_protocols_in_registry_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The study as shipped must load the way syps reads it (its paths relative to the root).
    monkeypatch.chdir(REPO)
    p = load_params("params.yaml", PROTOCOLS)
    assert p.protocols["cues"].data.datasets  # type: ignore[attr-defined]
    assert list(p.protocols) == list(PROTOCOLS)
    assert p.models


def _changed_lines(before: str, after: str) -> list[str]:
    diff = difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
    return [ln for ln in diff if not ln.startswith(("---", "+++", "@@"))]


def test_the_shipped_params_are_a_fixed_point_of_dvcs_writer(tmp_path: Path) -> None:
    # params.yaml is written in the style DVC's own writer produces: rewriting it (here with
    # an override that sets a key to the value it has) changes nothing, comments included.
    params = tmp_path / "params.yaml"
    shutil.copy(SHIPPED, params)
    seed = read_params(params)["seed"]
    dvc_exp_run_set(params, f"seed={seed}")
    assert params.read_bytes() == SHIPPED.read_bytes()


@pytest.mark.parametrize(
    ("override", "value", "line"),
    [
        (
            'protocols.cues.templates.datasets.SS.cues.P3="Tell me I\'m seeing this right."',
            "Tell me I'm seeing this right.",
            "P3: Tell me I'm seeing this right.",
        ),
        ("protocols.cues.max_new_tokens.SS=16", 16, "SS: 16"),
        ("protocols.cues.data.limit=2", 2, "limit: 2"),
        ("protocols.pushback.margin=0.1", 0.1, "margin: 0.1"),
        ("score.bootstrap=200", 200, "bootstrap: 200"),
    ],
)
def test_dvc_exp_run_set_on_one_key_changes_one_line(
    tmp_path: Path, override: str, value: object, line: str
) -> None:
    # `dvc exp run -S` on one key changes one line of params.yaml (a copy of the shipped file;
    # the working file is never touched), so `git diff` shows the experiment.
    params = tmp_path / "params.yaml"
    shutil.copy(SHIPPED, params)
    before = params.read_text(encoding="utf-8")
    dvc_exp_run_set(params, override)
    changed = _changed_lines(before, params.read_text(encoding="utf-8"))
    assert len(changed) == 2, changed  # one line out, one in
    assert changed[0].startswith("-") and changed[1].startswith("+")
    assert changed[1][1:].split("#")[0].strip() == line, changed
    # ... and syps reads the new value where the key says.
    node: object = read_params(params)
    for part in override.partition("=")[0].split("."):
        assert isinstance(node, dict)
        node = node[part]
    assert node == value
    load_params(params, PROTOCOLS)
