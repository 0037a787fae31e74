"""End to end: `dvc repro` in a fresh copy of the repository, on the real embedded model.

A tiny config (two items per dataset, a few new tokens, a small bootstrap; the other
protocols at their smallest) keeps it near a minute or two on two CPU cores. The assertions read
SyPS's (protocol cues) artefacts under out/protocols/cues/, metrics/cues.json, plots/cues/ and
the MLflow store it produced.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import GIT_IDENTITY, OneRun, copy_run
from test_dvc_deps import SCREEN, dvc_metric_keys

from syps.core.runlayout import child_metrics
from syps.core.runs import RUN_LOG_COUNTS
from syps.protocols import PROTOCOLS
from syps.protocols.cues.metrics import metric_names
from syps.protocols.cues.params import VARIANTS

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow
CUES = Path("out/protocols/cues")
MODEL = "smollm2-135m"  # the tiny params' one model


def _run(cmd: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def project(one_run: OneRun) -> tuple[Path, dict[str, str]]:
    """The slow tier's one run (conftest.one_run): a git copy of the tracked files with the tiny
    params, after one repro. Read only; test_rerun_is_a_no_op_then_a_cue_edit_reruns edits a
    copy."""
    return one_run.root, one_run.env


def _mlflow_runs(root: Path) -> list:  # type: ignore[type-arg]
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{root / 'mlruns' / 'mlflow.db'}")
    exp = client.get_experiment_by_name("syps")
    assert exp is not None
    return list(client.search_runs([exp.experiment_id], max_results=1000))


def _responses(root: Path) -> pd.DataFrame:
    """SyPS's responses of the one model."""
    return pd.read_parquet(root / CUES / f"responses/{MODEL}.parquet")


def _labels(root: Path) -> pd.DataFrame:
    """SyPS's labels of the one model, in response order."""
    return pd.read_parquet(root / CUES / f"labels/{MODEL}.parquet")


def test_summary_lists_every_dataset(project: tuple[Path, dict[str, str]]) -> None:
    root, env = project
    # The summary table of SyPS's metrics: one row per dataset for the one model.
    summary = _run([sys.executable, "-m", "syps.cli", "summary", "metrics/cues.json"], root, env)
    assert summary.returncode == 0, summary.stderr
    assert "BaseSyc [95% CI]" in summary.stdout and "SPSS [95% CI]" in summary.stdout
    for ds in ("OEQ", "AITA-YTA", "SS"):
        assert f"smollm2-135m  {ds}" in summary.stdout


def test_items(project: tuple[Path, dict[str, str]]) -> None:
    root, _ = project
    items = pd.read_parquet(root / CUES / "items.parquet")
    assert list(items.columns) == ["dataset", "item_id", "item"]
    assert items.groupby("dataset").size().to_dict() == {"OEQ": 2, "AITA-YTA": 2, "SS": 2}
    aita = items.loc[items["dataset"] == "AITA-YTA", "item"]
    assert {json.loads(x)["reference"] for x in aita} == {"YTA"}


def test_responses(project: tuple[Path, dict[str, str]]) -> None:
    root, _ = project
    resp = _responses(root)
    assert len(resp) == 6 * 8  # six items, eight variants each, one turn, one repetition
    assert set(resp["protocol"]) == {"cues"} and set(resp["turn"]) == {1}
    assert resp.groupby(["dataset", "item_id"])["cell"].nunique().eq(8).all()
    assert (resp["skipped"] == "").all() and resp["store_key"].str.len().eq(64).all()
    assert set(resp["model_id"]) == {"SmolLM2-135M-Instruct"}
    (revision,) = set(resp["revision"])
    assert revision.startswith("sha256:") and len(revision) == len("sha256:") + 64
    assert set(resp["finish_reason"]) <= {"stop", "length"}
    assert (resp["completion_tokens"] <= 6).all() and (resp["prompt_tokens"] > 20).all()


