"""Two runs with the same params give byte-identical outputs (greedy decoding).

`dvc repro` runs twice from scratch, in two fresh git copies of the repository, on the real
embedded model with a tiny config. Each copy has its own empty response store
(<copy>/.cache/store.sqlite), so the second run generates and judges everything again instead
of reading the first run's answers; only the converted model weights are shared
(SYPS_CACHE_DIR). The second copy is a copy of the first (its git repository included), taken
before either run, so both runs start from the same commit and MLflow records the same tags.

Every file under out/, metrics.json and dvc.lock is compared byte for byte; a PNG that differs
is also decoded, so the report says whether its pixels or only its metadata differ. The MLflow
child runs (one per model x dataset) must hold the same metrics and params.
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import copy_repo, tiny_params

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow
GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
    "GIT_AUTHOR_DATE": "2025-01-01T00:00:00+0000",
    "GIT_COMMITTER_DATE": "2025-01-01T00:00:00+0000",
}


def _fresh_copy(dest: Path) -> None:
    copy_repo(dest)
    tiny_params(dest)
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "tiny"]):
        subprocess.run(cmd, cwd=dest, check=True, env=_env())


def _env(model_cache: Path | None = None) -> dict[str, str]:
    env = {**os.environ, **GIT_IDENTITY}
    if model_cache is not None:
        env["SYPS_CACHE_DIR"] = str(model_cache)
    for var in ("DVC_ROOT", "DVC_EXP_NAME"):
        env.pop(var, None)
    return env


def _repro(dest: Path, model_cache: Path) -> str:
    assert not (dest / ".cache" / "store.sqlite").exists()
    res = subprocess.run(
        ["dvc", "repro"],
        cwd=dest,
        env=_env(model_cache),
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    return res.stdout + res.stderr


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, model_cache: Path) -> tuple[Path, Path]:
    # The second copy is a copy of the first, made before either runs: the working tree may
    # change while the first run runs, and both runs must start from the same commit.
    roots = [tmp_path_factory.mktemp(name) / "syps" for name in ("first", "second")]
    _fresh_copy(roots[0])
    shutil.copytree(roots[0], roots[1], symlinks=True)
    for root in roots:
        _repro(root, model_cache)
    return roots[0], roots[1]


def _compared_files(root: Path) -> set[str]:
    files = {
        str(p.relative_to(root))
        for d in ("out", "plots")  # plots/: the committed plot data
        for p in (root / d).rglob("*")
        if p.is_file()
    }
    return files | {"metrics.json", "dvc.lock"}


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


def test_the_second_run_really_regenerated(runs: tuple[Path, Path]) -> None:
    for root in runs:
        resp = pd.read_parquet(root / "out/responses/smollm2-135m.parquet")
        assert len(resp) == 48 and not resp["from_store"].any(), root


def test_outputs_are_byte_identical(runs: tuple[Path, Path]) -> None:
    first, second = runs
    names = _compared_files(first)
    assert names == _compared_files(second)
    # The outputs the issue names are all there.
    for expected in (
        "out/items.parquet",
        "out/prompts.parquet",
        "out/responses/smollm2-135m.parquet",
        "out/labels/smollm2-135m.parquet",
        "out/flips/index.html",
        "plots/profile.json",
        "out/figures/forest.png",
    ):
        assert expected in names
    assert any(n.startswith("out/flips/") and n.endswith(".csv") for n in names)

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


def _child_runs(root: Path) -> dict[tuple[str, str], tuple[dict[str, float], dict[str, str]]]:
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{root / 'mlruns' / 'mlflow.db'}")
    exp = client.get_experiment_by_name("syps")
    assert exp is not None
    children = [
        r
        for r in client.search_runs([exp.experiment_id], max_results=1000)
        if "mlflow.parentRunId" in r.data.tags
    ]
    return {
        (r.data.params["model"], r.data.params["dataset"]): (r.data.metrics, r.data.params)
        for r in children
    }


def _same(x: float, y: float) -> bool:
    return x == y or (math.isnan(x) and math.isnan(y))


def test_mlflow_child_runs_match(runs: tuple[Path, Path]) -> None:
    a, b = (_child_runs(root) for root in runs)
    assert len(a) == 3 and set(a) == set(b)
    differ = []
    for key in sorted(a):
        (ma, pa), (mb, pb) = a[key], b[key]
        assert set(ma) == set(mb), key
        differ += [f"{key} metric {m}: {ma[m]} vs {mb[m]}" for m in ma if not _same(ma[m], mb[m])]
        differ += [
            f"{key} param {k}: {pa.get(k)!r} vs {pb.get(k)!r}"
            for k in pa | pb
            if pa.get(k) != pb.get(k)
        ]
    assert differ == [], "\n".join(differ)
