"""Reading params.yaml: the shared keys (``syps.core.config``) and each protocol's block, parsed by
that protocol's own params type, once per stage. The caller hands over the protocols to parse
(the registry, ``syps.protocols.PROTOCOLS``, or a stage's own protocol alone)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
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
from syps.core.legacy import MOVED_KEYS, moved_keys
from syps.core.protocol import Protocol
from syps.core.templating import check_templates

Protocols = Mapping[str, Protocol[Any, Any]]


def parse_protocols(
    raw: Any, protocols: Protocols, complete: bool = True, where: str = "protocols"
) -> dict[str, ProtocolParams]:
    """``protocols``: the block of each protocol in ``protocols``, parsed by its
    ``params_type`` so that an unknown key is an error naming ``protocols.<name>.<key>``. Every
    protocol keeps its block (its stages exist while it does): ``enabled: false`` switches one
    off. ``complete``: ``protocols`` is the whole registry, so a block of another name is an
    unknown protocol; otherwise (a stage, which parses its own protocol's block alone) the
    other blocks are left unread."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a mapping, got {type(raw).__name__}")
    missing = [n for n in protocols if n not in raw]
    if missing:
        raise ConfigError(
            f"{where}.{missing[0]}: missing; every protocol needs a block "
            f"(set `enabled: false` to switch it off)"
        )
    unknown = [n for n in raw if n not in protocols]
    if unknown and complete:
        raise ConfigError(f"{where}.{unknown[0]}: unknown protocol; known: {sorted(protocols)}")
    out: dict[str, ProtocolParams] = {}
    for name, block in raw.items():
        if name not in protocols:
            continue
        proto = protocols[name]
        out[name] = parse(proto.params_type, block, f"{where}.{name}")
        check_sampling(out[name].generation, proto.needs_sampling_for_reps, f"{where}.{name}")
        check_templates(proto.template_specs(out[name], f"{where}.{name}"))
    return out


def params_from(raw: Any, protocols: Protocols, complete: bool = True) -> Params:
    """Params from parsed YAML data; errors name the key."""
    if not isinstance(raw, dict):
        raise ConfigError(f"expected a mapping, got {type(raw).__name__}")
    old = moved_keys(raw)
    if old:
        raise ConfigError(
            "keys of an older layout moved: " + "; ".join(f"{k} -> {MOVED_KEYS[k]}" for k in old)
        )
    if "protocols" not in raw:
        raise ConfigError("protocols: required key is missing")
    shared = validate(parse(Params, {k: v for k, v in raw.items() if k != "protocols"}))
    parsed = parse_protocols(raw["protocols"], protocols, complete)
    for name, pp in parsed.items():
        if pp.enabled and protocols[name].uses_simulator and shared.simulator is None:
            raise ConfigError(
                f"simulator: required by protocols.{name} (its user turns are written by a "
                "simulated user): add a `simulator` block with its model, or set "
                f"protocols.{name}.enabled to false"
            )
    return dataclasses.replace(shared, protocols=parsed)


def load_params(path: str | Path, protocols: Protocols, complete: bool = True) -> Params:
    """Read and validate params.yaml, parsing the blocks of ``protocols`` (see
    :func:`parse_protocols`); errors are prefixed with the file name."""
    path = Path(path)
    try:
        raw = read_yaml(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from None
    try:
        return params_from(raw, protocols, complete)
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}") from None
