"""The pipeline's stages, the same for every protocol: read inputs, call the protocol through the
shared core, write atomically.

``dvc.yaml`` runs, for each protocol under ``protocols`` in params (``<p>``) and each model
(``<m>``), in the words researchers use for them:

- ``fetch@<p>``        the items -> ``items.parquet``
- ``variants@<p>``     the first turn's conversations rendered and linted before anything is
  generated -> ``lint.json``, ``conversations.parquet`` (what generate sends)
- ``generate@<p>-<m>`` every turn, through the response store -> ``responses/<m>.parquet``
- ``label@<p>-<m>``    a label record per response -> ``labels/<m>.parquet``
- ``score@<p>``        metrics, plot data, figures and the bundle the last stage logs
- ``mlflow``           the pipeline run and a child run per (protocol, model, dataset)

``stages/*.py`` (what ``dvc.yaml`` runs) and ``syps stage ...`` both call these, so a stage can
be rerun by hand with exactly the behaviour DVC gets. Paths always come from the caller
(where each lies by default, and how they relate: ``syps.core.layout``). A
protocol with ``enabled: false`` runs nothing: each stage writes an empty output (so DVC's
outputs exist) and says so.
"""

from __future__ import annotations

import functools
import json
import math
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pandas as pd

from syps.core import traces as tr
from syps.core.backends import load_backend, model_identity, model_size
from syps.core.config import ConfigError, ModelSpec, Params, ProtocolParams
from syps.core.conversation import (
    LazyBackend,
    check_conversations,
    conversations_params_sha256,
    converse,
    first_turn,
    simulator_role,
)
from syps.core.io import (
    LintError,
    canonical_json,
    jsonable,
    read_parquet,
    sha256_file,
    sha256_text,
    write_json,
    write_parquet,
)
from syps.core.judge import StoreJudge
from syps.core.layout import Layout, responses_beside, run_log_dir
from syps.core.params import Protocols, load_params
from syps.core.protocol import (
    CONVERSATION_COLUMNS,
    LABEL_COLUMNS,
    LINEAGE_COLUMNS,
    RESPONSE_COLUMNS,
    SIMULATOR,
    TARGET,
    Protocol,
    ScoreSettings,
)
from syps.core.provenance import params_changes, params_note, pipeline_tags, results_sha256
from syps.core.reasoning import answered, unclear_if_cut
from syps.core.report import CI_BOUNDS, headline_keys
from syps.core.reporting import Drawn, Scored
from syps.core.runlayout import NOTE_TAG, RESULTS_TAG, run_metric_keys
from syps.core.runs import (
    NOT_RUN,
    RUN_LOG_COUNTS,
    cache_dir,
    mark_run_log_logged,
    read_run_log,
    repo_root,
    store_location,
    usage_metrics,
    write_run_log,
)
from syps.core.stores import open_store
from syps.core.traces import TraceRecord
from syps.core.tracking import (
    ChildRun,
    log_pipeline_run,
    logged_marker,
    logged_run,
    pipeline_run_name,
    run_name_of,
    tracking_uri,
)
from syps.core.urls import redact
from syps.core.usage import usage_summary

ITEM_COLUMNS = ["dataset", "item_id", "item"]
LABEL_TABLE = ["model", *LINEAGE_COLUMNS, "prompt_sha256", *LABEL_COLUMNS]


def _load(params: Path, protocol: Protocol[Any, Any]) -> tuple[Params, ProtocolParams]:
    """The params a stage of ``protocol`` runs on: the shared keys and its own block alone."""
    p = load_params(params, {protocol.name: protocol}, complete=False)
    return p, p.protocols[protocol.name]


def model_spec(p: Params, model: str) -> ModelSpec:
    """``models.<model>``; an unknown name is an error naming the known ones."""
    if model not in p.models:
        raise ConfigError(f"models: no entry {model!r}; known: {sorted(p.models)}")
    return p.models[model]


def _switched_off(
    name: str,
    what: str,
    tables: Mapping[Path, Sequence[str]] | None = None,
    documents: Mapping[Path, Any] | None = None,
) -> None:
    """A stage of a protocol with ``enabled: false``: say so, and write each output empty (so
    DVC's outputs exist): ``tables`` (parquet, with their columns) and ``documents`` (JSON)."""
    print(f"{name}: protocols.{name}.enabled is false: {what}", file=sys.stderr)
    for path, columns in (tables or {}).items():
        write_parquet(pd.DataFrame({c: pd.Series(dtype=object) for c in columns}), path)
    for path, doc in (documents or {}).items():
        write_json(doc, path)


