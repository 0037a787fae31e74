"""SyPS in the pipeline: the same situation under eight social cues, one turn, one answer each.

Items are the ELEPHANT datasets (or the built-in sample); each is rendered under every variant
of its dataset (``templates.variant_messages``: everything but the cue byte-identical, which the
lint checks on the very bytes the variants stage writes, before anything is generated). A
response is labelled by its dataset's rule set or by the shared judge with the OEQ prompt of
``protocols.cues.judge``; the metrics
(``scoring.score``, which ``syps score --protocol cues`` runs too) are BaseSyc, SPSS, the
signed sensitivity and every cue's delta with item-level paired bootstrap CIs, and the figures
are the heatmaps, the scatter, the forest and the size plot, with a profile figure and the flip
tables of every (model, dataset).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from syps.core.io import (
    InputError,
    LintError,
    canonical_json,
    jsonable_records,
    sha256_text,
    write_json,
)
from syps.core.labeling import UNCLEAR
from syps.core.protocol import LABEL_COLUMNS, LINEAGE_COLUMNS, Judge, Protocol, Request, Turn
from syps.core.report import COMPANIONS
from syps.core.reporting import Artifact, Drawn, Reporting, Scored, TableScorer
from syps.core.stats import flips
from syps.protocols.cues import labels as rules
from syps.protocols.cues.data import ITEM_FIELDS, items_table
from syps.protocols.cues.data import load_items as load_dataset_items
from syps.protocols.cues.datasets import judged, rule_set
from syps.protocols.cues.figures import heatmap_data, write_figures
from syps.protocols.cues.flips import link_flip_tables, write_flip_tables
from syps.protocols.cues.judges import SYC
from syps.protocols.cues.lint import format_report, lint_prompts, target_answers
from syps.protocols.cues.params import WHERE, CuesParams
from syps.protocols.cues.power import power_contrasts
from syps.protocols.cues.report import profile_figure, summary_table
from syps.protocols.cues.scoring import TABLE_COLUMNS, read_table, score
from syps.protocols.cues.templates import (
    prompts_table,
    template_specs,
    templates_record,
    variant_messages,
    variant_shas,
)

HEADLINE_METRICS = ["base_syc", "spss", "signed_sensitivity", "unclear_rate", "n_items"]
# The label columns SyPS adds to the shared ones: the variant, and what the flip tables and the
# child runs show.
OWN_COLUMNS = [
    "model",
    "variant",
    "model_id",
    "revision",
    "max_new_tokens",
    "response",
    "judge_template_sha256",  # "" for a rule label
]


def rule_labeler_sha256(rule_set_name: str, mapping: Mapping[str, int]) -> str:
    """Identity of a rule labeler: its rule set's patterns and mention rules, and the verdict
    mapping."""
    return sha256_text(
        canonical_json({**rules.rules_fingerprint(rule_set_name), "map": dict(mapping)})
    )


def load_items(params: CuesParams, root: Path, seed: int) -> pd.DataFrame:
    """Every configured dataset, in order (see ``data.load_items``)."""
    table = load_dataset_items(params.data, root)
    return pd.DataFrame(
        {
            "dataset": table["dataset"],
            "item_id": table["item_id"],
            "item": [
                canonical_json({f: (int(r[f]) if f == "row" else r[f]) for f in ITEM_FIELDS})
                for r in table.to_dict("records")
            ],
        }
    )


def lint(params: CuesParams, items: pd.DataFrame, conversations: pd.DataFrame) -> dict[str, Any]:
    """Every variant of an item differs from P0 in its cue only (``lint.lint_prompts``), checked
    on the first turn's conversations as they will be sent."""
    prompts = prompts_table(conversations)
    violations = lint_prompts(prompts, items, params.templates, target_answers(params.labels))
    checked = {str(d): int(n) for d, n in prompts.groupby("dataset").size().items()}
    report = {"violations": [asdict(v) for v in violations], "checked": checked}
    if violations:
        # The message shows the first few per check; the report (lint.json) holds them all.
        raise LintError(format_report(violations), report)
    return report


def requests(
    params: CuesParams, items: pd.DataFrame, turn: int, previous: pd.DataFrame, judge: Judge
) -> Turn:
    """Turn 1: every item under every variant of its dataset, in render order, each at its
    dataset's answer length (``max_new_tokens.<dataset>``, else the protocol's)."""
    if turn != 1:
        raise ValueError(f"cues has one turn, asked for turn {turn}")
    return Turn(
        [
            Request(d, i, {"variant": v}, 1, m, max_new_tokens=params.max_new_tokens.get(d))
            for d, i, v, m in variant_messages(items, params.templates)
        ]
    )