def test_labels(project: tuple[Path, dict[str, str]]) -> None:
    root, _ = project
    labels = _labels(root)
    assert len(labels) == 48
    assert list(labels["response"]) == list(_responses(root)["response"])  # in response order
    # UNCLEAR is missing, never 0; every row carries its verdict and evidence.
    unclear = labels["verdict"] == "UNCLEAR"
    assert labels.loc[unclear, "label"].isna().all()
    assert labels.loc[~unclear, "label"].isin([0.0, 1.0]).all()
    oeq = labels[labels["dataset"] == "OEQ"]
    assert oeq["labeler"].str.startswith("judge:SmolLM2-135M-Instruct@sha256:").all()
    # The judge's evidence: its option log-probabilities, then its raw first answer.
    assert oeq["evidence"].str.contains("; raw: ", regex=False).all()
    evidence = [json.loads(e.split("; raw: ", 1)[0]) for e in oeq["evidence"]]
    assert all(set(e) == {"YES", "NO"} for e in evidence)


def test_metrics_agree_with_the_labels(project: tuple[Path, dict[str, str]]) -> None:
    root, _ = project
    labels = _labels(root)
    metrics = json.loads((root / "metrics/cues.json").read_text())
    assert set(metrics) == {"smollm2-135m"}
    assert set(metrics["smollm2-135m"]) == {"OEQ", "AITA-YTA", "SS"}
    for ds, ms in metrics["smollm2-135m"].items():
        assert set(ms) == set(metric_names())
        # n_items: of the two items, those with at least one decided label.
        decided = labels[labels["dataset"] == ds].groupby("item_id")["label"].count()
        assert ms["n_items"] == int((decided > 0).sum())

    # The metrics agree with the labels they came from (P0 rate over labelled OEQ items).
    # With judge.min_margin 0 the judge always decides, so both items have a P0 label.
    oeq = labels[labels["dataset"] == "OEQ"]
    p0 = oeq.loc[oeq["variant"] == "P0", "label"]
    assert p0.notna().sum() == 2
    assert metrics["smollm2-135m"]["OEQ"]["base_syc"] == pytest.approx(p0.mean())


def test_plot_data_and_figures(project: tuple[Path, dict[str, str]]) -> None:
    root, _ = project
    # Plot data are committed beside the metrics, not under the gitignored out/.
    profile = pd.DataFrame(json.loads((root / "plots/cues/profile.json").read_text()))
    assert len(profile) == 3 * len(VARIANTS)
    assert (root / "plots/cues/templates.json").is_file()
    # The PNGs alone in png/ (the dvc plots page shows that folder), the flip tables beside.
    assert sorted(p.name for p in (root / CUES / "figures").iterdir()) == ["png", "tables"]
    assert sorted(p.name for p in (root / CUES / "figures/tables").iterdir()) == ["flips"]
    assert sorted(p.name for p in (root / CUES / "figures/png").iterdir()) == [
        "forest.png",
        "heatmap_AITA-YTA.png",
        "heatmap_OEQ.png",
        "heatmap_SS.png",
        "scatter.png",
        "size.png",
        "smollm2-135m__AITA-YTA.png",
        "smollm2-135m__OEQ.png",
        "smollm2-135m__SS.png",
    ]


def test_lint_found_the_templates_clean(project: tuple[Path, dict[str, str]]) -> None:
    root, _ = project
    # The lint (the variants stage) ran before generate and found the repo's templates clean.
    lint = json.loads((root / CUES / "lint.json").read_text())
    assert (lint["ok"], lint["violations"]) == (True, [])


def test_flip_tables(project: tuple[Path, dict[str, str]]) -> None:
    root, _ = project
    # Flip tables: a CSV and an HTML page per (model, dataset, cue), and an index.
    flips = root / CUES / "figures/tables/flips"
    assert (flips / "index.html").exists()
    assert len(list(flips.glob("smollm2-135m/*/*.csv"))) == 3 * 7


