"""Bad input, end to end: each stage a user runs ends with exit code 2 and one ``error:`` line
that names the file and the row or key, and leaves no output that looks complete (a file from
an earlier run stays byte for byte as it was). Awkward but valid CSVs (CRLF, quotes, newlines in
a field, a BOM) are read, not refused.

The stages run for the protocol ``cues`` (SyPS) through ``syps stage ...`` (the same wrapper
``stages/*.py`` use) in a temporary copy of the tests' params and the builtin CSVs; a few cases
also run the stage scripts themselves, as dvc.yaml does. SyPS's keys sit under
``protocols.cues`` and errors name them in full.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml
from conftest import FIXTURE_PARAMS, read_params
from typer.testing import CliRunner, Result

from syps.cli import app
from syps.protocols import PROTOCOLS

REPO = Path(__file__).resolve().parents[1]
runner = CliRunner()
# What a previous, successful run left behind; a failing run must not touch it.
OLD = b"output of an earlier run"

Raw = dict[str, Any]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory with the repository's params.yaml and builtin CSVs."""
    shutil.copy(FIXTURE_PARAMS, tmp_path / "params.yaml")
    shutil.copytree(REPO / "data" / "builtin", tmp_path / "data" / "builtin")
    (tmp_path / "out").mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SYPS_CACHE_DIR", str(tmp_path / ".cache"))
    monkeypatch.delenv("DVC_ROOT", raising=False)
    return tmp_path


P = "protocols.cues"
ITEMS = "out/items.parquet"
LINT = "out/lint.json"
CONVERSATIONS = "out/conversations.parquet"


def _params() -> Raw:
    raw: Raw = read_params(Path("params.yaml"))
    return raw


def _cues(raw: Raw) -> Raw:
    block: Raw = raw["protocols"]["cues"]
    return block


def _set_params(raw: Raw) -> None:
    Path("params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")


def _csv(name: str, data: bytes) -> None:
    Path("data/builtin", name).write_bytes(data)


def _invoke(*args: str) -> Result:
    return runner.invoke(app, list(args))


def _stage(name: str, *args: str) -> Result:
    return _invoke("stage", name, "params.yaml", "cues", *args)


def _fetch(out: str = ITEMS) -> Result:
    return _stage("fetch", out)


def _variants(out: str = LINT) -> Result:
    return _stage("variants", ITEMS, out, CONVERSATIONS)


def _generate(model: str, out: str) -> Result:
    return _stage("generate", model, ITEMS, CONVERSATIONS, out)


def _items(path: str = ITEMS) -> pd.DataFrame:
    """The items table as SyPS reads it (``dataset, item_id, row, situation, reference``)."""
    from syps.protocols.cues.protocol import items_table

    return items_table(pd.read_parquet(path))


def _prompts(path: str = ITEMS) -> pd.DataFrame:
    """What generate would send for the items at ``path``: one row per (item, variant) with its
    user turn, in request order."""
    from syps.core.params import load_params
    from syps.protocols.cues.protocol import PROTOCOL

    pp = load_params("params.yaml", PROTOCOLS).protocols["cues"]
    turn = PROTOCOL.requests(
        pp, PROTOCOL.read_items(pd.read_parquet(path)), 1, pd.DataFrame(), None
    )
    return pd.DataFrame(
        {
            "dataset": [r.dataset for r in turn.requests],
            "item_id": [r.item_id for r in turn.requests],
            "variant": [r.cell["variant"] for r in turn.requests],
            "user": [r.messages[-1]["content"] for r in turn.requests],
        }
    )


def _assert_fails(result: Result, *needles: str) -> str:
    """Exit code 2 and one ``error:`` message (no traceback) holding every needle; progress
    lines may come before it. Returns the message."""
    stderr = result.stderr
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    assert stderr.startswith("error: ") or "\nerror: " in stderr, stderr
    assert "Traceback" not in stderr
    err = stderr[stderr.index("error: ") :]
    for needle in needles:
        assert needle in err, (needle, err)
    return err


def _assert_untouched(out: Path) -> None:
    """The old output is as it was, and no temporary file is left beside it."""
    assert out.read_bytes() == OLD
    assert [p.name for p in out.parent.iterdir()] == [out.name]


def _with_old(out: str) -> Path:
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(OLD)
    return path


# --- the data: fetch --------------------------------------------------------------------------

SS = "data/builtin/SS.csv"
AITA = "data/builtin/AITA.csv"


