"""Without the vLLM engine installed, ``backend: vllm`` fails with one line saying how to
install it (before any weights load)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from syps.core.backends import load_backend
from syps.core.config import ModelSpec
from syps.core.io import InputError


def test_a_missing_engine_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    pytest.importorskip("torch")
    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm now raises ImportError
    with pytest.raises(InputError) as e:
        load_backend(ModelSpec(model="embedded:smollm2", backend="vllm"), tmp_path)
    message = str(e.value)
    assert "\n" not in message
    assert message.startswith("backend vllm (embedded:smollm2): the vLLM engine is not installed")
    assert "bash setup.sh --vllm" in message
    assert not list(tmp_path.iterdir())  # nothing converted or loaded
