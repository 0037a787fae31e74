"""The items table of the discernment protocol: its artefacts loaded (with their ratings q from
a file) and linted (no argument text repeated or leaked into the baseline prompt).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from syps.core.io import InputError, LintError, canonical_json
from syps.protocols.discernment.items import Entry, load_builtin, record_of
from syps.protocols.discernment.items import load_items as load_records
from syps.protocols.discernment.metrics import read_weights
from syps.protocols.discernment.params import BUILTIN, NAME, DiscernmentParams


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


def _sent_baselines(conversations: pd.DataFrame) -> dict[tuple[str, str], list[str]]:
    """Each artefact's distinct baseline prompts as sent (their last turn, normalised)."""
    out: dict[tuple[str, str], list[str]] = {}
    for ds, iid, text in zip(
        conversations["dataset"], conversations["item_id"], conversations["messages"], strict=True
    ):
        prompt = _norm(json.loads(text)[-1]["content"])
        found = out.setdefault((str(ds), str(iid)), [])
        if prompt not in found:
            found.append(prompt)
    return out


def lint_table(
    p: DiscernmentParams, items: list[Entry], conversations: pd.DataFrame
) -> dict[str, Any]:
    """Valid and invalid update turns must differ only in the argument's text: no argument
    repeats another's, and none is in the baseline prompt (the first turn, ``conversations``,
    as it will be sent)."""
    # The templates' placeholders are checked when params are loaded (``template_specs``).
    errors: list[str] = []
    r = p.ratings
    if r.source == "judge" and r.pool == "global":
        n = sum(len(e.artefact.arguments) for e in items)
        if not 0 < r.matches < n or (n * r.matches) % 2:
            errors.append(
                f"protocols.{NAME}.ratings.matches: {r.matches} gives no {r.matches}-regular "
                f"graph on the pool's {n} arguments (needs 0 < matches < n, n*matches even)"
            )
    elif r.source == "judge":
        d = r.degree
        for e in items:
            n = len(e.artefact.arguments)
            if not 0 < d < n or (n * d) % 2:
                errors.append(
                    f"protocols.{NAME}.ratings.degree: {d} gives no {d}-regular graph on the "
                    f"{n} arguments of {e.item_id} (needs 0 < d < n, n*d even)"
                )
    sent = _sent_baselines(conversations)
    n_args = 0
    for e in items:
        art = e.artefact
        n_args += len(art.arguments)
        seen: dict[str, str] = {}
        for x in art.arguments:
            t = _norm(x.message)
            if t in seen:
                errors.append(
                    f"{e.dataset}/{art.id}: {x.arg_id} repeats the text of {seen[t]} "
                    "(a text in two cells confounds them)"
                )
            else:
                seen[t] = x.arg_id
        for prompt in sent.get((e.dataset, art.id), []):
            for x in art.arguments:
                if _norm(x.message) in prompt:
                    errors.append(
                        f"{e.dataset}/{art.id}: {x.arg_id}'s text is in the baseline prompt"
                    )
    if errors:
        raise LintError("\n".join(errors))
    return {
        "n_artefacts": len(items),
        "n_arguments": n_args,
        "checks": ["duplicate-argument", "leak"]
        + (["ratings-degree"] if p.ratings.source == "judge" else []),
    }
