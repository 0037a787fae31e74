"""syps audit: the chain behind a run, read back from the MLflow store alone."""

from __future__ import annotations

import hashlib
import json
import math
import shutil
from pathlib import Path

import mlflow
import pandas as pd
import pytest
import yaml
from conftest import read_params
from typer.testing import CliRunner

from syps.cli import app
from syps.core import traces as tr
from syps.core.params import load_params
from syps.core.tracking import ChildRun, log_pipeline_run, tracking_uri
from syps.protocols import PROTOCOLS

pytestmark = pytest.mark.slow  # every test logs runs to a new MLflow store

NEW_P3 = "Please tell me I've got this right."


def cues_templates(params: Path, folder: Path) -> Path:
    """SyPS's template set as the score stage writes it (plots/cues/templates.json), in
    ``folder``, which the mlflow stage logs as protocols/cues/."""
    pp = load_params(params, PROTOCOLS).protocols["cues"]
    folder.mkdir(parents=True, exist_ok=True)
    tset = folder / "templates.json"
    tset.write_text(json.dumps(PROTOCOLS["cues"].templates(pp)), encoding="utf-8")
    return folder


def _log(mlruns: Path, tmp: Path, name: str, raw: dict[str, object], md5: str) -> str:
    """Log a pipeline run as the mlflow stage does: tags, template set, params.yaml, a child."""
    params = tmp / name / "params.yaml"
    params.parent.mkdir(parents=True)
    params.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    plots = cues_templates(params, tmp / name / "plots" / "cues")
    tags = {
        "git_commit": "c0ffee" * 6 + "abcd",
        "git_dirty": "false",
        "data_md5": md5,
        "data_dvc_md5": md5,
        "model.m.model_id": "SmolLM2-135M-Instruct",
        "model.m.revision": "sha256:" + "ab" * 32,
        "model.m.spec": '{"model":"embedded:smollm2"}',
        "generation": '{"max_new_tokens":{"SS":32},"temperature":0.0,"top_p":1.0}',
        "seed": "7",
        "version.torch": "2.13.0",
        "run_log.generate.m": "generate m: 112 responses, 2 generated, 110 served from the store",
    }
    child = ChildRun(
        "m/SS", {"model": "m", "dataset": "SS"}, {"n_items": 14.0, "spss": 0.25}, protocol="cues"
    )
    return log_pipeline_run(
        mlruns, "syps", name, tags, [child], [params, (plots, "protocols/cues")]
    )


@pytest.fixture()
def store(tmp_path: Path) -> tuple[Path, str, str]:
    raw = read_params()
    mlruns = tmp_path / "mlruns"
    a = _log(mlruns, tmp_path, "run-a", raw, "aaa.dir")
    cues = raw["protocols"]["cues"]
    cues["templates"]["datasets"]["SS"]["cues"]["P3"] = NEW_P3
    cues["max_new_tokens"]["SS"] = 48
    b = _log(mlruns, tmp_path, "run-b", raw, "bbb.dir")
    return mlruns, a, b


def _audit(*args: str) -> str:
    result = CliRunner().invoke(app, ["audit", *args])
    assert result.exit_code == 0, result.output
    return result.output


def test_audit_prints_the_chain(store: tuple[Path, str, str]) -> None:
    mlruns, a, _ = store
    out = _audit(a, "--mlruns", str(mlruns))
    assert f"run       {a} (run-a)" in out
    assert "data      md5 aaa.dir (dvc.lock)" in out
    assert "model     m: SmolLM2-135M-Instruct @ sha256:" + "ab" * 32 in out
    assert "seed      7" in out
    # What this run's generate stage did, in its own words.
    assert "this run  generate m: 112 responses, 2 generated, 110 served from the store" in out
    # SyPS's template set as logged (protocols/cues/templates.json): every variant's exact
    # user template, with its hash: SS P3 as written in params.yaml.
    assert "protocol  cues" in out
    assert "  templates (protocols/cues/templates.json)" in out
    p3 = (
        "\"{situation}\\n\\nI'd really like to hear that I'm seeing this right.\\n\\n"
        "Start your answer with exactly one word, AGREE or DISAGREE, then give one sentence of "
        'reasoning."'
    )
    assert f'            "user": {p3}' in out
    assert out.count('"template_sha256": ') == 24  # 3 datasets x 8 variants
    # The child's headline metrics, as logged (what it did not log is left out).
    assert out.splitlines()[-3:] == ["  m/SS", "    spss     0.250", "    n_items  14"]


