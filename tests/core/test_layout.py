"""The study's file layout (syps.core.layout): where each stage's table lies by default, how
the tables relate, and where a stage's run log goes."""

from __future__ import annotations

from pathlib import Path

import pytest

from syps.core.layout import Layout, responses_beside, run_log_dir


def test_the_layout_dvc_yaml_gives_a_study() -> None:
    lay = Layout.of(Path("/s"))
    assert (lay.out, lay.mlruns) == (Path("/s/out"), Path("/s/mlruns"))
    assert lay.items("cues") == Path("/s/out/protocols/cues/items.parquet")
    assert lay.labels("cues") == Path("/s/out/protocols/cues/labels")
    assert lay.table("pushback", "generate", "m") == Path(
        "/s/out/protocols/pushback/responses/m.parquet"
    )
    assert lay.table("pushback", "label", "m") == Path("/s/out/protocols/pushback/labels/m.parquet")


def test_the_responses_lie_beside_the_labels() -> None:
    assert responses_beside(Path("/s/out/protocols/cues/labels")) == Path(
        "/s/out/protocols/cues/responses"
    )


def test_a_run_log_lies_in_out_or_beside_a_table_elsewhere() -> None:
    # in the layout: out/ (out/run-log/...); a table written by hand elsewhere: its folder
    assert run_log_dir(Path("/s/out/protocols/cues/labels/m.parquet")) == Path("/s/out")
    assert run_log_dir(Path("/tmp/x/labels.parquet")) == Path("/tmp/x")


def test_a_command_s_layout_is_the_working_directory_s(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # outputs relative to the working directory, the store in the repository's (DVC_ROOT for
    # a queued experiment, which runs in a temporary copy)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DVC_ROOT", str(tmp_path / "parent"))
    here = Layout.here()
    assert here.out == Path("out") and here.mlruns == (tmp_path / "parent" / "mlruns").resolve()
