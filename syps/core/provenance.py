"""What a pipeline run's numbers came from: the hashes of its config and templates, the MLflow
provenance tags, the data's md5 (from dvc.lock and data.dvc) and the code's git commit.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import yaml

from syps.core.config import Params, read_yaml
from syps.core.io import InputError, canonical_json, sha256_file, sha256_text


def pipeline_tags(
    p: Params,
    bundles: Mapping[str, Mapping[str, Any]],
    children: Sequence[Mapping[str, Any]],
    data_dvc: Path,
    results: tuple[str, ...],
) -> dict[str, str]:
    """The parent run's tags: code (git), data (md5s), provenance and ``syps.config_sha256``.

    ``bundles`` are the score stages' bundles by protocol, ``children`` the child runs (their
    params name each model's id and revision and each labeler). ``results`` are the committed
    files the pipeline itself rewrites (metrics, plot data): they are the run's results, not a
    change to the code that ran.
    """
    tags = {
        # The code that ran is the working directory (a temp copy for queued experiments).
        **git_info(Path.cwd(), exclude=("dvc.lock", *results)),
        "data_md5": locked_data_md5(data_dvc.parent / "dvc.lock") or data_md5(data_dvc),
        "data_dvc_md5": data_md5(data_dvc),
        "dvc_exp_name": os.environ.get("DVC_EXP_NAME", ""),
        **provenance_tags(p, bundles, children),
    }
    tags["syps.config_sha256"] = config_sha256(p, bundles)
    return tags


def results_sha256(tags: Mapping[str, str], bundles: Mapping[str, Mapping[str, Any]]) -> str:
    """What a pipeline run's numbers are and rest on, hashed: the commit and whether the tree
    was dirty, the config (params and templates), the data, and each protocol's metrics file as
    the score stage wrote it. Two clones of one commit that reproduce the same study give the
    same hash, whoever generated the responses; what each stage did in a run (its counts) is not
    part of it."""
    metrics = {
        n: sha256_file(Path(b["metrics"])) for n, b in sorted(bundles.items()) if "metrics" in b
    }
    keys = ("git_commit", "git_dirty", "syps.config_sha256", "data_md5")
    return sha256_text(
        canonical_json({"tags": {k: tags.get(k, "") for k in keys}, "metrics": metrics})
    )


def config_sha256(p: Params, bundles: Mapping[str, Mapping[str, Any]]) -> str:
    """The hash of the params and of every protocol's templates as they ran: it names the
    pipeline run in MLflow, with the commit."""
    return sha256_text(
        json.dumps(
            {
                "params": asdict(p),
                "templates": {n: b["templates_sha256"] for n, b in sorted(bundles.items())},
            },
            sort_keys=True,
            ensure_ascii=False,
            default=str,  # a Path or another non-JSON leaf, by its text
        )
    )


def provenance_tags(
    p: Params,
    bundles: Mapping[str, Mapping[str, Any]],
    children: Sequence[Mapping[str, Any]],
) -> dict[str, str]:
    """What a number came from, as MLflow tags: each protocol's params and template set hash
    (and its own tags, e.g. SyPS's per-variant template hashes), each model's id and revision
    (or weights hash), the judge, the seed and the tool versions."""
    tags: dict[str, str] = {}
    for name, b in bundles.items():
        tags[f"protocol.{name}.params"] = canonical_json(b["params"])
        tags[f"protocol.{name}.templates_sha256"] = str(b["templates_sha256"])
        tags.update({str(k): str(v) for k, v in b.get("tags", {}).items()})
    for c in children:
        m, cp = c["model"], c["params"]
        for col in ("model_id", "revision"):
            if col in cp:
                tags[f"model.{m}.{col}"] = str(cp[col])
        if str(cp.get("labeler", "")).startswith("judge:"):
            tags["judge.labeler"] = str(cp["labeler"])
    for m, spec in p.models.items():
        tags[f"model.{m}.spec"] = canonical_json(asdict(spec))
    tags["seed"] = str(p.seed)
    tags["judge.spec"] = canonical_json(
        {"model": asdict(p.judge.model), "min_margin": p.judge.min_margin}
    )
    for pkg in ("torch", "transformers", "dvc", "mlflow", "syps"):
        try:
            tags[f"version.{pkg}"] = version(pkg)
        except PackageNotFoundError:
            tags[f"version.{pkg}"] = "not installed"
    return tags


def locked_data_md5(lock: Path) -> str | None:
    """The md5 of ``data`` that dvc.lock records for the fetch stages: the data this pipeline
    run actually read. None when there is no lock (a stage run by hand before any repro)."""
    if not lock.exists():
        return None
    try:
        stages = yaml.safe_load(lock.read_text(encoding="utf-8"))["stages"]
        deps = [d for s, v in stages.items() if s.startswith("fetch@") for d in v["deps"]]
        md5 = next((d["md5"] for d in deps if d["path"] == "data"), None)
    except (OSError, KeyError, TypeError, yaml.YAMLError) as e:
        raise InputError(
            f"{lock}: cannot read the fetch stage's data md5 ({e!r}); restore dvc.lock "
            "from git or rerun `dvc repro`"
        ) from None
    if md5 is None:
        return None
    fix = "restore dvc.lock from git (`git checkout -- dvc.lock`) or rerun `dvc repro`"
    return _checked_md5(md5, f"{lock}: the fetch stage's data md5", fix)


def data_md5(data_dvc: Path) -> str:
    """The md5 that data.dvc records for the committed data directory."""
    fix = f"restore it with `git checkout -- {data_dvc}`"
    try:
        outs = yaml.safe_load(data_dvc.read_text(encoding="utf-8"))["outs"]
        md5 = outs[0]["md5"]
    except (OSError, KeyError, IndexError, TypeError, yaml.YAMLError) as e:
        raise InputError(f"{data_dvc}: cannot read the recorded md5 ({e!r}); {fix}") from None
    return _checked_md5(md5, f"{data_dvc}: recorded md5", fix)


def _checked_md5(md5: object, where: str, fix: str) -> str:
    """``md5`` if it is one (32 hex digits, ``.dir`` for a directory), else an error: a cut
    file must not put half a hash into the provenance."""
    if not (isinstance(md5, str) and re.fullmatch(r"[0-9a-f]{32}(\.dir)?", md5)):
        raise InputError(f"{where} {md5!r} is not an md5; {fix}")
    return md5


def git_info(root: Path, exclude: tuple[str, ...] = ("dvc.lock",)) -> dict[str, str]:
    """Commit and dirty flag of ``root``; 'unknown' outside a git checkout.

    ``exclude`` lists files the running pipeline itself rewrites (dvc.lock, the metrics file):
    they are the run's results, not a change to what produced them.
    """

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()

    try:
        commit = git("rev-parse", "HEAD")
        top = Path(git("rev-parse", "--show-toplevel")).resolve()
        inside = [(root / p).resolve() for p in exclude if (root / p).resolve().is_relative_to(top)]
        # A path outside the checkout cannot make it dirty, and git rejects it as a pathspec.
        pathspec = [".", *(f":(exclude){p}" for p in inside)]
        status = git("status", "--porcelain", "--untracked-files=no", "--", *pathspec)
    except (subprocess.CalledProcessError, FileNotFoundError):
        return {"git_commit": "unknown", "git_dirty": "unknown"}
    return {"git_commit": commit, "git_dirty": str(bool(status)).lower()}


def params_changes(params: Path, root: Path) -> list[str] | None:
    """The params keys (dotted paths; a list is one value) where ``params`` differs from its
    version in git's HEAD, added and removed keys included, sorted; None where there is no
    committed version (outside git, or never committed). What a run tried, for its name says
    only the commit and the config hash."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=root, capture_output=True, text=True, check=True
        ).stdout

    try:
        top = Path(git("rev-parse", "--show-toplevel").strip()).resolve()
        committed = git("show", f"HEAD:{params.resolve().relative_to(top).as_posix()}")
    except (subprocess.CalledProcessError, FileNotFoundError, ValueError):
        return None
    try:
        old = read_yaml(committed)
    except yaml.YAMLError:
        return None  # a committed file that does not parse: everything differs, nothing to name
    new = read_yaml(params.read_text(encoding="utf-8"))
    a, b = _flatten(old), _flatten(new)
    return sorted(k for k in a.keys() | b.keys() if a.get(k, _MISSING) != b.get(k, _MISSING))


_MISSING = object()


def _flatten(tree: object, prefix: str = "") -> dict[str, object]:
    if not isinstance(tree, dict) or not tree:
        return {prefix: tree} if prefix else {}
    out: dict[str, object] = {}
    for k, v in tree.items():
        out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    return out


def params_note(changes: list[str] | None, shown: int = 20) -> str:
    """The parent run's description (MLflow renders it as markdown) from
    :func:`params_changes`."""
    if changes is None:
        return "params.yaml: no committed version to compare with."
    if not changes:
        return "params.yaml as committed."
    keys = ", ".join(f"`{k}`" for k in changes[:shown])
    more = f" and {len(changes) - shown} more" if len(changes) > shown else ""
    return f"params.yaml differs from the committed file in {len(changes)} key(s): {keys}{more}."
