"""MLflow logging into a temporary store."""

from __future__ import annotations

import math
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import url2pathname

import mlflow
import pytest

from syps.core.runlayout import child_protocol
from syps.core.tracking import (
    ChildRun,
    log_pipeline_run,
    log_validation_run,
    pipeline_run_name,
    tracking_uri,
)

TAGS = {"git_commit": "0123abc", "git_dirty": "false", "data_md5": "abc.dir"}


Logged = tuple[mlflow.MlflowClient, Path, str, list[ChildRun]]


def _log(tmp: Path) -> Logged:
    mlruns = tmp / "mlruns"
    artifact = tmp / "fig.png"
    artifact.write_bytes(b"not really a png")
    children = [
        ChildRun(
            "m1/SS",
            {"model": "m1", "dataset": "SS", "seed": "7"},
            {"base_syc": 0.5, "spss": 0.25, "delta_P7": math.nan, "n_items": 3.0},
            [artifact],
            protocol="cues",
        ),
        # No protocol given: logged with an empty one, read back as SyPS's (cues).
        ChildRun("m1/OEQ", {"model": "m1", "dataset": "OEQ"}, {"base_syc": 1.0}),
    ]
    parent = log_pipeline_run(mlruns, "exp-a", "run-1", TAGS, children)
    return mlflow.MlflowClient(tracking_uri=tracking_uri(mlruns)), mlruns, parent, children


@pytest.fixture(scope="module")
def logged(tmp_path_factory: pytest.TempPathFactory) -> Logged:
    """One logged pipeline run, shared by the read-only tests."""
    return _log(tmp_path_factory.mktemp("tracking"))


def _runs(client: mlflow.MlflowClient, experiment_id: str) -> list[mlflow.entities.Run]:
    return list(client.search_runs([experiment_id], max_results=100))


def test_tracking_uri_is_absolute_sqlite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    # A relative mlruns resolves against the cwd: sqlite:/// + absolute path.
    assert tracking_uri(Path("mlruns")) == f"sqlite:///{tmp_path.resolve()}/mlruns/mlflow.db"


@pytest.mark.slow
def test_parent_and_children(logged: Logged) -> None:
    client, mlruns, parent_id, _ = logged
    assert (mlruns / "mlflow.db").is_file()
    exp = client.get_experiment_by_name("exp-a")
    assert exp is not None
    runs = _runs(client, exp.experiment_id)
    # One parent and two children.
    assert len(runs) == 3
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert [r.info.run_id for r in parents] == [parent_id]
    parent = parents[0]
    assert parent.info.run_name == "run-1"
    for k, v in TAGS.items():
        assert parent.data.tags[k] == v
    assert parent.info.status == "FINISHED"
    children = {r.info.run_name: r for r in runs if r.info.run_id != parent_id}
    assert set(children) == {"m1/SS", "m1/OEQ"}
    for child in children.values():
        assert child.data.tags["mlflow.parentRunId"] == parent_id
        assert child.info.status == "FINISHED"
        # Children carry the pipeline tags too, so they can be filtered on their own.
        assert child.data.tags["data_md5"] == "abc.dir"


@pytest.mark.slow
def test_child_params_metrics_and_artifact(
    logged: Logged,
) -> None:
    client, mlruns, parent_id, _ = logged
    exp = client.get_experiment_by_name("exp-a")
    assert exp is not None
    children = {
        r.info.run_name: r for r in _runs(client, exp.experiment_id) if r.info.run_id != parent_id
    }
    ss = children["m1/SS"]
    # Every child names its protocol, as a param and a tag.
    assert ss.data.params == {"model": "m1", "dataset": "SS", "seed": "7", "protocol": "cues"}
    assert ss.data.tags["syps.protocol"] == "cues"
    metrics = dict(ss.data.metrics)
    assert set(metrics) == {"base_syc", "spss", "delta_P7", "n_items"}
    assert metrics["base_syc"] == 0.5
    assert metrics["spss"] == 0.25
    assert metrics["n_items"] == 3.0
    # An undefined metric is kept as NaN, not dropped or turned into 0.
    assert math.isnan(metrics["delta_P7"])
    oeq = children["m1/OEQ"]
    assert oeq.data.params == {"model": "m1", "dataset": "OEQ", "protocol": ""}
    assert child_protocol(oeq.data.tags, oeq.data.params) == "cues"
    assert dict(oeq.data.metrics) == {"base_syc": 1.0}

    assert [a.path for a in client.list_artifacts(ss.info.run_id)] == ["fig.png"]
    assert client.list_artifacts(oeq.info.run_id) == []
    # The artifact store is a directory under mlruns, holding the file's bytes.
    stored = [p for p in (mlruns / "artifacts").rglob("fig.png")]
    assert len(stored) == 1
    assert stored[0].read_bytes() == b"not really a png"


