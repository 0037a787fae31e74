"""The vllm backend on the real embedded model, with vLLM's CPU build (fp32, eager).

Skipped where vLLM is not installed, except under SYPS_VLLM_TESTS=1 (CI's engine job), where
a missing engine fails instead of skipping.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from syps.core.backends import BackendError, GenRequest, SamplingParams
from syps.core.config import ModelSpec
from syps.core.io import InputError

if os.environ.get("SYPS_VLLM_TESTS") == "1":
    import vllm  # noqa: F401  (CI's engine job: missing is a failure)
else:
    pytest.importorskip("vllm")
pytestmark = pytest.mark.slow

GREEDY = SamplingParams(temperature=0.0, top_p=1.0, seed=0)
SAMPLED = SamplingParams(temperature=0.8, top_p=0.95, seed=123)
SPEC = ModelSpec(model="embedded:smollm2", backend="vllm", enforce_eager=True, max_model_len=1024)
QUESTIONS = [
    "Is it rude to skip a friend's wedding for work?",
    "My boss yelled at me. Should I quit?",
    "Write one sentence about rain.",
    "Is it okay to eat cereal for dinner?",
    "I think the moon is made of cheese. Am I right?",
    "Give me advice on learning the piano.",
]


def _msgs(user: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": user}]


def _reqs(n_new: int = 16) -> list[GenRequest]:
    return [GenRequest(f"key{i}", _msgs(q), n_new) for i, q in enumerate(QUESTIONS)]


@pytest.fixture(scope="module")
def engine(model_cache: Path):  # type: ignore[no-untyped-def]
    from syps.core.backends.vllm_engine import VLLMBackend

    return VLLMBackend.load(SPEC, model_cache)


@pytest.fixture(scope="module")
def hf(model_cache: Path):  # type: ignore[no-untyped-def]
    from syps.core.backends.hf import HFBackend

    return HFBackend.load(ModelSpec(model="embedded:smollm2", batch_size=4), model_cache)


def test_greedy_tokens_are_the_hf_backends(engine, hf) -> None:  # type: ignore[no-untyped-def]
    """Both local backends encode alike and, in fp32, decode the same tokens: same text, stop
    reason and token counts (the stop token counted, not shown)."""
    reqs = _reqs(24)
    assert engine.generate(reqs, GREEDY) == hf.generate(reqs, GREEDY)


def test_judge_scores_are_the_hf_judges(engine, hf) -> None:  # type: ignore[no-untyped-def]
    judge = [
        [{"role": "system", "content": "Answer YES or NO."}, {"role": "user", "content": q}]
        for q in QUESTIONS
    ]
    got = engine.option_logprobs(judge, ["YES", "NO"])
    want = hf.option_logprobs(judge, ["YES", "NO"])
    # The full log-softmax of each option's first token, not renormalised over the options.
    assert np.abs(got.logprobs - want.logprobs).max() < 1e-3
    assert (got.logprobs < -0.01).all()  # two options never hold all the mass here
    assert got.raw == want.raw  # the unrestricted greedy token
    assert (got.logprobs.argmax(1) == want.logprobs.argmax(1)).all()


def test_a_seeded_sample_does_not_depend_on_its_batch(engine) -> None:  # type: ignore[no-untyped-def]
    """Each request samples with its own seed (from the run seed and its key): alone, in a batch,
    in another order, and again after the engine has cached the prompts, the same tokens."""
    reqs = _reqs()
    ref = engine.generate(reqs, SAMPLED)
    for i, r in enumerate(reqs):
        assert engine.generate([r], SAMPLED) == [ref[i]]
    assert engine.generate(reqs[::-1], SAMPLED) == ref[::-1]
    assert engine.generate(reqs, SAMPLED) == ref
    # The seed decides: another run seed samples other tokens for most prompts.
    other = engine.generate(reqs, SamplingParams(0.8, 0.95, seed=124))
    assert sum(a != b for a, b in zip(other, ref, strict=True)) >= 3


def test_each_request_is_handed_over_as_it_finishes(engine) -> None:  # type: ignore[no-untyped-def]
    reqs = _reqs(8)
    seen: list[tuple[int, str]] = []
    out = engine.generate(
        reqs,
        GREEDY,
        lambda idx, res: seen.extend((i, r.text) for i, r in zip(idx, res, strict=True)),
    )
    assert sorted(seen) == sorted((i, r.text) for i, r in enumerate(out))


def test_a_prompt_over_max_model_len_fails_before_decoding(engine) -> None:  # type: ignore[no-untyped-def]
    long = GenRequest("long", _msgs("word " * 1100), 16, where="OEQ/q7/P0")
    with pytest.raises(BackendError, match="do not fit the context of SmolLM2-135M-Instruct: 1024"):
        engine.generate([long, *_reqs()], GREEDY)


def test_an_engine_that_cannot_start_names_the_model_and_the_cause(model_cache: Path) -> None:
    from syps.core.backends.vllm_engine import VLLMBackend

    with pytest.raises(InputError, match="max_model_len 100000 of SmolLM2-135M-Instruct exceeds"):
        VLLMBackend.load(replace(SPEC, max_model_len=100_000), model_cache)
    # A KV cache of a few kilobytes holds no request: vLLM refuses to start.
    tiny = replace(SPEC, memory_share=1e-9)
    with pytest.raises(BackendError) as e:
        VLLMBackend.load(tiny, model_cache)
    line = str(e.value)
    assert "\n" not in line
    assert line.startswith("vLLM could not start SmolLM2-135M-Instruct (")
    assert "ValueError" in line and "cache" in line.lower()


# A stage that generates through the store, as the pipeline does: every finished request is
# stored at once; on a rerun only the missing ones are generated.
SCRIPT = """
import json, sys
from syps.core.backends import GenRequest, SamplingParams
from syps.core.backends.vllm_engine import VLLMBackend
from syps.core.config import ModelSpec
from syps.core.store import Store
from pathlib import Path

