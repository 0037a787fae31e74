"""The registry (syps.protocols): every entry names modules that exist and hold what it says,
the legacy names map to cues, and headline_metrics gives `syps compare` its default columns."""

from __future__ import annotations

import importlib
import sys
import types
from pathlib import Path

import pytest

import syps.protocols as registry
from syps.protocols import (
    PROTOCOLS,
    Entry,
    TableScorer,
    current_name,
    headline_metrics,
    load_protocol,
    registry_order,
)

FOLDERS = Path(registry.__file__).resolve().parent


def test_syps_headline_is_the_long_standing_default() -> None:
    # SyPS's runs logged as "syps" (or untagged) are cues' now, with its headline.
    expected = ["base_syc", "spss", "signed_sensitivity", "unclear_rate", "n_items"]
    assert headline_metrics("syps", ["anything"]) == expected
    assert headline_metrics("", ["anything"]) == expected
    assert headline_metrics("cues", ["anything"]) == expected


def _toy(monkeypatch: pytest.MonkeyPatch) -> None:
    """A protocol ``toyproto`` in the registry, its module not on disk."""
    entry = Entry("syps.protocols.toyproto.protocol", TableScorer("syps.protocols.toyproto", ""))
    monkeypatch.setitem(PROTOCOLS, "toyproto", entry)


def test_a_protocol_module_declares_its_headline(monkeypatch: pytest.MonkeyPatch) -> None:
    _toy(monkeypatch)
    module = types.ModuleType("syps.protocols.toyproto.protocol")
    module.PROTOCOL = types.SimpleNamespace(  # type: ignore[attr-defined]
        headline_metrics=("follow_rate/in_context/simple/named/fmt-objection/auto",)
    )
    monkeypatch.setitem(sys.modules, module.__name__, module)
    assert headline_metrics("toyproto", ["p_val"]) == [
        "follow_rate/in_context/simple/named/fmt-objection/auto"
    ]


def test_without_a_module_every_logged_key_but_ci_bounds() -> None:
    logged = ["p_val", "beta_Z", "beta_Z_ci_low", "beta_Z_ci_high", "contrast/naming/diff"]
    assert headline_metrics("nosuchproto", logged) == ["beta_Z", "contrast/naming/diff", "p_val"]
    # A tag value that is no Python name is never imported.
    assert headline_metrics("../etc", ["p_val"]) == ["p_val"]


def test_a_module_that_fails_to_import_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    # A missing dependency inside a registered protocol's module is a bug to show, not "no list".
    _toy(monkeypatch)

    def broken(name: str, *args: object, **kwargs: object) -> types.ModuleType:
        raise ModuleNotFoundError("No module named 'nosuchdep'", name="nosuchdep")

    monkeypatch.setattr("importlib.import_module", broken)
    with pytest.raises(ModuleNotFoundError, match="nosuchdep"):
        headline_metrics("toyproto", ["p_val"])


@pytest.mark.parametrize("name", list(PROTOCOLS))
def test_every_entry_names_what_exists(name: str) -> None:
    entry = PROTOCOLS[name]
    protocol = load_protocol(name)
    assert protocol.name == name
    # Its module lies in its own folder, and the folder carries its default params block.
    assert entry.module.startswith(f"syps.protocols.{name}.")
    assert (FOLDERS / name / "params.yaml").is_file()
    assert list(protocol.headline_metrics) == headline_metrics(name)
    for module in (entry.table.module, entry.validation, entry.summary):
        assert module is None or module.startswith(f"syps.protocols.{name}.")
    reader, score_table = entry.table.load()
    assert callable(reader) and callable(score_table)
    if entry.validation is not None:
        validation = importlib.import_module(entry.validation)
        assert callable(validation.judge_sample) and callable(validation.judge_validate)
    if entry.summary is not None:
        assert callable(importlib.import_module(entry.summary).summary_table)


def test_the_registry_order_and_names() -> None:
    # SyPS first, as it was the study before it was a protocol; unknown ones after, by name.
    assert list(PROTOCOLS)[0] == "cues"
    assert set(PROTOCOLS) == {"cues", "pushback", "discernment", "betting"}
    assert sorted(["zeta", "betting", "alpha", "cues"], key=registry_order) == [
        "cues",
        "betting",
        "alpha",
        "zeta",
    ]
    assert [current_name(n) for n in ("", "syps", "cues", "pushback")] == [
        "cues",
        "cues",
        "cues",
        "pushback",
    ]
    with pytest.raises(KeyError, match="unknown protocol 'nope'"):
        load_protocol("nope")


def test_a_table_option_converts_with_its_module() -> None:
    # --weights names a file: discernment's converter reads it; --margin is taken as given.
    assert PROTOCOLS["pushback"].table.convert("margin", 0.1) == 0.1
    assert PROTOCOLS["discernment"].table.options["weights"].convert == "read_weights"
