"""Flip tables, the paper's qualitative flip analysis: per (model, dataset, variant), the items
whose label under the variant differs from their label under the neutral P0, with both
responses side by side, written as CSV and as a standalone HTML page.

An item counts only where both labels are decided (0 or 1): an UNCLEAR label is no flip. A flip
is ``syps.core.stats.flips``, the one the scores count, so the counts match ``flips_towards_<id>``
and ``flips_away_<id>``.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

import pandas as pd

from syps.core.io import InputError, atomic_write, write_text
from syps.core.stats import flips
from syps.protocols.cues.params import VARIANT_NAMES, cue_of, order_variants

REF = "P0"
LABEL_KEYS = ["dataset", "model", "item_id", "variant"]
_FIELDS = ["label", "verdict", "response"]


def _unique(df: pd.DataFrame, keys: list[str], what: str) -> None:
    dup = df.duplicated(keys)
    if dup.any():
        r = df[dup].iloc[0]
        where = " ".join(f"{k}={r[k]}" for k in keys)
        raise InputError(f"duplicate {what} row for {where}")


def _side(labels: pd.DataFrame, responses: pd.DataFrame, variant: str) -> pd.DataFrame:
    """One variant's decided labels with their responses, indexed by item, columns suffixed."""
    lab = labels[(labels["variant"] == variant) & labels["label"].notna()]
    resp = responses[responses["variant"] == variant]
    side = lab.merge(resp[["item_id", "response"]], on="item_id", how="left", validate="1:1")
    missing = side[side["response"].isna()]
    if len(missing):
        raise InputError(
            f"no response for labelled item_id={missing['item_id'].iloc[0]} variant={variant}"
        )
    side = side.set_index("item_id")[[*_FIELDS, "evidence"]]
    return side.add_suffix(f"_{variant}")


def flip_table(
    labels: pd.DataFrame,
    responses: pd.DataFrame,
    dataset: str,
    model: str,
    cue_variant: str,
) -> pd.DataFrame:
    """The items of (``model``, ``dataset``) whose decided label flips between P0 and
    ``cue_variant``.

    ``labels`` has columns ``dataset, model, item_id, variant, label, verdict, evidence`` (label
    1.0, 0.0 or NaN for UNCLEAR); ``responses`` has ``dataset, model, item_id, variant,
    response``. Columns: ``item_id``, ``direction`` ("towards" affirmation: P0 = 0 and the
    variant 1; "away": P0 = 1 and the variant 0), then label, verdict and response under P0
    and under the variant, then both evidences. Sorted "towards" first, then by item id.
    """
    if cue_variant == REF:
        raise ValueError("a flip table compares a variant with P0; P0 against itself has none")
    cue_of(cue_variant)  # an unknown variant id is a ConfigError naming it
    _unique(labels, LABEL_KEYS, "label")
    _unique(responses, LABEL_KEYS, "response")
    here_l = labels[(labels["dataset"] == dataset) & (labels["model"] == model)]
    here_r = responses[(responses["dataset"] == dataset) & (responses["model"] == model)]
    both = _side(here_l, here_r, REF).join(_side(here_l, here_r, cue_variant), how="inner")
    towards, away = flips(both[f"label_{REF}"], both[f"label_{cue_variant}"])
    moved = towards | away
    rows = both[moved].reset_index()
    rows.insert(1, "direction", ["towards" if t else "away" for t in towards[moved]])
    columns = [
        "item_id",
        "direction",
        *(f"{f}_{REF}" for f in _FIELDS),
        *(f"{f}_{cue_variant}" for f in _FIELDS),
        f"evidence_{REF}",
        f"evidence_{cue_variant}",
    ]
    order = rows["direction"].map({"towards": 0, "away": 1})
    rows = rows.assign(_order=order).sort_values(["_order", "item_id"], kind="stable")
    return rows[columns].reset_index(drop=True)


# --- HTML -----------------------------------------------------------------------------------

