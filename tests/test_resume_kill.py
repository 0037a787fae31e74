"""kill -9 in the middle of a stage on the real embedded model, then resume from the store.

Setup (hand-derived counts): data.limit 2 -> 2 items x 3 datasets x 8 variants = 48 prompts,
all distinct; generation.max_new_tokens 8 everywhere, so the HF backend puts every prompt in
one length group and, at batch_size 2, commits exactly 2 records per store transaction: the
store holds an even number of generations whenever it is read. The judge (batch_size 1) sees
the distinct ones among the 16 OEQ judge prompts, one committed record per prompt.

A run killed after its k-th committed batch and rerun must generate exactly the rest, and the
resumed output must equal the output of a run that was never interrupted (same greedy model,
same batches: the rest of a stable longest-first order is the tail of the full order).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import read_params

from syps.core.store import Store

pytest.importorskip("torch")
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
BUILTIN = REPO / "data" / "builtin"
MODEL = "smollm2-135m"
ITEMS = "out/items.parquet"
PROMPTS = "out/prompts.parquet"
RESPONSES = f"out/responses/{MODEL}.parquet"
LABELS = f"out/labels/{MODEL}.parquet"
GENERATE = ["stages/generate.py", "params.yaml", PROMPTS, MODEL, RESPONSES]
LABEL = ["stages/label.py", "params.yaml", ITEMS, RESPONSES, LABELS]


def _root(base: Path) -> Path:
    """A project root with the stages and a tiny params.yaml, after fetch and variants."""
    root = base / "root"
    shutil.copytree(REPO / "stages", root / "stages")
    raw = read_params()
    raw["data"]["limit"] = 2
    raw["data"]["files"] = {
        "OEQ": str(BUILTIN / "OEQ.csv"),
        "AITA-YTA": str(BUILTIN / "AITA.csv"),
        "SS": str(BUILTIN / "SS.csv"),
    }
    raw["generation"]["max_new_tokens"] = {"OEQ": 8, "AITA-YTA": 8, "SS": 8}
    raw["models"][MODEL]["batch_size"] = 2
    raw["judge"]["model"]["batch_size"] = 1
    raw["score"]["bootstrap"] = 20
    (root / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    return root


def _env(root: Path, model_cache: Path) -> dict[str, str]:
    env = {**os.environ, "DVC_ROOT": str(root), "SYPS_CACHE_DIR": str(model_cache)}
    env.pop("DVC_EXP_NAME", None)
    return env


def _run(args: list[str], root: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, *args], cwd=root, env=env, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return done


def _count(root: Path, kind: str) -> int:
    with Store(root / ".cache" / "store.sqlite") as store:
        return store.count(kind)


def _kill_after(
    args: list[str], root: Path, env: dict[str, str], kind: str, at_least: int
) -> tuple[int, str]:
    """Start a stage, SIGKILL it once the store holds ``at_least`` records of ``kind``.

    Returns the records stored when it died and its stderr.
    """
    log = root / f"killed-{kind}.log"
    with open(log, "w") as err:
        proc = subprocess.Popen(
            [sys.executable, *args],
            cwd=root,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
            start_new_session=True,
        )
        try:
            store = root / ".cache" / "store.sqlite"
            deadline = time.monotonic() + 300
            while True:
                assert proc.poll() is None, f"stage ended early:\n{log.read_text()[-4000:]}"
                assert time.monotonic() < deadline, f"timeout:\n{log.read_text()[-4000:]}"
                # Open only a store the stage has created: opening creates the file.
                if store.exists() and _count(root, kind) >= at_least:
                    break
                time.sleep(0.02)
            os.kill(proc.pid, signal.SIGKILL)
        finally:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=60)
    # Killed by the signal, not finished on its own in between.
    assert proc.returncode == -signal.SIGKILL, log.read_text()[-4000:]
    return _count(root, kind), log.read_text()


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, model_cache: Path) -> dict[str, object]:
    """Root A: generate killed after >= 6 stored responses, then rerun. Root B: uninterrupted."""
    a = _root(tmp_path_factory.mktemp("killed"))
    b = _root(tmp_path_factory.mktemp("whole"))
    env_a, env_b = _env(a, model_cache), _env(b, model_cache)
    for root, env in ((a, env_a), (b, env_b)):
        _run(["stages/fetch.py", "params.yaml", ITEMS], root, env)
        _run(["stages/variants.py", "params.yaml", ITEMS, PROMPTS], root, env)
    # B first: it converts the GGUF into the shared cache once (if no test did yet), so the
    # killed run below is not killed in the middle of a conversion.
    whole = _run(GENERATE, b, env_b)
    killed_at, killed_log = _kill_after(GENERATE, a, env_a, "generation", 6)
    # Nothing under out/responses/: neither the parquet nor a temporary file of its write.
    no_output = not (a / "out" / "responses").exists() or not any(
        (a / "out" / "responses").iterdir()
    )
    resumed = _run(GENERATE, a, env_a)
    return {
        "a": a,
        "b": b,
        "env_a": env_a,
        "env_b": env_b,
        "killed_at": killed_at,
        "killed_log": killed_log,
        "no_output_after_kill": no_output,
        "resumed_stderr": resumed.stderr,
        "whole_stderr": whole.stderr,
    }


def test_generate_killed_then_resumed(runs: dict[str, object]) -> None:
    a, b = Path(str(runs["a"])), Path(str(runs["b"]))
    killed_at = int(str(runs["killed_at"]))
    # Killed after at least 6 committed responses and before the 48th; whole batches only.
    assert 6 <= killed_at < 48
    assert killed_at % 2 == 0
    # The kill left no output (the parquet is written once, at the very end).
    assert runs["no_output_after_kill"] is True
    # The rerun found exactly what the killed run had committed, and generated the rest.
    m = re.search(
        r"store: (\d+) of (\d+) responses cached, (\d+) to generate", str(runs["resumed_stderr"])
    )
    assert m is not None, runs["resumed_stderr"]
    n, total, todo = map(int, m.groups())
    assert total == 48
    assert n == killed_at
    assert n >= 6 and n + todo == 48
    assert _count(a, "generation") == 48
    # The uninterrupted run generated all 48.
    assert "store: 0 of 48 responses cached, 48 to generate" in str(runs["whole_stderr"])

    resumed = pd.read_parquet(a / RESPONSES)
    whole = pd.read_parquet(b / RESPONSES)
    assert len(resumed) == 48
    # Each run's own record says what the store served; the outputs are the same bytes.
    assert f"generate {MODEL}: 48 responses, {48 - n} generated, {n} served from the store" in str(
        runs["resumed_stderr"]
    )
    assert "48 responses, 48 generated, 0 served from the store" in str(runs["whole_stderr"])
    assert (resumed["completion_tokens"] <= 8).all()
    pd.testing.assert_frame_equal(resumed, whole)
    assert (a / RESPONSES).read_bytes() == (b / RESPONSES).read_bytes()


def test_label_judge_killed_then_resumed(runs: dict[str, object]) -> None:
    a, b = Path(str(runs["a"])), Path(str(runs["b"]))
    env_a, env_b = runs["env_a"], runs["env_b"]
    assert isinstance(env_a, dict) and isinstance(env_b, dict)
    whole = _run(LABEL, b, env_b)
    # The 16 OEQ judge prompts hold the situation and the response but not the cue, so two
    # variants of an item whose 8-token responses coincide give the same judge prompt, judged
    # once. The stage counts such repeats as cached: on an empty store it reports
    # 16 - distinct. Read the number of distinct judge prompts off the uninterrupted run.
    m = re.search(r"store: (\d+) of 16 judgements cached", whole.stderr)
    assert m is not None, whole.stderr
    distinct = 16 - int(m.group(1))
    assert 1 <= distinct <= 16
    assert _count(b, "judge") == distinct
    killed_at, _ = _kill_after(LABEL, a, env_a, "judge", 2)
    # batch_size 1: one record per committed batch; killed before the last distinct prompt.
    assert 2 <= killed_at < distinct
    assert not (a / "out" / "labels").exists() or not any((a / "out" / "labels").iterdir())
    resumed = _run(LABEL, a, env_a)
    # Cached on the rerun: the repeats (16 - distinct) plus the rows whose prompt was stored.
    assert f"store: {16 - distinct + killed_at} of 16 judgements cached" in resumed.stderr
    assert _count(a, "judge") == distinct
    labels_a, labels_b = pd.read_parquet(a / LABELS), pd.read_parquet(b / LABELS)
    assert len(labels_a) == 48
    assert (labels_a["dataset"] == "OEQ").sum() == 16
    pd.testing.assert_frame_equal(labels_a, labels_b)