def _paths() -> tuple[Path, str]:
    return cache_dir(), store_location()


def read_items(protocol: Protocol[Any, Any], path: Path) -> Any:
    """The items table the fetch stage wrote, read into the protocol's own records: once per
    stage."""
    return protocol.read_items(read_parquet(path, ITEM_COLUMNS))


def fetch(params: Path, protocol: Protocol[Any, Any], out: Path) -> None:
    """Load the protocol's items into ``out`` (columns dataset, item_id, item)."""
    p, pp = _load(params, protocol)
    name = protocol.name
    if not pp.enabled:
        return _switched_off(name, "no items", tables={out: ITEM_COLUMNS})
    table = protocol.load_items(pp, Path.cwd(), p.seed)
    missing = [c for c in ITEM_COLUMNS if c not in table.columns]
    if missing:  # a protocol bug, not user input
        raise RuntimeError(f"{name}.load_items returned no {missing}")
    write_parquet(table[ITEM_COLUMNS].reset_index(drop=True), out)
    counts = table.groupby("dataset", sort=False).size()
    print(f"{name} items: " + ", ".join(f"{d}={n}" for d, n in counts.items()), file=sys.stderr)


def variants(
    params: Path, protocol: Protocol[Any, Any], items: Path, out: Path, conversations: Path
) -> None:
    """Render the protocol's first turn, lint it, and write it: the lint report to ``out``, the
    conversations (``CONVERSATION_COLUMNS``, the bytes generate sends) to ``conversations``.

    A failing lint writes its report (``ok: false`` and the violations), no conversations, and
    exits 2, so the generation after it never starts.
    """
    _, pp = _load(params, protocol)
    name = protocol.name
    if not pp.enabled:
        return _switched_off(
            name,
            "nothing to lint",
            tables={conversations: CONVERSATION_COLUMNS},
            documents={out: {"protocol": name, "enabled": False}},
        )
    records = read_items(protocol, items)
    table = first_turn(protocol, pp, records)
    conversations.unlink(missing_ok=True)  # by hand, a failed lint must leave none behind
    try:
        report = protocol.lint(pp, records, table)
    except LintError as e:
        found = e.report if e.report is not None else {"violations": str(e).splitlines()}
        write_json({"protocol": name, "ok": False, **found}, out)
        raise LintError(f"{name} lint: {e}\n(report: {out})") from None
    write_json({"protocol": name, "ok": True, **report}, out)
    table.attrs = {"params_sha256": conversations_params_sha256(protocol, pp)}
    write_parquet(table, conversations)
    # A protocol may let a run go on with its findings (pushback's `lint: warn`): say so.
    print(
        f"{name} lint: {report.get('status', 'ok')}; {len(table)} first-turn conversations",
        file=sys.stderr,
    )


def generate(
    params: Path,
    protocol: Protocol[Any, Any],
    model: str,
    items: Path,
    conversations: Path,
    out: Path,
) -> None:
    """Every turn of ``protocol`` for model ``model`` (a key of ``models``), through the store:
    the first turn exactly as the variants stage rendered and linted it (``conversations``),
    the later ones from the stored earlier answers.

    Every request is looked up in the response store first; only misses are generated (and the
    model is loaded only if there are any). Each finished batch is stored at once, so a crashed
    run resumes where it stopped. The output holds every request of every turn, with its
    lineage and the hash of the bytes sent, and every skipped child.
    """
    p, pp = _load(params, protocol)
    name = protocol.name
    if not pp.enabled:
        return _switched_off(name, f"nothing generated for {model}", tables={out: RESPONSE_COLUMNS})
    spec = model_spec(p, model)
    cache, store_file = _paths()
    identity = model_identity(spec, cache, f"models.{model}")  # fails before any work
    records = read_items(protocol, items)
    first = read_parquet(conversations, CONVERSATION_COLUMNS)
    check_conversations(first, protocol, pp, str(conversations))
    with open_store(store_file) as store:
        judge = StoreJudge(p.judge, store, cache)
        backend = LazyBackend(spec, cache, load_backend)
        simulator = (
            simulator_role(p.simulator, p.seed, cache, load_backend, (identity, backend))
            if protocol.uses_simulator
            else None
        )
        rows, counts = converse(
            protocol,
            pp,
            records,
            model=model,
            identity=identity,
            seed=p.seed,
            store=store,
            backend=backend,
            judge=judge,
            first=first,
            simulator=simulator,
        )
    write_parquet(rows, out)
    # What this run did is a fact about the run, not about the responses (a cold and a warm
    # store give the same file), so it goes to the run log, never into the versioned output.
    # A conversation that occurs on several rows is generated once: its first row counts, the
    # others repeat it (a repetition at temperature 0, a cell shared by two contrasts).
    fresh = {k for c in counts.values() for k in c.fresh}
    answered = rows["skipped"] == ""
    of_this_run = answered & rows["store_key"].isin(fresh)
    made_now = ~rows["store_key"].duplicated() & of_this_run
    generated, repeats = int(made_now.sum()), int((of_this_run & ~made_now).sum())
    line = (
        f"generate {name} {model}: {len(rows)} rows, {generated} generated, "
        f"{repeats} repeats of an earlier request in this run, "
        f"{int((answered & ~of_this_run).sum())} served from the store (earlier runs), "
        f"{int((~answered).sum())} skipped" + ("" if backend.loaded else " (model not loaded)")
    )
    print(line, file=sys.stderr)
    sim = p.simulator.model if p.simulator is not None and simulator is not None else None
    _log_generate(out, name, model, rows, made_now, counts, line, spec, sim)