def test_every_protocol_wrote_its_metrics(project: tuple[Path, dict[str, str]]) -> None:
    root, _ = project
    # Every protocol ran: one metrics file each, and one of its headline metrics each.
    files = ["adaptive.json", "betting.json", "cues.json", "discernment.json", "pushback.json"]
    assert sorted(p.name for p in (root / "metrics").iterdir()) == [*files, "summary"]
    assert sorted(p.name for p in (root / "metrics" / "summary").iterdir()) == files


def test_mlflow_runs(project: tuple[Path, dict[str, str]]) -> None:
    root, _ = project
    runs = _mlflow_runs(root)
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    every_child = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    # One child per (protocol, model, dataset): SyPS's three datasets, and one dataset each of
    # pushback, discernment, betting and adaptive.
    assert {r.info.run_name for r in every_child} == {
        "smollm2-135m/OEQ",
        "smollm2-135m/AITA-YTA",
        "smollm2-135m/SS",
        "pushback/smollm2-135m/builtin-mcq",
        "discernment/smollm2-135m/builtin",
        "betting/smollm2-135m/truthfulqa",
        "adaptive/smollm2-135m/truthfulqa",
    }
    assert len(parents) == 1 and len(every_child) == 7
    children = [r for r in every_child if r.data.tags["syps.protocol"] == "cues"]
    parent = parents[0]
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True
    ).stdout.strip()
    # The short sha, no dirty marker, the hash of the params and templates that ran.
    assert parent.info.run_name == f"{head[:7]}-{parent.data.tags['syps.config_sha256'][:8]}"
    assert parent.data.tags["git_commit"] == head
    assert parent.data.tags["git_dirty"] == "false"
    data_md5 = yaml.safe_load((root / "data.dvc").read_text())["outs"][0]["md5"]
    assert parent.data.tags["data_md5"] == data_md5
    assert len([t for t in parent.data.tags if t.startswith("template_sha256.")]) == 3 * 8

    import mlflow

    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{root / 'mlruns' / 'mlflow.db'}")
    keys = {frozenset(child_metrics(client, r)) for r in children}
    # Every SyPS child's metrics table has the same keys: the metrics, what generate and label
    # did, and the tokens generate sent and received (no price is set: no cost).
    run_log = {n for names in RUN_LOG_COUNTS.values() for n in names}
    tokens = {"tokens_sent", "tokens_received", "tokens_sent_served", "tokens_received_served"}
    assert keys == {frozenset(metric_names()) | run_log | tokens}
    # Its MLflow metrics are the ones people compare, 59 by hand: BaseSyc, SPSS and the signed
    # sensitivity each with its CI, support and low-support flag (15), the UNCLEAR share and
    # the items (2), the rate per variant (8), each cue's delta with CI and support (7 x 4),
    # and the six counts of what the stages did.
    five = ("", "_ci_low", "_ci_high", "_n", "_low_support")
    expected = {f"{m}{s}" for m in ("base_syc", "spss", "signed_sensitivity") for s in five}
    expected |= {"unclear_rate", "n_items", *(f"syc_rate_P{v}" for v in range(8)), *run_log}
    expected |= {f"delta_P{v}{s}" for v in range(1, 8) for s in ("", "_ci_low", "_ci_high", "_n")}
    assert len(expected) == 59
    assert {frozenset(r.data.metrics) for r in children} == {frozenset(expected)}
    for r in every_child:
        assert len(r.data.metrics) <= 60, r.info.run_name
        # Each child's tags are its own protocol's: SyPS's template hashes on SyPS's only.
        own = r.data.tags["syps.protocol"]
        assert f"protocol.{own}.params" in r.data.tags
        others = [t for t in r.data.tags if t.startswith("protocol.") and f".{own}." not in t]
        assert others == [], r.info.run_name
        hashes = [t for t in r.data.tags if t.startswith("template_sha256.")]
        assert len(hashes) == (3 * 8 if own == "cues" else 0), r.info.run_name
    # The parent's description: the params ran as committed.
    assert parent.data.tags["mlflow.note.content"] == "params.yaml as committed."
    assert {r.data.params["dataset"] for r in children} == {"OEQ", "AITA-YTA", "SS"}
    for r in children:
        assert r.data.tags["mlflow.parentRunId"] == parent.info.run_id
        assert r.data.params["model"] == "smollm2-135m"
        assert r.data.params["revision"].startswith("sha256:")
        assert r.data.params["bootstrap_B"] == "200"
        assert r.data.params["max_new_tokens"] == "6"
        arts = [
            a.path
            for a in __import__("mlflow")
            .MlflowClient(tracking_uri=f"sqlite:///{root / 'mlruns' / 'mlflow.db'}")
            .list_artifacts(r.info.run_id)
        ]
        png = f"smollm2-135m__{r.data.params['dataset']}.png"
        assert arts == ["flips", "metrics_table.json", png, "traces.csv"]


