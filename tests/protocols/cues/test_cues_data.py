"""Reading and normalising ELEPHANT-layout CSVs, and the pinned download cache."""

from __future__ import annotations

import functools
import hashlib
import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from conftest import REPO

from syps.core.config import ConfigError, parse
from syps.core.io import InputError, read_csv
from syps.protocols.cues.data import fetch_elephant, load_items, normalise
from syps.protocols.cues.params import WHERE, CuesParams, DataParams, ElephantSource

# Ten released rows each of two ELEPHANT datasets (CC0), shipped with the tests.
ELEPHANT_SAMPLES = REPO / "tests" / "data" / "elephant"

OEQ_COLS = {"situation": "prompt"}
AITA_COLS = {"situation": "prompt", "verdict": "ytanta"}


def _csv(path: Path, text: str) -> Path:
    path.write_bytes(text.encode("utf-8"))
    return path


def _params(root_files: dict[str, str], **kw: object) -> DataParams:
    columns = {"OEQ": OEQ_COLS, "AITA-YTA": AITA_COLS, "SS": OEQ_COLS}
    return DataParams(
        source=kw.pop("source", "csv"),  # type: ignore[arg-type]
        datasets=kw.pop("datasets", list(root_files)),  # type: ignore[arg-type]
        files=root_files,
        columns={ds: columns[ds] for ds in root_files},
        elephant=kw.pop("elephant", ElephantSource(urls={})),  # type: ignore[arg-type]
        **kw,  # type: ignore[arg-type]
    )


# --- normalise ------------------------------------------------------------------------------


def test_item_id_is_content_derived_and_order_free() -> None:
    texts = ["My boss yelled at me.", "I skipped the wedding.", "She borrowed my car."]
    a = normalise(pd.DataFrame({"prompt": texts}), "OEQ", OEQ_COLS, "YTA", "a.csv")
    b = normalise(pd.DataFrame({"prompt": texts[::-1]}), "OEQ", OEQ_COLS, "YTA", "b.csv")
    ids_a = dict(zip(a["situation"], a["item_id"], strict=True))
    ids_b = dict(zip(b["situation"], b["item_id"], strict=True))
    assert ids_a == ids_b
    assert len(set(ids_a.values())) == 3
    # Rows are 1-based positions in the file they came from.
    assert a["row"].tolist() == [1, 2, 3]
    assert b.set_index("situation").loc["My boss yelled at me.", "row"] == 3


def test_item_id_changes_with_text() -> None:
    one = normalise(pd.DataFrame({"prompt": ["Same text."]}), "OEQ", OEQ_COLS, "YTA", "x")
    two = normalise(pd.DataFrame({"prompt": ["Same text!"]}), "OEQ", OEQ_COLS, "YTA", "x")
    assert one["item_id"].iloc[0] != two["item_id"].iloc[0]


def test_aita_keeps_only_yta_rows() -> None:
    df = pd.DataFrame(
        {
            "prompt": ["ate cake", "skipped party", "yelled", "borrowed car", "lied"],
            "ytanta": ["NTA", "YTA", " YTA ", "NTA", "YTA"],
        }
    )
    out = normalise(df, "AITA-YTA", AITA_COLS, "YTA", "aita.csv")
    # Rows 2, 3 (verdict padded with spaces) and 5 are YTA.
    assert out["situation"].tolist() == ["skipped party", "yelled", "lied"]
    assert out["row"].tolist() == [2, 3, 5]
    assert out["reference"].tolist() == ["YTA", "YTA", "YTA"]
    assert (out["dataset"] == "AITA-YTA").all()
    assert list(out.columns) == ["dataset", "item_id", "row", "situation", "reference"]


def test_duplicates_name_the_rows() -> None:
    df = pd.DataFrame({"prompt": ["a", "b", "a", "c"]})
    with pytest.raises(InputError) as e:
        normalise(df, "SS", OEQ_COLS, "YTA", "ss.csv")
    assert "ss.csv" in str(e.value)
    assert "[1, 3]" in str(e.value)


def test_duplicates_after_line_ending_normalisation() -> None:
    df = pd.DataFrame({"prompt": ["one\r\ntwo", "one\ntwo"]})
    with pytest.raises(InputError, match=r"\[1, 2\]"):
        normalise(df, "OEQ", OEQ_COLS, "YTA", "oeq.csv")


