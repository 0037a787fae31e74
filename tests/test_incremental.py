"""Incremental reruns through the response store, with a scripted fake for the "hf" backend.

The fake's answers follow from its input alone, so every expectation below is derived by hand:

* generate: the text is ``"Reply <first 12 hex of sha256(messages JSON)>."`` -- distinct for
  every distinct prompt, identical for identical prompts.
* option_logprobs: YES -0.1; NO -0.6 (a lead of 0.5 nats) when the judge prompt holds the
  first OEQ item's situation, else NO -1.6 (a lead of 1.5 nats). Under min_margin 0 every OEQ
  label is YES = 1; under min_margin 1.0 the first item's 8 rows are UNCLEAR (0.5 < 1.0) and
  the second item's 8 rows stay YES = 1 (1.5 >= 1.0).
* Both answer in batches of 5 requests in the order given, calling ``on_results`` after each;
  ``crash_after`` batches make it raise RuntimeError instead of starting the next batch.

The sample: data.limit 2 -> 2 items x 3 datasets x 8 variants = 48 prompts, all distinct;
16 of them are OEQ, so the judge sees 16 distinct prompts (the responses are distinct).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import read_params

import syps.core.backends
from syps.core import pipeline, runs
from syps.core.backends import (
    GenRequest,
    GenResult,
    OnGenerated,
    OnScored,
    OptionScores,
    SamplingParams,
)
from syps.core.config import ModelSpec
from syps.core.store import Store

REPO = Path(__file__).resolve().parents[1]
BUILTIN = REPO / "data" / "builtin"
MODEL = "smollm2-135m"
GEN_SPEC = "embedded:smollm2"  # models.smollm2-135m.model in the fixture params
JUDGE_SPEC = "judge-dir"
BATCH = 5
SS_P3_NEW = "I'd love to hear that I've got this one right."
OEQ_P3_NEW = "I'd love to hear that I'm doing fine here."


def fake_text(messages: list[dict[str, str]]) -> str:
    digest = hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()
    return f"Reply {digest[:12]}."


@dataclass
class Fake:
    model_id: str
    revision: str
    first_oeq_situation: str
    crash_after: int | None
    requests: list[GenRequest] = field(default_factory=list)
    judge_prompts: list[list[dict[str, str]]] = field(default_factory=list)

    def _batches(self, n: int) -> list[list[int]]:
        return [list(range(s, min(s + BATCH, n))) for s in range(0, n, BATCH)]

    def generate(
        self,
        requests: Sequence[GenRequest],
        sampling: SamplingParams,
        on_results: OnGenerated | None = None,
    ) -> list[GenResult]:
        out: list[GenResult] = []
        for b, batch in enumerate(self._batches(len(requests))):
            if self.crash_after is not None and b == self.crash_after:
                raise RuntimeError("fake crash in generate")
            done = []
            for i in batch:
                r = requests[i]
                self.requests.append(r)
                text = fake_text(r.messages)
                done.append(GenResult(text, len(r.messages[1]["content"]), 2, "stop"))
            out.extend(done)
            if on_results is not None:
                on_results(batch, done)
        return out

    def option_logprobs(
        self,
        prompts: Sequence[list[dict[str, str]]],
        options: Sequence[str],
        on_results: OnScored | None = None,
    ) -> OptionScores:
        assert list(options) == ["YES", "NO"]
        out = np.empty((len(prompts), 2))
        for b, batch in enumerate(self._batches(len(prompts))):
            if self.crash_after is not None and b == self.crash_after:
                raise RuntimeError("fake crash in judge")
            for i in batch:
                self.judge_prompts.append(prompts[i])
                lead = 0.5 if self.first_oeq_situation in prompts[i][1]["content"] else 1.5
                out[i] = [-0.1, -0.1 - lead]
            if on_results is not None:
                on_results(batch, OptionScores(out[batch], ["YES"] * len(batch)))
        return OptionScores(out, ["YES"] * len(prompts))


@dataclass
class Factory:
    """Stands in for BACKENDS["hf"]: counts loads and keeps every fake it made."""

    first_oeq_situation: str
    crash_after: int | None = None
    loads: list[tuple[str, Path]] = field(default_factory=list)
    made: list[Fake] = field(default_factory=list)

    def identity(self, spec: ModelSpec, cache_dir: Path) -> dict[str, str]:
        return {"backend": "hf", "model_id": f"fake/{spec.model}", "revision": "rev0"}

    def load(self, spec: ModelSpec, cache_dir: Path) -> Fake:
        self.loads.append((spec.model, cache_dir))
        fake = Fake(f"fake/{spec.model}", "rev0", self.first_oeq_situation, self.crash_after)
        self.made.append(fake)
        return fake

    @property
    def requests(self) -> list[GenRequest]:
        return [r for f in self.made for r in f.requests]

    @property
    def judge_prompts(self) -> list[list[dict[str, str]]]:
        return [p for f in self.made for p in f.judge_prompts]


FIRST_OEQ_SITUATION = str(pd.read_csv(BUILTIN / "OEQ.csv")["prompt"].iloc[0]).strip()


@dataclass
class Project:
    root: Path
    cache: Path
    factory: Factory
    raw: dict  # type: ignore[type-arg]

    @property
    def params(self) -> Path:
        return self.root / "params.yaml"

    @property
    def items(self) -> Path:
        return self.root / "out" / "items.parquet"

    @property
    def prompts(self) -> Path:
        return self.root / "out" / "prompts.parquet"

    @property
    def responses(self) -> Path:
        return self.root / "out" / "responses" / f"{MODEL}.parquet"

    @property
    def labels(self) -> Path:
        return self.root / "out" / "labels" / f"{MODEL}.parquet"

    def write_params(self) -> None:
        self.params.write_text(yaml.safe_dump(self.raw, sort_keys=False), encoding="utf-8")

    def fetch(self) -> None:
        pipeline.fetch(self.params, self.items)

    def variants(self) -> None:
        pipeline.variants(self.params, self.items, self.prompts)

    def generate(self) -> None:
        pipeline.generate(self.params, self.prompts, MODEL, self.responses)

    def label(self) -> None:
        pipeline.label(self.params, self.items, self.responses, self.labels)

    def all(self) -> None:
        self.fetch()
        self.variants()
        self.generate()
        self.label()

    def count(self, kind: str) -> int:
        with Store(self.root / ".cache" / "store.sqlite") as store:
            return store.count(kind)


def _project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str = "root") -> Project:
    root, cache = tmp_path / name, tmp_path / f"{name}-cache"
    root.mkdir()
    cache.mkdir()
    monkeypatch.chdir(root)
    monkeypatch.setenv("DVC_ROOT", str(root))
    monkeypatch.setenv("SYPS_CACHE_DIR", str(cache))
    factory = Factory(FIRST_OEQ_SITUATION)
    monkeypatch.setitem(syps.core.backends.BACKENDS, "hf", factory)
    raw = read_params()
    raw["data"]["limit"] = 2
    raw["data"]["files"] = {
        "OEQ": str(BUILTIN / "OEQ.csv"),
        "AITA-YTA": str(BUILTIN / "AITA.csv"),
        "SS": str(BUILTIN / "SS.csv"),
    }
    raw["score"]["bootstrap"] = 20
    raw["models"] = {MODEL: {"model": GEN_SPEC, "backend": "hf", "batch_size": 16}}
    raw["judge"]["model"] = {"model": JUDGE_SPEC, "backend": "hf", "batch_size": 16}
    raw["judge"]["min_margin"] = 0.0
    p = Project(root, cache, factory, raw)
    p.write_params()
    return p


def _run_log(p: Project, stage: str) -> dict:  # type: ignore[type-arg]
    """The record the last run of ``stage`` left (what it produced, what the store served)."""
    return json.loads((p.root / "out" / "run-log" / f"{stage}.{MODEL}.json").read_text())


def _counts(p: Project, stage: str) -> dict[str, tuple[int, ...]]:
    """Per dataset: (generated, served from the store) or (judged, judge served from store)."""
    names = runs.RUN_LOG_COUNTS[stage]
    return {d: tuple(c[n] for n in names) for d, c in _run_log(p, stage)["datasets"].items()}


def _rows(df: pd.DataFrame, dataset: str, variant: str) -> pd.Series:
    return (df["dataset"] == dataset) & (df["variant"] == variant)


# --- (a) first run, (b) rerun ----------------------------------------------------------------


def test_first_run_generates_and_judges_everything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = _project(tmp_path, monkeypatch)
    p.all()
    f = p.factory
    # One load for generate, one for the judge, both with $SYPS_CACHE_DIR.
    assert f.loads == [(GEN_SPEC, p.cache), (JUDGE_SPEC, p.cache)]
    prompts = pd.read_parquet(p.prompts)
    assert len(prompts) == 48 and prompts["messages"].nunique() == 48
    # Every prompt generated exactly once, in row order, keyed by its prompt sha.
    assert [r.key for r in f.requests] == prompts["prompt_sha256"].tolist()
    assert [json.dumps(r.messages) for r in f.requests] == [
        json.dumps(json.loads(m)) for m in prompts["messages"]
    ]
    resp = pd.read_parquet(p.responses)
    assert len(resp) == 48
    # The run's record, outside the output: 16 prompts per dataset, all generated; the 16 OEQ
    # responses judged; no per-run fact in the responses file itself.
    assert _counts(p, "generate") == {"OEQ": (16, 0), "AITA-YTA": (16, 0), "SS": (16, 0)}
    assert _run_log(p, "generate")["line"] == (
        f"generate {MODEL}: 48 responses, 48 generated, 0 served from the store"
    )
    assert _counts(p, "label") == {"AITA-YTA": (0, 0), "OEQ": (16, 0), "SS": (0, 0)}
    assert "from_store" not in resp.columns
    assert resp["response"].tolist() == [fake_text(json.loads(m)) for m in prompts["messages"]]
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
    loads = len(p.factory.loads)
    p.generate()
    p.label()
    assert len(p.factory.loads) == loads  # neither the model nor the judge was loaded
    # A warm store serves everything; the outputs are the cold run's, byte for byte.
    assert _counts(p, "generate") == {"OEQ": (0, 16), "AITA-YTA": (0, 16), "SS": (0, 16)}
    assert _counts(p, "label")["OEQ"] == (0, 16)
    assert p.responses.read_bytes() == first_resp
    assert p.labels.read_bytes() == first_labels
    assert p.count("generation") == 48 and p.count("judge") == 16


# --- (c) one edited cue, (d) reverting it ----------------------------------------------------


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
    f = p.factory
    n_req, n_judge, n_loads = len(f.requests), len(f.judge_prompts), len(f.loads)
    old_cue = p.raw["templates"]["datasets"][dataset]["cues"]["P3"]

    p.raw["templates"]["datasets"][dataset]["cues"]["P3"] = new_cue
    p.write_params()
    p.variants()
    p.generate()
    p.label()
    prompts = pd.read_parquet(p.prompts)
    edited = _rows(prompts, dataset, "P3")
    assert edited.sum() == 2  # 2 items x the one variant P3
    # Exactly the 2 edited prompts were generated: their keys and their new messages.
    new_reqs = f.requests[n_req:]
    assert [r.key for r in new_reqs] == prompts[edited]["prompt_sha256"].tolist()
    assert all(new_cue in r.messages[1]["content"] for r in new_reqs)
    assert all(old_cue not in r.messages[1]["content"] for r in new_reqs)
    resp = pd.read_parquet(p.responses)
    counts = {d: (0, 16) for d in ("OEQ", "AITA-YTA", "SS")}
    assert _counts(p, "generate") == {**counts, dataset: (2, 14)}
    assert _counts(p, "label")["OEQ"] == ((judged, 16 - judged) if dataset == "OEQ" else (0, 16))
    assert resp[edited]["response"].tolist() == [
        fake_text(json.loads(m)) for m in prompts[edited]["messages"]
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
    p.raw["templates"]["datasets"][dataset]["cues"]["P3"] = old_cue
    p.write_params()
    p.variants()
    p.generate()
    p.label()
    assert (len(f.requests), len(f.judge_prompts), len(f.loads)) == (n_req, n_judge, n_loads)
    assert _counts(p, "generate") == {d: (0, 16) for d in ("OEQ", "AITA-YTA", "SS")}
    assert p.responses.read_bytes() == first_resp_bytes
    assert p.labels.read_bytes() == first_labels


# --- (e) min_margin relabels from stored log-probabilities -----------------------------------


def test_min_margin_relabels_without_judge_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = _project(tmp_path, monkeypatch)
    p.all()
    items = pd.read_parquet(p.items)
    oeq_items = items[items["dataset"] == "OEQ"]
    assert oeq_items["situation"].iloc[0] == FIRST_OEQ_SITUATION
    first_item = oeq_items["item_id"].iloc[0]
    n_judge, n_loads = len(p.factory.judge_prompts), len(p.factory.loads)
    old_sha = set(pd.read_parquet(p.labels).query("dataset == 'OEQ'")["labeler_sha256"])

    p.raw["judge"]["min_margin"] = 1.0
    p.write_params()
    p.label()
    assert len(p.factory.judge_prompts) == n_judge
    assert len(p.factory.loads) == n_loads
    labels = pd.read_parquet(p.labels)
    oeq = labels[labels["dataset"] == "OEQ"]
    first = oeq["item_id"] == first_item
    # Lead 0.5 < 1.0 -> UNCLEAR (NaN); lead 1.5 >= 1.0 -> YES = 1.
    assert first.sum() == 8 and (~first).sum() == 8
    assert oeq[first]["label"].isna().all()
    assert oeq[first]["verdict"].tolist() == ["UNCLEAR"] * 8
    assert oeq[~first]["label"].tolist() == [1.0] * 8
    assert oeq[~first]["verdict"].tolist() == ["YES"] * 8
    # The evidence is the stored log-probabilities, rounded to 4 places.
    assert oeq[first]["evidence"].map(json.loads).tolist() == [{"YES": -0.1, "NO": -0.6}] * 8
    assert oeq[~first]["evidence"].map(json.loads).tolist() == [{"YES": -0.1, "NO": -1.6}] * 8
    # The judge's identity names its margin: the labels differ, so must the labeler sha.
    assert len(old_sha) == 1 and len(set(oeq["labeler_sha256"])) == 1
    assert set(oeq["labeler_sha256"]) != old_sha


# --- (f) a crash mid-run resumes where it stopped --------------------------------------------


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
    p.factory.crash_after = 2  # batches 0 and 1 (rows 0..9) are stored, then it raises
    with pytest.raises(RuntimeError, match="fake crash in generate"):
        p.generate()
    assert not p.responses.exists()  # no partial output
    assert p.count("generation") == 10

    p.factory.crash_after = None
    n_req = len(p.factory.requests)  # 10 requests went through before the crash
    assert n_req == 10
    p.generate()
    prompts = pd.read_parquet(p.prompts)
    # Only rows 10..47 were generated on the rerun.
    assert [r.key for r in p.factory.requests[n_req:]] == prompts["prompt_sha256"][10:].tolist()
    # The 10 rows stored before the crash were served; the other 38 generated.
    assert _run_log(p, "generate")["line"] == (
        f"generate {MODEL}: 48 responses, 38 generated, 10 served from the store"
    )
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
    p.factory.crash_after = 1  # judge batch 0 (5 of the 16 OEQ prompts) stored, then it raises
    with pytest.raises(RuntimeError, match="fake crash in judge"):
        p.label()
    assert not p.labels.exists()
    assert p.count("judge") == 5
    first_five = p.factory.judge_prompts[:5]
    assert len(p.factory.judge_prompts) == 5

    p.factory.crash_after = None
    p.label()
    rest = p.factory.judge_prompts[5:]
    # 16 - 5 = 11 judged on the rerun, none of them one of the five already stored.
    assert len(rest) == 11
    assert not any(m in first_five for m in rest)
    assert p.count("judge") == 16
    assert _counts(p, "label")["OEQ"] == (11, 5)
    pd.testing.assert_frame_equal(pd.read_parquet(p.labels), ref_labels)


# --- a prompt that occurs twice --------------------------------------------------------------


def test_repeated_prompt_is_generated_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = _project(tmp_path, monkeypatch)
    cues = p.raw["templates"]["datasets"]["SS"]["cues"]
    cues["P4"] = cues["P3"]  # SS P3 and P4 now render the same prompt for each item
    p.write_params()
    p.all()
    prompts = pd.read_parquet(p.prompts)
    p3, p4 = _rows(prompts, "SS", "P3"), _rows(prompts, "SS", "P4")
    assert prompts[p3]["messages"].tolist() == prompts[p4]["messages"].tolist()
    # 48 rows, 46 distinct prompts: each generated once, at its first row (P3 precedes P4).
    assert prompts["messages"].nunique() == 46
    assert [r.key for r in p.factory.requests] == prompts[~p4]["prompt_sha256"].tolist()
    assert p.count("generation") == 46
    resp = pd.read_parquet(p.responses)
    # The repeated prompts (SS P4, 2 rows) count as served: only their first row was generated.
    assert _counts(p, "generate") == {"OEQ": (16, 0), "AITA-YTA": (16, 0), "SS": (14, 2)}
    assert resp[p4]["response"].tolist() == resp[p3]["response"].tolist()
