"""Typed, frozen view of params.yaml.

Parsed once per stage; an unknown key or a wrong type is an error naming the key path, so a typo
in params.yaml fails loudly instead of silently falling back to a default.
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar, Union, get_args, get_origin

import yaml

from syps.datasets import DATASETS

VARIANTS: tuple[str, ...] = ("P0", "P1", "P2", "P3", "P4", "P5", "P6", "P7")
VARIANT_NAMES: dict[str, str] = {
    "P0": "neutral",
    "P1": "user confidence",
    "P2": "hedging",
    "P3": "validation seeking",
    "P4": "social consensus",
    "P5": "emotional pressure",
    "P6": "counter-framing",
    "P7": "anti-sycophancy instruction",
}


class ConfigError(ValueError):
    """A params value is missing, unknown or of the wrong type; the message names the key."""


# A ``{name}`` placeholder. Other braces (``{"a": 1}``, ``{0}``, a lone ``{{``) are plain text.
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
# What the judge template is filled with (see ``syps.templates.fill``).
JUDGE_FIELDS: tuple[str, ...] = ("situation", "response")


def check_placeholders(template: str, names: Iterable[str], where: str) -> None:
    """Require ``template`` to hold exactly the ``{name}`` placeholders ``names``, each at least
    once; the error names ``where`` (a key path) and what is unknown or missing."""
    allowed = set(names)
    found = set(PLACEHOLDER.findall(template))
    unknown = sorted(found - allowed)
    if unknown:
        raise ConfigError(
            f"{where}: unknown placeholder(s) {['{' + u + '}' for u in unknown]}; "
            f"allowed: {['{' + a + '}' for a in sorted(allowed)]}"
        )
    missing = sorted(allowed - found)
    if missing:
        raise ConfigError(f"{where}: the template must contain {['{' + m + '}' for m in missing]}")


@dataclass(frozen=True)
class ElephantSource:
    """Released ELEPHANT CSVs: pinned URLs, a download cache and a committed sha256 lock."""

    urls: dict[str, str]
    cache_dir: str = ".cache/elephant"
    lock: str = "elephant.lock.json"


def elephant_local_problem(dataset: str, path: str | None) -> str | None:
    """Why the ``elephant`` source cannot read ``dataset`` from ``data.files``; None if it can.

    myracheng/elephant releases only OEQ and AITA (AITA-YTA is the YTA rows of AITA.csv); a
    dataset without a URL, above all one the registry marks unreleased (SS), must come from a
    local copy the user supplies. The
    built-in sample is refused so that it is never passed off as the released set.
    """
    if path is not None and Path(path).parts[:2] != ("data", "builtin"):
        return None
    why = (
        "data/builtin/ holds this project's own sample, not the released set"
        if path is not None
        else "no data.files entry"
    )
    if dataset in DATASETS and not DATASETS[dataset].elephant_released:
        return (
            f"data.files.{dataset}: the 'elephant' source cannot download {dataset} ({why}): the "
            f"{dataset} items of the ELEPHANT paper are not released in "
            f"github.com/myracheng/elephant (it holds datasets/OEQ.csv and datasets/AITA.csv "
            f"only); supply your own copy as a CSV with the data.columns.{dataset} column, set "
            f"data.files.{dataset} to its path, or drop {dataset} from data.datasets"
        )
    return (
        f"data.elephant.urls.{dataset}: no URL for {dataset!r} and no local copy in "
        f"data.files.{dataset} ({why}); set one of them"
    )


@dataclass(frozen=True)
class DataParams:
    """Which items to evaluate.

    ``columns`` maps the normalised fields (``situation``, optionally ``verdict``) to the CSV's
    column names, per dataset. ``files`` gives the CSV per dataset for the ``builtin`` and
    ``csv`` sources.
    """

    source: Literal["builtin", "elephant", "csv"]
    datasets: list[str]
    files: dict[str, str]
    columns: dict[str, dict[str, str]]
    elephant: ElephantSource
    limit: int | None = None
    # AITA-YTA keeps only the rows whose verdict column holds this value (its registry entry
    # names this field: syps.datasets).
    yta_value: str = "YTA"


_VARIANT_ID = re.compile(r"^(P[0-7])([a-z]?)$")


def cue_of(variant: str) -> str:
    """The cue a variant id belongs to: ``P3b`` -> ``P3``, ``P3`` -> ``P3``."""
    m = _VARIANT_ID.match(variant)
    if m is None:
        raise ConfigError(f"unknown variant id {variant!r}; expected P0..P7, optionally + a..z")
    return m.group(1)


def order_variants(ids: Iterable[str]) -> list[str]:
    """Variant ids in reporting order: by cue, then wording (``P3``, ``P3a``, ``P3b``)."""
    return sorted(set(ids), key=lambda v: (cue_of(v), v))


def primary_variants(ids: Sequence[str]) -> list[str]:
    """The first wording of each cue, in order: the eight variants SPSS is computed over."""
    first: dict[str, str] = {}
    for v in order_variants(ids):
        first.setdefault(cue_of(v), v)
    return list(first.values())


@dataclass(frozen=True)
class DatasetTemplate:
    """One dataset's wording: task and format shared by every variant, one cue per variant.

    A cue may list several wordings; each becomes its own variant (``P3a``, ``P3b``, ...), so a
    delta can be checked for robustness to the exact phrase. P0 has exactly one wording.
    """

    task: str
    format: str
    cues: dict[str, str | list[str]]

    def variant_cues(self) -> dict[str, str]:
        """Variant id -> cue text, in order; a one-wording cue keeps its plain id."""
        out: dict[str, str] = {}
        for cue in (v for v in VARIANTS if v in self.cues):
            wordings = self.cues[cue]
            if isinstance(wordings, str) or len(wordings) == 1:
                out[cue] = wordings if isinstance(wordings, str) else wordings[0]
            else:
                out.update({f"{cue}{chr(97 + i)}": w for i, w in enumerate(wordings)})
        return out


@dataclass(frozen=True)
class TemplateParams:
    cue_position: Literal["before", "after"]
    datasets: dict[str, DatasetTemplate]


@dataclass(frozen=True)
class Price:
    """USD per million tokens, as a provider's price list states it."""

    input: float
    output: float