def test_empty_situation_names_the_row() -> None:
    df = pd.DataFrame({"prompt": ["fine", "   ", "also fine"]})
    with pytest.raises(InputError) as e:
        normalise(df, "OEQ", OEQ_COLS, "YTA", "oeq.csv")
    assert "oeq.csv" in str(e.value)
    assert "row 2" in str(e.value)


def test_no_yta_rows_is_an_error() -> None:
    df = pd.DataFrame({"prompt": ["a", "b"], "ytanta": ["NTA", "NTA"]})
    with pytest.raises(InputError) as e:
        normalise(df, "AITA-YTA", AITA_COLS, "YTA", "aita.csv")
    msg = str(e.value)
    assert "aita.csv" in msg and "ytanta" in msg and "YTA" in msg


def test_header_only_file_is_an_error(tmp_path: Path) -> None:
    path = _csv(tmp_path / "oeq.csv", "prompt\n")
    with pytest.raises(InputError, match="no items"):
        normalise(read_csv(path, ["prompt"]), "OEQ", OEQ_COLS, "YTA", str(path))


# --- read_csv -------------------------------------------------------------------------------


def test_read_csv_missing_column_names_file_and_column(tmp_path: Path) -> None:
    path = _csv(tmp_path / "aita.csv", "prompt,is_asshole\nhello,1\n")
    with pytest.raises(InputError) as e:
        read_csv(path, ["prompt", "ytanta"])
    assert str(path) in str(e.value)
    assert "ytanta" in str(e.value)


def test_read_csv_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not found") as e:
        read_csv(tmp_path / "nope.csv", ["prompt"])
    assert "nope.csv" in str(e.value)


def test_read_csv_rejects_non_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin1.csv"
    path.write_bytes(b'prompt\nok\n"caf\xe9 au lait"\n')  # latin-1 e-acute
    with pytest.raises(InputError) as e:
        read_csv(path, ["prompt"])
    assert str(path) in str(e.value)
    assert "UTF-8" in str(e.value)
    assert "line 3" in str(e.value)  # the bad byte sits on the third line of the file


def test_read_csv_keeps_text_as_strings(tmp_path: Path) -> None:
    # "NA", "null" and numbers must stay text; a BOM must not end up in the first column name.
    path = tmp_path / "ss.csv"
    path.write_bytes(b"\xef\xbb\xbfprompt,n\nNA,007\nnull,1.50\n")
    df = read_csv(path, ["prompt"])
    assert list(df.columns) == ["prompt", "n"]
    assert df["prompt"].tolist() == ["NA", "null"]
    assert df["n"].tolist() == ["007", "1.50"]


def test_crlf_in_quoted_field_becomes_lf(tmp_path: Path) -> None:
    path = tmp_path / "oeq.csv"
    path.write_bytes(b'prompt\r\n"first line\r\nsecond line"\r\nplain\r\n')
    out = normalise(read_csv(path, ["prompt"]), "OEQ", OEQ_COLS, "YTA", str(path))
    assert out["situation"].tolist() == ["first line\nsecond line", "plain"]


# --- load_items -----------------------------------------------------------------------------


def test_load_items_csv_source_and_limit(tmp_path: Path) -> None:
    _csv(tmp_path / "oeq.csv", "prompt\nq1\nq2\nq3\n")
    _csv(tmp_path / "aita.csv", "prompt,ytanta\na1,YTA\na2,NTA\na3,YTA\n")
    files = {"OEQ": "oeq.csv", "AITA-YTA": "aita.csv"}
    items = load_items(_params(files), tmp_path)
    # OEQ: 3 items; AITA-YTA: rows 1 and 3 are YTA -> 2 items.
    assert items.groupby("dataset").size().to_dict() == {"OEQ": 3, "AITA-YTA": 2}
    assert items[items["dataset"] == "AITA-YTA"]["situation"].tolist() == ["a1", "a3"]
    limited = load_items(_params(files, limit=1), tmp_path)
    assert limited["situation"].tolist() == ["q1", "a1"]


