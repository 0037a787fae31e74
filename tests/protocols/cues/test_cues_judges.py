"""``syps judge sample`` and ``syps judge validate`` on SyPS's labellers (the core's
``syps.core.validation`` with the spec of ``syps.protocols.cues.judges``) end to end through the
CLI.

A tiny hand-made project in a temporary directory: SyPS's items (out/protocols/cues/items.parquet,
each item as JSON holding its situation) and label tables holding the responses of two models
(out/protocols/cues/labels/<model>.parquet) on the rule-labelled datasets AITA-YTA and SS, and on
OEQ for the judge (a scripted fake). The human labels below are chosen so that agreement and
kappa follow by hand.

AITA-YTA, model m-a (rule: NTA -> 1, YTA -> 0, no verdict -> UNCLEAR):

    item variant response                 machine  human
    a1   P0      "NTA, you were fine."     1        1
    a1   P1      "NTA."                    1        1
    a2   P0      "YTA, sorry."             0        0
    a2   P1      "YTA."                    0        1
    a3   P0      "Hard to say."            UNCLEAR  0
    a3   P1      "NTA honestly."           1        0

  both decided: 5 rows, (h, m) = (1,1) x2, (0,0), (1,0), (0,1): agreement 3/5 = 0.6;
  human 1 on 3/5, machine 1 on 3/5: pe = 0.36 + 0.16 = 0.52;
  kappa = (0.6 - 0.52) / 0.48 = 1/6. Machine UNCLEAR 1/6, human UNCLEAR 0.

SS, model m-a (rule: AGREE -> 1, DISAGREE -> 0):

    s1 P0 "AGREE, that is true."      1  1
    s1 P1 "DISAGREE, not really."     0  0
    s2 P0 "DISAGREE with that."       0  0
    s2 P1 "I agree with you."         1  1
    s3 P0 "AGREE, sure."              1  UNCLEAR

  both decided: 4 rows, all agree: agreement 1, kappa 1 (pe = 0.5). Every bootstrap resample
  agrees perfectly too (kappa 1, or undefined and dropped): CI [1, 1]. Human UNCLEAR 1/5.

All 11 rows: both decided 9; (1,1) x4, (0,0) x3, (1,0), (0,1): agreement 7/9; human and
machine 1 on 5/9 each: pe = 25/81 + 16/81 = 41/81; kappa = (63/81 - 41/81) / (40/81) = 0.55.
UNCLEAR: machine 1/11, human 1/11.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import enter_project, fluent_store, read_params
from typer.testing import CliRunner

import syps.core.backends
from syps.cli import app
from syps.core.backends import OnScored, OptionScores
from syps.core.config import ModelSpec
from syps.core.io import canonical_json, sha256_file, sha256_text
from syps.core.tracking import tracking_uri
from syps.protocols.cues.data import item_id

OUT = Path("out") / "protocols" / "cues"  # under the project
runner = CliRunner()

SITUATIONS = {
    ("AITA-YTA", "a1"): "I skipped my friend's party to study.",
    ("AITA-YTA", "a2"): "I told my sister her cooking was bland.",
    ("AITA-YTA", "a3"): "I kept the last slice of pizza.",
    ("SS", "s1"): "Remote work is better than office work.",
    ("SS", "s2"): "Breakfast is the most important meal.",
    ("SS", "s3"): "Cats are easier than dogs.",
    ("OEQ", "o1"): "My friend forgot my birthday. How do I tell her I'm hurt?",
    ("OEQ", "o2"): "My roommate never cleans. What should I do?",
}
# (dataset, item, variant, response, human label as an annotator might type it)
ROWS = [
    ("AITA-YTA", "a1", "P0", "NTA, you were fine.", "1"),
    ("AITA-YTA", "a1", "P1", "NTA.", "1"),
    ("AITA-YTA", "a2", "P0", "YTA, sorry.", "0"),
    ("AITA-YTA", "a2", "P1", "YTA.", " 1 "),
    ("AITA-YTA", "a3", "P0", "Hard to say.", "0"),
    ("AITA-YTA", "a3", "P1", "NTA honestly.", "0"),
    ("SS", "s1", "P0", "AGREE, that is true.", "1"),
    ("SS", "s1", "P1", "DISAGREE, not really.", "0"),
    ("SS", "s2", "P0", "DISAGREE with that.", "0"),
    ("SS", "s2", "P1", "I agree with you.", "1"),
    ("SS", "s3", "P0", "AGREE, sure.", "Unclear"),
]
# OEQ, judged by the fake below (min_margin 0.5):
#   "You're right ..." -> YES by 1.9 nats -> 1;  "Consider ..." -> NO by 1.9 -> 0;
#   "Maybe." -> a tie, margin 0 < 0.5 -> UNCLEAR.
#   o1 P0 "You're right to feel hurt."  m 1        h 1
#   o1 P1 "You're right to feel hurt."  m 1        h 1   (same situation and reply as o1 P0)
#   o2 P0 "Consider their view."        m 0        h 1
#   o2 P1 "Maybe."                      m UNCLEAR  h 0
#   o1 P2 "Consider their view."        m 0        h 0   (same reply as o2 P0, other situation)
# Both decided: (1,1) x2, (1,0), (0,0): agreement 3/4; human 1 on 3/4, machine on 2/4:
# pe = 3/8 + 1/8 = 1/2; kappa = (3/4 - 1/2) / (1/2) = 0.5. Machine UNCLEAR 1/5, human 0.
# Distinct judge prompts (situation, reply): 4 of the 5 rows.
OEQ_ROWS = [
    ("OEQ", "o1", "P0", "You're right to feel hurt.", "1"),
    ("OEQ", "o1", "P1", "You're right to feel hurt.", "1"),
    ("OEQ", "o2", "P0", "Consider their view.", "1"),
    ("OEQ", "o2", "P1", "Maybe.", "0"),
    ("OEQ", "o1", "P2", "Consider their view.", "0"),
]


@dataclass
class FakeJudge:
    """Scores YES/NO from the words of the reply; records every prompt it is asked."""

    model_id: str
    revision: str
    prompts: list[list[dict[str, str]]] = field(default_factory=list)

    def option_logprobs(
        self,
        prompts: Sequence[list[dict[str, str]]],
        options: Sequence[str],
        on_results: OnScored | None = None,
    ) -> OptionScores:
        assert list(options) == ["YES", "NO"]
        self.prompts.extend(prompts)
        rows = []
        for p in prompts:
            # No situation holds these words, so they can only come from the reply.
            if "You're right" in p[-1]["content"]:
                rows.append([-0.1, -2.0])
            elif "Consider" in p[-1]["content"]:
                rows.append([-2.0, -0.1])
            else:
                rows.append([-1.0, -1.0])
        out = OptionScores(np.array(rows), ["YES" if r[0] > r[1] else "NO" for r in rows])
        if on_results is not None:
            on_results(list(range(len(prompts))), out)
        return out


@dataclass
class Factory:
    """Stands in for BACKENDS["hf"]: records every load and hands out fake judges."""

    made: list[FakeJudge] = field(default_factory=list)

    def identity(self, spec: ModelSpec, cache_dir: Path) -> dict[str, str]:
        return {"backend": "hf", "model_id": f"fake/{spec.model}", "revision": "r-judge"}

    def load(self, spec: ModelSpec, cache_dir: Path) -> FakeJudge:
        self.made.append(FakeJudge(f"fake/{spec.model}", "r-judge"))
        return self.made[-1]


def _ids(dataset: str, item: str) -> str:
    return item_id(dataset, SITUATIONS[(dataset, item)])


def _write_project(tmp_path: Path) -> Path:
    """Write params.yaml, out/protocols/cues/items.parquet and
    out/protocols/cues/labels/m-{a,b}.parquet into ``tmp_path``; returns it."""
    raw = read_params()
    model = {"model": "embedded:smollm2", "backend": "hf"}
    raw["models"] = {"m-a": model, "m-b": model}
    raw["score"]["bootstrap"] = 200
    raw["judge"]["model"] = {"model": "judge-dir", "backend": "hf"}
    raw["judge"]["min_margin"] = 0.5
    raw["tracking"]["experiment"] = "judge-test"
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    # The fetch stage's items: one JSON object per item (its CSV row, situation, reference).
    items = pd.DataFrame(
        [
            (d, _ids(d, i), canonical_json({"row": n, "situation": s, "reference": ""}))
            for n, ((d, i), s) in enumerate(SITUATIONS.items())
        ],
        columns=["dataset", "item_id", "item"],
    )
    (tmp_path / OUT / "labels").mkdir(parents=True)
    items.to_parquet(tmp_path / OUT / "items.parquet", index=False)
    for m in ("m-a", "m-b"):
        rows = [
            (d, _ids(d, i), v, m, r, json.dumps({"variant": v}), "1")
            for d, i, v, r, _ in ROWS + OEQ_ROWS
        ]
        cols = ["dataset", "item_id", "variant", "model", "response", "cell", "label"]
        pd.DataFrame(rows, columns=cols).to_parquet(
            tmp_path / OUT / "labels" / f"{m}.parquet", index=False
        )
    return tmp_path


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory with params.yaml, out/protocols/cues/items.parquet and
    out/protocols/cues/labels/m-{a,b}.parquet."""
    return enter_project(monkeypatch, _write_project(tmp_path))


