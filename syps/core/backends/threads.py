"""A local model process's share of the machine: its CPU threads and, under a queue, its GPUs.

torch starts one thread per core in every process. Under ``dvc queue start -j N`` the N
workers each run a model process, and N processes of as many threads as cores oversubscribe
the machine: on 2 shared cores decoding ran 7-20x slower with 2 threads per process than with
1. So a process run by a ``dvc queue`` worker takes ``cores // N``, N being the queue's live
workers; ``SYPS_THREADS`` sets the number outright (for runs DVC does not start, e.g. two
``dvc repro`` in two clones). Likewise a queued stage on a machine with NVIDIA GPUs takes its
worker's block of them (``queue_gpus``), so ``-j N`` runs N engines side by side.

Beside another CPU-bound process (a test suite in another terminal, a second ``dvc repro``) the
threads' wait policy matters more than their number. libgomp's default lets a thread that
finished its share of a forward pass spin, waiting for the others; on two cores shared with one
busy process, two spinning threads took the core the other thread needed and decoding the
default study ran tens of times slower than alone, where one thread lost nothing and two threads
told to sleep while waiting (``OMP_WAIT_POLICY=PASSIVE``) lost less than 2x (the figures:
``bench/busy_machine.py``, docs/performance.md). So syps keeps every core and sets that policy
(``passive_wait``) before torch is loaded, unless the user set one. Alone, libgomp's default
decodes somewhat faster than the passive policy: a user whose machine nothing else uses may set
``OMP_WAIT_POLICY`` to taste. The count
stays a function of the machine and the queue, never of its load at the moment, so a rerun
decodes with the same threads. The answers do not depend on either (16/16 prompts equal).

DVC tells a queued experiment nothing about N. Its workers are processes named
``dvc exp queue-worker dvc-exp-<queue>-<k>@localhost``, and each runs its experiment as a
descendant process; so the count comes from this process's ancestors and the process table
(``/proc``, Linux). Where that is unreadable, the process takes every core, as before.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, MutableMapping
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


def queue_slot(pid: int | None = None) -> tuple[int, int] | None:
    """``(position, workers)``: the live workers of the ``dvc queue`` that runs process ``pid``
    (default: this one) and the position among them (from 0, in worker-number order) of the
    one that runs it; None when no ancestor is a queue worker."""
    at: str | None = str(pid or os.getpid())
    found = None
    while at is not None and found is None:
        found = _WORKER.search(_cmdline(at))
        at = _parent(at)
    if found is None:
        return None
    queue, mine = found.group(1), int(found.group(2))
    numbers = {mine}
    for entry in PROC.iterdir():
        if entry.name.isdigit():
            other = _WORKER.search(_cmdline(entry.name))
            if other and other.group(1) == queue:
                numbers.add(int(other.group(2)))
    return sorted(numbers).index(mine), len(numbers)


def queue_workers(pid: int | None = None) -> int | None:
    """The live workers of the ``dvc queue`` that runs process ``pid`` (default: this one);
    None when no ancestor is a queue worker."""
    slot = queue_slot(pid)
    return None if slot is None else slot[1]


WAIT_ENV = "OMP_WAIT_POLICY"


def passive_wait(env: MutableMapping[str, str] | None = None) -> None:
    """Have OpenMP's threads sleep while they wait (``OMP_WAIT_POLICY=PASSIVE``) unless the
    environment names a policy. libgomp reads it once, when torch loads it: called where the
    backends are imported, before any of them imports torch; engine processes inherit it."""
    env = os.environ if env is None else env
    env.setdefault(WAIT_ENV, "PASSIVE")


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


# One folder per NVIDIA GPU: counted without initialising CUDA, which would fix the visible
# devices before CUDA_VISIBLE_DEVICES could be set.
NVIDIA_GPUS = Path("/proc/driver/nvidia/gpus")
GPU_ENV = "CUDA_VISIBLE_DEVICES"


def gpu_block(position: int, workers: int, gpus: int) -> list[int]:
    """The GPUs of worker ``position`` (from 0) of ``workers``: an equal, contiguous block of
    ``gpus // workers``, so no two workers share one; empty when there are fewer GPUs than
    workers."""
    per = gpus // workers
    return list(range(position * per, (position + 1) * per))


def queue_gpus(env: Mapping[str, str] | None = None, pid: int | None = None) -> str | None:
    """The ``CUDA_VISIBLE_DEVICES`` a process run by a ``dvc queue`` worker should take: its
    worker's block of the machine's NVIDIA GPUs, as it takes its share of the cores (under ``-j
    2`` on 8 GPUs the first worker's engine sees GPUs 0-3, the second's 4-7: two data-parallel
    engines, each free to split its model over its four with ``tensor_parallel_size``). None,
    leaving the devices as they are, outside a queue, with one worker, where the user has set
    ``CUDA_VISIBLE_DEVICES``, and where there are fewer GPUs than workers (then the workers'
    models share them: give each engine a ``memory_share`` that fits)."""
    env = os.environ if env is None else env
    if GPU_ENV in env or not NVIDIA_GPUS.is_dir():
        return None
    slot = queue_slot(pid)
    if slot is None or slot[1] < 2:
        return None
    block = gpu_block(*slot, len(list(NVIDIA_GPUS.iterdir())))
    return ",".join(map(str, block)) or None