@dataclass(frozen=True)
class ModelSpec:
    """A model and the backend that serves it.

    ``hf``: ``model`` is ``embedded:smollm2``, a Hugging Face id (pin ``revision``) or a local
    directory. ``openai``: ``model`` is the served model name at ``base_url`` (OpenAI, vLLM,
    SGLang, llama.cpp ...); the API key is read from the environment variable *named* by
    ``api_key_env`` and never appears in params, outputs or logs.

    ``identity`` is the user's declaration of the weights behind an API model (a weights hash,
    a release name): with it, or with ``revision``, the response store keys the model by what
    it is rather than by where it is served (see ``syps.backends.model_identity``).
    """

    model: str
    backend: Literal["hf", "openai"] = "hf"
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
    # openai: "batch" sends missing requests through the Batch API (syps.backends.openai_batch).
    mode: Literal["online", "batch"] = "online"


@dataclass(frozen=True)
class GenerationParams:
    max_new_tokens: dict[str, int]
    temperature: float = 0.0
    top_p: float = 1.0


@dataclass(frozen=True)
class JudgeParams:
    """The OEQ judge: a prompt template and its answer options, scored by next-token logprob."""

    model: ModelSpec
    system: str
    template: str
    options: dict[str, int]
    # A verdict whose log-probability lead is below this margin is UNCLEAR.
    min_margin: float = 0.0


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
    experiment: str = "syps"


class ProtocolsParams(dict[str, Any]):
    """``protocols``: protocol name -> that protocol's typed params (its ``params_type``, a
    ``syps.protocols.base.ProtocolParams``), parsed by the protocol's own dataclass so that an
    unknown key is an error naming ``protocols.<name>.<key>``. Only registered protocols
    (``syps.protocols.PROTOCOLS``) are accepted."""

    @classmethod
    def syps_parse(cls, raw: Any, where: str) -> ProtocolsParams:
        from syps.conversation import check_sampling
        from syps.protocols import PROTOCOLS, load_protocol
        from syps.templating import check_templates

        if raw is None:
            return cls()
        if not isinstance(raw, dict):
            raise ConfigError(_at(where, f"expected a mapping, got {type(raw).__name__}"))
        missing = [n for n in PROTOCOLS if n not in raw]
        if missing:
            # Every protocol keeps its block (its stages exist while it does, and the score
            # stage reads their outputs): switch one off with `enabled: false`.
            raise ConfigError(
                f"{_key(where, missing[0])}: missing; every protocol needs a block "
                f"(set `enabled: false` to switch it off)"
            )
        out = cls()
        for name, block in raw.items():
            if name not in PROTOCOLS:
                raise ConfigError(
                    f"{_key(where, name)}: unknown protocol; known: {sorted(PROTOCOLS)}"
                )
            proto = load_protocol(name)
            out[name] = _parse(proto.params_type, block, _key(where, name))
            check_sampling(proto, out[name].generation, _key(where, name))
            check_templates(proto.template_specs(out[name], _key(where, name)))
        return out

    def enabled(self) -> list[str]:
        """The protocols that run, in params order."""
        return [n for n, p in self.items() if p.enabled]


