"""A lab's syps on one machine: clones with separate DVC caches, one PostgreSQL response store
(``SYPS_STORE``) and one MLflow tracking server (``MLFLOW_TRACKING_URI``, its runs in the same
PostgreSQL server), all real and on 127.0.0.1 (tests/pg_server.py, tests/mlflow_server.py); the
model is llm-katan's echo server.

* Shares: clone a runs SyPS's generate stage and clone b pushback's, at once, as two machines
  each run their share; every distinct response is generated once across both.
* Then both `dvc repro` at once: each is served the other's answers, generates nothing, and logs
  its run to the server; `syps compare` shows both.
* A third clone is served entirely from the store with the model server stopped.
* A colleague clones a's committed results, pulls the outputs from the lab's DVC remote and runs
  `dvc repro`: nothing runs but the mlflow stage, which logs that commit's run to the server
  once; a second colleague on the same commit logs nothing. `dvc status` is clean after each.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import copy_repo, fixture_params, run_env, write_params
from katan import MODEL, Katan, start_katan, stop_katans, wait_ready
from mlflow_server import MlflowServer, start_mlflow_server, stop_mlflow_server

from syps.core.stores import open_store

pytestmark = pytest.mark.slow

API = "api"
SHARES = {"a": f"generate@cues-{API}", "b": f"generate@pushback-{API}"}


@dataclass
class Lab:
    folder: Path
    origin: Path  # the lab's git repository (one commit)
    remote: Path  # the lab's DVC remote
    store: str
    server: MlflowServer
    katan: Katan

    def env(self, clone: str) -> dict[str, str]:
        return {
            **run_env(),
            **self.server.env(),
            "SYPS_STORE": self.store,
            "SYPS_CACHE_DIR": str(self.folder / f"models-{clone}"),
            "OPENAI_API_KEY": "lab-key",
        }

    def clone(self, name: str, source: Path | None = None) -> Path:
        root = self.folder / name
        _run(["git", "clone", "-q", str(source or self.origin), str(root)], self.folder, run_env())
        return root


def _run(cmd: list[str], cwd: Path, env: dict[str, str]) -> str:
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"{' '.join(cmd)} in {cwd}:\n{done.stdout}\n{done.stderr}"
    return done.stdout + done.stderr


def _at_once(jobs: dict[str, tuple[list[str], Path, dict[str, str]]]) -> dict[str, str]:
    """The commands started together; what each printed, once all have ended."""
    procs = {
        name: subprocess.Popen(
            cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        for name, (cmd, cwd, env) in jobs.items()
    }
    out = {name: p.communicate(timeout=900)[0] for name, p in procs.items()}
    for name, p in procs.items():
        assert p.returncode == 0, f"{name}: {' '.join(jobs[name][0])}:\n{out[name]}"
    return out


def _study(base_url: str) -> dict[str, Any]:
    """SyPS (two rule-labelled datasets, one item each) and pushback (two MCQ items) on the
    echo server; the other protocols off."""
    raw = fixture_params()
    raw["models"] = {
        API: {
            "model": MODEL,
            "backend": "openai",
            "base_url": base_url,
            "max_retries": 1,
            "concurrency": 8,
            "timeout_s": 30.0,
            "max_unclear": 1.0,  # the echo gives no verdict
            "size": 1e6,
        }
    }
    raw["score"]["bootstrap"] = 20
    # No traces: logging each over HTTP is the slowest part of the stage, and the traces on a
    # server are tests/core/test_review_queue.py's.
    raw["tracking"]["traces"] = "none"
    for name, block in raw["protocols"].items():
        block["enabled"] = name in ("cues", "pushback")
    cues = raw["protocols"]["cues"]
    cues["data"]["datasets"] = ["AITA-YTA", "SS"]
    cues["data"]["limit"] = 1
    raw["protocols"]["pushback"]["limit"] = 2
    return raw


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory, postgres: Any) -> Iterator[Lab]:
    folder = tmp_path_factory.mktemp("lab")
    katan = start_katan([], folder / "katan.log")
    server = start_mlflow_server(postgres.createdb("lab_mlflow"))
    try:
        wait_ready(katan)
        origin = folder / "origin"
        copy_repo(origin)
        write_params(origin / "params.yaml", _study(katan.base_url))
        env = run_env()
        for cmd in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "lab"]):
            _run(cmd, origin, env)
        yield Lab(folder, origin, folder / "remote", postgres.createdb("lab_store"), server, katan)
    finally:
        stop_katans([katan])
        stop_mlflow_server(server)


def _generated(log: str) -> dict[str, int]:
    """Per generate stage's log line (``generate <protocol> <model>: N rows, G generated``)."""
    out = {}
    for line in log.splitlines():
        if line.startswith("generate ") and " generated," in line:
            head, rest = line.split(": ", 1)
            out[head] = int(rest.split(" rows, ")[1].split(" generated")[0])
    return out


