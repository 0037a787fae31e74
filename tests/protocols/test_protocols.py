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
    DEFAULT_PROTOCOL,
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
    # Each entry is checked for what it declares: a protocol without a table scorer, a judge
    # validation or a summary (the docs' smallest one) passes with its module alone.
    entry = PROTOCOLS[name]
    protocol = load_protocol(name)
    assert protocol.name == name
    # Its module lies in its own folder, and the folder carries its default params block.
    assert entry.module.startswith(f"syps.protocols.{name}.")
    assert (FOLDERS / name / "params.yaml").is_file()
    assert list(protocol.headline_metrics) == headline_metrics(name)
    table = entry.table
    for module in (table.module if table else None, entry.validation, entry.summary):
        assert module is None or module.startswith(f"syps.protocols.{name}.")
    if table is not None:
        reader, score_table = table.load()
        assert callable(reader) and callable(score_table)
        scorer = importlib.import_module(table.module)
        for option in table.options.values():
            assert option.convert is None or callable(getattr(scorer, option.convert))
    if entry.validation is not None:
        validation = importlib.import_module(entry.validation)
        assert callable(validation.judge_sample) and callable(validation.judge_validate)
    if entry.summary is not None:
        assert callable(importlib.import_module(entry.summary).summary_table)


def test_the_shipped_protocols_are_registered() -> None:
    # A researcher's own protocols come beside these, never instead of them.
    assert {"cues", "pushback", "discernment", "betting"} <= set(PROTOCOLS)
    assert DEFAULT_PROTOCOL == "cues"
    assert [current_name(n) for n in ("", "syps", "cues", "pushback")] == [
        "cues",
        "cues",
        "cues",
        "pushback",
    ]
    with pytest.raises(KeyError, match="unknown protocol 'nope'"):
        load_protocol("nope")


def test_registry_order_puts_cues_first_then_the_registry_then_unknown_by_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # SyPS first, as it was the study before it was a protocol, even when a line was added above
    # its own; the others as the registry lists them; names it does not know after, by name.
    toy = {name: Entry(f"syps.protocols.{name}.protocol") for name in ("echo", "cues", "bet")}
    monkeypatch.setattr(registry, "PROTOCOLS", toy)
    names = ["zeta", "bet", "alpha", "cues", "echo"]
    assert sorted(names, key=registry_order) == ["cues", "echo", "bet", "alpha", "zeta"]


def test_the_shipped_protocols_sort_in_their_registry_order() -> None:
    # However many protocols a researcher adds, the shipped four keep their order among them.
    names = ["zz-unknown", "betting", "discernment", "aa-unknown", "pushback", "cues"]
    assert sorted(names, key=registry_order)[:4] == ["cues", "pushback", "discernment", "betting"]
    assert sorted(names, key=registry_order)[4:] == ["aa-unknown", "zz-unknown"]


def test_a_protocol_without_a_table_is_refused_by_syps_score(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # The CLI lists and offers only the protocols that declare a table scorer; naming one that
    # does not is a usage error naming it, not a traceback.
    from typer.testing import CliRunner

    from syps.cli import _score_help, _table_options, app

    monkeypatch.setitem(PROTOCOLS, "toyless", Entry("syps.protocols.toyless.protocol"))
    assert "toyless" not in _score_help() and "\ncues: " in _score_help()
    assert all("toyless" not in users for _, users in _table_options().values())
    table = tmp_path / "t.csv"
    table.write_text("model,label\nm,1\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["score", "--protocol", "toyless", str(table)])
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit)
    assert "--protocol" in result.stderr and "'toyless'" in result.stderr
    assert result.stdout == ""


def test_a_table_option_converts_with_its_module() -> None:
    # --weights names a file: discernment's converter reads it; --margin is taken as given.
    assert PROTOCOLS["pushback"].table.convert("margin", 0.1) == 0.1
    assert PROTOCOLS["discernment"].table.options["weights"].convert == "read_weights"