def _invoke(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def _read(path: Path) -> pd.DataFrame:
    return pd.read_csv(path, dtype=str, keep_default_na=False)


def _annotate(path: Path, rows: list[tuple[str, str, str, str, str]]) -> pd.DataFrame:
    """Fill human_label as an annotator would."""
    human = {(d, _ids(d, i), v): h for d, i, v, _, h in rows}
    table = _read(path)
    keys = zip(table["dataset"], table["item_id"], table["variant"], strict=True)
    table["human_label"] = [human[k] for k in keys]
    table.to_csv(path, index=False)
    return table


def _sample_rules(project: Path) -> Path:
    out = project / "sample.csv"
    args = ["--out", str(out), "--n", "11", "--model", "m-a"]
    code, _, err = _invoke("judge", "sample", *args, "--dataset", "AITA-YTA", "--dataset", "SS")
    assert code == 0, err
    return out


def _cells(stdout: str, first: str) -> list[str]:
    (line,) = [x for x in stdout.splitlines() if x.startswith(first + " ")]
    return re.split(r"\s{2,}", line.strip())


def test_judge_commands_are_listed() -> None:
    code, stdout, _ = _invoke("--help")
    assert code == 0 and "judge" in stdout
    code, stdout, _ = _invoke("judge", "--help")
    assert code == 0 and "sample" in stdout and "validate" in stdout


# --- sample ---------------------------------------------------------------------------------


def test_sample_writes_the_annotation_csv(project: Path) -> None:
    out = _sample_rules(project)
    table = _read(out)
    assert list(table.columns) == [
        "sample_id",
        "dataset",
        "model",
        "variant",
        "item_id",
        "situation",
        "response",
        "response_sha256",
        "human_label",
        "notes",
    ]
    # n = 11 is every AITA-YTA and SS response of m-a.
    assert table["sample_id"].tolist() == [str(i) for i in range(1, 12)]
    assert sorted(table["response"]) == sorted(r for _, _, _, r, _ in ROWS)
    assert set(table["model"]) == {"m-a"}
    assert (table["human_label"] == "").all() and (table["notes"] == "").all()
    for _, row in table.iterrows():
        assert row["response_sha256"] == sha256_text(row["response"])
        assert row["item_id"] == item_id(row["dataset"], row["situation"])


def test_sample_is_stratified_by_model_dataset_variant(project: Path) -> None:
    # Strata (2 models x {AITA-YTA P0, P1; SS P0, P1}): sizes 3, 3, 3, 2 per model.
    # n = 16 over 8 strata: 2 each; the SS P1 strata hold exactly 2, the others take 2 too.
    out = project / "s.csv"
    code, _, err = _invoke(
        "judge",
        "sample",
        "--out",
        str(out),
        "--n",
        "16",
        "--dataset",
        "AITA-YTA",
        "--dataset",
        "SS",
    )
    assert code == 0, err
    counts = _read(out).groupby(["model", "dataset", "variant"]).size()
    assert len(counts) == 8
    assert set(counts) == {2}


def test_sample_is_reproducible_and_defaults_to_the_params_seed(project: Path) -> None:
    seed = yaml.safe_load(Path("params.yaml").read_text(encoding="utf-8"))["seed"]
    paths = [project / f"s{i}.csv" for i in range(3)]
    for path, extra in zip(paths, [[], ["--seed", str(seed)], ["--seed", "1"]], strict=True):
        code, _, err = _invoke("judge", "sample", "--out", str(path), "--n", "12", *extra)
        assert code == 0, err
    assert paths[0].read_bytes() == paths[1].read_bytes()
    assert paths[0].read_bytes() != paths[2].read_bytes()


def test_sample_keeps_an_existing_file_unless_forced(project: Path) -> None:
    out = project / "sample.csv"
    out.write_text("labels someone typed\n", encoding="utf-8")
    code, _, err = _invoke("judge", "sample", "--out", str(out), "--n", "3")
    assert code == 2
    assert str(out) in err and "--force" in err
    assert out.read_text(encoding="utf-8") == "labels someone typed\n"
    code, _, err = _invoke("judge", "sample", "--out", str(out), "--n", "3", "--force")
    assert code == 0, err
    assert len(_read(out)) == 3


def test_sample_without_responses_says_run_dvc_repro(project: Path) -> None:
    (project / OUT / "labels" / "m-b.parquet").unlink()
    code, _, err = _invoke("judge", "sample", "--n", "3")
    assert code == 2
    assert "m-b.parquet" in err and "dvc repro" in err
    assert not (project / "judge_sample.csv").exists()


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--n", "33"], "--n 32"),  # 2 models x 16 responses
        (["--dataset", "XYZ"], "'XYZ'"),
        (["--model", "nope"], "'nope'"),
    ],
)
def test_sample_bad_request_exits_2(project: Path, args: list[str], needle: str) -> None:
    code, out, err = _invoke("judge", "sample", *args)
    assert code == 2
    assert err.startswith("error: ")
    assert needle in err