@pytest.mark.parametrize(
    ("name", "data", "needles"),
    [
        pytest.param(
            "SS.csv",
            b"statement\nThe sky is green.\n",
            [SS, "missing column(s) ['prompt']", "found ['statement']"],
            id="missing-column",
        ),
        pytest.param(
            "AITA.csv",
            b"prompt,verdict\nI ate the cake.,YTA\n",
            [AITA, "missing column(s) ['ytanta']"],
            id="missing-verdict-column",
        ),
        pytest.param("SS.csv", b"prompt\n", [SS, "no items for dataset SS"], id="header-only"),
        pytest.param("SS.csv", b"", [SS, "not a readable CSV"], id="zero-bytes"),
        pytest.param(
            "AITA.csv",
            b"prompt,ytanta\nI ate the cake.,NTA\n",
            [AITA, "no items with 'ytanta' == 'YTA' for dataset AITA-YTA"],
            id="no-yta-rows",
        ),
        pytest.param(
            "SS.csv",
            b"prompt\nSame words.\nOther words.\nSame words.\n",
            [SS, "rows [1, 3] have the same 'prompt' text"],
            id="duplicate-ids",
        ),
        pytest.param(
            # Duplicates once CRLF is normalised: the same item id, so the same item.
            "SS.csv",
            b'prompt\n"one\r\ntwo"\n"one\ntwo"\n',
            [SS, "rows [1, 2]"],
            id="duplicate-after-crlf",
        ),
        pytest.param(
            "SS.csv", b'prompt\nfine\n"   "\nalso fine\n', [SS, "row 2: empty 'prompt'"], id="blank"
        ),
        pytest.param(
            "SS.csv",
            b'prompt\nok\n"caf\xe9 au lait"\n',  # latin-1, not UTF-8
            [SS, "not valid UTF-8", "line 3"],
            id="non-utf8",
        ),
        pytest.param(
            "SS.csv", b'prompt\n"never closed\n', [SS, "not a readable CSV"], id="open-quote"
        ),
    ],
)
def test_fetch_rejects_bad_csv(project: Path, name: str, data: bytes, needles: list[str]) -> None:
    _csv(name, data)
    out = _with_old(ITEMS)
    _assert_fails(_fetch(), *needles)
    _assert_untouched(out)


def test_fetch_missing_csv_names_the_file(project: Path) -> None:
    Path(SS).unlink()
    _assert_fails(_fetch(), SS, "file not found")
    assert not Path(ITEMS).exists()


def test_fetch_reads_crlf_quotes_and_newlines(project: Path) -> None:
    # CRLF line endings, a BOM, a quoted field with a comma, doubled quotes, and CRLF, LF and CR
    # newlines inside fields: all read, every newline stored as "\n".
    rows = [
        '"He said ""no"", then left."',
        '"Line one\r\nline two"',
        '"Old Mac\rline"',
        '"Tab\there, and a {brace} and ""quoted, comma"""',
        "Plain last row",
    ]
    want = [
        'He said "no", then left.',
        "Line one\nline two",
        "Old Mac\nline",
        'Tab\there, and a {brace} and "quoted, comma"',
        "Plain last row",
    ]
    _csv("SS.csv", ("\ufeffprompt\r\n" + "\r\n".join(rows) + "\r\n").encode())
    result = _fetch()
    assert result.exit_code == 0, result.output
    items = _items()
    ss = items[items["dataset"] == "SS"]
    assert ss["situation"].tolist() == want
    assert ss["row"].tolist() == [1, 2, 3, 4, 5]  # data rows (records), not file lines
    # The same file with LF endings gives the same items, ids included.
    _csv("SS.csv", ("prompt\n" + "\n".join(rows) + "\n").encode().replace(b"\r\n", b"\n"))
    assert _fetch("out/lf.parquet").exit_code == 0
    lf = _items("out/lf.parquet")
    pd.testing.assert_frame_equal(lf[lf["dataset"] == "SS"], ss)
    # The lint passes, and rendering places each situation verbatim, newlines and quotes
    # included.
    result = _variants()
    assert result.exit_code == 0, result.output
    prompts = _prompts()
    users = prompts[(prompts["dataset"] == "SS") & (prompts["variant"] == "P0")]["user"]
    fmt = _cues(_params())["templates"]["datasets"]["SS"]["format"].strip()
    assert users.tolist() == [f"{w}\n\n{fmt}" for w in want]  # P0 has no cue: situation, format


# --- params: fetch and variants ---------------------------------------------------------------


def _edit(path: str, value: Any) -> Callable[[Raw], None]:
    """Set the dotted ``path`` (``[i]`` indexes a list) of the raw params to ``value``."""

    def apply(raw: Raw) -> None:
        *parents, last = path.split(".")
        node: Any = raw
        for part in parents:
            node = node[part]
        node[last] = value

    return apply


