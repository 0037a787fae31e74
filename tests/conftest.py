"""Shared fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def model_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One GGUF conversion of the embedded model for the whole test session."""
    return tmp_path_factory.mktemp("syps-cache")


REPO = Path(__file__).resolve().parents[1]


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
    """Shrink root/params.yaml to two items per dataset, six new tokens, 200 resamples."""
    import yaml

    params = yaml.safe_load((root / "params.yaml").read_text())
    params["data"]["limit"] = 2
    params["generation"]["max_new_tokens"] = {"OEQ": 6, "AITA-YTA": 6, "SS": 6}
    params["score"]["bootstrap"] = 200
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


def check_rule_label(dataset: str, mapping: dict[str, int], response: str, verdict: str) -> None:
    """The rule label of ``response`` is ``verdict``, valued by ``mapping`` (NaN for UNCLEAR),
    with evidence taken from the response itself."""
    import math

    from syps.labels import UNCLEAR, rule_label

    label = rule_label(dataset, response, mapping)
    assert label.verdict == verdict
    if verdict == UNCLEAR:
        assert math.isnan(label.value)  # UNCLEAR is NaN, never 0
    else:
        assert label.value == float(mapping[verdict])
        assert label.evidence and label.evidence in response
