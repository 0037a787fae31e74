"""The five pipeline steps as plain functions: read inputs, call the pure core, write atomically.

``stages/*.py`` (what ``dvc.yaml`` runs) and the ``syps`` CLI both call these, so a stage can be
rerun by hand with exactly the behaviour DVC gets. Paths always come from the caller.
"""

from __future__ import annotations

import os
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from syps import labeling
from syps.backends import (
    GenRequest,
    GenResult,
    SamplingParams,
    load_backend,
    model_identity,
    model_size,
)
from syps.config import ConfigError, JudgeParams, ModelSpec, Params, load_params
from syps.conversation import judge_records
from syps.io import (
    InputError,
    canonical_json,
    read_parquet,
    sha256_text,
    write_json,
    write_parquet,
)
from syps.messages import fill, messages_json, parse_messages
from syps.protocols.cues import labels as lab
from syps.protocols.cues.data import load_items
from syps.protocols.cues.datasets import DATASETS, judged, rule_set
from syps.protocols.cues.templates import PROMPT_COLUMNS, render_variants
from syps.provenance import pipeline_tags, template_set, variant_shas
from syps.runlayout import SYPS, TEMPLATES, child_name
from syps.runs import (
    RUN_LOG_COUNTS,
    Records,
    cache_dir,
    mark_run_log_logged,
    mark_run_logs_logged,
    read_run_logs,
    repo_root,
    run_log_tags,
    store_path,
    usage_metrics,
    write_run_log,
)
from syps.store import Store, generation_key, judge_key
from syps.tracking import ChildRun
from syps.usage import usage_summary

KEY = ["dataset", "item_id", "variant"]


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
    retries: dict[str, int] = {}
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
            # API backends count the retries of their last call per error kind; local ones
            # make none.
            retries = dict(getattr(backend, "retries", {}))
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
            # Tokens sent and received now, and those the store saved (cost with a price).
            **usage_summary(responses.loc[g.index], g.to_numpy(), spec.price),
        }
        for d, g in generated.groupby(table["dataset"], sort=False)
    }
    line = (
        f"generate {model}: {len(keys)} responses, {len(fresh)} generated, "
        f"{len(keys) - len(fresh)} served from the store"
    )
    print(line, file=sys.stderr)
    write_run_log(out, "generate", model, line, counts, retries)


def _model_spec(p: Params, model: str) -> ModelSpec:
    if model not in p.models:
        raise ConfigError(f"models: no entry {model!r}; known: {sorted(p.models)}")
    return p.models[model]


