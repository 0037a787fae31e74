"""headline_metrics: the columns `syps compare` shows by default for each protocol."""

from __future__ import annotations

import sys
import types

import pytest

from syps.protocols import headline_metrics


def test_syps_headline_is_the_long_standing_default() -> None:
    assert headline_metrics("syps", ["anything"]) == [
        "base_syc",
        "spss",
        "signed_sensitivity",
        "unclear_rate",
        "n_items",
    ]


def test_a_protocol_module_declares_its_headline(monkeypatch: pytest.MonkeyPatch) -> None:
    module = types.ModuleType("syps.protocols.toyproto.protocol")
    module.HEADLINE_METRICS = ["follow_rate/in_context/simple/named/fmt-objection/auto"]  # type: ignore[attr-defined]
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
    # A missing dependency inside the protocol's module is a bug to show, not "no list".
    def broken(name: str, *args: object, **kwargs: object) -> types.ModuleType:
        raise ModuleNotFoundError("No module named 'nosuchdep'", name="nosuchdep")

    monkeypatch.setattr("importlib.import_module", broken)
    with pytest.raises(ModuleNotFoundError, match="nosuchdep"):
        headline_metrics("toyproto", ["p_val"])