def test_compare_fits_160_columns(project: tuple[Path, dict[str, str]]) -> None:
    root, env = project
    shown = _run(["syps", "compare"], root, {**env, "COLUMNS": "160"})
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert max(map(len, lines)) <= 160
    # One table per protocol, each under its name, with its own headline columns.
    for protocol in ("cues", "pushback", "discernment", "betting"):
        assert f"{protocol}:" in lines
    # Every cell holds a number: no column of another protocol's metric, all "-".
    assert not [x for x in lines if "-" in x.split()]


# The first look at the DVC metrics the README gives: the headline numbers (the declared
# metrics, metrics/summary/<p>.json), one a line.
FIRST_LOOK = "dvc metrics diff --all"


def _dvc_metric_keys(root: Path, path: str) -> set[str]:
    return dvc_metric_keys(json.loads((root / path).read_text(encoding="utf-8")))


def test_the_first_look_at_dvc_metrics_fits_200_columns(
    project: tuple[Path, dict[str, str]],
) -> None:
    root, env = project
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert re.search(rf"^{re.escape(FIRST_LOOK)}\s+#", readme, flags=re.M), FIRST_LOOK
    shown = _run(FIRST_LOOK.split(), root, env)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert max(map(len, lines)) <= SCREEN, max(lines, key=len)
    # Every protocol's headline numbers, with their CIs, per model and dataset (SyPS's BaseSyc
    # on SS among them), and no number of a full file.
    rows = {tuple(x.split()[:2]) for x in lines[1:]}
    headline = [f"metrics/summary/{p}.json" for p in PROTOCOLS]
    assert {path for path, _ in rows} == set(headline)
    assert {(path, k) for path in headline for k in _dvc_metric_keys(root, path)} <= rows
    assert ("metrics/summary/cues.json", "smollm2-135m.SS.base_syc_ci_low") in rows


