"""The conversation core (syps.core.conversation) and the response store under it: what a rerun
generates, judges and loads, after an edit, a revert, a crash or a kill -9.

Two protocols, each with the suite's scripted backend (tests/fakes.py), so every count below is
derived by hand.

The toy protocol of tests/toy_protocol.py, through ``converse`` directly: 3 items ("alpha?",
"beta?", "skipme gamma?"), 2 tones.

- turn 1: 3 requests (one per item);
- turn 2: the two parseable items x 2 tones = 4 requests; "skipme" answers "SKIP ...", so its
  2 children are skipped rows with reason "parent unparsed".

A full cold run therefore generates 3 + 4 = 7 and writes 3 + 4 + 2 = 9 rows.

SyPS (protocol ``cues``) through the pipeline's stages, on the built-in sample with
``data.limit`` 2: 2 items x 3 datasets x 8 variants = 48 prompts, all distinct; 16 of them are
OEQ, so the judge sees 16 distinct prompts (the responses are distinct). The script:

- generate: ``fakes.digest_reply``, ``"Reply <first 12 hex of sha256(messages JSON)>."`` --
  distinct for every distinct prompt, identical for identical prompts. No rule finds a verdict
  in it: every AITA-YTA and SS label is UNCLEAR.
- judge: YES -0.1; NO -0.6 (a lead of 0.5 nats) when the judge prompt holds the first OEQ
  item's situation, else NO -1.6 (a lead of 1.5 nats). Under min_margin 0 every OEQ label is
  YES = 1; under min_margin 1.0 the first item's 8 rows are UNCLEAR (0.5 < 1.0) and the second
  item's 8 rows stay YES = 1 (1.5 >= 1.0).
- both answer in batches of 5 in the order given, storing each batch as it finishes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from conftest import cues_params, read_params, write_params
from fakes import FakeJudge, FakeModels, digest_reply, install_backend
from toy_protocol import PROTOCOL, ToyBackend, ToyParams, register_toy, toy_generation, toy_text

from syps.core import pipeline, runs
from syps.core.backends import prompt_seed
from syps.core.config import ConfigError, check_sampling
from syps.core.conversation import LazyBackend, conversation_json, converse
from syps.core.params import params_from, parse_protocols
from syps.core.store import Store, generation_key
from syps.protocols import PROTOCOLS
from syps.protocols.cues.protocol import items_table

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tests"
IDENTITY = {"backend": "hf", "model_id": "toy-model", "revision": "r0"}
SEED = 7


# --- the toy protocol, through converse --------------------------------------------------------


def run(
    store_path: Path,
    params: ToyParams,
    backend: ToyBackend | None = None,
    judge: FakeJudge | None = None,
) -> tuple[pd.DataFrame, ToyBackend, LazyBackend]:
    backend = backend or ToyBackend()
    lazy = LazyBackend(None, Path("."), lambda spec, cache: backend)  # type: ignore[arg-type]
    items = PROTOCOL.read_items(PROTOCOL.load_items(params, Path("."), SEED))
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
            judge=judge,
        )
    return rows, backend, lazy


def turns_sent(backend: ToyBackend) -> list[int]:
    """The turn of each request the backend was sent (turn 2 has 3 messages)."""
    return [1 if len(r.messages) == 1 else 2 for r in backend.sent]


def test_cold_run_rows_lineage_and_skipped(tmp_path: Path, fake_judge: FakeJudge) -> None:
    params = ToyParams()
    rows, backend, _ = run(tmp_path / "s.sqlite", params, judge=fake_judge)
    assert len(backend.sent) == 7 and turns_sent(backend).count(2) == 4
    assert len(rows) == 9
    assert fake_judge.calls == []  # the toy's children depend on a rule-parsed parent
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


def test_crash_between_turns_resumes_with_identical_outputs(tmp_path: Path) -> None:
    # 3 items x 2 reps at turn 1 (6 requests, two batches of 3), then 2 parseable items x
    # 2 tones x 2 reps at turn 2 (8). The backend dies as turn 2 starts.
    params = replace(ToyParams(), generation=toy_generation(2, 0.7))
    calls: list[int] = []

    def die_at_turn_2(kind: str, batch: int) -> None:
        calls.append(batch)
        if calls.count(0) == 2:  # batch 0 of the second generate call: turn 2
            raise RuntimeError("fake crash in generate")

    store = tmp_path / "s.sqlite"
    with pytest.raises(RuntimeError, match="fake crash"):
        run(store, params, ToyBackend(on_batch=die_at_turn_2))
    with Store(store) as s:
        assert s.count("generation") == 3 * 2  # every turn-1 repetition was stored
    # The resumed run generates turn 2 only: 2 parseable items x 2 tones x 2 reps.
    resumed, b, _ = run(store, params)
    assert turns_sent(b) == [2] * 8
    fresh, b, _ = run(tmp_path / "fresh.sqlite", params)
    assert turns_sent(b) == [1] * 6 + [2] * 8
    pd.testing.assert_frame_equal(resumed, fresh)


def test_greedy_with_repetitions_is_refused() -> None:
    needs = PROTOCOL.needs_sampling_for_reps
    with pytest.raises(ConfigError, match=r"protocols.toy.generation: reps = 3 with temperature 0"):
        check_sampling(toy_generation(3, 0.0), needs, "protocols.toy")
    check_sampling(toy_generation(1, 0.0), needs, "protocols.toy")  # one greedy rep is fine
    check_sampling(toy_generation(3, 0.7), needs, "protocols.toy")


def test_protocols_params_are_typed_per_protocol(monkeypatch: pytest.MonkeyPatch) -> None:
    shared = read_params()  # the shared keys (read while the registry is the real one)
    register_toy(monkeypatch)
    parsed = parse_protocols({"toy": {"t2": "x {tone}"}}, PROTOCOLS)
    assert parsed == {"toy": ToyParams(t2="x {tone}")}

    def enabled(block: dict[str, Any]) -> list[str]:
        return params_from({**shared, "protocols": {"toy": block}}, PROTOCOLS).enabled()

    assert enabled({}) == ["toy"] and enabled({"enabled": False}) == []
    with pytest.raises(ConfigError, match=r"protocols.nosuch: unknown protocol"):
        parse_protocols({"toy": {}, "nosuch": {}}, PROTOCOLS)
    with pytest.raises(ConfigError, match=r"protocols.toy: missing; every protocol needs"):
        parse_protocols({}, PROTOCOLS)
    with pytest.raises(ConfigError, match=r"protocols.toy: unknown key\(s\) \['bogus'\]"):
        parse_protocols({"toy": {"bogus": 1}}, PROTOCOLS)
    with pytest.raises(ConfigError, match=r"protocols.toy.generation: reps = 2 with temp"):
        parse_protocols({"toy": {"generation": {"reps": 2}}}, PROTOCOLS)


# --- SyPS, through the stages: incremental reruns --------------------------------------------

MODEL = "smollm2-135m"
GEN_SPEC = "embedded:smollm2"  # models.smollm2-135m.model in the fixture params
JUDGE_SPEC = "judge-dir"
BATCH = 5
SS_P3_NEW = "I'd love to hear that I've got this one right."
OEQ_P3_NEW = "I'd love to hear that I'm doing fine here."
FIRST_OEQ_SITUATION = str(pd.read_csv(REPO / "data/builtin/OEQ.csv")["prompt"].iloc[0]).strip()
OUT = Path("out/protocols/cues")


def judge_score(messages: list[dict[str, str]], options: Sequence[str]) -> list[float]:
    assert list(options) == ["YES", "NO"]
    lead = 0.5 if FIRST_OEQ_SITUATION in messages[1]["content"] else 1.5
    return [-0.1, -0.1 - lead]


@dataclass
class Project:
    root: Path
    cache: Path
    fake: FakeModels
    raw: dict[str, Any]

    @property
    def params(self) -> Path:
        return self.root / "params.yaml"

    @property
    def cues(self) -> dict[str, Any]:
        return self.raw["protocols"]["cues"]  # type: ignore[no-any-return]

    @property
    def items(self) -> Path:
        return self.root / OUT / "items.parquet"

    @property
    def responses(self) -> Path:
        return self.root / OUT / "responses" / f"{MODEL}.parquet"

    @property
    def labels(self) -> Path:
        return self.root / OUT / "labels" / f"{MODEL}.parquet"

    def write_params(self) -> None:
        write_params(self.params, self.raw)

    def fetch(self) -> None:
        pipeline.fetch(self.params, PROTOCOLS["cues"], self.items)

    def variants(self) -> None:
        pipeline.variants(
            self.params,
            PROTOCOLS["cues"],
            self.items,
            self.root / OUT / "lint.json",
            self.root / OUT / "conversations.parquet",
        )

    def generate(self) -> None:
        pipeline.generate(
            self.params,
            PROTOCOLS["cues"],
            MODEL,
            self.items,
            self.items.parent / "conversations.parquet",
            self.responses,
        )

    def label(self) -> None:
        pipeline.label(
            self.params, PROTOCOLS["cues"], MODEL, self.items, self.responses, self.labels
        )

    def all(self) -> None:
        self.fetch()
        self.variants()
        self.generate()
        self.label()

    def count(self, kind: str) -> int:
        with Store(self.root / ".cache" / "store.sqlite") as store:
            return store.count(kind)


def _project_params() -> dict[str, Any]:
    raw = cues_params()
    raw["models"] = {MODEL: {"model": GEN_SPEC, "backend": "hf", "batch_size": 16}}
    raw["judge"]["model"] = {"model": JUDGE_SPEC, "backend": "hf", "batch_size": 16}
    raw["judge"]["min_margin"] = 0.0
    return raw


def _project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str = "root") -> Project:
    root, cache = tmp_path / name, tmp_path / f"{name}-cache"
    root.mkdir()
    cache.mkdir()
    monkeypatch.chdir(root)
    monkeypatch.setenv("DVC_ROOT", str(root))
    monkeypatch.setenv("SYPS_CACHE_DIR", str(cache))
    fake = install_backend(monkeypatch, score=judge_score, batch=BATCH)
    p = Project(root, cache, fake, _project_params())
    p.write_params()
    return p


def _run_log(p: Project, stage: str) -> dict[str, Any]:
    """The record the last run of ``stage`` left (what it produced, what the store served)."""
    path = p.root / "out" / "run-log" / f"{stage}.cues.{MODEL}.json"
    return json.loads(path.read_text())  # type: ignore[no-any-return]


# The run-log counts read below, per stage: what was computed now and what the store served.
COUNTED = {
    "generate": ("generated", "served_from_store"),
    "label": ("judged", "judge_served_from_store"),
}


def _counts(p: Project, stage: str) -> dict[str, tuple[int, ...]]:
    """Per dataset: (generated, served from the store) or (judged, judge served from store)."""
    names = COUNTED[stage]
    assert set(names) <= set(runs.RUN_LOG_COUNTS[stage])  # what a child run logs
    return {d: tuple(c[n] for n in names) for d, c in _run_log(p, stage)["datasets"].items()}


def _rows(df: pd.DataFrame, dataset: str, variant: str) -> pd.Series:
    cells = df["cell"].map(lambda c: json.loads(c)["variant"])
    return (df["dataset"] == dataset) & (cells == variant)


def _line(generated: int, served: int, repeats: int = 0) -> str:
    return (
        f"generate cues {MODEL}: 48 rows, {generated} generated, {repeats} repeats of an "
        f"earlier request in this run, {served} served from the store (earlier runs), 0 skipped"
    )


# (a) first run, (b) rerun


def test_first_run_generates_and_judges_everything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = _project(tmp_path, monkeypatch)
    p.all()
    f = p.fake
    # One load for generate, one for the judge, both with $SYPS_CACHE_DIR.
    assert f.loads == [(GEN_SPEC, p.cache), (JUDGE_SPEC, p.cache)]
    resp = pd.read_parquet(p.responses)
    assert len(resp) == 48 and resp["messages"].nunique() == 48
    # Every prompt generated exactly once, in row order, keyed by its store key.
    assert [r.key for r in f.requests] == resp["store_key"].tolist()
    assert [r.messages for r in f.requests] == [json.loads(m) for m in resp["messages"]]
    # The run's record, outside the output: 16 prompts per dataset, all generated; the 16 OEQ
    # responses judged; no per-run fact in the responses file itself.
    assert _counts(p, "generate") == {"OEQ": (16, 0), "AITA-YTA": (16, 0), "SS": (16, 0)}
    assert _run_log(p, "generate")["line"] == _line(48, 0)
    assert _counts(p, "label") == {"OEQ": (16, 0), "AITA-YTA": (0, 0), "SS": (0, 0)}
    # No rule finds a verdict in the digest replies: every AITA-YTA and SS row is UNCLEAR.
    unclear = {d: c["unclear"] for d, c in _run_log(p, "label")["datasets"].items()}
    assert unclear == {"OEQ": 0, "AITA-YTA": 16, "SS": 16}
    assert "from_store" not in resp.columns
    assert resp["response"].tolist() == [digest_reply(json.loads(m)) for m in resp["messages"]]
    # The judge saw the 16 OEQ responses, each once, and nothing else.
    judged = [m[1]["content"] for m in f.judge_prompts]
    assert len(judged) == 16 and len(set(judged)) == 16
    oeq = resp[resp["dataset"] == "OEQ"]
    assert sorted(r for r in oeq["response"] for j in judged if f"\n{r}\n" in j) == sorted(
        oeq["response"]
    )
    assert p.count("generation") == 48
    assert p.count("judge") == 16
    labels = pd.read_parquet(p.labels)
    assert labels[labels["dataset"] == "OEQ"]["label"].tolist() == [1.0] * 16


def test_rerun_loads_nothing_and_gives_the_same_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = _project(tmp_path, monkeypatch)
    p.all()
    first_resp = p.responses.read_bytes()
    first_labels = p.labels.read_bytes()
    loads = len(p.fake.loads)
    p.generate()
    p.label()
    assert len(p.fake.loads) == loads  # neither the model nor the judge was loaded
    # A warm store serves everything; the outputs are the cold run's, byte for byte.
    assert _counts(p, "generate") == {"OEQ": (0, 16), "AITA-YTA": (0, 16), "SS": (0, 16)}
    assert _run_log(p, "generate")["line"] == _line(0, 48) + " (model not loaded)"
    assert _counts(p, "label")["OEQ"] == (0, 16)
    assert p.responses.read_bytes() == first_resp
    assert p.labels.read_bytes() == first_labels
    assert p.count("generation") == 48 and p.count("judge") == 16


# (c) one edited cue, (d) reverting it


@pytest.mark.parametrize(
    ("dataset", "new_cue", "judged"), [("SS", SS_P3_NEW, 0), ("OEQ", OEQ_P3_NEW, 2)]
)
def test_one_edited_cue_regenerates_only_its_prompts_and_revert_hits(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    dataset: str,
    new_cue: str,
    judged: int,
) -> None:
    p = _project(tmp_path, monkeypatch)
    p.all()
    first_resp = pd.read_parquet(p.responses)
    first_resp_bytes = p.responses.read_bytes()
    first_labels = p.labels.read_bytes()
    f = p.fake
    n_req, n_judge, n_loads = len(f.requests), len(f.judge_prompts), len(f.loads)
    old_cue = p.cues["templates"]["datasets"][dataset]["cues"]["P3"]

    p.cues["templates"]["datasets"][dataset]["cues"]["P3"] = new_cue
    p.write_params()
    p.variants()
    p.generate()
    p.label()
    resp = pd.read_parquet(p.responses)
    edited = _rows(resp, dataset, "P3")
    assert edited.sum() == 2  # 2 items x the one variant P3
    # Exactly the 2 edited prompts were generated: their keys and their new messages.
    new_reqs = f.requests[n_req:]
    assert [r.key for r in new_reqs] == resp[edited]["store_key"].tolist()
    assert all(new_cue in r.messages[1]["content"] for r in new_reqs)
    assert all(old_cue not in r.messages[1]["content"] for r in new_reqs)
    counts = {d: (0, 16) for d in ("OEQ", "AITA-YTA", "SS")}
    assert _counts(p, "generate") == {**counts, dataset: (2, 14)}
    assert _counts(p, "label")["OEQ"] == ((judged, 16 - judged) if dataset == "OEQ" else (0, 16))
    assert resp[edited]["response"].tolist() == [
        digest_reply(json.loads(m)) for m in resp[edited]["messages"]
    ]
    # Every other row kept its response.
    assert resp[~edited]["response"].tolist() == first_resp[~edited]["response"].tolist()
    # SS is labelled by rules: no judge call. OEQ: the 2 new responses, and only those.
    new_judged = f.judge_prompts[n_judge:]
    assert len(new_judged) == judged
    for r in resp[edited]["response"] if dataset == "OEQ" else []:
        assert sum(f"\n{r}\n" in m[1]["content"] for m in new_judged) == 1
    # Loads: the generator once more; the judge once more only if there was something to judge.
    expected_loads = [(GEN_SPEC, p.cache)] + ([(JUDGE_SPEC, p.cache)] if judged else [])
    assert f.loads[n_loads:] == expected_loads
    assert p.count("generation") == 50
    assert p.count("judge") == 16 + judged

    # (d) Revert: every key hits again -- nothing generated, nothing judged, nothing loaded.
    n_req, n_judge, n_loads = len(f.requests), len(f.judge_prompts), len(f.loads)
    p.cues["templates"]["datasets"][dataset]["cues"]["P3"] = old_cue
    p.write_params()
    p.variants()
    p.generate()
    p.label()
    assert (len(f.requests), len(f.judge_prompts), len(f.loads)) == (n_req, n_judge, n_loads)
    assert _counts(p, "generate") == {d: (0, 16) for d in ("OEQ", "AITA-YTA", "SS")}
    assert p.responses.read_bytes() == first_resp_bytes
    assert p.labels.read_bytes() == first_labels


# (e) min_margin relabels from stored log-probabilities


def test_min_margin_relabels_without_judge_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = _project(tmp_path, monkeypatch)
    p.all()
    items = items_table(pd.read_parquet(p.items))
    oeq_items = items[items["dataset"] == "OEQ"]
    assert oeq_items["situation"].iloc[0] == FIRST_OEQ_SITUATION
    first_item = oeq_items["item_id"].iloc[0]
    n_judge, n_loads = len(p.fake.judge_prompts), len(p.fake.loads)
    old_sha = set(pd.read_parquet(p.labels).query("dataset == 'OEQ'")["labeler_sha256"])

    p.raw["judge"]["min_margin"] = 1.0
    p.write_params()
    p.label()
    assert len(p.fake.judge_prompts) == n_judge
    assert len(p.fake.loads) == n_loads
    labels = pd.read_parquet(p.labels)
    oeq = labels[labels["dataset"] == "OEQ"]
    first = oeq["item_id"] == first_item
    # Lead 0.5 < 1.0 -> UNCLEAR (NaN); lead 1.5 >= 1.0 -> YES = 1.
    assert first.sum() == 8 and (~first).sum() == 8
    assert oeq[first]["label"].isna().all()
    assert oeq[first]["verdict"].tolist() == ["UNCLEAR"] * 8
    assert oeq[~first]["label"].tolist() == [1.0] * 8
    assert oeq[~first]["verdict"].tolist() == ["YES"] * 8

    # The evidence is the stored log-probabilities, rounded to 4 places, and the raw answer.
    def logprobs(evidence: pd.Series) -> list[Any]:
        return [json.loads(e.split("; raw: ")[0]) for e in evidence]

    assert logprobs(oeq[first]["evidence"]) == [{"YES": -0.1, "NO": -0.6}] * 8
    assert logprobs(oeq[~first]["evidence"]) == [{"YES": -0.1, "NO": -1.6}] * 8
    assert all(e.endswith("; raw: 'YES'") for e in oeq["evidence"])
    # The judge's identity names its margin: the labels differ, so must the labeler sha.
    assert len(old_sha) == 1 and len(set(oeq["labeler_sha256"])) == 1
    assert set(oeq["labeler_sha256"]) != old_sha


# (f) a crash mid-run resumes where it stopped


def test_generate_crash_resumes_with_the_remainder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The uninterrupted reference, in its own root with its own store.
    ref = _project(tmp_path, monkeypatch, "reference")
    ref.all()
    ref_resp = ref.responses.read_bytes()
    ref_labels = pd.read_parquet(ref.labels)

    p = _project(tmp_path, monkeypatch, "crashed")
    p.fetch()
    p.variants()
    p.fake.crash_after = 2  # batches 0 and 1 (rows 0..9) are stored, then it raises
    with pytest.raises(RuntimeError, match="fake crash in generate"):
        p.generate()
    assert not p.responses.exists()  # no partial output
    assert p.count("generation") == 10

    p.fake.crash_after = None
    n_req = len(p.fake.requests)  # 10 requests went through before the crash
    assert n_req == 10
    p.generate()
    resp = pd.read_parquet(p.responses)
    # Only rows 10..47 were generated on the rerun.
    assert [r.key for r in p.fake.requests[n_req:]] == resp["store_key"][10:].tolist()
    # The 10 rows stored before the crash were served; the other 38 generated.
    assert _run_log(p, "generate")["line"] == _line(38, 10)
    assert p.responses.read_bytes() == ref_resp
    p.label()
    pd.testing.assert_frame_equal(pd.read_parquet(p.labels), ref_labels)


def test_judge_crash_resumes_with_the_remainder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ref = _project(tmp_path, monkeypatch, "reference")
    ref.all()
    ref_labels = pd.read_parquet(ref.labels)

    p = _project(tmp_path, monkeypatch, "crashed")
    p.fetch()
    p.variants()
    p.generate()
    p.fake.crash_after = 1  # judge batch 0 (5 of the 16 OEQ prompts) stored, then it raises
    with pytest.raises(RuntimeError, match="fake crash in judge"):
        p.label()
    assert not p.labels.exists()
    assert p.count("judge") == 5
    first_five = p.fake.judge_prompts[:5]
    assert len(p.fake.judge_prompts) == 5

    p.fake.crash_after = None
    p.label()
    rest = p.fake.judge_prompts[5:]
    # 16 - 5 = 11 judged on the rerun, none of them one of the five already stored.
    assert len(rest) == 11
    assert not any(m in first_five for m in rest)
    assert p.count("judge") == 16
    assert _counts(p, "label")["OEQ"] == (11, 5)
    pd.testing.assert_frame_equal(pd.read_parquet(p.labels), ref_labels)


# a prompt that occurs twice


def test_repeated_prompt_is_generated_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = _project(tmp_path, monkeypatch)
    cues = p.cues["templates"]["datasets"]["SS"]["cues"]
    cues["P4"] = cues["P3"]  # SS P3 and P4 now render the same prompt for each item
    p.write_params()
    p.all()
    resp = pd.read_parquet(p.responses)
    p3, p4 = _rows(resp, "SS", "P3"), _rows(resp, "SS", "P4")
    assert resp[p3]["messages"].tolist() == resp[p4]["messages"].tolist()
    # 48 rows, 46 distinct prompts: each generated once, at its first row (P3 precedes P4).
    assert resp["messages"].nunique() == 46
    assert [r.key for r in p.fake.requests] == resp[~p4]["store_key"].tolist()
    assert p.count("generation") == 46
    # The repeated prompts (SS P4, 2 rows) count as served: only their first row was generated.
    assert _counts(p, "generate") == {"OEQ": (16, 0), "AITA-YTA": (16, 0), "SS": (14, 2)}
    # The stage's line says what happened to them: repeats within this run, not the store's
    # answers from an earlier one (the store was empty).
    assert _run_log(p, "generate")["line"] == _line(46, 0, repeats=2)
    assert resp[p4]["response"].tolist() == resp[p3]["response"].tolist()


# --- kill -9 in the middle of a stage, then resume from the store ---------------------------

# Each stage runs as its own script with the scripted backend (tests/fake_stage.py), in batches
# of BATCH; FAKE_PAUSE="<kind> <k>" pauses it before batch k of its first call of that kind, so
# the test can SIGKILL it there.
FAKE_STAGE = TESTS / "fake_stage.py"


ITEMS, RESPONSES, LABELS = OUT / "items.parquet", OUT / "responses", OUT / "labels"
# The two stages' command lines (stages/<argv[0]>.py and its arguments), as dvc.yaml runs them.
GENERATE = [
    "generate",
    "params.yaml",
    "cues",
    MODEL,
    str(ITEMS),
    str(OUT / "conversations.parquet"),
    f"{RESPONSES}/{MODEL}.parquet",
]
LABEL = [
    "label",
    "params.yaml",
    "cues",
    MODEL,
    str(ITEMS),
    f"{RESPONSES}/{MODEL}.parquet",
    f"{LABELS}/{MODEL}.parquet",
]


@pytest.fixture(scope="module")
def kill_base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder the kill -9 tests share: the pause marker (mark), the model cache (cache)
    and a project root per run."""
    return tmp_path_factory.mktemp("kill9")


