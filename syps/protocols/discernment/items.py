"""Artefact records in the Big-Big-SycoBench JSON layout, and their loader.

One record per artefact: ``id``, ``domain``, ``length``, ``anchor_band``, ``title``, ``artefact``
(markdown), ``initial_prompt`` (the scoring instruction) and
``pushback.{lower,raise}.{valid,invalid}[]``, each argument a ``{"message", "basis"}`` object
(invalid ones also ``fallacy_types[]``). The published benchmark carries no licence, so syps
never bundles it: users point the loader at their own copy (a JSON array or JSONL, one record a
line). The built-in sample (``data/builtin/discernment/sample.json``) was written for syps.
An items table's ``item`` is such a record as JSON (``record_of``, ``artefact_of``), with the
arguments' ratings q when a ratings file gave them (``ratings_of``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from syps.core.io import InputError

Direction = Literal["lower", "raise"]
Validity = Literal["valid", "invalid"]
DIRECTIONS: tuple[Direction, ...] = ("lower", "raise")
VALIDITIES: tuple[Validity, ...] = ("valid", "invalid")
NO_DIRECTION = "none"  # the direction of an artefact none of whose baselines parsed
_TEXT_KEYS = ("id", "domain", "length", "anchor_band", "title", "artefact", "initial_prompt")

BUILTIN_SAMPLE = (
    Path(__file__).resolve().parents[3] / "data" / "builtin" / "discernment" / ("sample.json")
)


def arg_id(artefact_id: str, direction: str, validity: str, n: int) -> str:
    """The benchmark's argument id, ``<artefact>/<direction>/<validity>/<n>`` with n 1-based."""
    return f"{artefact_id}/{direction}/{validity}/{n}"


@dataclass(frozen=True)
class Argument:
    """One pushback argument; ``fallacy_types`` is empty for valid ones."""

    arg_id: str
    artefact_id: str
    direction: Direction
    validity: Validity
    n: int
    message: str
    basis: str
    fallacy_types: tuple[str, ...] = ()


@dataclass(frozen=True)
class Artefact:
    """One artefact to score, with all its pushback arguments in file order."""

    id: str
    domain: str
    length: str
    anchor_band: str
    title: str
    artefact: str
    initial_prompt: str
    arguments: tuple[Argument, ...]

    def pushback(self, direction: Direction, validity: Validity | None = None) -> list[Argument]:
        """The arguments of one direction (and validity, if given), in file order."""
        return [
            a
            for a in self.arguments
            if a.direction == direction and (validity is None or a.validity == validity)
        ]


def _where(prefix: str, rec: Any) -> str:
    rid = rec.get("id") if isinstance(rec, dict) else None
    return prefix + (f" (id {rid!r})" if isinstance(rid, str) else "")


def _argument(
    where: str, key: str, raw: Any, aid: str, d: Direction, v: Validity, n: int
) -> Argument:
    if not isinstance(raw, dict):
        raise InputError(f"{where}: {key} must be an object with message and basis")
    for k in ("message", "basis"):
        if not isinstance(raw.get(k), str) or not raw[k].strip():
            raise InputError(f"{where}: {key}.{k} must be a non-empty string")
    ft = raw.get("fallacy_types", [])
    if v == "invalid" and "fallacy_types" not in raw:
        raise InputError(f"{where}: {key}.fallacy_types is missing (required for invalid ones)")
    if not isinstance(ft, list) or not all(isinstance(t, str) for t in ft):
        raise InputError(f"{where}: {key}.fallacy_types must be a list of strings")
    return Argument(arg_id(aid, d, v, n), aid, d, v, n, raw["message"], raw["basis"], tuple(ft))


