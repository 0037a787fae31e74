"""The registry (``syps.protocols.PROTOCOLS``): each protocol the ``PROTOCOL`` of its own
package, imported when looked up; the legacy names map to cues; ``headline_of`` gives `syps
compare` its default columns; listing the protocols imports no torch."""

from __future__ import annotations

import ast
import dataclasses
import fnmatch
import importlib
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from syps.core.config import ProtocolParams, parse, read_yaml
from syps.core.legacy import current_name
from syps.core.protocol import Protocol, headline_of, protocol_order
from syps.core.reporting import Reporting
from syps.protocols import DEFAULT_PROTOCOL, PROTOCOLS
from syps.stage import protocol_named

FOLDERS = Path(__file__).resolve().parents[2] / "syps" / "protocols"


def test_syps_headline_is_the_long_standing_default() -> None:
    # SyPS's runs logged as "syps" (or untagged) are cues' now, with its headline.
    expected = ["base_syc", "spss", "signed_sensitivity", "unclear_rate", "n_items"]
    for logged in ("syps", "", "cues"):
        assert headline_of(PROTOCOLS, current_name(logged), ["anything"]) == expected


def test_a_protocol_the_registry_lacks_shows_every_logged_key_but_ci_bounds() -> None:
    logged = ["p_val", "beta_Z", "beta_Z_ci_low", "beta_Z_ci_high", "contrast/naming/diff"]
    assert headline_of(PROTOCOLS, "nosuchproto", logged) == [
        "beta_Z",
        "contrast/naming/diff",
        "p_val",
    ]


@pytest.mark.parametrize("name", list(PROTOCOLS))
def test_every_entry_is_its_packages_protocol(name: str) -> None:
    protocol = PROTOCOLS[name]
    assert isinstance(protocol, Protocol) and protocol.name == name
    # A stage imports the same object by its folder's name, the package's own PROTOCOL.
    assert protocol_named(name) is protocol
    assert importlib.import_module(f"syps.protocols.{name}").PROTOCOL is protocol
    # Its slots are its own folder's functions (protocol.py, or the package itself for a
    # one-file design such as echo), or the contract's defaults.
    own = (f"syps.protocols.{name}", "syps.core.protocol", "syps.core.reporting")
    slots = [getattr(protocol, f.name) for f in dataclasses.fields(protocol)]
    slots += [getattr(protocol.report, f.name) for f in dataclasses.fields(protocol.report)]
    for slot in filter(callable, slots):
        assert slot.__module__.startswith(own), (slot, slot.__module__)
    table = protocol.report.table
    if table is not None:
        assert callable(table.read) and callable(table.score) and table.columns
        for option in table.options.values():
            assert option.convert is None or callable(option.convert)
    names = [j.name for j in protocol.report.judges]
    assert len(set(names)) == len(names), names  # --judge picks one by its name
    for spec in protocol.report.judges:
        assert callable(spec.context) and callable(spec.relabel) and spec.meaning


def test_the_shipped_protocols_are_registered_in_order() -> None:
    # A researcher's own protocols come beside these, never instead of them.
    assert list(PROTOCOLS)[:5] == ["cues", "pushback", "discernment", "betting", "adaptive"]
    assert DEFAULT_PROTOCOL == "cues"
    assert [current_name(n) for n in ("", "syps", "cues", "pushback")] == [
        "cues",
        "cues",
        "cues",
        "pushback",
    ]


def test_protocols_sort_in_registry_order_then_unknown_by_name() -> None:
    names = ["zz-unknown", "betting", "discernment", "aa-unknown", "pushback", "cues"]
    assert sorted(names, key=protocol_order(list(PROTOCOLS))) == [
        "cues",
        "pushback",
        "discernment",
        "betting",
        "aa-unknown",
        "zz-unknown",
    ]
    assert sorted(["b", "z", "a"], key=protocol_order(["z"])) == ["z", "a", "b"]


def _unused(*args: Any) -> Any:
    raise AssertionError("not called")


# A design with the four slots it must write and no table scorer.
_TABLELESS: Protocol[Any, Any] = Protocol(
    name="toyless",
    params_type=ProtocolParams,
    load_items=_unused,
    read_items=_unused,
    requests=_unused,
    label=_unused,
    score=_unused,
    report=Reporting(headline_metrics=("x",)),
)


