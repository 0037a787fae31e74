"""The conversation core (syps.core.conversation) on the toy protocol of tests/toy_protocol.py.

Hand-derived counts: 3 items ("alpha?", "beta?", "skipme gamma?"), 2 tones.
- turn 1: 3 requests (one per item);
- turn 2: the two parseable items x 2 tones = 4 requests; "skipme" answers "SKIP ...", so its
  2 children are skipped rows with reason "parent unparsed".
A full cold run therefore generates 3 + 4 = 7 and writes 3 + 4 + 2 = 9 rows.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
from toy_protocol import PROTOCOL, ToyBackend, ToyParams, toy_generation, toy_text

from syps.core.backends import prompt_seed
from syps.core.config import ConfigError, ProtocolsParams
from syps.core.conversation import LazyBackend, check_sampling, conversation_json, converse
from syps.core.store import Store, generation_key

IDENTITY = {"backend": "hf", "model_id": "toy-model", "revision": "r0"}
SEED = 7


def run(
    store_path: Path, params: ToyParams, backend: ToyBackend | None = None
) -> tuple[pd.DataFrame, ToyBackend, LazyBackend]:
    backend = backend or ToyBackend()
    lazy = LazyBackend(None, Path("."), lambda spec, cache: backend)  # type: ignore[arg-type]
    items = PROTOCOL.load_items(params, Path("."), SEED)
    with Store(store_path) as store:
        rows, _ = converse(
            PROTOCOL,
            params,
            items,
            model="toy",
            identity=IDENTITY,
            seed=SEED,
            store=store,
            backend=lazy,
            judge=None,
        )
    return rows, backend, lazy


def turns_sent(backend: ToyBackend) -> list[int]:
    """The turn of each request the backend was sent (turn 2 has 3 messages)."""
    return [1 if len(r.messages) == 1 else 2 for r in backend.sent]


def test_cold_run_rows_lineage_and_skipped(tmp_path: Path) -> None:
    params = ToyParams()
    rows, backend, _ = run(tmp_path / "s.sqlite", params)
    assert len(backend.sent) == 7 and turns_sent(backend).count(2) == 4
    assert len(rows) == 9
    skipped = rows[rows["skipped"] != ""]
    assert list(skipped["item_id"]) == ["q2", "q2"]
    assert set(skipped["skipped"]) == {"parent unparsed"}
    assert [json.loads(c)["tone"] for c in skipped["cell"]] == ["plain", "firm"]
    # A skipped row points at its parent, which exists and says SKIP.
    parent = rows[rows["store_key"] == skipped["parent_key"].iloc[0]]
    assert parent["response"].iloc[0].startswith("SKIP ")
    # Turn 2 holds the exact turn-1 text, replayed verbatim, and points at the parent's key.
    t2 = rows[(rows["turn"] == 2) & (rows["skipped"] == "")]
    for r in t2.itertuples():
        msgs = json.loads(r.messages)
        p = rows[rows["store_key"] == r.parent_key].iloc[0]
        assert msgs[0]["content"] == json.loads(p["messages"])[0]["content"]
        assert msgs[1] == {"role": "assistant", "content": p["response"]}
        assert msgs[2]["content"] == f"I object ({json.loads(r.cell)['tone']})."
    # The key is the store's generation key over the full conversation and the rep.
    r0 = t2.iloc[0]
    assert r0["store_key"] == generation_key(
        IDENTITY, conversation_json(json.loads(r0["messages"])), 64, {"temperature": 0.0}, 0
    )
    assert set(rows.columns) >= {"protocol", "dataset", "item_id", "cell", "rep", "turn"}


def test_turn1_edit_regenerates_its_descendants_turn2_edit_only_turn2_revert_nothing(
    tmp_path: Path,
) -> None:
    store = tmp_path / "s.sqlite"
    base = ToyParams()
    run(store, base)
    # Turn-1 edit: 3 new turn-1 answers and their 4 parseable children; nothing else.
    _, b, _ = run(store, replace(base, t1="Question: {question}"))
    assert turns_sent(b) == [1, 1, 1, 2, 2, 2, 2]
    # Turn-2 edit: the turn-1 answers are served; only the 4 turn-2 requests are new.
    _, b, _ = run(store, replace(base, t2="No, I disagree ({tone})."))
    assert turns_sent(b) == [2, 2, 2, 2]
    # One tone edited: only that tone's 2 children.
    _, b, _ = run(store, replace(base, tones=["plain", "very firm"]))
    assert turns_sent(b) == [2, 2]
    # Reverting every edit generates nothing and never loads the model.
    rows, b, lazy = run(store, base)
    assert b.sent == [] and not lazy.loaded
    with Store(store) as s:
        assert s.count("generation") == 7 + 7 + 4 + 2


def test_repetitions_fan_out_with_per_request_seeds(tmp_path: Path) -> None:
    params = replace(ToyParams(questions=["alpha?"]), generation=toy_generation(3, 0.7))
    rows, backend, _ = run(tmp_path / "s.sqlite", params)
    # 1 item x 3 reps at turn 1, each continued by its own 2 children: 3 + 6 = 9 requests.
    assert len(backend.sent) == 9
    t1 = rows[rows["turn"] == 1]
    assert list(t1["rep"]) == [0, 1, 2] and t1["store_key"].nunique() == 3
    t2 = rows[rows["turn"] == 2]
    for r in t2.itertuples():  # a child continues the repetition of its parent
        assert rows.loc[rows["store_key"] == r.parent_key, "rep"].iloc[0] == r.rep
    # Each text carries the seed derived from its own key: independent of the batch.
    for r in rows.itertuples():
        assert r.response == toy_text(json.loads(r.messages), prompt_seed(SEED, r.store_key))
    # Another batch composition (one request per batch) gives the same rows.
    again, _, _ = run(tmp_path / "other.sqlite", params, ToyBackend(batch=1))
    pd.testing.assert_frame_equal(rows, again)


def test_greedy_with_repetitions_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"protocols.toy.generation: reps = 3 with temperature 0"):
        check_sampling(PROTOCOL, toy_generation(3, 0.0), "protocols.toy")
    check_sampling(PROTOCOL, toy_generation(1, 0.0), "protocols.toy")  # one greedy rep is fine
    check_sampling(PROTOCOL, toy_generation(3, 0.7), "protocols.toy")


def test_protocols_params_are_typed_per_protocol(monkeypatch: pytest.MonkeyPatch) -> None:
    import syps.protocols

    monkeypatch.setattr(syps.protocols, "PROTOCOLS", {"toy": "toy_protocol"})
    parsed = ProtocolsParams.syps_parse({"toy": {"t2": "x {tone}"}}, "protocols")
    assert parsed["toy"] == ToyParams(t2="x {tone}") and parsed.enabled() == ["toy"]
    with pytest.raises(ConfigError, match=r"protocols.nosuch: unknown protocol"):
        ProtocolsParams.syps_parse({"toy": {}, "nosuch": {}}, "protocols")
    with pytest.raises(ConfigError, match=r"protocols.toy: missing; every protocol needs"):
        ProtocolsParams.syps_parse({}, "protocols")
    with pytest.raises(ConfigError, match=r"protocols.toy: unknown key\(s\) \['bogus'\]"):
        ProtocolsParams.syps_parse({"toy": {"bogus": 1}}, "protocols")
    with pytest.raises(ConfigError, match=r"protocols.toy.generation: reps = 2 with temp"):
        ProtocolsParams.syps_parse({"toy": {"generation": {"reps": 2}}}, "protocols")
    off = ProtocolsParams.syps_parse({"toy": {"enabled": False}}, "protocols")
    assert off.enabled() == []


# A script that runs the toy protocol over a store, its backend pausing before turn 2 when
# asked: the test kills it there with SIGKILL.
SCRIPT = """
import sys, time, json
from dataclasses import replace
from pathlib import Path
sys.path.insert(0, {tests!r})
import toy_protocol as t
from syps.core.conversation import LazyBackend, converse
from syps.core.store import Store

