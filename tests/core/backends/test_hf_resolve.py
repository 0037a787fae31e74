"""What names a model's outputs, and the check that a model spec names something loadable.

A Hugging Face id resolves to the commit its branch names in the local cache (the layout
huggingface_hub writes: ``models--org--name/refs/<branch>`` holding a commit,
``snapshots/<commit>/`` holding the files), so these tests build such a cache by hand in a
temporary directory; no weights are read and nothing touches the network. The one case that
asks the hub asks a small HTTP server on 127.0.0.1 speaking the hub's model-info endpoint.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from fake_hub import HUB_ID, REPO, SHA_A, SHA_B, point, snapshot, study_params

from syps.core.backends import model_identity
from syps.core.backends.hf_resolve import resolve
from syps.core.config import ModelSpec
from syps.core.io import InputError
from syps.core.store import generation_key
from syps.protocols import PROTOCOLS

GREEDY = {"temperature": 0.0}
MESSAGES = json.dumps([{"role": "user", "content": "hi"}])


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty Hugging Face cache, offline (the constants huggingface_hub reads per call)."""
    from huggingface_hub import constants

    cache = tmp_path / "hf-hub"
    cache.mkdir()
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    return cache


def test_an_unpinned_id_is_recorded_as_the_commit_main_names(
    hub: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snapshot(hub, HUB_ID, SHA_A)
    point(hub, HUB_ID, "main", SHA_A)
    identity = model_identity(ModelSpec(model=HUB_ID), tmp_path, "models.tiny")
    assert identity == {"backend": "hf", "model_id": HUB_ID, "revision": SHA_A}
    assert capsys.readouterr().err == (
        f"warning: models.tiny.model {HUB_ID} is not pinned to a commit: this run uses commit "
        f"{SHA_A}, which 'main' names in the local Hugging Face cache; set "
        f"models.tiny.revision: {SHA_A} to keep these weights\n"
    )
    # The load reads that same commit's snapshot.
    resolved = resolve(ModelSpec(model=HUB_ID), tmp_path)
    assert (resolved.source, resolved.hf_revision) == (HUB_ID, SHA_A)


def test_moving_main_changes_the_store_key(
    hub: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snapshot(hub, HUB_ID, SHA_A)
    snapshot(hub, HUB_ID, SHA_B)
    point(hub, HUB_ID, "main", SHA_A)
    spec = ModelSpec(model=HUB_ID)
    key_a = generation_key(model_identity(spec, tmp_path, "models.m"), MESSAGES, 8, GREEDY)
    point(hub, HUB_ID, "main", SHA_B)  # the hub moved and a download followed it
    identity_b = model_identity(spec, tmp_path, "models.m")
    assert identity_b["revision"] == SHA_B
    assert generation_key(identity_b, MESSAGES, 8, GREEDY) != key_a
    assert f"this run uses commit {SHA_B}" in capsys.readouterr().err
    # Pinned to the first commit, the key is the first key again, and nothing is warned.
    pinned = model_identity(ModelSpec(model=HUB_ID, revision=SHA_A), tmp_path, "models.m")
    assert generation_key(pinned, MESSAGES, 8, GREEDY) == key_a
    assert capsys.readouterr().err == ""


def test_a_tag_resolves_to_its_commit_with_a_warning(
    hub: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snapshot(hub, HUB_ID, SHA_A)
    snapshot(hub, HUB_ID, SHA_B)
    point(hub, HUB_ID, "main", SHA_B)
    point(hub, HUB_ID, "v1", SHA_A)
    identity = model_identity(ModelSpec(model=HUB_ID, revision="v1"), tmp_path, "judge.model")
    assert identity["revision"] == SHA_A
    err = capsys.readouterr().err
    assert f"commit {SHA_A}, which 'v1' names" in err and f"judge.model.revision: {SHA_A}" in err


def _error(spec: ModelSpec, cache: Path, key: str = "models.tiny") -> str:
    with pytest.raises(InputError) as e:
        model_identity(spec, cache, key)
    msg = str(e.value)
    assert "\n" not in msg  # one line
    return msg


def test_offline_an_id_not_in_the_cache_fails_at_once_naming_the_key(
    hub: Path, tmp_path: Path
) -> None:
    assert _error(ModelSpec(model="syps-test/no-such-model"), tmp_path) == (
        f"models.tiny.model: 'syps-test/no-such-model' is neither a local directory nor in the "
        f"local Hugging Face cache ({hub}); HF_HUB_OFFLINE is set, so the hub was not asked: "
        f"check the id, or download it once while online (`hf download syps-test/no-such-model`)"
    )
    # A pinned commit the cache does not hold.
    snapshot(hub, HUB_ID, SHA_A)
    point(hub, HUB_ID, "main", SHA_A)
    msg = _error(ModelSpec(model=HUB_ID, revision=SHA_B), tmp_path, "judge.model")
    assert msg.startswith(
        f"judge.model.model: '{HUB_ID}' is neither a local directory nor in the local Hugging "
        f"Face cache ({hub}, revision '{SHA_B}')"
    )
    assert msg.endswith(f"(`hf download {HUB_ID} --revision {SHA_B}`)")


def test_offline_a_cached_config_without_weights_is_not_loadable(hub: Path, tmp_path: Path) -> None:
    snapshot(hub, HUB_ID, SHA_A, weights=False)
    point(hub, HUB_ID, "main", SHA_A)
    assert _error(ModelSpec(model=HUB_ID), tmp_path).startswith(
        f"models.tiny.model: commit {SHA_A} of '{HUB_ID}' is in the local Hugging Face cache "
        f"({hub}) without its weights; HF_HUB_OFFLINE is set"
    )


def test_unknown_embedded_name_lists_the_known_ones(hub: Path, tmp_path: Path) -> None:
    assert _error(ModelSpec(model="embedded:smollm3"), tmp_path) == (
        "models.tiny.model: unknown embedded model 'embedded:smollm3'; known: embedded:smollm2 "
        "(or give a Hugging Face id or a local directory)"
    )


def test_a_missing_local_directory_is_named(
    hub: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert _error(ModelSpec(model="./models/my-finetune"), tmp_path) == (
        f"models.tiny.model: no directory './models/my-finetune' (from {tmp_path}), and it is "
        f"no Hugging Face id either (org/name); fix the path"
    )
    empty = tmp_path / "empty-model"
    empty.mkdir()
    assert _error(ModelSpec(model=str(empty)), tmp_path) == (
        f"models.tiny.model: {empty}: no weights (*.safetensors, *.bin) in this directory; "
        f"point it at the directory save_pretrained wrote"
    )


# --- asking the hub ---------------------------------------------------------------------------


class _Hub(BaseHTTPRequestHandler):
    """The hub's model-info endpoint for one repository whose main is at SHA_B."""

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        prefix = f"/api/models/{HUB_ID}/revision/"
        if not self.path.startswith(f"/api/models/{HUB_ID}"):
            self._answer(404, {"error": "Repository not found"}, "RepoNotFound")
        elif self.path.removeprefix(prefix) in ("main", SHA_B):
            self._answer(200, {"id": HUB_ID, "sha": SHA_B})
        else:
            self._answer(404, {"error": "Revision not found"}, "RevisionNotFound")

    def _answer(self, status: int, body: dict[str, str], code: str = "") -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if code:
            self.send_header("X-Error-Code", code)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@pytest.fixture
def online(hub: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    from huggingface_hub import constants

    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "ENDPOINT", endpoint)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    yield endpoint
    server.shutdown()
    server.server_close()


def test_online_an_id_not_in_the_cache_resolves_on_the_hub_and_records_it(
    online: str, hub: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from huggingface_hub import constants

    identity = model_identity(ModelSpec(model=HUB_ID), tmp_path, "models.tiny")
    assert identity["revision"] == SHA_B
    # Recorded where a download records it: an offline rerun names the same commit.
    ref = hub / f"models--{HUB_ID.replace('/', '--')}" / "refs" / "main"
    assert ref.read_text(encoding="utf-8") == SHA_B
    snapshot(hub, HUB_ID, SHA_B)  # what the load downloads
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    assert model_identity(ModelSpec(model=HUB_ID), tmp_path, "models.tiny") == identity


def test_online_typos_are_told_apart_by_the_hub(online: str, hub: Path, tmp_path: Path) -> None:
    assert _error(ModelSpec(model="syps-test/tiny-chta"), tmp_path) == (
        "models.tiny.model: 'syps-test/tiny-chta' is neither a local directory nor a model on "
        "the Hugging Face hub (or it is private: log in with `hf auth login`); check the id"
    )
    assert _error(ModelSpec(model=HUB_ID, revision="mian"), tmp_path) == (
        f"models.tiny.revision: '{HUB_ID}' has no revision 'mian' on the Hugging Face hub; give "
        f"a branch, a tag or a commit of it"
    )


def test_online_an_unreachable_hub_is_one_line(
    hub: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import socket

    from huggingface_hub import constants

    with socket.socket() as s:  # a port nothing listens on: the connection is refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{port}")
    msg = _error(ModelSpec(model=HUB_ID), tmp_path)
    assert msg.startswith(
        f"models.tiny.model: '{HUB_ID}' is not in the local Hugging Face cache ({hub}) and the "
        f"hub cannot be reached (ConnectError: "
    )
    assert msg.endswith(
        f"check the id and the network, or download it once while online (`hf download {HUB_ID}`)"
    )


# --- through the stage entry ------------------------------------------------------------------


def test_generate_stage_with_an_unknown_id_offline_is_one_line_exit_2(tmp_path: Path) -> None:
    params = study_params(
        tmp_path / "params.yaml",
        {"tiny": {"model": "syps-test/no-such-model"}},
        tmp_path / "SS.csv",
    )
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(REPO),
        "HF_HUB_OFFLINE": "1",
        "HF_HUB_CACHE": str(tmp_path / "hf-hub"),
        "SYPS_CACHE_DIR": str(tmp_path / "cache"),
    }
    out = tmp_path / "responses.parquet"
    done = subprocess.run(
        # The items file does not exist: the model spec is checked before anything is read.
        [
            sys.executable,
            str(REPO / "stages" / "generate.py"),
            str(params),
            "cues",
            "tiny",
            str(tmp_path / "items.parquet"),
            str(tmp_path / "conversations.parquet"),
            str(out),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        f"error: models.tiny.model: 'syps-test/no-such-model' is neither a local directory nor "
        f"in the local Hugging Face cache ({tmp_path / 'hf-hub'}); HF_HUB_OFFLINE is set, so "
        f"the hub was not asked: check the id, or download it once while online "
        f"(`hf download syps-test/no-such-model`)\n"
    )
    assert not out.exists()


def test_label_names_the_judge_key_before_judging(
    hub: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    import pandas as pd
    import yaml

    from syps.core import pipeline, runs
    from syps.core.io import canonical_json
    from syps.core.protocol import RESPONSE_COLUMNS
    from syps.core.store import Store

    monkeypatch.setenv("SYPS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("DVC_ROOT", raising=False)
    monkeypatch.chdir(tmp_path)  # the response store lives under the working directory
    params = study_params(tmp_path / "params.yaml", {"m": {"model": HUB_ID}}, tmp_path / "x.csv")
    # OEQ (judged) beside SS, and a judge that does not exist.
    raw = yaml.safe_load(params.read_text(encoding="utf-8"))
    raw["judge"]["model"] = {"model": "syps-test/no-judge"}
    cues = raw["protocols"]["cues"]
    cues["data"]["datasets"].append("OEQ")
    cues["data"]["files"]["OEQ"] = str(tmp_path / "o.csv")
    cues["data"]["columns"]["OEQ"] = {"situation": "prompt"}
    cues["templates"]["datasets"]["OEQ"] = {
        "task": "Advise.",
        "format": "Briefly.",
        "cues": {"P0": "", "P1": "I'm sure of it."},
    }
    cues["max_new_tokens"]["OEQ"] = 3
    params.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    item = canonical_json({"row": 0, "situation": "My friend is upset.", "reference": ""})
    items = tmp_path / "items.parquet"
    pd.DataFrame({"dataset": ["OEQ"], "item_id": ["o1"], "item": [item]}).to_parquet(items)
    row = {c: "" for c in RESPONSE_COLUMNS}
    row.update(
        protocol="cues",
        dataset="OEQ",
        item_id="o1",
        cell=json.dumps({"variant": "P0"}),
        rep=0,
        turn=1,
        model="m",
        max_new_tokens=3,
        temperature=0.0,
        top_p=1.0,
        seed=1,
        messages="[]",
        response="Talk to them.",
        prompt_tokens=1,
        completion_tokens=1,
    )
    responses = tmp_path / "responses.parquet"
    pd.DataFrame([row]).to_parquet(responses)
    out = tmp_path / "labels.parquet"
    with pytest.raises(InputError, match=r"^judge\.model\.model: 'syps-test/no-judge' is neither"):
        pipeline.label(params, PROTOCOLS["cues"], "m", items, responses, out)
    assert runs.store_location() == str(tmp_path / ".cache" / "store.sqlite")
    # Nothing judged, nothing written (the label stage opens the store before it labels).
    assert not out.exists()
    with Store(Path(runs.store_location())) as store:
        assert store.count() == 0


_BUILDER = """
import os, sys, time
from pathlib import Path
from syps.core.backends.hf_resolve import build_once

root, me = Path(sys.argv[1]), sys.argv[2]
(root / f"ready-{me}").touch()
while len(list(root.glob("ready-*"))) < 2:  # both processes reach the check together
    time.sleep(0.01)

def build(tmp):
    tmp.mkdir()
    with open(root / "builds.log", "a") as log:
        log.write(me + "\\n")
    time.sleep(1)  # a conversion takes a while: long enough for the other to check too
    (tmp / "config.json").write_text(me)

print(build_once(root / "models" / "abc", build))
"""


def test_two_processes_build_the_model_copy_once(tmp_path: Path) -> None:
    """Two processes asking for the same converted model into an empty cache at the same
    moment: one converts, the other waits and uses its result (no second conversion, no
    failed rename over the first one's directory)."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _BUILDER, str(tmp_path), name],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("a", "b")
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err for _, err in outs]
    target = tmp_path / "models" / "abc"
    assert [out.strip() for out, _ in outs] == [str(target), str(target)]
    builders = (tmp_path / "builds.log").read_text().split()
    assert len(builders) == 1
    assert (target / "config.json").read_text() == builders[0]
    # Nothing half-built is left beside it.
    assert sorted(p.name for p in target.parent.iterdir()) == ["abc", "abc.lock"]


# --- the dtype -------------------------------------------------------------------------------


@pytest.fixture
def no_gpu(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A machine without a GPU driver (this one, in CI)."""
    import syps.core.backends.base as backends

    monkeypatch.setattr(backends, "_GPU_DRIVERS", (tmp_path / "no-driver",))


def test_the_dtype_is_in_the_key_unless_it_is_float32(
    hub: Path, tmp_path: Path, no_gpu: None
) -> None:
    snapshot(hub, HUB_ID, SHA_A)
    before = {"backend": "hf", "model_id": HUB_ID, "revision": SHA_A}  # a key from before dtype
    key = {
        dtype: generation_key(
            model_identity(ModelSpec(model=HUB_ID, revision=SHA_A, dtype=dtype), tmp_path, "m"),
            MESSAGES,
            8,
            GREEDY,
        )
        for dtype in ("auto", "float32", "bfloat16", "float16")
    }
    # float32, and auto on a CPU, keep the keys a store holds from before the dtype was a
    # setting; bf16 and fp16 answers are keyed apart from them and from each other.
    assert key["float32"] == key["auto"] == generation_key(before, MESSAGES, 8, GREEDY)
    assert len({key["float32"], key["bfloat16"], key["float16"]}) == 3
    bf16 = model_identity(ModelSpec(model=HUB_ID, revision=SHA_A, dtype="bfloat16"), tmp_path, "m")
    assert bf16 == {**before, "dtype": "bfloat16"}


def test_auto_is_bf16_on_gpus_and_fp32_on_the_cpu(
    tmp_path: Path, no_gpu: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    import syps.core.backends.base as backends
    from syps.core.backends import local_dtype

    assert local_dtype(ModelSpec(model="x")) == "float32"  # no driver: torch is not asked
    assert local_dtype(ModelSpec(model="x", devices=["cuda:0", "cuda:1"])) == "bfloat16"
    assert local_dtype(ModelSpec(model="x", devices=["cpu", "cpu"])) == "float32"
    assert local_dtype(ModelSpec(model="x", devices=["mps"])) == "float32"  # as the load does
    assert local_dtype(ModelSpec(model="x", devices=["cpu"], dtype="bfloat16")) == "bfloat16"
    assert local_dtype(ModelSpec(model="x", devices=["cuda:0"], dtype="float32")) == "float32"
    # A driver but no GPU torch can use (a CPU build of torch): float32.
    monkeypatch.setattr(backends, "_GPU_DRIVERS", (tmp_path,))
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert local_dtype(ModelSpec(model="x")) == "float32"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert local_dtype(ModelSpec(model="x")) == "bfloat16"


def test_the_vllm_key_holds_every_setting_that_changes_an_answer(
    hub: Path, tmp_path: Path, no_gpu: None
) -> None:
    """dtype (always named), tensor parallel size and eager mode are in a vllm key; memory share
    and max model length, which only decide what fits, are not; and a vllm answer is never
    served for an hf run of the same weights."""
    snapshot(hub, HUB_ID, SHA_A)

    def key(**kw: Any) -> str:
        spec = ModelSpec(model=HUB_ID, revision=SHA_A, backend="vllm", **kw)
        return generation_key(model_identity(spec, tmp_path, "m"), MESSAGES, 8, GREEDY)

    base = key()
    assert model_identity(
        ModelSpec(model=HUB_ID, revision=SHA_A, backend="vllm"), tmp_path, "m"
    ) == {
        "backend": "vllm",
        "model_id": HUB_ID,
        "revision": SHA_A,
        "dtype": "float32",  # auto on a machine without a GPU driver
        "tensor_parallel_size": "1",
    }
    assert key(dtype="float32") == base
    changed = [key(dtype="bfloat16"), key(dtype="float16"), key(tensor_parallel_size=2)]
    changed.append(key(enforce_eager=True))
    assert len({base, *changed}) == 5
    assert key(memory_share=0.5) == key(max_model_len=512) == key(batch_size=64) == base
    hf = ModelSpec(model=HUB_ID, revision=SHA_A)
    assert generation_key(model_identity(hf, tmp_path, "m"), MESSAGES, 8, GREEDY) != base