def _log_generate(
    out: Path,
    name: str,
    model: str,
    rows: pd.DataFrame,
    made_now: pd.Series,
    counts: Mapping[tuple[int, str], Any],
    line: str,
    spec: ModelSpec,
    sim: ModelSpec | None = None,
) -> None:
    """The generate stage's run log: its line, per dataset what was generated now and what
    the store served (with the target's tokens and cost, and the simulated user's apart,
    ``simulator_*``, at its own price), per turn and role the counts, the retries, and the keys
    generated now."""
    retries: dict[str, int] = {}
    for c in counts.values():
        for kind, n in c.retries.items():
            retries[kind] = retries.get(kind, 0) + n
    per_dataset: dict[str, dict[str, float]] = {}
    for d, g in rows.groupby("dataset", sort=False):
        now, skip = int(made_now[g.index].sum()), int((g["skipped"] != "").sum())
        per_dataset[str(d)] = {
            "rows": int(len(g)),
            "generated": now,
            "served_from_store": int(len(g)) - now - skip,
            "skipped": skip,
        }
        # Tokens sent and received now, and those the store saved (cost with a price).
        for role, who in [(TARGET, spec), (SIMULATOR, sim)]:
            mine = g[g["role"] == role]
            if who is None or (role == SIMULATOR and mine.empty):
                continue
            use = usage_summary(mine, made_now[mine.index].to_numpy(), who.price)
            prefix = "" if role == TARGET else "simulator_"
            per_dataset[str(d)] |= {f"{prefix}{k}": v for k, v in use.items()}
    detail: dict[str, Any] = {
        f"turn{t}" + ("" if role == TARGET else f"_{role}"): {
            "requests": c.requests,
            "generated": c.generated,
            "served_from_store": c.served_from_store,
            "skipped": c.skipped,
        }
        for (t, role), c in counts.items()
    }
    write_run_log(
        out,
        f"generate.{name}",
        model,
        line,
        per_dataset,
        retries,
        detail,
        run_log_dir(out),
        generated_keys=rows["store_key"][made_now].tolist(),
    )


def label(
    params: Path,
    protocol: Protocol[Any, Any],
    model: str,
    items: Path,
    responses: Path,
    out: Path,
) -> None:
    """Label every response row of one model (skipped rows get an explicit SKIPPED record);
    each label row carries the hash of the prompt its response answered (``prompt_sha256``).

    A protocol's model-independent data (discernment's argument ratings, from the judge) are
    computed here first, through the store, so every model's labels rest on the same.
    """

    p, pp = _load(params, protocol)
    name = protocol.name
    if not pp.enabled:
        return _switched_off(name, f"nothing to label for {model}", tables={out: LABEL_TABLE})
    records = read_items(protocol, items)
    resp = read_parquet(responses, RESPONSE_COLUMNS)
    cache, store_file = _paths()
    with open_store(store_file) as store:
        judge = StoreJudge(p.judge, store, cache)
        aux = protocol.auxiliary(pp, records, judge)
        labels = protocol.label(pp, records, answered(resp), judge, aux)
    missing = [c for c in LABEL_TABLE if c not in labels.columns and c != "prompt_sha256"]
    if missing:  # a protocol bug, not user input
        raise RuntimeError(f"{name}.label returned no {missing}")
    if len(labels) != len(resp):
        raise RuntimeError(f"{name}.label returned {len(labels)} rows for {len(resp)}")
    labels = with_prompt_hashes(unclear_if_cut(labels, resp), resp)
    write_parquet(labels, out)
    _log_label(out, name, model, labels, resp, judge)


