"""The one module that knows syps's layout before protocols, so that a user's earlier runs and
params files still read: SyPS's child runs were logged untagged or as ``syps`` (now protocol
``cues``), and its params keys sat at the top level (a params file in that layout is refused
with a line naming where each key went)."""

from __future__ import annotations

from typing import Any

# The name SyPS's child runs carry when logged before it was a protocol (untagged) or as "syps".
RENAMED = {"": "cues", "syps": "cues"}
# The params keys of the layout before SyPS was the protocol ``cues``, and where each one went.
MOVED_KEYS = {
    "data": "protocols.cues.data",
    "templates": "protocols.cues.templates",
    "generation": "protocols.cues.generation (temperature, top_p), protocols.cues.max_new_tokens",
    "labels": "protocols.cues.labels",
    "judge.system": "protocols.cues.judge.system",
    "judge.template": "protocols.cues.judge.template",
    "judge.options": "protocols.cues.judge.options",
}


def current_name(logged: str) -> str:
    """A protocol's name now, from the name a run was logged under."""
    return RENAMED.get(logged, logged)


def moved_keys(raw: dict[str, Any]) -> list[str]:
    """The keys of the old layout that ``raw`` (a params mapping) still has."""
    judge = raw["judge"] if isinstance(raw.get("judge"), dict) else {}
    return [k for k in MOVED_KEYS if (k in raw if "." not in k else k.split(".", 1)[1] in judge)]
