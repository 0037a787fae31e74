"""The content-addressed response store and the keys it is addressed by.

The store's semantics (round trip, first value wins, chunked look-ups, counts, concurrent
writers, a writer killed with kill -9, copying between stores) are tested on both of its
backends: the SQLite file and a real PostgreSQL server (``location``; the PostgreSQL cases are
slow: a server for the session, a database each).

Every expected key below is the sha256 of a canonical JSON text written out by hand here
(sorted keys, no spaces, UTF-8 unescaped), following the fields that ``generation_key`` and
``judge_key`` document; nothing is checked against a second call of the same function alone.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from syps.core.backends import SamplingParams
from syps.core.io import InputError
from syps.core.store import Store, StoreError, generation_key, judge_key
from syps.core.stores import copy_store, open_store

IDENTITY = {"backend": "hf", "model_id": "m", "revision": "r"}
MESSAGES = '[{"content":"hi","role":"user"}]'
GREEDY = {"temperature": 0.0}


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# --- Store: round trip, first value wins, chunking, counts -----------------------------------


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.slow)])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A new, empty store's location: an SQLite file, or a database on the session's server."""
    if request.param == "sqlite":
        return str(tmp_path / "store.sqlite")
    return str(request.getfixturevalue("pg_database"))


def test_put_get_round_trip(location: str) -> None:
    recs: dict[str, dict[str, Any]] = {
        "k1": {"text": "héllo ✓", "prompt_tokens": 3, "completion_tokens": 2, "finish": "stop"},
        "k2": {"options": ["YES", "NO"], "logprobs": [-0.125, -2.5], "none": None, "ok": True},
        "k3": {"nested": {"a": [1, {"b": "c"}]}, "empty": ""},
        # The judge stores -inf for an option the model cannot produce: it must come back.
        "k4": {"options": ["YES", "NO"], "logprobs": [float("-inf"), -0.5]},
    }
    with open_store(location) as store:
        store.put_many("generation", [("k1", recs["k1"]), ("k3", recs["k3"])])
        store.put_many("judge", [("k2", recs["k2"]), ("k4", recs["k4"])])
        assert store.get_many(["k1", "k2", "k3", "k4"]) == recs
    # Durable: a fresh connection to the same store reads the same records.
    with open_store(location) as again:
        assert again.get_many(["k3", "k1", "k4", "k2"]) == recs
        assert again.count("generation") == 2 and again.count("judge") == 2


def test_put_many_empty_is_a_no_op(location: str) -> None:
    with open_store(location) as store:
        store.put_many("generation", [])
        assert store.count() == 0


def test_first_value_wins(location: str) -> None:
    with open_store(location) as store:
        store.put_many("generation", [("k", {"v": 1})])
        # Later batch with the same key, and a batch that repeats a key inside itself.
        store.put_many("generation", [("k", {"v": 2}), ("j", {"v": 10})])
        store.put_many("judge", [("i", {"v": 20}), ("i", {"v": 21}), ("k", {"v": 3})])
        assert store.get_many(["k", "j", "i"]) == {"k": {"v": 1}, "j": {"v": 10}, "i": {"v": 20}}
        # Three distinct keys; the ignored duplicate kept its first kind ("generation").
        assert store.count() == 3
        assert store.count("generation") == 2
        assert store.count("judge") == 1


def test_get_many_more_than_500_keys(location: str) -> None:
    # 1234 keys: on SQLite three chunks of at most 500 bound parameters (500 + 500 + 234); on
    # PostgreSQL one array.
    n = 1234
    with open_store(location) as store:
        store.put_many("generation", [(f"key{i:05d}", {"i": i}) for i in range(n)])
        wanted = [f"key{i:05d}" for i in range(n)]
        # Repeated and unknown keys in the request: repeats count once, unknowns are absent.
        got = store.get_many(wanted + wanted[:50] + [f"missing{i}" for i in range(600)])
        assert len(got) == n
        assert all(got[f"key{i:05d}"] == {"i": i} for i in range(n))
        # The last key of each chunk boundary is there (499, 500, 999, 1000, 1233).
        for i in (0, 499, 500, 999, 1000, 1233):
            assert got[f"key{i:05d}"] == {"i": i}


def test_count_overall_and_by_kind(location: str) -> None:
    with open_store(location) as store:
        assert store.count() == 0
        assert store.count("generation") == 0
        store.put_many("generation", [(f"g{i}", {"i": i}) for i in range(7)])
        store.put_many("judge", [(f"j{i}", {"i": i}) for i in range(3)])
        assert store.count() == 10
        assert store.count("generation") == 7
        assert store.count("judge") == 3
        assert store.count("other") == 0