def with_prompt_hashes(labels: pd.DataFrame, responses: pd.DataFrame) -> pd.DataFrame:
    """``labels`` with each row's ``prompt_sha256`` (the hash of the bytes its response was
    asked with; "" for a skipped row) after the lineage columns, matched on the response's
    (dataset, item, cell, rep, turn)."""
    key = ["dataset", "item_id", "cell", "rep", "turn"]
    sha = responses[[*key, "prompt_sha256"]].astype({"rep": int, "turn": int})
    found = (
        labels[key]
        .astype({"rep": int, "turn": int})
        .merge(sha, on=key, how="left", validate="one_to_one")
    )
    if found["prompt_sha256"].isna().any():  # a protocol bug: a label row no response has
        raise RuntimeError("label rows without a response row of the same lineage")
    at = labels.columns.get_loc("parent_key") + 1 if "parent_key" in labels else len(labels.columns)
    out = labels.drop(columns=["prompt_sha256"], errors="ignore")
    out.insert(int(at), "prompt_sha256", found["prompt_sha256"].to_numpy())
    return out


def _log_label(
    out: Path,
    name: str,
    model: str,
    labels: pd.DataFrame,
    resp: pd.DataFrame,
    judge: StoreJudge,
) -> None:
    """The label stage's line and run log: rows, UNCLEAR, skipped, and what the judge did."""
    skipped = resp["skipped"] != ""
    n_unclear = int((labels["label"].isna().to_numpy() & ~skipped.to_numpy()).sum())
    line = (
        f"label {name} {model}: {len(labels)} rows, {n_unclear} UNCLEAR, "
        f"{int(skipped.sum())} skipped; judge: {judge.tally['judged']} judged, "
        f"{judge.repeats} repeats of an earlier verdict in this run, "
        f"{judge.tally['served_from_store'] - judge.repeats} served from the store (earlier runs)"
    )
    print(line, file=sys.stderr)
    per_dataset = {}
    for d, g in labels.groupby("dataset", sort=False):
        skip = skipped.to_numpy()[g.index.to_numpy()]
        judged = judge.by_dataset.get(str(d), {})
        per_dataset[str(d)] = {
            "rows": int(len(g)),
            "unclear": int((g["label"].isna().to_numpy() & ~skip).sum()),
            "skipped": int(skip.sum()),
            "judged": judged.get("judged", 0),
            "judge_served_from_store": judged.get("served_from_store", 0),
        }
    write_run_log(
        out, f"label.{name}", model, line, per_dataset, None, judge.tally, run_log_dir(out)
    )


def figure_dirs(figures: Path) -> tuple[Path, Path]:
    """The score stage's figures output as the folders a protocol writes into: ``png/`` for
    the PNGs (dvc.yaml's plots show it), ``tables/`` for every other file a run logs."""
    return figures / "png", figures / "tables"


def score(
    params: Path,
    protocol: Protocol[Any, Any],
    items: Path,
    labels: Path,
    metrics: Path,
    plots: Path,
    figures: Path,
    track: Path,
    summary: Path | None = None,
) -> None:
    """Score every model's labels: metrics JSON, plot data, figures, and the bundle
    (``track``) the mlflow stage logs as one child run per (model, dataset); and, where
    ``summary`` is given, the headline metrics as a metrics file of their own (see
    :func:`headline_summary`)."""
    p, pp = _load(params, protocol)
    name = protocol.name
    plots.mkdir(parents=True, exist_ok=True)
    figures.mkdir(parents=True, exist_ok=True)
    if not pp.enabled:
        empty: dict[Path, Any] = {metrics: {}, **({summary: {}} if summary is not None else {})}
        # The plot data folder is committed, and git keeps no empty folder: without a file in
        # it a clone would lack the output and DVC would run this stage again there.
        off = {"protocol": name, "enabled": False}
        empty[plots / "disabled.json"] = off
        return _switched_off(
            name,
            "nothing to score",
            documents={**empty, track: {**off, "children": []}},
        )
    table = pd.concat(
        [read_parquet(labels / f"{m}.parquet", LABEL_TABLE) for m in p.models],
        ignore_index=True,
    )
    settings = score_settings(p)
    scores = protocol.score(pp, table, settings)
    write_json(jsonable(scores), metrics)
    if summary is not None:
        write_json(jsonable(headline_summary(scores, protocol.report.headline_metrics)), summary)
    # The PNGs in a folder of their own, which the dvc plots page shows (dvc.yaml's plots).
    pngs, pages = figure_dirs(figures)
    pngs.mkdir(exist_ok=True)
    pages.mkdir(exist_ok=True)
    records = read_items(protocol, items)
    drawn = protocol.report.figures(
        pp, Scored(scores, table, records, settings, pngs, pages, plots)
    )
    templates = protocol.templates(pp)
    write_json(templates, plots / "templates.json")
    params_json = canonical_json(asdict(pp))
    children = _children(p, protocol, pp, scores, table, drawn, params_json)
    write_json(
        {
            "protocol": name,
            "enabled": True,
            "params": json.loads(params_json),
            "templates": str(plots / "templates.json"),
            "templates_sha256": sha256_text(canonical_json(templates)),
            "tags": protocol.report.run_tags(pp),
            "children": children,
            "figures": [str(x) for x in drawn.figures],
            "plots": str(plots),
            # The metrics are in their file alone; the mlflow stage reads them from there.
            "metrics": str(metrics),
            "metrics_sha256": sha256_file(metrics),
            **({"summary": str(summary)} if summary is not None else {}),
            # Read by the mlflow stage for the traces (the responses lie beside the labels).
            "items": str(items),
            "labels": str(labels),
        },
        track,
    )
    print(f"{name} score: {len(children)} (model, dataset) pair(s)", file=sys.stderr)
    table_text = protocol.report.summary(scores, p.score.ci)
    if table_text is not None:  # as `syps summary` prints it
        print(table_text)


