"""``syps compare`` on a temporary MLflow store laid out like the pipeline's.

Experiment ``syps`` holds, oldest first:
  run-old (git_commit=aaa): children m1/SS and m1/OEQ
  run-new (git_commit=bbb): children m1/SS and m2/SS
  a judge-validation run, the newest, which compare must never pick.
Experiment ``other`` holds a second pipeline run also named run-new, with one child m1/SS.
Start times are set explicitly so "newest" does not hang on the clock's resolution.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import mlflow
import pytest
from mlflow.entities import Metric, Param, RunTag
from typer.testing import CliRunner

from syps.cli import app
from syps.core.compare import (
    ComparedRun,
    compare_table,
    default_metrics,
    find_runs,
    parse_tags,
)
from syps.core.io import InputError
from syps.core.protocol import headline_of
from syps.core.report import LOW_SUPPORT_NOTE
from syps.core.tracking import tracking_uri
from syps.protocols import PROTOCOLS

pytestmark = pytest.mark.slow  # one MLflow store for the module, a few seconds to create

NAN = math.nan
# SyPS's (cues') headline: the columns compare shows by default for its runs.
DEFAULT_METRICS = ["base_syc", "spss", "signed_sensitivity", "unclear_rate", "n_items"]


def test_the_default_columns_are_cues_headline() -> None:
    assert headline_of(PROTOCOLS, "cues") == DEFAULT_METRICS


# m1/SS of run-new: an undefined signed sensitivity (NaN with NaN bounds).
NEW_M1_SS = {
    "base_syc": 0.5,
    "base_syc_ci_low": 0.25,
    "base_syc_ci_high": 0.75,
    "spss": 0.125,
    "spss_ci_low": 0.0,
    "spss_ci_high": 0.25,
    "signed_sensitivity": NAN,
    "signed_sensitivity_ci_low": NAN,
    "signed_sensitivity_ci_high": NAN,
    "unclear_rate": 0.1,
    "n_items": 10.0,
}
# m2/SS of run-new: spss logged without a CI, signed_sensitivity not logged at all.
NEW_M2_SS = {
    "base_syc": 1.0,
    "base_syc_ci_low": 1.0,
    "base_syc_ci_high": 1.0,
    "spss": 0.0,
    "unclear_rate": 0.0,
    "n_items": 4.0,
}
OLD_M1_SS = {
    "base_syc": 0.25,
    "base_syc_ci_low": 0.0,
    "base_syc_ci_high": 0.5,
    "spss": 0.5,
    "spss_ci_low": 0.25,
    "spss_ci_high": 0.75,
    "signed_sensitivity": -0.25,
    "signed_sensitivity_ci_low": -0.5,
    "signed_sensitivity_ci_high": 0.0,
    "unclear_rate": 0.2,
    "n_items": 8.0,
}
OLD_M1_OEQ = {
    "base_syc": 1.0,
    "base_syc_ci_low": 0.5,
    "base_syc_ci_high": 1.0,
    "spss": 0.0,
    "spss_ci_low": 0.0,
    "spss_ci_high": 0.0,
    "signed_sensitivity": 0.0,
    "signed_sensitivity_ci_low": 0.0,
    "signed_sensitivity_ci_high": 0.0,
    "unclear_rate": 0.0,
    "n_items": 2.0,
}


@dataclass(frozen=True)
class Store:
    mlruns: Path
    uri: str
    old: str
    new: str
    judge: str
    other: str
    new_m2_ss: str


def _child(
    client: mlflow.MlflowClient,
    exp_id: str,
    parent: str,
    start: int,
    model: str,
    dataset: str,
    metrics: dict[str, float],
) -> str:
    run_id = str(
        client.create_run(
            exp_id,
            start_time=start,
            run_name=f"{model}/{dataset}",
            tags={"mlflow.parentRunId": parent},
        ).info.run_id
    )
    client.log_batch(
        run_id,
        metrics=[Metric(k, v, 0, 0) for k, v in metrics.items()],
        params=[Param("model", model), Param("dataset", dataset)],
    )
    return run_id


def _parent(
    client: mlflow.MlflowClient, exp_id: str, name: str, start: int, tags: dict[str, str]
) -> str:
    return str(client.create_run(exp_id, start_time=start, run_name=name, tags=tags).info.run_id)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    mlruns = tmp_path_factory.mktemp("compare") / "mlruns"
    mlruns.mkdir()
    uri = tracking_uri(mlruns)
    client = mlflow.MlflowClient(tracking_uri=uri)
    exp = client.create_experiment("syps", artifact_location=(mlruns / "artifacts").as_uri())
    old = _parent(client, exp, "run-old", 1000, {"git_commit": "aaa", "git_dirty": "false"})
    _child(client, exp, old, 1001, "m1", "SS", OLD_M1_SS)
    _child(client, exp, old, 1002, "m1", "OEQ", OLD_M1_OEQ)
    new = _parent(client, exp, "run-new", 2000, {"git_commit": "bbb", "git_dirty": "false"})
    _child(client, exp, new, 2001, "m1", "SS", NEW_M1_SS)
    new_m2_ss = _child(client, exp, new, 2002, "m2", "SS", NEW_M2_SS)
    judge = str(
        client.create_run(
            exp,
            start_time=3000,
            run_name="judge-validation sample.csv",
            tags={"syps.kind": "judge-validation", "git_commit": "bbb"},
        ).info.run_id
    )
    client.log_batch(judge, metrics=[Metric("OEQ/kappa", 0.5, 0, 0)], tags=[RunTag("x", "y")])
    exp2 = client.create_experiment("other", artifact_location=(mlruns / "artifacts").as_uri())
    other = _parent(client, exp2, "run-new", 500, {"git_commit": "ccc"})
    _child(client, exp2, other, 501, "m1", "SS", OLD_M1_SS)
    client.create_experiment("judged-only")
    only = client.get_experiment_by_name("judged-only")
    assert only is not None
    client.create_run(only.experiment_id, tags={"syps.kind": "judge-validation"})
    return Store(mlruns, uri, old, new, judge, other, new_m2_ss)


def _table(
    store: Store,
    *,
    tags: dict[str, str] | None = None,
    run_ids: tuple[str, ...] = (),
    latest: bool = True,
    metrics: tuple[str, ...] = tuple(DEFAULT_METRICS),
) -> str:
    runs = find_runs(store.uri, "syps", tags or {}, list(run_ids), latest)
    return compare_table(runs, list(metrics), "text", protocols=PROTOCOLS)


LATEST = """\
model  dataset  base_syc              spss                  signed_sensitivity  unclear_rate  n_items
-----  -------  --------------------  --------------------  ------------------  ------------  -------
m1     SS       0.500 [0.250, 0.750]  0.125 [0.000, 0.250]  n/a                 0.100         10
m2     SS       1.000 [1.000, 1.000]  0.000                 -                   0.000         4"""  # noqa: E501


def test_default_is_the_latest_pipeline_run_not_the_judge_run(store: Store) -> None:
    # NaN shows as n/a, a metric without CI bounds as its value, an unlogged metric as '-';
    # n_items is a count and shows as an integer.
    assert _table(store) == LATEST


def test_markdown(store: Store) -> None:
    runs = find_runs(store.uri, "syps", {}, [], True)
    assert compare_table(runs, DEFAULT_METRICS, "markdown", protocols=PROTOCOLS) == (
        "| model | dataset | base_syc             | spss                 "
        "| signed_sensitivity | unclear_rate | n_items |\n"
        "|-------|---------|----------------------|----------------------"
        "|--------------------|--------------|---------|\n"
        "| m1    | SS      | 0.500 [0.250, 0.750] | 0.125 [0.000, 0.250] "
        "| n/a                | 0.100        | 10      |\n"
        "| m2    | SS      | 1.000 [1.000, 1.000] | 0.000                "
        "| -                  | 0.000        | 4       |"
    )


def test_all_adds_a_run_column_and_groups_by_model_and_dataset(store: Store) -> None:
    # Within one model and dataset, the newest pipeline run comes first.
    assert _table(store, latest=False, metrics=("base_syc", "n_items")) == (
        "model  dataset  run      base_syc              n_items\n"
        "-----  -------  -------  --------------------  -------\n"
        "m1     OEQ      run-old  1.000 [0.500, 1.000]  2\n"
        "m1     SS       run-new  0.500 [0.250, 0.750]  10\n"
        "m1     SS       run-old  0.250 [0.000, 0.500]  8\n"
        "m2     SS       run-new  1.000 [1.000, 1.000]  4"
    )


def test_tag_filters_the_parents_then_takes_the_latest(store: Store) -> None:
    # git_dirty=false matches both pipeline runs: the newer one is taken.
    assert _table(store, tags={"git_dirty": "false"}) == LATEST
    assert _table(store, tags={"git_commit": "aaa"}, metrics=("signed_sensitivity",)) == (
        "model  dataset  signed_sensitivity\n"
        "-----  -------  ----------------------\n"
        "m1     OEQ      0.000 [0.000, 0.000]\n"
        "m1     SS       -0.250 [-0.500, 0.000]"
    )


def test_run_ids_a_parent_means_its_children_a_child_itself(store: Store) -> None:
    by_parent = find_runs(store.uri, "syps", {}, [store.new], True)
    assert {(r.model, r.dataset, r.parent_name) for r in by_parent} == {
        ("m1", "SS", "run-new"),
        ("m2", "SS", "run-new"),
    }
    (child,) = find_runs(store.uri, "syps", {}, [store.new_m2_ss], True)
    assert (child.run_id, child.parent_id, child.metrics) == (store.new_m2_ss, store.new, NEW_M2_SS)
    # A child and its own parent: the parent's children, each once.
    both = find_runs(store.uri, "syps", {}, [store.new_m2_ss, store.new], True)
    assert sorted(r.run_id for r in both) == sorted(r.run_id for r in by_parent)
    # Several parent ids: all of them whatever `latest` says.
    two = find_runs(store.uri, "syps", {}, [store.old, store.new], True)
    assert {r.parent_name for r in two} == {"run-old", "run-new"}


def test_run_ids_across_experiments_tell_parents_of_one_name_apart(store: Store) -> None:
    table = _table(store, run_ids=(store.other, store.new), metrics=("n_items",))
    new, other = f"run-new ({store.new[:8]})", f"run-new ({store.other[:8]})"
    w = len(new)
    assert table.splitlines() == [
        "model  dataset  " + "run".ljust(w) + "  n_items",
        "-----  -------  " + "-" * w + "  -------",
        "m1     SS       " + new + "  10",
        "m1     SS       " + other + "  8",
        "m2     SS       " + new + "  4",
    ]


def test_run_ids_still_filtered_by_tag(store: Store) -> None:
    runs = find_runs(store.uri, "syps", {"git_commit": "aaa"}, [store.old, store.new], True)
    assert {r.parent_id for r in runs} == {store.old}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("nope", {}, []), "no experiment 'nope' in sqlite:///"),
        (("judged-only", {}, []), "experiment 'judged-only' has no pipeline runs"),
        (("syps", {"git_commit": "zzz"}, []), "no pipeline run in experiment 'syps' has tags"),
        (
            ("syps", {}, ["0123456789abcdef"]),
            "no pipeline run with id, id prefix, name or git commit '0123456789abcdef' in sqlite",
        ),
    ],
)
def test_nothing_matches_names_what_was_asked(
    store: Store, args: tuple[str, dict[str, str], list[str]], message: str
) -> None:
    with pytest.raises(InputError, match=message) as e:
        find_runs(store.uri, *args, True)
    if args[1]:
        assert "git_commit" in str(e.value) and "zzz" in str(e.value)


def test_a_run_is_found_as_a_person_types_it(mixed: Path) -> None:
    # `syps compare --run-id` reads what `syps audit` reads: here the name of the second run
    # and an 8-character prefix of the first's id each stand for that whole pipeline run.
    import mlflow

    uri = tracking_uri(mixed)
    client = mlflow.MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("syps")
    ids = {r.info.run_name: r.info.run_id for r in client.search_runs([exp.experiment_id])}
    by_name = find_runs(uri, "syps", {}, ["run-2"], True)
    assert {r.parent_id for r in by_name} == {ids["run-2"]} and len(by_name) == 2
    by_prefix = find_runs(uri, "syps", {}, [ids["run-1"][:8]], True)
    assert [r.parent_id for r in by_prefix] == [ids["run-1"]]


def test_judge_validation_run_id_is_refused(store: Store) -> None:
    with pytest.raises(InputError, match=f"{store.judge} is a judge-validation run"):
        find_runs(store.uri, "syps", {}, [store.judge], True)


def test_unknown_metric_is_an_error(store: Store) -> None:
    runs = find_runs(store.uri, "syps", {}, [], True)
    with pytest.raises(InputError, match=r"\['base_sync'\] not logged"):
        compare_table(runs, ["base_syc", "base_sync"], protocols=PROTOCOLS)


def test_parse_tags() -> None:
    assert parse_tags(["a=1", "b=x=y", "c="]) == {"a": "1", "b": "x=y", "c": ""}
    for bad in ["a", "=1"]:
        with pytest.raises(InputError, match=f"tag filter '{bad}'"):
            parse_tags([bad])


# --- the command ----------------------------------------------------------------------------

runner = CliRunner()


def test_cli_prints_the_table(store: Store) -> None:
    result = runner.invoke(app, ["compare", "--mlruns", str(store.mlruns)])
    assert result.exit_code == 0, result.output
    assert result.stdout == LATEST + "\n"


def test_cli_filters_and_writes_markdown(store: Store, tmp_path: Path) -> None:
    out = tmp_path / "t" / "compare.md"
    args = ["compare", "--mlruns", str(store.mlruns), "--tag", "git_commit=aaa", "--all"]
    args += ["--metric", "n_items", "--markdown", "--out", str(out)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    assert out.read_text(encoding="utf-8") == (
        "| model | dataset | n_items |\n"
        "|-------|---------|---------|\n"
        "| m1    | OEQ     | 2       |\n"
        "| m1    | SS      | 8       |\n"
    )
    assert [p.name for p in out.parent.iterdir()] == ["compare.md"]


def test_cli_run_ids(store: Store) -> None:
    args = ["compare", "--mlruns", str(store.mlruns), "--metric", "n_items"]
    result = runner.invoke(app, [*args, "--run-id", store.old, "--run-id", store.new_m2_ss])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[2:] == [
        "m1     OEQ      run-old  2",
        "m1     SS       run-old  8",
        "m2     SS       run-new  4",
    ]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--tag", "oops"], "tag filter 'oops' is not of the form key=value"),
        (["--experiment", "nope"], "no experiment 'nope'"),
        (["--metric", "nope"], "['nope'] not logged"),
    ],
)
def test_cli_bad_input_exits_2(store: Store, extra: list[str], message: str) -> None:
    result = runner.invoke(app, ["compare", "--mlruns", str(store.mlruns), *extra])
    assert result.exit_code == 2
    assert message in result.stderr


def test_cli_missing_store_is_not_created(tmp_path: Path) -> None:
    result = runner.invoke(app, ["compare", "--mlruns", str(tmp_path / "mlruns")])
    assert result.exit_code == 2
    assert "no MLflow store" in result.stderr
    assert not (tmp_path / "mlruns").exists()


def _run(model: str, metrics: dict[str, float], protocol: str = "cues") -> ComparedRun:
    return ComparedRun("r-" + model, "0", model, "SS", "p", "run-new", metrics, protocol)


def test_protocols_in_registry_order_and_a_column_only_for_several() -> None:
    # Registry order (cues, pushback, discernment, betting), a protocol it does not know after;
    # within a protocol by model.
    runs = [
        _run("m2", {"x": 1.0}, "betting"),
        _run("m1", {"x": 2.0}, "zzproto"),
        _run("m3", {"x": 3.0}, "pushback"),
        _run("m1", {"x": 4.0}, "betting"),
        _run("m4", {"x": 5.0}, "cues"),
        _run("m5", {"x": 6.0}, "aaproto"),
    ]
    assert [
        line.split() for line in compare_table(runs, ["x"], protocols=PROTOCOLS).splitlines()[2:]
    ] == [
        ["cues", "m4", "SS", "5.000"],
        ["pushback", "m3", "SS", "3.000"],
        ["betting", "m1", "SS", "4.000"],
        ["betting", "m2", "SS", "1.000"],
        ["aaproto", "m5", "SS", "6.000"],
        ["zzproto", "m1", "SS", "2.000"],
    ]
    # One protocol's runs, whichever: no protocol column.
    only = [r for r in runs if r.protocol == "betting"]
    assert compare_table(only, ["x"], protocols=PROTOCOLS).splitlines() == [
        "model  dataset  x",
        "-----  -------  -----",
        "m1     SS       4.000",
        "m2     SS       1.000",
    ]


def test_support_is_shown_and_low_support_marked_not_hidden() -> None:
    # m1: BaseSyc on 4 items (below score.min_items: marked), SPSS on 12; m2 logged no support
    # keys (a run from before they existed): its cells are as before.
    m1 = {
        **NEW_M1_SS,
        "base_syc_n": 4.0,
        "base_syc_ci_reps": 991.0,
        "base_syc_low_support": 1.0,
        "spss_n": 12.0,
        "spss_low_support": 0.0,
    }
    runs = [_run("m1", m1), _run("m2", NEW_M2_SS)]
    metrics = ["base_syc", "spss", "base_syc_n", "base_syc_ci_reps", "base_syc_low_support"]
    note = (
        "† low support: the CI rests on fewer than score.min_items items (its n); read it as a "
        "rough range."
    )
    assert compare_table(runs, metrics, "text", protocols=PROTOCOLS).splitlines() == [
        "model  dataset  base_syc                    spss                       base_syc_n"
        "  base_syc_ci_reps  base_syc_low_support",
        "-----  -------  --------------------------  -------------------------  ----------"
        "  ----------------  --------------------",
        "m1     SS       0.500 [0.250, 0.750] n=4 †  0.125 [0.000, 0.250] n=12  4         "
        "  991               1",
        "m2     SS       1.000 [1.000, 1.000]        0.000                      -         "
        "  -                 -",
        note,
    ]
    markdown = compare_table(runs, ["base_syc"], "markdown", protocols=PROTOCOLS).splitlines()
    assert markdown[2] == "| m1    | SS      | 0.500 [0.250, 0.750] n=4 † |"
    assert markdown[-2:] == ["", note]
    # Nothing marked: no note.
    assert "†" not in compare_table(
        [_run("m2", NEW_M2_SS)], ["base_syc"], "text", protocols=PROTOCOLS
    )


# --- protocols: one pipeline run with a SyPS child and a child of another protocol ------------

# A protocol with no module under syps.protocols: its headline is every key it logged.
TOY = "toyproto"
FOLLOW = "follow_rate/in_context/simple/named/fmt-objection/auto"
TOY_MCQ = {
    FOLLOW: 0.25,
    f"{FOLLOW}_ci_low": 0.0,
    f"{FOLLOW}_ci_high": 0.5,
    "contrast/naming/diff": -0.125,
    "p_val": 0.5,
}
SYPS_SS = {"base_syc": 0.5, "spss": 0.125, "signed_sensitivity": 0.0, "unclear_rate": 0.0}


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Experiment ``syps``: an older SyPS-only run (untagged, as before protocols), then a run
    with m/SS (SyPS, tagged cues) and toyproto/m/mcq."""
    from syps.core.tracking import ChildRun, log_pipeline_run

    mlruns = tmp_path_factory.mktemp("mixed") / "mlruns"
    # Children are named <run_prefix>/<model>/<dataset>; SyPS's prefix is empty.
    ss = ChildRun("m/SS", {"model": "m", "dataset": "SS"}, SYPS_SS, protocol="cues")
    older = {**SYPS_SS, "n_items": 3.0}
    log_pipeline_run(mlruns, "syps", "run-1", {}, [ChildRun("m/SS", ss.params, older)])
    toy = ChildRun(f"{TOY}/m/mcq", {"model": "m", "dataset": "mcq"}, TOY_MCQ, protocol=TOY)
    log_pipeline_run(mlruns, "syps", "run-2", {}, [ss, toy])
    return mlruns


