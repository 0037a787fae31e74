"""A Hugging Face id loads the commit its key names: a tiny random model in a hand-built cache.

Two snapshots of one repository hold different random weights; ``refs/main`` names one of
them. Loading, generating through the stage entry and the response rows must all follow the
commit ``main`` names, and moving ``main`` must make a rerun generate afresh. Offline
throughout (``HF_HUB_OFFLINE=1``): nothing here can reach the hub.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from fake_hub import HUB_ID, REPO, SHA_A, SHA_B, point, study_params

from syps.protocols import PROTOCOLS

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.slow

WORDS = ["agree", "disagree", "i", "am", "sure", "of", "it", "the", "sky", "is", "green"]
CHAT = (
    "{% for m in messages %}<s>{{ m['role'] }}: {{ m['content'] }}</s>{% endfor %}"
    "{% if add_generation_prompt %}<s>assistant:{% endif %}"
)


def _save_tiny_model(target: Path, seed: int) -> None:
    """A one-layer Llama over a word-level vocabulary, randomly initialised from ``seed``."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(["<unk>", "<s>", "</s>", *WORDS])}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=backend, unk_token="<unk>", bos_token="<s>", eos_token="</s>"
    )
    tok.chat_template = CHAT
    config = LlamaConfig(
        vocab_size=len(vocab),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=256,
        bos_token_id=1,
        eos_token_id=2,
    )
    torch.manual_seed(seed)
    LlamaForCausalLM(config).save_pretrained(target)
    tok.save_pretrained(target)


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Hugging Face cache holding the tiny model at two commits; main names SHA_A."""
    cache = tmp_path_factory.mktemp("hf-hub")
    root = cache / f"models--{HUB_ID.replace('/', '--')}" / "snapshots"
    _save_tiny_model(root / SHA_A, seed=1)
    _save_tiny_model(root / SHA_B, seed=2)
    point(cache, HUB_ID, "main", SHA_A)
    return cache


def _weights(path: Path) -> torch.Tensor:
    from safetensors.torch import load_file

    return load_file(path / "model.safetensors")["model.embed_tokens.weight"]


def test_load_reads_the_snapshot_main_names(
    hub: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from huggingface_hub import constants

    from syps.core.backends.hf import HFBackend
    from syps.core.config import ModelSpec

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(hub))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    snaps = hub / f"models--{HUB_ID.replace('/', '--')}" / "snapshots"
    assert not torch.equal(_weights(snaps / SHA_A), _weights(snaps / SHA_B))
    point(hub, HUB_ID, "main", SHA_B)
    try:
        backend = HFBackend.load(ModelSpec(model=HUB_ID), tmp_path, "cpu")
    finally:
        point(hub, HUB_ID, "main", SHA_A)
    assert (backend.model_id, backend.revision) == (HUB_ID, SHA_B)
    loaded = backend.model.get_input_embeddings().weight.detach()
    assert torch.equal(loaded, _weights(snaps / SHA_B))


def _generate(root: Path, hub: Path) -> tuple[pd.DataFrame, str]:
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "HF_HUB_OFFLINE": "1",
        "HF_HUB_CACHE": str(hub),
        "SYPS_CACHE_DIR": str(root / ".cache"),
        "TQDM_DISABLE": "1",
    }
    env.pop("DVC_ROOT", None)
    out = root / "responses.parquet"
    done = subprocess.run(
        [
            sys.executable,
            str(REPO / "stages" / "generate.py"),
            "params.yaml",
            "cues",
            "tiny",
            "items.parquet",
            "conversations.parquet",
            str(out),
        ],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    return pd.read_parquet(out), done.stderr


def test_generate_stage_records_the_commit_and_reruns_when_main_moves(
    hub: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from syps.core import pipeline

    csv = tmp_path / "SS.csv"
    csv.write_text("prompt\nthe sky is green\ni am sure of it\n", encoding="utf-8")
    params = study_params(tmp_path / "params.yaml", {"tiny": {"model": HUB_ID}}, csv)
    monkeypatch.chdir(tmp_path)
    pipeline.fetch(params, PROTOCOLS["cues"], tmp_path / "items.parquet")
    pipeline.variants(
        params,
        PROTOCOLS["cues"],
        tmp_path / "items.parquet",
        tmp_path / "lint.json",
        tmp_path / "conversations.parquet",
    )

    first, err = _generate(tmp_path, hub)
    assert len(first) == 4  # 2 statements x 2 cues
    assert set(first["revision"]) == {SHA_A} and set(first["model_id"]) == {HUB_ID}
    assert f"this run uses commit {SHA_A}" in err and "models.tiny.revision" in err
    assert "cues tiny turn 1: 4 requests, 0 in the store, 4 to generate" in err

    point(hub, HUB_ID, "main", SHA_B)
    try:
        moved, err = _generate(tmp_path, hub)
    finally:
        point(hub, HUB_ID, "main", SHA_A)
    assert set(moved["revision"]) == {SHA_B}
    assert "cues tiny turn 1: 4 requests, 0 in the store, 4 to generate" in err  # new keys
    assert not set(moved["store_key"]) & set(first["store_key"])

    again, err = _generate(tmp_path, hub)
    assert "cues tiny turn 1: 4 requests, 4 in the store, 0 to generate" in err
    assert again["store_key"].tolist() == first["store_key"].tolist()
    assert again["response"].tolist() == first["response"].tolist()
