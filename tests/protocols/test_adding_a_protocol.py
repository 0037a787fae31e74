"""Adding a protocol touches its own file, its registry line and its params block: nothing else.

The docs' fifth protocol ("echo": asks each of two questions once, labels an answer 1 when it
names the item's keyword; one file of at most 60 lines) is read from docs/adding-a-protocol.md
and checked by hand, then added exactly as the page says to a copy of the slow tier's one run
(conftest.one_run: the tiny study after its `dvc repro`). The copy's git diff holds only those
three places, and `dvc repro` runs it: its stages exist, its
metrics are written, and MLflow logs its child run beside the others. The tests need no copy
either: with echo registered, the fast tests of the registry, the params and the CLI pass in the
copy as they are.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import OneRun, copy_repo, copy_run, read_params, write_params

from syps.core.protocol import ScoreSettings

DOC = Path(__file__).resolve().parents[2] / "docs" / "adding-a-protocol.md"


def _code_after(marker: str, lang: str) -> str:
    """The first ``lang`` code block after ``marker`` in docs/adding-a-protocol.md."""
    text = DOC.read_text(encoding="utf-8")
    start = text.index(f"```{lang}\n", text.index(marker)) + len(f"```{lang}\n")
    return text[start : text.index("```", start)]


# The example exactly as the docs show it: the test adds what a reader would copy.
PROTOCOL = _code_after("<!-- the echo protocol -->", "python")
BLOCK = yaml.safe_load(_code_after("And its block in `params.yaml`", "yaml"))["protocols"]["echo"]
LAST_LINE = '        "adaptive": "syps.protocols.adaptive",\n'  # the registry's last entry
REGISTRY_LINE = '        "echo": "syps.protocols.echo",\n'


def _load_echo(mp: pytest.MonkeyPatch) -> types.ModuleType:
    """The docs' echo module, imported from its text (as ``syps.protocols.echo``, for this
    test only: a dataclass finds its module in ``sys.modules``)."""
    module = types.ModuleType("syps.protocols.echo")
    mp.setitem(sys.modules, module.__name__, module)
    exec(compile(PROTOCOL, "echo/__init__.py", "exec"), module.__dict__)
    return module


def test_the_example_is_one_file_of_at_most_60_lines() -> None:
    assert len(PROTOCOL.splitlines()) <= 60
    assert PROTOCOL.startswith('"""echo: ') and "PROTOCOL = Protocol(" in PROTOCOL


def test_the_example_labels_and_scores_by_hand(monkeypatch: pytest.MonkeyPatch) -> None:
    # sky's keyword is blue, grass's green: "Blue." hits, "Yellow" misses -> a rate of 1/2 on
    # two items; each item's request is its question in the template.
    echo = _load_echo(monkeypatch).PROTOCOL
    params = echo.params_type()
    table = echo.load_items(params, Path("."), 0)
    assert list(table["item_id"]) == ["sky", "grass"] and set(table["dataset"]) == {"toy"}
    items = echo.read_items(table)
    turn = echo.requests(params, items, 1, pd.DataFrame(), None)
    assert [r.messages[0]["content"] for r in turn.requests] == [
        "What colour is the sky? Answer in one word.",
        "What colour is grass? Answer in one word.",
    ]
    responses = pd.DataFrame(
        {"protocol": "echo", "dataset": "toy", "item_id": ["sky", "grass"], "cell": "{}",
         "rep": 0, "turn": 1, "parent_key": "", "model": "m", "response": ["Blue.", "Yellow"]}
    )  # fmt: skip
    labels = echo.label(params, items, responses, None, pd.DataFrame())
    assert list(labels["label"]) == [1.0, 0.0] and list(labels["verdict"]) == ["1", "0"]
    assert list(labels["evidence"]) == ["blue.", "yellow"]
    settings = ScoreSettings(bootstrap=200, ci=0.95, seed=0, min_items=1)
    got = echo.score(params, labels, settings)["m"]["toy"]
    assert (got["hit_rate"], got["hit_rate_n"], got["n_unclear"]) == (0.5, 2.0, 0.0)
    # Two item means, 1 and 0: a resample is all-sky, mixed or all-grass, so [0, 1].
    assert (got["hit_rate_ci_low"], got["hit_rate_ci_high"]) == (0.0, 1.0)


