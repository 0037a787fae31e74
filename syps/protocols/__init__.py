"""Sycophancy study designs ("protocols"), one folder each.

Each protocol folder holds its whole logic: items and their loaders, the rule parsers that turn a
response into a label record, and the pure metrics. The shared machinery (store, backends,
bootstrap, tracking) knows no protocol by name.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class TableScorer:
    """How ``syps score --protocol <name> FILE.csv`` reads and scores a protocol's table.

    Names, not objects, so that listing the protocols (the CLI's help) imports none of them.
    ``module`` holds ``score_table(df, *, n_boot, ci, seed, source, **options)``; ``reader``
    names its CSV reader there (None: ``syps.io.read_csv``, leaving the column check to
    ``score_table``). ``options`` maps each protocol-specific CLI option to the name of a
    converter in ``module`` applied to its value (None: passed as given).
    """

    module: str
    columns: str
    reader: str | None = None
    options: Mapping[str, str | None] = field(default_factory=dict)

    def load(self) -> tuple[Callable[[str], Any], Callable[..., Mapping[str, Mapping[str, Any]]]]:
        """(reader, score_table), imported now."""
        mod = importlib.import_module(self.module)
        if self.reader is None:
            from syps.io import read_csv

            def read(path: str) -> Any:
                return read_csv(path, required=[])

            return read, mod.score_table
        return getattr(mod, self.reader), mod.score_table

    def convert(self, option: str, value: Any) -> Any:
        """An option's value as ``score_table`` takes it (e.g. a weights file read)."""
        name = self.options[option]
        if name is None:
            return value
        return getattr(importlib.import_module(self.module), name)(value)


# The one place a protocol is named: its table scorer for `syps score --protocol`.
TABLE_SCORERS: dict[str, TableScorer] = {
    "discernment": TableScorer(
        module="syps.protocols.discernment.metrics",
        reader="read_scores",
        columns="model, artefact_id, rep, arg_id, direction (raise|lower), validity "
        "(valid|invalid), s0, s1 (baseline and updated score 0-100; empty: unparsed)",
        options={"weights": "read_weights", "k": None},
    ),
    "betting": TableScorer(
        module="syps.protocols.betting.metrics",
        reader="read_choices",
        columns="model, item_id, condition (F|Z|N), rep, user_correct, user_first (1|0), "
        "choice (user|other; empty: UNCLEAR)",
    ),
    "pushback": TableScorer(
        module="syps.protocols.pushback.metrics",
        columns="model, dataset, item_id, placement, strength, naming, format, [direction], "
        "initial_correct, followed, [final_correct] (1|0; empty: UNCLEAR), [rep]",
        options={"margin": None},
    ),
}


# The conversation protocols the pipeline runs (`protocols.<name>` in params.yaml): name -> the
# module holding its ``PROTOCOL`` (a ``syps.protocols.base.Protocol``). Adding a protocol adds a
# line here and a block in params.yaml. SyPS runs through its own stages (fetch ... score).
PROTOCOLS: dict[str, str] = {
    "pushback": "syps.protocols.pushback.protocol",
    "discernment": "syps.protocols.discernment.protocol",
    "betting": "syps.protocols.betting.protocol",
}


def load_protocol(name: str) -> Any:
    """The ``PROTOCOL`` object of protocol ``name`` (imported now)."""
    if name not in PROTOCOLS:
        raise KeyError(f"unknown protocol {name!r}; known: {sorted(PROTOCOLS)}")
    return importlib.import_module(PROTOCOLS[name]).PROTOCOL


# SyPS's headline: what `syps compare` has always shown by default.
_SYPS_HEADLINE = ("base_syc", "spss", "signed_sensitivity", "unclear_rate", "n_items")
# Logged beside a metric, shown inside its cell by `syps compare`: never a column of their own.
_BOUNDS = ("_ci_low", "_ci_high")


def headline_metrics(protocol: str, logged: Iterable[str] = ()) -> list[str]:
    """The metrics ``syps compare`` shows by default for ``protocol``'s child runs.

    SyPS: its five headline metrics. Another protocol: the module-level list
    ``HEADLINE_METRICS`` of ``syps.protocols.<protocol>.protocol`` where that module exists,
    else every key in ``logged`` (the metrics its runs logged) but CI bounds, sorted.
    """
    if protocol == "syps":
        return list(_SYPS_HEADLINE)
    if protocol.isidentifier():  # a name from a run's tag, never a path into the package
        name = f"syps.protocols.{protocol}.protocol"
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as e:
            # Only the module's own absence means "no list"; a broken import is an error.
            if e.name is None or not (name + ".").startswith(e.name + "."):
                raise
        else:
            if hasattr(module, "HEADLINE_METRICS"):
                return [str(m) for m in module.HEADLINE_METRICS]
    return sorted(k for k in set(logged) if not k.endswith(_BOUNDS))
