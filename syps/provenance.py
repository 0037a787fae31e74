"""What a pipeline run's numbers came from: the hashes of its config and templates, the
template set as rendered, the MLflow provenance tags, the data's md5 (from dvc.lock and data.dvc)
and the code's git commit.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pandas as pd

from syps.config import Params
from syps.io import InputError, canonical_json, sha256_text
from syps.protocols.cues.datasets import rule_datasets


def pipeline_tags(
    p: Params,
    shas: dict[tuple[str, str], str],
    labels: pd.DataFrame,
    data_dvc: Path,
    results: tuple[str, ...],
) -> dict[str, str]:
    """The parent run's tags: code (git), data (md5s), provenance and ``syps.config_sha256``.

    ``results`` are the committed files the score stage itself rewrites (metrics, plot data):
    they are the run's results, not a change to the code that ran.
    """
    tags = {
        # The code that ran is the working directory (a temp copy for queued experiments).
        **git_info(Path.cwd(), exclude=("dvc.lock", *results)),
        "data_md5": locked_data_md5(data_dvc.parent / "dvc.lock") or data_md5(data_dvc),
        "data_dvc_md5": data_md5(data_dvc),
        "dvc_exp_name": os.environ.get("DVC_EXP_NAME", ""),
        **provenance_tags(p, shas, labels),
    }
    tags["syps.config_sha256"] = config_sha256(p, shas)
    return tags


def config_sha256(p: Params, shas: dict[tuple[str, str], str]) -> str:
    """The hash of the params and the templates that ran (each variant's template sha256):
    it names the pipeline run in MLflow, with the commit."""
    import json

    return sha256_text(
        json.dumps(
            {
                "params": asdict(p),
                "templates": {f"{d}/{v}": h for (d, v), h in sorted(shas.items())},
            },
            sort_keys=True,
            ensure_ascii=False,
            default=str,  # a Path or another non-JSON leaf, by its text
        )
    )


def variant_shas(prompts: pd.DataFrame) -> dict[tuple[str, str], str]:
    """(dataset, variant id) -> template sha256; a cue with several wordings also gets a
    cue-level entry joining its wordings' hashes with "+" (its metrics pool them)."""
    from syps.config import cue_of

    rows = prompts.drop_duplicates(["dataset", "variant"])
    out = {
        (str(d), str(v)): str(h)
        for d, v, h in zip(rows["dataset"], rows["variant"], rows["template_sha256"], strict=True)
    }
    pooled: dict[tuple[str, str], list[str]] = {}
    for (d, v), h in sorted(out.items()):
        if cue_of(v) != v:
            pooled.setdefault((d, cue_of(v)), []).append(h)
    out.update({k: "+".join(hs) for k, hs in pooled.items()})
    return out


def template_set(p: Params) -> dict[str, Any]:
    """Every template exactly as rendered, with ``{situation}`` marking where the item goes:
    the artifact an audit reads to say which words produced a number."""
    from syps.protocols.cues.templates import system_text, template_sha256, user_text

    pos = p.templates.cue_position
    return {
        "cue_position": pos,
        "datasets": {
            d: {
                "task": tpl.task,
                "format": tpl.format,
                "variants": {
                    v: {
                        "cue": cue,
                        "template_sha256": template_sha256(d, v, tpl, pos),
                        "system": system_text(tpl),
                        "user": user_text("{situation}", cue, pos, tpl.format),
                    }
                    for v, cue in tpl.variant_cues().items()
                },
            }
            for d, tpl in p.templates.datasets.items()
            if d in p.data.datasets
        },
    }


def provenance_tags(
    p: Params, shas: dict[tuple[str, str], str], labels: pd.DataFrame
) -> dict[str, str]:
    """What a number came from, as MLflow tags: template hashes, each model's id and revision
    (or weights hash), the generation and judge settings, and the tool versions."""
    from importlib.metadata import PackageNotFoundError, version

    tags = {f"template_sha256.{d}.{v}": h for (d, v), h in shas.items()}
    for m, group in labels.groupby("model", sort=True):
        for col in ("model_id", "revision"):
            if col in group:
                tags[f"model.{m}.{col}"] = str(group[col].iloc[0])
        tags[f"model.{m}.spec"] = canonical_json(asdict(p.models[str(m)]))
    tags["generation"] = canonical_json(asdict(p.generation))
    tags["seed"] = str(p.seed)
    judged = (
        labels[labels["judge_template_sha256"] != ""]
        if "judge_template_sha256" in labels
        else labels.iloc[:0]
    )
    if len(judged):
        tags["judge.labeler"] = str(judged["labeler"].iloc[0])
        tags["judge.labeler_sha256"] = str(judged["labeler_sha256"].iloc[0])
        tags["judge.template_sha256"] = str(judged["judge_template_sha256"].iloc[0])
    tags["judge.spec"] = canonical_json(
        {
            "model": asdict(p.judge.model),
            "options": p.judge.options,
            "min_margin": p.judge.min_margin,
        }
    )
    for d in rule_datasets():
        if d in p.labels:
            tags[f"labels.{d}"] = canonical_json(p.labels[d])
    for pkg in ("torch", "transformers", "dvc", "mlflow", "syps"):
        try:
            tags[f"version.{pkg}"] = version(pkg)
        except PackageNotFoundError:
            tags[f"version.{pkg}"] = "not installed"
    return tags


def locked_data_md5(lock: Path) -> str | None:
    """The md5 of ``data`` that dvc.lock records for the fetch stage: the data this pipeline
    run actually read. None when there is no lock (a stage run by hand before any repro)."""
    import yaml

    if not lock.exists():
        return None
    try:
        deps = yaml.safe_load(lock.read_text(encoding="utf-8"))["stages"]["fetch"]["deps"]
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
    import yaml

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
