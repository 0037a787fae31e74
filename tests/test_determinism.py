"""Runs with the same params give byte-identical outputs (greedy decoding), whatever the state
of the response store.

`dvc repro` runs from scratch in fresh git copies of the repository, on the real embedded model
with a tiny config; only the converted model weights are shared (SYPS_CACHE_DIR).

* Cold: the slow tier's one run (conftest.one_run), on an empty response store of its own. That
  a second cold run gives the same bytes is the fresh clone's check (tests/test_fresh_clone.py:
  a cold `dvc repro` of the shipped study must leave dvc.lock, which holds the hash of every
  output, and every committed file as the commit's own cold run wrote them), so it is not run
  twice here.
* Warm, with a history: a copy of the same commit first runs a smaller study (SyPS's data.limit
  1), so its store holds half the responses, and judgements scored in batches of another
  composition (which moves a log-probability by up to ~2e-5 nats); then the shipped params
  again (half generated, half served), then SyPS's generate and label stages forced
  (everything served: `dvc repro -f -s`).

The copies are copies of one fresh copy (its git repository included: one_run.pristine, never
run), so all runs start from the same commit and MLflow records the same tags. Every file under
out/ (every protocol's), metrics/, plots/ and dvc.lock of the warm copy is compared with the cold
run's byte for byte; a PNG that differs is also decoded, so the report says whether its pixels or
only its metadata differ. The MLflow child runs of the cold run and of the warm copy's last
pipeline run (one per protocol x model x dataset) must hold the same params, and the same
metrics but for the counts of what the store served.
"""

from __future__ import annotations

import math
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import OneRun, repro, run_env

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow
MODEL = "smollm2-135m"


@pytest.fixture(scope="module")
def warm(
    one_run: OneRun, tmp_path_factory: pytest.TempPathFactory, model_cache: Path
) -> tuple[Path, list[str]]:
    """A third copy of the commit after a smaller SyPS study (its stages up to the labels
    alone: the other protocols and the scores take no part in the history), the shipped params,
    and a forced rerun of SyPS's generate and label stages; returns its root and the output of
    the last two runs."""
    root = tmp_path_factory.mktemp("warm") / "syps"
    shutil.copytree(one_run.pristine, root, symlinks=True)
    env = run_env(model_cache)
    params = root / "params.yaml"
    shipped = params.read_text()
    raw = yaml.safe_load(shipped)
    raw["protocols"]["cues"]["data"]["limit"] = 1
    params.write_text(yaml.safe_dump(raw, sort_keys=False))
    stages = [f"{step}@cues-{MODEL}" for step in ("generate", "label")]
    repro(root, env, stages[1])
    params.write_text(shipped)
    return root, [repro(root, env), repro(root, env, "-f", "-s", *stages)]


def _compared_files(root: Path) -> set[str]:
    """Every versioned output (out/, and the committed metrics/ and plot data in plots/);
    out/run-log/ is each run's own record (what it generated, when), which differs between runs
    by design and is in no DVC output."""
    files = {
        str(p.relative_to(root))
        for d in ("out", "metrics", "plots")
        for p in (root / d).rglob("*")
        if p.is_file() and not p.relative_to(root).is_relative_to("out/run-log")
    }
    return files | {"dvc.lock"}


def _png_pixels_equal(a: Path, b: Path) -> bool:
    from matplotlib import image

    pa, pb = image.imread(a), image.imread(b)
    return pa.shape == pb.shape and bool(np.array_equal(pa, pb))


