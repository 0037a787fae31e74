"""The five pipeline steps as plain functions: read inputs, call the pure core, write atomically.

``stages/*.py`` (what ``dvc.yaml`` runs) and the ``syps`` CLI both call these, so a stage can be
rerun by hand with exactly the behaviour DVC gets. Paths always come from the caller.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from syps import labels as lab
from syps.backends import (
    GenRequest,
    GenResult,
    OptionScores,
    SamplingParams,
    load_backend,
    model_identity,
    model_size,
)
from syps.config import ConfigError, JudgeParams, ModelSpec, Params, load_params
from syps.data import load_items
from syps.io import (
    InputError,
    canonical_json,
    read_parquet,
    sha256_file,
    sha256_text,
    write_json,
    write_parquet,
)
from syps.store import Store, generation_key, judge_key
from syps.templates import PROMPT_COLUMNS, fill, messages_json, parse_messages, render_variants

KEY = ["dataset", "item_id", "variant"]


def repo_root() -> Path:
    """The repository that owns caches and mlruns/.

    Queued ``dvc exp`` runs execute in a temporary copy but get the parent repo as DVC_ROOT,
    so every run shares one model cache and one MLflow store.
    """
    return Path(os.environ.get("DVC_ROOT") or Path.cwd()).resolve()


def cache_dir() -> Path:
    """The model cache: converted model weights (``models/``) and the weights-hash memo
    (``hashes.json``), in ``$SYPS_CACHE_DIR``, else ``<repo>/.cache``.

    Its contents are named by the weights' hashes, so one directory can serve several clones.
    The response store is not here: see :func:`store_path`.
    """
    return Path(os.environ.get("SYPS_CACHE_DIR") or repo_root() / ".cache")


def fetch(params: Path, out: Path) -> None:
    """Read the configured datasets into the normalised items table."""
    p = load_params(params)
    items = load_items(p.data, Path.cwd())
    write_parquet(items, out)
    counts = items.groupby("dataset", sort=False).size()
    print("items: " + ", ".join(f"{d}={n}" for d, n in counts.items()), file=sys.stderr)


def variants(params: Path, items: Path, out: Path) -> None:
    """Render every item under every variant of its dataset."""
    p = load_params(params)
    table = read_parquet(items, ["dataset", "item_id", "situation"])
    write_parquet(render_variants(table, p.templates), out)


def store_path() -> Path:
    """The response store: ``<repo>/.cache/store.sqlite``, outside DVC's outputs, shared by
    queued runs (through DVC_ROOT).

    ``$SYPS_CACHE_DIR`` does not move it: the store holds this project's answers, so deleting
    the project's ``.cache/`` resets them, while a model cache shared between clones (or test
    runs) shares weights, never answers.
    """
    return repo_root() / ".cache" / "store.sqlite"


def _lookup(
    store: Store, keys: list[str]
) -> tuple[dict[str, int], dict[str, dict[str, Any]], list[str]]:
    """The first row of each distinct key, the stored records, and the distinct keys missing.

    A key that occurs on several rows is produced once; "cached" in the progress line counts
    every row that will not be freshly produced, repeats included.
    """
    first: dict[str, int] = {}
    for i, k in enumerate(keys):
        first.setdefault(k, i)
    records = store.get_many(keys)
    return first, records, [k for k in first if k not in records]


def generate(params: Path, prompts: Path, model: str, out: Path) -> None:
    """Generate one response per prompt with model ``model`` (a key of ``models``).

    Every prompt is looked up in the response store first; only misses are generated (and the
    model is loaded only if there are any). Each finished batch is stored at once, so a crashed
    run resumes where it stopped. The output is always the full table.
    """
    p = load_params(params)
    spec = _model_spec(p, model)
    identity = model_identity(spec, cache_dir(), f"models.{model}")  # fails before any work
    table = read_parquet(prompts, PROMPT_COLUMNS)
    sampling = SamplingParams(p.generation.temperature, p.generation.top_p, p.seed)
    max_new = [p.generation.max_new_tokens[d] for d in table["dataset"]]
    keys = [
        generation_key(identity, m, n, sampling.key_fields())
        for m, n in zip(table["messages"], max_new, strict=True)
    ]
    with Store(store_path()) as store:
        first, records, todo = _lookup(store, keys)
        print(
            f"store: {len(keys) - len(todo)} of {len(keys)} responses cached, "
            f"{len(todo)} to generate",
            file=sys.stderr,
        )
        if todo:
            requests = [
                GenRequest(
                    table["prompt_sha256"].iat[first[k]],
                    parse_messages(table["messages"].iat[first[k]]),
                    max_new[first[k]],
                    "/".join(str(table[c].iat[first[k]]) for c in KEY),
                )
                for k in todo
            ]

            def persist(idx: list[int], results: list[GenResult]) -> None:
                done = [(todo[i], asdict(r)) for i, r in zip(idx, results, strict=True)]
                store.put_many("generation", done)

            backend = load_backend(spec, cache_dir())
            results = backend.generate(requests, sampling, persist)
            records.update({k: asdict(r) for k, r in zip(todo, results, strict=True)})
    fresh = {first[k] for k in todo}
    recs = [records[k] for k in keys]
    responses = table[[*KEY, "template_sha256", "prompt_sha256"]].assign(
        model=model,
        model_id=identity["model_id"],
        revision=identity["revision"],
        max_new_tokens=max_new,
        temperature=sampling.temperature,
        top_p=sampling.top_p,
        seed=sampling.seed,
        response=[r["text"] for r in recs],
        prompt_tokens=[r["prompt_tokens"] for r in recs],
        completion_tokens=[r["completion_tokens"] for r in recs],
        finish_reason=[r["finish_reason"] for r in recs],
        store_key=keys,
    )
    write_parquet(responses, out)
    # What this run did is a fact about the run, not about the responses (a cold and a warm
    # store give the same file), so it goes to the run log, never into the versioned output.
    # A prompt that occurs twice is generated once; only its first row counts as generated.
    generated = pd.Series([i in fresh for i in range(len(keys))], index=table.index)
    counts = {
        str(d): {
            "rows": int(len(g)),
            "generated": int(g.sum()),
            "served_from_store": int(len(g) - g.sum()),
        }
        for d, g in generated.groupby(table["dataset"], sort=False)
    }
    line = (
        f"generate {model}: {len(keys)} responses, {len(fresh)} generated, "
        f"{len(keys) - len(fresh)} served from the store"
    )
    print(line, file=sys.stderr)
    write_run_log(out, "generate", model, line, counts)


RUN_LOG = "run-log"


def run_log_path(outputs: Path, stage: str, model: str) -> Path:
    """Where ``stage`` leaves the record of its last run for ``model``:
    ``<outputs>/run-log/<stage>.<model>.json``, with ``outputs`` the directory above the
    stage's own output folder (``out/``).

    It sits in the working copy (each queued experiment has its own), beside DVC's outputs but
    not one of them and not inside a declared dependency, so it never enters ``dvc.lock``.
    """
    return outputs / RUN_LOG / f"{stage}.{model}.json"


def write_run_log(
    out: Path, stage: str, model: str, line: str, counts: dict[str, dict[str, int]]
) -> None:
    """Record what this run of ``stage`` did (its log line, counts per dataset), tied to the
    output it wrote by that file's sha256; the score stage logs it to MLflow."""
    from datetime import UTC, datetime

    record = {
        "stage": stage,
        "model": model,
        "line": line,
        "datasets": counts,
        "output": str(out),
        "output_sha256": sha256_file(out),
        "finished": datetime.now(UTC).isoformat(timespec="seconds"),
        "logged_in_run": None,
    }
    write_json(record, run_log_path(out.parent.parent, stage, model))


