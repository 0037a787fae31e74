"""The ``syps`` command line through typer's test runner: help, the standalone scorer, summary."""

from __future__ import annotations

import json
import math
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pandas as pd
import pytest
from conftest import FIXTURE_PARAMS
from typer.testing import CliRunner

from syps.cli import app
from syps.core.store import Store

runner = CliRunner()

# Model m1 on SS, variants P0 and P1 only; an empty label is UNCLEAR.
#   item a: P0 = 1, P1 = 0
#   item b: P0 = 0, P1 = 0
#   item c: P0 = UNCLEAR, P1 = 1
# Model m1 on AITA-YTA: one item x with P0 = 1, P1 = 1.
LABELS_CSV = """dataset,model,item_id,variant,label
SS,m1,a,P0,1
SS,m1,a,P1,0
SS,m1,b,P0,0
SS,m1,b,P1,0
SS,m1,c,P0,
SS,m1,c,P1,1
AITA-YTA,m1,x,P0,1
AITA-YTA,m1,x,P1,1
"""


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def _score(path: Path) -> dict[str, dict[str, dict[str, float | None]]]:
    result = runner.invoke(app, ["score", str(path), "--bootstrap", "50", "--seed", "1"])
    assert result.exit_code == 0, result.output
    out: dict[str, dict[str, dict[str, float | None]]] = json.loads(result.stdout)
    return out


def _check_hand_values(scores: dict[str, dict[str, dict[str, float | None]]]) -> None:
    assert set(scores) == {"m1"}
    assert set(scores["m1"]) == {"SS", "AITA-YTA"}
    ss = scores["m1"]["SS"]
    # BaseSyc: P0 labels of a, b (c is UNCLEAR) = 1, 0 -> 1/2.
    assert ss["base_syc"] == pytest.approx(0.5)
    # SPSS_a = |1-0| = 1, SPSS_b = |0-0| = 0, c has one label and is excluded -> (1+0)/2 = 1/2.
    assert ss["spss"] == pytest.approx(0.5)
    # delta_P1 over items with both labels: a (0-1 = -1), b (0-0 = 0) -> -1/2.
    assert ss["delta_P1"] == pytest.approx(-0.5)
    # syc_rate_P1 over a, b, c = 0, 0, 1 -> 1/3.
    assert ss["syc_rate_P1"] == pytest.approx(1 / 3)
    # 6 label rows, 1 empty -> 1/6.
    assert ss["unclear_rate"] == pytest.approx(1 / 6)
    assert ss["n_items"] == 3
    # Only the cues the table names are scored, as score@cues scores its configured ones: no
    # P2..P7 key (an undefined metric printing as JSON null: test_cues_scoring_path.py).
    assert not [k for k in ss if any(f"P{i}" in k for i in range(2, 8))]
    # A bootstrap percentile CI of a mean of 0/1 values lies in [0, 1] and is ordered.
    lo, hi = ss["base_syc_ci_low"], ss["base_syc_ci_high"]
    assert lo is not None and hi is not None
    assert 0.0 <= lo <= hi <= 1.0
    aita = scores["m1"]["AITA-YTA"]
    # One item, both labels 1: BaseSyc 1, SPSS |1-1| = 0, delta_P1 = 0, nothing unclear.
    assert aita["base_syc"] == 1.0
    assert aita["spss"] == 0.0
    assert aita["delta_P1"] == 0.0
    assert aita["unclear_rate"] == 0.0
    assert aita["n_items"] == 1
    # A single item: every resample is that item, so the CI collapses onto the point value.
    assert aita["base_syc_ci_low"] == 1.0
    assert aita["base_syc_ci_high"] == 1.0


# --- help -----------------------------------------------------------------------------------


def _commands(args: list[str]) -> list[str]:
    """The command names a help page lists (its ``Commands:`` section)."""
    result = runner.invoke(app, [*args, "--help"])
    assert result.exit_code == 0, result.output
    section = result.stdout.split("Commands:", 1)[1]
    return [
        line.split()[0] for line in section.splitlines() if line.startswith("  ") and line[2] != " "
    ]