@dataclass(frozen=True)
class Params:
    seed: int
    data: DataParams
    templates: TemplateParams
    models: dict[str, ModelSpec]
    generation: GenerationParams
    labels: dict[str, dict[str, int]]
    judge: JudgeParams
    score: ScoreParams = field(default_factory=ScoreParams)
    tracking: TrackingParams = field(default_factory=TrackingParams)
    protocols: ProtocolsParams = field(default_factory=ProtocolsParams)


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
        raise ConfigError(f"{where}: expected an integer, got {raw!r}")
    if tp in (str, bool):
        if type(raw) is tp:
            return raw
        raise ConfigError(f"{where}: expected {tp.__name__}, got {raw!r}")
    raise TypeError(f"unsupported type {tp!r} at {where}")  # a bug in this module, not in params


def validate(p: Params) -> Params:
    """Cross-field checks that types alone cannot express."""
    if len(set(p.data.datasets)) != len(p.data.datasets):
        raise ConfigError(f"data.datasets: a dataset is listed twice: {p.data.datasets}")
    for ds in p.data.datasets:
        if ds not in DATASETS:
            raise ConfigError(f"data.datasets: unknown dataset {ds!r}; known: {list(DATASETS)}")
        for section, table in (
            ("data.columns", p.data.columns),
            ("templates.datasets", p.templates.datasets),
            ("generation.max_new_tokens", p.generation.max_new_tokens),
        ):
            if ds not in table:
                raise ConfigError(f"{section}: missing an entry for dataset {ds!r}")
        if p.data.source in ("builtin", "csv") and ds not in p.data.files:
            raise ConfigError(f"data.files: missing a CSV for dataset {ds!r}")
        if p.data.source == "elephant" and ds not in p.data.elephant.urls:
            problem = elephant_local_problem(ds, p.data.files.get(ds))
            if problem:
                raise ConfigError(problem)
        if "situation" not in p.data.columns[ds]:
            raise ConfigError(f"data.columns.{ds}: needs a 'situation' column name")
        bad = sorted(set(p.data.columns[ds]) - {"situation", "verdict"})
        if bad:
            raise ConfigError(f"data.columns.{ds}: unknown field(s) {bad}; use situation, verdict")
        cues = p.templates.datasets[ds].cues
        unknown = sorted(set(cues) - set(VARIANTS))
        if unknown:
            worded = [u for u in unknown if _VARIANT_ID.match(u)]
            hint = (
                f"; {worded[0]} names a wording, so list the wordings under "
                f"{cue_of(worded[0])}: [first, second, ...]"
                if worded
                else ""
            )
            raise ConfigError(
                f"templates.datasets.{ds}.cues: unknown variant id(s) {unknown}; "
                f"known: {list(VARIANTS)}{hint}"
            )
        if "P0" not in cues:
            raise ConfigError(f"templates.datasets.{ds}.cues: the neutral variant P0 is required")
        for cue, wordings in cues.items():
            if isinstance(wordings, list) and not 1 <= len(wordings) <= 26:
                raise ConfigError(
                    f"templates.datasets.{ds}.cues.{cue}: list 1 to 26 wordings, "
                    f"got {len(wordings)}"
                )
        if isinstance(cues["P0"], list) and len(cues["P0"]) > 1:
            raise ConfigError(
                f"templates.datasets.{ds}.cues.P0: the neutral reference has exactly one wording"
            )
        _reject_placeholders(ds, p.templates.datasets[ds], p.templates.cue_position)
    for ds in p.data.datasets:
        entry = DATASETS[ds]
        if entry.verdict_filter and "verdict" not in p.data.columns[ds]:
            value = getattr(p.data, entry.verdict_filter)
            raise ConfigError(
                f"data.columns.{ds}: needs a 'verdict' column to keep the {value} rows"
            )
        if entry.labeler == "rule" and ds not in p.labels:
            raise ConfigError(f"labels: missing the verdict mapping for {ds!r}")
    for name in p.models:
        if not _MODEL_NAME.match(name):
            raise ConfigError(
                f"models.{name}: a model name may hold letters, digits, '.', '_', '-'"
            )
    specs = [*((f"models.{n}", s) for n, s in p.models.items()), ("judge.model", p.judge.model)]
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
    # A label is Syc itself: any other value (2, -1) would pass through every mean and give
    # impossible metrics (a rate of 2, an SPSS above 1).
    binary = [(f"labels.{ds}.{k}", v) for ds, table in p.labels.items() for k, v in table.items()]
    binary += [(f"judge.options.{k}", v) for k, v in p.judge.options.items()]
    for where, value in binary:
        if value not in (0, 1):
            raise ConfigError(f"{where}: must be 0 or 1, got {value}")
    if p.data.limit is not None and p.data.limit < 1:
        raise ConfigError("data.limit: must be a positive integer or null")
    # Checked here, not only when the judge first runs, so a broken judge template fails at
    # params load instead of after every response has been generated.
    check_placeholders(p.judge.template, JUDGE_FIELDS, "judge.template")
    m = PLACEHOLDER.search(p.judge.system)
    if m:
        raise ConfigError(
            f"judge.system: {m.group(0)} would be sent to the judge as is; the system text is "
            f"not filled in, placeholders go in judge.template"
        )
    return p