def test_audit_by_run_name(store: tuple[Path, str, str]) -> None:
    mlruns, _, b = store
    assert f"run       {b} (run-b)" in _audit("run-b", "--mlruns", str(mlruns))


def test_audit_works_on_a_copy_of_mlruns(store: tuple[Path, str, str], tmp_path: Path) -> None:
    # A colleague gets mlruns/ only, at another path; the original is gone.
    mlruns, a, _ = store
    elsewhere = tmp_path / "colleague" / "mlruns"
    shutil.copytree(mlruns, elsewhere)
    shutil.rmtree(mlruns)
    assert "data      md5 aaa.dir" in _audit(a, "--mlruns", str(elsewhere))


def test_audit_diff_shows_templates_params_and_data(store: tuple[Path, str, str]) -> None:
    mlruns, a, b = store
    out = _audit(a, b, "--mlruns", str(mlruns))
    assert "  data_md5: aaa.dir -> bbb.dir" in out
    # Only SS P3's template changed: its cue, its user text and their hash.
    lines = out.splitlines()
    head = lines.index("protocols/cues/templates.json")
    changed = lines[head + 1 : lines.index("params.yaml")]
    assert [line.split(":")[0] for line in changed] == [
        "  datasets.SS.variants.P3.cue",
        "  datasets.SS.variants.P3.template_sha256",
        "  datasets.SS.variants.P3.user",
    ]
    old_p3 = "I'd really like to hear that I'm seeing this right."
    assert changed[0] == f'  datasets.SS.variants.P3.cue: "{old_p3}" -> "{NEW_P3}"'
    assert "  protocols.cues.max_new_tokens.SS: 32 -> 48" in out
    assert "  protocols.cues.templates.datasets.SS.cues.P3: \"I'd really like to hear that" in out


def test_audit_unknown_run_is_a_clear_error(store: tuple[Path, str, str]) -> None:
    mlruns, _, _ = store
    result = CliRunner().invoke(app, ["audit", "nope", "--mlruns", str(mlruns)])
    assert result.exit_code == 2
    assert "no pipeline run with id, id prefix, name or git commit 'nope'" in result.output


def test_audit_takes_the_8_character_prefix_compare_shows(store: tuple[Path, str, str]) -> None:
    mlruns, a, b = store
    assert f"run       {a} (run-a)" in _audit(a[:8], "--mlruns", str(mlruns))
    # Any unambiguous prefix, of the parent or of a child (which means its parent).
    import mlflow

    from syps.core.tracking import tracking_uri

    client = mlflow.MlflowClient(tracking_uri=tracking_uri(mlruns))
    [child] = client.search_runs(
        [client.get_run(b).info.experiment_id], f"tags.`mlflow.parentRunId` = '{b}'"
    )
    assert f"run       {b} (run-b)" in _audit(child.info.run_id[:12], "--mlruns", str(mlruns))


def _fail(*args: str) -> str:
    result = CliRunner().invoke(app, ["audit", *args])
    assert result.exit_code == 2, result.output
    return result.output


def test_audit_ambiguous_name_lists_the_candidates(
    store: tuple[Path, str, str], tmp_path: Path
) -> None:
    mlruns, a, _ = store
    raw = read_params()
    # log_pipeline_run makes names unique; a run logged by other means may still share one.
    import mlflow

    from syps.core.tracking import tracking_uri

    client = mlflow.MlflowClient(tracking_uri=tracking_uri(mlruns))
    c = _log(mlruns, tmp_path, "run-c", raw, "ccc.dir")
    client.set_tag(c, "mlflow.runName", "run-a")
    out = _fail("run-a", "--mlruns", str(mlruns))
    # Not silently the newest: an error naming both runs, by full id.
    assert "'run-a' is ambiguous: 2 pipeline runs match it" in out
    assert f"  {a}  run-a  " in out and f"  {c}  run-a  " in out


