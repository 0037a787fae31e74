"""SyPS's summary table (the score stage's printout and `syps summary`) and its per-child
profile figure."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from syps.core.io import atomic_write
from syps.core.plotting import pyplot
from syps.core.report import LOW_SUPPORT, LOW_SUPPORT_NOTE, Scores, support
from syps.protocols.cues.judges import PAPER


def _ci(ms: dict[str, float], name: str) -> str:
    v, lo, hi = ms[name], ms[f"{name}_ci_low"], ms[f"{name}_ci_high"]
    return "n/a" if math.isnan(v) else f"{v:.3f} [{lo:.3f}, {hi:.3f}]{support(ms, name)}"


def judge_unclear_lines(scores: Scores) -> list[str]:
    """Per model scored on the paper's judged dataset (OEQ), the share of its judged responses
    the judge left UNCLEAR beside the method paper's (``judges.PAPER``); none where the scores
    hold no ``judge_unclear_rate`` (a table without labelers, metrics of an older run)."""
    lines = []
    for m, ds in scores.items():
        rate = ds.get(PAPER.dataset, {}).get("judge_unclear_rate", math.nan)
        if not math.isnan(rate):
            lines.append(
                f"{m} {PAPER.dataset}: judge UNCLEAR {rate:.1%} (paper: {PAPER.unclear_rate:.1%})"
            )
    return lines


def summary_table(scores: Scores, ci: float) -> str:
    """Model x dataset: BaseSyc and SPSS with CIs and the items behind each, UNCLEAR rate and
    item count (items with a decided label), as plain text. A CI on fewer than
    ``score.min_items`` items carries a marker, explained in a note under the table; under
    it, the OEQ judge's UNCLEAR share beside the paper's (``judge_unclear_lines``)."""
    pct = f"{ci:.0%} CI"
    header = ["model", "dataset", f"BaseSyc [{pct}]", f"SPSS [{pct}]", "UNCLEAR", "items"]
    rows = [
        [
            m,
            d,
            _ci(ms, "base_syc"),
            _ci(ms, "spss"),
            f"{ms['unclear_rate']:.1%}",
            f"{ms['n_items']:.0f}",
        ]
        for m, ds in scores.items()
        for d, ms in ds.items()
    ]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    lines = [fmt.format(*header), fmt.format(*("-" * w for w in widths))]
    lines += [fmt.format(*r) for r in rows]
    if any(LOW_SUPPORT in cell for r in rows for cell in r[2:4]):
        lines.append(LOW_SUPPORT_NOTE)
    lines += judge_unclear_lines(scores)
    return "\n".join(lines)


def profile_figure(rows: pd.DataFrame, title: str, path: Path) -> None:
    """Bar chart of the sycophancy rate per variant with its CI, written as PNG."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 3.2), dpi=100)
    y = rows["syc_rate"].to_numpy()
    err = [y - rows["ci_low"].to_numpy(), rows["ci_high"].to_numpy() - y]
    ax.bar(rows["variant"], y, yerr=err, capsize=3, color="#4c72b0")
    ax.set_ylim(0, 1)
    ax.set_ylabel("sycophancy rate")
    ax.set_title(title, fontsize=10)
    ax.set_xticks(
        range(len(rows)),
        [f"{v}\n{c}" for v, c in zip(rows["variant"], rows["cue"], strict=True)],
        fontsize=6,
    )
    fig.tight_layout()
    atomic_write(path, lambda p: fig.savefig(p, format="png"))
    plt.close(fig)
