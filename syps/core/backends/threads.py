"""How many CPU threads a local model process takes: its share of the cores.

torch starts one thread per core in every process. Under ``dvc queue start -j N`` the N
workers each run a model process, and N processes of as many threads as cores oversubscribe
the machine: on 2 shared cores decoding ran 7-20x slower with 2 threads per process than with
1. So a process run by a ``dvc queue`` worker takes ``cores // N``, N being the queue's live
workers; ``SYPS_THREADS`` sets the number outright (for runs DVC does not start, e.g. two
``dvc repro`` in two clones).

DVC tells a queued experiment nothing about N. Its workers are processes named
``dvc exp queue-worker dvc-exp-<queue>-<k>@localhost``, and each runs its experiment as a
descendant process; so the count comes from this process's ancestors and the process table
(``/proc``, Linux). Where that is unreadable, the process takes every core, as before.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from syps.core.io import InputError

ENV = "SYPS_THREADS"
_WORKER = re.compile(r"exp queue-worker (dvc-exp-[0-9a-f]+)-(\d+)@")
PROC = Path("/proc")


def _cmdline(pid: str) -> str:
    try:
        return (PROC / pid / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:  # gone, or not ours to read
        return ""


def _parent(pid: str) -> str | None:
    try:
        stat = (PROC / pid / "stat").read_text()
    except OSError:
        return None
    # The command name in parentheses may hold spaces; the parent id follows its state.
    ppid = stat[stat.rindex(")") + 2 :].split()[1]
    return ppid if ppid != "0" else None


def queue_workers(pid: int | None = None) -> int | None:
    """The live workers of the ``dvc queue`` that runs process ``pid`` (default: this one);
    None when no ancestor is a queue worker."""
    at: str | None = str(pid or os.getpid())
    queue = None
    while at is not None and queue is None:
        found = _WORKER.search(_cmdline(at))
        queue = found.group(1) if found else None
        at = _parent(at)
    if queue is None:
        return None
    names = set()
    for entry in PROC.iterdir():
        if entry.name.isdigit():
            found = _WORKER.search(_cmdline(entry.name))
            if found and found.group(1) == queue:
                names.add(found.group(2))
    return max(1, len(names))


def thread_count(env: Mapping[str, str] | None = None, pid: int | None = None) -> int:
    """Threads for a model process: ``SYPS_THREADS`` if set, else its share of the usable
    cores (those this process may run on, so ``taskset`` counts)."""
    env = os.environ if env is None else env
    if ENV in env:
        value = env[ENV].strip()
        if not value.isdigit() or int(value) < 1:
            raise InputError(f"{ENV}={env[ENV]!r}: expected a positive whole number of threads")
        return int(value)
    cores = len(os.sched_getaffinity(0))
    return max(1, cores // (queue_workers(pid) or 1))