pause = sys.argv[2] == "pause"
class Pausing(t.ToyBackend):
    def generate(self, requests, sampling, on_results=None):
        if pause and len(requests[0].messages) > 1:
            Path(sys.argv[3]).write_text("turn 2")
            time.sleep(60)
        return super().generate(requests, sampling, on_results)

params = replace(t.ToyParams(), generation=t.toy_generation(2, 0.7))
backend = Pausing()
with Store(Path(sys.argv[1])) as store:
    rows, _ = converse(t.PROTOCOL, params, t.PROTOCOL.load_items(params, Path("."), 7),
        model="toy", identity={identity!r}, seed=7, store=store,
        backend=LazyBackend(None, Path("."), lambda s, c: backend), judge=None)
rows.to_json(sys.argv[3] + ".rows.json")
print(json.dumps([len(r.messages) for r in backend.sent]))
"""


def test_kill_9_between_turns_resumes_with_identical_outputs(tmp_path: Path) -> None:
    script = tmp_path / "run.py"
    tests = str(Path(__file__).resolve().parent)
    script.write_text(SCRIPT.format(tests=tests, identity=IDENTITY), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(tests).parent), tests])}
    mark = tmp_path / "mark"
    proc = subprocess.Popen(
        [sys.executable, str(script), str(tmp_path / "s.sqlite"), "pause", str(mark)],
        env=env,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while not mark.exists():
        assert proc.poll() is None and time.monotonic() < deadline, "never reached turn 2"
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    with Store(tmp_path / "s.sqlite") as s:
        assert s.count("generation") == 3 * 2  # every turn-1 repetition was stored
    resumed = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "s.sqlite"), "go", str(mark)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    # The resumed run generates turn 2 only: 2 parseable items x 2 tones x 2 reps.
    assert json.loads(resumed.stdout) == [3] * 8
    fresh = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "fresh.sqlite"), "go", str(tmp_path / "f")],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(fresh.stdout) == [1] * 6 + [3] * 8
    a = pd.read_json(str(mark) + ".rows.json")
    b = pd.read_json(str(tmp_path / "f") + ".rows.json")
    pd.testing.assert_frame_equal(a, b)
