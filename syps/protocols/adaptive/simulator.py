"""The simulated user's request and the rule checks on what it wrote (issue 47, in progress).

The controller (``controller``) chooses each user turn's tactic; the simulator only words it.
Its request is a conversation of its own: a system message (the instruction template, filled
with the persona, the question, the claim the user presses, the facts it may cite and the
tactic's brief) and one user message holding the transcript so far, the target's answers as
``ASSISTANT`` and the earlier user turns as ``USER``. That request is what the response store
keys (with the simulator's identity, sampling and repetition), so an edit of the template, of
a brief or of any earlier turn changes exactly the user turns that depend on it.

What a rule can see of a simulator turn is checked here, and a hit flags the conversation
(reported, left out of every rate): an empty turn, a turn that breaks character (speaks as an
AI or as the assistant, or writes both sides), and a cited source that is none of the facts the
scenario lets the user cite. Finer judgements (an invented fact without a citation marker) are
the judge's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from syps.core.config import folder_defaults
from syps.core.templating import fill, substitute
from syps.protocols.adaptive.scenarios import Scenario

# The texts are the folder's params.yaml, where they are documented, and are stated nowhere
# else: each tactic's brief (what the user's next message must do, never its words) and the
# instructions it is given in.
FOLDER_PARAMS = Path(__file__).with_name("params.yaml")
_DEFAULTS = folder_defaults(
    FOLDER_PARAMS,
    {"templates.instructions": str, "templates.briefs": dict[str, str], "templates.question": str},
)
BRIEFS: Mapping[str, str] = _DEFAULTS["templates.briefs"]
INSTRUCTIONS: str = _DEFAULTS["templates.instructions"]
QUESTION: str = _DEFAULTS["templates.question"]

NO_PERSONA = "an ordinary user"
NO_FACTS = "none"


def simulator_messages(
    scenario: Scenario,
    claim: str,
    transcript: Sequence[Mapping[str, str]],
    tactic: str,
    instructions: str = INSTRUCTIONS,
    briefs: Mapping[str, str] = BRIEFS,
) -> list[dict[str, str]]:
    """The simulator's request for the user turn after ``transcript`` (the target's
    conversation so far: ``{"role", "content"}`` messages, a system message left out)."""
    if tactic not in briefs:
        raise ValueError(f"no brief for tactic {tactic!r}; briefs exist for {sorted(briefs)}")
    brief = substitute(briefs[tactic], {"claim": claim})  # a brief may leave the claim out
    system = fill(
        instructions,
        {
            "persona": scenario.persona or NO_PERSONA,
            "question": scenario.question,
            "claim": claim,
            "facts": "; ".join(scenario.facts) or NO_FACTS,
            "brief": brief,
        },
        "the simulator's instructions",
    )
    lines = [
        f"{'USER' if m['role'] == 'user' else 'ASSISTANT'}: {m['content']}"
        for m in transcript
        if m["role"] != "system"
    ]
    user = (
        "The conversation so far:\n\n" + "\n\n".join(lines) + "\n\nWrite the user's next message."
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


OUT_OF_CHARACTER = re.compile(
    r"\bas an ai\b|\blanguage model\b|\bi am an assistant\b|\bi'm an assistant\b"
    r"|^\s*(assistant|user)\s*:|\n\s*(assistant|user)\s*:",
    re.IGNORECASE,
)
# A citation marker: a link, "et al.", a parenthesised year, "according to", a named study.
CITATION = re.compile(
    r"https?://\S+|\bet al\b|\(\s*(19|20)\d\d\s*\)|\baccording to\b|\ba (\d{4} )?study\b",
    re.IGNORECASE,
)


def flag(text: str, scenario: Scenario) -> str:
    """Why the simulator turn ``text`` is flagged, "" if it is not: ``empty``,
    ``out_of_character``, or ``uncited_source`` (a citation marker in a sentence that holds
    none of the scenario's citable facts)."""
    if not text.strip():
        return "empty"
    if OUT_OF_CHARACTER.search(text):
        return "out_of_character"
    facts = [f.lower() for f in scenario.facts]
    for sentence in re.split(r"(?<=[.!?])\s+", text):
        if CITATION.search(sentence) and not any(f in sentence.lower() for f in facts):
            return "uncited_source"
    return ""
