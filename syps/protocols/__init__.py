"""Sycophancy study designs ("protocols"), one folder each.

Each protocol folder holds its whole logic: items and their loaders, the rule parsers that turn a
response into a label record, and the pure metrics. The shared machinery (store, backends,
bootstrap, tracking) knows no protocol by name: it asks the registry below.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class TableOption:
    """An option of ``syps score --protocol <name>``: its help, the type it is given as, and the
    converter in the scorer's module applied to its value (None: passed as given)."""

    help: str
    type: type
    convert: str | None = None


@dataclass(frozen=True)
class TableScorer:
    """How ``syps score --protocol <name> FILE.csv`` reads and scores a protocol's table.

    Names, not objects, so that listing the protocols (the CLI's help) imports none of them.
    ``module`` holds ``score_table(df, *, n_boot, ci, seed, source, **options)``; ``reader``
    names its CSV reader there (None: ``syps.core.io.read_csv``, leaving the column check to
    ``score_table``). ``options`` are the protocol's own CLI options, by name.
    """

    module: str
    columns: str
    reader: str | None = None
    options: Mapping[str, TableOption] = field(default_factory=dict)

    def load(self) -> tuple[Callable[[str], Any], Callable[..., Mapping[str, Mapping[str, Any]]]]:
        """(reader, score_table), imported now."""
        mod = importlib.import_module(self.module)
        if self.reader is None:
            from syps.core.io import read_csv

            def read(path: str) -> Any:
                return read_csv(path, required=[])

            return read, mod.score_table
        return getattr(mod, self.reader), mod.score_table

    def convert(self, option: str, value: Any) -> Any:
        """An option's value as ``score_table`` takes it (e.g. a weights file read)."""
        name = self.options[option].convert
        if name is None:
            return value
        return getattr(importlib.import_module(self.module), name)(value)


@dataclass(frozen=True)
class Entry:
    """A protocol in the registry: the module holding its ``PROTOCOL`` (a
    ``syps.protocols.base.Protocol``), how ``syps score --protocol`` reads its tables, the
    module of its judge validation (``judge_sample``, ``judge_validate``) where it has one, and
    the module of ``summary_table(scores, ci)`` (``syps summary``) where it has one."""

    module: str
    table: TableScorer | None = None
    validation: str | None = None
    summary: str | None = None


# The registry, and the one place in code a protocol is named (besides its own folder): adding a
# protocol adds a line here and its block under ``protocols`` in params.yaml. Listings show the
# protocols in this order, but for ``cues``, always first (``registry_order``).
PROTOCOLS: dict[str, Entry] = {
    "cues": Entry(
        "syps.protocols.cues.protocol",
        TableScorer(
            module="syps.protocols.cues.metrics",
            reader="read_labels",
            columns="dataset, model, item_id, variant, label (1|0; empty: UNCLEAR); CSV or "
            "parquet; prints {model: {dataset: {metric: value}}}",
        ),
        validation="syps.protocols.cues.annotate",
        summary="syps.protocols.cues.report",
    ),
    "pushback": Entry(
        "syps.protocols.pushback.protocol",
        TableScorer(
            module="syps.protocols.pushback.metrics",
            columns="model, dataset, item_id, placement, strength, naming, format, [direction], "
            "initial_correct, followed, [final_correct] (1|0; empty: UNCLEAR), [rep]",
            options={"margin": TableOption("equivalence (TOST) margin [0.05]", float)},
        ),
    ),
    "discernment": Entry(
        "syps.protocols.discernment.protocol",
        TableScorer(
            module="syps.protocols.discernment.metrics",
            reader="read_scores",
            columns="model, artefact_id, rep, arg_id, direction (raise|lower), validity "
            "(valid|invalid), s0, s1 (baseline and updated score 0-100; empty: unparsed)",
            options={
                "weights": TableOption(
                    "CSV arg_id, q of label-confidence weights", Path, "read_weights"
                ),
                "k": TableOption("threshold k in sigma0 units [2]", float),
            },
        ),
    ),
    "betting": Entry(
        "syps.protocols.betting.protocol",
        TableScorer(
            module="syps.protocols.betting.metrics",
            reader="read_choices",
            columns="model, item_id, condition (F|Z|N), rep, user_correct, user_first (1|0), "
            "choice (user|other; empty: UNCLEAR)",
        ),
    ),
}
# The protocol a command means when none is named (`syps score`, `syps judge`, `syps summary`).
DEFAULT_PROTOCOL = "cues"
# The name SyPS's child runs carry when logged before it was a protocol (untagged) or as "syps".
RENAMED = {"": "cues", "syps": "cues"}
# The params keys of the layout before SyPS was the protocol ``cues``, and where each one went
# (a params file in the old layout is refused with this list).
MOVED_KEYS = {
    "data": "protocols.cues.data",
    "templates": "protocols.cues.templates",
    "generation": "protocols.cues.generation (temperature, top_p), protocols.cues.max_new_tokens",
    "labels": "protocols.cues.labels",
    "judge.system": "protocols.cues.judge.system",
    "judge.template": "protocols.cues.judge.template",
    "judge.options": "protocols.cues.judge.options",
}


def load_protocol(name: str) -> Any:
    """The ``PROTOCOL`` object of protocol ``name`` (imported now)."""
    if name not in PROTOCOLS:
        raise KeyError(f"unknown protocol {name!r}; known: {sorted(PROTOCOLS)}")
    return importlib.import_module(PROTOCOLS[name].module).PROTOCOL


def current_name(logged: str) -> str:
    """A protocol's name now, from the name a run was logged under."""
    return RENAMED.get(logged, logged)


def registry_order(name: str) -> tuple[int, str]:
    """Sorts protocols: the default one (SyPS, the study before there were protocols) first
    wherever its line sits, the others in registry order, unknown ones after, by name."""
    names = [DEFAULT_PROTOCOL, *(n for n in PROTOCOLS if n != DEFAULT_PROTOCOL)]
    return (names.index(name) if name in names else len(names), name)


def headline_metrics(protocol: str, logged: Iterable[str] = ()) -> list[str]:
    """The metrics ``syps compare`` shows by default for ``protocol``'s child runs: the
    protocol's ``headline_metrics``, or, for a protocol this version does not know, every key
    in ``logged`` (the metrics its runs logged) but CI bounds, sorted."""
    from syps.core.report import CI_BOUNDS  # shown inside a metric's cell, not as a column

    name = current_name(protocol)
    if name in PROTOCOLS:
        return [str(m) for m in load_protocol(name).headline_metrics]
    return sorted(k for k in set(logged) if not k.endswith(CI_BOUNDS))
