"""The conversation protocols' pipeline steps: read inputs, call the protocol, write atomically.

``dvc.yaml`` runs, for each protocol under ``protocols`` in params (``<p>``) and each model
(``<m>``):

- ``p-items@<p>``     items -> ``out/protocols/<p>/items.parquet``
- ``p-lint@<p>``      the protocol's lint, before anything is generated -> ``lint.json``
- ``p-aux@<p>``       model-independent data (e.g. argument ratings by the judge) -> ``aux.parquet``
- ``converse@<p>-<m>``  every turn, through the store -> ``responses/<m>.parquet``
- ``p-label@<p>-<m>`` label records -> ``labels/<m>.parquet``
- ``p-score@<p>``     metrics, plot data, figures and the MLflow bundle the score stage logs

A judge or labeler edit reruns ``p-label`` and ``p-score`` only; a template edit reruns
``converse``, which finds the unchanged conversations in the store and loads no model for them.
A protocol with ``enabled: false`` runs nothing: each step writes an empty output (so DVC's
outputs exist) and says so.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pandas as pd

from syps.config import ConfigError, Params, load_params
from syps.io import (
    canonical_json,
    read_parquet,
    sha256_text,
    write_json,
    write_parquet,
)
from syps.protocols import load_protocol
from syps.protocols.base import (
    LABEL_COLUMNS,
    LINEAGE_COLUMNS,
    RESPONSE_COLUMNS,
    Protocol,
    ProtocolParams,
    ScoreSettings,
)
from syps.runs import write_run_log

ITEM_COLUMNS = ["dataset", "item_id", "item"]


def _protocol(p: Params, name: str) -> tuple[Protocol, ProtocolParams]:
    if name not in p.protocols:
        raise ConfigError(f"protocols: no entry {name!r}; configured: {sorted(p.protocols)}")
    return load_protocol(name), p.protocols[name]


def _off(name: str, what: str) -> None:
    print(f"{name}: protocols.{name}.enabled is false: {what}", file=sys.stderr)


def _paths() -> tuple[Path, Path]:
    from syps.runs import cache_dir, store_path

    return cache_dir(), store_path()


def items(params: Path, protocol: str, out: Path) -> None:
    """Load the protocol's items into ``out`` (columns dataset, item_id, item)."""
    p = load_params(params)
    proto, pp = _protocol(p, protocol)
    if not pp.enabled:
        _off(protocol, "no items")
        write_parquet(pd.DataFrame({c: pd.Series(dtype=str) for c in ITEM_COLUMNS}), out)
        return
    table = proto.load_items(pp, Path.cwd(), p.seed)
    missing = [c for c in ITEM_COLUMNS if c not in table.columns]
    if missing:  # a protocol bug, not user input
        raise RuntimeError(f"{protocol}.load_items returned no {missing}")
    write_parquet(table[ITEM_COLUMNS].reset_index(drop=True), out)
    counts = table.groupby("dataset", sort=False).size()
    print(f"{protocol} items: " + ", ".join(f"{d}={n}" for d, n in counts.items()), file=sys.stderr)


def lint(params: Path, protocol: str, items: Path, out: Path) -> None:
    """The protocol's lint over its rendered conversations; the report to ``out``.

    A failing lint writes its report (``ok: false`` and the violations) and exits 2, so the
    generation after it never starts.
    """
    from syps.io import LintError

    p = load_params(params)
    proto, pp = _protocol(p, protocol)
    if not pp.enabled:
        _off(protocol, "nothing to lint")
        write_json({"protocol": protocol, "enabled": False}, out)
        return
    table = read_parquet(items, ITEM_COLUMNS)
    try:
        report = proto.lint(pp, table)
    except LintError as e:
        write_json({"protocol": protocol, "ok": False, "violations": str(e).splitlines()}, out)
        raise
    write_json({"protocol": protocol, "ok": True, **report}, out)
    # A protocol may let a run go on with its findings (pushback's `lint: warn`): say so.
    print(f"{protocol} lint: {report.get('status', 'ok')}", file=sys.stderr)