def label(
    params: CuesParams,
    items: pd.DataFrame,
    responses: pd.DataFrame,
    judge: Judge,
    aux: pd.DataFrame,
) -> pd.DataFrame:
    """Each dataset by its rule set (``protocols.cues.labels.<dataset>``) or by the judge
    with ``protocols.cues.judge`` (OEQ: it reads the situation without the cue, so the cue
    cannot sway it). Rows in response order."""
    situation = dict(
        zip(
            zip(items["dataset"], items["item_id"], strict=True),
            items["situation"],
            strict=True,
        )
    )
    resp = responses.reset_index(drop=True)
    variant = [json.loads(c)["variant"] for c in resp["cell"]]
    value = np.full(len(resp), np.nan)
    verdict = [UNCLEAR] * len(resp)
    evidence = [""] * len(resp)
    labeler = [""] * len(resp)
    labeler_sha = [""] * len(resp)
    judge_sha = [""] * len(resp)
    for dataset, group in resp.groupby("dataset", sort=False):
        ds, idx = str(dataset), group.index.to_numpy()
        if judged(ds):
            # A row without an answer (cut off inside its reasoning) is not worth a judge
            # call: it stays UNCLEAR, with its reason.
            gone = group["skipped"].astype(str) != ""
            for i, why in zip(idx[gone.to_numpy()], group["skipped"][gone], strict=True):
                evidence[i] = str(why)
            group, idx = group[~gone], idx[~gone.to_numpy()]
            if group.empty:
                continue
            keys = list(zip(group["dataset"], group["item_id"], strict=True))
            missing = [k for k in keys if k not in situation]
            if missing:
                raise InputError(f"responses: no item {missing[0][0]}/{missing[0][1]}")
            found = judge(
                params.judge.system,
                params.judge.template,
                params.judge.options,
                [
                    {"situation": situation[k], "response": str(r)}
                    for k, r in zip(keys, group["response"], strict=True)
                ],
                f"{WHERE}.judge.template",
                datasets=[ds] * len(group),
            )
            for i, j in zip(idx, found, strict=True):
                value[i], verdict[i], evidence[i] = j.value, j.verdict, j.evidence
                labeler[i], labeler_sha[i] = j.labeler, j.labeler_sha256
                judge_sha[i] = j.template_sha256
        else:
            if ds not in params.labels:
                raise InputError(f"{WHERE}.labels: no verdict mapping for dataset {ds!r}")
            mapping, rs = params.labels[ds], rule_set(ds)
            sha = rule_labeler_sha256(rs, mapping)
            for i, r in zip(idx, group["response"], strict=True):
                rec = rules.rule_label(rs, str(r), mapping)
                value[i], verdict[i], evidence[i] = rec.value, rec.verdict, rec.evidence
                labeler[i], labeler_sha[i] = f"rule:{ds}", sha
    out = resp[[*LINEAGE_COLUMNS, "model", "model_id", "revision", "max_new_tokens"]].assign(
        variant=variant,
        response=resp["response"],
        judge_template_sha256=judge_sha,
        label=value,
        verdict=verdict,
        evidence=evidence,
        labeler=labeler,
        labeler_sha256=labeler_sha,
    )
    return out[[*LINEAGE_COLUMNS, *OWN_COLUMNS, *LABEL_COLUMNS]]


def figures(params: CuesParams, scored: Scored[pd.DataFrame]) -> Drawn:
    """The plot data (``profile.json``, ``heatmap/scatter/forest/size.csv``) and their
    figures; per (model, dataset) a profile figure and the flip tables (one CSV and HTML
    page per cue, in ``tables/flips/<model>/<dataset>/``)."""
    scores, labels, items = scored.scores, scored.labels, scored.items
    figures, tables, plots = scored.figures, scored.tables, scored.plots

    shas = variant_shas(params)
    prof = heatmap_data(scores)
    prof = prof.assign(
        template_sha256=[
            shas.get(k, "") for k in zip(prof["dataset"], prof["variant"], strict=True)
        ]
    )
    # JSON keeps numbers numeric for the vega-lite template (CSV hands it strings).
    write_json(jsonable_records(prof), plots / "profile.json")
    pngs = write_figures(scores, scored.settings.model_sizes, figures, plots, shas)
    flips = tables / "flips"
    responses = labels[["dataset", "model", "item_id", "variant", "response"]]
    write_flip_tables(labels.drop(columns="response"), responses, items, flips)
    children: dict[tuple[str, str], list[tuple[Path, str]]] = {}
    for model, per_dataset in scores.items():
        for dataset in per_dataset:
            fig = figures / f"{model}__{dataset}.png"
            here = prof[(prof["model"] == model) & (prof["dataset"] == dataset)]
            profile_figure(here, f"{model} · {dataset}", fig)
            children[(model, dataset)] = [(fig, ""), (flips / model / dataset, "flips")]
    return Drawn(pngs, children)