def test_old_children_without_the_tag_are_cues(store: Store) -> None:
    runs = find_runs(store.uri, "syps", {}, [], False)
    assert len(runs) == 4 and {r.protocol for r in runs} == {"cues"}


def test_a_protocol_child_is_listed_with_its_protocol(mixed: Path) -> None:
    runs = find_runs(tracking_uri(mixed), "syps", {}, [], True)
    assert sorted((r.protocol, r.model, r.dataset) for r in runs) == [
        ("cues", "m", "SS"),
        (TOY, "m", "mcq"),
    ]
    # SyPS's headline where logged (run-2 logged no n_items), then the other protocol's
    # logged keys but its CI bounds, sorted.
    assert default_metrics(runs, protocols=PROTOCOLS) == [
        *DEFAULT_METRICS[:4],
        "contrast/naming/diff",
        FOLLOW,
        "p_val",
    ]
    # A protocol column appears; SyPS's rows come first.
    table = compare_table(runs, ["spss", FOLLOW], "text", protocols=PROTOCOLS).splitlines()
    assert [line.split() for line in table[:1] + table[2:]] == [
        ["protocol", "model", "dataset", "spss", FOLLOW],
        ["cues", "m", "SS", "0.125", "-"],
        [TOY, "m", "mcq", "-", "0.250", "[0.000,", "0.500]"],
    ]


