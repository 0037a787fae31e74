"""`backend: vllm` through the pipeline, with vLLM's CPU build on the embedded model.

1. A cold `dvc repro` of the default study's SyPS on its SS dataset (the other datasets and
   protocols disabled to keep it short: their turns reach the engine through the same backend
   interface, whose tokens tests/core/backends/test_vllm.py compares with hf's), with the
   model and the judge on vLLM (fp32, eager), writes SS's committed metrics and plot rows
   byte for byte. Those were made by the hf backend: in fp32 the two engines decode the same
   tokens and the judges give the same verdicts, so every label and every number agrees. A
   dataset's metrics, CIs and Holm family are its own (each is resampled with its own seed),
   so SS alone gives the committed study's SS numbers. Nothing is served from the committed
   run: the store starts empty and keys a vllm answer apart from an hf one.
2. The many-models recipe (docs/many-models.md): two queued experiments, `dvc queue start -j
   2`, each generating through its own vLLM engine on one core, sharing one response store.
   SyPS on its SS dataset alone (the queue, not the datasets, is under test here). Hand-derived
   count: data.limit 2 gives 2 items x 8 variants = 16 prompts per experiment; the two differ in
   SS's P3 wording only (2 prompts), so the store must hold 16 + 2 = 18 generations however the
   two interleaved.

Skipped where vLLM is not installed, except under SYPS_VLLM_TESTS=1 (CI's engine job).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from conftest import copy_repo, read_params, tiny_params, write_params
from dvc_queue import run_queue, sh

from syps.core.store import Store

if os.environ.get("SYPS_VLLM_TESTS") == "1":
    import vllm  # noqa: F401  (CI's engine job: missing is a failure)
else:
    pytest.importorskip("vllm")
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
MODEL = "smollm2-135m"
HF_MODEL = "    model: embedded:smollm2\n    backend: hf\n"
VLLM_MODEL = "    model: embedded:smollm2\n    backend: vllm\n    enforce_eager: true\n"
DATASETS = "      datasets:\n      - OEQ\n      - AITA-YTA\n      - SS\n"


def _on_vllm(text: str, keep: set[str]) -> str:
    """The user's params.yaml with the model, the judge and the simulator on vllm, SyPS on
    SS alone and only the protocols in ``keep`` enabled, edited as a user edits it (comments
    and layout kept)."""
    assert text.count(HF_MODEL) == 3, (
        "the model, the judge and the simulator are no longer as this test expects"
    )
    assert text.count(DATASETS) == 1, "SyPS's datasets are no longer as this test expects"
    text = text.replace(HF_MODEL, VLLM_MODEL).replace(DATASETS, "      datasets:\n      - SS\n")
    out, block = [], None
    for line in text.split("\n"):
        top = re.match(r"^  (\w+):\s*$", line)
        block = top.group(1) if top else block
        if block not in keep and line == "    enabled: true":
            line = "    enabled: false"
        out.append(line)
    return "\n".join(out)


def test_a_cold_repro_on_vllm_writes_the_committed_outputs(
    tmp_path: Path, model_cache: Path
) -> None:
    root = tmp_path / "repo"
    copy_repo(root)
    keep = {"cues"}
    params = root / "params.yaml"
    params.write_text(_on_vllm(params.read_text(encoding="utf-8"), keep), encoding="utf-8")
    for cmd in (("git", "init", "-q"), ("git", "add", "-A"), ("git", "commit", "-qm", "vllm")):
        sh(root, *cmd)
    env = {**os.environ, "SYPS_CACHE_DIR": str(model_cache)}
    env.pop("DVC_ROOT", None)
    run = subprocess.run(
        ["dvc", "repro"], cwd=root, env=env, capture_output=True, text=True, timeout=1800
    )
    log = run.stdout + run.stderr
    assert run.returncode == 0, log[-4000:]
    # Generated here, by vLLM, not served: the store was empty. SS: 14 items x 8 variants.
    assert "generate cues smollm2-135m: 112 rows, 112 generated, 0 repeats" in log
    with Store(root / ".cache" / "store.sqlite") as store:
        assert store.count("generation") > 0
    metrics = "metrics/cues.json"
    ours, committed = (json.loads((r / metrics).read_text()) for r in (root, REPO))
    assert list(ours[MODEL]) == ["SS"] and len(ours[MODEL]["SS"]) > 50
    assert ours[MODEL]["SS"] == committed[MODEL]["SS"], "vllm's SS metrics differ from hf's"
    # Every per-dataset plot table's SS rows, as text (the committed files were written from
    # hf's run; size.csv averages over the datasets, so it is not SS's alone).
    read = {"dtype": str, "keep_default_na": False}
    tables = {t: pd.read_csv(t, **read) for t in sorted((REPO / "plots" / "cues").glob("*.csv"))}
    tables = {t: df for t, df in tables.items() if "dataset" in df.columns}
    assert len(tables) >= 3
    for table, theirs in tables.items():
        theirs = theirs[theirs["dataset"] == "SS"].reset_index(drop=True)
        mine = pd.read_csv(root / table.relative_to(REPO), **read)
        assert len(theirs) > 0, table
        pd.testing.assert_frame_equal(mine, theirs, obj=str(table.relative_to(REPO)))


def test_two_queued_experiments_two_vllm_engines_one_store(
    tmp_path: Path, model_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SYPS_CACHE_DIR", str(model_cache))  # weights shared, never answers
    root = tmp_path / "repo"
    copy_repo(root)
    tiny_params(root)
    raw = read_params(root / "params.yaml")
    raw["models"] = {
        "a": {"model": "embedded:smollm2", "backend": "vllm", "enforce_eager": True},
    }
    raw["score"]["max_unclear"] = 1.0  # six new tokens rarely hold a verdict
    for name, block in raw["protocols"].items():
        block["enabled"] = name == "cues"  # this test is about the queue
    raw["protocols"]["cues"]["data"]["datasets"] = ["SS"]
    write_params(root / "params.yaml", raw)
    for cmd in (("git", "init", "-q"), ("git", "add", "-A"), ("git", "commit", "-qm", "study")):
        sh(root, *cmd)
    run_queue(root)
    with Store(root / ".cache" / "store.sqlite") as store:
        assert store.count("generation") == 18
