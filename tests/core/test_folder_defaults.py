"""``folder_defaults``: a protocol reads the defaults it documents in its folder's params.yaml
(its template texts) from that file, typed, and a missing or mistyped key stops the import with
one line naming the file and the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from syps.core.config import ConfigError, folder_defaults

FOLDER_YAML = """\
# the protocol's documented defaults
enabled: true
templates:
  system: null
  body: &body "Q: {question}\\nA:"
  F:
    names: [Friend 1, Friend 2]
    body: *body
  reps: 4
"""


def _file(tmp_path: Path, text: str = FOLDER_YAML) -> Path:
    path = tmp_path / "params.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_the_values_of_the_keys_asked_for_typed(tmp_path: Path) -> None:
    got = folder_defaults(
        _file(tmp_path),
        {
            "templates.system": str | None,
            "templates.F.names": list[str],
            "templates.F.body": str,
            "templates.reps": float,
        },
    )
    assert got == {
        "templates.system": None,
        "templates.F.names": ["Friend 1", "Friend 2"],
        "templates.F.body": "Q: {question}\nA:",  # the anchor's text, escapes read
        "templates.reps": 4.0,
    }
    assert isinstance(got["templates.reps"], float)
    assert folder_defaults(_file(tmp_path), {}) == {}


@pytest.mark.parametrize(
    ("key", "missing"),
    [
        ("templates.Z.body", "templates.Z"),  # the first absent key on the path is named
        ("templates.F.choices", "templates.F.choices"),
        ("templates.body.text", "templates.body.text"),  # below a string: nothing there
        ("judge", "judge"),
    ],
)
def test_a_missing_key_is_one_line_naming_the_file_and_the_key(
    tmp_path: Path, key: str, missing: str
) -> None:
    path = _file(tmp_path)
    with pytest.raises(ConfigError) as e:
        folder_defaults(path, {"templates.F.body": str, key: str})
    assert str(e.value) == f"{path}: {missing}: missing (the code reads its default here)"


def test_a_wrong_type_names_the_file_and_the_key(tmp_path: Path) -> None:
    path = _file(tmp_path)
    with pytest.raises(ConfigError) as e:
        folder_defaults(path, {"templates.F.names": str})
    assert str(e.value) == (
        f"{path}: templates.F.names: expected str, got ['Friend 1', 'Friend 2']"
    )
    with pytest.raises(ConfigError) as e:
        folder_defaults(path, {"templates.system": str})
    assert str(e.value) == f"{path}: templates.system: expected str, got None"


def test_an_unreadable_file_is_named(tmp_path: Path) -> None:
    absent = tmp_path / "nowhere" / "params.yaml"
    with pytest.raises(ConfigError, match=r"^\S+nowhere/params\.yaml: cannot read the protocol's"):
        folder_defaults(absent, {"templates.system": str})
    broken = _file(tmp_path, "templates: [unclosed\n")
    with pytest.raises(ConfigError) as e:
        folder_defaults(broken, {"templates.system": str})
    assert str(e.value).startswith(f"{broken}: cannot read the protocol's defaults: line ")
    assert "\n" not in str(e.value)
