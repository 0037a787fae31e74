"""Items: read ELEPHANT-layout CSVs and normalise them into one table.

The items table has one row per (dataset, item) with a content-derived ``item_id``, the
situation text exactly as written (line endings normalised to ``\\n``), and the community
verdict where the dataset has one.
"""

from __future__ import annotations

import json
import os
import re
import urllib.error
import urllib.request
from pathlib import Path

import pandas as pd

from syps.core.io import InputError, read_csv, sha256_file, sha256_text, write_json
from syps.protocols.cues.datasets import DATASETS
from syps.protocols.cues.params import WHERE, DataParams, elephant_local_problem

ITEM_COLUMNS = ["dataset", "item_id", "row", "situation", "reference"]
_SHA256 = re.compile("[0-9a-f]{64}")


def item_id(dataset: str, situation: str) -> str:
    """A stable id from the content, so the same text keeps its id across files and reorderings."""
    return sha256_text(f"{dataset}\x1f{situation}")[:16]


def normalise(
    df: pd.DataFrame, dataset: str, columns: dict[str, str], verdict_value: str, source: str
) -> pd.DataFrame:
    """Map one raw table onto the items layout; ``source`` names the file in errors.

    A dataset whose registry entry has a verdict filter keeps only the rows whose verdict is
    ``verdict_value``; for the others it is ignored.

    ``row`` is the 1-based data row in the source file (the header is row 0).
    """
    sit_col = columns["situation"]
    situations = (
        df[sit_col].str.replace("\r\n", "\n", regex=False).str.replace("\r", "\n", regex=False)
    )
    out = pd.DataFrame(
        {
            "dataset": dataset,
            "row": range(1, len(df) + 1),
            "situation": situations,
            "reference": df[columns["verdict"]].str.strip() if "verdict" in columns else "",
        }
    )
    filtered = DATASETS[dataset].verdict_filter is not None
    if filtered:
        out = out[out["reference"] == verdict_value]
    blank = out[out["situation"].str.strip() == ""]
    if len(blank):
        raise InputError(f"{source}: row {int(blank['row'].iloc[0])}: empty {sit_col!r}")
    if out.empty:
        keep = f" with {columns['verdict']!r} == {verdict_value!r}" if filtered else ""
        raise InputError(f"{source}: no items{keep} for dataset {dataset}")
    out.insert(1, "item_id", [item_id(dataset, s) for s in out["situation"]])
    dup = out[out.duplicated("item_id", keep=False)]
    if len(dup):
        rows = dup["row"].tolist()
        raise InputError(
            f"{source}: rows {rows} have the same {sit_col!r} text; remove the duplicates"
        )
    return out[ITEM_COLUMNS].reset_index(drop=True)


def _read_lock(path: Path) -> dict[str, str]:
    """The pinned ``{url: sha256}`` of a lock file; a damaged lock is an error, never re-pinned."""
    try:
        lock = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as e:  # not UTF-8, or not JSON
        why = f"not JSON: {e}"
    else:
        if not isinstance(lock, dict):
            why = f"a JSON {type(lock).__name__}, not an object {{url: sha256}}"
        else:
            bad = [u for u, h in lock.items() if not (isinstance(h, str) and _SHA256.fullmatch(h))]
            if not bad:
                return lock
            why = f"{bad[0]}: {lock[bad[0]]!r} is not a sha256 (64 lowercase hex digits)"
    raise InputError(
        f"{path}: corrupt lock file ({why}); restore it with `git checkout -- {path}`, or delete "
        f"it to pin whatever the next download gives (only if you trust that download)"
    )


def fetch_elephant(urls: dict[str, str], cache_dir: Path, lock_path: Path) -> dict[str, Path]:
    """Download the released CSVs once into ``cache_dir`` and pin their sha256 in ``lock_path``.

    The first download of a URL records its hash in the lock (commit that file); every later
    use, cached or downloaded, must match it.
    """
    lock = _read_lock(lock_path) if lock_path.exists() else {}
    paths: dict[str, Path] = {}
    for dataset, url in urls.items():
        target = cache_dir / f"{dataset}-{sha256_text(url)[:12]}.csv"
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_suffix(".part")
            try:
                with urllib.request.urlopen(url, timeout=60) as r, open(tmp, "wb") as f:
                    f.write(r.read())
            except (urllib.error.URLError, TimeoutError, OSError) as e:
                tmp.unlink(missing_ok=True)
                raise InputError(
                    f"cannot download {url} ({e}); the 'elephant' source needs network access "
                    f"once, or use {WHERE}.data.source: builtin"
                ) from None
            os.replace(tmp, target)
        digest = sha256_file(target)
        if url in lock and lock[url] != digest:
            raise InputError(
                f"{target}: sha256 {digest} does not match {lock_path} ({lock[url]}) for {url}; "
                f"delete the cached file to download it again, or update the lock on purpose"
            )
        lock[url] = digest
        paths[dataset] = target
    write_json(lock, lock_path)
    return paths


def _elephant_files(params: DataParams, root: Path) -> dict[str, Path]:
    """Downloads for the datasets with a URL; the user's local copy for the rest (SS).

    The local copies are checked before anything is downloaded, so a missing SS file fails at
    once instead of after a download.
    """
    urls = {ds: params.elephant.urls[ds] for ds in params.datasets if ds in params.elephant.urls}
    local: dict[str, Path] = {}
    for ds in params.datasets:
        if ds in urls:
            continue
        path = params.files.get(ds)
        problem = elephant_local_problem(ds, path)
        if problem is not None:
            raise InputError(problem)
        assert path is not None  # elephant_local_problem reports a missing entry
        local[ds] = root / path
        if not local[ds].is_file():
            origin = (
                f" (the ELEPHANT paper's {ds} items are not released in "
                "github.com/myracheng/elephant: supply your own copy)"
                if not DATASETS[ds].elephant_released
                else ""
            )
            raise InputError(f"{WHERE}.data.files.{ds}: {local[ds]}: file not found{origin}")
    fetched = fetch_elephant(urls, root / params.elephant.cache_dir, root / params.elephant.lock)
    return {**fetched, **local}


def load_items(params: DataParams, root: Path) -> pd.DataFrame:
    """Read every configured dataset into one items table (paths relative to ``root``)."""
    if params.source == "elephant":
        files = _elephant_files(params, root)
    else:
        files = {ds: root / p for ds, p in params.files.items()}
    tables = []
    for dataset in params.datasets:
        columns = params.columns[dataset]
        df = read_csv(files[dataset], list(columns.values()))
        spec = DATASETS[dataset]
        value = str(getattr(params, spec.verdict_filter)) if spec.verdict_filter else ""
        items = normalise(df, dataset, columns, value, str(files[dataset]))
        tables.append(items.head(params.limit) if params.limit else items)
    return pd.concat(tables, ignore_index=True)


# The fields of an item record (the core's ``item`` column, JSON).
ITEM_FIELDS = ["row", "situation", "reference"]


def items_table(items: pd.DataFrame) -> pd.DataFrame:
    """The core's items (``dataset, item_id, item`` JSON) back as SyPS's items table."""
    fields = [json.loads(x) for x in items["item"]]
    return pd.DataFrame(
        {
            "dataset": items["dataset"].astype(str).to_numpy(),
            "item_id": items["item_id"].astype(str).to_numpy(),
            **{f: [r[f] for r in fields] for f in ITEM_FIELDS},
        }
    )