def read_run_log(outputs: Path, stage: str, model: str, output: Path) -> dict[str, Any] | None:
    """The record of ``stage``'s last run for ``model`` if that run wrote ``output`` as it is
    now and no pipeline run has logged it yet; else None: this pipeline run did not run the
    stage (DVC found the output up to date, or restored it from its run cache)."""
    import json

    path = run_log_path(outputs, stage, model)
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # no record, or a damaged one: it cannot vouch for anything
    if (
        not isinstance(record, dict)
        or record.get("logged_in_run") is not None
        or not output.exists()
        or record.get("output_sha256") != sha256_file(output)
    ):
        return None
    return record


def mark_run_log_logged(outputs: Path, stage: str, model: str, run_id: str) -> None:
    """Note that a pipeline run logged this record, so the next one does not claim it."""
    import json

    path = run_log_path(outputs, stage, model)
    record = json.loads(path.read_text(encoding="utf-8"))
    write_json({**record, "logged_in_run": run_id}, path)


def _model_spec(p: Params, model: str) -> ModelSpec:
    if model not in p.models:
        raise ConfigError(f"models: no entry {model!r}; known: {sorted(p.models)}")
    return p.models[model]


def rule_labeler_sha256(dataset: str, mapping: dict[str, int]) -> str:
    """Identity of a rule labeler: its patterns, mention rules and verdict mapping."""
    return sha256_text(canonical_json({**lab.rules_fingerprint(dataset), "map": mapping}))


