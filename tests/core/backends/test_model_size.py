"""Parameter counts for the SPSS-vs-size figure: counted by the backends, never by the figures."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from fake_hub import HUB_ID, REPO, SHA_A, point, snapshot

from syps.core.backends import model_size
from syps.core.config import ModelSpec


def test_the_figures_and_the_backend_registry_import_no_torch() -> None:
    # The score stage draws figures from plain numbers; torch loads only to count an hf model.
    code = (
        "import sys, syps.protocols.cues.figures, syps.core.backends; print('torch' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout == "False\n"


def test_model_size_explicit_wins(tmp_path: Path) -> None:
    assert model_size(ModelSpec(model="embedded:smollm2", size=1.35e8), tmp_path) == 1.35e8
    api = ModelSpec(model="gpt-x", backend="openai", base_url="http://x", size=7e9)
    assert model_size(api, tmp_path) == 7e9


def test_model_size_openai_is_unknown(tmp_path: Path) -> None:
    spec = ModelSpec(model="gpt-x", backend="openai", base_url="http://localhost:1/v1")
    assert model_size(spec, tmp_path) is None


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty Hugging Face cache, online as far as huggingface_hub knows: counting must still
    never ask the hub (its endpoint is a port nothing listens on, so asking would fail)."""
    from huggingface_hub import constants

    cache = tmp_path / "hf-hub"
    cache.mkdir()
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")
    return cache


def test_model_size_hub_id_not_cached_is_unknown(hub: Path, tmp_path: Path) -> None:
    # Local files only: a config that is not in the HF cache is None, never a download.
    assert model_size(ModelSpec(model="syps-test/no-such-model-anywhere"), tmp_path) is None


TINY_LLAMA = {
    "model_type": "llama",
    "architectures": ["LlamaForCausalLM"],
    "vocab_size": 32,
    "hidden_size": 8,
    "intermediate_size": 16,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
}


@pytest.mark.parametrize(("tied", "expected"), [(True, 856.0), (False, 1112.0)])
def test_model_size_counts_a_local_config(tmp_path: Path, tied: bool, expected: float) -> None:
    # A one-layer Llama: vocab 32, hidden 8, 2 heads of 4 dims, 1 KV head, MLP 16, no biases.
    # embed 32*8 = 256; attention q 8*8 + k 8*4 + v 8*4 + o 8*8 = 192; MLP 3*8*16 = 384;
    # two layer norms 2*8 = 16; final norm 8: 856. An untied lm_head adds 32*8 = 256: 1112.
    model_dir = tmp_path / "tiny"
    model_dir.mkdir()
    (model_dir / "config.json").write_text(json.dumps({**TINY_LLAMA, "tie_word_embeddings": tied}))
    (model_dir / "model.safetensors").write_bytes(b"never loaded")  # resolve() wants weights
    assert model_size(ModelSpec(model=str(model_dir)), tmp_path / "cache") == expected


def test_model_size_counts_the_cached_commit_of_a_hub_id(hub: Path, tmp_path: Path) -> None:
    snap = snapshot(hub, HUB_ID, SHA_A)
    (snap / "config.json").write_text(json.dumps({**TINY_LLAMA, "tie_word_embeddings": True}))
    point(hub, HUB_ID, "main", SHA_A)
    assert model_size(ModelSpec(model=HUB_ID), tmp_path) == 856.0


@pytest.mark.slow
def test_model_size_embedded_smollm2_without_converting(tmp_path: Path) -> None:
    # SmolLM2-135M: vocab 49152, hidden 576, 30 layers, 9 heads of 64 dims, 3 KV heads, MLP 1536,
    # tied input/output embeddings (so the lm_head adds nothing):
    #   embeddings      49152 * 576                          =  28,311,552
    #   per layer       q 576*576 + k,v 2 * 576*192 + o 576*576  =     884,736
    #                   MLP 3 * 576*1536                      =   2,654,208
    #                   two RMSNorms 2 * 576                  =       1,152
    #   30 layers       30 * 3,540,096                        = 106,202,880
    #   final norm                                            =         576
    #   total                                                 = 134,515,008
    cache = tmp_path / "cache"
    assert model_size(ModelSpec(model="embedded:smollm2"), cache) == 134_515_008.0
    # Counted from the GGUF's own config: the score stage never converts the weights.
    assert not (cache / "models").exists()
