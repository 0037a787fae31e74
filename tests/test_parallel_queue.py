"""Two experiments at once share one response store; the queue's recipe, run by the vLLM tests.

A copy of the repository with two models, each served by its own llm-katan (echo) on
127.0.0.1, the judge on the first, SyPS alone enabled; the experiments differ in one wording
(SS's P3 cue).

1. Two experiments at once, each as DVC's queue runs one (a copy of the repository at the
   study's commit, with the repository as DVC_ROOT: docs/many-models.md), here two clones and
   two `dvc repro`s started together, so the proof does not hang on celery workers surviving a
   loaded machine (under two CI jobs on two cores one was lost, and its experiment stayed
   `Running` until the deadline). Hand-derived counts: data.limit 2 gives 2 items x 3 datasets
   x 8 variants = 48 prompts per experiment; the two share all but SS/P3's 2 prompts, so each
   model has 48 + 2 = 50 distinct prompts and the repository's store must hold exactly
   2 x 50 = 100 generations, each produced by one run or the other, however they interleaved
   (two runs that miss the same prompt at the same instant both send it, and the store keeps
   the first answer). Then both servers are stopped and both runs' generate and label stages
   repeated with --force: any request would fail, so their success, with 0 generated and 0
   judged, shows that everything was served from the store.
2. The queue itself, the recipe's `dvc exp run --queue` and `dvc queue start` (``run_queue``):
   the wait is on the queue's own state (`dvc queue status` through files, DVC's record of its
   worker processes); if every worker has exited with an experiment unfinished, the start is
   retried, at most twice, and each retry is reported as a warning in pytest's summary.
   tests/test_vllm_pipeline.py runs it with two queued experiments and two workers, whose
   answers must all be in the repository's store (in CI's engine environment); a third run of
   it here, one experiment on the OpenAI path, took CI 116 s and checked nothing that one
   does not.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import pytest
from conftest import copy_repo, read_params, tiny_params, write_params
from katan import MODEL, Katan, start_katan, stop_katans, wait_ready

from syps.core.io import read_parquet
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
    # Each dvc command would fork a usage-report daemon: load on a shared machine, no use here.
    "DVC_NO_ANALYTICS": "1",
}
PROMPTS = 2 * 3 * 8  # data.limit 2 x 3 datasets x 8 variants, per model and experiment
# How long the queue may show unfinished work with no worker process alive before the test
# starts the workers again (a worker starts in seconds, and exits only when the queue is empty).
NO_WORKER_S = 30.0
QUEUE_STARTS = 3  # the first start and at most two retries


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


def study(root: Path, servers: list[Katan]) -> dict[str, Any]:
    """A committed copy of the repository: a model per server (named a, b, ...), the judge on
    the first, SyPS alone enabled; returns its params."""
    copy_repo(root)
    tiny_params(root)
    raw = read_params(root / "params.yaml")
    raw["models"] = {
        name: {
            "backend": "openai",
            "model": MODEL,
            "base_url": s.base_url,
            "api_key_env": "SYPS_TEST_KEY",
        }
        for name, s in zip("ab", servers, strict=False)
    }
    raw["judge"]["model"] = dict(raw["models"]["a"])
    raw["score"]["max_unclear"] = 1.0  # the echo server gives no verdicts
    for name, block in raw["protocols"].items():
        # SyPS alone: this test is about sharing the store; the other protocols have theirs.
        block["enabled"] = name == "cues"
    write_params(root / "params.yaml", raw)
    sh(root, "git", "init", "-q")
    sh(root, "git", "add", "-A")
    sh(root, "git", "commit", "-qm", "study")
    return raw


def repro_at_once(root: Path, copies: list[Path], logs: Path, *args: str) -> None:
    """``dvc repro ARGS`` in every copy at once, each with ``root`` as DVC_ROOT, as DVC's queue
    runs an experiment; each in its own session (output to a file in ``logs``), waited on with
    a deadline and, past it, killed by its own process group id."""
    env = {**os.environ, **ENV, "DVC_ROOT": str(root)}
    logs.mkdir(parents=True, exist_ok=True)
    procs = []
    for c in copies:
        with (logs / f"{c.name}.log").open("wb") as f:
            procs.append(
                subprocess.Popen(
                    ["dvc", "repro", *args],
                    cwd=c,
                    env=env,
                    stdout=f,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )
    deadline = time.monotonic() + 900
    codes: list[int | None] = []
    try:
        for p in procs:
            try:
                codes.append(p.wait(timeout=max(deadline - time.monotonic(), 1.0)))
            except subprocess.TimeoutExpired:
                codes.append(None)
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=30)
    tails = "\n".join(
        f"---- {c.name} (exit {code}):\n{(logs / f'{c.name}.log').read_text()[-3000:]}"
        for c, code in zip(copies, codes, strict=True)
    )
    assert codes == [0] * len(copies), f"dvc repro {' '.join(args)} (None: past 900 s)\n{tails}"


def generate_log(copy: Path, model: str) -> dict[str, Any]:
    """The generate stage's record of its last run in ``copy`` for ``model``."""
    path = copy / "out" / "run-log" / f"generate.cues.{model}.json"
    record: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return record


