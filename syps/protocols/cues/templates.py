"""Prompt variants: one situation, eight social cues, everything else byte-identical.

Rendering never interprets the situation text: it is placed into the messages as an opaque
string, so braces, ``%s``, ``${x}`` or chat-template tokens in a post cannot change the prompt.
Task, format and cue texts are structure, never filled in either: the situation goes between
them by position, and params validation rejects a ``{name}`` placeholder in them (a user who
writes ``{situation}`` there expects a substitution that would never happen).
"""

from __future__ import annotations

import pandas as pd

from syps.core.io import canonical_json, sha256_text
from syps.core.messages import messages_json
from syps.protocols.cues.params import DatasetTemplate, TemplateParams

PROMPT_COLUMNS = [
    "dataset",
    "item_id",
    "variant",
    "messages",
    "template_sha256",
    "prompt_sha256",
]


def system_text(tpl: DatasetTemplate) -> str:
    """The system turn: the task instruction, shared by all variants of a dataset."""
    return tpl.task.strip()


def user_text(situation: str, cue: str, cue_position: str, fmt: str) -> str:
    """The user turn: the situation verbatim, the cue before or after it, then the format.

    The output-format instruction comes last because small models follow the most recent
    instruction far more reliably; it is the same bytes in every variant.
    """
    cue = cue.strip()
    parts = [cue, situation] if cue_position == "before" else [situation, cue]
    return "\n\n".join([p for p in parts if p] + [fmt.strip()])


def template_sha256(dataset: str, variant: str, tpl: DatasetTemplate, cue_position: str) -> str:
    """Hash of everything that shapes a prompt except the situation itself.

    ``variant`` is a variant id (``P3``, or ``P3b`` for a cue's second wording).
    """
    return sha256_text(
        canonical_json(
            {
                "dataset": dataset,
                "variant": variant,
                "system": system_text(tpl),
                "format": tpl.format.strip(),
                "cue": tpl.variant_cues()[variant],
                "cue_position": cue_position,
            }
        )
    )


def render_variants(items: pd.DataFrame, templates: TemplateParams) -> pd.DataFrame:
    """Cross items with their dataset's variants (every wording of every cue); one row per
    (dataset, item_id, variant)."""
    rows = []
    for dataset, group in items.groupby("dataset", sort=False):
        tpl = templates.datasets[str(dataset)]
        system = system_text(tpl)
        for variant, cue in tpl.variant_cues().items():
            t_sha = template_sha256(str(dataset), variant, tpl, templates.cue_position)
            for item_id, situation in zip(group["item_id"], group["situation"], strict=True):
                msgs = messages_json(
                    system, user_text(situation, cue, templates.cue_position, tpl.format)
                )
                rows.append((dataset, item_id, variant, msgs, t_sha, sha256_text(msgs)))
    return pd.DataFrame(rows, columns=PROMPT_COLUMNS)