def score_settings(p: Params) -> ScoreSettings:
    """The shared scoring settings of ``p``, with each model's UNCLEAR limit and size."""
    cache = cache_dir()
    return ScoreSettings(
        p.score.bootstrap,
        p.score.ci,
        p.seed,
        p.score.min_items,
        max_unclear=p.score.max_unclear,
        model_max_unclear={m: s.max_unclear for m, s in p.models.items()},
        model_sizes={m: model_size(s, cache) for m, s in p.models.items()},
    )


def _children(
    p: Params,
    protocol: Protocol[Any, Any],
    pp: ProtocolParams,
    scores: Mapping[str, Mapping[str, Mapping[str, Any]]],
    table: pd.DataFrame,
    drawn: Drawn,
    params_json: str,
) -> list[dict[str, Any]]:
    """One child run per (model, dataset) scored: its name, params and the artifacts the
    protocol drew for it (its metrics are the metrics file's entry)."""
    children = []
    for model, per_dataset in scores.items():
        for dataset in per_dataset:
            rows = table[(table["model"] == model) & (table["dataset"] == dataset)]
            child_params: dict[str, str] = {
                "protocol": protocol.name,
                "model": model,
                "model_spec": p.models[model].model if model in p.models else "",
                **_identity(rows),
                "dataset": dataset,
                "replay": pp.replay,
                "reps": str(pp.generation.reps),
                "temperature": str(pp.generation.temperature),
                "top_p": str(pp.generation.top_p),
                "max_new_tokens": _max_new_tokens(rows, pp),
                "seed": str(p.seed),
                "bootstrap_B": str(p.score.bootstrap),
                "ci": str(p.score.ci),
                **_labelers(rows),
                "protocol_params_sha256": sha256_text(params_json),
            }
            children.append(
                {
                    "protocol": protocol.name,
                    "model": model,
                    "dataset": dataset,
                    "name": "/".join(x for x in (protocol.run_prefix, model, dataset) if x),
                    "params": child_params,
                    "artifacts": [
                        [str(path), folder]
                        for path, folder in drawn.children.get((model, dataset), [])
                    ],
                }
            )
    return children


def headline_summary(
    scores: Mapping[str, Mapping[str, Mapping[str, Any]]], headline: Sequence[str]
) -> dict[str, dict[str, dict[str, Any]]]:
    """Per model and dataset, the protocol's headline metrics with their CI bounds and support,
    in headline order (``headline_keys``): the files dvc.yaml declares as DVC's metrics,
    which a person reads first (``dvc metrics diff --all`` prints one per line), beside the full
    metrics file that ``dvc metrics diff --targets metrics/<protocol>.json`` compares number by
    number."""
    companions = (*CI_BOUNDS, "_n")
    return {
        model: {
            dataset: {k: values[k] for k in headline_keys(values, headline, companions)}
            for dataset, values in per_dataset.items()
        }
        for model, per_dataset in scores.items()
    }


