"""The simulated user's turns in the conversation core (``syps.core.conversation``, role
``simulator``): through the response store like the target's, keyed by the simulator's identity.

The toy protocol with a simulated user (tests/toy_protocol.py, ``SIM_PROTOCOL``), through
``converse``: 3 items ("alpha?", "beta?", "skipme gamma?"), 2 tones.

- turn 1 (target): 3 requests;
- turn 2 (simulator): the two parseable items x 2 tones = 4 simulator requests; "skipme"'s 2
  are skipped rows (role simulator);
- turn 3 (target): one per simulator turn, 4.

A cold run: the target generates 3 + 4 = 7, the simulator 4; 3 + 4 + 2 + 4 = 13 rows.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
from conftest import read_params
from fakes import FakeModels
from toy_protocol import SIM_PROTOCOL, ToyBackend, ToyParams, register_toy

from syps.core.backends import SamplingParams
from syps.core.config import ConfigError, ModelSpec, SimulatorParams
from syps.core.conversation import LazyBackend, Role, TurnCounts, converse, simulator_role
from syps.core.io import InputError
from syps.core.messages import conversation_json
from syps.core.params import params_from
from syps.core.store import Store, generation_key
from syps.protocols import PROTOCOLS

IDENTITY = {"backend": "hf", "model_id": "toy-model", "revision": "r0"}
SIM_IDENTITY = {"backend": "hf", "model_id": "sim-model", "revision": "s0"}
SEED = 7
SIM_TOKENS = 16
PARAMS = ToyParams(simulate=True)


def run(
    store_path: Path,
    params: ToyParams = PARAMS,
    target: ToyBackend | None = None,
    sim: ToyBackend | None = None,
) -> tuple[pd.DataFrame, dict[tuple[int, str], TurnCounts], ToyBackend, ToyBackend]:
    target = target or ToyBackend()
    sim = sim or ToyBackend(model_id="sim-model", revision="s0")
    role = Role(
        SIM_IDENTITY,
        SamplingParams(0.0, 1.0, SEED),
        SIM_TOKENS,
        LazyBackend(None, Path("."), lambda spec, cache: sim),  # type: ignore[arg-type]
    )
    items = SIM_PROTOCOL.read_items(SIM_PROTOCOL.load_items(params, Path("."), SEED))
    with Store(store_path) as store:
        rows, counts = converse(
            SIM_PROTOCOL,
            params,
            items,
            model="toy",
            identity=IDENTITY,
            seed=SEED,
            store=store,
            backend=LazyBackend(None, Path("."), lambda spec, cache: target),  # type: ignore[arg-type]
            judge=None,
            simulator=role,
        )
    return rows, counts, target, sim


def test_user_turns_are_the_simulators_generations_through_the_store(tmp_path: Path) -> None:
    rows, counts, target, sim = run(tmp_path / "s.sqlite")
    assert len(target.sent) == 7 and len(sim.sent) == 4 and len(rows) == 13
    user = rows[rows["role"] == "simulator"]
    assert list(user["turn"]) == [2] * 6
    asked = user[user["skipped"] == ""]
    assert len(asked) == 4 and set(user.loc[user["skipped"] != "", "item_id"]) == {"q2"}
    # The rows name who wrote them; the conversation stays the target's (model "toy").
    assert set(asked["model_id"]) == {"sim-model"} and set(asked["revision"]) == {"s0"}
    assert set(asked["model"]) == {"toy"} and set(asked["max_new_tokens"]) == {SIM_TOKENS}
    assert set(rows.loc[rows["role"] == "target", "model_id"]) == {"toy-model"}
    # Keyed by the simulator's identity over its own request, at its answer length.
    r = asked.iloc[0]
    assert json.loads(r["messages"])[0] == {"role": "system", "content": "Play a plain user."}
    assert r["store_key"] == generation_key(
        SIM_IDENTITY,
        conversation_json(json.loads(r["messages"])),
        SIM_TOKENS,
        {"temperature": 0.0},
        0,
    )
    # The target's turn 3 holds the simulator's text as the user's message, verbatim.
    t3 = rows[rows["turn"] == 3]
    assert len(t3) == 4
    for row in t3.itertuples():
        parent = rows[rows["store_key"] == row.parent_key].iloc[0]
        assert parent["role"] == "simulator"
        assert json.loads(row.messages)[-1] == {"role": "user", "content": parent["response"]}
    # Counts per (turn, role): turn 2 has no target request.
    assert sorted(counts) == [(1, "target"), (2, "simulator"), (2, "target"), (3, "target")]
    assert counts[2, "simulator"].generated == 4 and counts[2, "simulator"].skipped == 2
    assert counts[2, "target"].requests == 0


def test_an_edit_of_the_simulators_instructions_regenerates_exactly_the_turns_after_it(
    tmp_path: Path,
) -> None:
    store = tmp_path / "s.sqlite"
    cold, *_ = run(store)
    # A rerun: every user turn and answer is served; neither model is asked.
    again, _, target, sim = run(store)
    assert target.sent == [] and sim.sent == []
    pd.testing.assert_frame_equal(cold, again)
    # The instructions edited: the 4 user turns and the 4 answers after them, not turn 1.
    _, _, target, sim = run(store, replace(PARAMS, sim_system="Play an {tone} user."))
    assert len(sim.sent) == 4 and [len(r.messages) for r in target.sent] == [3] * 4
    # One tone edited: that tone's 2 user turns and their 2 answers.
    _, _, target, sim = run(store, replace(PARAMS, tones=["plain", "harsh"]))
    assert len(sim.sent) == 2 and len(target.sent) == 2
    # Reverted: nothing.
    _, _, target, sim = run(store)
    assert target.sent == [] and sim.sent == []
    with Store(store) as s:
        assert s.count("generation") == 7 + 4 + (4 + 4) + (2 + 2)


def test_a_crash_in_a_user_turn_resumes_with_identical_rows(tmp_path: Path) -> None:
    def die(kind: str, batch: int) -> None:
        raise RuntimeError("fake crash in generate")

    store = tmp_path / "s.sqlite"
    with pytest.raises(RuntimeError, match="fake crash"):
        run(store, sim=ToyBackend(model_id="sim-model", revision="s0", on_batch=die))
    with Store(store) as s:
        assert s.count("generation") == 3  # turn 1 was stored before the simulator died
    resumed, _, target, sim = run(store)
    assert len(sim.sent) == 4 and [len(r.messages) for r in target.sent] == [3] * 4
    fresh, *_ = run(tmp_path / "fresh.sqlite")
    pd.testing.assert_frame_equal(resumed, fresh)


def test_a_user_turn_without_a_simulator_is_refused(tmp_path: Path) -> None:
    items = SIM_PROTOCOL.read_items(SIM_PROTOCOL.load_items(PARAMS, Path("."), SEED))
    target = ToyBackend()
    with Store(tmp_path / "s.sqlite") as store, pytest.raises(InputError, match="no `simulator`"):
        converse(
            SIM_PROTOCOL,
            PARAMS,
            items,
            model="toy",
            identity=IDENTITY,
            seed=SEED,
            store=store,
            backend=LazyBackend(None, Path("."), lambda spec, cache: target),  # type: ignore[arg-type]
            judge=None,
        )


def test_the_target_as_its_own_simulator_loads_once(fake_backend: FakeModels) -> None:
    spec = ModelSpec(model="m")
    target = LazyBackend(spec, Path("."), lambda s, c: fake_backend.load(s, c))
    same = simulator_role(
        SimulatorParams(model=spec),
        SEED,
        Path("."),
        fake_backend.load,
        ({"backend": "hf", "model_id": "fake/m", "revision": "rev0"}, target),
    )
    assert same is not None and same.backend is target
    assert same.identity == {"backend": "hf", "model_id": "fake/m", "revision": "rev0"}
    other = simulator_role(
        SimulatorParams(model=ModelSpec(model="u"), temperature=0.7),
        SEED,
        Path("."),
        fake_backend.load,
        ({"backend": "hf", "model_id": "fake/m", "revision": "rev0"}, target),
    )
    assert other is not None and other.backend is not target
    assert other.sampling == SamplingParams(0.7, 1.0, SEED)
    # Planning: no backend.
    plan = simulator_role(SimulatorParams(model=spec), SEED, Path("."), None)
    assert plan is not None and plan.backend is None and fake_backend.loads == []


def test_params_refuse_a_design_with_a_simulated_user_and_no_simulator(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    shared = read_params()
    shared.pop("simulator", None)
    register_toy(monkeypatch)
    monkeypatch.setitem(PROTOCOLS, "toy", SIM_PROTOCOL)
    with pytest.raises(ConfigError, match=r"^simulator: required by protocols.toy"):
        params_from({**shared, "protocols": {"toy": {"simulate": True}}}, PROTOCOLS)
    # Switched off, it needs none; with a block, the block is typed.
    assert params_from({**shared, "protocols": {"toy": {"enabled": False}}}, PROTOCOLS)
    sim = {"model": {"model": "embedded:smollm2"}, "max_new_tokens": 40}
    p = params_from({**shared, "simulator": sim, "protocols": {"toy": {}}}, PROTOCOLS)
    assert p.simulator == SimulatorParams(
        model=ModelSpec(model="embedded:smollm2"), max_new_tokens=40
    )
    with pytest.raises(ConfigError, match=r"simulator: unknown key\(s\) \['tactic'\]"):
        params_from(
            {**shared, "simulator": {**sim, "tactic": 1}, "protocols": {"toy": {}}}, PROTOCOLS
        )
