"""`syps plan`: what a run would send, counted against the store, with nothing sent.

The models here are openai-backend specs at an address nothing listens on, so any request
would fail: the plan must never make one. Their tokens are estimated (4 characters a token).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from conftest import SHARED_PARAMS, read_params, write_params
from toy_protocol import ToyBackend, register_toy

from syps.core.backends import SamplingParams, model_identity
from syps.core.config import ModelSpec, Price
from syps.core.conversation import LazyBackend, conversation_json, converse
from syps.core.layout import Layout
from syps.core.messages import parse_messages
from syps.core.params import load_params
from syps.core.plan import HELD_LABEL_NOTE, HELD_NOTE, Held, cost, estimate_tokens, plan, render
from syps.core.store import Store, generation_key
from syps.protocols import PROTOCOLS
from syps.protocols.cues.params import CuesParams
from syps.protocols.cues.templates import render_variants

REPO = Path(__file__).resolve().parents[2]
API = {"model": "m", "backend": "openai", "base_url": "http://127.0.0.1:9/v1"}


def test_estimate_tokens_by_hand() -> None:
    # ceil(8/4) = 2 content tokens + 4 for the message + 2 for the reply = 8;
    # two messages of 5 and 1 characters: ceil(5/4) + ceil(1/4) + 2*4 + 2 = 2 + 1 + 10 = 13.
    assert estimate_tokens([{"role": "user", "content": "abcdefgh"}]) == 8
    two = [{"role": "system", "content": "abcde"}, {"role": "user", "content": "x"}]
    assert estimate_tokens(two) == 13


def test_cost_at_the_configured_price() -> None:
    spec = ModelSpec("m", price=Price(input=2.0, output=10.0))
    assert cost(spec, 1000, 500) == pytest.approx((1000 * 2.0 + 500 * 10.0) / 1e6)  # $0.007
    assert cost(ModelSpec("m"), 1000, 500) is None


@pytest.fixture
def api_params(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    raw = read_params()
    data = raw["protocols"]["cues"]["data"]
    data["limit"] = 1  # 1 item x 3 datasets x 8 variants = 24 prompts
    data["files"] = {k: str(REPO / v) for k, v in data["files"].items()}
    raw["models"] = {"api": {**API, "price": {"input": 1.0, "output": 2.0}}}
    raw["judge"]["model"] = dict(API)
    # SyPS alone: the other protocols' rows are not what this test counts.
    for name, block in raw["protocols"].items():
        block["enabled"] = name == "cues"
    monkeypatch.chdir(tmp_path)
    return write_params(tmp_path / "params.yaml", raw)


def test_cold_then_partly_stored_then_full(api_params: Path, tmp_path: Path) -> None:
    from syps.protocols.cues.data import load_items

    p = load_params(api_params, PROTOCOLS)
    cues = p.protocols["cues"]
    assert isinstance(cues, CuesParams)
    with Store(tmp_path / "s.sqlite") as store:
        rows = {r.stage: r for r in plan(p, PROTOCOLS, REPO, store, tmp_path)}
        # SyPS has one turn and no model-independent verdicts (no "label@cues (all models)").
        assert set(rows) == {"generate@cues-api turn 1", "label@cues-api"}
        gen, lab = rows["generate@cues-api turn 1"], rows["label@cues-api"]
        assert (gen.protocol, gen.model, lab.model) == ("cues", "api", "judge")
        assert (gen.requests, gen.in_store, gen.to_send) == (24, 0, 24)
        # max_new_tokens: OEQ 64, AITA-YTA 40, SS 32, 8 variants each: 8 * 136 = 1088.
        assert gen.output_tokens == 1088
        prompts = render_variants(load_items(cues.data, REPO), cues.templates)
        est = sum(estimate_tokens(parse_messages(m)) for m in prompts["messages"])
        assert gen.input_tokens == est
        assert gen.cost == pytest.approx((est * 1.0 + 1088 * 2.0) / 1e6)
        # The judge will read the 8 OEQ answers, none generated yet: they are not counted, the
        # row says how many answers it could not see (all 24). No price: no cost.
        assert (lab.requests, lab.to_send, lab.output_tokens) == (0, 0, 0)
        assert (
            lab.cost is None
            and lab.note == "lower bound where labels use the judge: 24 answers not generated yet"
        )
        # Store 5 of the 24 answers (under the keys generate uses): 19 left to send.
        identity = model_identity(p.models["api"], tmp_path, "models.api")
        sampling = SamplingParams(cues.generation.temperature, cues.generation.top_p, p.seed)
        keys = [
            generation_key(
                identity,
                conversation_json(parse_messages(m)),
                cues.max_new_tokens[d],
                sampling.key_fields(),
                replicate=0,
            )
            for m, d in zip(prompts["messages"], prompts["dataset"], strict=True)
        ]
        # Each a different text, so that each is a different judge prompt.
        store.put_many(
            "generation",
            [
                (
                    k,
                    {
                        "text": f"ok {i}",
                        "prompt_tokens": 1,
                        "completion_tokens": 1,
                        "finish_reason": "stop",
                    },
                )
                for i, k in enumerate(keys[:5])
            ],
        )
        rows = {r.stage: r for r in plan(p, PROTOCOLS, REPO, store, tmp_path)}
        gen, lab = rows["generate@cues-api turn 1"], rows["label@cues-api"]
        assert (gen.in_store, gen.to_send) == (5, 19)
        # The 5 are OEQ answers (OEQ's variants come first): 5 verdicts, one token each.
        assert list(prompts["dataset"][:5]) == ["OEQ"] * 5
        assert (lab.requests, lab.to_send, lab.output_tokens) == (5, 5, 5)
        assert lab.note.startswith(
            "lower bound where labels use the judge: 19 answers not generated yet"
        )
        assert "total" in render(plan(p, PROTOCOLS, REPO, store, tmp_path))


def test_protocol_turns_counted_from_what_the_store_holds(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The toy protocol: cold, turn 1 has 3 to send and turn 2 cannot be seen (3 unknown
    parents); after a run, 3 + 4 requests all in the store and nothing to send."""
    raw = read_params(SHARED_PARAMS)  # the shared keys; the toy is the only protocol
    raw["models"] = {"api": dict(API)}
    raw["judge"]["model"] = dict(API)
    raw["protocols"] = {"toy": {}}
    register_toy(monkeypatch)
    p = load_params(write_params(tmp_path / "params.yaml", raw), PROTOCOLS)
    with Store(tmp_path / "s.sqlite") as store:
        rows = [r for r in plan(p, PROTOCOLS, REPO, store, tmp_path) if r.protocol == "toy"]
        (t1,) = [r for r in rows if r.stage == "generate@toy-api turn 1"]
        assert (t1.requests, t1.to_send) == (3, 3)
        (t2,) = [r for r in rows if r.stage == "generate@toy-api turn 2"]  # nothing visible yet
        assert (t2.requests, t2.to_send) == (0, 0)
        assert t2.note == "lower bound: 3 earlier answers not generated yet"
        # The toy uses no judge: its label row only says what it could not see.
        (lab,) = [r for r in rows if r.stage == "label@toy-api"]
        assert (lab.requests, lab.note) == (
            0,
            "lower bound where labels use the judge: 3 answers not generated yet",
        )
        # Run it (the toy backend answers), then plan again.
        from toy_protocol import PROTOCOL

        identity = model_identity(p.models["api"], tmp_path, "models.api")
        pp = p.protocols["toy"]
        items = PROTOCOL.read_items(PROTOCOL.load_items(pp, REPO, p.seed))
        backend = ToyBackend()
        converse(
            PROTOCOL,
            pp,
            items,
            model="api",
            identity=identity,
            seed=p.seed,
            store=store,
            backend=LazyBackend(p.models["api"], tmp_path, lambda s, c: backend),
            judge=None,
        )
        after = {
            r.stage: r for r in plan(p, PROTOCOLS, REPO, store, tmp_path) if r.protocol == "toy"
        }
        t1, t2 = after["generate@toy-api turn 1"], after["generate@toy-api turn 2"]
        assert (t1.requests, t1.to_send, t2.requests, t2.to_send) == (3, 0, 4, 0)
        assert t2.note == ""
        assert "label@toy-api" not in after  # nothing to judge, nothing unseen