def _identity(rows: pd.DataFrame) -> dict[str, str]:
    """The model's id and revision as its label rows record them (where the protocol keeps
    them)."""
    return {c: str(rows[c].iloc[0]) for c in ("model_id", "revision") if c in rows and len(rows)}


def _max_new_tokens(rows: pd.DataFrame, pp: ProtocolParams) -> str:
    """The answer length the rows were generated with (a dataset may have its own)."""
    if "max_new_tokens" in rows and len(rows):
        lengths = sorted({int(n) for n in rows["max_new_tokens"] if int(n) > 0})
        if len(lengths) == 1:
            return str(lengths[0])
    return str(pp.generation.max_new_tokens)


def _labelers(rows: pd.DataFrame) -> dict[str, str]:
    """``labeler`` and ``labeler_sha256`` when one labeler labelled every decided row."""
    decided = rows[rows["labeler"] != ""]
    pairs = decided[["labeler", "labeler_sha256"]].drop_duplicates()
    if len(pairs) != 1:
        return {}
    return {"labeler": str(pairs["labeler"].iloc[0]), "labeler_sha256": str(pairs.iloc[0, 1])}


def mlflow(params: Path, tracks: Path, data_dvc: Path, logged: Path, protocols: Protocols) -> None:
    """Log the pipeline run to MLflow: a parent run (provenance tags, every protocol's template
    set and plot data, params.yaml) and one child run per (protocol, model, dataset) with its
    settings, scores, the counts of what its stages did in this run, and its own artifacts.

    ``tracks`` holds the bundles the score stages wrote (``<protocol>.json``); a stale or
    missing bundle fails the stage before anything is logged. ``logged`` is written last, once
    the run is in the store: the stage's one DVC output, a file inside the store's folder (see
    :func:`syps.core.tracking.logged_marker`). ``protocols`` is the registry: every protocol's
    block is read, and each child is logged as its protocol says.
    """

    p = load_params(params, protocols)
    bundles = read_bundles(p, tracks)
    logs = read_stage_logs(p, bundles)  # each stage's run log read once
    children, consumed, log_tags = tracked_children(p, bundles, logs)
    results = [
        str(b[k]) for b in bundles.values() for k in ("metrics", "summary", "plots") if k in b
    ]
    tags = pipeline_tags(p, bundles, children, data_dvc, tuple(results))
    tags.update(log_tags)
    run_name = pipeline_run_name(
        tags, tags["syps.config_sha256"], os.environ.get("DVC_EXP_NAME", "")
    )
    tags[NOTE_TAG] = params_note(params_changes(params, repo_root()))
    traces = child_traces(p, protocols, bundles, logs)
    artifacts: list[Path | tuple[Path, str]] = [params]
    for name, b in bundles.items():
        artifacts.append((Path(b["plots"]), f"protocols/{name}"))
        artifacts += [(Path(f), f"protocols/{name}/figures") for f in b["figures"]]
    runs = [_child_run(c, protocols, traces, tags, bundles) for c in children]
    logged.unlink(missing_ok=True)  # DVC removes it first; by hand, a failed run must too
    # The study's store: MLFLOW_TRACKING_URI's server, else the repository's, which for a queued
    # experiment (run in a copy) is its parent's (DVC_ROOT); the marker ``logged`` stays in the
    # working copy.
    mlruns = Layout.here().mlruns
    tags[RESULTS_TAG] = results_sha256(tags, bundles)
    # No stage ran since the last run was logged (a colleague's clone after `dvc pull`, a store
    # moved away, the marker deleted): the results are a run's that may be in this store
    # already, and are logged only if it is not. A generate or label stage that ran (a run log
    # not yet claimed) makes a new run; so do new results (a score stage's other bootstrap).
    earlier = None if consumed else logged_run(mlruns, p.tracking.experiment, tags[RESULTS_TAG])
    if earlier is not None:
        _mark_logged(logged, p.tracking.experiment)
        print(
            f"mlflow: {redact(tracking_uri(mlruns))} already holds run {earlier[1]} "
            f"({earlier[0]}) of these results (commit, config, data, metrics), and no stage ran "
            "since it was logged: logged nothing",
            file=sys.stderr,
        )
        return
    run_id = log_pipeline_run(mlruns, p.tracking.experiment, run_name, tags, runs, artifacts)
    # Only now: a run that failed before logging leaves the records for the next one.
    for folder, stage, m in consumed:
        mark_run_log_logged(folder, stage, m, run_id)
    _mark_logged(logged, p.tracking.experiment)
    n_traces = sum(len(t) for t in traces.values())
    print(
        f"mlflow: run {run_name_of(mlruns, run_id)} ({run_id}) with {len(children)} child run(s), "
        f"{n_traces} trace(s) (tracking.traces: {p.tracking.traces})",
        file=sys.stderr,
    )