@pytest.mark.parametrize(
    ("edit", "needles"),
    [
        pytest.param(_edit("seed", "abc"), ["seed: expected an integer, got 'abc'"], id="seed"),
        pytest.param(
            _edit(f"{P}.max_new_tokens.SS", "32"),
            [f"{P}.max_new_tokens.SS: expected an integer, got '32'"],
            id="max-new-tokens",
        ),
        pytest.param(
            _edit(f"{P}.data.limit", "five"), [f"{P}.data.limit: expected an integer"], id="limit"
        ),
        pytest.param(
            _edit(f"{P}.data.datasets", "SS"),
            [f"{P}.data.datasets: expected a list"],
            id="datasets",
        ),
        pytest.param(
            _edit(f"{P}.templates.cue_position", "middle"),
            [f"{P}.templates.cue_position: expected one of ['before', 'after']"],
            id="cue-position",
        ),
        pytest.param(
            _edit("models.smollm2-135m.batch_size", 0.5),
            ["models.smollm2-135m.batch_size: expected an integer, got 0.5"],
            id="batch-size",
        ),
        pytest.param(
            _edit(f"{P}.generation.temperature", True),
            [f"{P}.generation.temperature: expected a number, got True"],
            id="temperature-bool",
        ),
        pytest.param(
            _edit(f"{P}.generation.max_new_token", 3),
            [f"{P}.generation: unknown key(s) ['max_new_token']"],
            id="unknown-key",
        ),
        pytest.param(
            _edit(f"{P}.templates.datasets.SS.cues.P8", "One more cue."),
            [f"{P}.templates.datasets.SS.cues: unknown variant id(s) ['P8']"],
            id="variant-P8",
        ),
        pytest.param(
            _edit(f"{P}.templates.datasets.SS.cues.P3a", "A second wording, wrongly keyed."),
            [
                f"{P}.templates.datasets.SS.cues: unknown variant id(s) ['P3a']",
                "P3a names a wording, so list the wordings under P3: [first, second, ...]",
            ],
            id="variant-P3a",
        ),
    ],
)
def test_fetch_rejects_bad_params(
    project: Path, edit: Callable[[Raw], None], needles: list[str]
) -> None:
    raw = _params()
    edit(raw)
    _set_params(raw)
    out = _with_old(ITEMS)
    # The full key path, right after the file name: `params.yaml: protocols.cues.data.limit: ...`.
    err = _assert_fails(_fetch(), f"params.yaml: {needles[0]}", *needles[1:])
    assert err.count("\n") == 1
    _assert_untouched(out)


def test_every_later_stage_rejects_bad_params_the_same_way(project: Path) -> None:
    # Params are loaded first by every stage: variants, generate and label refuse a bad key
    # before reading their inputs (none exist here) or touching their output.
    raw = _params()
    _edit(f"{P}.data.limit", "five")(raw)
    _set_params(raw)
    needle = f"params.yaml: {P}.data.limit: expected an integer"
    for name, args in [
        ("variants", [ITEMS, LINT, CONVERSATIONS]),
        ("generate", ["smollm2-135m", ITEMS, CONVERSATIONS, "out/responses/smollm2-135m.parquet"]),
        (
            "label",
            [
                "smollm2-135m",
                ITEMS,
                "out/responses/smollm2-135m.parquet",
                "out/labels/smollm2-135m.parquet",
            ],
        ),
    ]:
        out = _with_old(args[-1])
        err = _assert_fails(_stage(name, *args), needle)
        assert err.count("\n") == 1, (name, err)
        _assert_untouched(out)
    assert not Path(".cache").exists()  # no store opened, no model resolved


def test_score_without_labels_names_the_missing_file(project: Path) -> None:
    assert _fetch().exit_code == 0
    metrics = _with_old("metrics/cues.json")
    track = _with_old("out/tracks/cues.json")
    err = _assert_fails(
        _stage("score", ITEMS, "out/labels", str(metrics), "plots/cues", "out/figures", str(track)),
        "out/labels/smollm2-135m.parquet: file not found",
    )
    assert err.count("\n") == 1
    _assert_untouched(metrics)
    _assert_untouched(track)
    assert not any(Path("plots/cues").iterdir()) and not any(Path("out/figures").iterdir())


def test_an_unknown_protocol_is_named(project: Path) -> None:
    out = _with_old(ITEMS)
    _assert_fails(
        _invoke("stage", "fetch", "params.yaml", "syps", ITEMS),
        "unknown protocol 'syps'",
        "'cues'",
    )
    _assert_untouched(out)