def _first_difference(a: bytes, b: bytes) -> str:
    i = next((k for k, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    return (
        f"sizes {len(a)} vs {len(b)}, first difference at byte {i}: "
        f"{a[max(0, i - 20) : i + 40]!r} vs {b[max(0, i - 20) : i + 40]!r}"
    )


def test_the_cold_run_generated_everything(one_run: OneRun) -> None:
    # Each stage's own log line is the record of what the run did.
    assert f"generate cues {MODEL}: 48 rows, 48 generated, 0 repeats" in one_run.log


def _assert_same_outputs(first: Path, second: Path) -> None:
    names = _compared_files(first)
    assert names == _compared_files(second)
    # The outputs the issue names are all there.
    cues = "out/protocols/cues"
    for expected in (
        f"{cues}/items.parquet",
        f"{cues}/lint.json",
        f"{cues}/responses/smollm2-135m.parquet",
        f"{cues}/labels/smollm2-135m.parquet",
        f"{cues}/figures/tables/flips/index.html",
        f"{cues}/figures/png/forest.png",
        "out/tracks/cues.json",
        "metrics/cues.json",
        "plots/cues/profile.json",
        "plots/cues/templates.json",
        # and the other protocols'
        "out/protocols/pushback/labels/smollm2-135m.parquet",
        "metrics/betting.json",
        "plots/discernment/templates.json",
    ):
        assert expected in names
    assert any(n.startswith(f"{cues}/figures/tables/flips/") and n.endswith(".csv") for n in names)

    differ = []
    for name in sorted(names):
        a, b = (first / name).read_bytes(), (second / name).read_bytes()
        if a == b:
            continue
        if name.endswith(".png"):
            same = _png_pixels_equal(first / name, second / name)
            kind = "metadata only, pixels equal" if same else "pixels differ"
            differ.append(f"{name}: PNG bytes differ ({kind}); {_first_difference(a, b)}")
        else:
            differ.append(f"{name}: {_first_difference(a, b)}")
    print(f"compared {len(names)} files")
    assert differ == [], f"{len(differ)} of {len(names)} files differ:\n" + "\n".join(differ)


def _judged(log: str) -> tuple[int, int]:
    """SyPS's label stage: (judged now, served: repeats within the run or from the store)."""
    m = re.search(
        rf"label cues {MODEL}: .*; judge: (\d+) judged, (\d+) repeats of an earlier verdict in "
        r"this run, (\d+) served from the store \(earlier runs\)",
        log,
    )
    assert m is not None, log
    return int(m.group(1)), int(m.group(2)) + int(m.group(3))


def test_a_warm_store_with_a_history_gives_the_same_bytes(
    one_run: OneRun, warm: tuple[Path, list[str]]
) -> None:
    root, (partial, forced) = warm
    # The smaller study left the first item of each dataset (3 x 8 prompts) in the store.
    assert (
        f"generate cues {MODEL}: 48 rows, 24 generated, 0 repeats of an earlier request in "
        "this run, 24 served from the store (earlier runs)"
    ) in partial
    # Its 8 OEQ judge prompts were scored in a batch of their own, the other 8 now (fewer if
    # two 6-token responses of an item coincide: one judge prompt, counted once).
    judged, served = _judged(partial)
    assert judged + served == 16 and served >= 8 and judged >= 1
    # The forced rerun computes nothing: every response and judgement comes from the store.
    assert f"generate cues {MODEL}: 48 rows, 0 generated, 0 repeats" in forced
    assert "48 served from the store (earlier runs)" in forced
    assert _judged(forced) == (0, 16)
    # dvc.lock, the metrics and every output: the cold run's bytes.
    _assert_same_outputs(one_run.root, root)
    # MLflow holds the one pipeline run (the history and the forced stages logged nothing): it
    # generated the 8 prompts of each dataset's second item and was served the first's.
    [logged] = _parent_children(root)
    for dataset in ("OEQ", "AITA-YTA", "SS"):
        assert logged[dataset]["generated"] == 8 and logged[dataset]["served_from_store"] == 8


def _parent_children(root: Path) -> list[dict[str, dict[str, float]]]:
    """Per pipeline run, newest first: dataset -> its SyPS child run's metrics."""
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{root / 'mlruns' / 'mlflow.db'}")
    exp = client.get_experiment_by_name("syps")
    assert exp is not None
    runs = client.search_runs(
        [exp.experiment_id], max_results=1000, order_by=["attributes.start_time DESC"]
    )
    return [
        {
            c.data.params["dataset"]: dict(c.data.metrics)
            for c in runs
            if c.data.tags.get("mlflow.parentRunId") == p.info.run_id
            and c.data.params["protocol"] == "cues"
        }
        for p in runs
        if "mlflow.parentRunId" not in p.data.tags
    ]


# A child run's metrics that count what the store served rather than what was measured
# (syps.core.runs.RUN_LOG_COUNTS and usage_summary's served and saved amounts): the warm run's
# differ from the cold run's by design, as test_a_warm_store_with_a_history_gives_the_same_bytes
# asserts.
STORE_STATE = {
    "generated",
    "served_from_store",
    "judged",
    "judge_served_from_store",
    "tokens_sent_served",
    "tokens_received_served",
    "cost_saved_usd",
}


def _store_state(metric: str) -> bool:
    """A store-state count: one of STORE_STATE, a turn's (``turn2_simulator_generated``) or the
    simulated user's (``simulator_tokens_sent_served``)."""
    stem = metric.removeprefix("simulator_")
    turn = metric.startswith("turn") and metric.endswith(("_generated", "_served_from_store"))
    return stem in STORE_STATE or turn


def _child_runs(
    root: Path, newest_only: bool = False
) -> dict[tuple[str, str, str], tuple[dict[str, float], dict[str, str]]]:
    """(protocol, model, dataset) -> a child run's metrics and params: of every pipeline run,
    or of the newest one only."""
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{root / 'mlruns' / 'mlflow.db'}")
    exp = client.get_experiment_by_name("syps")
    assert exp is not None
    runs = client.search_runs(
        [exp.experiment_id], max_results=1000, order_by=["attributes.start_time DESC"]
    )
    parents = [r.info.run_id for r in runs if "mlflow.parentRunId" not in r.data.tags]
    keep = set(parents[:1] if newest_only else parents)
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") in keep]
    return {
        (r.data.params["protocol"], r.data.params["model"], r.data.params["dataset"]): (
            r.data.metrics,
            r.data.params,
        )
        for r in children
    }


def _same(x: float, y: float) -> bool:
    return x == y or (math.isnan(x) and math.isnan(y))


def test_mlflow_child_runs_match(one_run: OneRun, warm: tuple[Path, list[str]]) -> None:
    a, b = _child_runs(one_run.root), _child_runs(warm[0], newest_only=True)
    assert len(a) == 7 and set(a) == set(b)  # SyPS's 3 datasets, one each for 4 protocols
    differ = []
    for key in sorted(a):
        (ma, pa), (mb, pb) = a[key], b[key]
        assert set(ma) == set(mb), key
        differ += [
            f"{key} metric {m}: {ma[m]} vs {mb[m]}"
            for m in ma
            if not _store_state(m) and not _same(ma[m], mb[m])
        ]
        differ += [
            f"{key} param {k}: {pa.get(k)!r} vs {pb.get(k)!r}"
            for k in pa | pb
            if pa.get(k) != pb.get(k)
        ]
    assert differ == [], "\n".join(differ)