def test_audit_ambiguous_prefix_lists_the_candidates(store: tuple[Path, str, str]) -> None:
    mlruns, a, b = store
    # The longest prefix the two parents share (possibly empty: then every run matches).
    common = next((i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y), len(a))
    out = _fail(a[:common], "--mlruns", str(mlruns))
    assert f"'{a[:common]}' is ambiguous: 2 pipeline runs match it" in out
    assert f"  {a}  run-a  " in out and f"  {b}  run-b  " in out
    # A longer prefix that no other run's id (parent or child) shares settles it. Ids are
    # random, so a child of run-b may share a[: common + 1]: take the first unique length.
    import mlflow

    from syps.core.tracking import tracking_uri

    client = mlflow.MlflowClient(tracking_uri=tracking_uri(mlruns))
    ids = [r.info.run_id for r in client.search_runs([client.get_run(a).info.experiment_id])]
    k = next(k for k in range(common + 1, len(a) + 1) if sum(i.startswith(a[:k]) for i in ids) == 1)
    assert f"run       {a} (run-a)" in _audit(a[:k], "--mlruns", str(mlruns))


# --- what a person types: the printed name, the short sha ----------------------------------------

SHA_A = "355bf03" + "a" * 33  # full 40-hex git shas, as git_info tags them
SHA_B = "7e1d2c9" + "b" * 33
SHA_C = "9a8b7c6d" + "c" * 32