def _git(root: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t"}
    env |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    done = subprocess.run(
        ["git", *args], cwd=root, capture_output=True, text=True, check=True, env=env
    )
    return done.stdout


def add_echo(root: Path) -> None:
    """What docs/adding-a-protocol.md lists: the file, its registry line, the params block at
    the end of ``protocols``."""
    folder = root / "syps" / "protocols" / "echo"
    folder.mkdir()
    (folder / "__init__.py").write_text(PROTOCOL, encoding="utf-8")
    registry = root / "syps" / "protocols" / "__init__.py"
    text = registry.read_text(encoding="utf-8")
    assert text.count(LAST_LINE) == 1
    registry.write_text(text.replace(LAST_LINE, LAST_LINE + REGISTRY_LINE), encoding="utf-8")
    params = read_params(root / "params.yaml")  # as syps reads it: YES stays a string
    params["protocols"]["echo"] = dict(BLOCK)
    write_params(root / "params.yaml", params)


@pytest.mark.slow
def test_a_fifth_protocol_touches_three_places_and_runs_with_dvc_repro(
    one_run: OneRun, tmp_path: Path
) -> None:
    # The slow tier's one run of the tiny study, copied: the toy is added to a study that has
    # run, like to a user's own, whose store then serves every answer of the other four.
    root = copy_run(one_run, tmp_path / "repo")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "the study after its run")

    add_echo(root)
    _git(root, "add", "-A")
    changed = _git(root, "diff", "--cached", "--name-only").split()
    registry = "syps/protocols/__init__.py"
    assert sorted(changed) == ["params.yaml", registry, "syps/protocols/echo/__init__.py"]
    registry_diff = _git(root, "diff", "--cached", "--", registry)
    added = [ln for ln in registry_diff.splitlines() if ln.startswith("+") and ln[1:2] != "+"]
    assert added == ["+" + REGISTRY_LINE.rstrip("\n")]

    env = {**one_run.env, "PYTHONPATH": str(root)}
    done = subprocess.run(["dvc", "repro"], cwd=root, capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for stage in ("fetch@echo", "variants@echo", "generate@echo-", "label@echo-", "score@echo"):
        assert f"Running stage '{stage}" in done.stdout, stage
    scores = json.loads((root / "metrics" / "echo.json").read_text(encoding="utf-8"))
    (model,) = scores
    rate = scores[model]["toy"]["hit_rate"]
    labels = __import__("pandas").read_parquet(root / f"out/protocols/echo/labels/{model}.parquet")
    assert len(labels) == 2 and rate == labels["label"].mean()  # the mean of its two labels

    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{root / 'mlruns' / 'mlflow.db'}")
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    names = {r.info.run_name for r in runs}
    assert f"echo/{model}/toy" in names
    echo = next(r for r in runs if r.info.run_name == f"echo/{model}/toy")
    assert echo.data.tags["syps.protocol"] == "echo"
    assert echo.data.metrics["hit_rate"] == rate


# The fast tests of the registry, the params and the CLI's commands, by the README's test command
# (pyproject's addopts apply in the copy), with echo registered.
REGISTRY_AND_PARAMS_TESTS = [
    "tests/protocols/test_protocols.py",
    "tests/core/test_config.py",
    "tests/test_fixture_params.py",
    "tests/test_cli.py",
    "tests/test_cli_score_protocols.py",
]


@pytest.mark.slow
def test_the_fast_tests_pass_with_a_fifth_protocol(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    copy_repo(root)
    add_echo(root)
    env = {**os.environ, "PYTHONPATH": str(root)}
    for var in ("DVC_ROOT", "DVC_EXP_NAME", "SYPS_CACHE_DIR", "PYTEST_ADDOPTS"):
        env.pop(var, None)
    tests = [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider"]
    done = subprocess.run(
        [*tests, *REGISTRY_AND_PARAMS_TESTS],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert "test_every_entry_is_its_packages_protocol[echo] PASSED" in done.stdout
    # echo declares no table scorer: `syps score` refuses it in one usage error naming it.
    path = tmp_path / "hits.csv"
    path.write_text("model,label\nm,1\nm,0\n", encoding="utf-8")
    score = [sys.executable, "-m", "syps.cli", "score", "--protocol", "echo", str(path)]
    scored = subprocess.run(score, cwd=root, env=env, capture_output=True, text=True)
    assert scored.returncode == 2 and scored.stdout == ""
    assert "--protocol" in scored.stderr and "'echo'" in scored.stderr
    assert "Traceback" not in scored.stderr
