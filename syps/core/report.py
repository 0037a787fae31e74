"""How a metric's support is shown wherever a metric is printed (the summary table,
`syps compare`): its item count and the low-support marker."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

# A score table, what every protocol's score returns: {model: {dataset: {metric key: value}}}.
Scores = dict[str, dict[str, dict[str, float]]]

# The keys beside a metric ``<key>`` in a score table: its CI bounds, its support (items) and
# its low-support flag. Every reader of score tables takes them from here.
CI_BOUNDS = ("_ci_low", "_ci_high")
COMPANIONS = (*CI_BOUNDS, "_n", "_low_support")


def headline_keys(
    values: Mapping[str, object], headline: Sequence[str], companions: Sequence[str] = COMPANIONS
) -> list[str]:
    """The keys of ``values`` that show its headline metrics: each of ``headline``, in order,
    followed by its ``companions``, those ``values`` holds as numbers. A child run's MLflow
    metrics start with them (all companions) and the summary metrics file is them (CI bounds
    and support)."""
    return [
        h + c
        for h in headline
        for c in ("", *companions)
        if isinstance(values.get(h + c), int | float)
    ]


LOW_SUPPORT = "†"
LOW_SUPPORT_NOTE = (
    f"{LOW_SUPPORT} low support: the CI rests on fewer than score.min_items items (its n); "
    "read it as a rough range."
)


def support(ms: dict[str, float], name: str) -> str:
    """`` n=<items>`` behind a metric, with the low-support marker where it applies; empty for
    scores written before the support keys existed."""
    n = ms.get(f"{name}_n")
    if n is None or math.isnan(n):
        return ""
    return f" n={n:.0f}" + (f" {LOW_SUPPORT}" if ms.get(f"{name}_low_support") == 1.0 else "")
