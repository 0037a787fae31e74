"""Power before the run (``syps.core.power``) and ``syps plan``'s power table: Connor's formula
worked by hand, its inverse (the minimum detectable effect), Holm's α/m, the bound a
discordance puts on an effect, a simulation that the planned items detect the effect about 80%
of the time, and the table built from a pilot's labels or the prior."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import read_params, write_params

from syps.core.params import load_params
from syps.core.plan import power_plan, render_power
from syps.core.power import Design, items_needed, mde, second_moment
from syps.protocols import PROTOCOLS

REPO = Path(__file__).resolve().parents[2]


def test_items_needed_by_hand() -> None:
    # Connor (1987): n = (z_{1-α/2} √ψ + z_{1-β} √(ψ - δ²))² / δ². ψ = 0.3 (30% of the items
    # discordant), δ = 0.1 (p10 = 0.2, p01 = 0.1), α = 0.05, power 0.8:
    # z_.975 = 1.959964, z_.8 = 0.841621; √0.3 = 0.547723, √0.29 = 0.538516;
    # 1.959964·0.547723 = 1.073516, 0.841621·0.538516 = 0.453227; sum 1.526743;
    # squared 2.330945; / 0.01 = 233.09 -> 234 items.
    assert items_needed(0.3, 0.1).tolist() == 234.0
    assert items_needed(0.3, -0.1).tolist() == 234.0  # two-sided: the sign does not matter
    # A Holm family of 7 is planned at α/7: z_{1-0.05/14} = 2.690110; 2.690110·0.547723 =
    # 1.473437; + 0.453227 = 1.926664; squared 3.712034; / 0.01 = 371.2 -> 372.
    assert items_needed(0.3, 0.1, Design(family=7)).tolist() == 372.0
    # Vectorised: one call for many (ψ, δ).
    assert items_needed([0.3, 0.3], [0.1, 0.1]).tolist() == [234.0, 234.0]


def test_mde_by_hand() -> None:
    # ψ = 0.25, n = 100: a = z_.975 √ψ = 1.959964·0.5 = 0.979982, b = z_.8 = 0.841621,
    # b² = 0.708326; (n + b²) ψ - a² = 100.708326·0.25 - 0.960365 = 24.216717, √ = 4.921048;
    # δ = (a √n + b·4.921048) / (n + b²) = (9.79982 + 4.141634) / 100.708326 = 0.138434.
    assert mde(100, 0.25).tolist() == pytest.approx(0.138434, abs=1e-6)
    # Its inverse: Connor's formula at δ = 0.138434 gives 100 items (99.998 rounded up).
    assert items_needed(0.25, mde(100, 0.25)).tolist() == 100.0
    # At n = 234 the effect of the test above is the smallest detectable one (234 > 233.09).
    assert mde(234, 0.3).tolist() == pytest.approx(0.1, abs=2e-4)


def test_the_discordance_bounds_the_effect() -> None:
    # A binary difference has |δ| = |p10 - p01| <= p10 + p01 = ψ: with ψ = 0.3 an effect of
    # 0.3 or more cannot exist, 0.29 needs (1.073516 + 0.841621·√(0.3 - 0.0841))² / 0.0841 =
    # (1.073516 + 0.391060)² / 0.0841 = 25.5 -> 26 items.
    assert np.isnan(items_needed(0.3, 0.3, binary=True))
    assert items_needed(0.3, 0.29, binary=True).tolist() == 26.0
    # A mean difference (repetitions averaged) may reach √ψ = 0.5477: 0.5 needs
    # (1.073516 + 0.841621·√0.05)² / 0.25 = (1.073516 + 0.188192)² / 0.25 = 6.4 -> 7.
    assert items_needed(0.3, 0.5).tolist() == 7.0
    # 14 binary items at ψ = 0.3 detect nothing: the MDE (0.3764 > ψ) is out of reach.
    assert np.isnan(mde(14, 0.3, binary=True)) and mde(14, 0.3) == pytest.approx(0.37641, 1e-4)
    assert np.isnan(mde(100, 0.0)) and np.isnan(items_needed(0.3, 0.0))


def test_design_is_checked() -> None:
    for bad in ({"alpha": 0.0}, {"power": 1.0}, {"family": 0}):
        with pytest.raises(ValueError):
            Design(**bad)  # type: ignore[arg-type]


def test_second_moment_of_a_pilot() -> None:
    # d = 1, -1, 0, 0.5 and an item without a difference: (1 + 1 + 0 + 0.25) / 4 = 0.5625.
    assert second_moment([1, -1, 0, 0.5, np.nan]) == 0.5625
    assert np.isnan(second_moment([np.nan]))


def test_planned_items_detect_the_effect_about_80_percent_of_the_time() -> None:
    """Simulated studies at the planned n: McNemar's test (its normal form, which Connor's
    formula approximates) rejects in about 80% of them; a mean difference (each item's mean of
    4 repetitions) tested with the same statistic, Σd / √Σd², likewise."""
    rng = np.random.default_rng(7)
    z = 1.959964
    # binary: p10 = 0.2, p01 = 0.1 (ψ = 0.3, δ = 0.1), n = 234
    n = int(items_needed(0.3, 0.1))
    d = rng.choice([1.0, -1.0, 0.0], p=[0.2, 0.1, 0.7], size=(4000, n))
    stat = d.sum(axis=1) / np.sqrt((d * d).sum(axis=1))
    assert abs(np.mean(np.abs(stat) > z) - 0.8) < 0.03  # 4000 studies: SE 0.006
    # mean of 4 repetitions of a paired binary outcome with p10 = 0.3, p01 = 0.2: E d = 0.1
    # and E d² = Var + 0.01 where one repetition's difference has variance 0.5 - 0.01 = 0.49,
    # so the mean of 4 has 0.1225: ψ = 0.1325.
    n = int(items_needed(0.1325, 0.1))
    reps = rng.choice([1.0, -1.0, 0.0], p=[0.3, 0.2, 0.5], size=(4000, n, 4)).mean(axis=2)
    assert second_moment(reps[0]) == pytest.approx(0.1325, abs=0.03)
    stat = reps.sum(axis=1) / np.sqrt((reps * reps).sum(axis=1))
    assert abs(np.mean(np.abs(stat) > z) - 0.8) < 0.03


@pytest.fixture
def cues_params(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    raw = read_params()
    data = raw["protocols"]["cues"]["data"]
    data["limit"] = 10  # 10 items per dataset
    raw["score"]["min_items"] = 4  # the pilot below has 4 items
    data["files"] = {k: str(REPO / v) for k, v in data["files"].items()}
    raw["models"] = {"m": {"model": "m", "backend": "openai", "base_url": "http://127.0.0.1:9/v1"}}
    for name, block in raw["protocols"].items():
        block["enabled"] = name == "cues"
    monkeypatch.chdir(tmp_path)
    return write_params(tmp_path / "params.yaml", raw)


def _pilot(root: Path) -> None:
    """OEQ labels of model m on 4 items: P1 differs from P0 on every item (1 - 0 on two,
    0 - 1 on two: d = 1, 1, -1, -1, ψ = 1); P2 differs on two (d = 1, -1, 0, 0, ψ = 0.5);
    every other cue equals P0 (ψ = 0: no pilot, the prior)."""
    p0 = [0.0, 0.0, 1.0, 1.0]
    cue = {"P1": [1.0, 1.0, 0.0, 0.0], "P2": [1.0, 0.0, 1.0, 0.0]}
    rows = [
        {"model": "m", "dataset": "OEQ", "item_id": f"i{i}", "variant": v, "label": y}
        for v in [f"P{k}" for k in range(8)]
        for i, y in enumerate(cue.get(v, p0))
    ]
    path = root / "out" / "protocols" / "cues" / "labels" / "m.parquet"
    path.parent.mkdir(parents=True)
    pd.DataFrame(rows).to_parquet(path)


def test_power_table_from_a_pilot_or_the_prior(cues_params: Path, tmp_path: Path) -> None:
    p = load_params(cues_params, PROTOCOLS)
    prior = power_plan(p, PROTOCOLS, tmp_path, effect=0.2)
    # No labels: every cue of the 3 datasets at the prior ψ 0.3, 10 items, family of 1.
    assert len(prior) == 21 and set(prior["psi"]) == {0.3} and set(prior["items"]) == {10}
    assert set(prior["psi_from"]) == {"prior --discordance (no labels)"}
    # δ = 0.2 at ψ = 0.3: (1.073516 + 0.841621·√0.26)² / 0.04 = (1.073516 + 0.429146)² / 0.04
    # = 56.5 -> 57 items.
    assert set(prior["items_needed"]) == {57.0}

    _pilot(tmp_path)
    table = power_plan(p, PROTOCOLS, tmp_path, effect=0.2).set_index(["dataset", "contrast"])
    p1, p2, p3 = (table.loc[("OEQ", c)] for c in ("delta_P1", "delta_P2", "delta_P3"))
    assert p1["psi"] == 1.0 and p2["psi"] == 0.5
    assert p1["psi_from"] == "pilot: 4 items of out/protocols/cues/labels/m.parquet"
    assert p3["psi"] == 0.3 and p3["psi_from"] == "prior --discordance (pilot: ψ 0 on 4 items)"
    # ψ = 1, n = 10: a = 1.959964, (10.708326)·1 - 3.841459 = 6.866867, √ = 2.620471;
    # δ = (1.959964·3.162278 + 0.841621·2.620471) / 10.708326 = (6.197951 + 2.205444) /
    # 10.708326 = 0.784753.
    assert p1["mde"] == pytest.approx(0.784753, abs=2e-6)
    # ψ = 0.5, δ = 0.2: (1.959964·0.707107 + 0.841621·√0.46)² / 0.04 = (1.385904 +
    # 0.570816)² / 0.04 = 95.7 -> 96 items.
    assert p2["items_needed"] == 96.0
    # AITA-YTA has no pilot rows: the prior, no labels of its own.
    assert table.loc[("AITA-YTA", "delta_P1"), "psi_from"].startswith("prior --discordance")
    # A pilot on fewer items than score.min_items is too small to lean on: the prior.
    strict = dataclasses.replace(p, score=dataclasses.replace(p.score, min_items=5))
    small = power_plan(strict, PROTOCOLS, tmp_path).set_index(["dataset", "contrast"])
    want = "prior --discordance (pilot: 4 items < score.min_items 5)"
    assert small.loc[("OEQ", "delta_P1"), "psi_from"] == want
    text = render_power(table.reset_index(), 0.8, 0.2)
    assert "items_needed: for an effect of 0.2" in text and "none" in text