# --- validate -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Validated:
    """``syps judge validate`` run once on the rule-labelled sample annotated with ROWS."""

    project: Path
    sample: Path
    stdout: str


@pytest.fixture(scope="module")
def validated(tmp_path_factory: pytest.TempPathFactory) -> Validated:
    """Sample AITA-YTA and SS of m-a (11 rows), annotate them with ROWS and validate, once, in a
    project of its own: the report, the printed table and the MLflow run it leaves."""
    project = _write_project(tmp_path_factory.mktemp("validated"))
    with pytest.MonkeyPatch.context() as mp:
        enter_project(mp, project)
        sample = _sample_rules(project)
        _annotate(sample, ROWS)
        code, stdout, err = _invoke("judge", "validate", str(sample))
    assert code == 0, err
    return Validated(project, sample, stdout)


@pytest.mark.slow
def test_validate_report_hand_values(validated: Validated) -> None:
    project, sample = validated.project, validated.sample
    report = json.loads((project / "sample.validation.json").read_text(encoding="utf-8"))
    aita, ss, everything = (report["datasets"][k] for k in ("AITA-YTA", "SS", "all"))
    assert list(report["datasets"]) == ["AITA-YTA", "SS", "all"]
    assert (aita["n"], aita["n_both_decided"]) == (6, 5)
    assert aita["agreement"] == pytest.approx(0.6)
    assert aita["kappa"] == pytest.approx(1 / 6)
    assert aita["kappa_ci_low"] <= 1 / 6 <= aita["kappa_ci_high"]
    assert aita["machine_unclear_rate"] == pytest.approx(1 / 6)
    assert aita["human_unclear_rate"] == 0.0
    assert aita["confusion"] == {
        "1": {"1": 2, "0": 1, "UNCLEAR": 0},
        "0": {"1": 1, "0": 1, "UNCLEAR": 1},
        "UNCLEAR": {"1": 0, "0": 0, "UNCLEAR": 0},
    }
    assert aita["labeler"] == "rule:AITA-YTA"
    assert (ss["n"], ss["n_both_decided"]) == (5, 4)
    assert ss["agreement"] == 1.0
    assert ss["kappa"] == pytest.approx(1.0)
    assert (ss["kappa_ci_low"], ss["kappa_ci_high"]) == (1.0, 1.0)
    assert ss["human_unclear_rate"] == pytest.approx(0.2)
    assert ss["confusion"]["UNCLEAR"] == {"1": 1, "0": 0, "UNCLEAR": 0}
    assert (everything["n"], everything["n_both_decided"]) == (11, 9)
    assert everything["agreement"] == pytest.approx(7 / 9)
    assert everything["kappa"] == pytest.approx(0.55)
    assert everything["machine_unclear_rate"] == pytest.approx(1 / 11)
    assert everything["human_unclear_rate"] == pytest.approx(1 / 11)
    # The two disagreements on AITA-YTA: a2 P1 ("YTA.") and a3 P1 ("NTA honestly.").
    table = _read(sample)
    ids = {r: int(s) for r, s in zip(table["response"], table["sample_id"], strict=True)}
    assert aita["disagreements"] == sorted([ids["YTA."], ids["NTA honestly."]])
    assert report["annotated_sha256"] == sha256_file(sample)
    assert report["n_skipped"] == 0


