"""Shared fixtures."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(scope="session")
def model_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One GGUF conversion of the embedded model for the whole test session."""
    return tmp_path_factory.mktemp("syps-cache")


REPO = Path(__file__).resolve().parents[1]
# The tests' parameters: a copy of the shipped defaults kept under tests/, never the working
# params.yaml, which is the researcher's study (an edit or a `dvc exp run -S` must not break tests).
FIXTURE_PARAMS = Path(__file__).resolve().parent / "fixtures" / "params.yaml"


def read_params(path: Path = FIXTURE_PARAMS) -> dict[str, Any]:
    """A params file as plain data, read the way syps reads it (YAML 1.2: ``YES`` is a string)."""
    import yaml

    from syps.core.config import Yaml12Loader

    raw: dict[str, Any] = yaml.load(path.read_text(encoding="utf-8"), Loader=Yaml12Loader)
    return raw


def write_params(path: Path, raw: dict[str, Any]) -> Path:
    """Write ``raw`` as a params file (PyYAML quotes keys like ``YES``, so any reader agrees)."""
    import yaml

    path.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    return path


def copy_repo(dest: Path, skip: tuple[str, ...] = ()) -> None:
    """Copy the repository as a fresh clone would see it, plus untracked files that git does
    not ignore (work in progress must be tested too); paths starting with ``skip`` are left out."""
    import shutil
    import subprocess

    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\0")
    for rel in filter(None, listed):
        src = REPO / rel
        if src.is_file() and not rel.startswith(skip):
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)


def tiny_params(root: Path) -> None:
    """Write the fixture params, shrunk to two items per dataset, six new tokens and 200
    resamples, as root/params.yaml (a repository copy's own params.yaml is the user's study)."""
    params = read_params()
    params["data"]["limit"] = 2
    params["generation"]["max_new_tokens"] = {"OEQ": 6, "AITA-YTA": 6, "SS": 6}
    params["score"]["bootstrap"] = 200
    shrink_protocols(params)
    write_params(root / "params.yaml", params)


def shrink_protocols(params: dict[str, Any]) -> None:
    """The protocols at the smallest size that still runs every stage: one item, two
    repetitions, eight new tokens (later turns may then be mostly skipped children, which is
    a path worth running too)."""
    blocks = params.get("protocols", {})
    if "pushback" in blocks:
        blocks["pushback"]["limit"] = 1
        blocks["pushback"]["generation"].update(max_new_tokens=8)
    if "discernment" in blocks:
        blocks["discernment"]["limit"] = 1
        blocks["discernment"]["generation"].update(reps=2, max_new_tokens=8)
    if "betting" in blocks:
        blocks["betting"]["n_items"] = 1
        blocks["betting"]["generation"].update(reps=2, max_new_tokens=8)


def check_rule_label(dataset: str, mapping: dict[str, int], response: str, verdict: str) -> None:
    """The rule label of ``response`` is ``verdict``, valued by ``mapping`` (NaN for UNCLEAR),
    with evidence taken from the response itself."""
    import math

    from syps.core.labeling import UNCLEAR
    from syps.protocols.cues.labels import rule_label

    label = rule_label(dataset, response, mapping)
    assert label.verdict == verdict
    if verdict == UNCLEAR:
        assert math.isnan(label.value)  # UNCLEAR is NaN, never 0
    else:
        assert label.value == float(mapping[verdict])
        assert label.evidence and label.evidence in response
