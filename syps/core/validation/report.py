"""The validation report as plain text: the agreement table, the corrected rates, each
dataset's confusion matrix and the published check (what ``syps judge validate`` prints)."""

from __future__ import annotations

from typing import Any

from syps.core.agreement import CATEGORIES
from syps.core.report import LOW_SUPPORT
from syps.core.validation.agree import ALL


def _pct(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.1%}"


def _kappa(e: dict[str, Any]) -> str:
    if e["kappa"] is None:
        return "n/a"
    lo, hi = e["kappa_ci_low"], e["kappa_ci_high"]
    ci = "[n/a]" if lo is None else f"[{lo:.3f}, {hi:.3f}]"
    return f"{e['kappa']:.3f} {ci}"


def _grid(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def validation_table(report: dict[str, Any]) -> str:
    """The report as plain text: one line per dataset (and all), then the corrected rates, each
    confusion matrix, and the published check where the report has its dataset."""
    header = [
        "dataset",
        "n",
        "decided",
        "agreement",
        f"kappa [{report['ci']:.0%} CI]",
        "machine UNCLEAR",
        "human UNCLEAR",
    ]
    rows = [
        [
            d,
            f"{e['n']:.0f}",
            f"{e['n_both_decided']:.0f}",
            _pct(e["agreement"]),
            _kappa(e),
            _pct(e["machine_unclear_rate"]),
            _pct(e["human_unclear_rate"]),
        ]
        for d, e in report["datasets"].items()
    ]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = _grid([header, ["-" * w for w in widths], *rows])
    lines += _corrected_lines(report)
    for d, e in report["datasets"].items():
        if d == ALL:
            continue
        lines += ["", f"{d}: rows human, columns machine"]
        grid = [["", *CATEGORIES]] + [
            [r, *(str(e["confusion"][r][c]) for c in CATEGORIES)] for r in CATEGORIES
        ]
        lines += _grid(grid)
    lines += _reviewer_lines(report)
    lines += _reference_lines(report)
    if report["n_skipped"]:
        lines += ["", f"skipped {report['n_skipped']} row(s) without a human_label"]
    return "\n".join(lines)


def _reviewer_lines(report: dict[str, Any]) -> list[str]:
    """A review queue's reviewers: each against the judge, each pair against each other."""
    block = report.get("reviewers")
    if not block:
        return []
    header = ["reviewers", "against", "n", "decided", "agreement", f"kappa [{report['ci']:.0%} CI]"]
    rows = [[who, "the judge", *_counts(e)] for who, e in block["judge"].items()]
    rows += [[*pair.split(" ~ ", 1), *_counts(e)] for pair, e in block["pairs"].items()]
    return ["", *_grid([header, ["-" * len(h) for h in header], *rows])]


def _counts(e: dict[str, Any]) -> list[str]:
    return [f"{e['n']:.0f}", f"{e['n_both_decided']:.0f}", _pct(e["agreement"]), _kappa(e)]


def _corrected_lines(report: dict[str, Any]) -> list[str]:
    """The judged and the corrected rate per dataset (and all), or why there are none."""
    omitted = report["corrected"]["omitted"]
    if omitted:
        return ["", f"no corrected rates: {omitted}"]
    header = [
        "dataset",
        "judged rate",
        "N",
        "judge UNCLEAR",
        "people n",
        f"corrected rate [{report['ci']:.0%} CI]",
    ]
    rows, marked, outside = [], False, 0
    for d, e in report["datasets"].items():
        lo, hi = e["corrected_rate_ci_low"], e["corrected_rate_ci_high"]
        low = e["corrected_rate_low_support"] == 1.0
        marked |= low
        outside += e["n_outside"] if d != ALL else 0
        rate = "n/a" if e["corrected_rate"] is None else f"{e['corrected_rate']:.3f}"
        ci = "" if lo is None else f" [{lo:.3f}, {hi:.3f}]"
        rows.append(
            [
                d,
                _pct(e["judged_rate"]),
                str(e["judged_rate_n"]),
                str(e["n_judged_unclear"]),
                str(e["corrected_rate_n"]),
                rate + ci + (f" {LOW_SUPPORT}" if low else ""),
            ]
        )
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = [
        "",
        "corrected rates (prediction-powered: the judge's rate over the N responses it decides,",
        "corrected by its errors on the n that people labelled; docs/validating-labels.md):",
        # Indented under its title, as the published check is: a row is no agreement row.
        *("  " + x for x in _grid([header, ["-" * w for w in widths], *rows])),
    ]
    if marked:
        lines.append(
            f"{LOW_SUPPORT} low support: fewer than score.min_items ({report['min_items']}) "
            "people's labels behind it"
        )
    if outside:
        lines.append(f"left out {outside} sample row(s) that are no response of the label tables")
    return lines


def _reference_lines(report: dict[str, Any]) -> list[str]:
    ref = report["reference"]
    ours = None if ref is None else report["datasets"].get(ref["dataset"])
    if ours is None:
        return []
    width = max(len(ref["short"]), len("here")) + 2
    return [
        "",
        f"{ref['dataset']} judge against {ref['who']}:",
        f"  {ref['short'] + ':':<{width}}agreement {ref['agreement']:.1%}, "
        f"kappa {ref['kappa']:.2f}, UNCLEAR {ref['unclear_rate']:.1%}",
        f"  {'here:':<{width}}agreement {_pct(ours['agreement'])}, kappa {_kappa(ours)}, "
        f"UNCLEAR {_pct(ours['machine_unclear_rate'])}",
    ]