def judge_sha256(judge: JudgeParams, revision: str) -> str:
    """Identity of the judge: template, answer options, margin and model weights."""
    return sha256_text(
        canonical_json(
            {
                "system": judge.system,
                "template": judge.template,
                "options": judge.options,
                "min_margin": judge.min_margin,
                "model": judge.model.model,
                "revision": revision,
            }
        )
    )


def label(params: Path, items: Path, responses: Path, out: Path) -> None:
    """Label every response: rules for AITA-YTA and SS, the LLM judge for OEQ."""
    p = load_params(params)
    resp = read_parquet(responses, [*KEY, "model", "response", "prompt_sha256"])
    situations = read_parquet(items, ["dataset", "item_id", "situation"])
    resp = resp.merge(
        situations[["dataset", "item_id", "situation"]], on=["dataset", "item_id"], how="left"
    )
    judged: dict[str, int] = {}
    table = label_responses(p, resp, judged)
    n_unclear = int(table["label"].isna().sum())
    print(f"labels: {len(table)} rows, {n_unclear} UNCLEAR", file=sys.stderr)
    write_parquet(table, out)
    # As in generate: what the judge computed and what the store served is the run's record.
    n_judged = judged.get("judged", 0)
    n_served = judged.get("served_from_store", 0)
    counts = {
        str(d): {
            "rows": int(len(g)),
            "unclear": int(g["label"].isna().sum()),
            # Only OEQ goes to the judge; the rules label the other datasets.
            "judged": n_judged if d == "OEQ" else 0,
            "judge_served_from_store": n_served if d == "OEQ" else 0,
        }
        for d, g in table.groupby("dataset", sort=False)
    }
    line = (
        f"label {out.stem}: {len(table)} rows, {n_unclear} UNCLEAR; judge: {n_judged} judged, "
        f"{n_served} served from the store"
    )
    print(line, file=sys.stderr)
    write_run_log(out, "label", out.stem, line, counts)


def label_responses(
    p: Params, resp: pd.DataFrame, tally: dict[str, int] | None = None
) -> pd.DataFrame:
    """Label a responses table (``dataset, item_id, variant, model, prompt_sha256, situation,
    response``): rules for AITA-YTA and SS, the judge (through the store) for OEQ.

    Every row records who labelled it (``labeler``, ``labeler_sha256``), the verdict and its
    evidence; judged rows also carry the judge template sha256 and the judge's raw answer.
    ``tally``, if given, receives how many OEQ rows were judged now (``judged``) and how many
    the store served (``served_from_store``).
    """
    parts = []
    for dataset, group in resp.groupby("dataset", sort=False):
        ds = str(dataset)
        if ds == "OEQ":
            parts.append(_judge(p.judge, group, tally))
        else:
            if ds not in p.labels:
                raise ConfigError(f"labels: no verdict mapping for dataset {ds!r}")
            mapping = p.labels[ds]
            recs = [lab.rule_label(ds, r, mapping) for r in group["response"]]
            parts.append(_label_frame(group, recs, f"rule:{ds}", rule_labeler_sha256(ds, mapping)))
    table = pd.concat(parts, ignore_index=True).sort_values(KEY, kind="stable")
    return table.reset_index(drop=True)


def judge_template_sha256(judge: JudgeParams) -> str:
    """Identity of the judge's prompt: what it is asked and which answers it may give.

    ``min_margin`` is left out: it is applied to stored log-probabilities, so changing it
    relabels without asking the judge again.
    """
    return sha256_text(
        canonical_json(
            {"system": judge.system, "template": judge.template, "options": judge.options}
        )
    )