def aux(params: Path, protocol: str, items: Path, out: Path) -> None:
    """Model-independent data the protocol computes once (judge calls through the store)."""
    from syps.conversation import StoreJudge
    from syps.store import Store

    p = load_params(params)
    proto, pp = _protocol(p, protocol)
    if not pp.enabled:
        _off(protocol, "nothing to compute")
        write_parquet(pd.DataFrame(), out)
        return
    table = read_parquet(items, ITEM_COLUMNS)
    cache, store_file = _paths()
    with Store(store_file) as store:
        judge = StoreJudge(p.judge, store, cache)
        result = proto.auxiliary(pp, table, judge)
    write_parquet(result.reset_index(drop=True), out)
    print(
        f"{protocol} aux: {len(result)} rows; judge: {judge.tally['judged']} judged, "
        f"{judge.tally['served_from_store']} served from the store",
        file=sys.stderr,
    )


def converse(params: Path, protocol: str, model: str, items: Path, out: Path) -> None:
    """Every turn of ``protocol`` for model ``model`` (a key of ``models``), through the store.

    The output holds every request of every turn, with its lineage, and every skipped child.
    """
    from syps.backends import load_backend, model_identity
    from syps.conversation import LazyBackend, StoreJudge
    from syps.conversation import converse as run_turns
    from syps.pipeline import _model_spec
    from syps.store import Store
    from syps.usage import usage_summary

    p = load_params(params)
    proto, pp = _protocol(p, protocol)
    if not pp.enabled:
        _off(protocol, f"nothing generated for {model}")
        write_parquet(pd.DataFrame({c: pd.Series(dtype=object) for c in RESPONSE_COLUMNS}), out)
        return
    spec = _model_spec(p, model)
    cache, store_file = _paths()
    identity = model_identity(spec, cache, f"models.{model}")  # fails before any work
    table = read_parquet(items, ITEM_COLUMNS)
    with Store(store_file) as store:
        judge = StoreJudge(p.judge, store, cache)
        backend = LazyBackend(spec, cache, load_backend)
        rows, counts = run_turns(
            proto,
            pp,
            table,
            model=model,
            identity=identity,
            seed=p.seed,
            store=store,
            backend=backend,
            judge=judge,
        )
    write_parquet(rows, out)
    generated = sum(c.generated for c in counts.values())
    skipped = sum(c.skipped for c in counts.values())
    line = (
        f"converse {protocol} {model}: {len(rows)} rows, {generated} generated, "
        f"{len(rows) - generated - skipped} served from the store, {skipped} skipped"
        + ("" if backend.loaded else " (model not loaded)")
    )
    print(line, file=sys.stderr)
    # A conversation that occurs on several rows is generated once: its first row counts.
    fresh = {k for c in counts.values() for k in c.fresh}
    made_now = ~rows["store_key"].duplicated() & rows["store_key"].isin(fresh)
    retries: dict[str, int] = {}
    for c in counts.values():
        for kind, n in c.retries.items():
            retries[kind] = retries.get(kind, 0) + n
    per_dataset = {
        str(d): {
            "rows": int(len(g)),
            "skipped": int((g["skipped"] != "").sum()),
            **usage_summary(g, made_now[g.index].to_numpy(), spec.price),
        }
        for d, g in rows.groupby("dataset", sort=False)
    }
    detail: dict[str, Any] = {
        f"turn{t}": {
            "requests": c.requests,
            "generated": c.generated,
            "served_from_store": c.served_from_store,
            "skipped": c.skipped,
        }
        for t, c in counts.items()
    }
    write_run_log(
        out, f"converse.{protocol}", model, line, per_dataset, retries, detail, run_log_dir(out)
    )