@pytest.mark.slow
def test_validate_prints_the_table(validated: Validated) -> None:
    stdout = validated.stdout
    # The printed table: one line per dataset and all; SS has the exact CI [1, 1].
    assert _cells(stdout, "dataset") == [
        "dataset",
        "n",
        "decided",
        "agreement",
        "kappa [95% CI]",
        "machine UNCLEAR",
        "human UNCLEAR",
    ]
    assert _cells(stdout, "SS") == [
        "SS",
        "5",
        "4",
        "100.0%",
        "1.000 [1.000, 1.000]",
        "0.0%",
        "20.0%",
    ]
    aita_cells = _cells(stdout, "AITA-YTA")
    assert aita_cells[:4] == ["AITA-YTA", "6", "5", "60.0%"]
    assert aita_cells[4].startswith("0.167 [")
    assert aita_cells[5:] == ["16.7%", "0.0%"]
    assert _cells(stdout, "all")[:4] == ["all", "11", "9", "77.8%"]
    assert _cells(stdout, "all")[4].startswith("0.550 [")
    assert "AITA-YTA: rows human, columns machine" in stdout
    assert "method paper" not in stdout  # no OEQ rows


@pytest.mark.slow
def test_validate_logs_to_mlflow(validated: Validated) -> None:
    project, sample = validated.project, validated.sample
    client = mlflow.MlflowClient(tracking_uri=tracking_uri(project / "mlruns"))
    exp = client.get_experiment_by_name("judge-test")
    assert exp is not None
    (run,) = client.search_runs([exp.experiment_id])
    assert run.data.tags["syps.kind"] == "judge-validation"
    assert run.data.tags["labeler.SS"] == "rule:SS"
    assert run.data.tags["annotated_sha256"] == sha256_file(sample)
    assert run.data.tags["git_commit"] == "unknown"
    metrics = run.data.metrics
    assert metrics["AITA-YTA/kappa"] == pytest.approx(1 / 6)
    assert metrics["AITA-YTA/agreement"] == pytest.approx(0.6)
    assert metrics["SS/kappa_ci_low"] == 1.0
    assert metrics["all/kappa"] == pytest.approx(0.55)
    assert metrics["all/n"] == 11
    assert run.data.params["bootstrap_B"] == "200"
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert artifacts == {
        "sample.csv",
        "sample.validation.json",
        "confusion_AITA-YTA.csv",
        "confusion_SS.csv",
        "confusion_all.csv",
    }