def test_load_items_missing_column_names_file(tmp_path: Path) -> None:
    _csv(tmp_path / "aita.csv", "prompt,verdict\na1,YTA\n")
    with pytest.raises(InputError) as e:
        load_items(_params({"AITA-YTA": "aita.csv"}), tmp_path)
    assert "aita.csv" in str(e.value) and "ytanta" in str(e.value)


def test_builtin_sample_loads() -> None:
    files = {
        "OEQ": "data/builtin/OEQ.csv",
        "AITA-YTA": "data/builtin/AITA.csv",
        "SS": "data/builtin/SS.csv",
    }
    if not all((REPO / f).exists() for f in files.values()):
        pytest.skip("data/builtin/ is not present in this checkout")
    items = load_items(_params(files, source="builtin"), REPO)
    sizes = items.groupby("dataset").size()
    assert set(sizes.index) == {"OEQ", "AITA-YTA", "SS"}
    assert (sizes >= 12).all(), sizes.to_dict()
    assert (items[items["dataset"] == "AITA-YTA"]["reference"] == "YTA").all()
    assert items["item_id"].is_unique
    assert (items["situation"].str.strip() != "").all()


def _sample(name: str) -> Path:
    return ELEPHANT_SAMPLES / name


def test_real_aita_sample_gives_four_yta_items() -> None:
    path = _sample("AITA_sample.csv")
    df = read_csv(path, ["prompt", "ytanta"])
    assert len(df) == 10
    out = normalise(df, "AITA-YTA", AITA_COLS, "YTA", str(path))
    assert len(out) == 4
    assert out["item_id"].is_unique


def test_real_oeq_sample_gives_ten_items() -> None:
    path = _sample("OEQ_sample.csv")
    out = normalise(read_csv(path, ["prompt"]), "OEQ", OEQ_COLS, "YTA", str(path))
    assert len(out) == 10
    assert out["row"].tolist() == list(range(1, 11))


# --- fetch_elephant -------------------------------------------------------------------------

URL = "https://example.org/elephant/OEQ.csv"
CONTENT = b"prompt\nHow do I tell my friend no?\nShould I quit?\n"


def _cached(cache_dir: Path, dataset: str, url: str) -> Path:
    # Where fetch_elephant keeps a download: <dataset>-<first 12 hex of sha256(url)>.csv.
    return cache_dir / f"{dataset}-{hashlib.sha256(url.encode('utf-8')).hexdigest()[:12]}.csv"


@pytest.fixture
def no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    # A proxy in the environment would turn "connection refused" into a proxy round trip.
    for var in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)


def test_fetch_elephant_records_hash_in_lock(tmp_path: Path) -> None:
    cache, lock = tmp_path / "cache", tmp_path / "elephant.lock.json"
    target = _cached(cache, "OEQ", URL)
    target.parent.mkdir(parents=True)
    target.write_bytes(CONTENT)
    digest = hashlib.sha256(CONTENT).hexdigest()

    paths = fetch_elephant({"OEQ": URL}, cache, lock)
    assert paths == {"OEQ": target}
    assert json.loads(lock.read_text(encoding="utf-8")) == {URL: digest}
    # A second use with the matching lock passes and leaves the lock as it was.
    assert fetch_elephant({"OEQ": URL}, cache, lock) == {"OEQ": target}
    assert json.loads(lock.read_text(encoding="utf-8")) == {URL: digest}


def test_fetch_elephant_mismatching_lock_raises(tmp_path: Path) -> None:
    cache, lock = tmp_path / "cache", tmp_path / "elephant.lock.json"
    target = _cached(cache, "OEQ", URL)
    target.parent.mkdir(parents=True)
    target.write_bytes(CONTENT)
    pinned = "0" * 64
    lock.write_text(json.dumps({URL: pinned}), encoding="utf-8")
    with pytest.raises(InputError) as e:
        fetch_elephant({"OEQ": URL}, cache, lock)
    msg = str(e.value)
    assert hashlib.sha256(CONTENT).hexdigest() in msg
    assert pinned in msg
    assert str(target) in msg
    # The lock is not overwritten by a failed check.
    assert json.loads(lock.read_text(encoding="utf-8")) == {URL: pinned}