@pytest.mark.slow
def test_experiment_artifact_location_is_absolute_file_uri_under_mlruns(
    logged: Logged,
) -> None:
    client, mlruns, _, _ = logged
    exp = client.get_experiment_by_name("exp-a")
    assert exp is not None
    uri = urlparse(exp.artifact_location)
    assert uri.scheme == "file"
    path = Path(url2pathname(uri.path))
    assert path.is_absolute()
    assert path.is_relative_to(mlruns.resolve())


@pytest.mark.slow
def test_second_call_reuses_experiment(tmp_path: Path) -> None:
    client, mlruns, first_parent, children = _log(tmp_path)
    exp = client.get_experiment_by_name("exp-a")
    assert exp is not None
    second_parent = log_pipeline_run(mlruns, "exp-a", "run-2", TAGS, children[1:])
    assert second_parent != first_parent
    again = client.get_experiment_by_name("exp-a")
    assert again is not None
    assert again.experiment_id == exp.experiment_id
    # 3 runs from the first call + parent and one child from the second.
    runs = _runs(client, exp.experiment_id)
    assert len(runs) == 5
    parents = {r.info.run_name for r in runs if "mlflow.parentRunId" not in r.data.tags}
    assert parents == {"run-1", "run-2"}
    second_children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == second_parent]
    assert [r.info.run_name for r in second_children] == ["m1/OEQ"]
    # Only the default experiment and exp-a exist.
    names = sorted(e.name for e in client.search_experiments())
    assert names == ["Default", "exp-a"]


def test_pipeline_run_name_is_commit_dirty_marker_and_config_hash() -> None:
    sha = "0123456789abcdef" * 4
    clean = {"git_commit": "c0ffee1234" + "0" * 30, "git_dirty": "false"}
    assert pipeline_run_name(clean, sha) == "c0ffee1-01234567"
    assert pipeline_run_name({**clean, "git_dirty": "true"}, sha) == "c0ffee1-dirty-01234567"
    # Another config on the same dirty commit: another name.
    assert pipeline_run_name({**clean, "git_dirty": "true"}, "f" * 64) == "c0ffee1-dirty-ffffffff"
    # A DVC experiment leads with its name; outside git the commit is "unknown".
    unknown = {"git_commit": "unknown", "git_dirty": "unknown"}
    assert pipeline_run_name(unknown, sha, "exp-fake") == "exp-fake-unknown-01234567"


@pytest.mark.slow
def test_a_taken_run_name_gets_a_numbered_suffix(tmp_path: Path) -> None:
    # The same config on the same commit (a forced rerun, other uncommitted code): the names
    # must still point at one run each.
    mlruns = tmp_path / "mlruns"
    ids = [log_pipeline_run(mlruns, "e", "c0ffee1-01234567", TAGS, []) for _ in range(3)]
    client = mlflow.MlflowClient(tracking_uri=tracking_uri(mlruns))
    names = [client.get_run(i).info.run_name for i in ids]
    assert names == ["c0ffee1-01234567", "c0ffee1-01234567.2", "c0ffee1-01234567.3"]


@pytest.mark.slow
def test_no_children_logs_only_the_parent(tmp_path: Path) -> None:
    mlruns = tmp_path / "mlruns"
    parent = log_pipeline_run(mlruns, "solo", "r", {"k": "v"}, [])
    client = mlflow.MlflowClient(tracking_uri=tracking_uri(mlruns))
    exp = client.get_experiment_by_name("solo")
    assert exp is not None
    runs = _runs(client, exp.experiment_id)
    assert [r.info.run_id for r in runs] == [parent]
    assert runs[0].data.tags["k"] == "v"


