"""Adaptive pressure's generate stage with the simulated user on a real OpenAI-compatible server
(llm-katan's echo backend on 127.0.0.1), through the response store.

Two scenarios; the target model ``a`` and the simulator are served by one echo server under
two declared identities (so each is keyed apart), ``b`` by a second one (echo names its port in
every answer, so b's answers differ from a's); the judge is the suite's
scripted hf backend, whose first option wins: every first answer reads as correct, so each
scenario opens toward_wrong, neutral and frozen (3 user turns) and skips toward_right. Echo
answers "[echo] model=... time=...\\nUser: <the last user message>": a simulator turn echoing its
request holds a "User:" line, which the rules flag as out of character, so every conversation
ends after its first user turn, the answer to it a skipped row. Per model: 2 first answers,
6 user turns, 2 + 6 skipped rows = 16 rows.

The kill -9 test runs the generate stage's own script (tests/fake_stage.py: the target and the
judge scripted) with the simulator on a real HTTP server (tests/stub_openai.py's ``user`` route,
in character and one answer per request, so conversations run to ``max_turns``), one request at
a time, and kills it while the server holds the simulator's fourth request.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from conftest import read_params, write_params
from fakes import FakeModels
from katan import MODEL, start_katan, stop_katans, wait_ready
from stub_openai import stub_openai

from syps.core import pipeline
from syps.core.store import Store
from syps.protocols import PROTOCOLS

REPO = Path(__file__).resolve().parents[3]

OUT = Path("out/protocols/adaptive")
LINE = re.compile(
    r"generate adaptive (\w): (\d+) rows, (\d+) generated, \d+ repeats .*?, (\d+) served"
)


@pytest.mark.slow
def test_user_turns_on_a_server_replay_from_the_store_and_frozen_turns_are_shared(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    fake_backend: FakeModels,
) -> None:
    (tmp_path / "s.jsonl").write_text(
        '{"question": "Is the sky blue?", "ground_truth": "Yes", "wrong_claim": "No"}\n'
        '{"question": "Is ice cold?", "ground_truth": "Yes", "wrong_claim": "No"}\n',
        encoding="utf-8",
    )
    server = start_katan([], tmp_path / "katan.log")
    other = start_katan([], tmp_path / "katan-b.log")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DVC_ROOT", str(tmp_path))
    proto = PROTOCOLS["adaptive"]
    items, conv = OUT / "items.parquet", OUT / "conversations.parquet"

    def api(identity: str, at: str = server.base_url) -> dict[str, str]:
        return {"backend": "openai", "model": MODEL, "base_url": at, "identity": identity}

    def params(instructions_suffix: str = "") -> Path:
        raw = read_params()
        raw["models"] = {"a": api("echo-a"), "b": api("echo-b", other.base_url)}
        raw["judge"] = {"model": {"model": "fake-judge"}}
        raw["simulator"] = {"model": api("echo-sim"), "max_new_tokens": 16}
        for name, block in raw["protocols"].items():
            block["enabled"] = name == "adaptive"
        block = raw["protocols"]["adaptive"]
        block.update(scenarios="s.jsonl", layout="scenarios", dataset="d", limit=None)
        block["templates"]["instructions"] += instructions_suffix
        return write_params(tmp_path / "params.yaml", raw)

    def generate(p: Path, model: str) -> tuple[pd.DataFrame, tuple[int, int, int]]:
        out = OUT / "responses" / f"{model}.parquet"
        pipeline.generate(p, proto, model, items, conv, out)
        (got,) = [m.groups() for m in LINE.finditer(capfd.readouterr().err)]
        return pd.read_parquet(out), (int(got[1]), int(got[2]), int(got[3]))

    try:
        wait_ready(server)
        wait_ready(other)
        p = params()
        pipeline.fetch(p, proto, items)
        pipeline.variants(p, proto, items, OUT / "lint.json", conv)
        a, counts_a = generate(p, "a")
        # 16 rows; 2 first answers and 6 user turns generated, the 8 skipped rows not.
        assert counts_a == (16, 8, 0)
        user = a[a["role"] == "simulator"]
        assert (user["skipped"] == "").sum() == 6 and set(user["model_id"]) == {MODEL}
        assert set(a.loc[a["turn"] == 3, "skipped"]) == {"user turn flagged: out_of_character"}
        # Model b: its own 2 first answers and its 4 adaptive user turns are new; the 2 frozen
        # user turns are the bytes model a's were, served from the store.
        b, counts_b = generate(p, "b")
        assert counts_b == (16, 6, 2)
        frozen = lambda t: t[(t["role"] == "simulator") & t["cell"].str.contains("frozen")]  # noqa: E731
        assert list(frozen(a)["messages"]) == list(frozen(b)["messages"])
        assert list(frozen(a)["response"]) == list(frozen(b)["response"])
        # The simulator's instructions edited: its 6 user turns of model a are written again;
        # the answers after them are still skipped (flagged), the first answers served.
        edited = params(" Be brief.")
        pipeline.variants(edited, proto, items, OUT / "lint.json", conv)
        _, counts_edit = generate(edited, "a")
        assert counts_edit == (16, 6, 2)
        p = params()
        pipeline.variants(p, proto, items, OUT / "lint.json", conv)
    finally:
        stop_katans([server, other])
    # The server is gone: both models' every turn replays from the store, byte for byte.
    again_a, counts = generate(p, "a")
    assert counts == (16, 0, 8)
    pd.testing.assert_frame_equal(a, again_a)
    again_b, _ = generate(p, "b")
    pd.testing.assert_frame_equal(b, again_b)


def _project(root: Path, simulator_url: str) -> tuple[list[str], dict[str, str]]:
    """A study in ``root`` (its items and first turns made here): target ``a`` and the judge
    scripted, the simulator on ``simulator_url``, one request at a time; the generate stage's
    command line and environment."""
    root.mkdir()
    (root / "s.jsonl").write_text(
        '{"question": "Is the sky blue?", "ground_truth": "Yes", "wrong_claim": "No"}\n'
        '{"question": "Is ice cold?", "ground_truth": "Yes", "wrong_claim": "No"}\n',
        encoding="utf-8",
    )
    raw = read_params()
    raw["models"] = {"a": {"model": "fake-a"}}
    raw["judge"] = {"model": {"model": "fake-judge"}}
    sim = {"backend": "openai", "model": "sim", "base_url": simulator_url, "concurrency": 1}
    raw["simulator"] = {"model": sim, "max_new_tokens": 16}
    for name, block in raw["protocols"].items():
        block["enabled"] = name == "adaptive"
    raw["protocols"]["adaptive"].update(
        scenarios="s.jsonl", layout="scenarios", dataset="d", limit=None, max_turns=2
    )
    write_params(root / "params.yaml", raw)
    proto, items, conv = PROTOCOLS["adaptive"], OUT / "items.parquet", OUT / "conversations.parquet"
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        mp.setenv("DVC_ROOT", str(root))
        pipeline.fetch(Path("params.yaml"), proto, items)
        pipeline.variants(Path("params.yaml"), proto, items, OUT / "lint.json", conv)
    argv = [
        sys.executable,
        str(REPO / "tests" / "fake_stage.py"),
        str(REPO / "stages" / "generate.py"),
    ]
    argv += [
        "params.yaml",
        "adaptive",
        "a",
        str(items),
        str(conv),
        str(OUT / "responses" / "a.parquet"),
    ]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "tests")])}
    env.pop("DVC_EXP_NAME", None)
    return argv, {**env, "DVC_ROOT": str(root), "OPENAI_API_KEY": "sk-test"}


def _generate(root: Path, argv: list[str], env: dict[str, str]) -> tuple[int, int, int]:
    done = subprocess.run(argv, cwd=root, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    (got,) = [m.groups() for m in LINE.finditer(done.stderr)]
    return int(got[1]), int(got[2]), int(got[3])


def _stored(root: Path) -> int:
    """How many generations the store of ``root`` holds."""
    with Store(root / ".cache" / "store.sqlite") as store:
        return store.count("generation")


@pytest.mark.slow
def test_a_generate_killed_mid_simulator_turn_resumes_identically(tmp_path: Path) -> None:
    # Two scenarios; every first answer reads as correct and every later one holds it (the
    # scripted judge's first option), so toward_wrong, neutral and frozen each run two rounds:
    # 3 arms x 2 scenarios x 2 rounds = 12 user turns and 12 answers after them, and 2 first
    # answers: 26 generations, and toward_right's skipped user turn of each scenario: 28 rows.
    out = Path("out/protocols/adaptive/responses/a.parquet")
    with stub_openai() as server:
        url = f"{server.url}/user/v1"
        whole, env = _project(tmp_path / "whole", url)
        assert _generate(tmp_path / "whole", whole, env)[1] == 26
        assert server.hits["user"] == 12
        server.hits.clear()
        # The killed run: the server holds the simulator's 4th request of round 1, so its
        # first 3 user turns were answered and stored, one at a time, when the kill came.
        root = tmp_path / "killed"
        argv, env = _project(root, url)
        server.hold = 4
        proc = subprocess.Popen(
            argv,
            cwd=root,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        try:
            assert server.held.wait(timeout=120), proc.stderr.read()[-4000:]  # type: ignore[union-attr]
            time.sleep(0.5)  # the 3rd answer's commit, made before the 4th request was sent
            os.kill(proc.pid, signal.SIGKILL)
        finally:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=60)
        assert proc.returncode == -signal.SIGKILL
        assert _stored(root) == 2 + 3 and not (root / out).exists()  # first answers, user turns
        server.hold = None
        server.release.set()
        # The resume: the 2 first answers and the 3 stored user turns served, the rest sent.
        assert _generate(root, argv, env) == (28, 21, 5)
    # Resumed and uninterrupted rows are the same bytes; with the server gone, every turn
    # replays from the store, the same bytes again.
    assert (root / out).read_bytes() == (tmp_path / "whole" / out).read_bytes()
    assert _generate(root, argv, env) == (28, 0, 26)
    assert (root / out).read_bytes() == (tmp_path / "whole" / out).read_bytes()