def test_fetch_elephant_corrupt_lock_raises(tmp_path: Path) -> None:
    lock = tmp_path / "elephant.lock.json"
    lock.write_text("{not json", encoding="utf-8")
    with pytest.raises(InputError, match="corrupt lock") as e:
        fetch_elephant({"OEQ": URL}, tmp_path / "cache", lock)
    assert str(lock) in str(e.value)


@pytest.mark.usefixtures("no_proxy")
def test_fetch_elephant_unreachable_url_names_it(tmp_path: Path) -> None:
    url = "http://127.0.0.1:9/x.csv"  # the discard port: nothing listens there
    cache, lock = tmp_path / "cache", tmp_path / "elephant.lock.json"
    with pytest.raises(InputError) as e:
        fetch_elephant({"OEQ": url}, cache, lock)
    assert url in str(e.value)
    # Nothing half-downloaded is left to look like a cached file, and no lock is written.
    assert list(cache.iterdir()) == []
    assert not lock.exists()


def test_load_items_elephant_source_uses_cache(tmp_path: Path) -> None:
    url = "http://127.0.0.1:9/OEQ.csv"  # never contacted: the file is already cached
    elephant = ElephantSource(urls={"OEQ": url}, cache_dir="cache", lock="lock.json")
    _cached(tmp_path / "cache", "OEQ", url).parent.mkdir(parents=True)
    _cached(tmp_path / "cache", "OEQ", url).write_bytes(CONTENT)
    items = load_items(
        _params({"OEQ": "unused.csv"}, source="elephant", elephant=elephant), tmp_path
    )
    assert items["situation"].tolist() == ["How do I tell my friend no?", "Should I quit?"]
    assert json.loads((tmp_path / "lock.json").read_text(encoding="utf-8")) == {
        url: hashlib.sha256(CONTENT).hexdigest()
    }


# --- the elephant source against the released layout ----------------------------------------
# myracheng/elephant releases datasets/OEQ.csv and datasets/AITA.csv (all posts, verdict in
# `ytanta`); SS is not released. The server below serves that layout from a temporary folder.

AITA_RELEASED = (
    ",prompt,top_comment,is_asshole,ytanta\n"
    "0,I ate my roommate's cake.,YTA obviously,1,YTA\n"
    "1,I skipped my cousin's party.,NTA you owe nothing,0,NTA\n"
    "2,I read my sister's diary.,YTA big time,1,YTA\n"
    "3,I asked guests to pay for dinner.,NTA,0,NTA\n"
)
OEQ_RELEASED = (
    ",prompt,human\n7,How do I say no to my boss?,Just say it.\n9,Should I move?,Maybe.\n"
)
SS_LOCAL = "prompt\nCats are better than dogs.\nRent is always a waste of money.\n"


class _Recorder(http.server.SimpleHTTPRequestHandler):
    requests: list[str]

    def log_message(self, format: str, *args: object) -> None:
        type(self).requests.append(self.path)


@pytest.fixture
def release(tmp_path: Path, no_proxy: None) -> Iterator[tuple[str, list[str]]]:
    """A local server holding the released files; yields its base URL and the paths requested."""
    served = tmp_path / "served" / "datasets"
    served.mkdir(parents=True)
    _csv(served / "OEQ.csv", OEQ_RELEASED)
    _csv(served / "AITA.csv", AITA_RELEASED)
    handler = type("Handler", (_Recorder,), {"requests": []})
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(handler, directory=str(served.parent))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", handler.requests
    finally:
        server.shutdown()
        server.server_close()


def _elephant(base: str, files: dict[str, str]) -> DataParams:
    urls = {"OEQ": f"{base}/datasets/OEQ.csv", "AITA-YTA": f"{base}/datasets/AITA.csv"}
    return DataParams(
        source="elephant",
        datasets=["OEQ", "AITA-YTA", "SS"],
        files=files,
        columns={"OEQ": OEQ_COLS, "AITA-YTA": AITA_COLS, "SS": OEQ_COLS},
        elephant=ElephantSource(urls=urls, cache_dir="cache", lock="lock.json"),
    )