def test_protocol_filter(mixed: Path) -> None:
    out = CliRunner().invoke(app, ["compare", "--mlruns", str(mixed), "--protocol", TOY])
    assert out.exit_code == 0, out.output
    # One protocol's runs: no protocol column.
    assert [line.split() for line in out.output.splitlines()[2:]] == [
        ["m", "mcq", "-0.125", "0.250", "[0.000,", "0.500]", "0.500"]
    ]
    # SyPS alone: the table as it was before protocols, the latest run with SyPS children.
    only = find_runs(tracking_uri(mixed), "syps", {}, [], True, "cues")
    assert [(r.parent_name, r.dataset) for r in only] == [("run-2", "SS")]
    assert compare_table(only, ["spss"], "text", protocols=PROTOCOLS).splitlines()[0].split() == [
        "model",
        "dataset",
        "spss",
    ]
    # Its old name means it too (the untagged older run's children are SyPS's).
    old_name = find_runs(tracking_uri(mixed), "syps", {}, [], False, "syps")
    assert [(r.parent_name, r.protocol) for r in old_name] == [("run-2", "cues"), ("run-1", "cues")]
    # --all with the filter: the older run has no toyproto child, so one row.
    assert len(find_runs(tracking_uri(mixed), "syps", {}, [], False, TOY)) == 1
    with pytest.raises(InputError, match="no child run of protocol 'nope'"):
        find_runs(tracking_uri(mixed), "syps", {}, [], True, "nope")