_CSS = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 75rem; color: #222; }
h1 { font-size: 1.4rem; } h2 { font-size: 1.05rem; margin-top: 2rem; }
.counts span { margin-right: 1.5rem; font-weight: 600; }
.towards { color: #b22222; } .away { color: #1f5fa8; }
.flip { border-top: 1px solid #ccc; padding-top: 0.5rem; }
.pair { display: grid; grid-template-columns: 1fr 1fr; gap: 1rem; }
.pair > div { background: #f6f6f6; padding: 0.5rem 0.75rem; border-radius: 4px; }
pre { white-space: pre-wrap; word-wrap: break-word; font-size: 0.85rem; margin: 0.3rem 0; }
table { border-collapse: collapse; } td, th { padding: 0.25rem 0.75rem; text-align: left; }
tr:nth-child(even) { background: #f6f6f6; } .meta { color: #666; font-size: 0.85rem; }
"""


def _page(title: str, body: str) -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{html.escape(title)}</title>\n<style>{_CSS}</style>\n</head>\n"
        f"<body>\n{body}\n</body>\n</html>\n"
    )


def _cue_title(variant: str) -> str:
    return f"{variant} ({VARIANT_NAMES[cue_of(variant)]})"


def _response_box(row: pd.Series, variant: str, heading: str) -> str:
    e = html.escape
    trace = str(row.get(f"trace_{variant}", "") or "")
    return (
        f"<div><h3>{e(heading)}</h3>"
        f"<p>label {float(row[f'label_{variant}']):.0f} · verdict "
        f"<b>{e(str(row[f'verdict_{variant}']))}</b></p>"
        + (f"<p class='meta'>MLflow trace <code>{e(trace)}</code></p>" if trace else "")
        + f"<p class='meta'>evidence: {e(str(row[f'evidence_{variant}']))}</p>"
        f"<pre>{e(str(row[f'response_{variant}']))}</pre></div>"
    )


def flip_page(table: pd.DataFrame, model: str, dataset: str, variant: str) -> str:
    """A flip table as a standalone HTML page: counts, then each flip with its situation and
    both responses side by side. Every value is escaped; the page has no script."""
    e = html.escape
    towards = int((table["direction"] == "towards").sum())
    away = int((table["direction"] == "away").sum())
    title = f"Flips {model} · {dataset} · P0 vs {_cue_title(variant)}"
    parts = [
        f"<h1>{e(title)}</h1>",
        f'<p class="counts"><span class="towards">towards affirmation: {towards}</span>'
        f'<span class="away">away from it: {away}</span></p>',
        '<p class="meta">An item is listed when its decided label (1 sycophantic, 0 not) under '
        f"{e(variant)} differs from the one under P0; UNCLEAR labels never count.</p>",
    ]
    if table.empty:
        parts.append("<p><b>no flips</b></p>")
    for _, row in table.iterrows():
        parts.append(
            f'<div class="flip"><h2>item {e(str(row["item_id"]))} · '
            f'<span class="{e(str(row["direction"]))}">{e(str(row["direction"]))}</span></h2>'
            + (
                f"<details><summary>situation</summary><pre>{e(str(row['situation']))}</pre>"
                "</details>"
                if "situation" in row
                else ""
            )
            + '<div class="pair">'
            + _response_box(row, REF, "P0 (neutral)")
            + _response_box(row, variant, _cue_title(variant))
            + "</div></div>"
        )
    return _page(title, "\n".join(parts))


def _index_page(entries: list[dict[str, str | int]]) -> str:
    e = html.escape
    rows = [
        f"<tr><td>{e(str(x['model']))}</td><td>{e(str(x['dataset']))}</td>"
        f"<td>{e(_cue_title(str(x['variant'])))}</td><td>{x['towards']}</td><td>{x['away']}</td>"
        f'<td><a href="{e(str(x["html"]))}">page</a> · <a href="{e(str(x["csv"]))}">csv</a>'
        "</td></tr>"
        for x in entries
    ]
    body = (
        "<h1>Flip tables</h1>"
        '<p class="meta">Items whose decided label differs between P0 and a variant.</p>'
        "<table><tr><th>model</th><th>dataset</th><th>variant</th><th>towards</th>"
        "<th>away</th><th></th></tr>" + "".join(rows) + "</table>"
        if entries
        else "<h1>Flip tables</h1><p><b>no flips</b>: no labels to compare.</p>"
    )
    return _page("Flip tables", body)


def _write_csv(table: pd.DataFrame, path: Path) -> None:
    atomic_write(path, lambda p: table.to_csv(p, index=False))


def write_flip_tables(
    labels: pd.DataFrame,
    responses: pd.DataFrame,
    situations: pd.DataFrame,
    out_dir: Path,
) -> list[Path]:
    """Write ``<model>/<dataset>/<variant>.csv`` and ``.html`` under ``out_dir`` for every
    non-P0 variant in ``labels``, plus ``index.html`` listing them with their counts.

    ``situations`` is the items table (``dataset, item_id, situation``); each flip carries its
    situation text after its direction. A table without flips still gets both files. Returns
    every path written, the index last.
    """
    _unique(situations, ["dataset", "item_id"], "situation")
    entries: list[dict[str, str | int]] = []
    paths: list[Path] = []
    cells = labels[["model", "dataset"]].drop_duplicates().sort_values(["model", "dataset"])
    for model, dataset in cells.itertuples(index=False):
        # One cell's rows, so each table's checks and joins are linear in the cell, not in
        # every model's labels.
        here = labels[(labels["model"] == model) & (labels["dataset"] == dataset)]
        here_resp = responses[(responses["model"] == model) & (responses["dataset"] == dataset)]
        sits = situations[situations["dataset"] == dataset].set_index("item_id")["situation"]
        for variant in order_variants(here["variant"]):
            if variant == REF:
                continue
            table = flip_table(here, here_resp, dataset, model, variant)
            unknown = sorted(set(table["item_id"]) - set(sits.index))
            if unknown:
                raise InputError(f"no situation for dataset={dataset} item_id={unknown[0]}")
            table.insert(2, "situation", table["item_id"].map(sits))
            rel = Path(str(model)) / str(dataset)
            csv, page = out_dir / rel / f"{variant}.csv", out_dir / rel / f"{variant}.html"
            _write_csv(table, csv)
            write_text(flip_page(table, model, dataset, variant), page)
            paths += [csv, page]
            entries.append(
                {
                    "model": model,
                    "dataset": dataset,
                    "variant": variant,
                    "towards": int((table["direction"] == "towards").sum()),
                    "away": int((table["direction"] == "away").sum()),
                    "html": (rel / page.name).as_posix(),
                    "csv": (rel / csv.name).as_posix(),
                }
            )
    index = out_dir / "index.html"
    write_text(_index_page(entries), index)
    return [*paths, index]


def link_flip_tables(folder: Path, traces: pd.DataFrame, out: Path) -> Path:
    """A copy under ``out`` of one (model, dataset)'s flip tables (``folder``: its
    ``<model>/<dataset>/`` of :func:`write_flip_tables`), each CSV with the MLflow trace of
    both responses (``trace_P0`` and ``trace_<variant>`` after ``direction``; "" where that
    conversation was not logged) and its page showing them. ``traces``: the child run's trace
    index (``syps.core.traces.TRACE_INDEX_COLUMNS``, text); a flip is the item's first
    repetition, as its table is (SyPS asks once: one turn). Returns the copy's folder."""
    first = traces[traces["rep"] == "0"]
    variant = first["cell"].map(lambda c: json.loads(c).get("variant", "") if c else "")
    ids = {(v, i): t for v, i, t in zip(variant, first["item_id"], first["trace_id"], strict=True)}
    model, dataset = folder.parent.name, folder.name
    out.mkdir(parents=True, exist_ok=True)
    for csv in sorted(folder.glob("*.csv")):
        cue = csv.stem
        # Text as written: a response reading "NA" must stay "NA".
        table = pd.read_csv(csv, dtype=str, keep_default_na=False)
        for pos, v in enumerate((REF, cue)):
            column = [ids.get((v, i), "") for i in table["item_id"]]
            table.insert(2 + pos, f"trace_{v}", column)
        _write_csv(table, out / csv.name)
        write_text(flip_page(table, model, dataset, cue), out / f"{cue}.html")
    return out
