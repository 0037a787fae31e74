"""Typed, frozen view of params.yaml.

Parsed once per stage; an unknown key or a wrong type is an error naming the key path, so a typo
in params.yaml fails loudly instead of silently falling back to a default.
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar, Union, get_args, get_origin

import yaml


class ConfigError(ValueError):
    """A params value is missing, unknown or of the wrong type; the message names the key."""


@dataclass(frozen=True)
class Price:
    """USD per million tokens, as a provider's price list states it."""

    input: float
    output: float


@dataclass(frozen=True)
class ModelSpec:
    """A model and the backend that serves it.

    ``hf`` and ``vllm`` (the local backends): ``model`` is ``embedded:smollm2``, a Hugging Face
    id (pin ``revision``) or a local directory; ``hf`` runs it through transformers, ``vllm``
    through vLLM's offline engine (``syps.core.backends.vllm_engine``). ``openai``: ``model``
    is the served model name at ``base_url`` (OpenAI, vLLM, SGLang, llama.cpp ...); the API
    key is read from the environment variable *named* by ``api_key_env`` and never appears in
    params, outputs or logs.

    ``identity`` is the user's declaration of the weights behind an API model (a weights hash,
    a release name): with it, or with ``revision``, the response store keys the model by what
    it is rather than by where it is served (see ``syps.core.backends.model_identity``).
    """

    model: str
    backend: Literal["hf", "vllm", "openai"] = "hf"
    revision: str | None = None
    batch_size: int = 16
    # hf: devices to spread batches over, one worker process each (["cuda:0", "cuda:1"]);
    # null = every visible GPU (one worker per GPU when there are several), else the CPU.
    devices: list[str] | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    concurrency: int = 16
    max_retries: int = 8
    timeout_s: float = 120.0
    # Overrides score.max_unclear for this model (see ScoreParams).
    max_unclear: float | None = None
    # Number of parameters, for the SPSS-vs-size figure; hf models default to their config.
    size: float | None = None
    # openai: what the served weights are, for the store key (see the class docstring).
    identity: str | None = None
    # USD per million input / output tokens (`syps plan` prices what a run would send); None =
    # cost unknown (tokens are still counted).
    price: Price | None = None
    # openai: "batch" sends missing requests through the Batch API
    # (syps.core.backends.openai_batch).
    mode: Literal["online", "batch"] = "online"
    # hf and vllm: the number format of the weights and the computation; "auto": bfloat16 on a GPU,
    # float32 on the CPU (see syps.core.backends.local_dtype). Part of the store key: the same
    # weights in bf16 and fp32 answer differently. openai: the server's choice, so "auto".
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    # vllm: the engine's settings. max_model_len: the most tokens (prompt and new) a request
    # may hold (null: the model's context). memory_share: on a GPU the share of its memory the
    # engine takes (vLLM's gpu_memory_utilization; null: 0.9), on a CPU the share of the RAM
    # available at start that it takes for the KV cache (null: 0.1; see
    # syps.core.backends.vllm_engine). Neither changes an answer, so neither is in the store
    # key. tensor_parallel_size (GPUs one model is split over) and enforce_eager (no CUDA
    # graphs or compiled kernels) change the order of the sums, hence the answers: both are in
    # the key.
    max_model_len: int | None = None
    memory_share: float | None = None
    tensor_parallel_size: int = 1
    enforce_eager: bool = False


# The backends that run weights on this machine (keyed by their resolved revision or hash).
LOCAL_BACKENDS = ("hf", "vllm")


@dataclass(frozen=True)
class JudgeParams:
    """The LLM judge every protocol shares: a model that scores each allowed answer by its
    next-token log-probability. What it is asked (system text, template, options) belongs to
    the protocol that asks."""

    model: ModelSpec
    # A verdict whose log-probability lead is below this margin is UNCLEAR.
    min_margin: float = 0.0


@dataclass(frozen=True, kw_only=True)
class SimulatorParams:
    """The simulated user of the designs whose user turns are written by a model (the
    ``simulator`` block; see ``syps.core.protocol.SIMULATOR``). Declared like the judge: its own
    model block, any backend. The target may be its own simulator: the same block here as
    under ``models`` is the same identity, and the model is loaded once. Its turns are
    generations through the response store, keyed by this model's identity, these sampling
    settings and the request the protocol writes (the simulator's instructions, the tactic and
    the conversation so far) with its repetition."""

    model: ModelSpec
    max_new_tokens: int = 64
    temperature: float = 0.0
    top_p: float = 1.0


@dataclass(frozen=True)
class ScoreParams:
    bootstrap: int = 1000
    ci: float = 0.95
    # The score stage fails if any (model, dataset, variant) has a larger share of UNCLEAR
    # labels: its metrics would rest on the responses that happened to be parseable.
    max_unclear: float = 0.2
    # A CI resting on fewer items than this is marked low-support (``<metric>_low_support``)
    # in the summary table, metrics.json, MLflow and ``syps compare``; it is still shown.
    min_items: int = 10


