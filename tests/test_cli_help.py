"""`syps --help` and each command's help say what to pass; `syps ui` finds the MLflow store from
anywhere inside the repository."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from syps.cli import app

runner = CliRunner()
# `syps stage <name>`: the stages of dvc.yaml, the same for every protocol.
STAGES = ["fetch", "variants", "generate", "label", "score", "mlflow"]


def _help(*args: str) -> str:
    result = runner.invoke(app, [*args, "--help"], terminal_width=100)
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("stage", STAGES)
def test_every_stage_argument_has_help(stage: str) -> None:
    group = typer.main.get_command(app).commands["stage"]  # type: ignore[attr-defined]
    command = group.commands[stage]
    arguments = [p for p in command.params if p.param_type_name == "argument"]
    assert arguments
    for argument in arguments:
        assert getattr(argument, "help", None), f"syps stage {stage}: {argument.name} has no help"
    if stage != "mlflow":  # every stage but the last runs for one protocol, its second argument
        assert [a.name for a in arguments[:2]] == ["params", "protocol"]


def test_score_help_says_what_each_of_its_eight_arguments_is() -> None:
    # What each path holds; where it lies is dvc.yaml's to say (the help names no layout).
    out = " ".join(_help("stage", "score").split())  # help wraps lines
    for text in [
        "parameters file",
        "the protocol's name under `protocols` in the parameters file",
        "the items table, written by fetch",
        "directory of the label tables, <model>.parquet",
        "metrics file to write",
        "directory for the plot data",
        "directory for the figures",
        "the bundle the mlflow stage logs",
        "the paths dvc.yaml passes",
    ]:
        assert text in out, text
    assert "out/protocols" not in out


def test_mlflow_help_says_what_each_path_is() -> None:
    out = " ".join(_help("stage", "mlflow").split())
    for text in [
        "parameters file",
        "directory of the score stages' bundles, <protocol>.json",
        "the data's .dvc file",
    ]:
        assert text in out, text


@pytest.mark.parametrize(
    ("command", "flags"),
    [
        ((), ["--help"]),
        (("compare",), ["--all", "--markdown"]),
        (("judge", "sample"), ["--force"]),
        (("judge", "validate"), ["--allow-missing"]),
        (("ui",), ["--dry-run"]),
        (("stage", "score"), ["--help"]),
    ],
)
def test_flags_show_as_flags_not_as_bool_values(command: tuple[str, ...], flags: list[str]) -> None:
    out = _help(*command)
    assert "<bool>" not in out
    for flag in flags:
        # The flag, then its help: no value placeholder between them.
        line = next(ln for ln in out.splitlines() if ln.strip().startswith(flag + " "))
        assert line.split()[1][0] not in "<{", line


# --- syps ui -------------------------------------------------------------------------------


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A repository with a store, entered two directories down."""
    root = tmp_path / "study"
    (root / "mlruns").mkdir(parents=True)
    (root / "mlruns" / "mlflow.db").write_bytes(b"")
    (root / "dvc.yaml").write_text("stages: {}\n", encoding="utf-8")
    (root / "out" / "figures").mkdir(parents=True)
    monkeypatch.chdir(root / "out" / "figures")
    monkeypatch.delenv("DVC_ROOT", raising=False)
    monkeypatch.delenv("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", raising=False)
    return root.resolve()


def _dry_run(*args: str) -> str:
    result = runner.invoke(app, ["ui", "--dry-run", *args])
    assert result.exit_code == 0, result.output
    return result.stdout.strip()


def test_ui_finds_the_store_from_a_subdirectory(repo: Path) -> None:
    assert _dry_run() == (
        "MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false "
        f"{sys.executable} -m mlflow ui --backend-store-uri sqlite:///{repo}/mlruns/mlflow.db "
        "--host 127.0.0.1 --port 5000 --workers 1"
    )


def test_ui_options(repo: Path) -> None:
    assert _dry_run("--port", "5055", "--workers", "2", "--host", "0.0.0.0").endswith(
        "--host 0.0.0.0 --port 5055 --workers 2"
    )


def test_ui_uses_dvc_root(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    other = tmp_path / "parent-repo"
    (other / "mlruns").mkdir(parents=True)
    (other / "mlruns" / "mlflow.db").write_bytes(b"")
    monkeypatch.setenv("DVC_ROOT", str(other))  # a queued `dvc exp` run's parent repository
    assert f"sqlite:///{other.resolve()}/mlruns/mlflow.db " in _dry_run()


def test_ui_explicit_store_relative_to_the_working_directory(repo: Path) -> None:
    assert f"sqlite:///{repo}/mlruns/mlflow.db " in _dry_run("--mlruns", "../../mlruns")


def test_ui_without_a_store_exits_2_and_creates_none(repo: Path) -> None:
    (repo / "mlruns" / "mlflow.db").unlink()
    result = runner.invoke(app, ["ui", "--dry-run"])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: {repo / 'mlruns'}: no MLflow store (mlflow.db)")
    assert "run dvc repro first" in result.stderr
    assert not (repo / "mlruns" / "mlflow.db").exists()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
def test_ui_serves_the_repository_store_from_a_subdirectory(repo: Path, tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient

    (repo / "mlruns" / "mlflow.db").unlink()
    MlflowClient(f"sqlite:///{repo}/mlruns/mlflow.db").create_experiment("first-hour")
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k != "DVC_ROOT"}
    log = (tmp_path / "ui.log").open("wb")
    server = subprocess.Popen(
        [sys.executable, "-m", "syps.cli", "ui", "--port", str(port)],
        cwd=repo / "out" / "figures",
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group: the server and any worker it forks
    )
    api = "api/2.0/mlflow/experiments/get-by-name?experiment_name=first-hour"
    url = f"http://127.0.0.1:{port}/{api}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert server.poll() is None, (tmp_path / "ui.log").read_text(errors="replace")
            try:
                with urllib.request.urlopen(url, timeout=5) as response:
                    body = json.load(response)
                break
            except OSError:
                assert time.monotonic() < deadline, (tmp_path / "ui.log").read_text()
                time.sleep(0.5)
        assert body["experiment"]["name"] == "first-hour"
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
        log.close()