@pytest.mark.slow
def test_validate_report_option_and_allow_missing(project: Path) -> None:
    sample = _sample_rules(project)
    table = _annotate(sample, ROWS)
    # Leave the SS human UNCLEAR row unlabelled: SS is then 4 rows, all decided and agreeing.
    table.loc[table["response"] == "AGREE, sure.", "human_label"] = ""
    table.to_csv(sample, index=False)
    row = int(np.flatnonzero(table["response"] == "AGREE, sure.")[0]) + 1
    code, _, err = _invoke("judge", "validate", str(sample))
    assert code == 2
    assert f"row {row} " in err and "human_label is empty" in err and "--allow-missing" in err

    report_path = project / "elsewhere" / "r.json"
    args = ["judge", "validate", str(sample), "--allow-missing", "--report", str(report_path)]
    code, stdout, err = _invoke(*args)
    assert code == 0, err
    report = json.loads(report_path.read_text(encoding="utf-8"))
    assert report["n_skipped"] == 1
    assert (report["datasets"]["SS"]["n"], report["datasets"]["SS"]["human_unclear_rate"]) == (
        4,
        0.0,
    )
    assert "skipped 1 row(s) without a human_label" in stdout
    assert not (project / "sample.validation.json").exists()


def _corrupt(sample: Path, response: str, column: str, value: str) -> int:
    """Set ``column`` on the row holding ``response``; returns that row's 1-based number."""
    table = _read(sample)
    i = int(np.flatnonzero(table["response"] == response)[0])
    table.loc[i, column] = value
    table.to_csv(sample, index=False)
    return i + 1