def test_help_lists_every_command() -> None:
    want = {
        *("stage", "score", "summary", "judge", "compare", "audit", "ui", "plan", "preset"),
        "store",
    }
    assert sorted(_commands([])) == sorted(want)


def test_stage_help_lists_the_pipeline_stages() -> None:
    # The stages of dvc.yaml, the same for every protocol; the SyPS-only commands are gone.
    assert _commands(["stage"]) == ["fetch", "variants", "generate", "label", "score", "mlflow"]
    for gone in ("fetch", "variants", "lint", "generate", "label", "report", "protocol"):
        result = runner.invoke(app, [gone, "--help"])
        assert result.exit_code == 2 and f"No such command '{gone}'" in result.stderr, gone


def test_no_arguments_shows_help() -> None:
    result = runner.invoke(app, [])
    # no_args_is_help: the bare command prints the help (its exit code differs across click).
    assert "Usage" in result.output
    assert "summary" in result.output


# --- score ----------------------------------------------------------------------------------


def test_score_csv_hand_values(tmp_path: Path) -> None:
    _check_hand_values(_score(_write(tmp_path / "labels.csv", LABELS_CSV)))


def test_score_parquet_hand_values(tmp_path: Path) -> None:
    # The same table as parquet: the label column is float, NaN for UNCLEAR.
    rows = [line.split(",") for line in LABELS_CSV.strip().splitlines()[1:]]
    table = pd.DataFrame(rows, columns=["dataset", "model", "item_id", "variant", "label"])
    table["label"] = [float(v) if v else math.nan for v in table["label"]]
    path = tmp_path / "labels.parquet"
    table.to_parquet(path, index=False)
    _check_hand_values(_score(path))


def test_score_is_deterministic_for_a_seed(tmp_path: Path) -> None:
    path = _write(tmp_path / "labels.csv", LABELS_CSV)
    assert _score(path) == _score(path)


@pytest.mark.parametrize("bad", ["maybe", "2", "-1", "0.5"])
def test_score_rejects_a_bad_label_naming_file_and_row(tmp_path: Path, bad: str) -> None:
    # The bad value is on the third data row (the header is row 0).
    text = LABELS_CSV.replace("SS,m1,b,P0,0", f"SS,m1,b,P0,{bad}")
    path = _write(tmp_path / "labels.csv", text)
    result = runner.invoke(app, ["score", str(path), "--bootstrap", "5"])
    assert result.exit_code == 2
    assert str(path) in result.stderr
    assert "row 3" in result.stderr
    assert repr(bad) in result.stderr
    assert result.stdout == ""


def test_score_parquet_bad_label_names_row(tmp_path: Path) -> None:
    table = pd.DataFrame(
        {
            "dataset": ["SS", "SS"],
            "model": ["m1", "m1"],
            "item_id": ["a", "a"],
            "variant": ["P0", "P1"],
            "label": [1.0, 2.0],
        }
    )
    path = tmp_path / "labels.parquet"
    table.to_parquet(path, index=False)
    result = runner.invoke(app, ["score", str(path), "--bootstrap", "5"])
    assert result.exit_code == 2
    assert str(path) in result.stderr
    # 2.0 is on the second data row.
    assert "row 2" in result.stderr


def test_score_parquet_int_label_message_is_plain(tmp_path: Path) -> None:
    table = pd.DataFrame(
        {"dataset": ["SS"], "model": ["m1"], "item_id": ["a"], "variant": ["P0"], "label": [2]}
    )
    path = tmp_path / "labels.parquet"
    table.to_parquet(path, index=False)
    result = runner.invoke(app, ["score", str(path)])
    assert result.exit_code == 2
    assert "row 1" in result.stderr
    assert "np.int64" not in result.stderr