def test_dvc_metrics_and_plots_show(project: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    root, env = project
    # By default DVC reads the declared metrics, the headline files; a full file, a plain
    # output, when it is named: every number of it.
    shown = _run(["dvc", "metrics", "show", "--json"], root, env)
    assert shown.returncode == 0, shown.stderr
    assert set(json.loads(shown.stdout)[""]["data"]) == {
        f"metrics/summary/{p}.json" for p in PROTOCOLS
    }
    full = [f"metrics/{p}.json" for p in PROTOCOLS]
    named = _run(["dvc", "metrics", "show", "--json", *full], root, env)
    assert named.returncode == 0, named.stderr
    data = json.loads(named.stdout)[""]["data"]
    assert {path: dvc_metric_keys(d["data"]) for path, d in data.items()} == {
        path: _dvc_metric_keys(root, path) for path in full
    }
    assert "smollm2-135m.SS.delta_P3_n" in dvc_metric_keys(data["metrics/cues.json"]["data"])
    plots = _run(["dvc", "plots", "show", "-o", str(tmp_path / "plots_html")], root, env)
    assert plots.returncode == 0, plots.stderr
    html = (tmp_path / "plots_html" / "index.html").read_text()
    assert "syc_rate" in html
    # Offline: no script from the network (the libraries are inlined by .dvc/vega/page.html).
    assert re.findall(r"<script\b[^>]*\bsrc=", html) == []
    # Every protocol's PNGs are on the page, once each: SyPS's 9 (forest, scatter, size, a
    # heatmap and a profile per dataset), pushback's 2, discernment's 8 (the response plane, the
    # k sweep, the argument bars, lower vs raise, the threshold changes (B3), the magnitude plane
    # (B5), and per (model, dataset) the initial scoring and revision against sigma0), betting's 2,
    # adaptive's survival curve.
    shown_pngs = re.findall(r'<img src="static/workspace_out_protocols_([a-z]+)_figures_png_', html)
    assert Counter(shown_pngs) == {
        "cues": 9,
        "pushback": 2,
        "discernment": 8,
        "betting": 2,
        "adaptive": 1,
    }
    pngs = {
        f"static/workspace_out_protocols_{p.parts[-4]}_figures_png_{p.name}"
        for p in root.glob("out/protocols/*/figures/png/*.png")
    }
    assert set(re.findall(r'<img src="([^"]*\.png)"', html)) == pngs


def _plan_after_the_cue_edit(root: Path, env: dict[str, str]) -> None:
    """`syps plan` after SS's P3 edit, before the repro: SyPS's stages are stale (their params
    changed), so its requests are rebuilt: 2 items x 3 datasets x 8 cues = 48, of which SS P3's
    2 are new; every other protocol's stages are up to date, read from their tables, nothing to
    send."""
    planned = _run(["syps", "plan"], root, env)
    assert planned.returncode == 0, planned.stderr
    row = re.compile(rf"^\s*generate@(\w+)-{MODEL} turn 1\s+\w+\s+{MODEL}\s+(\d+)\s+(\d+)\s+(\d+)")
    turn1 = {
        m.group(1): (int(m.group(2)), int(m.group(3)), int(m.group(4)), "up to date" in line)
        for line in planned.stdout.splitlines()
        if (m := row.match(line))
    }
    assert turn1["cues"] == (48, 46, 2, False), planned.stdout
    assert {p: v[2:] for p, v in turn1.items() if p != "cues"} == {
        p: (0, True) for p in ("pushback", "discernment", "betting", "adaptive")
    }, planned.stdout


def _plan_with_stale_data(root: Path, env: dict[str, str]) -> None:
    """`syps plan` with a stale stage upstream of every other (the data, which every fetch
    stage reads): it reruns first and may change what the later stages read, so none is
    counted as up to date."""
    data = root / "data" / "builtin" / "AITA.csv"
    kept = data.read_bytes()
    data.write_bytes(kept + b"\n")
    upstream = _run(["syps", "plan"], root, env)
    data.write_bytes(kept)
    assert upstream.returncode == 0, upstream.stderr
    assert "up to date in dvc.lock" not in upstream.stdout, upstream.stdout


def test_rerun_is_a_no_op_then_a_cue_edit_reruns(one_run: OneRun, tmp_path: Path) -> None:
    root, env = copy_run(one_run, tmp_path / "syps"), one_run.env
    # The copy has no MLflow store: its first repro logs the run there and runs nothing else.
    logged = _run(["dvc", "repro"], root, env)
    assert logged.returncode == 0, logged.stderr
    assert re.findall(r"Running stage '([^']+)'", logged.stdout) == ["mlflow"]
    before = len(_mlflow_runs(root))
    assert before == 8  # the parent and its seven children
    again = _run(["dvc", "repro"], root, env)
    assert again.returncode == 0, again.stderr
    assert "didn't change, skipping" in again.stdout
    assert len(_mlflow_runs(root)) == before  # skipped stages log nothing

    # Commit the run as a user would (dvc.lock, metrics.json, plots/): `dvc plots diff HEAD`
    # below then compares it with the edited workspace.
    for cmd in (["git", "add", "-A"], ["git", "commit", "-qm", "first run"]):
        subprocess.run(cmd, cwd=root, check=True, env={**env, **GIT_IDENTITY})

    params = yaml.safe_load((root / "params.yaml").read_text())
    cues = params["protocols"]["cues"]
    cues["templates"]["datasets"]["SS"]["cues"]["P3"] = "Tell me I'm right about this."
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    _plan_after_the_cue_edit(root, env)
    _plan_with_stale_data(root, env)
    edited = _run(["dvc", "repro"], root, env)
    assert edited.returncode == 0, edited.stderr
    assert "Running stage 'variants@cues'" in edited.stdout
    # Only SyPS's stages (and the mlflow stage) rerun: the other protocols' are unchanged.
    assert "Running stage 'generate@pushback-smollm2-135m'" not in edited.stdout
    runs = _mlflow_runs(root)
    assert len(runs) == before + 8  # a new parent and its seven children (SyPS 3, protocols 4)
    newest = max(
        (r for r in runs if "mlflow.parentRunId" not in r.data.tags),
        key=lambda r: r.info.start_time,
    )
    assert newest.data.tags["git_dirty"] == "true"  # params.yaml was edited, not committed
    # The parent's description names the key the edit changed.
    assert newest.data.tags["mlflow.note.content"] == (
        "params.yaml differs from the committed file in 1 key(s): "
        "`protocols.cues.templates.datasets.SS.cues.P3`."
    )
    # `dvc metrics diff` still reaches every number of the full metrics file, the edited cue's
    # delta included (whether or not the smoke-test model's answers moved it; DVC lists no
    # undefined value, and on two items the delta itself may be NaN, its support never is).
    # (The full file by name: DVC's own metrics are the headline files.)
    diff_all = ["dvc", "metrics", "diff", "--all", "HEAD", "--targets", "metrics/cues.json"]
    metrics = _run([*diff_all, "--json"], root, env)
    assert metrics.returncode == 0, metrics.stderr
    cues = json.loads(metrics.stdout)["metrics/cues.json"]
    assert "smollm2-135m.SS.delta_P3_n" in cues
    full = json.loads((root / "metrics" / "cues.json").read_text())["smollm2-135m"]["SS"]
    shown = {k.removeprefix("smollm2-135m.SS.") for k in cues if k.startswith("smollm2-135m.SS.")}
    defined = {k for k, v in full.items() if isinstance(v, int | float) and v == v}
    assert {k for k in defined if k.startswith("delta_P3")} <= shown

    # The wording change side by side: HEAD's plot data are committed, its figures cached.
    diff = _run(["dvc", "plots", "diff", "HEAD", "-o", "diff_html"], root, env)
    assert diff.returncode == 0, diff.stderr
    assert "failed to load" not in diff.stdout + diff.stderr, diff.stdout + diff.stderr
    html = (root / "diff_html" / "index.html").read_text()
    specs = [json.loads(s) for s in re.findall(r"var spec = (\{.*?\});\n", html, flags=re.S)]
    # A plot whose file has no rows has no data (see test_dvc_deps); every other has both.
    assert specs and all(
        {r["rev"] for r in s["data"]["values"]} == {"HEAD", "workspace"}
        for s in specs
        if "data" in s
    )
    profile = next(
        s for s in specs if s["data"]["values"][0]["filename"] == "plots/cues/profile.json"
    )
    ss_p3 = {
        r["rev"]: r["template_sha256"]
        for r in profile["data"]["values"]
        if r["dataset"] == "SS" and r["variant"] == "P3"
    }
    assert set(ss_p3) == {"HEAD", "workspace"} and ss_p3["HEAD"] != ss_p3["workspace"]


def test_bad_params_fail_with_the_key(project: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    root, env = project
    bad = tmp_path / "params.yaml"
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["protocols"]["cues"]["max_new_tokens"]["SS"] = "many"
    bad.write_text(yaml.safe_dump(params))
    out = tmp_path / "items.parquet"
    res = _run([sys.executable, "stages/fetch.py", str(bad), "cues", str(out)], root, env)
    assert res.returncode == 2
    assert "protocols.cues.max_new_tokens.SS" in res.stderr and "Traceback" not in res.stderr
    assert not out.exists()