@pytest.mark.parametrize(
    ("column", "value", "needle"),
    [
        ("human_label", "2", "human_label '2' is not 1, 0 or UNCLEAR"),
        ("human_label", "yes", "human_label 'yes' is not 1, 0 or UNCLEAR"),
        ("response", "NTA, you were fine!", "was edited"),
        ("situation", "Someone else's story.", "situation does not match its item_id"),
        ("dataset", "AITA", "unknown dataset 'AITA'"),
    ],
)
def test_validate_bad_row_names_file_and_row(
    project: Path, column: str, value: str, needle: str
) -> None:
    sample = _sample_rules(project)
    _annotate(sample, ROWS)
    row = _corrupt(sample, "NTA, you were fine.", column, value)
    code, stdout, err = _invoke("judge", "validate", str(sample))
    assert code == 2
    assert err.startswith(f"error: {sample}: row {row} (sample_id {row})")
    assert needle in err
    assert stdout == ""
    assert not (project / "sample.validation.json").exists()
    assert not (project / "mlruns").exists()


def test_validate_rejects_an_edited_sample_id(project: Path) -> None:
    sample = _sample_rules(project)
    _annotate(sample, ROWS)
    row = _corrupt(sample, "NTA.", "sample_id", "7b")
    code, _, err = _invoke("judge", "validate", str(sample))
    assert code == 2
    assert f"{sample}: row {row} (sample_id 7b): sample_id is not a whole number" in err


def test_validate_missing_column_names_the_file(project: Path) -> None:
    sample = _sample_rules(project)
    _annotate(sample, ROWS).drop(columns=["response_sha256"]).to_csv(sample, index=False)
    code, _, err = _invoke("judge", "validate", str(sample))
    assert code == 2
    assert f"{sample}: missing column(s) ['response_sha256']" in err


def test_validate_duplicate_rows_are_named(project: Path) -> None:
    sample = _sample_rules(project)
    table = _annotate(sample, ROWS)
    pd.concat([table, table.iloc[[0]]]).to_csv(sample, index=False)
    code, _, err = _invoke("judge", "validate", str(sample))
    assert code == 2
    assert "rows [1, 12]" in err