def test_a_protocol_without_a_table_is_refused_by_syps_score(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # The CLI lists and offers only the protocols that declare a table scorer; naming one that
    # does not is a usage error naming it, not a traceback.
    from typer.testing import CliRunner

    from syps.cli import _score_help, _table_options, app

    monkeypatch.setitem(PROTOCOLS, "toyless", _TABLELESS)
    assert "toyless" not in _score_help() and "\ncues: " in _score_help()
    assert all("toyless" not in users for _, users in _table_options().values())
    table = tmp_path / "t.csv"
    table.write_text("model,label\nm,1\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["score", "--protocol", "toyless", str(table)])
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit)
    assert "--protocol" in result.stderr and "'toyless'" in result.stderr
    assert result.stdout == ""


def test_a_table_option_converts_with_its_function(tmp_path: Path) -> None:
    # --weights names a file: discernment's converter reads it; --margin is taken as given.
    assert PROTOCOLS["pushback"].report.table is not None
    assert PROTOCOLS["pushback"].report.table.options["margin"].convert is None
    weights = PROTOCOLS["discernment"].report.table.options["weights"]  # type: ignore[union-attr]
    path = tmp_path / "w.csv"
    path.write_text("arg_id,q\na,0.75\nb,0.25\n", encoding="utf-8")
    assert weights.convert is not None
    assert weights.convert(path) == {"a": 0.75, "b": 0.25}


def test_the_defaults_of_a_minimal_protocol() -> None:
    # What a design need not write: one turn, no lint beyond the templates, no auxiliary data,
    # no figures, no tags, nothing flagged, the artifacts as they are, every cell per metric.
    p = _TABLELESS
    r = p.report
    labels = pd.DataFrame({"label": [1.0, 0.0]}, index=[3, 7])
    assert p.turns(None) == 1 and p.run_prefix == "toyless" and r.run_metrics == ()
    assert p.fan_out_reps and p.needs_sampling_for_reps
    assert p.template_specs(None, "protocols.toyless") == [] and p.templates(None) == {}
    assert p.lint(None, None, pd.DataFrame({"x": [1, 2]})) == {
        "conversations": 2,
        "checks": ["template placeholders"],
    }
    assert p.auxiliary(None, None, None).empty  # type: ignore[arg-type]
    assert r.run_tags(None) == {} and r.metric_cells("x") is None
    review = r.review(None, None, labels)
    assert list(review.index) == [3, 7] and not review["flagged"].any()
    assert list(review["expected"]) == ["", ""]
    assert r.link_traces([Path("a")], pd.DataFrame(), Path("o")) == [Path("a")]
    assert r.summary({}, 0.95) is None
    assert r.power_contrasts(None, None, None) == [] and r.table is None and r.judges == ()
    assert r.figures(None, None).figures == []  # type: ignore[arg-type]


def test_the_registry_imports_a_protocol_when_it_is_first_looked_up() -> None:
    # A stage looks its own protocol up: only that package is imported (test_dvc_deps checks
    # the stage processes), and the entries keep the registry's order (the shipped five
    # first; tests/protocols/test_adding_a_protocol.py adds a sixth).
    code = (
        "import sys; from syps.protocols import PROTOCOLS; "
        "assert list(PROTOCOLS)[:5] == "
        "['cues', 'pushback', 'discernment', 'betting', 'adaptive']; "
        "assert not any(m.startswith('syps.protocols.') for m in sys.modules); "
        "PROTOCOLS['betting']; "
        "print(sorted(m for m in sys.modules if m.count('.') == 2 "
        "and m.startswith('syps.protocols.')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['syps.protocols.betting']"


def test_listing_the_protocols_imports_no_torch() -> None:
    code = "import sys, syps.protocols, syps.cli; sys.exit('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr or "importing the registry imported torch"


@pytest.mark.parametrize("name", [n for n in PROTOCOLS if (FOLDERS / n / "params.yaml").is_file()])
def test_a_protocols_folder_params_are_its_codes_defaults(name: str) -> None:
    """docs/changing-the-study.md: each protocol's defaults, with comments, are its folder's
    params.yaml. Parsed, that file is the params type's own defaults, key for key (a design
    whose type has no default for a key, as SyPS's data, templates and judge, states it there
    alone); the shipped study's params.yaml may differ, holding the study's values. A design
    without the file (the one-file echo example) has its defaults in its code alone."""
    protocol = PROTOCOLS[name]
    path = FOLDERS / name / "params.yaml"
    parsed = parse(protocol.params_type, read_yaml(path.read_text(encoding="utf-8")), name)
    differ = {}
    for f in dataclasses.fields(protocol.params_type):
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            continue  # no default in the code: the folder's file states it alone
        if getattr(parsed, f.name) != default:
            differ[f.name] = (getattr(parsed, f.name), default)
    assert not differ, differ


# A template text of at least this many characters, or a line of one, found in the code is a
# second copy of it (discernment's baseline, 28 characters, counts); shorter ones ("my friend",
# "Friend 1's claim", "{initial_prompt}") are words a docstring or a parser may hold.
_COPY_MIN = 20


def _strings(value: Any) -> Iterator[str]:
    """Every string leaf of a YAML value."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def _template_texts(path: Path) -> set[str]:
    """The texts under `templates` in a folder's params.yaml, and each of their lines."""
    raw = read_yaml(path.read_text(encoding="utf-8"))
    texts = set(_strings(raw.get("templates")))
    texts |= {line for t in texts for line in t.splitlines()}
    return {t for t in texts if len(t) >= _COPY_MIN}


def _code_literals() -> Iterator[tuple[str, str]]:
    """(file:line, text) of every string literal in syps/ (adjacent literals joined, as Python
    joins them; the literal parts of f-strings too)."""
    for path in sorted(FOLDERS.parent.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                yield f"{path.relative_to(FOLDERS.parents[1])}:{node.lineno}", node.value


@pytest.mark.parametrize("name", sorted(p.parent.name for p in FOLDERS.glob("*/params.yaml")))
def test_no_template_text_of_a_folders_params_is_written_in_code(name: str) -> None:
    """Issue 33: a template text is stated once, in its protocol folder's params.yaml (which
    the code reads for its defaults); a copy of it, or of a part of it, as a string literal
    anywhere in syps/ is the second statement that drifts."""
    texts = _template_texts(FOLDERS / name / "params.yaml")
    copies = [
        (at, text)
        for at, literal in _code_literals()
        for text in texts
        if text in literal or (len(literal) >= _COPY_MIN and literal in text)
    ]
    assert not copies, copies


def test_the_folder_params_ship_with_the_package() -> None:
    # The code reads its folders' params.yaml for its defaults, so an installed syps needs them.
    pyproject = tomllib.loads((FOLDERS.parents[1] / "pyproject.toml").read_text(encoding="utf-8"))
    data: dict[str, list[str]] = pyproject["tool"]["setuptools"]["package-data"]
    for path in FOLDERS.glob("*/params.yaml"):
        package = ".".join(path.parent.relative_to(FOLDERS.parents[1]).parts)
        patterns = [*data.get("*", []), *data.get(package, [])]
        assert any(fnmatch.fnmatch(path.name, p) for p in patterns), (package, data)
