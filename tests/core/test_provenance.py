"""Provenance: the git commit and dirty flag of the code that ran."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from syps.core.provenance import git_info

# --- git_info -------------------------------------------------------------------------------


def _git(cwd: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    return subprocess.run(
        ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True
    ).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for var in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"):
        monkeypatch.delenv(var, raising=False)
    root = tmp_path / "repo"
    root.mkdir()
    _git(root, "init", "-q")
    (root / "code.py").write_text("x = 1\n", encoding="utf-8")
    (root / "dvc.lock").write_text("schema: '2.0'\n", encoding="utf-8")
    _git(root, "add", "code.py", "dvc.lock")
    _git(root, "commit", "-q", "-m", "first")
    return root


def test_git_info_outside_a_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GIT_DIR", raising=False)
    # Stop git from finding a repository above the temporary directory.
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    plain = tmp_path / "plain"
    plain.mkdir()
    assert git_info(plain) == {"git_commit": "unknown", "git_dirty": "unknown"}


def test_git_info_repo_without_commits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GIT_DIR", raising=False)
    _git(tmp_path, "init", "-q")
    assert git_info(tmp_path) == {"git_commit": "unknown", "git_dirty": "unknown"}


def test_git_info_clean_checkout(repo: Path) -> None:
    head = _git(repo, "rev-parse", "HEAD")
    assert len(head) == 40
    assert git_info(repo) == {"git_commit": head, "git_dirty": "false"}


def test_git_info_modified_tracked_file_is_dirty(repo: Path) -> None:
    (repo / "code.py").write_text("x = 2\n", encoding="utf-8")
    assert git_info(repo)["git_dirty"] == "true"


def test_git_info_staged_change_is_dirty(repo: Path) -> None:
    (repo / "code.py").write_text("x = 2\n", encoding="utf-8")
    _git(repo, "add", "code.py")
    assert git_info(repo)["git_dirty"] == "true"


def test_git_info_only_dvc_lock_modified_is_clean(repo: Path) -> None:
    (repo / "dvc.lock").write_text("schema: '2.0'\nstages: {}\n", encoding="utf-8")
    info = git_info(repo)
    assert info == {"git_commit": _git(repo, "rev-parse", "HEAD"), "git_dirty": "false"}


def test_git_info_dvc_lock_and_code_modified_is_dirty(repo: Path) -> None:
    (repo / "dvc.lock").write_text("changed\n", encoding="utf-8")
    (repo / "code.py").write_text("x = 3\n", encoding="utf-8")
    assert git_info(repo)["git_dirty"] == "true"


def test_git_info_untracked_file_is_clean(repo: Path) -> None:
    (repo / "new.txt").write_text("scratch\n", encoding="utf-8")
    assert git_info(repo)["git_dirty"] == "false"


def test_git_info_new_commit_changes_sha(repo: Path) -> None:
    first = git_info(repo)["git_commit"]
    (repo / "code.py").write_text("x = 4\n", encoding="utf-8")
    _git(repo, "commit", "-q", "-am", "second")
    info = git_info(repo)
    assert info["git_commit"] != first
    assert info == {"git_commit": _git(repo, "rev-parse", "HEAD"), "git_dirty": "false"}


def test_git_info_exclude_ignores_listed_files(repo: Path) -> None:
    (repo / "metrics.json").write_text("{}\n", encoding="utf-8")
    _git(repo, "add", "metrics.json")
    _git(repo, "commit", "-q", "-m", "metrics")
    (repo / "metrics.json").write_text('{"m": 1}\n', encoding="utf-8")
    (repo / "dvc.lock").write_text("changed\n", encoding="utf-8")
    # The default excludes only dvc.lock: the metrics change is dirty.
    assert git_info(repo)["git_dirty"] == "true"
    # Relative or absolute (inside the checkout), both excluded files are ignored.
    assert git_info(repo, exclude=("dvc.lock", "metrics.json"))["git_dirty"] == "false"
    assert git_info(repo, exclude=("dvc.lock", str(repo / "metrics.json")))["git_dirty"] == "false"
    # Excluding metrics.json alone leaves the dvc.lock change visible.
    assert git_info(repo, exclude=("metrics.json",))["git_dirty"] == "true"


def test_git_info_exclude_outside_checkout_keeps_commit(repo: Path, tmp_path: Path) -> None:
    info = git_info(repo, exclude=("dvc.lock", str(tmp_path / "metrics.json")))
    assert info == {"git_commit": _git(repo, "rev-parse", "HEAD"), "git_dirty": "false"}


# --- params_changes: what a run's parent says it tried ----------------------------------------


PARAMS_V1 = """seed: 1
protocols:
  cues:
    templates:
      SS: {P3: I am right., P4: Agree.}
    max_new_tokens: [6, 8]
score: {bootstrap: 200}
"""


def test_params_changes_names_each_changed_added_and_removed_key(repo: Path) -> None:
    from syps.core.provenance import params_changes, params_note

    params = repo / "params.yaml"
    params.write_text(PARAMS_V1, encoding="utf-8")
    _git(repo, "add", "params.yaml")
    _git(repo, "commit", "-q", "-m", "params")
    assert params_changes(params, repo) == []
    assert params_note([]) == "params.yaml as committed."
    # One cue reworded, a list changed as a whole, score.bootstrap removed, score.alpha added.
    edited = (
        PARAMS_V1.replace("P3: I am right.", "P3: Tell me I am right.")
        .replace("[6, 8]", "[6, 9]")
        .replace("{bootstrap: 200}", "{alpha: 0.05}")
    )
    params.write_text(edited, encoding="utf-8")
    changes = params_changes(params, repo)
    assert changes == [
        "protocols.cues.max_new_tokens",
        "protocols.cues.templates.SS.P3",
        "score.alpha",
        "score.bootstrap",
    ]
    assert params_note(changes, shown=2) == (
        "params.yaml differs from the committed file in 4 key(s): "
        "`protocols.cues.max_new_tokens`, `protocols.cues.templates.SS.P3` and 2 more."
    )


def test_params_changes_without_a_committed_file(repo: Path, tmp_path: Path) -> None:
    from syps.core.provenance import params_changes, params_note

    (repo / "params.yaml").write_text(PARAMS_V1, encoding="utf-8")  # never committed
    assert params_changes(repo / "params.yaml", repo) is None
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "params.yaml").write_text(PARAMS_V1, encoding="utf-8")
    assert params_changes(outside / "params.yaml", outside) is None
    assert params_note(None) == "params.yaml: no committed version to compare with."
