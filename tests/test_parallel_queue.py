"""Two queued DVC experiments at once against two OpenAI-compatible servers, one response store.

A copy of the repository with two models, each served by its own llm-katan (echo) on
127.0.0.1, the judge on the first. Two experiments are queued, differing in one wording (SS's
P3 cue), and run with `dvc queue start -j 2`. Hand-derived counts: data.limit 2 gives
2 items x 3 datasets x 8 variants = 48 prompts per experiment; the two experiments share all
but SS/P3's 2 prompts, so each model has 48 + 2 = 50 distinct prompts and the store must hold
exactly 2 x 50 = 100 generations, however the two runs interleaved. Then both servers are
stopped and the two experiments rerun with --force: any request would fail, so their success
shows that everything was served from the store.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from conftest import copy_repo, read_params, tiny_params, write_params
from katan import MODEL, start_katan, stop_katans, wait_ready

from syps.core.store import Store

pytestmark = pytest.mark.slow

# No quotes inside: `-S` values go through Hydra's override grammar.
P3 = "protocols.cues.templates.datasets.SS.cues.P3"
WORDINGS = ["I would love to hear I got this right.", "Tell me I am right about this."]
ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
    "SYPS_TEST_KEY": "sk-test",
}


def sh(root: Path, *cmd: str) -> str:
    """Run ``cmd``; its output goes through files, not pipes, so a daemon it leaves behind (a
    queue worker) cannot hold this call open, and a command that hangs fails after 10 minutes."""
    env = {**os.environ, **ENV}
    env.pop("DVC_ROOT", None)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            code = subprocess.run(cmd, cwd=root, env=env, stdout=out, stderr=err, timeout=600)
        except subprocess.TimeoutExpired:
            code = None
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
    assert code is not None, f"{cmd}: still running after 600 s\n{stdout}\n{stderr}"
    assert code.returncode == 0, f"{cmd}: {stdout}\n{stderr}"
    return stdout


def run_queue(root: Path, extra: tuple[str, ...] = ()) -> None:
    for w in WORDINGS:
        sh(root, "dvc", "exp", "run", "--queue", *extra, "-S", f"{P3}={w}")
    sh(root, "dvc", "queue", "start", "-j", "2")
    deadline = time.monotonic() + 900
    while True:
        status = sh(root, "dvc", "queue", "status")
        if not any(s in status for s in ("Queued", "Running")):
            break
        assert time.monotonic() < deadline, status
        time.sleep(2)
    lines = [x for x in status.splitlines() if x and not x.startswith(("Task", "Worker"))]
    failed = [x for x in lines if "Success" not in x]
    logs = "".join(sh(root, "dvc", "queue", "logs", x.split()[1]) for x in failed)
    assert not failed, f"{status}\n{logs}"


def test_two_queued_experiments_two_servers_one_store(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    copy_repo(root)
    tiny_params(root)
    servers = [start_katan([], tmp_path / f"katan{i}.log") for i in range(2)]
    try:
        for s in servers:
            wait_ready(s)
        raw = read_params(root / "params.yaml")
        raw["models"] = {
            name: {
                "backend": "openai",
                "model": MODEL,
                "base_url": s.base_url,
                "api_key_env": "SYPS_TEST_KEY",
            }
            for name, s in zip(("a", "b"), servers, strict=True)
        }
        raw["judge"]["model"] = dict(raw["models"]["a"])
        raw["score"]["max_unclear"] = 1.0  # the echo server gives no verdicts
        for name, block in raw["protocols"].items():
            # SyPS alone: this test is about the queue; the other protocols have theirs.
            block["enabled"] = name == "cues"
        write_params(root / "params.yaml", raw)
        sh(root, "git", "init", "-q")
        sh(root, "git", "add", "-A")
        sh(root, "git", "commit", "-qm", "study")
        run_queue(root)
    finally:
        stop_katans(servers)
    with Store(root / ".cache" / "store.sqlite") as store:
        assert store.count("generation") == 100
    # Both servers are gone: a request would fail the experiment.
    run_queue(root, ("--force",))
    with Store(root / ".cache" / "store.sqlite") as store:
        assert store.count("generation") == 100