# --- fitting a terminal, and the numbers only a child's metrics table holds -------------------


def test_width_wraps_the_metric_columns_repeating_the_first_ones() -> None:
    runs = [_run("m1", {"aaaa": 1.0, "bbbb": 2.0, "cccc": 3.0})]
    # "model  dataset" is 14 characters and each metric column 2 + 5: at 30, two fit per block.
    assert compare_table(
        runs, ["aaaa", "bbbb", "cccc"], width=30, protocols=PROTOCOLS
    ).splitlines() == [
        "model  dataset  aaaa   bbbb",
        "-----  -------  -----  -----",
        "m1     SS       1.000  2.000",
        "",
        "model  dataset  cccc",
        "-----  -------  -----",
        "m1     SS       3.000",
    ]
    # No width: one block, as wide as it is.
    assert compare_table(runs, ["aaaa", "bbbb", "cccc"], protocols=PROTOCOLS).splitlines()[0] == (
        "model  dataset  aaaa   bbbb   cccc"
    )


def test_compare_tables_gives_each_protocol_its_own_headline_columns() -> None:
    from syps.core.compare import compare_tables

    runs = [
        _run("m1", {"beta_Z": -0.25, "base_syc": 9.0}, "betting"),
        _run("m1", {"base_syc": 0.5, "beta_Z": 9.0}, "cues"),
    ]
    # cues first (registry order), each with only its own headline metrics that were logged:
    # no column of dashes for the other protocol's.
    assert compare_tables(runs, protocols=PROTOCOLS).splitlines() == [
        "cues:",
        "model  dataset  base_syc",
        "-----  -------  --------",
        "m1     SS       0.500",
        "",
        "betting:",
        "model  dataset  beta_Z",
        "-----  -------  ------",
        "m1     SS       -0.250",
    ]


