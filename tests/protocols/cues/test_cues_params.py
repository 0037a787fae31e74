"""``protocols.cues`` (SyPS's block of params.yaml): unknown keys and wrong types fail by full key
path (``protocols.cues.data.limit``); the cross-field checks of its data, templates, labels and
judge prompt. Its template texts are checked in test_cues_templates.py."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml
from conftest import read_params

from syps.core.config import ConfigError, parse
from syps.core.conversation import conversation_table
from syps.core.judge import judge_template_sha256
from syps.core.params import load_params
from syps.protocols import PROTOCOLS
from syps.protocols.cues.params import (
    WHERE,
    CuesParams,
    cue_of,
    order_variants,
    primary_variants,
)

P = "protocols.cues"


@pytest.fixture
def raw() -> dict[str, Any]:
    """A minimal valid ``protocols.cues`` block: two datasets, two variants."""
    return {
        "data": {
            "source": "builtin",
            "datasets": ["AITA-YTA", "SS"],
            "files": {"AITA-YTA": "data/builtin/AITA.csv", "SS": "data/builtin/SS.csv"},
            "columns": {
                "AITA-YTA": {"situation": "prompt", "verdict": "ytanta"},
                "SS": {"situation": "prompt"},
            },
            "elephant": {"urls": {}},
        },
        "templates": {
            "cue_position": "after",
            "datasets": {
                "AITA-YTA": {
                    "task": "Judge.",
                    "format": "Say YTA or NTA.",
                    "cues": {"P0": "", "P1": "I'm sure."},
                },
                "SS": {
                    "task": "Judge.",
                    "format": "Say AGREE or DISAGREE.",
                    "cues": {"P0": "", "P1": "I'm sure."},
                },
            },
        },
        "max_new_tokens": {"AITA-YTA": 64, "SS": 32},
        "labels": {
            "AITA-YTA": {"NTA": 1, "NAH": 1, "YTA": 0, "ESH": 0},
            "SS": {"AGREE": 1, "DISAGREE": 0},
        },
        "judge": {
            "system": "You grade answers.",
            "template": "{situation}\n{response}",
            "options": {"Yes": 1, "No": 0},
        },
    }


def _parse(raw: dict[str, Any]) -> CuesParams:
    """The block parsed and checked, as ``load_params`` parses ``protocols.cues``."""
    return parse(CuesParams, raw, WHERE)


def _err(raw: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as e:
        _parse(raw)
    return str(e.value)


def _at(raw: dict[str, Any], path: tuple[str, ...]) -> Any:
    node = raw
    for part in path:
        node = node[part]
    return node


# --- parse ----------------------------------------------------------------------------------


def test_minimal_block_parses_and_validates(raw: dict[str, Any]) -> None:
    p = _parse(raw)
    assert WHERE == P
    assert p.data.datasets == ["AITA-YTA", "SS"]
    assert p.templates.datasets["SS"].cues == {"P0": "", "P1": "I'm sure."}
    # Defaults fill what the block leaves out.
    assert p.enabled and p.replay == "visible"
    assert p.data.limit is None
    assert p.data.yta_value == "YTA"
    assert p.data.elephant.cache_dir == ".cache/elephant"
    # Greedy, one answer per prompt, 64 new tokens where a dataset has no length of its own.
    g = p.generation
    assert (g.temperature, g.top_p, g.reps, g.max_new_tokens) == (0.0, 1.0, 1, 64)
    assert p.max_new_tokens == {"AITA-YTA": 64, "SS": 32}


def test_parse_does_not_mutate_input(raw: dict[str, Any]) -> None:
    before = copy.deepcopy(raw)
    _parse(raw)
    assert raw == before


@pytest.mark.parametrize(
    ("path", "key", "where"),
    [
        ((), "sede", P),
        (("data",), "limt", f"{P}.data"),
        (("data", "elephant"), "urlz", f"{P}.data.elephant"),
        (("templates", "datasets", "SS"), "cue", f"{P}.templates.datasets.SS"),
        (("judge",), "model", f"{P}.judge"),  # the judge model is shared: top-level judge
        (("judge",), "min_margin", f"{P}.judge"),
    ],
)
def test_unknown_key_names_full_path(
    raw: dict[str, Any], path: tuple[str, ...], key: str, where: str
) -> None:
    _at(raw, path)[key] = 1
    assert _err(raw).startswith(f"{where}: unknown key(s) [{key!r}]")


@pytest.mark.parametrize(
    ("path", "value", "where"),
    [
        (("max_new_tokens", "SS"), False, "max_new_tokens.SS"),
        (("generation",), {"temperature": "0.7"}, "generation.temperature"),
        (("generation",), {"top_p": True}, "generation.top_p"),  # a bool is not a number
        (("data", "limit"), "5", "data.limit"),  # int | None
        (("data", "datasets"), "SS", "data.datasets"),  # a string for a list
        (("data", "source"), "web", "data.source"),  # not one of the literals
        (("templates", "cue_position"), "middle", "templates.cue_position"),
        (("templates", "datasets", "SS", "cues", "P1"), 3, "templates.datasets.SS.cues.P1"),
        (("labels", "SS", "AGREE"), "1", "labels.SS.AGREE"),
        (("judge", "system"), ["a"], "judge.system"),
        (("judge",), "embedded:smollm2", "judge"),  # a string for a mapping
        (("enabled",), "yes", "enabled"),
    ],
)
def test_wrong_type_names_key(
    raw: dict[str, Any], path: tuple[str, ...], value: Any, where: str
) -> None:
    _at(raw, path[:-1])[path[-1]] = value
    assert _err(raw).startswith(f"{P}.{where}: ")


def test_non_string_mapping_key(raw: dict[str, Any]) -> None:
    raw["labels"]["SS"] = {1: 1}
    with pytest.raises(ConfigError, match=r"^protocols\.cues\.labels\.SS: key 1 should be str$"):
        _parse(raw)


@pytest.mark.parametrize(
    "path",
    [
        ("data",),
        ("data", "columns"),
        ("data", "elephant", "urls"),
        ("templates", "datasets", "SS", "format"),
        ("judge",),
        ("judge", "template"),
    ],
)
def test_missing_required_key(raw: dict[str, Any], path: tuple[str, ...]) -> None:
    del _at(raw, path[:-1])[path[-1]]
    assert _err(raw) == f"{P}.{'.'.join(path)}: required key is missing"


def test_int_accepted_for_float(raw: dict[str, Any]) -> None:
    raw["generation"] = {"temperature": 1}
    p = _parse(raw)
    assert p.generation.temperature == 1.0 and type(p.generation.temperature) is float


def test_null_for_optional(raw: dict[str, Any]) -> None:
    raw["data"]["limit"] = None
    assert _parse(raw).data.limit is None
    raw["data"]["limit"] = 5
    assert _parse(raw).data.limit == 5


# --- validate -------------------------------------------------------------------------------


def test_validate_unknown_variant_in_cues(raw: dict[str, Any]) -> None:
    raw["templates"]["datasets"]["SS"]["cues"]["P8"] = "Extra cue."
    msg = _err(raw)
    assert msg.startswith(f"{P}.templates.datasets.SS.cues: ") and "'P8'" in msg


def test_validate_missing_p0(raw: dict[str, Any]) -> None:
    del raw["templates"]["datasets"]["AITA-YTA"]["cues"]["P0"]
    msg = _err(raw)
    assert msg.startswith(f"{P}.templates.datasets.AITA-YTA.cues: ") and "P0" in msg


def test_cue_wordings_become_variant_ids(raw: dict[str, Any]) -> None:
    cues = raw["templates"]["datasets"]["SS"]["cues"]
    cues["P3"] = ["Tell me I'm right.", "Please agree with me."]
    cues["P5"] = ["Only one wording."]
    got = _parse(raw).templates.datasets["SS"].variant_cues()
    # In cue order; two wordings get a and b, a one-item list keeps the plain id.
    assert [v for v in got if v.startswith(("P3", "P5"))] == ["P3a", "P3b", "P5"]
    assert got["P3b"] == "Please agree with me." and got["P5"] == "Only one wording."


def test_variant_id_helpers() -> None:
    assert cue_of("P3b") == "P3" and cue_of("P0") == "P0"
    with pytest.raises(ConfigError, match="P9"):
        cue_of("P9")
    assert order_variants(["P3b", "P1", "P0", "P3a"]) == ["P0", "P1", "P3a", "P3b"]
    assert primary_variants(["P0", "P3a", "P3b", "P1"]) == ["P0", "P1", "P3a"]


def test_validate_unknown_dataset(raw: dict[str, Any]) -> None:
    raw["data"]["datasets"].append("MMLU")
    msg = _err(raw)
    assert msg.startswith(f"{P}.data.datasets: ") and "'MMLU'" in msg


def test_validate_dataset_listed_twice(raw: dict[str, Any]) -> None:
    raw["data"]["datasets"] = ["SS", "AITA-YTA", "SS"]
    assert _err(raw).startswith(f"{P}.data.datasets: ")


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (lambda r: r["data"]["columns"]["AITA-YTA"].pop("verdict"), "data.columns.AITA-YTA"),
        (lambda r: r["data"]["columns"]["SS"].update(label="x"), "data.columns.SS"),
        (lambda r: r["data"]["files"].pop("SS"), "data.files"),
        (lambda r: r["templates"]["datasets"].pop("SS"), "templates.datasets"),
        (lambda r: r["max_new_tokens"].update(SS=0), "max_new_tokens.SS"),
        (lambda r: r["labels"].pop("SS"), "labels"),
        (lambda r: r["data"].update(limit=0), "data.limit"),
        (lambda r: r.update(generation={"reps": 2, "temperature": 0.7}), "generation.reps"),
        (
            lambda r: r["templates"]["datasets"]["SS"]["cues"].update(P0=["", "Hi."]),
            "templates.datasets.SS.cues.P0",
        ),
        (
            lambda r: r["templates"]["datasets"]["SS"]["cues"].update(P3=[]),
            "templates.datasets.SS.cues.P3",
        ),
        (
            lambda r: r["data"].update(source="elephant"),  # no URL for either dataset
            "data.elephant.urls.AITA-YTA",
        ),
    ],
)
def test_validate_cross_field_errors(raw: dict[str, Any], edit: Any, needle: str) -> None:
    edit(raw)
    assert _err(raw).startswith(f"{P}.{needle}: ")


def test_a_dataset_without_a_length_of_its_own_takes_the_generation_one(
    raw: dict[str, Any],
) -> None:
    raw["max_new_tokens"].pop("SS")
    raw["generation"] = {"max_new_tokens": 12}
    p = _parse(raw)
    items = pd.DataFrame(
        {
            "dataset": ["AITA-YTA", "SS"],
            "item_id": ["a1", "s1"],
            "row": [0, 0],
            "situation": ["I left.", "Cats are best."],
            "reference": ["YTA", ""],
        }
    )
    protocol = PROTOCOLS["cues"]
    built = protocol.requests(p, items, 1, pd.DataFrame(), None)
    table, _ = conversation_table(protocol, built, p.generation)
    # Two variants of each item: AITA-YTA at its own 64, SS at the generation's 12.
    assert list(zip(table["dataset"], table["max_new_tokens"], strict=True)) == [
        ("AITA-YTA", 64),
        ("AITA-YTA", 64),
        ("SS", 12),
        ("SS", 12),
    ]


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda r: r["labels"]["SS"].update(AGREE=2), "labels.SS.AGREE: must be 0 or 1, got 2"),
        (
            lambda r: r["labels"]["AITA-YTA"].update(ESH=-1),
            "labels.AITA-YTA.ESH: must be 0 or 1, got -1",
        ),
        (lambda r: r["judge"]["options"].update(No=5), "judge.options.No: must be 0 or 1, got 5"),
    ],
)
def test_validate_rejects_labels_other_than_0_or_1(
    raw: dict[str, Any], edit: Any, message: str, tmp_path: Path
) -> None:
    edit(raw)
    assert _err(raw) == f"{P}.{message}"
    # At params load too, prefixed with the file.
    full = read_params()
    full["protocols"]["cues"] = raw
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(full), encoding="utf-8")
    with pytest.raises(ConfigError) as e:
        load_params(path, PROTOCOLS)
    assert str(e.value) == f"{path}: {P}.{message}"


# --- judge options: UNCLEAR as an answer ----------------------------------------------------


def test_a_judge_option_may_be_null_for_unclear(raw: dict[str, Any]) -> None:
    raw["judge"]["options"] = {"YES": 1, "NO": 0, "UNCLEAR": None}
    assert _parse(raw).judge.options == {"YES": 1, "NO": 0, "UNCLEAR": None}


def test_judge_options_all_null_are_refused(raw: dict[str, Any]) -> None:
    raw["judge"]["options"] = {"UNCLEAR": None}
    assert _err(raw) == (
        f"{P}.judge.options: map at least one option to 1 or 0 (null is UNCLEAR), "
        "got {'UNCLEAR': None}"
    )


def test_the_default_judge_prompt_keeps_its_store_key() -> None:
    # The sha256 of the default OEQ prompt (system, template, {"YES": 1, "NO": 0}) that the
    # committed labels carry in judge_template_sha256: a new one would judge every OEQ
    # response again.
    judge = parse(CuesParams, read_params()["protocols"]["cues"], WHERE).judge
    assert judge.options == {"YES": 1, "NO": 0}
    assert judge_template_sha256(judge.system, judge.template, judge.options) == (
        "9945156a2b8bd5e3dd6f9422223cf5a4fef84980be398aa6fed5ebf7d2258723"
    )