def _child_run(
    c: dict[str, Any],
    protocols: Protocols,
    traces: dict[tuple[str, str, str], list[TraceRecord]],
    tags: dict[str, str],
    bundles: dict[str, dict[str, Any]],
) -> ChildRun:
    """The child run ``c`` (of :func:`tracked_children`) as its protocol logs it: its headline
    and run metrics as MLflow metrics (every one in its table), its artifacts and traces."""
    proto = protocols[c["protocol"]]
    counts = [n for names in RUN_LOG_COUNTS.values() for n in names]
    keys = run_metric_keys(
        c["metrics"], proto.report.headline_metrics, [*proto.report.run_metrics, *counts]
    )
    files: list[Path | tuple[Path, str]] = [
        (Path(a), f) if f else Path(a) for a, f in c["artifacts"]
    ]
    return ChildRun(
        c["name"],
        c["params"],
        {k: c["metrics"][k] for k in keys},
        files,
        protocol=c["protocol"],
        traces=traces.get((c["protocol"], c["model"], c["dataset"]), []),
        table=c["metrics"],
        tags=child_run_tags(tags, bundles, c["protocol"]),
        link=functools.partial(proto.report.link_traces, files),
    )


def _mark_logged(logged: Path, experiment: str) -> None:
    """The mlflow stage's marker: the store holds this pipeline run (see ``logged_marker``)."""
    logged.parent.mkdir(parents=True, exist_ok=True)
    logged.write_text(logged_marker(experiment), encoding="utf-8")


def child_run_tags(
    tags: dict[str, str], bundles: dict[str, dict[str, Any]], protocol: str
) -> dict[str, str]:
    """The parent's ``tags`` a child of ``protocol`` carries: all but the other protocols' own
    (their ``protocol.<name>.*`` and ``run_log.<stage>.<name>.*`` tags and their bundle's tags,
    e.g. SyPS's per-variant template hashes), and not the parent's note or results hash."""

    others = [n for n in bundles if n != protocol]
    foreign = {str(k) for n in others for k in bundles[n].get("tags", {})} | {NOTE_TAG, RESULTS_TAG}
    prefixes = tuple(f"protocol.{n}." for n in others)
    stages = tuple(f".{n}." for n in others)

    def own(key: str) -> bool:
        if key in foreign or key.startswith(prefixes):
            return False
        return not (key.startswith("run_log.") and any(s in key for s in stages))

    return {k: v for k, v in tags.items() if own(k)}


# Each (protocol, step, model)'s stage table and the record of the stage's last run if that
# run wrote the table as it is now and no pipeline run has logged it yet (``read_run_log``).
StageLogs = dict[tuple[str, str, str], tuple[Path, dict[str, Any] | None]]


def read_stage_logs(p: Params, bundles: dict[str, dict[str, Any]]) -> StageLogs:
    """The run-log records of the generate and label stages behind every bundle, read once:
    the label tables the bundle names and the response tables beside them
    (``syps.core.layout``)."""
    logs: StageLogs = {}
    for name, bundle in bundles.items():
        if not bundle.get("enabled", True):
            continue
        labels = Path(bundle["labels"])
        for model in p.models:
            for step, table in (
                ("generate", responses_beside(labels) / f"{model}.parquet"),
                ("label", labels / f"{model}.parquet"),
            ):
                rec = read_run_log(run_log_dir(table), f"{step}.{name}", model, table)
                logs[(name, step, model)] = (table, rec)
    return logs


def child_traces(
    p: Params, protocols: Protocols, bundles: dict[str, dict[str, Any]], logs: StageLogs
) -> dict[tuple[str, str, str], list[TraceRecord]]:
    """The traces of each child (protocol, model, dataset) as ``tracking.traces`` chooses them
    (``syps.core.traces``), from the label and response tables of ``logs``; served from the
    store unless this run's generate stage (its record in ``logs``) generated them."""

    out: dict[tuple[str, str, str], list[TraceRecord]] = {}
    if p.tracking.traces == "none":
        return out
    for name, bundle in bundles.items():
        if not bundle.get("enabled", True):
            continue
        proto, pp = protocols[name], p.protocols[name]
        items = read_items(proto, Path(bundle["items"]))
        for model in p.models:
            answered, rec = logs[(name, "generate", model)]
            labels = read_parquet(logs[(name, "label", model)][0], LABEL_TABLE)
            responses = read_parquet(answered, RESPONSE_COLUMNS)
            rows = tr.conversations(responses, labels, proto.report.review(pp, items, labels))
            fresh = rec.get("generated_keys", []) if rec else []
            for dataset, group in rows.groupby("dataset", sort=False):
                chosen = tr.choose(
                    group,
                    p.tracking.traces,
                    p.tracking.trace_sample,
                    p.seed,
                    model,
                    proto.report.trace_cells,
                )
                out[(name, model, str(dataset))] = tr.records(name, chosen, fresh)
    return out