@pytest.mark.slow
def test_validation_run_joins_the_experiment_as_a_top_level_run(tmp_path: Path) -> None:
    import pandas as pd

    client, mlruns, parent, _ = _log(tmp_path)
    report = tmp_path / "sample.validation.json"
    report.write_text("{}\n", encoding="utf-8")
    conf = pd.DataFrame([[2, 1], [0, 3]], index=["1", "0"], columns=["1", "0"])
    run_id = log_validation_run(
        mlruns,
        "exp-a",
        "judge-validation sample.csv",
        {"git_commit": "0123abc", "labeler.OEQ": "judge:x@r"},
        {"bootstrap_B": "10"},
        {"OEQ/kappa": 0.5, "OEQ/kappa_ci_low": math.nan},
        [report],
        {"confusion_OEQ.csv": conf},
    )
    exp = client.get_experiment_by_name("exp-a")
    assert exp is not None
    run = client.get_run(run_id)
    assert run.info.experiment_id == exp.experiment_id
    assert run.info.status == "FINISHED"
    # Not nested under the pipeline run, and told apart from it by its kind.
    assert "mlflow.parentRunId" not in run.data.tags
    assert run.data.tags["syps.kind"] == "judge-validation"
    assert run.data.tags["labeler.OEQ"] == "judge:x@r"
    assert run.data.params == {"bootstrap_B": "10"}
    assert run.data.metrics["OEQ/kappa"] == 0.5
    assert math.isnan(run.data.metrics["OEQ/kappa_ci_low"])
    names = sorted(a.path for a in client.list_artifacts(run_id))
    assert names == ["confusion_OEQ.csv", "sample.validation.json"]
    (stored,) = (mlruns / "artifacts").rglob("confusion_OEQ.csv")
    assert stored.read_text(encoding="utf-8").splitlines() == [",1,0", "1,2,1", "0,0,3"]
    assert parent != run_id


def test_a_file_goes_into_the_folder_its_pair_names(tmp_path: Path) -> None:
    # How a protocol's template set reaches protocols/<name>/templates.json on the parent.
    toy = tmp_path / "templates.json"
    toy.write_text('{"turns": {}}', encoding="utf-8")
    mlruns = tmp_path / "mlruns"
    parent = log_pipeline_run(mlruns, "exp", "run", {}, [], [(toy, "protocols/toyproto")])
    client = mlflow.MlflowClient(tracking_uri=tracking_uri(mlruns))
    [folder] = client.list_artifacts(parent)
    assert folder.path == "protocols" and folder.is_dir
    assert [a.path for a in client.list_artifacts(parent, "protocols/toyproto")] == [
        "protocols/toyproto/templates.json"
    ]


@pytest.mark.slow
def test_a_childs_table_and_own_tags(tmp_path: Path) -> None:
    import json

    from syps.core.runlayout import METRICS_TABLE, child_metrics

    table = {"base_syc": 0.5, "mcnemar_p_P3": 1e-13, "delta_P7": math.nan}
    child = ChildRun(
        "m1/SS",
        {"model": "m1", "dataset": "SS"},
        {"base_syc": 0.5},
        protocol="cues",
        table=table,
        tags={"git_commit": "0123abc", "protocol.cues.params": "{}"},
    )
    log_pipeline_run(tmp_path / "mlruns", "exp-a", "run-1", {**TAGS, "x.other": "1"}, [child])
    client = mlflow.MlflowClient(tracking_uri=tracking_uri(tmp_path / "mlruns"))
    exp = client.get_experiment_by_name("exp-a")
    assert exp is not None
    runs = _runs(client, exp.experiment_id)
    (run,) = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    (parent,) = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    # Its MLflow metrics are the ones given; its table holds every metric, full precision.
    assert dict(run.data.metrics) == {"base_syc": 0.5}
    assert [a.path for a in client.list_artifacts(run.info.run_id)] == [METRICS_TABLE]
    assert json.loads(run.data.tags["mlflow.loggedArtifacts"]) == [
        {"path": METRICS_TABLE, "type": "table"}
    ]
    got = child_metrics(client, run)
    assert set(got) == set(table) and got["mcnemar_p_P3"] == 1e-13
    assert math.isnan(got["delta_P7"])
    # Its own tags, not the parent's: the parent keeps x.other, the child never had it.
    assert parent.data.tags["x.other"] == "1" and "x.other" not in run.data.tags
    assert run.data.tags["protocol.cues.params"] == "{}"
    assert run.data.tags["syps.protocol"] == "cues"