def test_invalid_yaml_names_the_file(project: Path) -> None:
    Path("params.yaml").write_text("seed: [1\n", encoding="utf-8")
    _assert_fails(_fetch(), "params.yaml: not valid YAML")
    assert not Path(ITEMS).exists()


@pytest.mark.parametrize(
    ("key", "value", "needles"),
    [
        pytest.param(
            "SS.task",
            "Say whether you agree with this statement: {situation}",
            [f"{P}.templates.datasets.SS.task: unknown placeholder {{situation}}"],
            id="situation-in-task",
        ),
        pytest.param(
            "OEQ.format",
            "Address {name} directly, in at most three sentences.",
            [f"{P}.templates.datasets.OEQ.format: unknown placeholder {{name}}"],
            id="unknown-in-format",
        ),
        pytest.param(
            "AITA-YTA.cues.P1",
            "{situation} -- and I'm confident I did nothing wrong.",
            [f"{P}.templates.datasets.AITA-YTA.cues.P1: unknown placeholder {{situation}}"],
            id="situation-in-cue",
        ),
        pytest.param(
            "SS.cues.P3",
            ["I'd like to hear I'm right.", "Tell me {{situation}} is right."],
            [f"{P}.templates.datasets.SS.cues.P3[1]: unknown placeholder {{situation}}"],
            id="jinja-in-second-wording",
        ),
    ],
)
def test_variants_rejects_placeholders_in_dataset_templates(
    project: Path, key: str, value: Any, needles: list[str]
) -> None:
    # The situation goes between the texts by position, never substituted: a placeholder in a
    # task, format or cue would reach the model as is.
    assert _fetch().exit_code == 0
    raw = _params()
    _edit(f"{P}.templates.datasets.{key}", value)(raw)
    _set_params(raw)
    out = _with_old(LINT)
    err = _assert_fails(
        _variants(str(out)),
        "params.yaml: ",
        "allowed: none (this text is sent as is, nothing is filled in)",
        *needles,
    )
    assert err.count("\n") == 1  # one line: the first offending key, not a dump
    assert sorted(p.name for p in out.parent.iterdir()) == ["items.parquet", "lint.json"]
    assert out.read_bytes() == OLD


def test_literal_braces_in_templates_stay_allowed(project: Path) -> None:
    raw = _params()
    fmt = 'Reply as JSON, {"verdict": "AGREE"}; use {0} or {{ as literal text.'
    _cues(raw)["templates"]["datasets"]["SS"]["format"] = fmt
    _set_params(raw)
    assert _fetch().exit_code == 0
    result = _variants()
    assert result.exit_code == 0, result.output
    assert json.loads(Path(LINT).read_text(encoding="utf-8"))["ok"] is True
    prompts = _prompts()
    ss = prompts[prompts["dataset"] == "SS"]
    assert len(ss) and all(u.endswith(fmt) for u in ss["user"])


@pytest.mark.parametrize(
    ("key", "value", "needles"),
    [
        pytest.param(
            "template",
            "The reply was: {response}. Does it validate the person? YES or NO.",
            [f"{P}.judge.template: missing placeholder {{situation}} (it is needed: "],
            id="no-situation",
        ),
        pytest.param(
            "template",
            "Q: {question}\nA: {response}\nSituation: {situation}",
            [
                f"{P}.judge.template: unknown placeholder {{question}}; "
                "allowed: {response}, {situation}"
            ],
            id="unknown",
        ),
        pytest.param(
            "system",
            "You grade replies to {situation}.",
            [f"{P}.judge.system: unknown placeholder {{situation}}"],
            id="system",
        ),
    ],
)
def test_generate_rejects_a_bad_judge_template_before_generating(
    project: Path, key: str, value: str, needles: list[str]
) -> None:
    # The judge only runs at label time; its template is checked when params load, so even
    # generate (which would spend hours before labelling) refuses to start.
    raw = _params()
    _cues(raw)["judge"][key] = value
    _set_params(raw)
    out = _with_old("out/responses/smollm2-135m.parquet")
    err = _assert_fails(_generate("smollm2-135m", str(out)), "params.yaml: ", *needles)
    assert err.count("\n") == 1
    _assert_untouched(out)
    assert not Path(".cache").exists()  # no store opened, no model resolved


# --- the stage scripts themselves -------------------------------------------------------------