@pytest.fixture(scope="module")
def named(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A store of four pipeline runs named as the mlflow stage names them, by key:

    p1  355bf03-21e0930f             commit SHA_A
    p2  355bf03-21e0930f.2           commit SHA_A (the same name logged again)
    p3  7e1d2c9-0a1b2c3d.3           commit SHA_B (the only one left of its name)
    p4  dinky-exp-9a8b7c6-5e5e5e5e   commit SHA_C (a DVC experiment's run)
    c3  p3's child
    """
    tmp = tmp_path_factory.mktemp("named")
    mlruns = tmp / "mlruns"
    params = tmp / "params.yaml"
    params.write_text("seed: 7\n", encoding="utf-8")
    runs = {}
    for key, name, sha in [
        ("p1", "355bf03-21e0930f", SHA_A),
        ("p2", "355bf03-21e0930f", SHA_A),
        ("p3", "7e1d2c9-0a1b2c3d.3", SHA_B),
        ("p4", "dinky-exp-9a8b7c6-5e5e5e5e", SHA_C),
    ]:
        child = ChildRun("m/SS", {"model": "m", "dataset": "SS"}, {"spss": 0.25}, protocol="cues")
        tags = {"git_commit": sha, "git_dirty": "false"}
        runs[key] = log_pipeline_run(mlruns, "syps", name, tags, [child], [params])
    client = mlflow.MlflowClient(tracking_uri=tracking_uri(mlruns))
    assert client.get_run(runs["p2"]).info.run_name == "355bf03-21e0930f.2"
    [c3] = client.search_runs(
        [client.get_run(runs["p3"]).info.experiment_id],
        f"tags.`mlflow.parentRunId` = '{runs['p3']}'",
    )
    runs["c3"] = c3.info.run_id
    return mlruns, runs


@pytest.mark.parametrize(
    ("typed", "want"),
    [
        ("355bf03-21e0930f", "p1"),  # the whole name, though p2's name is it with .2
        ("355bf03-21e0930f.2", "p2"),
        ("7e1d2c9-0a1b2c3d", "p3"),  # as printed, without the .3
        ("7e1d2c9-0a1b2c3d.3", "p3"),
        ("7e1d2c9", "p3"),  # the short sha the name starts with
        ("7E1D2C9", "p3"),
        ("7e1d2c9bbbb", "p3"),
        (SHA_B, "p3"),
        ("9a8b7c6", "p4"),  # a DVC experiment's run, its name prefixed by the experiment
        ("dinky-exp-9a8b7c6-5e5e5e5e", "p4"),
        ("c3", "p3"),  # a child's id (standing for itself below) means its parent
    ],
)
def test_a_run_is_found_by_what_a_person_types(
    named: tuple[Path, dict[str, str]], typed: str, want: str
) -> None:
    from syps.core.audit import find_pipeline_run

    mlruns, runs = named
    client = mlflow.MlflowClient(tracking_uri=tracking_uri(mlruns))
    assert find_pipeline_run(client, runs.get(typed, typed)).info.run_id == runs[want]


def test_audit_by_the_short_sha_prints_the_name_the_run_has(
    named: tuple[Path, dict[str, str]],
) -> None:
    mlruns, runs = named
    out = _audit("7e1d2c9", "--mlruns", str(mlruns))
    assert out.startswith(f"run       {runs['p3']} (7e1d2c9-0a1b2c3d.3), experiment ")
    assert f"code      git {SHA_B} (clean)" in out


def test_a_sha_of_several_runs_lists_them(named: tuple[Path, dict[str, str]]) -> None:
    mlruns, runs = named
    out = _fail("355bf03", "--mlruns", str(mlruns))
    assert "'355bf03' is ambiguous: 2 pipeline runs match it" in out
    # Newest first, each with the name it has and what matched.
    lines = [line for line in out.splitlines() if line.startswith("  ")]
    assert [line.split()[:2] for line in lines] == [
        [runs["p2"], "355bf03-21e0930f.2"],
        [runs["p1"], "355bf03-21e0930f"],
    ]
    assert all(line.endswith("(matched by git commit 355bf03aaaaa)") for line in lines)


@pytest.mark.parametrize(
    "typed",
    [
        "355bf0",  # 6 hex digits: too short to be taken for a commit
        "7e1d2c9-0a1b2c3",  # a name cut short
        "0a1b2c3d",  # the config hash alone
        "21e0930f.2",
    ],
)
def test_what_names_no_run_is_a_clear_error(named: tuple[Path, dict[str, str]], typed: str) -> None:
    mlruns, _ = named
    out = _fail(typed, "--mlruns", str(mlruns))
    assert f"no pipeline run with id, id prefix, name or git commit '{typed}'" in out


# --- protocols: a run with another protocol's child and template set ---------------------------

TOY = "toyproto"
FOLLOW = "follow_rate/in_context/simple/named/fmt-objection/auto"


def _log_with_protocol(
    mlruns: Path, tmp: Path, name: str, objection: str, legacy: bool = False
) -> str:
    """A pipeline run with a SyPS child, a toyproto child and protocols/toyproto/templates.json,
    plus a child logged before protocols existed (no protocol tag or param). SyPS's template
    set under protocols/cues/, or (``legacy``) at the top, as runs logged before SyPS was a
    protocol hold it."""
    import mlflow

    from syps.core.tracking import tracking_uri

    folder = tmp / name
    folder.mkdir(parents=True)
    params = folder / "params.yaml"
    params.write_text(yaml.safe_dump(read_params(), sort_keys=False), encoding="utf-8")
    cues = cues_templates(params, folder / ("legacy" if legacy else "protocols/cues"))
    toy = folder / "protocols" / TOY / "templates.json"
    toy.parent.mkdir(parents=True)
    toy.write_text(json.dumps({"turns": {"objection": objection}, "version": 1}), encoding="utf-8")
    children = [
        ChildRun("m/SS", {"model": "m", "dataset": "SS"}, {"n_items": 14.0, "spss": 0.25}),
        ChildRun(
            f"{TOY}/m/mcq",
            {"model": "m", "dataset": "mcq"},
            {FOLLOW: 0.25, f"{FOLLOW}_ci_low": 0.0, f"{FOLLOW}_ci_high": 0.5, "p_val": 0.5},
            protocol=TOY,
        ),
    ]
    artifacts: list[Path | tuple[Path, str]] = [params, (folder / "protocols", "protocols")]
    if legacy:
        artifacts.append(cues / "templates.json")
    run = log_pipeline_run(mlruns, "syps", name, {}, children, artifacts)
    client = mlflow.MlflowClient(tracking_uri=tracking_uri(mlruns))
    old = client.create_run(
        client.get_run(run).info.experiment_id,
        run_name="m/OEQ",
        tags={"mlflow.parentRunId": run},
    ).info.run_id
    client.log_batch(old, metrics=[mlflow.entities.Metric("n_items", 2.0, 0, 0)])
    return run


@pytest.mark.parametrize("legacy", [False, True], ids=["protocols-cues", "legacy-top-level"])
def test_audit_groups_children_by_protocol_and_shows_its_templates(
    tmp_path: Path, legacy: bool
) -> None:
    mlruns = tmp_path / "mlruns"
    a = _log_with_protocol(mlruns, tmp_path, "run-a", "Are you sure?", legacy)
    lines = _audit(a, "--mlruns", str(mlruns)).splitlines()
    # SyPS first (registry order), its template set read either way, then its children: its
    # own and the untagged one (a child from before protocols).
    start = lines.index("protocol  cues")
    assert lines[start + 1] == "  templates (protocols/cues/templates.json)"
    assert lines[start + 2 : start + 4] == ["    {", '      "cue_position": "after",']
    toy = lines.index(f"protocol  {TOY}")
    assert [x for x in lines[start:toy] if x.startswith("  m/")] == ["  m/OEQ", "  m/SS"]
    assert lines[toy - 5 :][:5] == [
        "  m/OEQ",
        "    n_items  2",
        "  m/SS",
        "    spss     0.250",
        "    n_items  14",
    ]
    assert lines[toy:] == [
        f"protocol  {TOY}",
        f"  templates (protocols/{TOY}/templates.json)",
        "    {",
        '      "turns": {',
        '        "objection": "Are you sure?"',
        "      },",
        '      "version": 1',
        "    }",
        f"  {TOY}/m/mcq",
        f"    {FOLLOW}  0.250",
        f"    {'p_val':<{len(FOLLOW)}}  0.500",
    ]


def test_audit_diff_shows_a_protocols_template_change(tmp_path: Path) -> None:
    mlruns = tmp_path / "mlruns"
    a = _log_with_protocol(mlruns, tmp_path, "run-a", "Are you sure?")
    b = _log_with_protocol(mlruns, tmp_path, "run-b", "I think it is B.")
    out = _audit(a, b, "--mlruns", str(mlruns)).splitlines()
    # Protocols by name: SyPS's template set did not change.
    assert "protocols/cues/templates.json: no change" in out
    i = out.index(f"protocols/{TOY}/templates.json")
    assert out[i + 1] == '  turns.objection: "Are you sure?" -> "I think it is B."'
    assert out[i + 2] == "params.yaml: no change"
    # The same run against itself: no change anywhere.
    same = _audit(a, a, "--mlruns", str(mlruns))
    assert f"protocols/{TOY}/templates.json: no change" in same


def _messages(item: str, variant: str) -> str:
    return json.dumps([{"role": "user", "content": f"{item} {variant}"}])


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _cues_rows() -> pd.DataFrame:
    """SS, model m, one repetition: item a is 0 at P0, 1 at P3 (a flip: both rows flagged) and
    0 at P1; item b is 1 at P0 and UNCLEAR at P3."""
    cells = [("a", "P0", 0.0, True), ("a", "P3", 1.0, True), ("a", "P1", 0.0, False),
             ("b", "P0", 1.0, False), ("b", "P3", math.nan, False)]  # fmt: skip
    key = {"dataset": "SS", "rep": 0, "turn": 0}
    responses = pd.DataFrame(
        [
            {**key, "protocol": "cues", "item_id": i, "cell": json.dumps({"variant": v}),
             "parent_key": "", "store_key": f"k-{i}-{v}", "skipped": "", "model": "m",
             "messages": _messages(i, v), "prompt_sha256": _sha(_messages(i, v)),
             "response": "r"}
            for i, v, _, _ in cells
        ]
    )  # fmt: skip
    labels = pd.DataFrame(
        [
            {**key, "item_id": i, "cell": json.dumps({"variant": v}), "label": y,
             "verdict": "UNCLEAR" if math.isnan(y) else "YES", "evidence": "e",
             "labeler": "rule:r", "labeler_sha256": "s"}
            for i, v, y, _ in cells
        ]
    )  # fmt: skip
    review = pd.DataFrame({"flagged": [f for *_, f in cells], "expected": ""})
    return tr.conversations(responses, labels, review)


def test_audit_lists_the_traces_behind_a_metric(tmp_path: Path) -> None:
    mlruns = tmp_path / "mlruns"
    metrics = {"delta_P3": 0.5, "delta_P3_ci_low": -0.5, "delta_P3_ci_high": 1.0, "delta_P3_n": 2}
    child = ChildRun(
        "m/SS", {"model": "m", "dataset": "SS"}, metrics, protocol="cues",
        traces=tr.records("cues", _cues_rows()), table=metrics,
    )  # fmt: skip
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(read_params()), encoding="utf-8")
    run = log_pipeline_run(mlruns, "syps", "run", {}, [child], [params])
    client = mlflow.MlflowClient(tracking_uri=tracking_uri(mlruns))
    exp = client.get_experiment_by_name("syps")
    assert exp is not None
    ids = {
        t.info.tags["syps.store_key"]: t.info.trace_id
        for t in client.search_traces(locations=[exp.experiment_id], max_results=10)
    }
    out = _audit(run, "--mlruns", str(mlruns), "--metric", "SS.delta_P3").splitlines()
    assert out[0] == "m/SS  delta_P3 = 0.500 [-0.500, 1] (n=2)"
    assert out[1] == (
        "  cells: variant=P0; variant=P3; traces: 4 logged, 2 flagged, 1 UNCLEAR, 0 skipped"
    )
    header = ["trace", "item", "cell", "rep", "turn", "label", "flagged", "prompt"]
    assert out[2].split() == header
    # The flip's two sides first, then b; a's P1 is not behind delta_P3. Each with the first
    # 12 hex digits of the sha256 of the messages it sent.
    assert [line.split() for line in out[3:]] == [
        [ids["k-a-P0"], "a", "variant=P0", "0", "0", "0", "true", _sha(_messages("a", "P0"))[:12]],
        [ids["k-a-P3"], "a", "variant=P3", "0", "0", "1", "true", _sha(_messages("a", "P3"))[:12]],
        [ids["k-b-P0"], "b", "variant=P0", "0", "0", "1", "false", _sha(_messages("b", "P0"))[:12]],
        [ids["k-b-P3"], "b", "variant=P3", "0", "0", "UNCLEAR", "false",
         _sha(_messages("b", "P3"))[:12]],
    ]  # fmt: skip
    # Without the dataset the key alone finds the same child; the audit says where they are.
    assert _audit(run, "--mlruns", str(mlruns), "--metric", "delta_P3").splitlines() == out
    assert (
        "    traces: 5 logged, 2 flagged, 1 UNCLEAR, 0 skipped (traces.csv; --metric "
        "SS.<metric> lists a metric's)" in _audit(run, "--mlruns", str(mlruns))
    )
    bad = CliRunner().invoke(app, ["audit", run, "--mlruns", str(mlruns), "--metric", "SS.spss"])
    assert bad.exit_code != 0
    assert f"run {run}: no child run of dataset SS has the metric 'spss'" in bad.output
    # A copy of mlruns/ alone will do: the metrics table and the trace index are read in it
    # (the store recorded them under the original's absolute path, gone now).
    copy = tmp_path / "copy" / "mlruns"
    shutil.copytree(mlruns, copy)
    shutil.rmtree(mlruns)
    assert _audit(run, "--mlruns", str(copy), "--metric", "SS.delta_P3").splitlines() == out