@dataclass(frozen=True)
class TrackingParams:
    """Where runs are logged, and which conversations become MLflow traces (see
    ``syps.core.traces``): ``all``, ``none``, or ``sample``: per (protocol, model, dataset,
    cell), up to ``trace_sample`` conversations of each kind: UNCLEAR or skipped, flagged (a
    flip, a cave), the rest."""

    experiment: str = "syps"
    traces: Literal["all", "none", "sample"] = "all"
    trace_sample: int = 20


@dataclass(frozen=True, kw_only=True)
class ConvGeneration:
    """How a protocol's requests are generated: ``reps`` repetitions of each request, each
    sampled with its own seed (derived from the run seed and the request's store key, so a
    repetition's output does not depend on which requests share its batch)."""

    max_new_tokens: int = 64
    temperature: float = 0.0
    top_p: float = 1.0
    reps: int = 1


@dataclass(frozen=True, kw_only=True)
class ProtocolParams:
    """The keys every ``protocols.<name>`` block has; a protocol's params subclass this
    (``@dataclass(frozen=True, kw_only=True)``) and add their own.

    ``replay``: how an earlier assistant turn is put into a later conversation. Only
    ``visible`` exists (the response text verbatim, nothing hidden such as reasoning); it is a
    param so that the choice is logged with every run.
    """

    enabled: bool = True
    generation: ConvGeneration = field(default_factory=ConvGeneration)
    replay: Literal["visible"] = "visible"


def check_sampling(gen: ConvGeneration, needs_sampling_for_reps: bool, where: str) -> None:
    """Refuse what would measure nothing: greedy decoding repeated (identical repetitions)."""
    if gen.reps < 1:
        raise ConfigError(f"{where}.generation.reps: must be at least 1, got {gen.reps}")
    if gen.max_new_tokens < 1:
        raise ConfigError(
            f"{where}.generation.max_new_tokens: must be at least 1, got {gen.max_new_tokens}"
        )
    if needs_sampling_for_reps and gen.reps > 1 and gen.temperature == 0:
        raise ConfigError(
            f"{where}.generation: reps = {gen.reps} with temperature 0 (greedy decoding) gives "
            f"{gen.reps} identical answers, so there is no variance to measure; set "
            f"{where}.generation.temperature above 0 (e.g. 0.7) or reps to 1"
        )


@dataclass(frozen=True)
class Params:
    """params.yaml: the shared keys, and each protocol's block parsed by its own type
    (``protocols.<name>``; see ``syps.core.params.load_params``)."""

    seed: int
    models: dict[str, ModelSpec]
    judge: JudgeParams
    # None: no design may ask for a simulated user's turn.
    simulator: SimulatorParams | None = None
    score: ScoreParams = field(default_factory=ScoreParams)
    tracking: TrackingParams = field(default_factory=TrackingParams)
    protocols: dict[str, ProtocolParams] = field(default_factory=dict)

    def enabled(self) -> list[str]:
        """The protocols that run, in params order."""
        return [n for n, p in self.protocols.items() if p.enabled]


T = TypeVar("T")
_MODEL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def parse(cls: type[T], raw: Any, where: str = "") -> T:
    """Build ``cls`` from plain YAML data, rejecting unknown keys and wrong types by key path.

    Key paths are bare, as a user writes them and as ``dvc exp run -S`` takes them
    (``templates.datasets.SS.cues.P3``); ``where`` is the path of ``raw`` itself, "" at the top.
    """
    return typing.cast(T, _parse(cls, raw, where))


def _at(where: str, text: str) -> str:
    """``text`` prefixed with the key path ``where`` (nothing at the top level: the caller
    prefixes the file name)."""
    return f"{where}: {text}" if where else text


def _key(where: str, name: object) -> str:
    return f"{where}.{name}" if where else str(name)


