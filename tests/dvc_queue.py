"""DVC's queue as docs/many-models.md runs it: `dvc exp run --queue` and `dvc queue start`.

``run_queue`` waits on the queue's own state (`dvc queue status` through files, DVC's record of
its worker processes); if every worker has exited with an experiment unfinished, the start is
retried, at most twice, and each retry is reported as a warning in pytest's summary.
tests/test_vllm_pipeline.py runs it with two queued experiments and two workers, whose answers
must all be in the repository's store (in CI's engine environment). Two runs at once sharing one
store without the queue are tests/test_lab.py's (two clones on one PostgreSQL store); several
processes writing one SQLite store are tests/core/test_store.py's.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
import time
import warnings
from pathlib import Path

# No quotes inside: `-S` values go through Hydra's override grammar.
P3 = "protocols.cues.templates.datasets.SS.cues.P3"
WORDINGS = ["I would love to hear I got this right.", "Tell me I am right about this."]
ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
    # Each dvc command would fork a usage-report daemon: load on a shared machine, no use here.
    "DVC_NO_ANALYTICS": "1",
}
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
