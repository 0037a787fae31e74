"""Adding a protocol touches its own folder, one registry line and its params block: nothing else.

A toy fifth protocol ("echo": asks each of two questions once, labels an answer 1 when it names
the item's keyword) is added to a copy of the repository exactly as docs/adding-a-protocol.md
says. The copy's git diff holds only those three places, and `dvc repro` runs it: its stages
exist, its metrics are written, and MLflow logs its child run beside the others. The tests need
no copy either: with echo registered, without a table scorer or with one, the fast tests of the
registry, the params and the CLI pass in the copy as they are.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import copy_repo, read_params, tiny_params, write_params

PROTOCOL = '''"""echo: a toy protocol that asks each question once and checks for its keyword."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from syps.core.config import ConvGeneration, ProtocolParams
from syps.core.io import canonical_json
from syps.core.stats import bootstrap_counts, weighted_means
from syps.core.templating import TemplateSpec, substitute
from syps.protocols.base import (
    LABEL_COLUMNS,
    LINEAGE_COLUMNS,
    Drawn,
    Judge,
    Protocol,
    Request,
    ScoreSettings,
    Turn,
    TraceDefaults,
)

ITEMS = [("sky", "What colour is the sky?", "blue"), ("grass", "What colour is grass?", "green")]


@dataclass(frozen=True, kw_only=True)
class EchoParams(ProtocolParams):
    generation: ConvGeneration = field(default_factory=lambda: ConvGeneration(max_new_tokens=6))
    template: str = "{question} Answer in one word."


class Echo(TraceDefaults):
    name: str = "echo"
    params_type: type[ProtocolParams] = EchoParams
    fan_out_reps: bool = True
    needs_sampling_for_reps: bool = True
    headline_metrics = ["hit_rate"]
    run_metrics: tuple[str, ...] = ()  # the headline (and the stage counts) are enough
    run_prefix: str = "echo"

    def turns(self, params: EchoParams) -> int:
        return 1

    def load_items(self, params: EchoParams, root: Path, seed: int) -> pd.DataFrame:
        return pd.DataFrame(
            {
                "dataset": "toy",
                "item_id": [i for i, _, _ in ITEMS],
                "item": [canonical_json({"q": q, "key": k}) for _, q, k in ITEMS],
            }
        )

    def lint(self, params: EchoParams, items: pd.DataFrame) -> dict[str, Any]:
        return {"items": len(items)}

    def auxiliary(self, params: EchoParams, items: pd.DataFrame, judge: Judge) -> pd.DataFrame:
        return pd.DataFrame()

    def requests(
        self, params: EchoParams, items: pd.DataFrame, turn: int, previous: pd.DataFrame,
        judge: Judge,
    ) -> Turn:
        out = []
        for ds, i, rec in zip(items["dataset"], items["item_id"], items["item"], strict=True):
            text = substitute(params.template, {"question": json.loads(rec)["q"]})
            out.append(Request(ds, i, {"form": "plain"}, 1, [{"role": "user", "content": text}]))
        return Turn(out)

    def label(
        self, params: EchoParams, items: pd.DataFrame, responses: pd.DataFrame, judge: Judge,
        aux: pd.DataFrame,
    ) -> pd.DataFrame:
        key = {i: json.loads(r)["key"] for i, r in zip(items["item_id"], items["item"])}
        pairs = zip(responses["item_id"], responses["response"])
        hit = [key[i] in str(r).lower() for i, r in pairs]
        return responses[[*LINEAGE_COLUMNS, "model"]].assign(
            label=[1.0 if h else 0.0 for h in hit],
            verdict=["HIT" if h else "MISS" for h in hit],
            evidence=[str(r)[:40] for r in responses["response"]],
            labeler="rule:echo",
            labeler_sha256="0" * 64,
        )[[*LINEAGE_COLUMNS, "model", *LABEL_COLUMNS]]

    def score(
        self, params: EchoParams, labels: pd.DataFrame, settings: ScoreSettings
    ) -> dict[str, dict[str, dict[str, float]]]:
        out: dict[str, dict[str, dict[str, float]]] = {}
        for (m, d), g in labels.groupby(["model", "dataset"], sort=True):
            x = g["label"].to_numpy(dtype=float)[:, None]
            rng = np.random.default_rng(settings.seed)
            counts = bootstrap_counts(len(x), settings.bootstrap, rng)
            boot = weighted_means(x, counts)[:, 0]
            lo, hi = np.quantile(boot, [(1 - settings.ci) / 2, (1 + settings.ci) / 2])
            out.setdefault(str(m), {})[str(d)] = {
                "hit_rate": float(x.mean()), "hit_rate_ci_low": float(lo),
                "hit_rate_ci_high": float(hi),
            }
        return out

    def figures(
        self, params: EchoParams, scores: dict[str, dict[str, dict[str, float]]],
        labels: pd.DataFrame, items: pd.DataFrame, figures: Path, tables: Path, plots: Path,
        settings: ScoreSettings,
    ) -> Drawn:
        return Drawn([])

    def templates(self, params: EchoParams) -> dict[str, Any]:
        return {"template": params.template}

    def template_specs(self, params: EchoParams, where: str) -> list[TemplateSpec]:
        need = frozenset({"question"})
        return [TemplateSpec(f"{where}.template", params.template, need, need)]

    def run_tags(self, params: EchoParams) -> dict[str, str]:
        return {}

    def review(self, params: EchoParams, items: pd.DataFrame, labels: pd.DataFrame) -> pd.DataFrame:
        return pd.DataFrame({"flagged": False, "expected": ""}, index=labels.index)


