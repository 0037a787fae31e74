"""Rebuild the betting protocol's built-in sample from TruthfulQA.

    python scripts/make_betting_subset.py [SOURCE_DIR] [--n 24] [--seed 0]

SOURCE_DIR holds TruthfulQA.csv and its NOTICE (default ../shared/truthfulqa). The chosen rows
are copied unchanged, in source order, to data/builtin/betting/truthfulqa_subset.csv, and the
NOTICE beside it says which rows and how they were chosen.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from syps.core.io import read_csv, write_text
from syps.protocols.betting.items import BUILTIN_SUBSET, items_from_frame, stratified_subset

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("source", nargs="?", default=str(REPO.parent / "shared" / "truthfulqa"))
    ap.add_argument("--n", type=int, default=24)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    src = Path(args.source) / "TruthfulQA.csv"
    df = read_csv(src, required=[])
    items = stratified_subset(items_from_frame(df, str(src)), args.n, args.seed)
    rows = df.iloc[[it.row - 1 for it in items]]
    out = REPO / BUILTIN_SUBSET
    write_text(rows.to_csv(index=False, lineterminator="\n"), out)
    notice = (Path(args.source) / "NOTICE").read_text(encoding="utf-8")
    write_text(
        notice.rstrip("\n")
        + f"\n\n{out.name}: {len(items)} rows of TruthfulQA.csv (data rows "
        + ", ".join(str(it.row) for it in items)
        + "), copied unchanged, chosen by scripts/make_betting_subset.py "
        + f"(stratified by Category, --n {args.n} --seed {args.seed}).\n",
        out.parent / "NOTICE",
    )
    print(f"{out}: {len(items)} items from {len(df)}")


if __name__ == "__main__":
    main()