def _parse(tp: Any, raw: Any, where: str) -> Any:
    origin = get_origin(tp)
    if isinstance(tp, type) and hasattr(tp, "syps_parse"):  # a type that parses itself
        return tp.syps_parse(raw, where)
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        if not isinstance(raw, dict):
            raise ConfigError(_at(where, f"expected a mapping, got {type(raw).__name__}"))
        hints = typing.get_type_hints(tp)
        fields = {f.name: f for f in dataclasses.fields(tp)}
        unknown = sorted(set(raw) - set(fields))
        if unknown:
            raise ConfigError(_at(where, f"unknown key(s) {unknown}; allowed: {sorted(fields)}"))
        kwargs = {}
        for name, f in fields.items():
            if name in raw:
                kwargs[name] = _parse(hints[name], raw[name], _key(where, name))
            elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise ConfigError(f"{_key(where, name)}: required key is missing")
        return tp(**kwargs)
    if origin in (Union, types.UnionType):
        args = get_args(tp)
        if raw is None and type(None) in args:
            return None
        errors = []
        for arg in (a for a in args if a is not type(None)):
            try:
                return _parse(arg, raw, where)
            except ConfigError as e:
                errors.append(str(e))
        raise ConfigError("; ".join(errors))
    if origin is Literal:
        if raw not in get_args(tp):
            raise ConfigError(f"{where}: expected one of {list(get_args(tp))}, got {raw!r}")
        return raw
    if origin is list:
        if not isinstance(raw, list):
            raise ConfigError(f"{where}: expected a list, got {type(raw).__name__}")
        (item,) = get_args(tp)
        return [_parse(item, v, f"{where}[{i}]") for i, v in enumerate(raw)]
    if origin is dict:
        if not isinstance(raw, dict):
            raise ConfigError(f"{where}: expected a mapping, got {type(raw).__name__}")
        key_t, val_t = get_args(tp)
        out = {}
        for k, v in raw.items():
            if not isinstance(k, key_t):
                raise ConfigError(f"{where}: key {k!r} should be {key_t.__name__}")
            out[k] = _parse(val_t, v, _key(where, k))
        return out
    if tp is float:
        # YAML writes 1 for 1.0; an int is a fine float, a bool is not.
        if isinstance(raw, int | float) and not isinstance(raw, bool):
            return float(raw)
        raise ConfigError(f"{where}: expected a number, got {raw!r}")
    if tp is int:
        if isinstance(raw, int) and not isinstance(raw, bool):
            return raw
        # DVC reads 1e3 as 1000.0 and compares params by value (1000.0 == 1000 is unchanged),
        # so an integral float is that integer, as it is to DVC; 1000.5 is no integer.
        if isinstance(raw, float) and raw.is_integer():
            return int(raw)
        raise ConfigError(f"{where}: expected an integer, got {raw!r}")
    if tp in (str, bool):
        if type(raw) is tp:
            return raw
        if tp is str and raw is not None and not isinstance(raw, dict | list):
            # 1e3, 0o17, 2026-12-03 or true written bare: YAML 1.2 (DVC's reader) reads a
            # number, date or boolean, which only quotes keep as text.
            raise ConfigError(
                f"{where}: expected str, got {raw!r} (YAML reads it as a "
                f"{type(raw).__name__}; quote it to keep it text)"
            )
        raise ConfigError(f"{where}: expected {tp.__name__}, got {raw!r}")
    raise TypeError(f"unsupported type {tp!r} at {where}")  # a bug in this module, not in params


def validate(p: Params) -> Params:
    """Cross-field checks of the shared keys that types alone cannot express (each protocol
    checks its own block when it is parsed)."""
    for name in p.models:
        if not _MODEL_NAME.match(name):
            raise ConfigError(
                f"models.{name}: a model name may hold letters, digits, '.', '_', '-'"
            )
    specs = [*((f"models.{n}", s) for n, s in p.models.items()), ("judge.model", p.judge.model)]
    if p.simulator is not None:
        specs.append(("simulator.model", p.simulator.model))
        if p.simulator.max_new_tokens < 1:
            raise ConfigError("simulator.max_new_tokens: must be at least 1")
    for where, spec in specs:
        _validate_spec(where, spec)
    if not p.models:
        raise ConfigError("models: list at least one model")
    if p.score.bootstrap < 1:
        raise ConfigError("score.bootstrap: must be at least 1")
    if not 0 < p.score.ci < 1:
        raise ConfigError("score.ci: must lie strictly between 0 and 1")
    if not 0 <= p.score.max_unclear <= 1:
        raise ConfigError("score.max_unclear: must lie between 0 and 1")
    if p.score.min_items < 1:
        raise ConfigError("score.min_items: must be at least 1")
    if p.tracking.trace_sample < 1:
        raise ConfigError("tracking.trace_sample: must be at least 1")
    return p