def _judge(
    judge: JudgeParams, group: pd.DataFrame, tally: dict[str, int] | None = None
) -> pd.DataFrame:
    """Judge OEQ responses through the store: a response is never judged twice the same way."""
    options = list(judge.options)
    identity = model_identity(judge.model, cache_dir(), "judge.model")
    prompts = [
        messages_json(
            judge.system,
            fill(judge.template, {"situation": s, "response": r}, "judge.template"),
        )
        for s, r in zip(group["situation"], group["response"], strict=True)
    ]
    t_sha = judge_template_sha256(judge)
    keys = [judge_key(identity, t_sha, m) for m in prompts]
    with Store(store_path()) as store:
        first, records, todo = _lookup(store, keys)
        print(f"store: {len(keys) - len(todo)} of {len(keys)} judgements cached", file=sys.stderr)
        if todo:

            def persist(idx: list[int], scores: OptionScores) -> None:
                rows = [
                    (
                        todo[i],
                        {
                            "options": options,
                            "logprobs": [float(x) for x in row],
                            "raw": raw,
                            **scores.usage(j),  # API judges: the tokens it cost
                        },
                    )
                    for j, (i, row, raw) in enumerate(
                        zip(idx, scores.logprobs, scores.raw, strict=True)
                    )
                ]
                store.put_many("judge", rows)

            backend = load_backend(judge.model, cache_dir())
            todo_prompts = [parse_messages(prompts[first[k]]) for k in todo]
            backend.option_logprobs(todo_prompts, options, persist)
            records.update(store.get_many(todo))
    if tally is not None:
        # A prompt that occurs twice is judged once; only its first row counts as judged.
        tally["judged"] = len(todo)
        tally["served_from_store"] = len(keys) - len(todo)
    logprobs = np.array([records[k]["logprobs"] for k in keys], dtype=float).reshape(
        len(keys), len(options)
    )
    recs = lab.judge_labels(logprobs, options, judge.options, judge.min_margin)
    name = f"judge:{identity['model_id']}@{identity['revision']}"
    frame = _label_frame(group, recs, name, judge_sha256(judge, identity["revision"]))
    # Records stored before the raw answer was kept have none: "" rather than a guess.
    return frame.assign(
        judge_template_sha256=t_sha, judge_raw=[str(records[k].get("raw", "")) for k in keys]
    )


def _label_frame(
    group: pd.DataFrame, recs: list[lab.Label], labeler: str, sha: str
) -> pd.DataFrame:
    optional = ("template_sha256", "model_id", "revision")
    cols = [*KEY, "model", "prompt_sha256"] + [c for c in optional if c in group]
    return group[cols].assign(
        label=[r.value for r in recs],
        verdict=[r.verdict for r in recs],
        evidence=[r.evidence for r in recs],
        labeler=labeler,
        labeler_sha256=sha,
        judge_template_sha256="",
        judge_raw="",
    )


