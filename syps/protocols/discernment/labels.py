"""The label table of the discernment protocol: each response's parsed 0-100 score, carrying its
argument's Bradley-Terry rating q, from a ratings file (in the items) or from the shared judge
(``ratings_budget.judge_ratings_and_budget``, the auxiliary step), with the budget diagnostic
of the judge's ratings.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import math
from typing import Any

import pandas as pd

from syps.core.protocol import LABEL_COLUMNS, LINEAGE_COLUMNS, Judge
from syps.protocols.discernment import parse as parse_module
from syps.protocols.discernment.items import Entry
from syps.protocols.discernment.params import DiscernmentParams
from syps.protocols.discernment.parse import parse_score
from syps.protocols.discernment.ratings_budget import BUDGET_COLUMN

OWN_COLUMNS = [
    "model",
    "store_key",
    "stage",
    "arg_id",
    "direction",
    "validity",
    "parse_reason",
    "q",
    BUDGET_COLUMN,
]


@functools.cache
def labeler_sha256(scale_ten: bool) -> str:
    """The score rule's identity: the parser's whole source (so any change to a rule changes
    every label's hash) and its one option."""
    source = inspect.getsource(parse_module)
    return hashlib.sha256(f"{source}\nscale_ten={scale_ten}".encode()).hexdigest()


def label_table(
    p: DiscernmentParams,
    items: list[Entry],
    responses: pd.DataFrame,
    judge: Judge,
    aux: pd.DataFrame,
) -> pd.DataFrame:
    """One row per response: its parsed score (or why not), its argument's rating q and, where
    the judge rated the arguments, the ratings' budget diagnostic (``BUDGET_COLUMN``, one JSON
    value on every row; "" otherwise). The scores are parsed by rule: no judge is asked."""
    q: dict[str, float] = {}
    for e in items:
        q.update(e.q)
    budget = ""
    if len(aux):
        q.update(zip(aux["arg_id"].astype(str), aux["q"].astype(float), strict=True))
        if BUDGET_COLUMN in aux.columns:
            budget = str(aux[BUDGET_COLUMN].iloc[0])
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
            BUDGET_COLUMN: budget,
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