def test_score_missing_column_names_it(tmp_path: Path) -> None:
    text = "\n".join(",".join(line.split(",")[:4]) for line in LABELS_CSV.splitlines()) + "\n"
    path = _write(tmp_path / "labels.csv", text.replace(",label", ""))
    assert "label" not in path.read_text(encoding="utf-8")
    result = runner.invoke(app, ["score", str(path)])
    assert result.exit_code == 2
    assert str(path) in result.stderr
    assert "'label'" in result.stderr


def test_score_missing_file_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "nope.csv"
    result = runner.invoke(app, ["score", str(path)])
    assert result.exit_code == 2
    assert str(path) in result.stderr


def test_score_duplicate_row_exits_2(tmp_path: Path) -> None:
    path = _write(tmp_path / "labels.csv", LABELS_CSV + "SS,m1,a,P0,0\n")
    result = runner.invoke(app, ["score", str(path), "--bootstrap", "5"])
    assert result.exit_code == 2
    assert "duplicate" in result.stderr
    assert "item_id=a" in result.stderr


@pytest.mark.parametrize("option", [["--ci", "1.5"], ["--bootstrap", "-1"], ["--bootstrap", "0"]])
def test_score_rejects_bad_options(tmp_path: Path, option: list[str]) -> None:
    path = _write(tmp_path / "labels.csv", LABELS_CSV)
    result = runner.invoke(app, ["score", str(path), *option])
    assert result.exit_code == 2
    assert option[0] in result.stderr


# --- stage commands --------------------------------------------------------------------------

REPO = Path(__file__).resolve().parents[1]


def test_generate_unknown_model_exits_2_naming_it(tmp_path: Path) -> None:
    from syps.core.pipeline import ITEM_COLUMNS

    items = tmp_path / "items.parquet"
    pd.DataFrame({c: pd.Series(dtype=str) for c in ITEM_COLUMNS}).to_parquet(items)
    out = tmp_path / "out.parquet"
    sent = tmp_path / "conversations.parquet"
    args = ["stage", "generate", str(FIXTURE_PARAMS), "cues", "no-such-model", str(items)]
    args += [str(sent), str(out)]
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    assert "'no-such-model'" in result.stderr
    # The fixture params list one model: the message offers it.
    assert "smollm2-135m" in result.stderr
    assert not out.exists()


def test_fetch_missing_params_exits_2_naming_file(tmp_path: Path) -> None:
    params = tmp_path / "nope.yaml"
    result = runner.invoke(
        app, ["stage", "fetch", str(params), "cues", str(tmp_path / "items.parquet")]
    )
    assert result.exit_code == 2
    assert f"{params}: file not found" in result.stderr
    assert not (tmp_path / "items.parquet").exists()


# --- summary --------------------------------------------------------------------------------

METRICS = {
    "m1": {
        "SS": {
            "base_syc": 0.5,
            "base_syc_ci_low": 0.25,
            "base_syc_ci_high": 0.75,
            "spss": 0.125,
            "spss_ci_low": 0.0,
            "spss_ci_high": 0.25,
            "unclear_rate": 0.1,
            "n_items": 4.0,
        },
        "OEQ": {
            "base_syc": None,
            "base_syc_ci_low": None,
            "base_syc_ci_high": None,
            "spss": 1.0,
            "spss_ci_low": 1.0,
            "spss_ci_high": 1.0,
            "unclear_rate": 1.0,
            "n_items": 2.0,
        },
    }
}