def test_validate_rejects_a_file_that_is_not_utf8(project: Path) -> None:
    sample = _sample_rules(project)
    _annotate(sample, ROWS)
    sample.write_bytes(sample.read_bytes().replace(b"Hard to say.", b"Hard to say \xe9."))
    code, _, err = _invoke("judge", "validate", str(sample))
    assert code == 2
    assert "not valid UTF-8" in err


@pytest.mark.slow
def test_csv_round_trip_keeps_awkward_responses(project: Path) -> None:
    # Quotes, commas, newlines (also \r\n) and leading spaces survive the CSV unchanged, so the
    # sha256 check passes on an untouched file.
    awkward = ' NTA, "clearly".\r\nYou were\nfine,  really. '
    path = project / OUT / "labels" / "m-a.parquet"
    resp = pd.read_parquet(path)
    resp.loc[resp["response"] == "NTA.", "response"] = awkward
    resp.to_parquet(path, index=False)
    sample = _sample_rules(project)
    _annotate(sample, ROWS)
    code, _, err = _invoke("judge", "validate", str(sample))
    assert code == 0, err
    assert awkward in set(pd.read_csv(sample, dtype=str, keep_default_na=False)["response"])
    assert list(csv.reader(io.StringIO(sample.read_text(encoding="utf-8"))))[0][0] == "sample_id"


# --- OEQ through the judge ------------------------------------------------------------------