def score(
    params: Path,
    items: Path,
    prompts: Path,
    responses: Path,
    labels: Path,
    data_dvc: Path,
    metrics: Path,
    plots: Path,
    figures: Path,
    flips: Path,
    tracks: Path | None = None,
) -> None:
    """Score every model's labels; write metrics, plot data, figures and flip tables; log to
    MLflow, with the children of every enabled protocol (their bundles in ``tracks``, see
    :func:`syps.protocols.stages.tracked_protocols`); print the summary.

    ``responses`` and ``labels`` are the directories holding one ``<model>.parquet`` per model
    in params; ``plots``, ``figures`` and ``flips`` are output directories. Without ``tracks``
    only SyPS is logged.
    """
    from syps.figures import heatmap_data, write_figures
    from syps.flips import write_flip_tables
    from syps.metrics import LABEL_COLUMNS, score_labels
    from syps.report import jsonable, jsonable_records, profile_figure, summary_table
    from syps.tracking import ChildRun, git_info, log_pipeline_run, pipeline_run_name

    p = load_params(params)
    table = pd.concat(
        [
            read_parquet(
                labels / f"{m}.parquet",
                [*LABEL_COLUMNS, "verdict", "evidence", "labeler", "labeler_sha256"],
            )
            for m in p.models
        ],
        ignore_index=True,
    )
    variants = {d: list(t.variant_cues()) for d, t in p.templates.datasets.items()}
    check_unclear(p, table)  # before the bootstrap: a failing run should fail fast
    scores = score_labels(
        table[LABEL_COLUMNS], p.score.bootstrap, p.score.ci, p.seed, variants, p.score.min_items
    )
    write_json(jsonable(scores), metrics)
    template_table = read_parquet(prompts, ["dataset", "variant", "template_sha256"])
    shas = variant_shas(template_table)
    # The prompt-wise profile is the heatmap's rows: one per (model, dataset, cue).
    prof = heatmap_data(scores)
    prof = prof.assign(
        template_sha256=[
            shas.get(k, "") for k in zip(prof["dataset"], prof["variant"], strict=True)
        ]
    )
    # JSON keeps numbers numeric for the vega-lite template (CSV hands it strings).
    write_json(jsonable_records(prof), plots / "profile.json")
    sizes = {m: model_size(spec, cache_dir()) for m, spec in p.models.items()}
    combined = write_figures(scores, sizes, figures, plots, shas)
    templates_json = plots / "templates.json"
    write_json(template_set(p), templates_json)
    resp = pd.concat(
        [read_parquet(responses / f"{m}.parquet", [*KEY, "model", "response"]) for m in p.models],
        ignore_index=True,
    )
    situations = read_parquet(items, ["dataset", "item_id", "situation"])
    write_flip_tables(table, resp, situations, flips)

    tags = {
        # The code that ran is the working directory (a temp copy for queued experiments);
        # the committed files this stage rewrites (metrics, plot data) are results, not code.
        **git_info(Path.cwd(), exclude=("dvc.lock", str(metrics), str(plots))),
        "data_md5": _locked_data_md5(data_dvc.parent / "dvc.lock") or _data_md5(data_dvc),
        "data_dvc_md5": _data_md5(data_dvc),
        "dvc_exp_name": os.environ.get("DVC_EXP_NAME", ""),
        **provenance_tags(p, shas, table),
    }
    config_sha = config_sha256(p, shas)
    tags["syps.config_sha256"] = config_sha
    run_name = pipeline_run_name(tags, config_sha, os.environ.get("DVC_EXP_NAME", ""))
    # What generate and label did in this pipeline run, from their run logs (see write_run_log).
    outputs = responses.parent
    records = {
        (stage, m): read_run_log(outputs, stage, m, folder / f"{m}.parquet")
        for m in p.models
        for stage, folder in (("generate", responses), ("label", labels))
    }
    for (stage, m), rec in records.items():
        tags[f"run_log.{stage}.{m}"] = rec["line"] if rec else NOT_RUN
    children = []
    for (model, dataset), group in table.groupby(["model", "dataset"], sort=True):
        m, d = str(model), str(dataset)
        fig = figures / f"{m}__{d}.png"
        profile_figure(prof[(prof["model"] == m) & (prof["dataset"] == d)], f"{m} · {d}", fig)
        first = group.iloc[0]
        spec = p.models[m]
        child_params = {
            "model": m,
            "model_spec": spec.model,
            "model_id": str(first.get("model_id", "")),
            "revision": str(first.get("revision", "")),
            "dataset": d,
            "max_new_tokens": str(p.generation.max_new_tokens[d]),
            "temperature": str(p.generation.temperature),
            "top_p": str(p.generation.top_p),
            "seed": str(p.seed),
            "bootstrap_B": str(p.score.bootstrap),
            "ci": str(p.score.ci),
            "labeler": str(group["labeler"].iloc[0]),
            "labeler_sha256": str(group["labeler_sha256"].iloc[0]),
        }
        run_metrics: dict[str, float] = {}
        for stage, names in RUN_LOG_COUNTS.items():
            rec = records[(stage, m)]
            child_params[f"{stage}_ran"] = str(rec is not None).lower()
            counts = rec["datasets"].get(d, {}) if rec else {}
            run_metrics.update({n: float(counts.get(n, 0)) for n in names})
        # The child's flip tables: one CSV and one HTML page per cue.
        children.append(
            ChildRun(
                f"{m}/{d}",
                child_params,
                {**scores[m][d], **run_metrics},
                [fig, (flips / m / d, "flips")],
            )
        )
    # The conversation protocols' children join this parent (read before logging: a stale or
    # missing bundle fails the stage before anything is logged).
    from syps.protocols.stages import tracked_protocols

    p_children, p_tags, p_artifacts, p_consumed = (
        tracked_protocols(p, tracks, outputs) if tracks is not None else ([], {}, [], [])
    )
    tags.update(p_tags)
    children += [
        ChildRun(c["name"], c["params"], c["metrics"], [Path(a) for a in c["artifacts"]])
        for c in p_children
    ]
    run_id = log_pipeline_run(
        repo_root() / "mlruns",
        p.tracking.experiment,
        run_name,
        tags,
        children,
        [
            *combined,
            *(plots / f"{n}.csv" for n in ("heatmap", "scatter", "forest", "size")),
            templates_json,
            params,
            *p_artifacts,
        ],
    )
    # Only now: a run that failed before logging leaves the records for the next one.
    for (stage, m), rec in records.items():
        if rec is not None:
            mark_run_log_logged(outputs, stage, m, run_id)
    for stage, m in p_consumed:
        mark_run_log_logged(outputs, stage, m, run_id)
    print(summary_table(scores, p.score.ci))