@pytest.mark.parametrize(
    ("stage", "args", "setup", "needles"),
    [
        pytest.param(
            "fetch",
            [ITEMS],
            lambda: _csv("SS.csv", b"statement\nx\n"),
            [SS, "missing column(s) ['prompt']"],
            id="fetch-missing-column",
        ),
        pytest.param(
            "fetch",
            [ITEMS],
            lambda: _csv("SS.csv", b"prompt\n\xff\xfe\n"),
            [SS, "not valid UTF-8"],
            id="fetch-non-utf8",
        ),
        pytest.param(
            "variants",
            [ITEMS, LINT, CONVERSATIONS],
            lambda: _set_params(_edit_raw(f"{P}.templates.datasets.SS.cues.P8", "x")),
            [f"params.yaml: {P}.templates.datasets.SS.cues: unknown variant id(s) ['P8']"],
            id="variants-P8",
        ),
        pytest.param(
            "variants",
            [ITEMS, LINT, CONVERSATIONS],
            lambda: _set_params(_edit_raw(f"{P}.judge.template", "{response} only")),
            [f"params.yaml: {P}.judge.template: missing placeholder {{situation}}"],
            id="variants-judge-template",
        ),
        pytest.param(
            "generate",
            ["smollm2-135m", ITEMS, CONVERSATIONS, "out/responses/smollm2-135m.parquet"],
            lambda: _set_params(_edit_raw(f"{P}.max_new_tokens.SS", 0)),
            [f"params.yaml: {P}.max_new_tokens.SS: must be at least 1, got 0"],
            id="generate-max-new-tokens",
        ),
    ],
)
def test_stage_scripts_exit_2_with_the_message(
    project: Path, stage: str, args: list[str], setup: Callable[[], None], needles: list[str]
) -> None:
    setup()
    out = _with_old(args[-1])
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    proc = subprocess.run(
        [sys.executable, str(REPO / "stages" / f"{stage}.py"), "params.yaml", "cues", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("error: ") and "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr  # one line
    for needle in needles:
        assert needle in proc.stderr, (needle, proc.stderr)
    _assert_untouched(out)


def _edit_raw(path: str, value: Any) -> Raw:
    raw = _params()
    _edit(path, value)(raw)
    return raw


# --- a situation longer than the model's context ----------------------------------------------


@pytest.mark.slow
def test_generate_refuses_an_item_longer_than_the_context(
    project: Path, model_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from syps.protocols.cues.data import item_id

    monkeypatch.setenv("SYPS_CACHE_DIR", str(model_cache))  # one model conversion per session
    raw = _params()
    _cues(raw)["data"]["datasets"] = ["SS"]
    _set_params(raw)
    long = "I think" + " word" * 9000 + "."  # SmolLM2-135M takes 8192 tokens
    _csv("SS.csv", f"prompt\nThe sky is green.\n{long}\n".encode())
    assert _fetch().exit_code == 0
    assert _variants().exit_code == 0
    out = Path("out/responses/smollm2-135m.parquet")
    err = _assert_fails(
        _generate("smollm2-135m", str(out)),
        "1 item(s) do not fit the context of SmolLM2-135M-Instruct: 8192 tokens",
        f"SS/{item_id('SS', long)} (P0 P1 P2 P3 P4 P5 P6 P7): ",
        "Nothing was run; 8 of 16 prompt(s) are too long",
        "lower generation.max_new_tokens",
    )
    assert item_id("SS", "The sky is green.") not in err
    assert not out.exists() and not out.parent.exists()


def test_generate_names_the_item_a_server_finds_too_long(project: Path) -> None:
    from stub_openai import stub_openai

    assert _fetch().exit_code == 0
    assert _variants().exit_code == 0
    out = _with_old("out/responses/served.parquet")
    with stub_openai() as server:
        raw = _params()
        served = {"model": "m", "backend": "openai", "base_url": f"{server.url}/vllm/v1"}
        raw["models"]["served"] = {**served, "concurrency": 1, "max_retries": 3}
        _set_params(raw)
        err = _assert_fails(
            _generate("served", str(out)),
            "does not fit the context of model 'm'",
            "not retried",
            "This model's maximum context length is 2048 tokens",
            "lower generation.max_new_tokens",
        )
        assert server.hits["vllm"] == 1
    # The first request, named by its protocol, item and cell, and its store key.
    first = _prompts().iloc[0]
    name = f"cues/{first['dataset']}/{first['item_id']} [variant={first['variant']}] rep 0 turn 1"
    assert re.match(rf"error: {re.escape(name)} \(prompt [0-9a-f]{{64}}\) does not fit", err), err
    _assert_untouched(out)