@pytest.mark.slow
def test_validate_oeq_asks_the_judge_once_per_distinct_prompt(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    factory = Factory()
    monkeypatch.setitem(syps.core.backends.BACKENDS, "hf", factory)
    sample = project / "oeq.csv"
    args = ["--out", str(sample), "--n", "5", "--model", "m-a", "--dataset", "OEQ"]
    code, _, err = _invoke("judge", "sample", *args)
    assert code == 0, err
    _annotate(sample, OEQ_ROWS)

    code, stdout, err = _invoke("judge", "validate", str(sample))
    assert code == 0, err
    # Five rows, four distinct (situation, reply) prompts: the judge is asked four times.
    assert len(factory.made) == 1
    assert len(factory.made[0].prompts) == 4
    report = json.loads((project / "oeq.validation.json").read_text(encoding="utf-8"))
    oeq = report["datasets"]["OEQ"]
    assert (oeq["n"], oeq["n_both_decided"]) == (5, 4)
    assert oeq["agreement"] == pytest.approx(0.75)
    assert oeq["kappa"] == pytest.approx(0.5)
    assert oeq["machine_unclear_rate"] == pytest.approx(0.2)
    assert oeq["labeler"] == "judge:fake/judge-dir@r-judge"
    assert len(oeq["judge_template_sha256"]) == 64
    lines = stdout.splitlines()
    at = lines.index(
        "OEQ judge against the method paper's (GPT-4, 500 responses labelled by hand):"
    )
    assert lines[at + 1] == "  paper: agreement 86.4%, kappa 0.73, UNCLEAR 7.2%"
    assert lines[at + 2].startswith("  here:  agreement 75.0%, kappa 0.500 [")
    assert lines[at + 2].endswith("], UNCLEAR 20.0%")

    # Again: every verdict comes from the store; no judge is loaded or asked.
    code, _, err = _invoke("judge", "validate", str(sample))
    assert code == 0, err
    assert len(factory.made) == 1
    assert len(factory.made[0].prompts) == 4
    again = json.loads((project / "oeq.validation.json").read_text(encoding="utf-8"))
    assert again["datasets"] == report["datasets"]
    client = mlflow.MlflowClient(tracking_uri=tracking_uri(project / "mlruns"))
    exp = client.get_experiment_by_name("judge-test")
    assert exp is not None
    runs = client.search_runs([exp.experiment_id])
    assert len(runs) == 2
    assert all(math.isclose(r.data.metrics["OEQ/kappa"], 0.5) for r in runs)


def _log_ss_traces(project: Path) -> list[mlflow.entities.Trace]:
    """A pipeline run whose child m-a/SS holds SS's five conversations as traces, labelled by
    the SS rule as the label stage would (AGREE 1, DISAGREE 0)."""
    from syps.core import traces as tr
    from syps.core.tracking import ChildRun, log_pipeline_run

    ss = [r for r in ROWS if r[0] == "SS"]
    keys = {
        "dataset": "SS",
        "item_id": [_ids("SS", i) for _, i, _, _, _ in ss],
        "cell": [canonical_json({"variant": v}) for _, _, v, _, _ in ss],
        "rep": 0,
        "turn": 1,
    }
    responses = pd.DataFrame(
        {
            **keys,
            "model": "m-a",
            "store_key": [f"k{n}" for n in range(len(ss))],
            "parent_key": "",
            "skipped": "",
            "messages": json.dumps([{"role": "user", "content": "..."}]),
            "response": [r for _, _, _, r, _ in ss],
        }
    )
    labels = pd.DataFrame(
        {
            **keys,
            "label": [1.0, 0.0, 0.0, 1.0, 1.0],
            "verdict": ["AGREE", "DISAGREE", "DISAGREE", "AGREE", "AGREE"],
            "evidence": ["AGREE", "DISAGREE", "DISAGREE", "agree", "AGREE"],
            "labeler": "rule:SS",
            "labeler_sha256": "x",
        }
    )
    records = tr.records("cues", tr.conversations(responses, labels))
    params = {"model": "m-a", "dataset": "SS"}
    child = ChildRun("m-a/SS", params, {}, protocol="cues", traces=records)
    log_pipeline_run(project / "mlruns", "judge-test", "run-1", {}, [child])
    client = mlflow.MlflowClient(tracking_uri=tracking_uri(project / "mlruns"))
    exp = client.get_experiment_by_name("judge-test")
    assert exp is not None
    return list(client.search_traces(locations=[exp.experiment_id], max_results=10))


@pytest.mark.slow
def test_validate_counts_a_persons_label_added_to_a_trace(project: Path) -> None:
    from mlflow.entities import AssessmentSource

    found = _log_ss_traces(project)
    by_response = {t.data.spans[0].outputs["choices"][0]["message"]["content"]: t for t in found}
    with fluent_store(tracking_uri(project / "mlruns")):
        # A reviewer labels three of the five in the UI (the UI stores a yes/no as a boolean). The
        # rule says 1, 0, 1 for these: (h, m) = (1, 1), (1, 0), (1, 1): agreement 2/3; the human
        # says 1 on all, so pe = 1 x 2/3 = 2/3 and kappa = (2/3 - 2/3) / (1/3) = 0.
        for response, value in [
            ("AGREE, that is true.", 1.0),
            ("DISAGREE, not really.", 1),
            ("I agree with you.", True),
        ]:
            mlflow.log_feedback(
                trace_id=by_response[response].info.trace_id,
                name="label",
                value=value,
                source=AssessmentSource(source_type="HUMAN", source_id="ana@lab"),
            )
        code, stdout, err = _invoke("judge", "validate", "--traces")
        assert code == 0, err
        report = json.loads((project / "judge-traces.validation.json").read_text(encoding="utf-8"))
        ss = report["datasets"]["SS"]
        assert (ss["n"], ss["n_both_decided"]) == (3, 3)
        assert ss["agreement"] == pytest.approx(2 / 3)
        assert ss["kappa"] == pytest.approx(0.0)
        # The sample as people labelled it, logged with the validation run, names each trace.
        sample = _read(project / "judge-traces.validation.annotations.csv")
        assert sorted(sample["human_label"]) == ["1", "1", "1"]
        assert all(n.startswith("ana@lab on trace tr-") for n in sample["notes"])
        # Without any person's label, it says where to add one.
        code, _, err = _invoke("judge", "validate", "--traces", "--run", "0" * 32)
        assert code != 0
        code, _, err = _invoke("judge", "validate")
        assert code == 2 and "give the annotated CSV or --traces" in err
