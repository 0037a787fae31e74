"""Power before the run: the smallest effect a study can detect, and the items an effect needs.

Every headline contrast syps plans for is the mean over items of an item-level paired difference
``d`` (a cue's label minus the P0 label of the same situation, a matched pair of objections'
outcomes, an artefact's follow rate for valid minus invalid arguments, an item's user bias),
tested against 0, two-sided. Items are the unit: an item's repetitions and wordings are averaged
into its one ``d`` first, as the item bootstrap treats them.

For a paired binary outcome (one label per condition) this is McNemar's test, and the items it
needs for a difference ``δ = p10 - p01`` of the discordant shares are, by the normal
approximation to McNemar's test (Connor 1987, Biometrics 43:207-211),

    n = (z_{1-α/2} √ψ + z_{1-β} √(ψ - δ²))² / δ²,

where ``ψ = p10 + p01`` is the share of discordant items: the variance of ``d`` is ψ under the
null (its mean is 0) and ψ - δ² under the alternative. For ``d`` that are not 0/±1 (means over
repetitions, rate differences, centred bias) ``ψ`` is read as the second moment E[d²] of the
item-level difference, which is the discordant share when ``d`` is binary, and the same formula
is the normal approximation of the test of mean 0. Solving it for δ gives the minimum detectable
effect at n items (the larger root of a quadratic, :func:`mde`).

A family of m contrasts that the score stage adjusts by Holm is planned at α/m, Holm's first
(most demanding) step: a plan that holds there holds for every contrast of the family.

Written here rather than taken from statsmodels: its ``NormalIndPower``/``TTestPower`` solve the
one-variance (t or z) case, not Connor's two-variance formula for McNemar, and they solve for one
value at a time by root finding; the closed forms below are vectorised and exact.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.stats import norm

ALPHA = 0.05
POWER = 0.8


@dataclass(frozen=True)
class Design:
    """The test a contrast is planned for: two-sided level ``alpha`` over a Holm family of
    ``family`` contrasts (planned at alpha / family) and the ``power`` wanted."""

    alpha: float = ALPHA
    power: float = POWER
    family: int = 1

    def __post_init__(self) -> None:
        if not 0 < self.alpha < 1:
            raise ValueError(f"alpha must lie in (0, 1), got {self.alpha}")
        if not 0 < self.power < 1:
            raise ValueError(f"power must lie in (0, 1), got {self.power}")
        if self.family < 1:
            raise ValueError(f"a family has at least one contrast, got {self.family}")

    def z(self) -> tuple[float, float]:
        """(z_{1-α/(2m)}, z_{power}): the critical value and the power's quantile."""
        return float(norm.ppf(1 - self.alpha / (2 * self.family))), float(norm.ppf(self.power))


def bound(psi: NDArray[np.float64], binary: bool) -> NDArray[np.float64]:
    """The largest mean difference a second moment ψ allows: ψ itself for a binary difference
    (|p10 - p01| ≤ p10 + p01), √ψ otherwise (|E d| ≤ √E[d²])."""
    return psi if binary else np.sqrt(psi)


def items_needed(
    psi: ArrayLike, delta: ArrayLike, design: Design = Design(), *, binary: bool = False
) -> NDArray[np.float64]:
    """Items needed to detect a mean paired difference ``delta`` with second moment ``psi``
    (Connor's formula, rounded up); NaN where no number of items can: δ = 0, or δ at or above
    what ψ allows (:func:`bound`; ``binary``: each item's difference is -1, 0 or 1)."""
    za, zb = design.z()
    psi, d = np.broadcast_arrays(np.asarray(psi, float), np.abs(np.asarray(delta, float)))
    ok = (d > 0) & (d < bound(psi, binary)) & (d * d < psi)
    with np.errstate(invalid="ignore", divide="ignore"):
        n = (za * np.sqrt(psi) + zb * np.sqrt(np.where(ok, psi - d * d, 0.0))) ** 2 / d**2
    return np.where(ok, np.ceil(n - 1e-9), np.nan)


def mde(
    n: ArrayLike, psi: ArrayLike, design: Design = Design(), *, binary: bool = False
) -> NDArray[np.float64]:
    """The minimum detectable effect at ``n`` items: the δ at which Connor's formula gives
    exactly n, ``[a √n + b √((n + b²) ψ - a²)] / (n + b²)`` with a = z_{1-α/(2m)} √ψ and
    b = z_{power} (the larger root of ``(n + b²) δ² - 2 a √n δ + a² - b² ψ = 0``, the one
    with √n δ ≥ a); NaN where no effect is detectable: ψ = 0, or n too small for an effect
    below what ψ allows (:func:`bound`; ``binary``: each item's difference is -1, 0 or 1)."""
    za, b = design.z()
    n, psi = np.broadcast_arrays(np.asarray(n, float), np.asarray(psi, float))
    a = za * np.sqrt(psi)
    disc = (n + b * b) * psi - a * a
    with np.errstate(invalid="ignore"):
        d = (a * np.sqrt(n) + b * np.sqrt(np.where(disc >= 0, disc, np.nan))) / (n + b * b)
    return np.where((psi > 0) & (n > 0) & (d < bound(psi, binary)), d, np.nan)


def second_moment(d: ArrayLike) -> float:
    """ψ of a pilot: the mean of d² over its items with a difference (NaN ones left out)."""
    x = np.asarray(d, float)
    x = x[np.isfinite(x)]
    return float(np.mean(x * x)) if len(x) else float("nan")