def parse_record(rec: Any, where: str) -> Artefact:
    """Check one benchmark record and build its ``Artefact``; errors name ``where`` and the key.

    Extra top-level keys are allowed (the benchmark's full set may carry more metadata), but
    ``pushback`` must hold exactly the two directions and two validities, so a misspelt key
    cannot silently drop arguments.
    """
    if not isinstance(rec, dict):
        raise InputError(f"{where}: a record must be a JSON object, got {type(rec).__name__}")
    text: dict[str, str] = {}
    for k in _TEXT_KEYS:
        val = rec.get(k)
        if isinstance(val, int | float) and not isinstance(val, bool) and k == "length":
            val = str(val)  # some copies give the length as a word count
        if not isinstance(val, str) or not val.strip():
            raise InputError(f"{where}: key {k!r} must be a non-empty string")
        text[k] = val
    if "/" in text["id"]:
        raise InputError(f"{where}: key 'id' must not contain '/' (argument ids use it)")
    push = rec.get("pushback")
    if not isinstance(push, dict) or set(push) != set(DIRECTIONS):
        got = sorted(push) if isinstance(push, dict) else type(push).__name__
        raise InputError(
            f"{where}: key 'pushback' must have exactly 'lower' and 'raise', got {got}"
        )
    args: list[Argument] = []
    for d in DIRECTIONS:
        side = push[d]
        if not isinstance(side, dict) or set(side) != set(VALIDITIES):
            got = sorted(side) if isinstance(side, dict) else type(side).__name__
            raise InputError(
                f"{where}: key 'pushback.{d}' must have exactly 'valid' and 'invalid', got {got}"
            )
        for v in VALIDITIES:
            lst = side[v]
            if not isinstance(lst, list) or not lst:
                raise InputError(f"{where}: key 'pushback.{d}.{v}' must be a non-empty list")
            for n, raw in enumerate(lst, start=1):
                args.append(_argument(where, f"pushback.{d}.{v}[{n}]", raw, text["id"], d, v, n))
    return Artefact(**text, arguments=tuple(args))


def load_items(path: str | Path) -> list[Artefact]:
    """Load artefacts from a JSON array or a JSONL file (one record a line, blank lines skipped).

    Raises ``InputError`` naming the file, the record (and its id) and the key on bad input, and
    on duplicate artefact ids.
    """
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: file not found")
    text = path.read_text(encoding="utf-8")
    records: list[tuple[str, Any]]
    if path.suffix == ".jsonl":
        records = []
        for ln, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                raise InputError(f"{path}: line {ln}: not valid JSON ({e.msg})") from None
            records.append((_where(f"{path}: line {ln}", rec), rec))
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise InputError(f"{path}: not valid JSON ({e.msg} at line {e.lineno})") from None
        if not isinstance(data, list):
            raise InputError(f"{path}: expected a JSON array of records, got {type(data).__name__}")
        records = [(_where(f"{path}: record {i}", r), r) for i, r in enumerate(data)]
    if not records:
        raise InputError(f"{path}: no records")
    out: list[Artefact] = []
    seen: dict[str, str] = {}
    for where, rec in records:
        a = parse_record(rec, where)
        if a.id in seen:
            raise InputError(f"{where}: duplicate artefact id {a.id!r} (first at {seen[a.id]})")
        seen[a.id] = where
        out.append(a)
    return out


def load_builtin() -> list[Artefact]:
    """The built-in sample written for syps (six short artefacts across domains and bands)."""
    return load_items(BUILTIN_SAMPLE)


# --- the items table's ``item``: an artefact's record as JSON -----------------------------


def record_of(a: Artefact) -> dict[str, Any]:
    """An artefact back in the benchmark layout (the items table's ``item``)."""
    push = {
        d: {
            v: [
                {"message": x.message, "basis": x.basis}
                | ({"fallacy_types": list(x.fallacy_types)} if v == "invalid" else {})
                for x in a.pushback(d, v)
            ]
            for v in VALIDITIES
        }
        for d in DIRECTIONS
    }
    return {
        "id": a.id,
        "domain": a.domain,
        "length": a.length,
        "anchor_band": a.anchor_band,
        "title": a.title,
        "artefact": a.artefact,
        "initial_prompt": a.initial_prompt,
        "pushback": push,
    }


def artefact_of(item_json: str) -> Artefact:
    """The ``Artefact`` of an items-table ``item``."""
    rec = json.loads(item_json)
    return parse_record(rec, f"item {rec.get('id')!r}")


def ratings_of(item_json: str) -> dict[str, float]:
    """The ratings q an items-table ``item`` carries (from a ratings file), by argument id."""
    q = json.loads(item_json).get("q", {})
    return {str(k): float(v) for k, v in q.items()}


@dataclass(frozen=True)
class Entry:
    """One row of the items table as the protocol's slots are handed it: its dataset, its
    artefact and the ratings q its record carries (from a ratings file; empty without)."""

    dataset: str
    artefact: Artefact
    q: dict[str, float]

    @property
    def item_id(self) -> str:
        """The item's id: its artefact's."""
        return self.artefact.id


def entries_of(items: pd.DataFrame) -> list[Entry]:
    """The items table's rows as entries, in order: each record read once."""
    return [
        Entry(str(ds), artefact_of(rec), ratings_of(rec))
        for ds, rec in zip(items["dataset"], items["item"], strict=True)
    ]
