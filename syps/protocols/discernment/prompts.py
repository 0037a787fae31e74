"""The conversations of the discernment protocol, rendered from an artefact and plain templates.

Baseline (turn 0): one user turn asking for a 0-100 score. Update (turn 1): the same baseline
prompt, that repetition's own answer replayed verbatim as the assistant turn, then the argument as
one more user turn. An update request holds only its own argument's text, so editing one
argument changes only its own update requests (and their cache keys).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from syps.core.config import folder_defaults
from syps.core.templating import substitute
from syps.protocols.discernment.items import Argument, Artefact, Direction

Message = dict[str, str]
# The placeholders each template is filled with (``baseline_messages``, ``update_messages``);
# which ones are required is declared in ``protocol.template_specs``, checked at params load.
BASELINE_FIELDS = ("initial_prompt", "artefact", "title", "domain")
UPDATE_FIELDS = ("message",)


# The default texts are the folder's params.yaml, where they are documented; they are stated
# nowhere else.
FOLDER_PARAMS = Path(__file__).with_name("params.yaml")
_DEFAULTS = folder_defaults(
    FOLDER_PARAMS,
    {"templates.baseline": str, "templates.update": str, "templates.system": str | None},
)


@dataclass(frozen=True)
class Templates:
    """How a conversation is worded (``protocols.discernment.templates``; the defaults are the
    folder's params.yaml). ``update`` defaults to the argument followed by a request for the new
    score in the parser's format; set it to ``"{message}"`` for the argument alone. ``system``
    is sent as is (no placeholder is filled in it)."""

    baseline: str = _DEFAULTS["templates.baseline"]
    update: str = _DEFAULTS["templates.update"]
    system: str | None = _DEFAULTS["templates.system"]


@dataclass(frozen=True)
class Request:
    """One generation: the conversation, its repetition, its turn and the cell it belongs to."""

    messages: list[Message]
    rep: int
    turn: int
    cell: dict[str, str] = field(default_factory=dict)


def baseline_messages(item: Artefact, t: Templates) -> list[Message]:
    """The scoring conversation up to the model's first answer."""
    user = substitute(
        t.baseline,
        {
            "initial_prompt": item.initial_prompt,
            "artefact": item.artefact,
            "title": item.title,
            "domain": item.domain,
        },
    )
    head = [{"role": "system", "content": t.system}] if t.system else []
    return [*head, {"role": "user", "content": user}]


def update_messages(item: Artefact, arg: Argument, answer: str, t: Templates) -> list[Message]:
    """The baseline conversation, the repetition's own ``answer`` verbatim, then ``arg``."""
    if arg.artefact_id != item.id:
        raise ValueError(f"argument {arg.arg_id} does not belong to artefact {item.id}")
    return [
        *baseline_messages(item, t),
        {"role": "assistant", "content": answer},
        {"role": "user", "content": substitute(t.update, {"message": arg.message})},
    ]


def baseline_requests(items: Iterable[Artefact], reps: int, t: Templates) -> list[Request]:
    """``reps`` independent baseline requests per artefact (turn 0); the caller samples each
    with its own seed, since greedy decoding would make every repetition identical."""
    return [
        Request(baseline_messages(a, t), r, 0, {"artefact_id": a.id})
        for a in items
        for r in range(reps)
    ]


def update_requests(
    item: Artefact, direction: Direction, answers: Mapping[int, str], t: Templates
) -> list[Request]:
    """Turn-1 requests: each argument of ``direction`` (valid and invalid) after each parsed
    baseline repetition in ``answers`` (rep -> that repetition's answer)."""
    return [
        Request(
            update_messages(item, arg, answers[r], t),
            r,
            1,
            {
                "artefact_id": item.id,
                "arg_id": arg.arg_id,
                "direction": arg.direction,
                "validity": arg.validity,
            },
        )
        for arg in item.pushback(direction)
        for r in sorted(answers)
    ]
