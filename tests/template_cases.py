"""Helpers for the protocols' template tests: the fixture params with one template text edited,
loaded the way every stage loads them (``syps.core.params.load_params``)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from conftest import FIXTURE_PARAMS, read_params, write_params

from syps.core.config import ConfigError
from syps.core.params import load_params
from syps.core.templating import TemplateSpec
from syps.protocols import PROTOCOLS


def specs(
    protocol: str, raw: dict[str, Any] | None = None, tmp: Path | None = None
) -> list[TemplateSpec]:
    """The protocol's template specs for the fixture params (or ``raw``, written into ``tmp``)."""
    path = FIXTURE_PARAMS if raw is None else write_params(_file(tmp), raw)
    block = load_params(path, PROTOCOLS).protocols[protocol]
    return list(PROTOCOLS[protocol].template_specs(block, f"protocols.{protocol}"))


def required(
    protocol: str, raw: dict[str, Any] | None = None, tmp: Path | None = None
) -> dict[str, set[str]]:
    """Key -> the placeholders its text needs."""
    return {s.key: set(s.required) for s in specs(protocol, raw, tmp)}


def set_at(block: dict[str, Any], key: str, value: Any) -> None:
    """Set ``key`` (``templates.F.names[0]``, relative to the block) to ``value``; a null or
    absent mapping on the way (``pressure: null``) becomes a mapping."""
    parts: list[str | int] = [
        int(p[1:-1]) if p.startswith("[") else p for p in re.findall(r"[^.\[\]]+|\[\d+\]", key)
    ]
    node: Any = block
    for part, nxt in zip(parts, parts[1:], strict=False):
        if isinstance(part, str) and node.get(part) is None:
            node[part] = [] if isinstance(nxt, int) else {}
        node = node[part]
    node[parts[-1]] = value


def edited(
    protocol: str, key: str, text: str, base: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The fixture params (or ``base``) with the text at full key ``key`` set to ``text``."""
    raw = read_params() if base is None else base
    prefix = f"protocols.{protocol}."
    assert key.startswith(prefix), key
    set_at(raw["protocols"][protocol], key[len(prefix) :], text)
    return raw


def refusal(raw: dict[str, Any], tmp: Path) -> str:
    """The error loading ``raw`` gives; it must be exactly one line."""
    path = write_params(_file(tmp), raw)
    with pytest.raises(ConfigError) as e:
        load_params(path, PROTOCOLS)
    msg = str(e.value)
    assert "\n" not in msg, msg
    assert msg.startswith(f"{path}: "), msg
    return msg[len(f"{path}: ") :]


def _file(tmp: Path | None) -> Path:
    assert tmp is not None
    return tmp / "params.yaml"
