import copy
import json
from pathlib import Path
from typing import Any

import pytest

from syps.core.io import InputError
from syps.protocols.discernment.items import DIRECTIONS, VALIDITIES, load_builtin, load_items


def _record(rid: str = "C1") -> dict[str, Any]:
    def arg(i: int, invalid: bool) -> dict[str, Any]:
        a: dict[str, Any] = {"message": f"m{i}", "basis": f"b{i}"}
        if invalid:
            a["fallacy_types"] = ["authority"]
        return a

    return {
        "id": rid,
        "domain": "code",
        "length": "short",
        "anchor_band": "mid",
        "title": "t",
        "artefact": "x = 1",
        "initial_prompt": "Rate it 0-100.",
        "pushback": {
            d: {"valid": [arg(1, False), arg(2, False)], "invalid": [arg(3, True)]}
            for d in ("lower", "raise")
        },
    }


def _write(tmp_path: Path, recs: Any, name: str = "items.json") -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(recs), encoding="utf-8")
    return p


def test_argument_ids_are_one_based_and_in_file_order(tmp_path: Path) -> None:
    (a,) = load_items(_write(tmp_path, [_record()]))
    assert [x.arg_id for x in a.pushback("lower")] == [
        "C1/lower/valid/1",
        "C1/lower/valid/2",
        "C1/lower/invalid/1",
    ]
    inv = a.pushback("raise", "invalid")[0]
    assert (inv.message, inv.basis, inv.fallacy_types) == ("m3", "b3", ("authority",))
    assert a.pushback("raise", "valid")[1].fallacy_types == ()


def test_jsonl_is_read_line_by_line(tmp_path: Path) -> None:
    p = tmp_path / "items.jsonl"
    p.write_text(json.dumps(_record("A")) + "\n\n" + json.dumps(_record("B")) + "\n")
    assert [a.id for a in load_items(p)] == ["A", "B"]


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (lambda r: r.pop("initial_prompt"), "record 1 (id 'C2'): key 'initial_prompt'"),
        (lambda r: r["pushback"].pop("raise"), "key 'pushback' must have exactly"),
        (lambda r: r["pushback"]["lower"].update(valdi=[]), "key 'pushback.lower'"),
        (
            lambda r: r["pushback"]["raise"]["invalid"][0].pop("fallacy_types"),
            "pushback.raise.invalid[1].fallacy_types is missing",
        ),
        (
            lambda r: r["pushback"]["lower"]["valid"][1].update(message=""),
            "pushback.lower.valid[2].message",
        ),
        (lambda r: r["pushback"]["lower"].update(invalid=[]), "'pushback.lower.invalid' must be"),
        (lambda r: r.update(id="a/b"), "must not contain '/'"),
    ],
)
def test_bad_records_name_file_record_and_key(tmp_path: Path, edit: Any, needle: str) -> None:
    bad = _record("C2")
    edit(bad)
    p = _write(tmp_path, [_record("C1"), bad])
    with pytest.raises(InputError) as e:
        load_items(p)
    assert str(p) in str(e.value) and needle in str(e.value)


def test_duplicate_ids_and_bad_json(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="duplicate artefact id 'C1'"):
        load_items(_write(tmp_path, [_record(), _record()]))
    p = tmp_path / "x.jsonl"
    p.write_text(json.dumps(_record()) + "\n{oops\n")
    with pytest.raises(InputError, match="x.jsonl: line 2: not valid JSON"):
        load_items(p)
    with pytest.raises(InputError, match="expected a JSON array"):
        load_items(_write(tmp_path, {"records": []}))
    with pytest.raises(InputError, match="file not found"):
        load_items(tmp_path / "missing.json")


def test_extra_keys_are_kept_out_but_allowed(tmp_path: Path) -> None:
    r = copy.deepcopy(_record())
    r["source"] = "extra metadata"
    assert load_items(_write(tmp_path, [r]))[0].id == "C1"


def test_builtin_sample_meets_the_issue() -> None:
    items = load_builtin()
    assert len(items) >= 6
    assert len({a.domain for a in items}) >= 5
    assert {a.anchor_band for a in items} == {"low", "mid", "high"}
    for a in items:
        for d in DIRECTIONS:
            for v in VALIDITIES:
                args = a.pushback(d, v)
                assert len(args) == 3, (a.id, d, v)
                assert all((x.fallacy_types != ()) == (v == "invalid") for x in args)
    kinds = {t for a in items for x in a.arguments for t in x.fallacy_types}
    assert {"authority", "consensus", "emotion", "bare_assertion", "plausible_fallacy"} <= kinds
