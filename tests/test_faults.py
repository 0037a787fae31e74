"""Damaged files: a corrupt or truncated store, parquet, lock or model cache is an error that
names the file and how to recover, and nothing half-written is used or overwritten.

(kill -9 in the middle of a stage, and resuming from the store, is tests/test_resume_kill.py.)
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import read_params
from typer.testing import CliRunner

import syps.core.backends
import syps.core.backends.hf_resolve as hf_resolve
from syps.cli import app
from syps.core import provenance
from syps.core.backends import BackendEntry
from syps.core.backends.hf_resolve import check_plain_copy, plain_copy_dir, resolve
from syps.core.config import ModelSpec
from syps.core.io import InputError, read_parquet, write_parquet
from syps.core.store import Store, StoreError
from syps.protocols.cues.data import fetch_elephant

REPO = Path(__file__).resolve().parents[1]
BUILTIN = REPO / "data" / "builtin"
MODEL = "smollm2-135m"
runner = CliRunner()


def _move_aside(path: Path) -> str:
    return f"mv {path} {path}.corrupt"


def _assert_store_hint(msg: str, path: Path) -> None:
    assert msg.startswith(f"{path}: ")
    assert _move_aside(path) in msg
    assert "responses already in out/ are unaffected" in msg
    assert "what is missing is generated again" in msg


def _filled_store(path: Path, n: int = 2000) -> dict[str, dict[str, Any]]:
    """A store of ``n`` records of ~500 bytes, checkpointed into the main file (no -wal)."""
    recs = {f"k{i:05d}": {"text": f"{i} " + "x" * 500, "i": i} for i in range(n)}
    with Store(path) as store:
        for start in range(0, n, 500):
            store.put_many("generation", list(recs.items())[start : start + 500])
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return recs


# --- the response store ----------------------------------------------------------------------


def test_store_of_random_bytes(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    junk = np.random.default_rng(0).bytes(8192)
    path.write_bytes(junk)
    with pytest.raises(StoreError) as e:
        Store(path)
    assert str(e.value).startswith(
        f"{path}: the response store is corrupt (file is not a database)"
    )
    _assert_store_hint(str(e.value), path)
    assert path.read_bytes() == junk  # left as it was, for whoever looks into it


def test_store_truncated_to_half(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    _filled_store(path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    # SQLite compares the page count in the header with the file size when it opens the file.
    with pytest.raises(StoreError) as e:
        Store(path)
    msg = str(e.value)
    assert msg.startswith(
        f"{path}: the response store is corrupt (database disk image is malformed)"
    )
    _assert_store_hint(msg, path)
    assert path.stat().st_size == len(data) // 2


def test_store_damaged_page_found_when_read(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    recs = _filled_store(path)
    # Header and schema intact, so opening succeeds; a page in the back half is garbage.
    with open(path, "r+b") as f:
        f.seek(-8 * 4096, os.SEEK_END)
        f.write(b"\xff" * 4096)
    with Store(path) as store:
        with pytest.raises(StoreError) as e:
            store.count()
        _assert_store_hint(str(e.value), path)
        assert "malformed" in str(e.value)
        # A lookup that meets the damaged page raises too: never a partial result.
        with pytest.raises(StoreError):
            store.get_many(list(recs))


def test_zero_byte_store_is_an_empty_store(tmp_path: Path) -> None:
    # SQLite's own rule: a zero-byte file is an empty database (sqlite3.connect makes one while a
    # new store is created, and a second process may open it at that moment). Nothing can be
    # used from it: every prompt is a miss and is generated again.
    path = tmp_path / "store.sqlite"
    path.write_bytes(b"")
    with Store(path) as store:
        assert store.count() == 0
        assert store.get_many(["k"]) == {}
        store.put_many("generation", [("k", {"v": 1})])
    with Store(path) as store:
        assert store.get_many(["k"]) == {"k": {"v": 1}}


def test_foreign_database_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE people (name TEXT)")
        db.execute("INSERT INTO people VALUES ('ada')")
    before = path.read_bytes()
    with pytest.raises(StoreError) as e:
        Store(path)
    msg = str(e.value)
    assert msg.startswith(
        f"{path}: not a syps response store (tables ['people']; expected one table, records, "
        "with columns key, kind, value, created). "
    )
    _assert_store_hint(msg, path)
    # Not switched to WAL, no records table added.
    assert path.read_bytes() == before
    assert not Path(f"{path}-wal").exists()


def test_records_table_of_another_shape_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE records (key TEXT PRIMARY KEY, value TEXT)")
    with pytest.raises(StoreError) as e:
        Store(path)
    assert str(e.value).startswith(
        f"{path}: not a syps response store (columns ['key', 'value']; expected one table"
    )
    _assert_store_hint(str(e.value), path)


@pytest.mark.parametrize(
    "value",
    [
        '\'{"text": "cut sh\'',  # truncated JSON
        "'[1, 2]'",  # JSON, but not an object
        "'null'",
        "CAST(X'7b2274223a22ff227d' AS TEXT)",  # {"t":"\xff"}: not UTF-8
    ],
)
def test_corrupt_record_names_its_key_and_nothing_partial(tmp_path: Path, value: str) -> None:
    path = tmp_path / "store.sqlite"
    with Store(path) as store:
        store.put_many("generation", [("good", {"v": 1})])
    with sqlite3.connect(path) as db:
        db.execute(f"INSERT INTO records VALUES ('bad', 'generation', {value}, 0)")
    with Store(path) as store:
        assert store.get_many(["good"]) == {"good": {"v": 1}}
        with pytest.raises(StoreError) as e:
            store.get_many(["good", "bad"])
    msg = str(e.value)
    assert msg.startswith(f"{path}: record bad is corrupt (not a JSON object)")
    _assert_store_hint(msg, path)


def test_store_locked_past_its_timeout_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    Store(path).close()
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process in the middle of a write
    try:
        with Store(path, timeout_s=0.05) as store, pytest.raises(StoreError) as e:
            store.put_many("generation", [("k", {"v": 1})])
    finally:
        other.close()
    # Not damage: no advice to move the store aside.
    assert str(e.value) == f"{path}: cannot use the response store (database is locked)"


KILLED_WRITER = """
import os, signal, sys
from pathlib import Path
from syps.core.store import Store

