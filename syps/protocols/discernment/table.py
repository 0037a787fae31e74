"""The items table of the discernment protocol: its artefacts loaded (with their ratings q from
a file) and linted (no argument text repeated or leaked into the baseline prompt).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from syps.core.io import InputError, LintError, canonical_json
from syps.protocols.discernment.items import artefact_of, load_builtin, record_of
from syps.protocols.discernment.items import load_items as load_records
from syps.protocols.discernment.metrics import read_weights
from syps.protocols.discernment.params import BUILTIN, NAME, DiscernmentParams
from syps.protocols.discernment.prompts import baseline_messages


def load_table(p: DiscernmentParams, root: Path) -> pd.DataFrame:
    """The items table: one row per artefact (built-in or a benchmark file, the first ``limit``),
    its ``item`` the record with the ratings q from ``ratings.file`` when given."""
    if p.items == BUILTIN:
        arts, dataset = load_builtin(), BUILTIN
    else:
        arts, dataset = load_records(root / p.items), "benchmark"
    if p.limit is not None:
        if p.limit < 1:
            raise InputError(f"protocols.{NAME}.limit: must be >= 1, got {p.limit}")
        arts = arts[: p.limit]
    q: dict[str, float] = {}
    if p.ratings.source == "file":
        if not p.ratings.file:
            raise InputError(f"protocols.{NAME}.ratings.file: required with source 'file'")
        path = root / p.ratings.file
        q = read_weights(str(path))
        for a in arts:
            missing = [x.arg_id for x in a.arguments if x.arg_id not in q]
            if missing:
                raise InputError(f"{path}: no q for argument {missing[0]!r}")
    rows = []
    for a in arts:
        rec = record_of(a)
        if q:
            rec["q"] = {x.arg_id: q[x.arg_id] for x in a.arguments}
        rows.append({"dataset": dataset, "item_id": a.id, "item": canonical_json(rec)})
    return pd.DataFrame(rows, columns=["dataset", "item_id", "item"])


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def lint_table(p: DiscernmentParams, items: pd.DataFrame) -> dict[str, Any]:
    """Valid and invalid update turns must differ only in the argument's text."""
    # The templates' placeholders are checked when params are loaded (``template_specs``).
    errors: list[str] = []
    r = p.ratings
    if r.source == "judge" and r.pool == "global":
        n = sum(len(artefact_of(item).arguments) for item in items["item"])
        if not 0 < r.matches < n or (n * r.matches) % 2:
            errors.append(
                f"protocols.{NAME}.ratings.matches: {r.matches} gives no {r.matches}-regular "
                f"graph on the pool's {n} arguments (needs 0 < matches < n, n*matches even)"
            )
    elif r.source == "judge":
        d = r.degree
        for _, row in items.iterrows():
            n = len(artefact_of(row["item"]).arguments)
            if not 0 < d < n or (n * d) % 2:
                errors.append(
                    f"protocols.{NAME}.ratings.degree: {d} gives no {d}-regular graph on the "
                    f"{n} arguments of {row['item_id']} (needs 0 < d < n, n*d even)"
                )
    n_args = 0
    for _, row in items.iterrows():
        art = artefact_of(row["item"])
        n_args += len(art.arguments)
        seen: dict[str, str] = {}
        for x in art.arguments:
            t = _norm(x.message)
            if t in seen:
                errors.append(
                    f"{row['dataset']}/{art.id}: {x.arg_id} repeats the text of {seen[t]} "
                    "(a text in two cells confounds them)"
                )
            else:
                seen[t] = x.arg_id
        prompt = _norm(baseline_messages(art, p.templates)[-1]["content"])
        for x in art.arguments:
            if _norm(x.message) in prompt:
                errors.append(
                    f"{row['dataset']}/{art.id}: {x.arg_id}'s text is in the baseline prompt"
                )
    if errors:
        raise LintError("\n".join(errors))
    return {
        "n_artefacts": len(items),
        "n_arguments": n_args,
        "checks": ["duplicate-argument", "leak"]
        + (["ratings-degree"] if p.ratings.source == "judge" else []),
    }
