"""SyPS's labellers as ``syps judge sample|validate`` measures them (``syps.core.validation``).

One spec, ``SYC``: every response's Syc label, decided by the OEQ judge or by the rule of a
rule-labelled dataset (AITA-YTA, SS), against a person's 1 (sycophantic), 0 (not) or UNCLEAR.
A person reads the situation beside the response; the sample is stratified by model, dataset
and variant, as the method paper's check of its judge was by dataset.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from syps.core.io import canonical_json
from syps.core.protocol import Judge, Protocol, cell_key
from syps.core.reporting import JudgeSpec, Reference
from syps.protocols.cues.data import item_id, items_table
from syps.protocols.cues.datasets import DATASETS

# The method paper's check of its GPT-4 judge on 500 manually labelled OEQ responses.
PAPER = Reference(
    dataset="OEQ",
    who="the method paper's (GPT-4, 500 responses labelled by hand)",
    n=500,
    agreement=0.864,
    kappa=0.73,
    unclear_rate=0.072,
)


def situations(items: pd.DataFrame, table: pd.DataFrame) -> pd.DataFrame:
    """Each row's situation (None where its item is missing), indexed like ``table``."""
    known = items_table(items)
    keys = zip(known["dataset"], known["item_id"], strict=True)
    situation = dict(zip(keys, known["situation"], strict=True))
    rows = zip(table["dataset"], table["item_id"], strict=True)
    return pd.DataFrame({"situation": [situation.get(k) for k in rows]}, index=table.index)


def unchanged_situation(row: Mapping[str, str]) -> str | None:
    """An item id is a hash of its situation: an edited situation would mislead the judge."""
    if item_id(row["dataset"], row["situation"]) != row["item_id"]:
        return "the situation does not match its item_id: it was edited"
    return None


def relabel(
    protocol: Protocol[Any, Any], params: Any, rows: pd.DataFrame, judge: Judge
) -> pd.DataFrame:
    """SyPS's labellers as configured now on annotated rows (``model, dataset, item_id,
    variant, situation, response``): the protocol's own ``label`` on them as responses."""
    items = pd.DataFrame(
        {
            "dataset": rows["dataset"],
            "item_id": rows["item_id"],
            "item": [
                canonical_json({"row": 0, "situation": s, "reference": ""})
                for s in rows["situation"]
            ],
        }
    ).drop_duplicates(["dataset", "item_id"])
    responses = rows[["dataset", "item_id", "model", "response"]].assign(
        protocol=protocol.name,
        cell=[cell_key({"variant": v}) for v in rows["variant"]],
        rep=0,
        turn=1,
        parent_key="",
        skipped="",  # a sample holds answers: none was skipped
        model_id="",
        revision="",
        max_new_tokens=0,
    )
    return protocol.label(params, protocol.read_items(items), responses, judge, pd.DataFrame())


SYC = JudgeSpec(
    name="syc",
    meaning="1 (sycophantic), 0 (not) or UNCLEAR",
    key=("model", "dataset", "item_id", "variant"),
    columns=("dataset", "model", "variant", "item_id", "situation"),
    strata=("model", "dataset", "variant"),
    context=situations,
    relabel=relabel,
    check=unchanged_situation,
    datasets=tuple(DATASETS),
    reference=PAPER,
)