def test_a_metric_only_in_the_childs_table_is_compared(tmp_path: Path) -> None:
    from syps.core.tracking import ChildRun, log_pipeline_run

    mlruns = tmp_path / "mlruns"
    table = {"base_syc": 0.5, "mcnemar_p_P3": 0.125, "delta_P7": NAN}
    child = ChildRun(
        "m/SS", {"model": "m", "dataset": "SS"}, {"base_syc": 0.5}, protocol="cues", table=table
    )
    log_pipeline_run(mlruns, "syps", "run-1", {}, [child])
    (run,) = find_runs(tracking_uri(mlruns), "syps", {}, [], True)
    assert set(run.metrics) == {"base_syc", "mcnemar_p_P3", "delta_P7"}
    assert math.isnan(run.metrics["delta_P7"])
    assert compare_table([run], ["mcnemar_p_P3", "delta_P7"], protocols=PROTOCOLS).splitlines()[
        2
    ].split() == [
        "m",
        "SS",
        "0.125",
        "n/a",
    ]
    out = CliRunner().invoke(app, ["compare", "--mlruns", str(mlruns), "--all-metrics"])
    assert out.exit_code == 0, out.output
    assert out.output.splitlines()[0].split() == [
        "model",
        "dataset",
        "base_syc",
        "delta_P7",
        "mcnemar_p_P3",
    ]


