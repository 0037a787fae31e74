"""One scoring path: ``syps score --protocol betting`` on the label stage's parquet (and on the
documented CSV written from it) reports exactly what ``score@betting`` reports for those labels:
every key, every number. The across-model counts (``metrics.ACROSS_MODELS``) count the models
of the table scored: one model's parquet counts that model alone, the run's labels together
count the run's."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from typer.testing import CliRunner

from syps.cli import app
from syps.core.config import ScoreParams
from syps.core.protocol import LABEL_COLUMNS, LINEAGE_COLUMNS, ScoreSettings
from syps.protocols import PROTOCOLS
from syps.protocols.betting.metrics import ACROSS_MODELS, CHOICE_COLUMNS
from syps.protocols.betting.params import BettingParams
from syps.protocols.betting.protocol import LABELER, OWN_COLUMNS

runner = CliRunner()
# The command line scores with the score stage's defaults for what it is not given: min_items
# from ScoreParams, alpha from BettingParams.
SETTINGS = ScoreSettings(bootstrap=200, ci=0.95, seed=3, min_items=ScoreParams.min_items)
# F, Z and N, x side 1 correct, x side 1 first: the twelve cells.
CELLS = [(c, h, o) for c in "FZN" for h in (1, 0) for o in (1, 0)]
F_VERDICT = {"user": "friend1", "other": "friend2"}


def label_rows(model: str, dataset: str, seed: int) -> pd.DataFrame:
    """A label table as ``BettingProtocol.label`` writes it: 12 items x 12 cells x 2 reps, each
    row skipped (10%), UNCLEAR (20%) or a side. Items 9-11 have no F row, so F's support (9
    items) is below min_items (10) and Z's and N's (12) are not."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(12):
        for cond, h, o in CELLS:
            if cond == "F" and i >= 9:
                continue
            for rep in range(2):
                cell = {"condition": cond, "user_correct": str(h), "user_first": str(o)}
                base: dict[str, Any] = {
                    "protocol": "betting",
                    "dataset": dataset,
                    "item_id": f"q{i:02d}",
                    "cell": json.dumps(cell, separators=(",", ":")),
                    "rep": rep,
                    "turn": 1,
                    "parent_key": "",
                    "model": model,
                    "store_key": f"{model}-{i}-{cond}{h}{o}-{rep}",
                    "condition": cond,
                    "user_correct": h,
                    "user_first": o,
                    "finish_reason": "stop",
                    "labeler": LABELER,
                    "labeler_sha256": "0" * 64,
                }
                u = rng.random()
                if u < 0.1:
                    what = {"choice": "", "rule": "skipped", "label": np.nan, "verdict": "SKIPPED"}
                    rows.append(base | what | {"store_key": "", "evidence": "parent failed"})
                elif u < 0.3:
                    what = {"choice": "", "rule": "no_verdict", "label": np.nan}
                    rows.append(base | what | {"verdict": "UNCLEAR", "evidence": "(no_verdict)"})
                else:
                    side = "user" if rng.random() < 0.5 else "other"
                    verdict = F_VERDICT[side] if cond == "F" else side
                    what = {"choice": side, "rule": "echo", "label": float(side == "user")}
                    rows.append(base | what | {"verdict": verdict, "evidence": side})
    return pd.DataFrame(rows, columns=[*LINEAGE_COLUMNS, *OWN_COLUMNS, *LABEL_COLUMNS])


def cli_scores(path: Path) -> dict[str, Any]:
    args = ["score", "--protocol", "betting", str(path), "--bootstrap", "200", "--seed", "3"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    out: dict[str, Any] = json.loads(result.stdout)
    return out


def assert_same(
    cli: dict[str, Any], stage: dict[str, dict[str, dict[str, float]]], but: tuple[str, ...] = ()
) -> None:
    """Every key of the stage's scores in the command's, with the very same number (a float
    survives JSON exactly; NaN is printed as null), and no key more; the keys ``but`` are
    only checked to be there."""
    assert set(cli) == set(stage)
    for model, datasets in stage.items():
        assert set(cli[model]) == set(datasets)
        for ds, metrics in datasets.items():
            assert set(cli[model][ds]) == set(metrics), (model, ds)
            for key, value in metrics.items():
                got = cli[model][ds][key]
                if key in but:
                    continue
                assert (got is None and math.isnan(value)) or got == value, (model, ds, key)


def test_cli_on_the_label_parquet_equals_the_score_stage(tmp_path: Path) -> None:
    params = BettingParams(dataset="mine")  # not the default: the CLI must read the column
    a, b = label_rows("model-a", "mine", 1), label_rows("model-b", "mine", 2)
    # The label stage writes one parquet per model; the score stage reads them all.
    a.to_parquet(tmp_path / "model-a.parquet")
    b.to_parquet(tmp_path / "model-b.parquet")
    stage = PROTOCOLS["betting"].score(params, pd.concat([a, b], ignore_index=True), SETTINGS)
    cli = {**cli_scores(tmp_path / "model-a.parquet"), **cli_scores(tmp_path / "model-b.parquet")}
    # Each parquet alone: every number the same but the counts, which count one model.
    assert_same(cli, stage, but=ACROSS_MODELS)
    assert cli["model-a"]["mine"]["n_models"] == 1.0
    assert stage["model-a"]["mine"]["n_models"] == 2.0
    # The run's labels in one table: every key, every number, the counts included.
    pd.concat([a, b], ignore_index=True).to_parquet(tmp_path / "run.parquet")
    assert_same(cli_scores(tmp_path / "run.parquet"), stage)
    m = stage["model-a"]["mine"]
    # The table exercises what the comparison covers: skips, UNCLEAR rows, both supports.
    assert sum(v for k, v in m.items() if k.startswith("n_skipped/")) > 0
    assert m["unclear_rate_Z"] > 0
    assert (m["beta_F_n"], m["beta_F_low_support"]) == (9.0, 1.0)
    assert (m["beta_Z_n"], m["beta_Z_low_support"]) == (12.0, 0.0)


def test_cli_on_the_documented_csv_equals_the_score_stage(tmp_path: Path) -> None:
    labels = label_rows("m", "truthfulqa", 4)
    # The CSV a researcher would write: the choices, the verdict (for the skips); no dataset
    # column, so the params' default dataset name.
    csv = tmp_path / "choices.csv"
    labels[[*CHOICE_COLUMNS, "verdict"]].to_csv(csv, index=False)
    stage = PROTOCOLS["betting"].score(BettingParams(), labels, SETTINGS)
    assert_same(cli_scores(csv), stage)
