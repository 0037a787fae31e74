"""params.yaml parsing, the shared keys: unknown keys and wrong types fail by full key path;
cross-field checks; ``protocols`` holds every registered protocol's block; the layout before
SyPS became the protocol ``cues`` is refused in one line saying where each key moved.

SyPS's own block (``protocols.cues``) is tested in tests/protocols/cues/test_cues_params.py."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import read_params

from syps.core.config import ConfigError, Params, parse, validate
from syps.core.legacy import MOVED_KEYS as MOVED
from syps.core.params import load_params, params_from
from syps.protocols import PROTOCOLS
from syps.protocols.cues.params import CuesParams


@pytest.fixture
def raw() -> dict[str, Any]:
    """A minimal valid params dict: one model, the judge model, the simulator (adaptive
    pressure's simulated user), and every protocol's default block (the tests' fixture
    blocks)."""
    return {
        "seed": 42,
        "models": {"smollm2": {"model": "embedded:smollm2"}},
        "judge": {"model": {"model": "embedded:smollm2"}},
        "simulator": {"model": {"model": "embedded:smollm2"}},
        "protocols": read_params()["protocols"],
    }


def _parse(raw: dict[str, Any]) -> Params:
    """The shared keys parsed (types and unknown keys only, no cross-field checks)."""
    return parse(Params, {k: v for k, v in raw.items() if k != "protocols"})


def _err(raw: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as e:
        params_from(raw, PROTOCOLS)
    return str(e.value)


def _file(raw: dict[str, Any], path: Path) -> Path:
    path.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    return path


# --- parse ----------------------------------------------------------------------------------


def test_minimal_params_parse_and_validate(raw: dict[str, Any]) -> None:
    p = params_from(raw, PROTOCOLS)
    assert p.seed == 42
    # Defaults fill what the file leaves out.
    assert p.models["smollm2"].batch_size == 16
    assert p.models["smollm2"].revision is None
    assert p.score.bootstrap == 1000 and p.score.ci == 0.95
    assert p.score.min_items == 10 and p.score.max_unclear == 0.2
    assert p.judge.min_margin == 0.0
    assert p.tracking.experiment == "syps"
    # Every registered protocol's block, parsed by its own type, in params order.
    assert list(p.protocols) == list(PROTOCOLS)
    assert isinstance(p.protocols["cues"], CuesParams)
    assert p.enabled() == list(PROTOCOLS)


def test_parse_does_not_mutate_input(raw: dict[str, Any]) -> None:
    before = copy.deepcopy(raw)
    params_from(raw, PROTOCOLS)
    assert raw == before


@pytest.mark.parametrize(
    ("path", "key", "where"),
    [
        ((), "sede", ""),
        (("models", "smollm2"), "batchsize", "models.smollm2"),
        (("judge",), "temperature", "judge"),
        (("judge", "model"), "temperature", "judge.model"),
        (("protocols", "cues"), "limt", "protocols.cues"),
        (("protocols", "pushback"), "marign", "protocols.pushback"),
    ],
)
def test_unknown_key_names_full_path(
    raw: dict[str, Any], path: tuple[str, ...], key: str, where: str
) -> None:
    node = raw
    for part in path:
        node = node[part]
    node[key] = 1
    # Full key paths, as written in params.yaml and taken by `dvc exp run -S`; the top level
    # has none (load_params prefixes the file name).
    prefix = f"{where}: " if where else ""
    assert _err(raw).startswith(f"{prefix}unknown key(s) [{key!r}]")


@pytest.mark.parametrize(
    ("path", "value", "where"),
    [
        (("seed",), "42", "seed"),  # a string for an int
        (("seed",), True, "seed"),  # a bool for an int
        (("seed",), 4.2, "seed"),  # a float for an int
        (("models", "smollm2", "batch_size"), "16", "models.smollm2.batch_size"),
        (("judge", "min_margin"), "0.5", "judge.min_margin"),
        (("judge",), "embedded:smollm2", "judge"),  # a string for a mapping
        (("score",), {"bootstrap": 1.5}, "score.bootstrap"),
        (("protocols",), ["cues"], "protocols"),
        (("protocols", "betting", "enabled"), "yes", "protocols.betting.enabled"),
    ],
)
def test_wrong_type_names_key(
    raw: dict[str, Any], path: tuple[str, ...], value: Any, where: str
) -> None:
    node = raw
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    assert _err(raw).startswith(f"{where}: ")


def test_non_string_mapping_key(raw: dict[str, Any]) -> None:
    raw["models"] = {1: {"model": "embedded:smollm2"}}
    with pytest.raises(ConfigError, match=r"^models: key 1 should be str$"):
        _parse(raw)


@pytest.mark.parametrize(
    ("path", "where"),
    [
        (("seed",), "seed"),
        (("judge", "model"), "judge.model"),
        (("judge", "model", "model"), "judge.model.model"),
        (("protocols",), "protocols"),
    ],
)
def test_missing_required_key(raw: dict[str, Any], path: tuple[str, ...], where: str) -> None:
    node = raw
    for part in path[:-1]:
        node = node[part]
    del node[path[-1]]
    assert _err(raw) == f"{where}: required key is missing"


def test_every_protocol_needs_its_block(raw: dict[str, Any]) -> None:
    del raw["protocols"]["discernment"]
    assert _err(raw) == (
        "protocols.discernment: missing; every protocol needs a block "
        "(set `enabled: false` to switch it off)"
    )


def test_an_unknown_protocol_is_named(raw: dict[str, Any]) -> None:
    raw["protocols"]["syps"] = {}
    assert _err(raw) == f"protocols.syps: unknown protocol; known: {sorted(PROTOCOLS)}"


def test_the_protocols_may_come_in_any_order(raw: dict[str, Any]) -> None:
    # A researcher's block goes where they put it (the docs' fifth protocol at the end): syps
    # keeps the params order, and each block is still parsed by its own type.
    raw["protocols"] = dict(reversed(raw["protocols"].items()))
    raw["protocols"]["pushback"]["enabled"] = False
    p = params_from(raw, PROTOCOLS)
    assert list(p.protocols) == list(reversed(list(PROTOCOLS)))
    assert p.enabled() == [n for n in reversed(list(PROTOCOLS)) if n != "pushback"]
    assert isinstance(p.protocols["cues"], CuesParams)


def test_a_protocol_switched_off_keeps_its_block(raw: dict[str, Any]) -> None:
    raw["protocols"]["cues"]["enabled"] = False
    p = params_from(raw, PROTOCOLS)
    assert "cues" in p.protocols and "cues" not in p.enabled()


def test_int_accepted_for_float(raw: dict[str, Any]) -> None:
    raw["judge"]["min_margin"] = 2
    raw["score"] = {"bootstrap": 10, "ci": 0.9}
    p = _parse(raw)
    assert p.judge.min_margin == 2.0 and type(p.judge.min_margin) is float
    assert p.score.ci == 0.9


def test_null_for_optional(raw: dict[str, Any]) -> None:
    raw["models"]["smollm2"]["revision"] = None
    assert _parse(raw).models["smollm2"].revision is None


# --- validate -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (lambda r: r.update(models={}), "models"),
        (lambda r: r["models"].update({"bad name": {"model": "x"}}), "models.bad name"),
        (lambda r: r.update(score={"bootstrap": 0}), "score.bootstrap"),
        (lambda r: r.update(score={"ci": 1.0}), "score.ci"),
        (lambda r: r.update(score={"max_unclear": 1.5}), "score.max_unclear"),
        (lambda r: r.update(score={"min_items": 0}), "score.min_items"),
        (lambda r: r["models"]["smollm2"].update(max_unclear=-0.1), "models.smollm2.max_unclear"),
        (lambda r: r["judge"]["model"].update(batch_size=0), "judge.model.batch_size"),
    ],
)
def test_validate_cross_field_errors(raw: dict[str, Any], edit: Any, needle: str) -> None:
    edit(raw)
    with pytest.raises(ConfigError) as e:
        validate(_parse(raw))
    assert str(e.value).startswith(f"{needle}: ")


# --- the layout before SyPS became a protocol -------------------------------------------------

# What each old key says, by hand from the issue: SyPS's keys under protocols.cues, the judge
# model and margin staying shared.
OLD = {
    "data": "data -> protocols.cues.data",
    "templates": "templates -> protocols.cues.templates",
    "generation": "generation -> protocols.cues.generation (temperature, top_p), "
    "protocols.cues.max_new_tokens",
    "labels": "labels -> protocols.cues.labels",
    "judge.system": "judge.system -> protocols.cues.judge.system",
    "judge.template": "judge.template -> protocols.cues.judge.template",
    "judge.options": "judge.options -> protocols.cues.judge.options",
}


def _old_layout(raw: dict[str, Any]) -> dict[str, Any]:
    """``raw`` as params.yaml was before: SyPS's keys at the top and in ``judge``, no
    ``protocols``."""
    cues = raw["protocols"]["cues"]
    old = {k: v for k, v in raw.items() if k != "protocols"}
    old["data"], old["templates"], old["labels"] = cues["data"], cues["templates"], cues["labels"]
    old["generation"] = {
        "temperature": cues["generation"]["temperature"],
        "top_p": cues["generation"]["top_p"],
        "max_new_tokens": cues["max_new_tokens"],
    }
    old["judge"] = {**raw["judge"], **cues["judge"]}
    return old


def test_moved_says_where_each_old_key_went() -> None:
    assert {k: f"{k} -> {v}" for k, v in MOVED.items()} == OLD


def test_the_old_layout_is_refused_in_one_line_naming_each_move(
    raw: dict[str, Any], tmp_path: Path
) -> None:
    path = _file(_old_layout(raw), tmp_path / "params.yaml")
    with pytest.raises(ConfigError) as e:
        load_params(path, PROTOCOLS)
    msg = str(e.value)
    assert "\n" not in msg
    assert msg == f"{path}: keys of an older layout moved: " + "; ".join(OLD.values())


@pytest.mark.parametrize("key", list(OLD))
def test_each_old_key_alone_is_named(raw: dict[str, Any], key: str) -> None:
    # The new layout with one old key left over: refused, naming that key only, even though
    # protocols is there (the old key would otherwise be silently ignored or be a bare
    # "unknown key").
    old = _old_layout(raw)
    if "." in key:
        raw["judge"][key.split(".", 1)[1]] = old["judge"][key.split(".", 1)[1]]
    else:
        raw[key] = old[key]
    assert _err(raw) == f"keys of an older layout moved: {OLD[key]}"


def test_the_judge_model_and_margin_are_not_old_keys(raw: dict[str, Any]) -> None:
    raw["judge"]["min_margin"] = 0.5
    assert params_from(raw, PROTOCOLS).judge.min_margin == 0.5


# --- load_params ----------------------------------------------------------------------------


def test_load_params_from_file(raw: dict[str, Any], tmp_path: Path) -> None:
    assert load_params(_file(raw, tmp_path / "params.yaml"), PROTOCOLS).seed == 42


def test_load_params_errors_name_the_file(raw: dict[str, Any], tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="file not found"):
        load_params(tmp_path / "absent.yaml", PROTOCOLS)
    bad = tmp_path / "bad.yaml"
    bad.write_text("seed: [1\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="not valid YAML") as e:
        load_params(bad, PROTOCOLS)
    assert str(bad) in str(e.value)
    raw["sede"] = 1
    typo = _file(raw, tmp_path / "typo.yaml")
    with pytest.raises(ConfigError) as e:
        load_params(typo, PROTOCOLS)
    assert str(e.value).startswith(f"{typo}: unknown key(s) ['sede']")
    raw.pop("sede")
    raw["protocols"]["cues"]["data"]["limit"] = "five"
    deep = _file(raw, tmp_path / "deep.yaml")
    with pytest.raises(ConfigError) as e:
        load_params(deep, PROTOCOLS)
    assert str(e.value) == f"{deep}: protocols.cues.data.limit: expected an integer, got 'five'"


def test_yaml_12_booleans(raw: dict[str, Any], tmp_path: Path) -> None:
    # `dvc exp run -S` rewrites params.yaml with a YAML 1.2 writer that leaves YES/NO keys
    # unquoted; under YAML 1.1 they would be booleans and the judge options would break.
    raw["protocols"]["cues"]["judge"]["options"] = {"YES": 1, "NO": 0}
    text = yaml.safe_dump(raw, sort_keys=False).replace("'YES'", "YES").replace("'NO'", "NO")
    assert "        YES: 1\n        NO: 0\n" in text  # unquoted, as DVC writes them
    path = tmp_path / "params.yaml"
    path.write_text(text, encoding="utf-8")
    assert load_params(path, PROTOCOLS).protocols["cues"].judge.options == {"YES": 1, "NO": 0}  # type: ignore[attr-defined]


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
        (
            {"dtype": "bfloat16"},
            "models.api.dtype: bfloat16 cannot be chosen for an openai model: the server decides "
            "its number format",
        ),
        ({"dtype": "bf16"}, "models.api.dtype: expected one of ['auto', 'float32', 'bfloat16'"),
    ],
)
def test_api_model_settings_rejected(raw: dict[str, Any], kw: dict[str, Any], message: str) -> None:
    _api(raw, **kw)
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        validate(_parse(raw))


def test_auto_dtype_over_cpu_and_gpu_devices_is_refused(raw: dict[str, Any]) -> None:
    raw["models"]["smollm2"].update(devices=["cpu", "cuda:0"])
    assert _err(raw) == (
        "models.smollm2.dtype: auto over CPU and GPU devices (cpu, cuda:0) would generate in "
        "two formats; declare the dtype (float32, bfloat16 or float16)"
    )
    raw["models"]["smollm2"].update(dtype="float32")
    assert validate(_parse(raw)).models["smollm2"].dtype == "float32"


@pytest.mark.parametrize("kw", [{"identity": "w"}, {"mode": "batch"}])
def test_identity_and_mode_are_for_api_models_only(raw: dict[str, Any], kw: dict[str, Any]) -> None:
    raw["models"]["smollm2"].update(kw)
    assert "models.smollm2: identity and mode apply to the openai backend only" in _err(raw)


# --- which conversations become MLflow traces ---------------------------------------------------
def test_tracking_traces_default_to_all_and_parse(raw: dict[str, Any]) -> None:
    t = validate(_parse(raw)).tracking
    assert (t.traces, t.trace_sample) == ("all", 20)
    raw["tracking"] = {"traces": "sample", "trace_sample": 5}
    t = validate(_parse(raw)).tracking
    assert (t.traces, t.trace_sample) == ("sample", 5)


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"traces": "some"}, "tracking.traces: expected one of ['all', 'none', 'sample']"),
        ({"trace_sample": 0}, "tracking.trace_sample: must be at least 1"),
        ({"trace": "all"}, "tracking: unknown key"),
    ],
)
def test_tracking_traces_rejected(raw: dict[str, Any], kw: dict[str, Any], message: str) -> None:
    raw["tracking"] = kw
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        validate(_parse(raw))


# --- the vllm backend's engine settings ---------------------------------------------------------
def test_vllm_engine_settings_parse(raw: dict[str, Any]) -> None:
    raw["models"]["smollm2"].update(
        backend="vllm", max_model_len=4096, memory_share=0.5, tensor_parallel_size=2
    )
    spec = validate(_parse(raw)).models["smollm2"]
    assert (spec.max_model_len, spec.memory_share, spec.tensor_parallel_size) == (4096, 0.5, 2)
    assert spec.enforce_eager is False


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"memory_share": 0.5}, "models.smollm2: memory_share apply to the vllm backend only"),
        (
            {"enforce_eager": True, "tensor_parallel_size": 2},
            "models.smollm2: tensor_parallel_size, enforce_eager apply to the vllm backend only",
        ),
        ({"backend": "vllm", "memory_share": 0}, "models.smollm2.memory_share: must lie in"),
        ({"backend": "vllm", "memory_share": 1.5}, "models.smollm2.memory_share: must lie in"),
        ({"backend": "vllm", "max_model_len": 0}, "models.smollm2.max_model_len: must be at least"),
        (
            {"backend": "vllm", "tensor_parallel_size": 0},
            "models.smollm2.tensor_parallel_size: must be at least 1",
        ),
        (
            {"backend": "vllm", "devices": ["cuda:0"]},
            "models.smollm2.devices: the vllm backend uses the GPUs it can see: choose them with "
            "CUDA_VISIBLE_DEVICES",
        ),
        (
            {"backend": "vllm", "base_url": "http://h/v1"},
            "models.smollm2: base_url and api_key_env apply to the openai backend only",
        ),
        (
            {"backend": "vllm", "identity": "x"},
            "models.smollm2: identity and mode apply to the openai backend only",
        ),
    ],
)
def test_vllm_engine_settings_rejected(
    raw: dict[str, Any], kw: dict[str, Any], message: str
) -> None:
    raw["models"]["smollm2"].update(kw)
    assert _err(raw).startswith(message)