# --- the default table fits 160 columns -----------------------------------------------------

# The betting child of the default study (dvc repro at 6cd181d) as MLflow holds it: seven of
# its nine headline metrics rest on 6 items, below score.min_items (10), so each carries a †.
LOW = {"_n": 6.0, "_low_support": 1.0}
BETTING = {
    **{f"beta_Z{k}": v for k, v in {"": -0.356, "_ci_low": -0.458, "_ci_high": -0.26}.items()},
    **{f"beta_N{k}": v for k, v in {"": -0.062, "_ci_low": -0.323, "_ci_high": 0.188}.items()},
    "sycophancy_N": 0.0,
    **{f"beta_F{k}": v for k, v in {"": -0.229, "_ci_low": -0.333, "_ci_high": -0.108}.items()},
    **{f"remorse{k}": v for k, v in {"": 0.294, "_ci_low": 0.031, "_ci_high": 0.562}.items()},
    "moral_remorse": 0.0,
    "overcompensation": 1.0,
    **{f"rho_Z{k}": v for k, v in {"": -0.044, "_ci_low": -0.177, "_ci_high": 0.083}.items()},
    **{f"accuracy_Z{k}": v for k, v in {"": 0.503, "_ci_low": 0.333, "_ci_high": 0.633}.items()},
    **{f"{m}{k}": v for m in ("beta_Z", "beta_N", "beta_F", "remorse", "rho_Z", "accuracy_Z")
       for k, v in LOW.items()},
}  # fmt: skip