def test_unknown_key_is_absent(location: str) -> None:
    with open_store(location) as store:
        assert store.get_many([]) == {}
        assert store.get_many(["nope"]) == {}
        store.put_many("generation", [("a", {"x": 1})])
        assert store.get_many(["nope", "a", "also-nope"]) == {"a": {"x": 1}}


def test_store_creates_parent_directories(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "er" / "store.sqlite"
    with Store(path) as store:
        store.put_many("generation", [("a", {"x": 1})])
    assert path.is_file()


def test_not_sqlite_names_path_and_says_move_aside(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    path.write_bytes(b"this is not an SQLite database, just some garbage bytes\n" * 64)
    with pytest.raises(StoreError) as e:
        Store(path)
    msg = str(e.value)
    assert msg.startswith(f"{path}: the response store is corrupt (file is not a database)")
    assert f"mv {path} {path}.corrupt" in msg
    assert "responses already in out/ are unaffected" in msg


def test_corrupt_record_names_key(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    Store(path).close()
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO records VALUES ('bad', 'generation', '{not json', 0)")
    with Store(path) as store, pytest.raises(InputError) as e:
        store.get_many(["bad"])
    assert str(e.value).startswith(f"{path}: record bad is corrupt (not a JSON object). ")
    assert f"mv {path} {path}.corrupt" in str(e.value)


# --- Store: concurrent writers ---------------------------------------------------------------


def _writer(location: str, worker: int, barrier: Any, shared: bool) -> None:
    """Write 200 records in 20 transactions of 10, after all workers are up: keys of this
    worker's own, or (``shared``) the same 200 keys as every other worker, valued by worker."""
    store = open_store(location)
    barrier.wait(timeout=120)
    for batch in range(20):
        store.put_many(
            "generation",
            [
                (f"w{0 if shared else worker}-{i:03d}", {"worker": worker, "i": i})
                for i in range(batch * 10, batch * 10 + 10)
            ],
        )
    store.close()


def _run_writers(location: str, shared: bool) -> None:
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(4)
    procs = [ctx.Process(target=_writer, args=(location, w, barrier, shared)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=240)
    # A worker that raised exits with code 1; one still running has exitcode None.
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]


@pytest.mark.slow
def test_concurrent_writers(location: str) -> None:
    _run_writers(location, shared=False)
    # 4 workers x 200 distinct keys = 800 records, every one with its own value.
    with open_store(location) as store:
        assert store.count() == 800
        assert store.count("generation") == 800
        keys = [f"w{w}-{i:03d}" for w in range(4) for i in range(200)]
        got = store.get_many(keys)
        assert got == {f"w{w}-{i:03d}": {"worker": w, "i": i} for w in range(4) for i in range(200)}


@pytest.mark.slow
def test_concurrent_writers_of_the_same_keys_store_each_once(location: str) -> None:
    # Four workers racing on the same 200 keys: 200 records, each one worker's whole value
    # (whichever committed it first), never a mix and never a second row.
    _run_writers(location, shared=True)
    with open_store(location) as store:
        assert store.count() == 200
        got = store.get_many([f"w0-{i:03d}" for i in range(200)])
        assert sorted(v["i"] for v in got.values()) == list(range(200))
        assert all(v["worker"] in range(4) and set(v) == {"worker", "i"} for v in got.values())


KILLED_WRITER = """
import sys
from syps.core.stores import open_store
store = open_store(sys.argv[1])
for batch in range(10_000):
    store.put_many("generation", [(f"b{batch:05d}-{i}", {"batch": batch}) for i in range(50)])
    print(batch, flush=True)  # committed: put_many returned
"""


@pytest.mark.slow
def test_a_writer_killed_with_kill_9_loses_nothing_committed(location: str) -> None:
    # The writer prints a batch's number once put_many has returned; killed after the 20th,
    # every printed batch is in the store whole (50 records), and the batch in flight, if any
    # reached the store, is whole too (one transaction): the count is a multiple of 50.
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED_WRITER, location], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    done = [int(proc.stdout.readline()) for _ in range(20)]
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    printed = done + [int(x) for x in proc.stdout.read().split()]
    with open_store(location) as store:
        n = store.count()
        assert n % 50 == 0 and n >= 50 * len(printed)
        got = store.get_many([f"b{b:05d}-{i}" for b in printed for i in range(50)])
        assert len(got) == 50 * len(printed)


# --- copying a store -------------------------------------------------------------------------


@pytest.mark.slow
def test_copy_between_sqlite_and_postgres_both_ways(tmp_path: Path, pg_database: str) -> None:
    laptop, lab = str(tmp_path / "pilot.sqlite"), pg_database
    with open_store(laptop) as a:
        a.put_many("generation", [("g1", {"text": "héllo"}), ("g2", {"text": "b"})])
        a.put_many("judge", [("j1", {"logprobs": [-0.5, float("-inf")]})])
    with open_store(lab) as b:
        b.put_many("generation", [("g2", {"text": "b"}), ("g9", {"text": "lab's"})])
        b.put_many("generation", [("j1", {"other": 1})])  # a key the lab holds otherwise
    with open_store(laptop) as a, open_store(lab) as b:
        done = copy_store(a, b)
        # 3 read: g1 new; g2 the same record; j1 held with another record, kept.
        assert (done.kinds, done.new, done.same, done.differ, done.total) == (
            {"generation": 2, "judge": 1},
            1,
            1,
            ["j1"],
            4,
        )
        assert b.get_many(["g1", "j1"]) == {"g1": {"text": "héllo"}, "j1": {"other": 1}}
        assert "***" in b.location and lab.split(":")[2].split("@")[0] not in b.location
    # Back into a new SQLite file: every record of the lab's, byte for byte and with its kind.
    back = str(tmp_path / "back.sqlite")
    with open_store(lab) as b, open_store(back) as c:
        done = copy_store(b, c)
        assert (done.new, done.same, done.differ, done.total) == (4, 0, [], 4)
        assert c.values(["g1", "g2", "g9", "j1"]) == b.values(["g1", "g2", "g9", "j1"])
        assert c.values(["j1"]) == {"j1": ("generation", '{"other":1}')}
    with open_store(back) as c, pytest.raises(StoreError, match="the same store"):
        copy_store(c, c)


# --- PostgreSQL: what the server refuses -----------------------------------------------------


@pytest.mark.slow
def test_postgres_refused_credentials_name_the_server_not_the_password(postgres: Any) -> None:
    url = postgres.url(password="not-" + postgres.password)
    with pytest.raises(StoreError) as e:
        open_store(url)
    msg = str(e.value)
    assert msg.startswith(f"postgresql://syps:***@127.0.0.1:{postgres.port}/syps: cannot connect")
    assert "password authentication failed" in msg and "\n" not in msg
    assert postgres.password not in msg


@pytest.mark.slow
def test_postgres_corrupt_record_and_foreign_table(pg_database: str) -> None:
    import psycopg

    with open_store(pg_database) as store:
        store.put_many("generation", [("ok", {"x": 1})])
    with psycopg.connect(pg_database, autocommit=True) as db:
        db.execute("INSERT INTO records VALUES ('bad', 'generation', '{not json', 0)")
    with open_store(pg_database) as store, pytest.raises(StoreError) as e:
        store.get_many(["ok", "bad"])
    assert str(e.value).endswith("record bad is corrupt (not a JSON object)")
    with psycopg.connect(pg_database, autocommit=True) as db:
        db.execute("DROP TABLE records")
        db.execute("CREATE TABLE records (key TEXT PRIMARY KEY, blob BYTEA)")
    with pytest.raises(StoreError, match=r"not a syps response store .*\['key', 'blob'\]"):
        open_store(pg_database)


# --- generation_key --------------------------------------------------------------------------


def test_generation_key_hand_computed() -> None:
    # canonical JSON: keys sorted (kind, max_new_tokens, messages, model, replicate, sampling),
    # separators "," and ":", the messages JSON embedded as a string (quotes escaped).
    text = (
        '{"kind":"generation","max_new_tokens":64,'
        '"messages":"[{\\"content\\":\\"hi\\",\\"role\\":\\"user\\"}]",'
        '"model":{"backend":"hf","model_id":"m","revision":"r"},'
        '"replicate":0,"sampling":{"temperature":0.0}}'
    )
    assert generation_key(IDENTITY, MESSAGES, 64, GREEDY) == _sha(text)
    # replicate defaults to 0; given explicitly it is the same key.
    assert generation_key(IDENTITY, MESSAGES, 64, GREEDY, replicate=0) == _sha(text)


def test_generation_key_hand_computed_sampling_and_unicode() -> None:
    sampling = SamplingParams(0.7, 0.9, 5).key_fields()
    identity = {"revision": "sha256:ab", "model_id": "Smöl", "backend": "hf"}  # any order
    text = (
        '{"kind":"generation","max_new_tokens":8,"messages":"café",'
        '"model":{"backend":"hf","model_id":"Smöl","revision":"sha256:ab"},'
        '"replicate":3,"sampling":{"seed":5,"temperature":0.7,"top_p":0.9}}'
    )
    assert generation_key(identity, "café", 8, sampling, replicate=3) == _sha(text)


def test_generation_key_changes_with_every_field() -> None:
    sampling = SamplingParams(0.7, 0.9, 5).key_fields()
    base = generation_key(IDENTITY, MESSAGES, 64, sampling, 0)
    variants = {
        "backend": generation_key({**IDENTITY, "backend": "openai"}, MESSAGES, 64, sampling),
        "model_id": generation_key({**IDENTITY, "model_id": "m2"}, MESSAGES, 64, sampling),
        "revision": generation_key({**IDENTITY, "revision": "r2"}, MESSAGES, 64, sampling),
        "messages": generation_key(IDENTITY, MESSAGES.replace("hi", "ho"), 64, sampling),
        "max_new_tokens": generation_key(IDENTITY, MESSAGES, 65, sampling),
        "temperature": generation_key(
            IDENTITY, MESSAGES, 64, SamplingParams(0.8, 0.9, 5).key_fields()
        ),
        "top_p": generation_key(IDENTITY, MESSAGES, 64, SamplingParams(0.7, 0.95, 5).key_fields()),
        "seed": generation_key(IDENTITY, MESSAGES, 64, SamplingParams(0.7, 0.9, 6).key_fields()),
        "replicate": generation_key(IDENTITY, MESSAGES, 64, sampling, 1),
        "greedy": generation_key(IDENTITY, MESSAGES, 64, GREEDY),
    }
    # Every change gives a key different from the base and from every other change.
    assert base not in variants.values()
    assert len(set(variants.values())) == len(variants)
    # An extra identity field (the openai backend's base_url) is part of the key as well.
    assert generation_key({**IDENTITY, "base_url": "http://x"}, MESSAGES, 64, sampling) != base


def test_generation_key_stable_for_equal_inputs() -> None:
    # Equal content built separately (different dict objects and insertion order) -> equal key.
    a = generation_key(dict(IDENTITY), MESSAGES, 64, {"temperature": 0.0})
    b = generation_key(
        {"revision": "r", "backend": "hf", "model_id": "m"},
        "".join(['[{"content":"hi",', '"role":"user"}]']),
        64,
        SamplingParams(0, 0.3, 99).key_fields(),
    )
    assert a == b == generation_key(IDENTITY, MESSAGES, 64, GREEDY)


# --- SamplingParams.key_fields ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("temperature", "top_p", "seed"), [(0.0, 1.0, 0), (0.0, 0.5, 123), (0, 0.9, 7)]
)
def test_key_fields_greedy_ignores_top_p_and_seed(
    temperature: float, top_p: float, seed: int
) -> None:
    fields = SamplingParams(temperature, top_p, seed).key_fields()
    assert fields == {"temperature": 0.0}
    assert isinstance(fields["temperature"], float)


def test_key_fields_sampling_has_all_three() -> None:
    assert SamplingParams(0.7, 0.9, 5).key_fields() == {"temperature": 0.7, "top_p": 0.9, "seed": 5}
    assert SamplingParams(1.0, 1.0, 0).key_fields() == {"temperature": 1.0, "top_p": 1.0, "seed": 0}


# --- judge_key -------------------------------------------------------------------------------


def test_judge_key_hand_computed() -> None:
    text = (
        '{"kind":"judge","messages":"[{\\"content\\":\\"hi\\",\\"role\\":\\"user\\"}]",'
        '"model":{"backend":"hf","model_id":"m","revision":"r"},"template":"t1"}'
    )
    assert judge_key(IDENTITY, "t1", MESSAGES) == _sha(text)


def test_judge_key_changes_with_template_messages_and_model() -> None:
    base = judge_key(IDENTITY, "t1", MESSAGES)
    others = [
        judge_key(IDENTITY, "t2", MESSAGES),
        judge_key(IDENTITY, "t1", MESSAGES.replace("hi", "ho")),
        judge_key({**IDENTITY, "revision": "r2"}, "t1", MESSAGES),
    ]
    assert base not in others
    assert len(set(others)) == 3
    # A judge key never equals a generation key: the records carry different "kind"s.
    assert base != generation_key(IDENTITY, MESSAGES, 64, GREEDY)
