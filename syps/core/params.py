"""Reading params.yaml: the shared keys (``syps.core.config``) and each protocol's block, parsed by
that protocol's own params type (``syps.protocols.PROTOCOLS``), once per stage."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import yaml

from syps.core.config import (
    ConfigError,
    Params,
    ProtocolParams,
    check_sampling,
    parse,
    read_yaml,
    validate,
)
from syps.core.templating import check_templates
from syps.protocols import MOVED_KEYS as MOVED
from syps.protocols import PROTOCOLS, load_protocol


def _old_layout(raw: dict[str, Any]) -> list[str]:
    judge = raw["judge"] if isinstance(raw.get("judge"), dict) else {}
    return [k for k in MOVED if (k in raw if "." not in k else k.split(".", 1)[1] in judge)]


def parse_protocols(raw: Any, where: str = "protocols") -> dict[str, ProtocolParams]:
    """``protocols``: every registered protocol's block, parsed by its ``params_type`` so that an
    unknown key is an error naming ``protocols.<name>.<key>``. Every protocol keeps its block
    (its stages exist while it does): ``enabled: false`` switches one off."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a mapping, got {type(raw).__name__}")
    missing = [n for n in PROTOCOLS if n not in raw]
    if missing:
        raise ConfigError(
            f"{where}.{missing[0]}: missing; every protocol needs a block "
            f"(set `enabled: false` to switch it off)"
        )
    out: dict[str, ProtocolParams] = {}
    for name, block in raw.items():
        if name not in PROTOCOLS:
            raise ConfigError(f"{where}.{name}: unknown protocol; known: {sorted(PROTOCOLS)}")
        proto = load_protocol(name)
        out[name] = parse(proto.params_type, block, f"{where}.{name}")
        check_sampling(out[name].generation, proto.needs_sampling_for_reps, f"{where}.{name}")
        check_templates(proto.template_specs(out[name], f"{where}.{name}"))
    return out


def params_from(raw: Any) -> Params:
    """Params from parsed YAML data; errors name the key."""
    if not isinstance(raw, dict):
        raise ConfigError(f"expected a mapping, got {type(raw).__name__}")
    old = _old_layout(raw)
    if old:
        raise ConfigError(
            "keys of an older layout moved: " + "; ".join(f"{k} -> {MOVED[k]}" for k in old)
        )
    if "protocols" not in raw:
        raise ConfigError("protocols: required key is missing")
    shared = validate(parse(Params, {k: v for k, v in raw.items() if k != "protocols"}))
    return dataclasses.replace(shared, protocols=parse_protocols(raw["protocols"]))


def load_params(path: str | Path = "params.yaml") -> Params:
    """Read and validate params.yaml; errors are prefixed with the file name."""
    path = Path(path)
    try:
        raw = read_yaml(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from None
    try:
        return params_from(raw)
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}") from None