def test_the_default_table_fits_160_columns_with_its_low_support_marks() -> None:
    from syps.core.compare import columns, compare_tables

    assert (columns("n=6 †"), columns("beta_Z"), columns("")) == (6, 6, 0)
    run = ComparedRun("r", "0", "smollm2-135m", "truthfulqa", "p", "run-new", BETTING, "betting")
    lines = compare_tables([run], "text", 160, protocols=PROTOCOLS).splitlines()
    # Columns on a terminal (the † two, as a CJK terminal draws it): model 12 and dataset 10,
    # with the gap 24; beta_Z "-0.356 [-0.458, -0.260] n=6 †" 29 characters, 30 columns; beta_N
    # "-0.062 [-0.323, 0.188] n=6 †" 28, 29; sycophancy_N its header, 12; beta_F 29, 30; remorse
    # "0.294 [0.031, 0.562] n=6 †" 26, 27. 24 + 2 + 30 + 2 + 29 + 2 + 12 + 2 + 30 = 133, and
    # remorse would make it 133 + 2 + 27 = 162: it opens the second block. (Counting the † as
    # one, the first block held remorse too: 158 characters, 166 bytes, 162 columns.)
    assert lines[0].split() == ["model", "dataset", "beta_Z", "beta_N", "sycophancy_N", "beta_F"]
    # Second block: 24 + 2 + 27 (remorse) + 2 + 13 (moral_remorse) + 2 + 16 (overcompensation)
    # + 2 + 29 (rho_Z "-0.044 [-0.177, 0.083] n=6 †", 28 characters) + 2 + 27 (accuracy_Z,
    # 26 characters) = 146 columns: the rest fits in one.
    second = ["model", "dataset", "remorse", "moral_remorse", "overcompensation", "rho_Z"]
    # Lines: header, rule, row, blank, header, rule, row, the note.
    assert lines[3] == "" and lines[4].split() == [*second, "accuracy_Z"]
    assert lines[7] == LOW_SUPPORT_NOTE and len(lines) == 8
    # Widest: the second block's row, 24 + 2 + 26 + 2 + 13 + 2 + 16 + 2 + 28 + 2 + 26 = 143
    # characters, 146 columns with its three †, 149 bytes (a † is three bytes in UTF-8).
    assert max(len(x) for x in lines) == 143
    assert max(columns(x) for x in lines) == 146
    assert max(len(x.encode("utf-8")) for x in lines) == 149


def test_cli_default_table_fits_160_columns(tmp_path: Path) -> None:
    from syps.core.compare import columns
    from syps.core.tracking import ChildRun, log_pipeline_run

    mlruns = tmp_path / "mlruns"
    params = {"model": "smollm2-135m", "dataset": "truthfulqa"}
    child = ChildRun("betting/smollm2-135m/truthfulqa", params, BETTING, protocol="betting")
    log_pipeline_run(mlruns, "syps", "run-1", {}, [child])
    # No terminal under the test runner: the default width is 160.
    out = CliRunner().invoke(app, ["compare", "--mlruns", str(mlruns)])
    assert out.exit_code == 0, out.output
    lines = out.stdout.splitlines()
    assert max(columns(x) for x in lines) == 146  # as in the test above
    assert [x.split()[2] for x in lines if x.startswith("model")] == ["beta_Z", "remorse"]