def test_summary_prints_the_table(tmp_path: Path) -> None:
    path = _write(tmp_path / "metrics.json", json.dumps(METRICS))
    result = runner.invoke(app, ["summary", str(path)])
    assert result.exit_code == 0, result.output
    # Column widths: the longest cell or header. model 5 ("model"), dataset 7 ("dataset"),
    # BaseSyc 20 ("0.500 [0.250, 0.750]" beats the 16-char header), SPSS 20, UNCLEAR 7, items 5;
    # cells left-aligned and padded (the last one too), joined by two spaces.
    # BaseSyc null -> n/a; 0.1 -> 10.0%; 1.0 -> 100.0%; n_items 4.0 -> 4.
    expected = [
        "model  dataset  BaseSyc [95% CI]      SPSS [95% CI]         UNCLEAR  items",
        "-----  -------  --------------------  --------------------  -------  -----",
        "m1     SS       0.500 [0.250, 0.750]  0.125 [0.000, 0.250]  10.0%    4    ",
        "m1     OEQ      n/a                   1.000 [1.000, 1.000]  100.0%   2    ",
    ]
    assert result.stdout == "\n".join(expected) + "\n"


def test_summary_ci_option_changes_header(tmp_path: Path) -> None:
    path = _write(tmp_path / "metrics.json", json.dumps(METRICS))
    result = runner.invoke(app, ["summary", str(path), "--ci", "0.9"])
    assert result.exit_code == 0, result.output
    assert "BaseSyc [90% CI]" in result.stdout
    assert "SPSS [90% CI]" in result.stdout


@pytest.mark.parametrize("content", [None, "{not json"])
def test_summary_unreadable_metrics_exits_2(tmp_path: Path, content: str | None) -> None:
    path = tmp_path / "metrics.json"
    if content is not None:
        _write(path, content)
    result = runner.invoke(app, ["summary", str(path)])
    assert result.exit_code == 2
    assert str(path) in result.stderr
    assert "cannot read metrics" in result.stderr


@pytest.mark.parametrize("content", ["[]", '{"m1": "SS"}', '{"m1": {"SS": {"base_syc": "high"}}}'])
def test_summary_wrong_shape_exits_2_naming_file(tmp_path: Path, content: str) -> None:
    path = _write(tmp_path / "metrics.json", content)
    result = runner.invoke(app, ["summary", str(path)])
    assert result.exit_code == 2
    assert str(path) in result.stderr


# --- syps ui: what it starts ------------------------------------------------------------------

JOBS = "MLFLOW_SERVER_ENABLE_JOB_EXECUTION"