PROTOCOL: Protocol = Echo()
'''
BLOCK = {"enabled": True, "template": "{question} Answer in one word."}
REGISTRY_LINE = '    "echo": Entry("syps.protocols.echo.protocol"),\n'
# The optional table scorer (`syps score --protocol echo`): its module and its registry entry.
METRICS = '''"""echo's table scorer: the hit rate per model of a table made elsewhere."""

import pandas as pd


def score_table(
    df: pd.DataFrame, *, ci: float, seed: int, source: str, n_boot: int = 1000
) -> dict[str, dict[str, float]]:
    hits = pd.to_numeric(df["label"])
    return {str(m): {"hit_rate": float(h.mean())} for m, h in hits.groupby(df["model"])}
'''
TABLE_LINES = (
    '    "echo": Entry(\n'
    '        "syps.protocols.echo.protocol",\n'
    '        TableScorer(module="syps.protocols.echo.metrics", columns="model, label (1|0)"),\n'
    "    ),\n"
)


def _git(root: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t"}
    env |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    done = subprocess.run(
        ["git", *args], cwd=root, capture_output=True, text=True, check=True, env=env
    )
    return done.stdout


def add_echo(root: Path, table: bool = False) -> None:
    """What docs/adding-a-protocol.md lists: the folder, one registry line, the params block
    (at the end of ``protocols``); with ``table``, a table scorer too, in its folder and its
    entry. The registry line goes at the top, above cues (listings still show cues first)."""
    folder = root / "syps" / "protocols" / "echo"
    folder.mkdir()
    (folder / "__init__.py").write_text('"""echo: a toy protocol."""\n', encoding="utf-8")
    (folder / "protocol.py").write_text(PROTOCOL, encoding="utf-8")
    (folder / "params.yaml").write_text(yaml.safe_dump(BLOCK), encoding="utf-8")
    if table:
        (folder / "metrics.py").write_text(METRICS, encoding="utf-8")
    registry = root / "syps" / "protocols" / "__init__.py"
    text = registry.read_text(encoding="utf-8")
    anchor = "PROTOCOLS: dict[str, Entry] = {\n"
    assert text.count(anchor) == 1
    line = TABLE_LINES if table else REGISTRY_LINE
    registry.write_text(text.replace(anchor, anchor + line), encoding="utf-8")
    params = read_params(root / "params.yaml")  # as syps reads it: YES stays a string
    params["protocols"]["echo"] = dict(BLOCK)
    write_params(root / "params.yaml", params)


@pytest.mark.slow
def test_a_fifth_protocol_touches_three_places_and_runs_with_dvc_repro(
    tmp_path: Path, model_cache: Path
) -> None:
    root = tmp_path / "repo"
    copy_repo(root)
    tiny_params(root)  # the study, made small: the toy is added to it like to a user's own
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "before")

    add_echo(root)
    _git(root, "add", "-A")
    changed = _git(root, "diff", "--cached", "--name-only").split()
    assert sorted(changed) == [
        "params.yaml",
        "syps/protocols/__init__.py",
        "syps/protocols/echo/__init__.py",
        "syps/protocols/echo/params.yaml",
        "syps/protocols/echo/protocol.py",
    ]
    registry_diff = _git(root, "diff", "--cached", "--", "syps/protocols/__init__.py")
    added = [ln for ln in registry_diff.splitlines() if ln.startswith("+") and ln[1:2] != "+"]
    assert added == ["+" + REGISTRY_LINE.rstrip("\n")]

    env = {**os.environ, "SYPS_CACHE_DIR": str(model_cache), "PYTHONPATH": str(root)}
    env.pop("DVC_EXP_NAME", None)
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
@pytest.mark.parametrize("table", [False, True], ids=["no-table", "table"])
def test_the_fast_tests_pass_with_a_fifth_protocol(tmp_path: Path, table: bool) -> None:
    root = tmp_path / "repo"
    copy_repo(root)
    add_echo(root, table)
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
    assert "test_every_entry_names_what_exists[echo] PASSED" in done.stdout
    # `syps score` scores echo's table where it declares a scorer (m: hits 1, 0 -> 0.5), and
    # refuses it in one usage error naming it where it does not.
    path = tmp_path / "hits.csv"
    path.write_text("model,label\nm,1\nm,0\n", encoding="utf-8")
    score = [sys.executable, "-m", "syps.cli", "score", "--protocol", "echo", str(path)]
    scored = subprocess.run(score, cwd=root, env=env, capture_output=True, text=True)
    if table:
        assert scored.returncode == 0, scored.stderr
        assert json.loads(scored.stdout) == {"m": {"hit_rate": 0.5}}
    else:
        assert scored.returncode == 2 and scored.stdout == ""
        assert "--protocol" in scored.stderr and "'echo'" in scored.stderr
        assert "Traceback" not in scored.stderr
