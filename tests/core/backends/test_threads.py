"""A model process's share of the machine: its thread count (SYPS_THREADS, else its share of the
cores under a dvc queue) and, under a queue on a machine with GPUs, its block of the GPUs.

The queue is played by real processes whose command lines are those of ``dvc queue start``'s
workers; the model process is a child of one of them, as a queued experiment's stage is.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from syps.core.backends import threads
from syps.core.backends.threads import gpu_block, queue_gpus, queue_workers, thread_count
from syps.core.io import InputError

CORES = len(os.sched_getaffinity(0))
_IDLE = "import sys; sys.stdin.read()"  # a worker that lives until its stdin closes
_RUNS_STAGE = (
    "import subprocess, sys; sys.stdin.read(0); print(subprocess.run([sys.executable, '-c', "
    "'from syps.core.backends.threads import queue_slot, queue_workers, thread_count; "
    "print(queue_workers(), thread_count({}), *queue_slot())'], capture_output=True, text=True, "
    "check=True)"
    ".stdout.strip())"
)


def _worker(code: str, node: str) -> subprocess.Popen[str]:
    argv = [sys.executable, "-c", code, "exp", "queue-worker", node]
    return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def test_the_environment_sets_the_count() -> None:
    assert thread_count({"SYPS_THREADS": "3"}) == 3
    with pytest.raises(InputError, match=r"^SYPS_THREADS='0': expected a positive whole"):
        thread_count({"SYPS_THREADS": "0"})
    with pytest.raises(InputError, match="SYPS_THREADS='two'"):
        thread_count({"SYPS_THREADS": "two"})


def test_outside_a_queue_every_core() -> None:
    assert queue_workers() is None
    assert thread_count({}) == CORES


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="the process table is read from /proc")
def test_a_queued_stage_takes_its_share() -> None:
    # Two workers of one queue, one of another queue (another project): the stage under
    # worker 1 counts the two of its own queue.
    others = [
        _worker(_IDLE, "dvc-exp-abc123-2@localhost"),
        _worker(_IDLE, "dvc-exp-fff999-1@localhost"),
    ]
    try:
        stage, _ = _worker(_RUNS_STAGE, "dvc-exp-abc123-1@localhost").communicate("", timeout=120)
    finally:
        for p in others:
            p.communicate("", timeout=30)
    assert stage.split() == ["2", str(max(1, CORES // 2)), "0", "2"]  # worker 1 is first of 2
    # Under worker 2 of a queue whose worker 1 is alive: the second of two.
    first = _worker(_IDLE, "dvc-exp-abc123-1@localhost")
    try:
        stage, _ = _worker(_RUNS_STAGE, "dvc-exp-abc123-2@localhost").communicate("", timeout=120)
    finally:
        first.communicate("", timeout=30)
    assert stage.split()[2:] == ["1", "2"]


def test_a_queue_worker_takes_its_block_of_the_gpus() -> None:
    # Hand-derived: 8 GPUs over 2 workers, 4 each; over 3, 2 each (GPUs 6, 7 idle); 1 GPU over 2
    # workers: none of its own (they share it).
    assert gpu_block(0, 2, 8) == [0, 1, 2, 3]
    assert gpu_block(1, 2, 8) == [4, 5, 6, 7]
    assert gpu_block(2, 3, 8) == [4, 5]
    assert gpu_block(1, 2, 1) == []


def test_queue_gpus_sets_the_block_only_where_it_should(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(4):
        (tmp_path / f"0000:0{i}:00.0").mkdir()  # the driver's folder per GPU
    monkeypatch.setattr(threads, "NVIDIA_GPUS", tmp_path)
    slot: tuple[int, int] | None = (1, 2)
    monkeypatch.setattr(threads, "queue_slot", lambda pid=None: slot)
    assert queue_gpus({}) == "2,3"
    assert queue_gpus({"CUDA_VISIBLE_DEVICES": "0"}) is None  # the user's choice stands
    slot = (0, 1)
    assert queue_gpus({}) is None  # one worker: every GPU, as without a queue
    slot = None
    assert queue_gpus({}) is None
    slot = (4, 5)
    assert queue_gpus({}) is None  # fewer GPUs than workers: left shared
    monkeypatch.setattr(threads, "NVIDIA_GPUS", tmp_path / "absent")
    slot = (1, 2)
    assert queue_gpus({}) is None  # no NVIDIA driver


def test_loading_a_model_sets_the_count(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    from tokenizers import Tokenizer, models
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    from syps.core.backends.hf import HFBackend
    from syps.core.config import ModelSpec

    tok = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer(models.WordLevel({"<unk>": 0, "a": 1}, unk_token="<unk>")),
        unk_token="<unk>",
        eos_token="<unk>",
    )
    config = LlamaConfig(
        vocab_size=2,
        hidden_size=8,
        intermediate_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
    )
    LlamaForCausalLM(config).save_pretrained(tmp_path / "m")
    tok.save_pretrained(tmp_path / "m")
    before = torch.get_num_threads()
    want = 1 if before != 1 else 2  # differs from the current count, so the test can fail
    monkeypatch.setenv("SYPS_THREADS", str(want))
    try:
        HFBackend.load(ModelSpec(model=str(tmp_path / "m")), tmp_path / "cache")
        assert torch.get_num_threads() == want
    finally:
        torch.set_num_threads(before)


def test_passive_wait_unless_the_user_chose() -> None:
    env: dict[str, str] = {}
    threads.passive_wait(env)
    assert env == {"OMP_WAIT_POLICY": "PASSIVE"}
    mine = {"OMP_WAIT_POLICY": "ACTIVE"}
    threads.passive_wait(mine)
    assert mine == {"OMP_WAIT_POLICY": "ACTIVE"}


# Records the policy in the environment at the moment torch starts loading (libgomp reads it
# then, once), by a finder ahead of every other that only watches.
_WATCH_TORCH = """
import os, sys
seen = []
class Watch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" and not seen:
            seen.append(os.environ.get("OMP_WAIT_POLICY"))
        return None
sys.meta_path.insert(0, Watch())
import syps.core.backends.hf
print(seen[0])
"""


@pytest.mark.parametrize(("given", "loaded_with"), [(None, "PASSIVE"), ("ACTIVE", "ACTIVE")])
def test_torch_loads_with_the_wait_policy(given: str | None, loaded_with: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if given is not None:
        env["OMP_WAIT_POLICY"] = given
    out = subprocess.run(
        [sys.executable, "-c", _WATCH_TORCH], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.split()[-1] == loaded_with
