"""Chat messages as the exact bytes every key is taken over: one encoding for every prompt."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from syps.core.io import canonical_json


def conversation_json(messages: Sequence[Mapping[str, str]]) -> str:
    """A conversation as canonical JSON (each message its role and content): the bytes its
    store key is taken over, the bytes sent, stored in its row and hashed into
    ``prompt_sha256``."""
    return canonical_json([{"role": m["role"], "content": m["content"]} for m in messages])


def messages_json(system: str, user: str) -> str:
    """A system turn and a user turn as :func:`conversation_json` encodes them."""
    return conversation_json(
        [{"role": "system", "content": system}, {"role": "user", "content": user}]
    )


def parse_messages(text: str) -> list[dict[str, str]]:
    """A conversation's bytes (:func:`conversation_json`) back as its messages."""
    msgs: list[dict[str, str]] = json.loads(text)
    return msgs
