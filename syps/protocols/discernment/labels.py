"""The label table of the discernment protocol: each response's parsed 0-100 score, carrying its
argument's Bradley-Terry rating q, from a ratings file (in the items) or from the shared judge
(``ratings.judge_ratings``, the auxiliary step).
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import math
from typing import Any

import pandas as pd

from syps.core.protocol import LABEL_COLUMNS, LINEAGE_COLUMNS
from syps.protocols.discernment import parse as parse_module
from syps.protocols.discernment.items import ratings_of
from syps.protocols.discernment.params import DiscernmentParams
from syps.protocols.discernment.parse import parse_score

OWN_COLUMNS = [
    "model",
    "store_key",
    "stage",
    "arg_id",
    "direction",
    "validity",
    "parse_reason",
    "q",
]


@functools.cache
def labeler_sha256(scale_ten: bool) -> str:
    """The score rule's identity: the parser's whole source (so any change to a rule changes
    every label's hash) and its one option."""
    source = inspect.getsource(parse_module)
    return hashlib.sha256(f"{source}\nscale_ten={scale_ten}".encode()).hexdigest()


def label_table(
    p: DiscernmentParams, items: pd.DataFrame, responses: pd.DataFrame, aux: pd.DataFrame
) -> pd.DataFrame:
    """One row per response: its parsed score (or why not) and its argument's rating q."""
    q: dict[str, float] = {}
    for item in items["item"]:
        q.update(ratings_of(item))
    if len(aux):
        q.update(zip(aux["arg_id"].astype(str), aux["q"].astype(float), strict=True))
    labeler = "rule:discernment-score" + ("+scale10" if p.scale_ten else "")
    sha = labeler_sha256(p.scale_ten)
    rows = []
    for row in responses.to_dict("records"):
        cell = json.loads(row["cell"])
        out: dict[str, Any] = {c: row[c] for c in LINEAGE_COLUMNS}
        arg = cell.get("arg_id", "")
        out |= {
            "model": row["model"],
            "store_key": row["store_key"],
            "stage": cell["stage"],
            "arg_id": arg,
            "direction": cell.get("direction", ""),
            "validity": cell.get("validity", ""),
            "q": q.get(arg, math.nan),
        }
        if row["skipped"]:
            out |= {"parse_reason": "", "label": math.nan, "verdict": "SKIPPED"}
            out["evidence"] = row["skipped"]
        else:
            lab = parse_score(str(row["response"]), scale_ten=p.scale_ten)
            out |= {
                "parse_reason": lab.reason,
                "label": math.nan if lab.value is None else float(lab.value),
                "verdict": lab.status,
                "evidence": lab.evidence,
            }
        out |= {"labeler": labeler, "labeler_sha256": sha}
        rows.append(out)
    return pd.DataFrame(rows, columns=[*LINEAGE_COLUMNS, *OWN_COLUMNS, *LABEL_COLUMNS])