def counts(record: dict[str, Any]) -> dict[str, int]:
    """A generate run log's rows, generated, served and skipped, summed over datasets."""
    keys = ("rows", "generated", "served_from_store", "skipped")
    return {k: sum(int(d[k]) for d in record["datasets"].values()) for k in keys}


def judge_counts(copy: Path, model: str) -> tuple[int, int]:
    """The judge verdicts the label stage's last run in ``copy`` computed for ``model``'s
    responses, and those the store served."""
    path = copy / "out" / "run-log" / f"label.cues.{model}.json"
    datasets = json.loads(path.read_text(encoding="utf-8"))["datasets"].values()
    judged = sum(int(d["judged"]) for d in datasets)
    return judged, sum(int(d["judge_served_from_store"]) for d in datasets)


def test_two_experiments_at_once_share_one_store(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    copies = [tmp_path / f"exp{i}" for i in range(2)]
    servers = [start_katan([], tmp_path / f"katan{i}.log") for i in range(2)]
    try:
        for s in servers:
            wait_ready(s)
        raw = study(root, servers)
        for c, wording in zip(copies, WORDINGS, strict=True):
            sh(tmp_path, "git", "clone", "-q", str(root), str(c))
            raw["protocols"]["cues"]["templates"]["datasets"]["SS"]["cues"]["P3"] = wording
            write_params(c / "params.yaml", raw)
        repro_at_once(root, copies, tmp_path / "first")
    finally:
        stop_katans(servers)
    # Nothing landed in a copy's own .cache: both used the repository's store.
    assert [c for c in copies if (c / ".cache" / "store.sqlite").exists()] == []
    keys: set[str] = set()
    generated: set[str] = set()
    for c in copies:
        for model in ("a", "b"):
            record = generate_log(c, model)
            n = counts(record)
            assert n["rows"] == PROMPTS and n["skipped"] == 0, record["line"]
            assert n["generated"] + n["served_from_store"] == PROMPTS, record["line"]
            generated |= set(record["generated_keys"])
            table = read_parquet(c / "out/protocols/cues/responses" / f"{model}.parquet")
            assert table["store_key"].nunique() == PROMPTS
            keys |= set(table["store_key"])
    assert len(keys) == 2 * (PROMPTS + 2)  # 100: two models, 48 shared prompts + 2 per wording
    # Every distinct response was generated by one run or the other (the store started empty)
    # and is stored once, under its key.
    assert generated == keys
    with Store(root / ".cache" / "store.sqlite") as store:
        assert store.count("generation") == 2 * (PROMPTS + 2)
        assert set(store.get_many(sorted(keys))) == keys
        verdicts = store.count("judge")
    # OEQ is SyPS's one judged dataset: 2 items x 8 variants = 16 verdicts looked up per label
    # stage. (How many the store holds depends on the echo text, which carries a timestamp.)
    assert {sum(judge_counts(c, m)) for c in copies for m in ("a", "b")} == {16}

    # Both servers are gone: a request would fail the run. The stages that send requests
    # (generate and label, the judge's), forced: each looks every request up in the store.
    repro_at_once(root, copies, tmp_path / "rerun", "--force", "label@cues-a", "label@cues-b")
    for c in copies:
        for model in ("a", "b"):
            record = generate_log(c, model)
            assert counts(record) == {
                "rows": PROMPTS,
                "generated": 0,
                "served_from_store": PROMPTS,
                "skipped": 0,
            }, record["line"]
            assert record["generated_keys"] == []
            judged, served = judge_counts(c, model)
            assert (judged, served) == (0, 16)
    with Store(root / ".cache" / "store.sqlite") as store:
        assert store.count("generation") == 2 * (PROMPTS + 2)
        assert store.count("judge") == verdicts


def queue_workers(root: Path) -> tuple[list[int], str]:
    """The process ids of the queue's workers still running, from DVC's own record of them
    (``.dvc/tmp/exps/celery/dvc-exp-worker-N.json``: the pid, and the exit code once it has
    exited), and the end of their logs."""
    folder = root / ".dvc" / "tmp" / "exps" / "celery"
    alive, logs = [], ""
    for info in sorted(folder.glob("dvc-exp-worker-*.json")):
        try:
            record = json.loads(info.read_text(encoding="utf-8"))
        except (OSError, ValueError):  # replaced as we read it: the next poll sees it
            continue
        out = info.with_suffix(".out")
        tail = out.read_text(errors="replace")[-2000:] if out.exists() else ""
        logs += f"---- {info.stem} (pid {record['pid']}, exit {record['returncode']}):\n{tail}\n"
        if record["returncode"] is None:
            try:
                os.kill(record["pid"], 0)
            except ProcessLookupError:
                continue
            alive.append(int(record["pid"]))
    return alive, logs


def _tasks(status: str) -> list[list[str]]:
    """The task rows of `dvc queue status` (Task, Name, Created..., Status)."""
    return [
        row.split()
        for row in status.splitlines()
        if row.strip() and not row.startswith(("Task", "Worker", "No experiment"))
    ]


def run_queue(
    root: Path, extra: tuple[str, ...] = (), wordings: list[str] = WORDINGS, jobs: int = 2
) -> None:
    """Queue one experiment per wording of SS's P3 cue, start ``jobs`` workers and wait until
    every experiment has succeeded.

    The wait is on the queue's state, polled through files (`dvc queue status`, DVC's record of
    its workers), within 15 minutes. If unfinished work sits with no worker alive for
    NO_WORKER_S, the workers are started again (QUEUE_STARTS in all), each time reported as a
    warning; an experiment a lost worker had taken (`Running`, no worker) is killed (DVC marks
    it failed) and queued again.
    """
    names: dict[str, str] = {}  # this call's experiments: name -> wording
    killed: set[str] = set()

    def queue(wording: str) -> None:
        out = sh(root, "dvc", "exp", "run", "--queue", *extra, "-S", f"{P3}={wording}")
        found = re.search(r"Queued experiment '([^']+)'", out)
        assert found, out
        names[found.group(1)] = wording

    for w in wordings:
        queue(w)
    sh(root, "dvc", "queue", "start", "-j", str(jobs))
    starts, last_alive = 1, time.monotonic()
    deadline = time.monotonic() + 900
    while True:
        status = sh(root, "dvc", "queue", "status")
        ours = [t for t in _tasks(status) if t[1] in names and t[1] not in killed]
        waiting = [t for t in ours if t[-1] in ("Queued", "Running")]
        if not waiting:
            break
        alive, logs = queue_workers(root)
        assert time.monotonic() < deadline, f"{status}\n{logs}"
        if alive:
            last_alive = time.monotonic()
        elif time.monotonic() - last_alive > NO_WORKER_S:
            report = f"every queue worker exited with work left (start {starts})\n{status}\n{logs}"
            assert starts < QUEUE_STARTS, report
            for t in waiting:
                if t[-1] == "Running":  # taken by a worker that is gone: no other will take it
                    sh(root, "dvc", "queue", "kill", t[1])
                    killed.add(t[1])
                    queue(names[t[1]])
            warnings.warn(f"retrying `dvc queue start`: {report}", stacklevel=2)
            sh(root, "dvc", "queue", "start", "-j", str(jobs))
            starts, last_alive = starts + 1, time.monotonic()
        time.sleep(10)  # each `dvc queue status` costs a second of CPU the experiment needs
    failed = [t for t in ours if t[-1] != "Success"]
    logs = "".join(sh(root, "dvc", "queue", "logs", t[1]) for t in failed)
    assert not failed, f"{status}\n{logs}"
    assert sorted(names[t[1]] for t in ours) == sorted(wordings), status