store = Store(Path(sys.argv[1]))
for b in range(5):
    store.put_many("generation", [(f"c{b}-{i}", {"i": i}) for i in range(10)])
store._db.execute("BEGIN IMMEDIATE")
store._db.execute("INSERT INTO records VALUES ('uncommitted', 'generation', '{}', 0)")
os.kill(os.getpid(), signal.SIGKILL)
"""


def _killed_writer(path: Path) -> None:
    """A process that commits 5 batches of 10, starts a sixth and is killed with SIGKILL."""
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.run([sys.executable, "-c", KILLED_WRITER, str(path)], env=env, timeout=60)
    assert proc.returncode == -9
    # What it leaves: the main file, and the committed batches only in the -wal beside it.
    assert Path(f"{path}-wal").stat().st_size > 0
    assert Path(f"{path}-shm").exists()


def test_wal_left_by_a_killed_writer_is_not_damage(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    _killed_writer(path)
    with Store(path) as store:
        # 5 committed batches x 10 records; the uncommitted insert is gone.
        assert store.count() == 50
        assert store.get_many(["c4-9", "uncommitted"]) == {"c4-9": {"i": 9}}
        store.put_many("generation", [("after", {"i": -1})])
        assert store.count() == 51


def test_moving_the_main_file_aside_is_enough(tmp_path: Path) -> None:
    # The recovery says `mv store.sqlite store.sqlite.corrupt` and nothing about the -wal: a new,
    # empty store beside an old -wal must not replay that -wal's pages into itself.
    path = tmp_path / "store.sqlite"
    _killed_writer(path)
    path.rename(f"{path}.corrupt")
    with Store(path) as store:
        assert store.count() == 0
        store.put_many("generation", [("new", {"i": 1})])
    with Store(path) as store:
        assert store.get_many(["new", "c0-0"]) == {"new": {"i": 1}}


# --- stage outputs (parquet) -----------------------------------------------------------------

RECOVERY = "rerun `dvc repro` (DVC reruns the stage that writes it, or restores it from its cache)"


def _table() -> pd.DataFrame:
    return pd.DataFrame({"item_id": [f"i{k}" for k in range(50)], "x": np.arange(50.0)})


def _assert_parquet_hint(msg: str, path: Path) -> None:
    assert msg.startswith(f"{path}: ")
    assert "it is a stage output: " + RECOVERY + ", or delete it" in msg


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        (lambda b: b"", "Parquet file size is 0 bytes"),
        (lambda b: b[: len(b) // 2], "Parquet magic bytes not found in footer"),
        (lambda b: b[:-1], "Parquet magic bytes not found in footer"),
        (lambda b: b"dataset,item_id\nSS,abc\n", "Parquet magic bytes not found in footer"),
    ],
    ids=["zero-byte", "half", "last-byte-cut", "csv"],
)
def test_unreadable_parquet(tmp_path: Path, damage: Any, why: str) -> None:
    path = tmp_path / "items.parquet"
    write_parquet(_table(), path)
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(InputError) as e:
        read_parquet(path, ["item_id"])
    msg = str(e.value)
    assert msg.startswith(f"{path}: not a readable parquet file ({why}")
    # pyarrow's own message names the file again; it is cut off.
    assert "Could not open Parquet input source" not in msg
    _assert_parquet_hint(msg, path)


def test_parquet_missing_columns(tmp_path: Path) -> None:
    path = tmp_path / "items.parquet"
    write_parquet(_table(), path)
    with pytest.raises(InputError) as e:
        read_parquet(path, ["item_id", "situation", "dataset"])
    msg = str(e.value)
    assert msg.startswith(
        f"{path}: missing column(s) ['situation', 'dataset']; found ['item_id', 'x']"
    )
    _assert_parquet_hint(msg, path)


def test_parquet_bit_flip_is_caught_by_page_checksums(tmp_path: Path) -> None:
    # 4000 random doubles: the file is almost all one data page that snappy cannot shrink, so a
    # flipped bit a third of the way in changes one value.
    df = pd.DataFrame({"x": np.random.default_rng(0).random(4000)})
    plain, checked = tmp_path / "plain.parquet", tmp_path / "checked.parquet"
    df.to_parquet(plain, index=False)
    write_parquet(df, checked)
    for path in (plain, checked):
        data = bytearray(path.read_bytes())
        data[len(data) // 3] ^= 0x10
        path.write_bytes(bytes(data))
    # Without checksums the flip reads back as a different number, with no error at all ...
    assert not read_parquet(plain).equals(df)
    # ... with them (what write_parquet writes) it is an error.
    with pytest.raises(InputError) as e:
        read_parquet(checked)
    assert "CRC checksum verification failed" in str(e.value)
    _assert_parquet_hint(str(e.value), checked)


def test_parquet_without_checksums_still_reads(tmp_path: Path) -> None:
    # Outputs written before write_parquet stored checksums stay readable.
    path = tmp_path / "old.parquet"
    _table().to_parquet(path, index=False)
    pd.testing.assert_frame_equal(read_parquet(path, ["item_id"]), _table())


def test_read_parquet_recovery_is_the_callers(tmp_path: Path) -> None:
    path = tmp_path / "labels.parquet"
    path.write_bytes(b"")
    with pytest.raises(InputError) as e:
        read_parquet(path, recovery="write it again")
    assert str(e.value) == (
        f"{path}: not a readable parquet file (Parquet file size is 0 bytes); write it again"
    )


# --- lock files ------------------------------------------------------------------------------

URL = "https://example.org/elephant/OEQ.csv"
SHA = hashlib.sha256(b"x").hexdigest()


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "not JSON: Expecting value"),
        ('{"' + URL + '": "' + SHA[:20], "not JSON: Unterminated string"),
        ("[]", "a JSON list, not an object {url: sha256}"),
        (json.dumps({URL: SHA[:63]}), f"{URL}: '{SHA[:63]}' is not a sha256"),
        (json.dumps({URL: SHA.upper()}), f"{URL}: '{SHA.upper()}' is not a sha256"),
        (json.dumps({URL: "z" * 64}), f"{URL}: '{'z' * 64}' is not a sha256"),
        (json.dumps({URL: None}), f"{URL}: None is not a sha256"),
    ],
    ids=["empty", "truncated", "list", "short-sha", "upper-hex", "non-hex", "null"],
)
def test_corrupt_elephant_lock(tmp_path: Path, text: str, why: str) -> None:
    lock = tmp_path / "elephant.lock.json"
    lock.write_text(text, encoding="utf-8")
    cache = tmp_path / "cache"
    with pytest.raises(InputError) as e:
        # Never contacted: the lock is read before anything is downloaded.
        fetch_elephant({"OEQ": "http://127.0.0.1:9/OEQ.csv"}, cache, lock)
    msg = str(e.value)
    assert msg.startswith(f"{lock}: corrupt lock file ({why}")
    assert f"restore it with `git checkout -- {lock}`" in msg
    assert "or delete it to pin whatever the next download gives" in msg
    assert "only if you trust that download" in msg
    # The damaged lock is kept as it was (not re-pinned), and nothing was fetched.
    assert lock.read_text(encoding="utf-8") == text
    assert not cache.exists()


# The pinned md5 that data.dvc records; provenance.data_md5 (not owned here) reads it.
DATA_DVC = (REPO / "data.dvc").read_text(encoding="utf-8")
_MD5_AT = DATA_DVC.index("md5: ") + len("md5: ")


@pytest.mark.parametrize(
    "cut", [0, DATA_DVC.index("outs:") + 2, _MD5_AT - 6], ids=["empty", "in-outs", "before-md5"]
)
def test_truncated_data_dvc_names_file(tmp_path: Path, cut: int) -> None:
    path = tmp_path / "data.dvc"
    path.write_text(DATA_DVC[:cut], encoding="utf-8")
    with pytest.raises(InputError) as e:
        provenance.data_md5(path)
    assert str(e.value).startswith(f"{path}: cannot read the recorded md5")


@pytest.mark.parametrize("cut", [_MD5_AT, _MD5_AT + 10], ids=["no-md5", "md5-cut"])
def test_data_dvc_cut_inside_the_md5(tmp_path: Path, cut: int) -> None:
    path = tmp_path / "data.dvc"
    path.write_text(DATA_DVC[:cut], encoding="utf-8")
    with pytest.raises(InputError, match="is not an md5; restore it with `git checkout --"):
        provenance.data_md5(path)


# --- the model cache -------------------------------------------------------------------------


def _local_model(tmp_path: Path) -> ModelSpec:
    model = tmp_path / "model"
    model.mkdir()
    (model / "model.safetensors").write_bytes(b"weights")
    return ModelSpec(model=str(model))


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "not JSON"),
        ('{"/m/model.safetensors:7:1": "ab', "not JSON"),
        ('{"/m/model.safetensors:7:1": "abc"}', "not an object of sha256 hashes"),
        ("[]", "not an object of sha256 hashes"),
    ],
    ids=["empty", "truncated", "short-hash", "list"],
)
def test_corrupt_hash_memo(tmp_path: Path, text: str, why: str) -> None:
    cache = tmp_path / "cache"
    memo = cache / "hashes.json"
    memo.parent.mkdir()
    memo.write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as e:
        resolve(_local_model(tmp_path), cache)
    msg = str(e.value)
    assert msg.startswith(f"{memo}: corrupt weights-hash memo ({why}")
    assert msg.endswith("; delete it: the next run hashes the weights again")
    assert memo.read_text(encoding="utf-8") == text  # not overwritten


def test_hash_memo_round_trip(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    spec = _local_model(tmp_path)
    first = resolve(spec, cache)
    memo = json.loads((cache / "hashes.json").read_text(encoding="utf-8"))
    assert list(memo.values()) == [hashlib.sha256(b"weights").hexdigest()]
    assert resolve(spec, cache) == first


def _safetensors(tensors: dict[str, bytes]) -> bytes:
    """A safetensors file of uint8 tensors: 8-byte little-endian header length, JSON header
    (padded with spaces to a multiple of 8), then the data."""
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, data in tensors.items():
        header[name] = {
            "dtype": "U8",
            "shape": [len(data)],
            "data_offsets": [offset, offset + len(data)],
        }
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    return len(text).to_bytes(8, "little") + text + b"".join(tensors.values())


@dataclass(frozen=True)
class Converted:
    cache: Path
    target: Path
    spec: ModelSpec


@pytest.fixture
def converted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Converted]:
    """A stand-in for the embedded GGUF and its converted plain copy in a fresh cache."""
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF stand-in")
    monkeypatch.setattr(hf_resolve, "embedded_gguf", lambda name: gguf)
    cache = tmp_path / "cache"
    target = plain_copy_dir(cache, hashlib.sha256(b"GGUF stand-in").hexdigest())
    target.mkdir(parents=True)
    (target / "config.json").write_text('{"model_type": "llama"}', encoding="utf-8")
    (target / "tokenizer.json").write_text('{"model": {}}', encoding="utf-8")
    (target / "chat_template.jinja").write_text("{{ messages }}", encoding="utf-8")
    (target / "model.safetensors").write_bytes(_safetensors({"a": b"\x01" * 24, "b": b"\x02" * 8}))
    yield Converted(cache, target, ModelSpec(model="embedded:smollm2"))


def test_intact_converted_copy_resolves(converted: Converted) -> None:
    r = resolve(converted.spec, converted.cache)
    assert r.gguf and r.revision == "sha256:" + hashlib.sha256(b"GGUF stand-in").hexdigest()
    check_plain_copy(converted.target)


def _cut(path: Path, n: int) -> None:
    path.write_bytes(path.read_bytes()[:n])


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        (lambda t: _cut(t / "model.safetensors", -5), "model.safetensors: "),
        (lambda t: _cut(t / "model.safetensors", 4), "model.safetensors: header length -1"),
        (lambda t: _cut(t / "model.safetensors", 40), "model.safetensors: header length"),
        (
            lambda t: (t / "model.safetensors").write_bytes(
                (t / "model.safetensors").read_bytes() + b"\x00" * 8
            ),
            "model.safetensors: ",
        ),
        (lambda t: _cut(t / "tokenizer.json", 5), "tokenizer.json is not valid JSON"),
        (lambda t: _cut(t / "chat_template.jinja", 0), "chat_template.jinja is empty"),
        (lambda t: (t / "config.json").unlink(), "no config.json or no *.safetensors"),
        (lambda t: (t / "model.safetensors").unlink(), "no config.json or no *.safetensors"),
    ],
    ids=[
        "weights-cut",
        "weights-4-bytes",
        "weights-in-header",
        "weights-too-long",
        "tokenizer-cut",
        "template-empty",
        "no-config",
        "no-weights",
    ],
)
def test_damaged_converted_copy(converted: Converted, damage: Any, why: str) -> None:
    damage(converted.target)
    with pytest.raises(InputError) as e:
        resolve(converted.spec, converted.cache)
    msg = str(e.value)
    target = converted.target
    assert msg.startswith(f"{target}: the converted model copy is damaged ({why}")
    assert msg.endswith(f"; delete it (rm -r {target}): the next run converts again (~20 s)")


def test_safetensors_size_mismatch_names_both_sizes(converted: Converted) -> None:
    weights = converted.target / "model.safetensors"
    size = weights.stat().st_size
    _cut(weights, size - 5)
    with pytest.raises(InputError, match=f"{size - 5} bytes where the header needs {size}"):
        check_plain_copy(converted.target)


@pytest.mark.slow
def test_real_conversion_passes_the_check(model_cache: Path) -> None:
    pytest.importorskip("torch")
    from syps.core.backends.hf import HFBackend

    spec = ModelSpec(model="embedded:smollm2")
    HFBackend.tokenizer_only(spec, model_cache)  # converts once per session (~20 s)
    digest = resolve(spec, model_cache).revision.removeprefix("sha256:")
    check_plain_copy(plain_copy_dir(model_cache, digest))


# --- through the command line: exit 2, "error: <file>: ...", no output written ---------------


@dataclass(frozen=True)
class Project:
    root: Path
    params: Path
    items: Path
    lint: Path


@pytest.fixture
def project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, converted: Converted
) -> Iterator[Project]:
    """SyPS's fetch and variants (the lint) on one item per dataset, through the CLI, in a
    fresh project root.

    The embedded model resolves to the stand-in GGUF; loading any model fails the test.
    """
    root = tmp_path / "root"
    root.mkdir()
    monkeypatch.chdir(root)
    monkeypatch.setenv("DVC_ROOT", str(root))
    monkeypatch.setenv("SYPS_CACHE_DIR", str(converted.cache))

    def no_load(spec: ModelSpec, cache_dir: Path) -> Any:
        raise AssertionError("a model was loaded")

    hf = syps.core.backends.BACKENDS["hf"]
    monkeypatch.setitem(syps.core.backends.BACKENDS, "hf", BackendEntry(hf.identity, no_load))
    raw = read_params()
    data = raw["protocols"]["cues"]["data"]
    data["limit"] = 1
    data["files"] = {
        "OEQ": str(BUILTIN / "OEQ.csv"),
        "AITA-YTA": str(BUILTIN / "AITA.csv"),
        "SS": str(BUILTIN / "SS.csv"),
    }
    params = root / "params.yaml"
    params.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    d = root / "out" / "protocols" / "cues"
    items, lint = d / "items.parquet", d / "lint.json"
    sent = d / "conversations.parquet"
    for args in (["fetch", params, "cues", items], ["variants", params, "cues", items, lint, sent]):
        result = runner.invoke(app, ["stage", *(str(a) for a in args)])
        assert result.exit_code == 0, result.output
    yield Project(root, params, items, lint)


def _generate(p: Project) -> tuple[Any, Path]:
    out = p.root / "out" / "protocols" / "cues" / "responses" / f"{MODEL}.parquet"
    sent = p.items.parent / "conversations.parquet"
    args = ["stage", "generate", str(p.params), "cues", MODEL, str(p.items), str(sent), str(out)]
    result = runner.invoke(app, args)
    return result, out


def test_cli_corrupt_store(project: Project) -> None:
    store = project.root / ".cache" / "store.sqlite"
    store.parent.mkdir(exist_ok=True)
    store.write_bytes(b"\x00garbage" * 1000)
    result, out = _generate(project)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"error: {store}: the response store is corrupt")
    _assert_store_hint(result.stderr.removeprefix("error: ").strip(), store)
    assert not out.exists()
    assert store.read_bytes() == b"\x00garbage" * 1000


def test_cli_truncated_stage_input(project: Project) -> None:
    _cut(project.items, 100)
    out = project.root / "out" / "lint2.json"
    sent = out.parent / "conversations2.parquet"
    args = ["stage", "variants", str(project.params), "cues", str(project.items), str(out)]
    args.append(str(sent))
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"error: {project.items}: not a readable parquet file")
    assert RECOVERY in result.stderr
    assert not out.exists()


def test_cli_damaged_model_copy(project: Project, converted: Converted) -> None:
    _cut(converted.target / "model.safetensors", 100)
    result, out = _generate(project)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(
        f"error: {converted.target}: the converted model copy is damaged"
    )
    assert "the next run converts again" in result.stderr
    assert not out.exists()


def test_cli_corrupt_elephant_lock(project: Project) -> None:
    raw = yaml.safe_load(project.params.read_text(encoding="utf-8"))
    data = raw["protocols"]["cues"]["data"]
    data["source"] = "elephant"
    data["elephant"]["urls"] = {d: f"http://127.0.0.1:9/{d}.csv" for d in data["datasets"]}
    project.params.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    lock = project.root / data["elephant"]["lock"]
    lock.write_text('{"http://127.0.0.1:9/OEQ.csv": "ab', encoding="utf-8")
    out = project.root / "out" / "items2.parquet"
    result = runner.invoke(app, ["stage", "fetch", str(project.params), "cues", str(out)])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"error: {lock}: corrupt lock file (not JSON")
    assert f"git checkout -- {lock}" in result.stderr
    assert not out.exists()
