"""syps reads params.yaml as DVC does: every scalar the same value of the same type (DVC decides
what changed, syps what runs), and an integer key takes an integral float as DVC compares it."""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import FIXTURE_PARAMS, REPO
from dvc.utils.serialize import parse_yaml

from syps.core.config import (
    ConfigError,
    ScoreParams,
    TrackingParams,
    parse,
    read_yaml,
)
from syps.core.params import load_params
from syps.protocols import PROTOCOLS

# Scalars where YAML readers part ways: 1.1 vs 1.2 numbers, booleans and nulls, sexagesimals,
# dates, underscores, signs, special floats, quoting and explicit tags.
SCALARS = [
    "1e3", "1E3", "1e+3", "12e03", "1.5e-2", "-1e-3", "0.1e+3", ".5", "1.", "1.0", "+0.5",
    "1_0.5", "1e", "e3", "0x1F", "0XFF", "0x_1F", "0o17", "0O17", "0o8", "017", "09", "0b101",
    "1_000", "1__0", "_1", "+12", "-0", "1,000", "-.inf", "+.inf", ".Inf", ".INF", ".nan",
    ".NaN", "YES", "yes", "Yes", "no", "NO", "on", "off", "y", "n", "True", "TRUE", "true",
    "tRue", "False", "~", "null", "Null", "NULL", "", "2026-12-03", "2026-12-03 10:00:00",
    "2026-12-03T10:00:00Z", "2026-12-03T10:00:00+02:00", "1:30", "1:30:00", "190:20:30.15",
    '"1e3"', "'1e3'", "!!int '7'", "!!float '1'", "!!str 1", "0.", "12:30:45 pm",
]  # fmt: skip


def _same(a: Any, b: Any) -> bool:
    """Equal values of one type (NaN counts as equal to NaN)."""
    both_nan = isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)
    return type(a) is type(b) and (a == b or both_nan)


@pytest.mark.parametrize("scalar", SCALARS)
def test_every_scalar_reads_as_dvc_reads_it(scalar: str) -> None:
    text = f"k: {scalar}\n"
    dvc = parse_yaml(text, "params.yaml")["k"]  # what `dvc repro` / `dvc params diff` compare
    assert _same(read_yaml(text)["k"], dvc), (read_yaml(text)["k"], dvc)


@pytest.mark.parametrize(
    ("scalar", "value"),
    [
        ("1e3", 1000.0),  # PyYAML (YAML 1.1) read this as the string '1e3'
        ("1E3", 1000.0),
        ("12e03", 12000.0),
        ("1.5e-2", 0.015),
        (".5", 0.5),
        ("0x1F", 31),
        ("0o17", 15),  # a string to PyYAML
        ("017", 17),  # octal 15 to PyYAML
        ("1_000", 1000),
        ("+12", 12),
        ("-.inf", -math.inf),
        (".nan", math.nan),
        ("YES", "YES"),
        ("no", "no"),
        ("on", "on"),
        ("True", True),
        ("~", None),
        ("null", None),
        ("2026-12-03", dt.date(2026, 12, 3)),
        ("1:30", "1:30"),  # sexagesimal 90 to PyYAML
        ('"1e3"', "1e3"),
    ],
)
def test_hand_read_values(scalar: str, value: object) -> None:
    assert _same(read_yaml(f"k: {scalar}\n")["k"], value)


def test_keys_read_as_dvc_reads_them() -> None:
    text = "options: {YES: 1, NO: 0, on: 2, 1e3: 3, 017: 4}\n"
    assert (
        read_yaml(text)
        == parse_yaml(text, "p")
        == {"options": {"YES": 1, "NO": 0, "on": 2, 1000.0: 3, 17: 4}}
    )


FILES = {
    "tests' params": FIXTURE_PARAMS,
    "tests/fixtures/params.yaml": REPO / "tests" / "fixtures" / "params.yaml",
    **{
        f"{p.parent.name} defaults": p
        for p in sorted((REPO / "syps" / "protocols").glob("*/params.yaml"))
    },
}


@pytest.mark.parametrize("path", FILES.values(), ids=FILES.keys())
def test_whole_files_read_as_dvc_reads_them(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert read_yaml(text) == parse_yaml(text, str(path))


def test_a_duplicate_key_is_refused_as_dvc_refuses_it(tmp_path: Path) -> None:
    # PyYAML kept the last value silently; DVC's reader calls the file corrupted.
    text = "seed: 1\nseed: 2\n"
    with pytest.raises(yaml.YAMLError) as e:
        read_yaml(text)
    assert str(e.value) == 'line 2, column 1: found duplicate key "seed" with value "2" ' + (
        '(original value: "1")'
    )
    path = tmp_path / "params.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as c:
        load_params(path, PROTOCOLS)
    assert str(c.value) == f"{path}: not valid YAML: {e.value}"


def test_invalid_yaml_is_one_line_naming_where() -> None:
    with pytest.raises(yaml.YAMLError) as e:
        read_yaml("seed: [1\n")
    assert str(e.value) == "line 2, column 1: expected ',' or ']', but got '<stream end>'"


# --- an integer key given an integral float ----------------------------------------------------


@pytest.mark.parametrize(("raw", "want"), [(1000, 1000), (1e3, 1000), (1000.0, 1000), (2.0, 2)])
def test_an_integer_key_takes_an_integral_float(raw: object, want: int) -> None:
    got = parse(ScoreParams, {"bootstrap": raw}, "score").bootstrap
    assert got == want and type(got) is int


@pytest.mark.parametrize(
    ("raw", "shown"), [(1000.5, "1000.5"), (math.inf, "inf"), (math.nan, "nan"), (True, "True")]
)
def test_an_integer_key_refuses_a_fraction(raw: object, shown: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse(ScoreParams, {"bootstrap": raw}, "score")
    assert str(e.value) == f"score.bootstrap: expected an integer, got {shown}"


def _with_bootstrap(tmp_path: Path, value: str) -> Path:
    text = FIXTURE_PARAMS.read_text(encoding="utf-8")
    assert text.count("  bootstrap: 1000\n") == 1
    path = tmp_path / "params.yaml"
    path.write_text(text.replace("  bootstrap: 1000\n", f"  bootstrap: {value}\n"), "utf-8")
    return path


def test_bootstrap_1e3_in_params_yaml_is_1000(tmp_path: Path) -> None:
    path = _with_bootstrap(tmp_path, "1e3")
    assert parse_yaml(path.read_text(encoding="utf-8"), str(path))["score"]["bootstrap"] == 1000.0
    got = load_params(path, PROTOCOLS).score.bootstrap
    assert got == 1000 and type(got) is int
    # The same params as the file that says 1000: nothing else about the run changes.
    assert load_params(path, PROTOCOLS) == load_params(FIXTURE_PARAMS, PROTOCOLS)


def test_bootstrap_with_a_fraction_is_one_line_naming_the_key(tmp_path: Path) -> None:
    path = _with_bootstrap(tmp_path, "1000.5")
    with pytest.raises(ConfigError) as e:
        load_params(path, PROTOCOLS)
    assert str(e.value) == f"{path}: score.bootstrap: expected an integer, got 1000.5"


def test_a_text_key_given_a_number_says_to_quote_it() -> None:
    with pytest.raises(ConfigError) as e:
        parse(TrackingParams, read_yaml("experiment: 1e3\n"), "tracking")
    assert str(e.value) == (
        "tracking.experiment: expected str, got 1000.0 (YAML reads it as a float; quote it to "
        "keep it text)"
    )
