"""The store key of an API model: the weights it declares, not the address it is served at."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import read_params
from katan import MODEL, free_port, start_katan, stop_katans, wait_ready

from syps.core import pipeline
from syps.core.backends import model_identity
from syps.core.config import ModelSpec
from syps.core.store import generation_key
from syps.protocols import PROTOCOLS

REPO = Path(__file__).resolve().parents[3]
A = "http://gpu-a:8000/v1"
B = "http://fleet-b.example:9000/v1"


def _spec(base_url: str, **kw: object) -> ModelSpec:
    return replace(ModelSpec(model="org/m", backend="openai", base_url=base_url), **kw)  # type: ignore[arg-type]


def _key(spec: ModelSpec) -> str:
    identity = model_identity(spec, Path("/nonexistent"), "models.m")
    return generation_key(identity, '[{"content":"hi","role":"user"}]', 8, {"temperature": 0.0})


def test_declared_identity_or_revision_keys_by_weights_not_address() -> None:
    assert model_identity(_spec(A, identity="sha256:ab12"), Path("/x"), "models.m") == {
        "backend": "openai",
        "model_id": "org/m",
        "revision": "",
        "identity": "sha256:ab12",
    }
    assert model_identity(_spec(A, revision="2025-01-31"), Path("/x"), "models.m") == {
        "backend": "openai",
        "model_id": "org/m",
        "revision": "2025-01-31",
    }
    declared: list[dict[str, object]] = [
        {"identity": "sha256:ab12"},
        {"revision": "r1"},
        {"revision": "r1", "identity": "w"},
    ]
    for kw in declared:
        assert _key(_spec(A, **kw)) == _key(_spec(B, **kw)), kw
    # Declarations still tell models apart.
    assert _key(_spec(A, identity="w1")) != _key(_spec(A, identity="w2"))
    assert _key(_spec(A, revision="r1")) != _key(_spec(A, revision="r1", identity="w1"))


def test_fetch_settings_do_not_enter_the_key() -> None:
    base = _spec(A, identity="w")
    other = replace(
        base,
        timeout_s=5.0,
        concurrency=1,
        max_retries=0,
        batch_size=3,
        api_key_env="K",
        mode="batch",
        max_unclear=0.5,
        size=1e9,
    )
    assert _key(base) == _key(other)


def test_without_a_declaration_the_address_keys_and_a_warning_says_so_once(
    capsys: pytest.CaptureFixture[str],
) -> None:
    spec = _spec(A)
    identity = model_identity(spec, Path("/x"), "models.undeclared")
    # The key of a study made before `identity` existed: its stored responses still hit.
    assert identity == {"backend": "openai", "model_id": "org/m", "revision": "", "base_url": A}
    assert _key(_spec(A)) != _key(_spec(B))
    model_identity(spec, Path("/x"), "models.undeclared")
    err = capsys.readouterr().err
    assert err.count("warning: models.undeclared declares neither revision nor identity") == 1
    assert "models.undeclared.identity" in err


def _params(tmp_path: Path, base_url: str, identity: str | None) -> Path:
    raw = read_params()
    for name, block in raw["protocols"].items():
        block["enabled"] = name == "cues"  # SyPS alone
    data = raw["protocols"]["cues"]["data"]
    data["limit"] = 1
    data["files"] = {
        "OEQ": str(REPO / "data/builtin/OEQ.csv"),
        "AITA-YTA": str(REPO / "data/builtin/AITA.csv"),
        "SS": str(REPO / "data/builtin/SS.csv"),
    }
    model = {"backend": "openai", "model": MODEL, "base_url": base_url, "max_retries": 0}
    if identity is not None:
        model["identity"] = identity
    raw["models"] = {"api": model}
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(raw))
    return params


@pytest.mark.slow
def test_moving_a_study_to_another_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DVC_ROOT", str(tmp_path))
    items, out = Path("out/items.parquet"), Path("out/responses/api.parquet")
    first_server, second_server = (start_katan([], tmp_path / f"k{i}.log") for i in (1, 2))
    try:
        for k in (first_server, second_server):
            wait_ready(k)
        params = _params(tmp_path, first_server.base_url, "echo-weights-v1")
        pipeline.fetch(params, PROTOCOLS["cues"], items)
        pipeline.variants(
            params,
            PROTOCOLS["cues"],
            items,
            Path("out/lint.json"),
            (Path("out/lint.json")).parent / "conversations.parquet",
        )
        pipeline.generate(
            params, PROTOCOLS["cues"], "api", items, items.parent / "conversations.parquet", out
        )
        first = pd.read_parquet(out)
        assert "24 generated, 0 repeats" in capfd.readouterr().err
        # Moved to an address where nothing listens: every response is served from the store.
        gone = f"http://127.0.0.1:{free_port()}/v1"
        pipeline.generate(
            _params(tmp_path, gone, "echo-weights-v1"),
            PROTOCOLS["cues"],
            "api",
            items,
            items.parent / "conversations.parquet",
            out,
        )
        assert "24 served from the store" in capfd.readouterr().err
        pd.testing.assert_frame_equal(first, pd.read_parquet(out))
        # Without a declaration the address is the key: a move regenerates everything.
        pipeline.generate(
            _params(tmp_path, first_server.base_url, None),
            PROTOCOLS["cues"],
            "api",
            items,
            items.parent / "conversations.parquet",
            out,
        )
        assert "24 generated, 0 repeats" in capfd.readouterr().err
        second = _params(tmp_path, second_server.base_url, None)
        pipeline.generate(
            second, PROTOCOLS["cues"], "api", items, items.parent / "conversations.parquet", out
        )
        assert "24 generated, 0 repeats" in capfd.readouterr().err
    finally:
        stop_katans([first_server, second_server])
