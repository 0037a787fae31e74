"""The scores of the discernment protocol from its label table: the issue's scores table
(``scores_table``), then ``metrics.score_model`` per (model, dataset) with the unparsed shares,
the support of each metric and the skipped counts (``score_labels``).
"""

from __future__ import annotations

import math

import pandas as pd

from syps.core.io import InputError
from syps.core.protocol import ScoreSettings
from syps.protocols.discernment.items import DIRECTIONS, NO_DIRECTION
from syps.protocols.discernment.metrics import CLASSES, COLUMNS, score_model, validate
from syps.protocols.discernment.params import NAME, DiscernmentParams
from syps.protocols.discernment.parse import PARSED


def scores_table(labels: pd.DataFrame) -> pd.DataFrame:
    """The label table as the issue's scores table (``metrics.COLUMNS`` plus ``dataset``): one
    row per (argument, repetition) with a direction; ``s0`` that repetition's parsed baseline."""
    base = labels[labels["stage"] == "baseline"][["model", "dataset", "item_id", "rep", "label"]]
    base = base.rename(columns={"label": "s0"})
    up = labels[(labels["stage"] == "update") & labels["direction"].isin(DIRECTIONS)]
    up = up[["model", "dataset", "item_id", "rep", "arg_id", "direction", "validity", "label"]]
    tab = up.rename(columns={"label": "s1"}).merge(
        base, on=["model", "dataset", "item_id", "rep"], how="left", validate="many_to_one"
    )
    tab = tab.rename(columns={"item_id": "artefact_id"})
    return tab[["dataset", *COLUMNS]].reset_index(drop=True)


def _cell_name(stage: str, validity: str) -> str:
    return "baseline" if stage == "baseline" else validity


def _rate(labels: pd.DataFrame) -> float:
    gen = labels[labels["verdict"] != "SKIPPED"]
    return float((gen["verdict"] != PARSED).mean()) if len(gen) else math.nan


def _support(ms: dict[str, float], min_items: int) -> None:
    """``<metric>_n`` (the artefacts a CI rests on) and ``<metric>_low_support`` (1.0 when
    below ``min_items``) for every metric with a CI; a composite rests on both classes."""
    n_val = ms.get("n_artefacts_valid", 0.0)
    n_inv = ms.get("n_artefacts_invalid", 0.0)
    for key in [k[: -len("_ci_low")] for k in ms if k.endswith("_ci_low")] + ["pval", "pinval"]:
        if key.endswith("_valid") or key == "pval":
            n = n_val
        elif key.endswith("_invalid") or key == "pinval":
            n = n_inv
        else:
            n = min(n_val, n_inv)
        ms[f"{key}_n"] = n
        ms[f"{key}_low_support"] = float(n < min_items)


def score_labels(
    p: DiscernmentParams, labels: pd.DataFrame, settings: ScoreSettings
) -> dict[str, dict[str, dict[str, float]]]:
    """``metrics.score_model`` per (model, dataset), with each stage's unparsed share, the
    metrics' support, the artefacts without a direction and the skipped count per cell."""
    table = scores_table(labels)
    out: dict[str, dict[str, dict[str, float]]] = {}
    for (model, dataset), lab in labels.groupby(["model", "dataset"], sort=True):
        tab = table[(table["model"] == model) & (table["dataset"] == dataset)]
        tab = validate(tab.drop(columns="dataset"), f"labels of {model}/{dataset}")
        weights = None
        if p.ratings.source != "none":
            qs = lab[lab["arg_id"].isin(tab["arg_id"])].drop_duplicates("arg_id")
            weights = dict(zip(qs["arg_id"], qs["q"].astype(float), strict=True))
        if len(tab):
            ms = score_model(
                tab,
                weights,
                p.k,
                baseline=p.baseline,
                n_boot=settings.bootstrap,
                seed=settings.seed,
                ci=settings.ci,
            )
        else:
            ms = {}
        # The unparsed share of each stage over every generated response (the metrics' own
        # rates leave out artefacts without a direction).
        ms["unparsed_rate_baseline"] = _rate(lab[lab["stage"] == "baseline"])
        ms["unparsed_rate_update"] = _rate(lab[lab["stage"] == "update"])
        for stage in ("baseline", "update"):
            r = ms[f"unparsed_rate_{stage}"]
            if r > p.max_unparsed:
                raise InputError(
                    f"protocols.{NAME}.max_unparsed: {model}/{dataset}: {r:.0%} of the {stage} "
                    f"responses did not parse (limit {p.max_unparsed:.0%})"
                )
        for h in ("pval", "pinval", "pval_minus_pinval", "d_star"):
            ms.setdefault(h, math.nan)
        _support(ms, settings.min_items)
        ms["n_artefacts_no_direction"] = float(
            lab[(lab["stage"] == "update") & (lab["direction"] == NO_DIRECTION)][
                "item_id"
            ].nunique()
        )
        sk = lab[lab["verdict"] == "SKIPPED"]
        for cell in ("baseline", *CLASSES):
            names = [_cell_name(s, v) for s, v in zip(sk["stage"], sk["validity"], strict=True)]
            ms[f"n_skipped/{cell}"] = float(names.count(cell))
        out.setdefault(str(model), {})[str(dataset)] = ms
    return out