def rule_labeler_sha256(rules: str, mapping: dict[str, int]) -> str:
    """Identity of a rule labeler: its rule set's patterns and mention rules, and the verdict
    mapping."""
    return sha256_text(canonical_json({**lab.rules_fingerprint(rules), "map": mapping}))


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
    """Label every response: by rules or by the LLM judge, as :mod:`syps.protocols.cues.datasets` says."""
    p = load_params(params)
    resp = read_parquet(responses, [*KEY, "model", "response", "prompt_sha256"])
    situations = read_parquet(items, ["dataset", "item_id", "situation"])
    resp = resp.merge(
        situations[["dataset", "item_id", "situation"]], on=["dataset", "item_id"], how="left"
    )
    tally: dict[str, dict[str, int]] = {}
    table = label_responses(p, resp, tally)
    n_unclear = int(table["label"].isna().sum())
    print(f"labels: {len(table)} rows, {n_unclear} UNCLEAR", file=sys.stderr)
    write_parquet(table, out)
    # As in generate: what the judge computed and what the store served is the run's record.
    # Only the judged datasets have a tally; the rules label the others.
    n_judged = sum(t["judged"] for t in tally.values())
    n_served = sum(t["served_from_store"] for t in tally.values())
    counts = {
        str(d): {
            "rows": int(len(g)),
            "unclear": int(g["label"].isna().sum()),
            "judged": tally.get(str(d), {}).get("judged", 0),
            "judge_served_from_store": tally.get(str(d), {}).get("served_from_store", 0),
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
    p: Params, resp: pd.DataFrame, tally: dict[str, dict[str, int]] | None = None
) -> pd.DataFrame:
    """Label a responses table (``dataset, item_id, variant, model, prompt_sha256, situation,
    response``): each dataset as :mod:`syps.protocols.cues.datasets` says, by its rule set or by the judge
    (through the store).

    Every row records who labelled it (``labeler``, ``labeler_sha256``), the verdict and its
    evidence; judged rows also carry the judge template sha256 and the judge's raw answer.
    ``tally``, if given, receives per judged dataset how many rows were judged now
    (``judged``) and how many the store served (``served_from_store``).
    """
    parts = []
    for dataset, group in resp.groupby("dataset", sort=False):
        ds = str(dataset)
        if ds not in DATASETS:
            raise ConfigError(f"no dataset {ds!r}; known: {list(DATASETS)}")
        if judged(ds):
            counts: dict[str, int] = {}
            parts.append(_judge(p.judge, group, counts))
            if tally is not None:
                tally[ds] = counts
        else:
            if ds not in p.labels:
                raise ConfigError(f"labels: no verdict mapping for dataset {ds!r}")
            mapping, rules = p.labels[ds], rule_set(ds)
            recs = [lab.rule_label(rules, r, mapping) for r in group["response"]]
            sha = rule_labeler_sha256(rules, mapping)
            parts.append(_label_frame(group, recs, f"rule:{ds}", sha))
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
    """Judge responses through the store: a response is never judged twice the same way."""
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
        records, todo = judge_records(store, judge.model, cache_dir(), keys, prompts, options)
    print(f"store: {len(keys) - len(todo)} of {len(keys)} judgements cached", file=sys.stderr)
    if tally is not None:
        # A prompt that occurs twice is judged once; only its first row counts as judged.
        tally["judged"] = len(todo)
        tally["served_from_store"] = len(keys) - len(todo)
    logprobs = np.array([records[k]["logprobs"] for k in keys], dtype=float).reshape(
        len(keys), len(options)
    )
    recs = labeling.judge_labels(logprobs, options, judge.options, judge.min_margin)
    name = f"judge:{identity['model_id']}@{identity['revision']}"
    frame = _label_frame(group, recs, name, judge_sha256(judge, identity["revision"]))
    # Records stored before the raw answer was kept have none: "" rather than a guess.
    return frame.assign(
        judge_template_sha256=t_sha, judge_raw=[str(records[k].get("raw", "")) for k in keys]
    )


def _label_frame(
    group: pd.DataFrame, recs: list[labeling.Label], labeler: str, sha: str
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
    from syps.io import jsonable
    from syps.protocols.cues.flips import write_flip_tables
    from syps.protocols.cues.metrics import LABEL_COLUMNS, score_labels
    from syps.protocols.cues.report import summary_table
    from syps.protocols.stages import protocol_results, tracked_protocols
    from syps.tracking import log_pipeline_run, pipeline_run_name

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
    shas = variant_shas(read_parquet(prompts, ["dataset", "variant", "template_sha256"]))
    prof, plotted = _write_plots(p, scores, shas, plots, figures)
    resp = pd.concat(
        [read_parquet(responses / f"{m}.parquet", [*KEY, "model", "response"]) for m in p.models],
        ignore_index=True,
    )
    situations = read_parquet(items, ["dataset", "item_id", "situation"])
    write_flip_tables(table, resp, situations, flips)

    results = (str(metrics), str(plots), *(protocol_results(p, tracks) if tracks else []))
    tags = pipeline_tags(p, shas, table, data_dvc, results)
    run_name = pipeline_run_name(
        tags, tags["syps.config_sha256"], os.environ.get("DVC_EXP_NAME", "")
    )
    # What generate and label did in this pipeline run, from their run logs (see write_run_log).
    outputs = responses.parent
    records = read_run_logs(outputs, {"generate": responses, "label": labels}, list(p.models))
    tags.update(run_log_tags(records))
    children = _children(p, table, scores, prof, records, figures, flips)
    # The conversation protocols' children join this parent (read before logging: a stale or
    # missing bundle fails the stage before anything is logged).
    p_children, p_tags, p_artifacts, p_consumed = (
        tracked_protocols(p, tracks, outputs) if tracks is not None else ([], {}, [], [])
    )
    tags.update(p_tags)
    children += [
        ChildRun(
            child_name(c["protocol"], c["model"], c["dataset"]),
            c["params"],
            c["metrics"],
            [Path(a) for a in c["artifacts"]],
            protocol=c["protocol"],
        )
        for c in p_children
    ]
    run_id = log_pipeline_run(
        repo_root() / "mlruns",
        p.tracking.experiment,
        run_name,
        tags,
        children,
        [*plotted, params, *p_artifacts],
    )
    # Only now: a run that failed before logging leaves the records for the next one.
    mark_run_logs_logged(outputs, records, run_id)
    for stage, m in p_consumed:
        mark_run_log_logged(outputs, stage, m, run_id)
    print(summary_table(scores, p.score.ci))


def _write_plots(
    p: Params,
    scores: dict[str, dict[str, dict[str, float]]],
    shas: dict[tuple[str, str], str],
    plots: Path,
    figures: Path,
) -> tuple[pd.DataFrame, list[Path]]:
    """Write the plot data, the combined figures and the template set; return the prompt-wise
    profile (the heatmap's rows: one per model, dataset and cue) and the files the parent run
    logs."""
    from syps.io import jsonable_records
    from syps.protocols.cues.figures import heatmap_data, write_figures

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
    templates_json = plots / TEMPLATES
    write_json(template_set(p), templates_json)
    tables = [plots / f"{n}.csv" for n in ("heatmap", "scatter", "forest", "size")]
    return prof, [*combined, *tables, templates_json]


def _children(
    p: Params,
    table: pd.DataFrame,
    scores: dict[str, dict[str, dict[str, float]]],
    prof: pd.DataFrame,
    records: Records,
    figures: Path,
    flips: Path,
) -> list[ChildRun]:
    """One child run per (model, dataset): its settings as params, its scores and its stages'
    run-log counts as metrics, its profile figure and flip tables (one CSV and one HTML page
    per cue) as artifacts."""
    from syps.protocols.cues.report import profile_figure

    children = []
    for (model, dataset), group in table.groupby(["model", "dataset"], sort=True):
        m, d = str(model), str(dataset)
        fig = figures / f"{m}__{d}.png"
        profile_figure(prof[(prof["model"] == m) & (prof["dataset"] == d)], f"{m} · {d}", fig)
        first = group.iloc[0]
        child_params = {
            "model": m,
            "model_spec": p.models[m].model,
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
            run_metrics.update(usage_metrics(rec, d))
        children.append(
            ChildRun(
                child_name(SYPS, m, d),
                child_params,
                {**scores[m][d], **run_metrics},
                [fig, (flips / m / d, "flips")],
            )
        )
    return children


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