def label(
    params: Path, protocol: str, model: str, items: Path, responses: Path, aux: Path, out: Path
) -> None:
    """Label every response row of one model (skipped rows get an explicit SKIPPED record)."""
    from syps.conversation import StoreJudge
    from syps.store import Store

    p = load_params(params)
    proto, pp = _protocol(p, protocol)
    if not pp.enabled:
        _off(protocol, f"nothing to label for {model}")
        write_parquet(
            pd.DataFrame(
                {c: pd.Series(dtype=object) for c in ["model", *LINEAGE_COLUMNS, *LABEL_COLUMNS]}
            ),
            out,
        )
        return
    table = read_parquet(items, ITEM_COLUMNS)
    resp = read_parquet(responses, RESPONSE_COLUMNS)
    extra = pd.read_parquet(aux) if aux.exists() else pd.DataFrame()
    cache, store_file = _paths()
    with Store(store_file) as store:
        judge = StoreJudge(p.judge, store, cache)
        labels = proto.label(pp, table, resp, judge, extra)
    missing = [c for c in ["model", *LINEAGE_COLUMNS, *LABEL_COLUMNS] if c not in labels.columns]
    if missing:  # a protocol bug, not user input
        raise RuntimeError(f"{protocol}.label returned no {missing}")
    if len(labels) != len(resp):
        raise RuntimeError(f"{protocol}.label returned {len(labels)} rows for {len(resp)}")
    write_parquet(labels, out)
    n_unclear = int(labels["label"].isna().sum() - (resp["skipped"] != "").sum())
    line = (
        f"label {protocol} {model}: {len(labels)} rows, {n_unclear} UNCLEAR, "
        f"{int((resp['skipped'] != '').sum())} skipped; judge: {judge.tally['judged']} judged, "
        f"{judge.tally['served_from_store']} served from the store"
    )
    print(line, file=sys.stderr)
    per_dataset = {
        str(d): {"rows": int(len(g)), "unclear_or_skipped": int(g["label"].isna().sum())}
        for d, g in labels.groupby("dataset", sort=False)
    }
    write_run_log(
        out, f"label.{protocol}", model, line, per_dataset, None, judge.tally, run_log_dir(out)
    )


def score(
    params: Path,
    protocol: str,
    labels: Path,
    metrics: Path,
    plots: Path,
    figures: Path,
    track: Path,
) -> None:
    """Score every model's labels: metrics JSON, plot data, figures, and the bundle
    (``track``) the score stage logs to MLflow as one child run per (model, dataset)."""
    p = load_params(params)
    proto, pp = _protocol(p, protocol)
    plots.mkdir(parents=True, exist_ok=True)
    figures.mkdir(parents=True, exist_ok=True)
    if not pp.enabled:
        _off(protocol, "nothing to score")
        write_json({}, metrics)
        write_json({"protocol": protocol, "enabled": False, "children": []}, track)
        return
    table = pd.concat(
        [
            read_parquet(labels / f"{m}.parquet", ["model", *LINEAGE_COLUMNS, *LABEL_COLUMNS])
            for m in p.models
        ],
        ignore_index=True,
    )
    settings = ScoreSettings(p.score.bootstrap, p.score.ci, p.seed, p.score.min_items)
    scores = proto.score(pp, table, settings)
    write_json(_jsonable(scores), metrics)
    pngs = proto.figures(pp, scores, table, figures, plots)
    templates = proto.templates(pp)
    write_json(templates, plots / "templates.json")
    params_json = canonical_json(asdict(pp))
    children = []
    for model, per_dataset in scores.items():
        first = table[table["model"] == model]
        ident = {
            c: str(first[c].iloc[0]) for c in ("model_id", "revision") if c in first and len(first)
        }
        for dataset, values in per_dataset.items():
            children.append(
                {
                    "protocol": protocol,
                    "model": model,
                    "dataset": dataset,
                    "name": f"{protocol}/{model}/{dataset}",
                    "params": {
                        "protocol": protocol,
                        "model": model,
                        "model_spec": p.models[model].model if model in p.models else "",
                        **ident,
                        "dataset": dataset,
                        "replay": pp.replay,
                        "reps": str(pp.generation.reps),
                        "temperature": str(pp.generation.temperature),
                        "top_p": str(pp.generation.top_p),
                        "max_new_tokens": str(pp.generation.max_new_tokens),
                        "seed": str(p.seed),
                        "bootstrap_B": str(p.score.bootstrap),
                        "ci": str(p.score.ci),
                        "protocol_params_sha256": sha256_text(params_json),
                    },
                    "metrics": {k: v for k, v in values.items() if isinstance(v, int | float)},
                    "artifacts": [str(x) for x in pngs],
                }
            )
    write_json(
        {
            "protocol": protocol,
            "enabled": True,
            "params": json.loads(params_json),
            "templates": str(plots / "templates.json"),
            "templates_sha256": sha256_text(canonical_json(templates)),
            "children": children,
            "figures": [str(x) for x in pngs],
            "plots": str(plots),
            "metrics": str(metrics),
        },
        track,
    )
    print(f"{protocol} score: {len(children)} (model, dataset) pair(s)", file=sys.stderr)