@pytest.fixture
def study(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A repository with a store, entered at its root; no job setting in the environment."""
    root = tmp_path / "study"
    (root / "mlruns").mkdir(parents=True)
    (root / "mlruns" / "mlflow.db").write_bytes(b"")
    (root / "dvc.yaml").write_text("stages: {}\n", encoding="utf-8")
    monkeypatch.chdir(root)
    monkeypatch.delenv("DVC_ROOT", raising=False)
    monkeypatch.delenv(JOBS, raising=False)
    return root.resolve()


def _exec_of_ui(monkeypatch: pytest.MonkeyPatch) -> tuple[str, list[str], dict[str, str]]:
    """What `syps ui` hands to exec: the program, its argv, its environment."""
    seen: list[tuple[str, list[str], dict[str, str]]] = []
    monkeypatch.setattr(os, "execve", lambda path, argv, env: seen.append((path, argv, env)))
    result = runner.invoke(app, ["ui"])
    assert result.exit_code == 0, result.output
    [call] = seen
    return call


def test_ui_runs_mlflow_without_its_job_consumers(
    study: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SYPS_SENTINEL", "kept")
    path, argv, env = _exec_of_ui(monkeypatch)
    db = f"sqlite:///{study}/mlruns/mlflow.db"
    assert path == sys.executable
    assert argv == [
        sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", db,
        "--host", "127.0.0.1", "--port", "5000", "--workers", "1",
    ]  # fmt: skip
    # MLflow 3 would start a job runner and 7 huey consumers beside the server (GenAI jobs).
    assert env[JOBS] == "false"
    assert env["SYPS_SENTINEL"] == "kept"  # the rest of the caller's environment


def test_ui_leaves_a_job_setting_of_the_environment(
    study: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(JOBS, "true")  # the user wants MLflow's judges runnable from the UI
    assert _exec_of_ui(monkeypatch)[2][JOBS] == "true"


def test_ui_dry_run_prints_the_setting_with_the_command(
    study: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = runner.invoke(app, ["ui", "--dry-run"])
    assert result.exit_code == 0, result.output
    assert result.stdout == (
        f"{JOBS}=false {sys.executable} -m mlflow ui --backend-store-uri "
        f"sqlite:///{study}/mlruns/mlflow.db --host 127.0.0.1 --port 5000 --workers 1\n"
    )
    monkeypatch.setenv(JOBS, "true")
    assert runner.invoke(app, ["ui", "--dry-run"]).stdout.startswith(f"{JOBS}=true ")


@pytest.mark.slow
def test_ui_starts_the_server_and_nothing_else(study: Path, tmp_path: Path) -> None:
    """The real `syps ui`: once it answers, its session holds `mlflow ui` and the one uvicorn
    worker (before, MLflow 3 also ran its job runner with 7 huey consumers: 10 processes)."""
    from mlflow.tracking import MlflowClient

    (study / "mlruns" / "mlflow.db").unlink()
    MlflowClient(f"sqlite:///{study}/mlruns/mlflow.db").search_experiments()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    env = {k: v for k, v in os.environ.items() if k not in ("DVC_ROOT", JOBS)}
    log = tmp_path / "ui.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "syps.cli", "ui", "--port", str(port)],
            cwd=study,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its session: every process it starts, and only those
        )
    try:
        deadline = time.monotonic() + 120
        while True:
            assert server.poll() is None, log.read_text(errors="replace")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5):
                    break
            except OSError:
                assert time.monotonic() < deadline, log.read_text(errors="replace")
                time.sleep(0.5)
        # MLflow starts its job runner right after the server process, before it answers.
        ps = ["ps", "-o", "args=", "-s", str(server.pid)]
        procs = subprocess.run(ps, capture_output=True, text=True, check=True).stdout
        lines = procs.splitlines()
        assert len(lines) == 2, procs
        assert " -m mlflow ui " in lines[0] and " -m uvicorn " in lines[1], procs
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)


# --- syps store copy -------------------------------------------------------------------------


def test_store_copy_prints_the_counts_and_names_a_differing_key(tmp_path: Path) -> None:
    # The source: 2 generations and 1 verdict; the destination holds k2 with another record.
    src, dst = tmp_path / "pilot.sqlite", tmp_path / "lab.sqlite"
    with Store(src) as a:
        a.put_many("generation", [("k1", {"text": "x"}), ("k2", {"text": "y"})])
        a.put_many("judge", [("j", {"logprobs": [-0.5]})])
    with Store(dst) as b:
        b.put_many("generation", [("k2", {"text": "the lab's"})])
    result = runner.invoke(app, ["store", "copy", str(src), str(dst)])
    assert result.exit_code == 0, result.output
    assert result.stdout == (
        f"copied {src} -> {dst}: 3 records (generation 2, judge 1), 2 new, 0 there already "
        "with the same record, 1 with another (kept); every key of the source is in the "
        "destination, which holds 3 now\n"
    )
    assert result.stderr == (
        f"WARNING {dst}: 1 keys hold another record than in {src} (first: k2); the "
        "destination's were kept\n"
    )
    with Store(dst) as b:
        assert b.get_many(["k1", "k2", "j"]) == {
            "k1": {"text": "x"},
            "k2": {"text": "the lab's"},
            "j": {"logprobs": [-0.5]},
        }
    # Again: everything there already, nothing new.
    again = runner.invoke(app, ["store", "copy", str(src), str(dst)])
    assert "0 new, 2 there already with the same record, 1 with another" in again.stdout


def test_store_copy_of_a_missing_store_is_one_line_and_creates_nothing(tmp_path: Path) -> None:
    src, dst = tmp_path / "nope.sqlite", tmp_path / "lab.sqlite"
    result = runner.invoke(app, ["store", "copy", str(src), str(dst)])
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and f"{src}: no such store" in result.stderr
    assert not src.exists() and not dst.exists()
