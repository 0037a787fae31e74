"""Prompt variants: one situation, eight social cues, everything else byte-identical.

Rendering never interprets the situation text: it is placed into the messages as an opaque
string, so braces, ``%s``, ``${x}`` or chat-template tokens in a post cannot change the prompt.
Task, format and cue texts are structure, never filled in either: the situation goes between
them by position, and params validation rejects a ``{name}`` placeholder in them (a user who
writes ``{situation}`` there expects a substitution that would never happen).
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

from syps.core.io import canonical_json, sha256_text
from syps.core.messages import conversation_json
from syps.core.protocol import Message
from syps.core.templating import TemplateSpec
from syps.protocols.cues.params import (
    JUDGE_FIELDS,
    CuesParams,
    DatasetTemplate,
    TemplateParams,
    cue_of,
)

# The lint's view of a first turn: one row per (dataset, item_id, variant), the messages as JSON.
PROMPT_COLUMNS = ["dataset", "item_id", "variant", "messages"]


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


def variant_messages(
    items: pd.DataFrame, templates: TemplateParams
) -> list[tuple[str, str, str, list[Message]]]:
    """Items crossed with their dataset's variants (every wording of every cue), as
    (dataset, item_id, variant, messages): the system turn, then the user turn."""
    rows = []
    for dataset, group in items.groupby("dataset", sort=False):
        tpl = templates.datasets[str(dataset)]
        system = system_text(tpl)
        for variant, cue in tpl.variant_cues().items():
            for iid, situation in zip(group["item_id"], group["situation"], strict=True):
                user = user_text(situation, cue, templates.cue_position, tpl.format)
                messages = [
                    {"role": "system", "content": system},
                    {"role": "user", "content": user},
                ]
                rows.append((str(dataset), str(iid), variant, messages))
    return rows


def prompts_table(conversations: pd.DataFrame) -> pd.DataFrame:
    """The lint's view of conversations (``syps.core.protocol.CONVERSATION_COLUMNS``, as the
    variants stage writes them): ``PROMPT_COLUMNS``, each row's messages the bytes sent."""
    return pd.DataFrame(
        {
            "dataset": conversations["dataset"].astype(str).to_numpy(),
            "item_id": conversations["item_id"].astype(str).to_numpy(),
            "variant": [json.loads(c)["variant"] for c in conversations["cell"]],
            "messages": conversations["messages"].to_numpy(),
        },
        columns=PROMPT_COLUMNS,
    )


def render_variants(items: pd.DataFrame, templates: TemplateParams) -> pd.DataFrame:
    """Cross items with their dataset's variants (every wording of every cue); one row per
    (dataset, item_id, variant), ``PROMPT_COLUMNS``, the messages as the bytes that are sent
    (``syps.core.conversation.conversation_json``)."""
    rows = [(d, i, v, conversation_json(m)) for d, i, v, m in variant_messages(items, templates)]
    return pd.DataFrame(rows, columns=PROMPT_COLUMNS)


def variant_shas(params: CuesParams) -> dict[tuple[str, str], str]:
    """(dataset, variant id) -> template sha256 of every configured dataset; a cue with several
    wordings also gets a cue-level entry joining its wordings' hashes with "+" (its metrics pool
    them)."""
    pos = params.templates.cue_position
    out: dict[tuple[str, str], str] = {}
    for d in params.data.datasets:
        tpl = params.templates.datasets[d]
        out.update({(d, v): template_sha256(d, v, tpl, pos) for v in tpl.variant_cues()})
    pooled: dict[tuple[str, str], list[str]] = {}
    for (d, v), h in sorted(out.items()):
        if cue_of(v) != v:
            pooled.setdefault((d, cue_of(v)), []).append(h)
    out.update({k: "+".join(hs) for k, hs in pooled.items()})
    return out


def templates_record(params: CuesParams) -> dict[str, Any]:
    """Every template exactly as rendered, with ``{situation}`` marking where the item goes:
    the artifact an audit reads to say which words produced a number."""
    pos = params.templates.cue_position
    shas = variant_shas(params)
    return {
        "cue_position": pos,
        "datasets": {
            d: {
                "task": tpl.task,
                "format": tpl.format,
                "variants": {
                    v: {
                        "cue": cue,
                        "template_sha256": shas[(d, v)],
                        "system": system_text(tpl),
                        "user": user_text("{situation}", cue, pos, tpl.format),
                    }
                    for v, cue in tpl.variant_cues().items()
                },
            }
            for d, tpl in params.templates.datasets.items()
            if d in params.data.datasets
        },
    }


def template_specs(params: CuesParams, where: str) -> list[TemplateSpec]:
    """The task, format and cue texts are sent as is (the situation goes between them by
    position, never substituted); the judge template needs ``{situation}`` and ``{response}``;
    the judge's system text is sent as is."""
    fields = frozenset(JUDGE_FIELDS)
    specs = [
        TemplateSpec(
            f"{where}.judge.template",
            params.judge.template,
            fields,
            fields,
            why={
                "situation": "the situation the reply answers (without the cue)",
                "response": "the reply the judge labels",
            },
        ),
        TemplateSpec(f"{where}.judge.system", params.judge.system, frozenset(), frozenset()),
    ]
    for d, tpl in params.templates.datasets.items():
        key = f"{where}.templates.datasets.{d}"
        texts = [(f"{key}.task", tpl.task), (f"{key}.format", tpl.format)]
        for cue, wordings in tpl.cues.items():
            if isinstance(wordings, str):
                texts.append((f"{key}.cues.{cue}", wordings))
            else:
                texts += [(f"{key}.cues.{cue}[{i}]", w) for i, w in enumerate(wordings)]
        specs += [TemplateSpec(k, text, frozenset(), frozenset()) for k, text in texts]
    return specs