def test_stages_dvc_holds_up_to_date_are_read_from_their_tables(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Held stages are counted from what they wrote, the toy's items never loaded: turn 1 has
    store keys a, b, b (a repeat: 2 distinct), turn 2 the simulator's c and a skipped row (1);
    two of three label rows are the judge's (2). Nothing to send. A model whose label stage is
    stale is rebuilt."""
    import pandas as pd

    raw = read_params(SHARED_PARAMS)
    raw["models"] = {"api": dict(API), "other": dict(API)}
    raw["judge"]["model"] = dict(API)
    raw["protocols"] = {"toy": {}}
    register_toy(monkeypatch)
    p = load_params(write_params(tmp_path / "params.yaml", raw), PROTOCOLS)
    layout = Layout.of(tmp_path)
    for model in ("api", "other"):
        for step in ("generate", "label"):
            layout.table("toy", step, model).parent.mkdir(parents=True, exist_ok=True)
        pd.DataFrame(
            {
                "turn": [1, 1, 1, 2, 2],
                "role": ["target", "target", "target", "simulator", "simulator"],
                "store_key": ["a", "b", "b", "c", ""],
                "skipped": ["", "", "", "", "parent UNCLEAR"],
            }
        ).to_parquet(layout.table("toy", "generate", model))
        labelers = ["judge:j@1", "rule:r", "judge:j@1"]
        pd.DataFrame({"labeler": labelers}).to_parquet(layout.table("toy", "label", model))
    both = frozenset({"generate@toy-api", "label@toy-api", "generate@toy-other", "label@toy-other"})

    def boom(*args: object) -> None:
        raise AssertionError("a held protocol's items were loaded")

    unloadable = {"toy": dataclasses.replace(PROTOCOLS["toy"], load_items=boom)}
    with Store(tmp_path / "s.sqlite") as store:
        rows = plan(p, unloadable, REPO, store, tmp_path, Held(both, layout))
    got = [(r.stage, r.model, r.requests, r.in_store, r.to_send, r.note) for r in rows]
    assert got == [
        ("generate@toy-api turn 1", "api", 2, 2, 0, HELD_NOTE),
        ("generate@toy-api turn 2 (simulator)", "api", 1, 1, 0, HELD_NOTE),
        ("label@toy-api", "judge", 2, 2, 0, HELD_LABEL_NOTE),
        ("generate@toy-other turn 1", "other", 2, 2, 0, HELD_NOTE),
        ("generate@toy-other turn 2 (simulator)", "other", 1, 1, 0, HELD_NOTE),
        ("label@toy-other", "judge", 2, 2, 0, HELD_LABEL_NOTE),
    ]

    # other's label stage is stale: other is rebuilt (its conversations against the empty
    # store: 3 to send on turn 1), the toy's items loaded again; api still read.
    stale = Held(both - {"label@toy-other"}, layout)
    with Store(tmp_path / "s.sqlite") as store:
        rows = plan(p, PROTOCOLS, REPO, store, tmp_path, stale)
    by_stage = {r.stage: r for r in rows}
    assert by_stage["generate@toy-api turn 1"].note == HELD_NOTE
    rebuilt = by_stage["generate@toy-other turn 1"]
    assert (rebuilt.requests, rebuilt.to_send) == (3, 3)
    assert rebuilt.note == "input tokens estimated (4 characters a token)"  # an API model


def test_a_price_below_zero_is_refused(api_params: Path) -> None:
    from syps.core.config import ConfigError, parse

    raw = read_params(api_params)
    raw["models"]["api"]["price"] = {"input": -1.0, "output": 1.0}
    with pytest.raises(ConfigError, match=r"models.api.price: input and output must be 0 or more"):
        load_params(write_params(api_params, raw), PROTOCOLS)
    assert parse(Price, {"input": 1, "output": 2}) == Price(1.0, 2.0)