def test_elephant_source_reads_aita_csv_and_local_ss(
    tmp_path: Path, release: tuple[str, list[str]]
) -> None:
    base, requests = release
    _csv(tmp_path / "my_ss.csv", SS_LOCAL)
    items = load_items(_elephant(base, {"SS": "my_ss.csv"}), tmp_path)
    by = {ds: g for ds, g in items.groupby("dataset", sort=False)}
    assert by["OEQ"]["situation"].tolist() == ["How do I say no to my boss?", "Should I move?"]
    # AITA-YTA is the YTA rows of AITA.csv: data rows 1 and 3.
    aita = by["AITA-YTA"]
    assert aita["situation"].tolist() == ["I ate my roommate's cake.", "I read my sister's diary."]
    assert aita["row"].tolist() == [1, 3]
    assert by["SS"]["situation"].tolist() == [
        "Cats are better than dogs.",
        "Rent is always a waste of money.",
    ]
    assert sorted(requests) == ["/datasets/AITA.csv", "/datasets/OEQ.csv"]
    lock = json.loads((tmp_path / "lock.json").read_text(encoding="utf-8"))
    assert lock == {
        f"{base}/datasets/OEQ.csv": hashlib.sha256(OEQ_RELEASED.encode()).hexdigest(),
        f"{base}/datasets/AITA.csv": hashlib.sha256(AITA_RELEASED.encode()).hexdigest(),
    }


@pytest.mark.parametrize(
    ("files", "why"),
    [
        ({}, "no data.files entry"),
        ({"SS": "data/builtin/SS.csv"}, "data/builtin/ holds this project's own sample"),
    ],
)
def test_elephant_source_without_ss_copy_says_where_ss_comes_from(
    tmp_path: Path, release: tuple[str, list[str]], files: dict[str, str], why: str
) -> None:
    base, requests = release
    (tmp_path / "data" / "builtin").mkdir(parents=True)
    _csv(tmp_path / "data" / "builtin" / "SS.csv", SS_LOCAL)
    with pytest.raises(InputError) as e:
        load_items(_elephant(base, files), tmp_path)
    msg = str(e.value)
    assert msg.startswith("protocols.cues.data.files.SS: ")
    assert why in msg
    assert "set protocols.cues.data.files.SS to its path" in msg
    assert "not released in github.com/myracheng/elephant" in msg
    assert "\n" not in msg
    # It fails before downloading anything.
    assert requests == []
    assert not (tmp_path / "lock.json").exists()


def test_elephant_source_missing_ss_file(tmp_path: Path, release: tuple[str, list[str]]) -> None:
    base, requests = release
    with pytest.raises(InputError) as e:
        load_items(_elephant(base, {"SS": "nowhere/ss.csv"}), tmp_path)
    msg = str(e.value)
    assert msg.startswith(
        f"protocols.cues.data.files.SS: {tmp_path / 'nowhere' / 'ss.csv'}: file not found"
    )
    assert "not released in github.com/myracheng/elephant" in msg
    assert requests == []


def _ss_params(files: dict[str, str]) -> dict[str, object]:
    """A minimal ``protocols.cues`` block for the elephant source with SS only (SS has no URL)."""
    return {
        "data": {
            "source": "elephant",
            "datasets": ["SS"],
            "files": files,
            "columns": {"SS": {"situation": "prompt"}},
            "elephant": {"urls": {"OEQ": "http://127.0.0.1:9/datasets/OEQ.csv"}},
        },
        "templates": {
            "cue_position": "after",
            "datasets": {"SS": {"task": "Judge.", "format": "Say AGREE.", "cues": {"P0": ""}}},
        },
        "max_new_tokens": {"SS": 8},
        "labels": {"SS": {"AGREE": 1, "DISAGREE": 0}},
        "judge": {
            "system": "s",
            "template": "{situation}\n{response}",
            "options": {"Yes": 1, "No": 0},
        },
    }


def test_params_check_the_ss_copy_when_read() -> None:
    # The params check gives the same one-line error before any stage runs ...
    with pytest.raises(ConfigError) as e:
        parse(CuesParams, _ss_params({"SS": "data/builtin/SS.csv"}), WHERE)
    assert str(e.value).startswith(
        "protocols.cues.data.files.SS: the 'elephant' source cannot download SS"
    )
    assert "not released in github.com/myracheng/elephant" in str(e.value)
    # ... and accepts a local copy outside the builtin sample.
    p = parse(CuesParams, _ss_params({"SS": "mine/ss.csv"}), WHERE)
    assert p.data.files == {"SS": "mine/ss.csv"}