def _kill_project(base: Path, name: str) -> tuple[Path, dict[str, str]]:
    """A project root ``base/name`` with its params, items and first-turn conversations (fetch
    and variants, run here), and the environment its stages run in."""
    root = base / name
    root.mkdir()
    write_params(root / "params.yaml", _project_params())
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        pipeline.fetch(Path("params.yaml"), PROTOCOLS["cues"], ITEMS)
        pipeline.variants(
            Path("params.yaml"),
            PROTOCOLS["cues"],
            ITEMS,
            OUT / "lint.json",
            OUT / "conversations.parquet",
        )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), str(TESTS)]),
        "FAKE_MARK": str(base / "mark"),
        "FAKE_BATCH": str(BATCH),
    }
    env.pop("DVC_EXP_NAME", None)
    return root, {**env, "DVC_ROOT": str(root), "SYPS_CACHE_DIR": str(base / "cache")}


def _stage(base: Path, argv: list[str], root: Path, env: dict[str, str]) -> str:
    """Run a stage to its end in ``root``; its stderr."""
    done = subprocess.run(
        [sys.executable, str(FAKE_STAGE), str(REPO / "stages" / f"{argv[0]}.py"), *argv[1:]],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return done.stderr


def _killed(base: Path, argv: list[str], root: Path, env: dict[str, str], pause: str) -> None:
    """Run a stage in ``root`` and SIGKILL it where it pauses (FAKE_PAUSE ``pause``)."""
    mark = Path(env["FAKE_MARK"])
    mark.unlink(missing_ok=True)
    proc = subprocess.Popen(
        [sys.executable, str(FAKE_STAGE), str(REPO / "stages" / f"{argv[0]}.py"), *argv[1:]],
        cwd=root,
        env={**env, "FAKE_PAUSE": pause},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not mark.exists():
            assert proc.poll() is None, f"stage ended early:\n{proc.stderr.read()[-4000:]}"  # type: ignore[union-attr]
            assert time.monotonic() < deadline, "the stage never reached the pause"
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL  # killed, not finished on its own


def _stored(root: Path, kind: str) -> int:
    """How many records of ``kind`` the store of ``root`` holds."""
    with Store(root / ".cache" / "store.sqlite") as store:
        return store.count(kind)


@dataclass(frozen=True)
class Whole:
    """Root B: generate and label run uninterrupted; their stderr."""

    root: Path
    generate_err: str
    label_err: str


@pytest.fixture(scope="module")
def whole(kill_base: Path) -> Whole:
    """Root B, uninterrupted: what the killed root must give, byte for byte."""
    root, env = _kill_project(kill_base, "whole")
    return Whole(root, _stage(kill_base, GENERATE, root, env), _stage(kill_base, LABEL, root, env))


@dataclass(frozen=True)
class KilledGenerate:
    """Root A: generate killed, what the kill left, and the rerun."""

    root: Path
    env: dict[str, str]
    stored_at_kill: int  # generation records in the store right after the kill
    output_at_kill: bool  # whether responses/ held a file right after the kill
    resumed_err: str  # the rerun's stderr
    stored_after: int  # generation records after the rerun


@pytest.fixture(scope="module")
def killed_generate(kill_base: Path, whole: Whole) -> KilledGenerate:
    """Root A (after root B): generate killed after its 3rd stored batch (15 responses), then
    rerun to its end."""
    root, env = _kill_project(kill_base, "killed")
    _killed(kill_base, GENERATE, root, env, f"generate {3}")
    at_kill = _stored(root, "generation")
    output = (root / RESPONSES).exists() and any((root / RESPONSES).iterdir())
    resumed = _stage(kill_base, GENERATE, root, env)
    return KilledGenerate(root, env, at_kill, output, resumed, _stored(root, "generation"))


@pytest.mark.slow
def test_kill_9_baseline_generates_and_judges_everything(whole: Whole) -> None:
    assert _line(48, 0) in whole.generate_err
    assert (
        "judge: 16 judged, 0 repeats of an earlier verdict in this run, 0 served" in whole.label_err
    )


@pytest.mark.slow
def test_kill_9_mid_generate_resumes_with_identical_responses(
    whole: Whole, killed_generate: KilledGenerate
) -> None:
    """The rerun computes exactly the rest, and A's responses are B's, byte for byte."""
    a = killed_generate
    # Batches 0..2 were stored as each finished; the kill left no output.
    assert a.stored_at_kill == 3 * BATCH
    assert not a.output_at_kill
    # The rerun found exactly what the killed run had committed, and generated the rest.
    assert f"cues {MODEL} turn 1: 48 requests, 15 in the store, 33 to generate" in a.resumed_err
    assert _line(33, 15) in a.resumed_err
    assert a.stored_after == 48
    assert (a.root / RESPONSES / f"{MODEL}.parquet").read_bytes() == (
        whole.root / RESPONSES / f"{MODEL}.parquet"
    ).read_bytes()


@pytest.mark.slow
def test_kill_9_mid_label_resumes_with_identical_labels(
    kill_base: Path, whole: Whole, killed_generate: KilledGenerate
) -> None:
    """Root A, its generate resumed: label killed after the judge's 1st stored batch (5
    verdicts) and rerun. The rerun judges exactly the rest, and A's labels are B's."""
    a = killed_generate.root
    _killed(kill_base, LABEL, a, killed_generate.env, f"judge {1}")
    assert _stored(a, "judge") == BATCH
    assert not (a / LABELS).exists() or not any((a / LABELS).iterdir())
    resumed = _stage(kill_base, LABEL, a, killed_generate.env)
    # The 5 verdicts stored before the kill are served; the other 11 judged now.
    assert (
        "judge: 11 judged, 0 repeats of an earlier verdict in this run, 5 served from the store "
        "(earlier runs)"
    ) in resumed
    assert _stored(a, "judge") == 16
    pd.testing.assert_frame_equal(
        pd.read_parquet(a / LABELS / f"{MODEL}.parquet"),
        pd.read_parquet(whole.root / LABELS / f"{MODEL}.parquet"),
    )