def read_bundles(p: Params, tracks: Path) -> dict[str, dict[str, Any]]:
    """The enabled protocols' score bundles, each with its metrics (``scores``, read from the
    metrics file it names; null there is an undefined metric, NaN here). A bundle written under
    other params, or a metrics file changed since its bundle was written (a stale file), is
    refused: both must be this run's."""
    out: dict[str, dict[str, Any]] = {}
    for name in p.enabled():
        path = tracks / f"{name}.json"
        bundle = _read_json(path, f"the {name} bundle")
        if bundle.get("params") != json.loads(canonical_json(asdict(p.protocols[name]))):
            raise ConfigError(
                f"{path}: written for other protocols.{name} params than params.yaml holds; "
                "run dvc repro"
            )
        if not bundle.get("enabled", True):
            out[name] = {**bundle, "scores": {}}
            continue
        if not {"items", "labels", "metrics", "metrics_sha256"} <= set(bundle):
            raise ConfigError(
                f"{path}: written by an older syps (no items, labels, metrics_sha256); "
                "run dvc repro"
            )
        metrics = Path(bundle["metrics"])
        if not metrics.exists() or sha256_file(metrics) != bundle["metrics_sha256"]:
            raise ConfigError(f"{metrics}: not the file {path} was written with; run dvc repro")
        scores = _read_json(metrics, f"the {name} metrics")
        out[name] = {**bundle, "scores": scores}
    return out


def _read_json(path: Path, what: str) -> dict[str, Any]:
    try:
        doc: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ConfigError(f"{path}: cannot read {what} ({e}); run dvc repro") from None
    return doc


def _child_metrics(values: Mapping[str, Any]) -> dict[str, float]:
    """A child's metrics as its run logs them: the numeric values of its metrics-file entry,
    null (an undefined metric) as NaN."""
    return {
        k: math.nan if v is None else v
        for k, v in values.items()
        if v is None or isinstance(v, int | float)
    }


def tracked_children(
    p: Params, bundles: dict[str, dict[str, Any]], logs: StageLogs
) -> tuple[list[dict[str, Any]], list[tuple[Path, str, str]], dict[str, str]]:
    """The child runs of the bundles with their metrics and what their stages did in this
    pipeline run (``logs``, see ``syps.core.runs``); the run-log records consumed (their
    folder, stage, model), to be marked logged once the run is; and the parent's
    ``run_log.<stage>.<model>`` tags."""

    children: list[dict[str, Any]] = []
    consumed: set[tuple[Path, str, str]] = set()
    tags = {
        f"run_log.{step}.{name}.{model}": rec["line"] if rec else NOT_RUN
        for (name, step, model), (_, rec) in logs.items()
    }
    for name, bundle in bundles.items():
        for child in bundle["children"]:
            model, dataset = child["model"], child["dataset"]
            metrics = _child_metrics(bundle["scores"][model][dataset])
            params = dict(child["params"])
            for step, names in RUN_LOG_COUNTS.items():
                table, rec = logs[(name, step, model)]
                params[f"{step}_ran"] = str(rec is not None).lower()
                counts = rec["datasets"].get(dataset, {}) if rec else {}
                metrics.update({n: float(counts.get(n, 0)) for n in names})
                if rec is None:
                    continue
                consumed.add((run_log_dir(table), f"{step}.{name}", model))
                if step == "generate":
                    metrics.update(_turn_counts(rec))
                    metrics.update(usage_metrics(rec, dataset))
            children.append({**child, "params": params, "metrics": metrics})
    return children, sorted(consumed), tags


def _turn_counts(rec: Mapping[str, Any]) -> dict[str, float]:
    """Per turn, where a generate run had several, how many it generated and served."""
    detail = rec.get("detail", {})
    if len(detail) <= 1:
        return {}
    out: dict[str, float] = {}
    for turn, c in detail.items():
        out[f"{turn}_generated"] = float(c.get("generated", 0))
        out[f"{turn}_served_from_store"] = float(c.get("served_from_store", 0))
    return out