def _server_runs(lab: Lab) -> list[Any]:
    """The pipeline (parent) runs on the lab's server, oldest first."""
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=lab.server.url)  # no authentication here
    exp = client.get_experiment_by_name("syps")
    runs = client.search_runs([exp.experiment_id], order_by=["attributes.start_time ASC"])
    return [r for r in runs if "mlflow.parentRunId" not in r.data.tags]


def test_a_lab_shares_one_store_and_one_server(lab: Lab) -> None:
    a, b = lab.clone("a"), lab.clone("b")
    env = {c: lab.env(c) for c in "ab"}
    # Each machine its share, at once.
    shares = _at_once(
        {c: (["dvc", "repro", SHARES[c]], root, env[c]) for c, root in (("a", a), ("b", b))}
    )
    made = {**_generated(shares["a"]), **_generated(shares["b"])}
    assert set(made) == {f"generate cues {API}", f"generate pushback {API}"}
    with open_store(lab.store) as store:
        distinct = store.count("generation")
    # SyPS: 2 datasets x 1 item x 8 cues; pushback: 2 items x (answer + objection).
    assert made == {f"generate cues {API}": 16, f"generate pushback {API}": 4}
    assert distinct == sum(made.values())
    # Then the whole study in each, at once: everything served, each run logged to the server.
    full = _at_once({c: (["dvc", "repro"], root, env[c]) for c, root in (("a", a), ("b", b))})
    for c in "ab":
        assert set(_generated(full[c]).values()) <= {0}, full[c]
        assert f"mlflow: {lab.server.url}" not in full[c]  # a new run, not "already holds"
    with open_store(lab.store) as store:
        assert store.count("generation") == distinct
    for rel in ("metrics/cues.json", "metrics/pushback.json"):
        assert (a / rel).read_bytes() == (b / rel).read_bytes(), rel
    # The same lock, its stages in the order each clone ran them.
    assert yaml.safe_load((a / "dvc.lock").read_text()) == yaml.safe_load(
        (b / "dvc.lock").read_text()
    )
    runs = _server_runs(lab)
    assert len(runs) == 2
    assert len({r.data.tags["syps.results_sha256"] for r in runs}) == 1  # same commit, results
    table = _run(["syps", "compare", "--all", "--protocol", "cues"], a, env["a"])
    for r in runs:
        assert r.info.run_name in table or r.info.run_id[:8] in table, table
    for root in (a, b):
        assert not (root / "mlruns" / "mlflow.db").exists()  # the server holds the runs
        assert _run(["dvc", "status"], root, env["a"]).strip().endswith("up to date.")

    # The model server stopped: a third clone is served every answer from the store.
    stop_katans([lab.katan])
    c = lab.clone("c")
    served = _run(["dvc", "repro", *SHARES.values()], c, lab.env("c"))
    assert set(_generated(served).values()) == {0}, served

    # a commits its results and pushes the outputs to the lab's remote; a colleague clones
    # that commit and pulls them: only the mlflow stage runs, and logs the commit's run.
    _run(["dvc", "remote", "add", "-d", "lab", str(lab.remote)], a, env["a"])
    _run(["git", "add", "-A"], a, env["a"])
    _run(["git", "commit", "-qm", "results"], a, env["a"])
    _run(["dvc", "push"], a, env["a"])
    for name in ("d", "e"):
        root = lab.clone(name, source=a)
        _run(["dvc", "pull"], root, lab.env(name))
        log = _run(["dvc", "repro"], root, lab.env(name))
        ran = [ln for ln in log.splitlines() if ln.startswith("Running stage")]
        assert ran == ["Running stage 'mlflow':"], log
        if name == "d":
            assert "with " in log and "child run(s)" in log, log
        else:  # the same commit and results: the server holds d's run
            assert f"mlflow: {lab.server.url} already holds run" in log, log
        assert _run(["dvc", "status"], root, lab.env(name)).strip().endswith("up to date.")
        assert json.loads((root / "mlruns" / "pipeline-logged.json").read_text())["experiment"]
    assert len(_server_runs(lab)) == 3
    shutil.rmtree(lab.remote, ignore_errors=True)
