"""Chat messages as the exact bytes every key is taken over."""

from __future__ import annotations

import json

from syps.core.io import canonical_json


def messages_json(system: str, user: str) -> str:
    """Messages as canonical JSON: the exact bytes every prompt hash is taken over."""
    return canonical_json(
        [{"role": "system", "content": system}, {"role": "user", "content": user}]
    )


def parse_messages(text: str) -> list[dict[str, str]]:
    msgs: list[dict[str, str]] = json.loads(text)
    return msgs
