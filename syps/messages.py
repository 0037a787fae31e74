"""Chat messages as the exact bytes every key is taken over, and filling a template."""

from __future__ import annotations

import json
from collections.abc import Mapping

from syps.config import PLACEHOLDER, check_placeholders
from syps.io import canonical_json


def messages_json(system: str, user: str) -> str:
    """Messages as canonical JSON: the exact bytes every prompt hash is taken over."""
    return canonical_json(
        [{"role": "system", "content": system}, {"role": "user", "content": user}]
    )


def parse_messages(text: str) -> list[dict[str, str]]:
    msgs: list[dict[str, str]] = json.loads(text)
    return msgs


def fill(template: str, values: Mapping[str, str], where: str) -> str:
    """Substitute ``{name}`` placeholders of ``template`` in one pass.

    Only the template is scanned, never the substituted values, so a value holding ``{x}`` is
    inserted as is. Every placeholder must be known and every value must be used (params
    validation checks the judge template the same way, before anything is generated).
    """
    check_placeholders(template, values, where)
    return PLACEHOLDER.sub(lambda m: values[m.group(1)], template)