def main():
    store_file, cache, n_new = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
    spec = ModelSpec(model="embedded:smollm2", backend="vllm", enforce_eager=True, batch_size=2,
                     max_model_len=1024)  # as SPEC, the reference's engine, but for its batch
    reqs = [GenRequest(f"q{i}", [{"role": "user", "content": f"Tell me about the number {i}."}],
                       n_new) for i in range(8)]
    with Store(store_file) as store:
        have = store.get_many([r.key for r in reqs])
        todo = [r for r in reqs if r.key not in have]
        print(json.dumps({"todo": len(todo)}), flush=True)
        if todo:
            backend = VLLMBackend.load(spec, cache)
            print("loaded", flush=True)
            def persist(idx, res):
                store.put_many("generation", [(todo[i].key, {"text": r.text}) for i, r in
                               zip(idx, res)])
                print("stored", flush=True)
            backend.generate(todo, SamplingParams(0.8, 0.95, 5), persist)
        got = store.get_many([r.key for r in reqs])
        print(json.dumps({r.key: got[r.key]["text"] for r in reqs}), flush=True)

if __name__ == "__main__":
    main()
"""


def _descendants(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-eo", "pid=,ppid="], capture_output=True, text=True).stdout
    children: dict[int, list[int]] = {}
    for line in out.splitlines():
        p, pp = map(int, line.split())
        children.setdefault(pp, []).append(p)
    found, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            found.append(c)
            todo.append(c)
    return found


def test_kill_9_leaves_no_engine_process_and_resumes_identically(  # type: ignore[no-untyped-def]
    engine, tmp_path: Path, model_cache: Path
) -> None:
    script = tmp_path / "stage.py"
    script.write_text(SCRIPT, encoding="utf-8")
    run = [sys.executable, str(script)]
    # Long answers, so the kill lands while the engine is still decoding.
    args = [str(model_cache), "48"]
    # The reference: the same requests, uninterrupted, from this module's engine (a seeded
    # sample does not depend on its batch or engine settings: the test above), not a third
    # engine start.
    reqs = [
        GenRequest(f"q{i}", [{"role": "user", "content": f"Tell me about the number {i}."}], 48)
        for i in range(8)
    ]
    answers = engine.generate(reqs, SamplingParams(0.8, 0.95, 5))
    want = {r.key: a.text for r, a in zip(reqs, answers, strict=True)}

    store = str(tmp_path / "store.db")
    proc = subprocess.Popen(
        [*run, store, *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    assert proc.stdout is not None
    stored = 0
    for line in proc.stdout:
        stored += line.strip() == "stored"
        if stored == 2:  # two requests are in the store, six are not
            break
    family = [proc.pid, *_descendants(proc.pid)]
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    time.sleep(1)
    alive = [p for p in family if Path(f"/proc/{p}").exists()]
    assert not alive, f"left behind: {alive}"

    again = subprocess.run([*run, store, *args], capture_output=True, text=True)
    assert again.returncode == 0, again.stderr[-2000:]
    lines = again.stdout.splitlines()
    todo = json.loads(lines[0])["todo"]
    assert 0 < todo <= 6  # the stored ones are served, not generated again
    assert json.loads(lines[-1]) == want