def _reject_placeholders(ds: str, tpl: DatasetTemplate, cue_position: str) -> None:
    """A ``{name}`` in a task, format or cue would reach the model literally: these texts are
    structure, and the situation is placed by position, never substituted."""
    texts: list[tuple[str, str]] = [("task", tpl.task), ("format", tpl.format)]
    for cue, wordings in tpl.cues.items():
        if isinstance(wordings, str):
            texts.append((f"cues.{cue}", wordings))
        else:
            texts += [(f"cues.{cue}[{i}]", w) for i, w in enumerate(wordings)]
    for key, text in texts:
        m = PLACEHOLDER.search(text)
        if m:
            raise ConfigError(
                f"templates.datasets.{ds}.{key}: {m.group(0)} would be sent to the model as is: "
                f"task, format and cue texts are not filled in. The situation is placed "
                f"automatically, with the cue {cue_position} it (templates.cue_position); "
                f"remove the placeholder"
            )


def _validate_spec(where: str, spec: ModelSpec) -> None:
    if spec.backend == "openai" and not spec.base_url:
        raise ConfigError(f"{where}.base_url: required for the openai backend")
    if spec.backend == "hf" and (spec.base_url or spec.api_key_env):
        raise ConfigError(f"{where}: base_url and api_key_env apply to the openai backend only")
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
    if spec.backend == "hf" and (spec.identity is not None or spec.mode != "online"):
        # An hf model is keyed by its resolved commit or weights hash, never by a declaration.
        raise ConfigError(f"{where}: identity and mode apply to the openai backend only")
    if spec.identity is not None and not spec.identity.strip():
        raise ConfigError(f"{where}.identity: must not be empty (leave it out instead)")
    if spec.price is not None and (spec.price.input < 0 or spec.price.output < 0):
        raise ConfigError(f"{where}.price: input and output must be 0 or more (USD per 1M tokens)")


class Yaml12Loader(yaml.SafeLoader):
    """YAML 1.2 booleans: only true/false. PyYAML follows YAML 1.1, where yes/no/on/off are
    booleans too, but DVC (``dvc exp run -S``) rewrites params.yaml with a YAML 1.2 writer
    that leaves a key like YES unquoted; read as 1.1 it would turn into True."""


Yaml12Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
Yaml12Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool",
    re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
    list("tTfF"),
)


def load_params(path: str | Path = "params.yaml") -> Params:
    """Read and validate params.yaml; errors are prefixed with the file name."""
    path = Path(path)
    try:
        raw = yaml.load(path.read_text(encoding="utf-8"), Loader=Yaml12Loader)
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from None
    try:
        return validate(parse(Params, raw))
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}") from None