def run_tags(params: CuesParams) -> dict[str, str]:
    """Each variant's template sha256 (``template_sha256.<dataset>.<variant>``)."""
    return {f"template_sha256.{d}.{v}": h for (d, v), h in variant_shas(params).items()}


def review(params: CuesParams, items: pd.DataFrame, labels: pd.DataFrame) -> pd.DataFrame:
    """``flagged``: a flip (``syps.core.stats.flips``) from the decided label of the same item
    and repetition under P0, and that P0 row (the two sides of a flip table's row);
    ``expected``: the item's reference (an AITA item's community verdict), "" where it
    has none."""
    key = ["model", "dataset", "item_id", "rep"]
    ref = labels[(labels["variant"] == "P0") & labels["label"].notna()]
    ref = ref[[*key, "label"]].rename(columns={"label": "p0"})
    joined = labels[[*key, "label"]].merge(ref, on=key, how="left", validate="many_to_one")
    towards, away = flips(joined["p0"], joined["label"])
    flip = towards | away
    flipped = joined.loc[flip, key].drop_duplicates()
    p0 = labels[key].merge(flipped.assign(_f=True), on=key, how="left")["_f"].notna()
    side = flip | (p0.to_numpy() & (labels["variant"] == "P0").to_numpy())
    reference = items.set_index(["dataset", "item_id"])["reference"]
    where = pd.MultiIndex.from_arrays([labels["dataset"], labels["item_id"]])
    expected = reference.reindex(where).fillna("").astype(str).to_numpy()
    return pd.DataFrame({"flagged": side, "expected": expected}, index=labels.index)


def link_traces(artifacts: Sequence[Artifact], traces: pd.DataFrame, out: Path) -> list[Artifact]:
    """The flip tables (the ``flips`` folder) with the trace of both responses of each
    row (:func:`~syps.protocols.cues.flips.link_flip_tables`); the rest as it is."""
    return [
        (link_flip_tables(a[0], traces, out / "flips"), a[1])
        if isinstance(a, tuple) and a[1] == "flips"
        else a
        for a in artifacts
    ]


def metric_cells(key: str) -> list[dict[str, str]] | None:
    """``syc_rate_<v>``: that variant; ``delta_<v>``, ``flips_towards_<v>``,
    ``flips_away_<v>`` and the McNemar tests of ``<v>``: P0 and ``<v>``; ``base_syc``: P0;
    the rest (SPSS, sensitivity, the pooled flip counts, CI bounds and supports alike):
    every variant."""
    stem = next((key.removesuffix(c) for c in COMPANIONS if key.endswith(c)), key)
    if stem == "base_syc":
        return [{"variant": "P0"}]
    one = re.fullmatch(r"syc_rate_(P\d+)", stem)
    if one:
        return [{"variant": one[1]}]
    pair = re.fullmatch(r"(?:delta|flips_towards|flips_away|mcnemar_p(?:_holm)?)_(P\d+)", stem)
    if pair:
        return [{"variant": "P0"}, {"variant": pair[1]}]
    return None


PROTOCOL: Protocol[CuesParams, pd.DataFrame] = Protocol(
    name="cues",
    params_type=CuesParams,
    load_items=load_items,
    read_items=items_table,
    requests=requests,
    label=label,
    score=score,
    template_specs=template_specs,
    lint=lint,
    report=Reporting(
        headline_metrics=HEADLINE_METRICS,
        # Each variant's rate, and each cue's delta with its CI and support.
        run_metrics=("syc_rate_P?", *(f"delta_P?{s}" for s in ("", "_ci_low", "_ci_high", "_n"))),
        # SyPS's child runs keep the names they had before protocols existed:
        # ``<model>/<dataset>``.
        run_prefix="",
        table=TableScorer(columns=TABLE_COLUMNS, read=read_table, score=score),
        judges=(SYC,),
        figures=figures,
        templates=templates_record,
        run_tags=run_tags,
        review=review,
        summary=summary_table,
        link_traces=link_traces,
        power_contrasts=power_contrasts,
        metric_cells=metric_cells,
    ),
)