# The score stage's note for a stage that did not run in this pipeline run.
NOT_RUN = (
    "did not run in this pipeline run: DVC found its output up to date or restored it from "
    "its run cache, or an earlier pipeline run already logged that run"
)
# The per-dataset counts each stage's run log holds, logged as child-run metrics.
RUN_LOG_COUNTS = {
    "generate": ("generated", "served_from_store"),
    "label": ("judged", "judge_served_from_store"),
}


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
    from syps.templates import system_text, template_sha256, user_text

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
    for d in ("AITA-YTA", "SS"):
        if d in p.labels:
            tags[f"labels.{d}"] = canonical_json(p.labels[d])
    for pkg in ("torch", "transformers", "dvc", "mlflow", "syps"):
        try:
            tags[f"version.{pkg}"] = version(pkg)
        except PackageNotFoundError:
            tags[f"version.{pkg}"] = "not installed"
    return tags


def _locked_data_md5(lock: Path) -> str | None:
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


class UnclearError(InputError):
    """Too many responses could not be labelled for the metrics to be trusted."""


def unclear_cells(labels: pd.DataFrame) -> pd.DataFrame:
    """UNCLEAR count, total and rate per (model, dataset, variant)."""
    unclear = labels["label"].isna()
    cells = (
        unclear.groupby([labels["model"], labels["dataset"], labels["variant"]])
        .agg(["sum", "size"])
        .rename(columns={"sum": "unclear", "size": "n"})
        .reset_index()
    )
    return cells.assign(rate=cells["unclear"] / cells["n"])


def check_unclear(p: Params, labels: pd.DataFrame) -> None:
    """Fail when a (model, dataset, variant) has more UNCLEAR labels than its threshold allows.

    The threshold is ``models.<name>.max_unclear`` if set, else ``score.max_unclear``. Cells
    allowed only by a model's own threshold are still listed, as a warning.
    """
    cells = unclear_cells(labels)
    limit = cells["model"].map(
        lambda m: (
            p.models[m].max_unclear
            if m in p.models and p.models[m].max_unclear is not None
            else p.score.max_unclear
        )
    )

    def lines(rows: pd.DataFrame) -> str:
        return "\n".join(
            f"  {r.model} / {r.dataset} / {r.variant}: {r.rate:.0%} UNCLEAR ({r.unclear} of {r.n})"
            for r in rows.itertuples()
        )

    failing = cells[cells["rate"] > limit]
    if len(failing):
        raise UnclearError(
            f"UNCLEAR rate above its threshold in {len(failing)} (model, dataset, variant) "
            f"cell(s) (score.max_unclear = {p.score.max_unclear:g}, or the model's own "
            f"max_unclear):\n{lines(failing)}\n"
            "Read the UNCLEAR responses in out/labels/<model>.parquet (verdict UNCLEAR) and "
            "fix the format instruction or the model; raise the threshold only knowingly."
        )
    tolerated = cells[(cells["rate"] > p.score.max_unclear) & (cells["rate"] <= limit)]
    if len(tolerated):
        print(
            f"warning: UNCLEAR above score.max_unclear = {p.score.max_unclear:g}, allowed by "
            f"the model's own max_unclear, in {len(tolerated)} cell(s):\n{lines(tolerated)}",
            file=sys.stderr,
        )


def _data_md5(data_dvc: Path) -> str:
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