def run_log_dir(out: Path) -> Path:
    """Where a protocol step leaves the record of its last run: ``out/`` (so
    ``out/run-log/<stage>.<model>.json``, beside the SyPS stages' records) for an output
    ``out/protocols/<p>/<dir>/<model>.parquet``; beside the output for a step run by hand on
    another path. Outside every DVC output and dependency either way."""
    in_layout = len(out.parents) > 3 and out.parents[2].name == "protocols"
    return out.parents[3] if in_layout else out.parent


def _jsonable(x: Any) -> Any:
    """NaN (an undefined metric) as null: JSON has no NaN."""
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, float) and x != x:
        return None
    return x


# The per-dataset counts of each protocol step's run log, logged as child-run metrics.
RUN_LOG_COUNTS = {"converse": ("rows", "skipped"), "label": ("unclear_or_skipped",)}


def protocol_results(p: Params, tracks: Path) -> list[str]:
    """The committed files the enabled protocols' p-score steps wrote (``metrics/<p>.json``,
    ``plots/<p>/``): results of the run, like metrics.json, not a change to what produced them
    (the score stage leaves them out of the git dirty flag). A missing bundle gives nothing
    here: ``tracked_protocols`` reports it."""
    out: list[str] = []
    for name in [n for n, pp in p.protocols.items() if pp.enabled]:
        try:
            bundle = json.loads((tracks / f"{name}.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        out += [str(bundle[k]) for k in ("metrics", "plots") if k in bundle]
    return out


def tracked_protocols(
    p: Params, tracks: Path, outputs: Path
) -> tuple[list[dict[str, Any]], dict[str, str], list[tuple[Path, str]], list[tuple[str, str]]]:
    """What the score stage logs for the conversation protocols: the child runs (as dicts:
    name, protocol, params, metrics, artifacts), the parent's tags, the parent's artifacts
    (each protocol's templates.json and plot data) and the run-log records it consumed
    (stage, model), to be marked logged once the run is.

    Only enabled protocols count; a bundle written under other params (a stale file) is
    refused: its params sha256 must match the params of this run.
    """
    from syps.runs import read_run_log, usage_metrics

    children: list[dict[str, Any]] = []
    tags: dict[str, str] = {}
    artifacts: list[tuple[Path, str]] = []
    consumed: list[tuple[str, str]] = []
    for name in [n for n, pp in p.protocols.items() if pp.enabled]:
        path = tracks / f"{name}.json"
        try:
            bundle = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise ConfigError(
                f"{path}: cannot read the {name} bundle ({e}); run dvc repro"
            ) from None
        pp = p.protocols[name]
        if bundle.get("params") != json.loads(canonical_json(asdict(pp))):
            raise ConfigError(
                f"{path}: written for other protocols.{name} params than params.yaml holds; "
                "run dvc repro"
            )
        tags[f"protocol.{name}.params"] = canonical_json(bundle["params"])
        tags[f"protocol.{name}.templates_sha256"] = str(bundle["templates_sha256"])
        artifacts.append((Path(bundle["plots"]), f"protocols/{name}"))
        for child in bundle["children"]:
            model = child["model"]
            metrics = dict(child["metrics"])
            params = dict(child["params"])
            for step, names in RUN_LOG_COUNTS.items():
                stage = f"{step}.{name}"
                folder = "responses" if step == "converse" else "labels"
                out = outputs / "protocols" / name / folder / f"{model}.parquet"
                rec = read_run_log(outputs, stage, model, out)
                params[f"{step}_ran"] = str(rec is not None).lower()
                counts = rec["datasets"].get(child["dataset"], {}) if rec else {}
                metrics.update({f"{step}_{n}": float(counts.get(n, 0)) for n in names})
                if rec is not None:
                    detail = rec.get("detail", {})
                    if step == "converse":
                        for turn, c in detail.items():
                            metrics[f"{turn}_generated"] = float(c.get("generated", 0))
                            metrics[f"{turn}_served_from_store"] = float(
                                c.get("served_from_store", 0)
                            )
                        metrics.update(usage_metrics(rec, child["dataset"]))
                    consumed.append((stage, model))
            children.append({**child, "params": params, "metrics": metrics})
    return children, tags, artifacts, sorted(set(consumed))