def _validate_spec(where: str, spec: ModelSpec) -> None:
    if spec.backend == "openai" and not spec.base_url:
        raise ConfigError(f"{where}.base_url: required for the openai backend")
    local = spec.backend in LOCAL_BACKENDS
    if local and (spec.base_url or spec.api_key_env):
        raise ConfigError(f"{where}: base_url and api_key_env apply to the openai backend only")
    engine = {
        "max_model_len": spec.max_model_len is not None,
        "memory_share": spec.memory_share is not None,
        "tensor_parallel_size": spec.tensor_parallel_size != 1,
        "enforce_eager": spec.enforce_eager,
    }
    if spec.backend != "vllm" and any(engine.values()):
        keys = ", ".join(k for k, v in engine.items() if v)
        raise ConfigError(f"{where}: {keys} apply to the vllm backend only")
    if spec.backend == "vllm" and spec.devices is not None:
        raise ConfigError(
            f"{where}.devices: the vllm backend uses the GPUs it can see: choose them with "
            "CUDA_VISIBLE_DEVICES and split one model over several with tensor_parallel_size"
        )
    if spec.max_model_len is not None and spec.max_model_len < 1:
        raise ConfigError(f"{where}.max_model_len: must be at least 1")
    if spec.memory_share is not None and not 0 < spec.memory_share <= 1:
        raise ConfigError(f"{where}.memory_share: must lie in (0, 1], a share of the memory")
    if spec.tensor_parallel_size < 1:
        raise ConfigError(f"{where}.tensor_parallel_size: must be at least 1")
    for key in ("batch_size", "concurrency"):
        if getattr(spec, key) < 1:
            raise ConfigError(f"{where}.{key}: must be at least 1")
    if spec.max_retries < 0:
        raise ConfigError(f"{where}.max_retries: must be 0 or more")
    if spec.timeout_s <= 0:
        raise ConfigError(f"{where}.timeout_s: must be positive")
    if spec.size is not None and spec.size <= 0:
        raise ConfigError(f"{where}.size: must be a positive number of parameters")
    if spec.max_unclear is not None and not 0 <= spec.max_unclear <= 1:
        raise ConfigError(f"{where}.max_unclear: must lie between 0 and 1")
    if local and (spec.identity is not None or spec.mode != "online"):
        # A local model is keyed by its resolved commit or weights hash, never by a declaration.
        raise ConfigError(f"{where}: identity and mode apply to the openai backend only")
    if spec.identity is not None and not spec.identity.strip():
        raise ConfigError(f"{where}.identity: must not be empty (leave it out instead)")
    if spec.backend == "openai" and spec.dtype != "auto":
        raise ConfigError(
            f"{where}.dtype: {spec.dtype} cannot be chosen for an openai model: the server "
            "decides its number format (declare it in identity to key its responses by it)"
        )
    cuda = {d.startswith("cuda") for d in spec.devices or []}
    if spec.dtype == "auto" and len(cuda) > 1:  # auto is bf16 on CUDA, fp32 elsewhere
        raise ConfigError(
            f"{where}.dtype: auto over CPU and GPU devices ({', '.join(spec.devices or [])}) "
            "would generate in two formats; declare the dtype (float32, bfloat16 or float16)"
        )
    if spec.price is not None and (spec.price.input < 0 or spec.price.output < 0):
        raise ConfigError(f"{where}.price: input and output must be 0 or more (USD per 1M tokens)")


def read_yaml(text: str) -> Any:
    """YAML text read exactly as DVC 3 reads params.yaml: ruamel.yaml's safe loader, YAML 1.2
    (``dvc.utils.serialize.parse_yaml``). DVC decides what changed and syps what runs, so the
    two must agree on every value. Where YAML 1.1 (PyYAML) differs: ``1e3`` is 1000.0,
    ``017`` is 17 and ``0o17`` is 15; ``yes``, ``on`` and ``1:30`` are strings; a key given twice
    is an error (PyYAML would keep the last).

    Raises ``yaml.YAMLError`` (PyYAML's, which callers catch) with a one-line message.
    """
    # heavy: ruamel.yaml takes 15-25 ms to import and only reading params.yaml needs it
    from ruamel.yaml import YAML
    from ruamel.yaml.error import MarkedYAMLError
    from ruamel.yaml.error import YAMLError as RuamelError

    try:
        return YAML(typ="safe").load(text)
    except MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise yaml.YAMLError(where + " ".join(str(e.problem or e.context).split())) from None
    except RuamelError as e:
        raise yaml.YAMLError(" ".join(str(e).split())) from None


def folder_defaults(path: Path, keys: Mapping[str, Any]) -> dict[str, Any]:
    """The values of ``keys`` (a dotted key path -> its type) in a protocol folder's
    params.yaml, each parsed as its type (as :func:`parse` does).

    A protocol whose defaults are documented there (with comments, as the study's params.yaml
    is written) reads the ones it would otherwise write twice, template texts, from that file,
    so each is stated once. The file is read once per call; a missing file, a missing key or a
    wrong type is a ``ConfigError`` of one line naming the file and the key.
    """
    try:
        raw = read_yaml(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as e:
        raise ConfigError(f"{path}: cannot read the protocol's defaults: {e}") from None
    out = {}
    for key, tp in keys.items():
        value, at = raw, ""
        for name in key.split("."):
            at = _key(at, name)
            if not isinstance(value, dict) or name not in value:
                raise ConfigError(f"{path}: {at}: missing (the code reads its default here)")
            value = value[name]
        try:
            out[key] = parse(tp, value, key)
        except ConfigError as e:
            raise ConfigError(f"{path}: {e}") from None
    return out
