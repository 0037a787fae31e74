"""params.yaml parsing: unknown keys and wrong types fail by key path; cross-field checks."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from syps.core.config import ConfigError, Params, load_params, parse, validate
from syps.protocols.cues.params import cue_of, order_variants, primary_variants

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def raw() -> dict[str, Any]:
    """A minimal valid params dict: two datasets, two variants, one model."""
    return {
        "seed": 42,
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
        "models": {"smollm2": {"model": "embedded:smollm2"}},
        "generation": {"max_new_tokens": {"AITA-YTA": 64, "SS": 32}},
        "labels": {
            "AITA-YTA": {"NTA": 1, "NAH": 1, "YTA": 0, "ESH": 0},
            "SS": {"AGREE": 1, "DISAGREE": 0},
        },
        "judge": {
            "model": {"model": "embedded:smollm2"},
            "system": "You grade answers.",
            "template": "{situation}\n{response}",
            "options": {"Yes": 1, "No": 0},
        },
    }


def _parse(raw: dict[str, Any]) -> Params:
    return parse(Params, raw)


def _err(raw: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as e:
        validate(_parse(raw))
    return str(e.value)


# --- parse ----------------------------------------------------------------------------------


def test_minimal_params_parse_and_validate(raw: dict[str, Any]) -> None:
    p = validate(_parse(raw))
    assert p.seed == 42
    assert p.data.datasets == ["AITA-YTA", "SS"]
    assert p.templates.datasets["SS"].cues == {"P0": "", "P1": "I'm sure."}
    # Defaults fill what the file leaves out.
    assert p.models["smollm2"].batch_size == 16
    assert p.models["smollm2"].revision is None
    assert p.data.limit is None
    assert p.data.yta_value == "YTA"
    assert p.score.bootstrap == 1000 and p.score.ci == 0.95
    assert p.score.min_items == 10
    assert p.judge.min_margin == 0.0
    assert p.data.elephant.cache_dir == ".cache/elephant"


def test_parse_does_not_mutate_input(raw: dict[str, Any]) -> None:
    before = copy.deepcopy(raw)
    _parse(raw)
    assert raw == before


@pytest.mark.parametrize(
    ("path", "key", "where"),
    [
        ((), "sede", ""),
        (("data",), "limt", "data"),
        (("data", "elephant"), "urlz", "data.elephant"),
        (("templates", "datasets", "SS"), "cue", "templates.datasets.SS"),
        (("models", "smollm2"), "batchsize", "models.smollm2"),
        (("judge", "model"), "temperature", "judge.model"),
    ],
)
def test_unknown_key_names_full_path(
    raw: dict[str, Any], path: tuple[str, ...], key: str, where: str
) -> None:
    node = raw
    for part in path:
        node = node[part]
    node[key] = 1
    with pytest.raises(ConfigError) as e:
        _parse(raw)
    # Bare key paths, as written in params.yaml and taken by `dvc exp run -S`; the top level
    # has none (load_params prefixes the file name).
    prefix = f"{where}: " if where else ""
    assert str(e.value).startswith(f"{prefix}unknown key(s) [{key!r}]")


@pytest.mark.parametrize(
    ("path", "value", "where"),
    [
        (("seed",), "42", "seed"),  # a string for an int
        (("seed",), True, "seed"),  # a bool for an int
        (("seed",), 4.2, "seed"),  # a float for an int
        (("models", "smollm2", "batch_size"), "16", "models.smollm2.batch_size"),
        (("generation", "max_new_tokens", "SS"), False, "generation.max_new_tokens.SS"),
        (("generation", "temperature"), "0.7", "generation.temperature"),
        (("generation", "top_p"), True, "generation.top_p"),  # a bool is not a number
        (("data", "limit"), "5", "data.limit"),  # int | None
        (("data", "datasets"), "SS", "data.datasets"),  # a string for a list
        (("data", "source"), "web", "data.source"),  # not one of the literals
        (("templates", "cue_position"), "middle", "templates.cue_position"),
        (("templates", "datasets", "SS", "cues", "P1"), 3, "templates.datasets.SS.cues.P1"),
        (("labels", "SS", "AGREE"), "1", "labels.SS.AGREE"),
        (("judge", "system"), ["a"], "judge.system"),
        (("judge",), "embedded:smollm2", "judge"),  # a string for a mapping
    ],
)
def test_wrong_type_names_key(
    raw: dict[str, Any], path: tuple[str, ...], value: Any, where: str
) -> None:
    node = raw
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    with pytest.raises(ConfigError) as e:
        _parse(raw)
    assert str(e.value).startswith(f"{where}: ")


def test_non_string_mapping_key(raw: dict[str, Any]) -> None:
    raw["labels"]["SS"] = {1: 1}
    with pytest.raises(ConfigError, match=r"^labels\.SS: key 1 should be str$"):
        _parse(raw)


@pytest.mark.parametrize(
    ("path", "where"),
    [
        (("seed",), "seed"),
        (("data", "columns"), "data.columns"),
        (("data", "elephant", "urls"), "data.elephant.urls"),
        (("templates", "datasets", "SS", "format"), "templates.datasets.SS.format"),
        (("judge", "template"), "judge.template"),
        (("judge", "model", "model"), "judge.model.model"),
    ],
)
def test_missing_required_key(raw: dict[str, Any], path: tuple[str, ...], where: str) -> None:
    node = raw
    for part in path[:-1]:
        node = node[part]
    del node[path[-1]]
    with pytest.raises(ConfigError) as e:
        _parse(raw)
    assert str(e.value) == f"{where}: required key is missing"


def test_int_accepted_for_float(raw: dict[str, Any]) -> None:
    raw["generation"]["temperature"] = 1
    raw["judge"]["min_margin"] = 2
    raw["score"] = {"bootstrap": 10, "ci": 0.9}
    p = _parse(raw)
    assert p.generation.temperature == 1.0 and type(p.generation.temperature) is float
    assert p.judge.min_margin == 2.0 and type(p.judge.min_margin) is float


def test_null_for_optional(raw: dict[str, Any]) -> None:
    raw["data"]["limit"] = None
    raw["models"]["smollm2"]["revision"] = None
    p = _parse(raw)
    assert p.data.limit is None and p.models["smollm2"].revision is None
    raw["data"]["limit"] = 5
    assert _parse(raw).data.limit == 5


# --- validate -------------------------------------------------------------------------------


def test_validate_unknown_variant_in_cues(raw: dict[str, Any]) -> None:
    raw["templates"]["datasets"]["SS"]["cues"]["P8"] = "Extra cue."
    msg = _err(raw)
    assert "templates.datasets.SS.cues" in msg and "'P8'" in msg


def test_validate_missing_p0(raw: dict[str, Any]) -> None:
    del raw["templates"]["datasets"]["AITA-YTA"]["cues"]["P0"]
    msg = _err(raw)
    assert "templates.datasets.AITA-YTA.cues" in msg and "P0" in msg


def test_cue_wordings_become_variant_ids(raw: dict[str, Any]) -> None:
    cues = raw["templates"]["datasets"]["SS"]["cues"]
    cues["P3"] = ["Tell me I'm right.", "Please agree with me."]
    cues["P5"] = ["Only one wording."]
    got = validate(parse(Params, raw)).templates.datasets["SS"].variant_cues()
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
    assert "data.datasets" in msg and "'MMLU'" in msg


def test_validate_dataset_listed_twice(raw: dict[str, Any]) -> None:
    raw["data"]["datasets"] = ["SS", "AITA-YTA", "SS"]
    assert "data.datasets" in _err(raw)


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (lambda r: r["data"]["columns"]["AITA-YTA"].pop("verdict"), "data.columns.AITA-YTA"),
        (lambda r: r["data"]["columns"]["SS"].update(label="x"), "data.columns.SS"),
        (lambda r: r["data"]["files"].pop("SS"), "data.files"),
        (lambda r: r["templates"]["datasets"].pop("SS"), "templates.datasets"),
        (lambda r: r["generation"]["max_new_tokens"].pop("SS"), "generation.max_new_tokens"),
        (lambda r: r["labels"].pop("SS"), "labels"),
        (lambda r: r.update(models={}), "models"),
        (lambda r: r["models"].update({"bad name": {"model": "x"}}), "models.bad name"),
        (lambda r: r.update(score={"bootstrap": 0}), "score.bootstrap"),
        (lambda r: r.update(score={"ci": 1.0}), "score.ci"),
        (lambda r: r["data"].update(limit=0), "data.limit"),
        (lambda r: r.update(score={"max_unclear": 1.5}), "score.max_unclear"),
        (lambda r: r.update(score={"min_items": 0}), "score.min_items"),
        (lambda r: r["models"]["smollm2"].update(max_unclear=-0.1), "models.smollm2.max_unclear"),
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
            "data.elephant.urls",
        ),
    ],
)
def test_validate_cross_field_errors(raw: dict[str, Any], edit: Any, needle: str) -> None:
    edit(raw)
    assert needle in _err(raw)


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
    assert _err(raw) == message
    # At params load too, prefixed with the file.
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    with pytest.raises(ConfigError) as e:
        load_params(path)
    assert str(e.value) == f"{path}: {message}"


@pytest.mark.parametrize(
    ("key", "value", "where"),
    [
        ("task", "Judge {situation}.", "templates.datasets.SS.task"),
        ("format", "Answer {user}: AGREE or DISAGREE.", "templates.datasets.SS.format"),
        ("format", "Answer {{situation}}.", "templates.datasets.SS.format"),  # Jinja style
        ("cues.P1", "${situation}, I'm sure.", "templates.datasets.SS.cues.P1"),
        ("cues.P1", ["I'm sure.", "Trust me on {topic}."], "templates.datasets.SS.cues.P1[1]"),
    ],
)
def test_validate_rejects_placeholders_in_dataset_templates(
    raw: dict[str, Any], key: str, value: Any, where: str
) -> None:
    node = raw["templates"]["datasets"]["SS"]
    *parents, last = key.split(".")
    for part in parents:
        node = node[part]
    node[last] = value
    msg = _err(raw)
    assert msg.startswith(f"{where}: {{")
    assert "The situation is placed automatically, with the cue after it" in msg


def test_validate_names_the_cue_position(raw: dict[str, Any]) -> None:
    raw["templates"]["cue_position"] = "before"
    raw["templates"]["datasets"]["SS"]["cues"]["P1"] = "About {situation}: I'm sure."
    assert "with the cue before it" in _err(raw)


def test_literal_braces_are_not_placeholders(raw: dict[str, Any]) -> None:
    tpl = raw["templates"]["datasets"]["SS"]
    tpl["format"] = 'Reply {"verdict": "AGREE"} or {0}; {{ and }} stay, so do { x } and {1a}.'
    tpl["cues"]["P1"] = ["I'm sure {", "} of it."]
    raw["judge"]["template"] = 'Q: {situation}\nA: {response}\nReply {"v": 1} or {{'
    validate(_parse(raw))


@pytest.mark.parametrize(
    ("template", "needle"),
    [
        ("Only {response}", "judge.template: the template must contain ['{situation}']"),
        ("Only {situation}", "judge.template: the template must contain ['{response}']"),
        ("No placeholders at all", "['{response}', '{situation}']"),
        (
            "{question} {situation} {response}",
            "judge.template: unknown placeholder(s) ['{question}']; "
            "allowed: ['{response}', '{situation}']",
        ),
    ],
)
def test_validate_checks_the_judge_template(
    raw: dict[str, Any], template: str, needle: str
) -> None:
    raw["judge"]["template"] = template
    assert needle in _err(raw)


def test_validate_rejects_placeholders_in_the_judge_system(raw: dict[str, Any]) -> None:
    raw["judge"]["system"] = "You grade replies about {situation}."
    assert _err(raw).startswith("judge.system: {situation}")


# --- load_params ----------------------------------------------------------------------------


def test_load_params_from_file(raw: dict[str, Any], tmp_path: Path) -> None:
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    assert load_params(path).seed == 42


def test_load_params_errors_name_the_file(raw: dict[str, Any], tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="file not found"):
        load_params(tmp_path / "absent.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("seed: [1\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="not valid YAML") as e:
        load_params(bad)
    assert str(bad) in str(e.value)
    raw["sede"] = 1
    typo = tmp_path / "typo.yaml"
    typo.write_text(yaml.safe_dump(raw), encoding="utf-8")
    with pytest.raises(ConfigError) as e:
        load_params(typo)
    assert str(e.value).startswith(f"{typo}: unknown key(s) ['sede']")


def test_repo_params_yaml_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    if not (REPO / "params.yaml").exists():
        pytest.skip("params.yaml does not exist in the repository yet")
    monkeypatch.chdir(REPO)
    p = load_params("params.yaml")
    assert p.data.datasets
    assert p.models


def test_yaml_12_booleans(raw: dict[str, Any], tmp_path: Path) -> None:
    # `dvc exp run -S` rewrites params.yaml with a YAML 1.2 writer that leaves YES/NO keys
    # unquoted; under YAML 1.1 they would be booleans and the judge options would break.
    raw["judge"]["options"] = {"YES": 1, "NO": 0}
    text = yaml.safe_dump(raw, sort_keys=False).replace("'YES'", "YES").replace("'NO'", "NO")
    assert "    YES: 1\n    NO: 0\n" in text  # unquoted, as DVC writes them
    path = tmp_path / "params.yaml"
    path.write_text(text, encoding="utf-8")
    assert load_params(path).judge.options == {"YES": 1, "NO": 0}


# --- API model settings: identity, price, mode -------------------------------------------------
def _api(raw: dict[str, Any], **kw: Any) -> dict[str, Any]:
    raw["models"]["api"] = {"backend": "openai", "model": "m", "base_url": "http://h/v1", **kw}
    return raw


def test_api_model_identity_price_and_mode_parse(raw: dict[str, Any]) -> None:
    p = validate(_parse(_api(raw, identity="sha256:ab", price={"input": 2.5, "output": 10})))
    spec = p.models["api"]
    assert spec.identity == "sha256:ab" and spec.mode == "online"
    assert spec.price is not None and (spec.price.input, spec.price.output) == (2.5, 10.0)
    assert validate(_parse(_api(raw, mode="batch"))).models["api"].mode == "batch"


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"mode": "offline"}, "models.api.mode: expected one of ['online', 'batch']"),
        ({"price": {"input": 1.0}}, "models.api.price.output: required key is missing"),
        ({"price": {"input": 1, "output": 2, "cached": 0.5}}, "models.api.price: unknown key"),
        ({"price": {"input": -1, "output": 2}}, "models.api.price: input and output must be 0"),
        ({"identity": " "}, "models.api.identity: must not be empty"),
    ],
)
def test_api_model_settings_rejected(raw: dict[str, Any], kw: dict[str, Any], message: str) -> None:
    _api(raw, **kw)
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        validate(_parse(raw))


@pytest.mark.parametrize("kw", [{"identity": "w"}, {"mode": "batch"}])
def test_identity_and_mode_are_for_api_models_only(raw: dict[str, Any], kw: dict[str, Any]) -> None:
    raw["models"]["smollm2"].update(kw)
    assert "models.smollm2: identity and mode apply to the openai backend only" in _err(raw)
