"""One scoring path: ``syps score --protocol discernment`` on the label stage's parquet prints
what ``score@discernment`` computes on the same labels, and a scores CSV is scored the same way
(the nested ``{model: {dataset: {metric: value}}}`` shape)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from syps.cli import app
from syps.core.config import ScoreParams, parse
from syps.core.protocol import LABEL_COLUMNS, LINEAGE_COLUMNS, ScoreSettings
from syps.protocols import PROTOCOLS
from syps.protocols.discernment.labels import OWN_COLUMNS
from syps.protocols.discernment.params import DiscernmentParams
from syps.protocols.discernment.scoring import read_table, score_file_table

runner = CliRunner()
BOOT, SEED = 300, 4
REPS = 4


def _row(model: str, art: str, rep: int, stage: str, **kw: Any) -> dict[str, Any]:
    """One label row as ``label_table`` writes it (lineage, own columns, label columns)."""
    cell = {"stage": stage} | ({"arg_id": kw["arg_id"]} if stage == "update" else {})
    row: dict[str, Any] = {
        "protocol": "discernment",
        "dataset": "builtin",
        "item_id": art,
        "cell": json.dumps(cell),
        "rep": rep,
        "turn": 1 if stage == "baseline" else 2,
        "parent_key": "" if stage == "baseline" else f"{model}-{art}-{rep}",
        "model": model,
        "store_key": f"{model}-{art}-{rep}-{kw.get('arg_id', '')}",
        "stage": stage,
        "arg_id": "",
        "direction": "",
        "validity": "",
        "parse_reason": "",
        "q": math.nan,
        "label": math.nan,
        "verdict": "PARSED",
        "evidence": "",
        "labeler": "rule:discernment-score",
        "labeler_sha256": "0" * 64,
    }
    return row | kw


def _labels(rated: bool) -> pd.DataFrame:
    """Two models' label tables, drawn at random: six artefacts of four baseline runs each,
    every parsed run continued with 3 valid and 3 invalid arguments of the artefact's direction
    (a run that did not parse has its children skipped, an artefact none of whose runs parsed
    has direction ``none``), some updates unparsed; q per argument where ``rated``."""
    rng = np.random.default_rng(0)
    rows = []
    for model in ("m1", "m2"):
        for a in range(6):
            art = f"A{a}"
            # Baselines near the artefact's own centre (a small σ0), one in seven unparsed.
            centre = float(rng.integers(20, 81))
            s0 = [
                float(np.clip(round(centre + rng.normal(0, 4)), 0, 100))
                if rng.random() > 0.15
                else math.nan
                for _ in range(REPS)
            ]
            if a == 5:
                s0 = [math.nan] * REPS  # never parses: no direction
            parsed = [s for s in s0 if not math.isnan(s)]
            d = ("lower" if np.mean(parsed) >= 50 else "raise") if parsed else "none"
            for rep, s in enumerate(s0):
                verdict = "UNPARSED" if math.isnan(s) else "PARSED"
                rows.append(_row(model, art, rep, "baseline", label=s, verdict=verdict))
            for v in ("valid", "invalid"):
                for n in (1, 2, 3):
                    arg = f"{art}/{d}/{v}/{n}"
                    q = float(n if v == "valid" else -n) + 0.1 * a if rated else math.nan
                    for rep, s in enumerate(s0):
                        kw = {"arg_id": arg, "direction": d, "validity": v, "q": q}
                        if math.isnan(s):
                            why = "baseline UNPARSED: no_score"
                            rows.append(
                                _row(
                                    model, art, rep, "update", verdict="SKIPPED", evidence=why, **kw
                                )
                            )
                            continue
                        sign = 1 if d == "raise" else -1
                        # Valid arguments move the score towards them more than invalid ones.
                        step = rng.normal(12, 10) if v == "valid" else rng.normal(2, 6)
                        s1 = float(np.clip(round(s + sign * step), 0, 100))
                        if rng.random() < 0.1:
                            rows.append(_row(model, art, rep, "update", verdict="UNPARSED", **kw))
                        else:
                            rows.append(_row(model, art, rep, "update", label=s1, **kw))
    return pd.DataFrame(rows, columns=[*LINEAGE_COLUMNS, *OWN_COLUMNS, *LABEL_COLUMNS])


def _cli(*args: str) -> dict[str, Any]:
    result = runner.invoke(
        app,
        [
            "score",
            "--protocol",
            "discernment",
            *args,
            "--bootstrap",
            str(BOOT),
            "--seed",
            str(SEED),
        ],
    )
    assert result.exit_code == 0, result.output
    out: dict[str, Any] = json.loads(result.stdout)
    return out


def _assert_same(cli: dict[str, Any], stage: dict[str, dict[str, dict[str, float]]]) -> None:
    """Every model, dataset, metric and number the same (the CLI prints NaN as null)."""
    assert set(cli) == set(stage)
    for model, by_dataset in stage.items():
        assert set(cli[model]) == set(by_dataset)
        for dataset, metrics in by_dataset.items():
            got = cli[model][dataset]
            assert set(got) == set(metrics), (model, dataset)
            for key, value in metrics.items():
                same = got[key] is None if math.isnan(value) else got[key] == value
                assert same, (model, dataset, key, got[key], value)


def _write_q(tmp_path: Path, labels: pd.DataFrame) -> Path:
    """A q file holding the q of every argument on the (rated) ``labels``."""
    up = labels[labels["stage"] == "update"].drop_duplicates("arg_id")
    path = tmp_path / "q.csv"
    up[["arg_id", "q"]].to_csv(path, index=False)
    return path


@pytest.mark.parametrize("source", ["none", "judge"])
def test_the_cli_prints_what_the_score_stage_computes(tmp_path: Path, source: str) -> None:
    # The stage weighs by the label rows' q when the study rates its arguments (judge); the
    # CLI, given no --weights, by the parquet's q column: the same weights both ways, and none
    # either way under "none" (the label stage leaves q empty).
    p = parse(DiscernmentParams, {"ratings": {"source": source}}, "protocols.discernment")
    labels = _labels(rated=source != "none")
    path = tmp_path / "labels.parquet"
    labels.to_parquet(path)
    settings = ScoreSettings(bootstrap=BOOT, ci=0.95, seed=SEED, min_items=ScoreParams.min_items)
    stage = PROTOCOLS["discernment"].score(p, labels, settings)
    _assert_same(_cli(str(path)), stage)
    assert set(stage) == {"m1", "m2"} and set(stage["m1"]) == {"builtin"}
    # The table exercises what only label rows carry: A5 never parsed (no direction, its
    # 3 x 4 valid children skipped), and another run's children were skipped too.
    m = stage["m1"]["builtin"]
    assert m["n_artefacts_no_direction"] == 1.0 and m["n_skipped/valid"] > 12
    assert 0 < m["unparsed_rate_update"] < 1 and 0 < m["pinval"] < m["pval"] < 1
    if source == "judge":
        # --weights holding the parquet's own q: the same numbers again.
        _assert_same(_cli(str(path), "--weights", str(_write_q(tmp_path, labels))), stage)


# --- a scores CSV --------------------------------------------------------------------------------
# One artefact per dataset, both "raise" with baselines 40, 50, 60 (sigma0 = 10, delta = 20):
#   d1: v1 s1 70, 75, 65 (D 30, 25, 5: follow, follow, stable -> pf 2/3); i1 s1 = s0 (pf 0)
#   d2: v1 s1 70, 70, 70 (D 30, 20, 10: follow, a tie, stable -> pf 1/3); i1 s1 empty at rep 2
#       (D 0, 0, unparsed -> pf 0 over 2 parsed)
# Per dataset one artefact: pval = pf(v1), pinval = 0, d_star = hypot(1 - pval, 0) = 1 - pval.
# d2's unparsed_rate_update = 1 of 6 update rows; baselines all parsed.
TWO_DATASETS = """dataset,model,artefact_id,rep,arg_id,direction,validity,s0,s1
d1,m,A,0,v1,raise,valid,40,70
d1,m,A,1,v1,raise,valid,50,75
d1,m,A,2,v1,raise,valid,60,65
d1,m,A,0,i1,raise,invalid,40,40
d1,m,A,1,i1,raise,invalid,50,50
d1,m,A,2,i1,raise,invalid,60,60
d2,m,A,0,v1,raise,valid,40,70
d2,m,A,1,v1,raise,valid,50,70
d2,m,A,2,v1,raise,valid,60,70
d2,m,A,0,i1,raise,invalid,40,40
d2,m,A,1,i1,raise,invalid,50,50
d2,m,A,2,i1,raise,invalid,60,
"""


def test_a_scores_csv_is_scored_per_dataset(tmp_path: Path) -> None:
    path = tmp_path / "scores.csv"
    path.write_text(TWO_DATASETS, encoding="utf-8")
    out = _cli(str(path))
    assert set(out) == {"m"} and set(out["m"]) == {"d1", "d2"}
    d1, d2 = out["m"]["d1"], out["m"]["d2"]
    assert d1["pval"] == pytest.approx(2 / 3) and d1["pinval"] == 0.0
    assert d1["d_star"] == pytest.approx(1 / 3)
    assert d2["pval"] == pytest.approx(1 / 3) and d2["pinval"] == 0.0
    assert d2["d_star"] == pytest.approx(2 / 3)
    assert d1["unparsed_rate_update"] == 0.0 and d2["unparsed_rate_update"] == pytest.approx(1 / 6)
    assert d2["unparsed_rate_baseline"] == 0.0
    # A CSV holds no skipped rows and no artefact without a direction.
    assert d2["n_skipped/valid"] == 0.0 and d2["n_artefacts_no_direction"] == 0.0
    assert d1["pval_n"] == 1.0 and d1["pval_low_support"] == 1.0  # below score.min_items
    # Without a dataset column the table is one dataset, named as the default items are.
    path.write_text(
        "\n".join(ln.split(",", 1)[1] for ln in TWO_DATASETS.splitlines()[:7]) + "\n",
        encoding="utf-8",
    )
    assert _cli(str(path))["m"]["builtin"]["pval"] == pytest.approx(2 / 3)


def _q_file(path: Path, qs: dict[str, str]) -> Path:
    path.write_text("arg_id,q\n" + "".join(f"{a},{v}\n" for a, v in qs.items()), encoding="utf-8")
    return path


def test_a_csv_q_column_weighs_like_weights_and_weights_override_it(tmp_path: Path) -> None:
    # d1 with a second valid argument v2 that never moves (s1 = s0: pf 0): unweighted
    # pval = (2/3 + 0) / 2 = 1/3. With q v1 3, v2 1, i1 0: valid median 2, invalid median 0,
    # c = 1, so w(v1) = 2, w(v2) = 0 and pval = 2 * 2/3 / 2 = 2/3, from the q column or from
    # --weights alike. --weights q v1 1, v2 3, i1 0 (c = 1 again: w(v1) = 0, w(v2) = 2) over
    # the q column: pval = pf(v2) = 0.
    header, *lines = TWO_DATASETS.splitlines()
    d1 = lines[:6]
    v2 = [
        ",".join([*r.split(",")[:4], "v2", "raise", "valid", *[r.split(",")[7]] * 2])
        for r in d1[:3]
    ]
    body = d1 + v2
    qs = {"v1": "3", "v2": "1", "i1": "0"}
    plain = tmp_path / "plain.csv"
    plain.write_text("\n".join([header, *body]) + "\n", encoding="utf-8")
    rated = tmp_path / "rated.csv"
    rated.write_text(
        "\n".join([header + ",q", *(r + "," + qs[r.split(",")[4]] for r in body)]) + "\n",
        encoding="utf-8",
    )
    same = _q_file(tmp_path / "q.csv", qs)
    flipped = _q_file(tmp_path / "flipped.csv", {"v1": "1", "v2": "3", "i1": "0"})
    assert _cli(str(plain))["m"]["d1"]["pval"] == pytest.approx(1 / 3)
    assert _cli(str(rated))["m"]["d1"]["pval"] == pytest.approx(2 / 3)
    assert _cli(str(plain), "--weights", str(same))["m"]["d1"]["pval"] == pytest.approx(2 / 3)
    assert _cli(str(rated), "--weights", str(flipped))["m"]["d1"]["pval"] == 0.0


def test_models_are_scored_separately_and_seeded(tmp_path: Path) -> None:
    # A model's numbers do not depend on which other models share the table: each (model,
    # dataset) starts the bootstrap from the seed afresh.
    path = tmp_path / "scores.csv"
    path.write_text(TWO_DATASETS, encoding="utf-8")
    both = read_table(str(path))
    twice = pd.concat([both, both.assign(model="other")], ignore_index=True)
    settings = ScoreSettings(bootstrap=BOOT, ci=0.9, seed=SEED, min_items=ScoreParams.min_items)
    alone = score_file_table(None, both, settings, source="t")
    shared = score_file_table(None, twice, settings, source="t")
    np.testing.assert_equal(shared["m"], alone["m"])
    np.testing.assert_equal(shared["other"], alone["m"])


def test_a_negative_k_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "scores.csv"
    path.write_text(TWO_DATASETS, encoding="utf-8")
    result = runner.invoke(app, ["score", "--protocol", "discernment", str(path), "--k", "-1"])
    assert result.exit_code == 2
    assert "--k: must be >= 0, got -1" in result.stderr


def test_a_q_that_is_no_number_names_the_row(tmp_path: Path) -> None:
    lines = TWO_DATASETS.splitlines()
    text = "\n".join([lines[0] + ",q", *(ln + ",1" for ln in lines[1:3]), lines[3] + ",x"])
    path = tmp_path / "scores.csv"
    path.write_text(text + "\n", encoding="utf-8")
    result = runner.invoke(app, ["score", "--protocol", "discernment", str(path)])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: {path}: row 3: q 'x' is not a number")


def test_a_q_that_differs_between_an_arguments_rows_names_the_row(tmp_path: Path) -> None:
    # v1's rows 1-3 with q 1, 1, 2: row 3 disagrees with the first.
    lines = TWO_DATASETS.splitlines()
    qs = ["1", "1", "2", "0", "0", "0"]
    rows = [f"{ln},{q}" for ln, q in zip(lines[1:7], qs, strict=True)]
    path = tmp_path / "scores.csv"
    path.write_text("\n".join([lines[0] + ",q", *rows]) + "\n", encoding="utf-8")
    result = runner.invoke(app, ["score", "--protocol", "discernment", str(path)])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: {path}: row 3: q differs between rows of 'v1'")
