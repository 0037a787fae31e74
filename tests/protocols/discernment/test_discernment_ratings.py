"""Argument ratings: the comparison graphs (per artefact and over the global pool), the judge's
prompts, its letter, the Bradley-Terry fit and what ``syps plan`` counts for them."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from conftest import read_params, write_params
from scipy.stats import kendalltau

from syps.core.config import ConfigError, parse
from syps.core.params import load_params
from syps.core.plan import plan
from syps.core.protocol import JudgeLabel
from syps.core.store import Store
from syps.protocols import PROTOCOLS
from syps.protocols.discernment.figures_appendix import draw_budget
from syps.protocols.discernment.items import Artefact, entries_of, load_builtin, record_of
from syps.protocols.discernment.params import RatingsParams
from syps.protocols.discernment.ratings import (
    GLOBAL_JUDGE_SYSTEM,
    GLOBAL_JUDGE_TEMPLATE,
    fit_ratings,
    global_schedule,
    judge_messages,
    judge_ratings,
    parse_choice,
    regular_pairs,
    schedule,
)
from syps.protocols.discernment.ratings_budget import (
    BUDGET_COLUMN,
    BUDGET_COLUMNS,
    PLANNING,
    budget_comparisons,
    budget_diagnostic,
    converged_budget,
    judge_budget_diagnostic,
    judge_ratings_and_budget,
    tau_b,
    two_factors,
)

WHERE = "protocols.discernment.ratings"
API = {"model": "m", "backend": "openai", "base_url": "http://127.0.0.1:9/v1"}


def test_regular_pairs_are_a_seeded_d_regular_graph() -> None:
    e = regular_pairs(12, 4, seed=5)
    assert len(e) == 12 * 4 // 2
    deg = Counter(x for pair in e for x in pair)
    assert set(deg.values()) == {4} and len(deg) == 12
    assert len({frozenset(p) for p in e}) == len(e) and all(a != b for a, b in e)
    assert e == regular_pairs(12, 4, seed=5)
    assert e != regular_pairs(12, 4, seed=6)
    assert any(a > b for a, b in e) and any(a < b for a, b in e)  # both orders shown
    for n, d in ((5, 3), (4, 4), (4, 0)):
        with pytest.raises(ValueError, match="regular graph"):
            regular_pairs(n, d, seed=0)


def test_schedule_on_the_builtin_sample() -> None:
    items = load_builtin()
    pairs = schedule(items, d=4, seed=0)
    assert len(pairs) == len(items) * 12 * 4 // 2
    seen = Counter(a.arg_id for p in pairs for a in (p.a, p.b))
    assert set(seen.values()) == {4} and len(seen) == len(items) * 12
    assert all(p.a.artefact_id == p.b.artefact_id == p.artefact_id for p in pairs)
    # Dropping an artefact leaves the other artefacts' pairs (and cached judgements) alone.
    rest = schedule(items[1:], d=4, seed=0)
    assert rest == [p for p in pairs if p.artefact_id != items[0].id]


def test_judge_is_not_told_direction_or_validity() -> None:
    art = load_builtin()[0]
    pair = schedule([art], d=4, seed=0)[0]
    msgs = judge_messages({art.id: art}, pair)
    text = " ".join(m["content"] for m in msgs)
    assert pair.a.message in text and pair.b.message in text and art.artefact in text
    assert text.index(pair.a.message) < text.index(pair.b.message)
    for arg in (pair.a, pair.b):
        assert arg.basis not in text and arg.arg_id not in text
    assert "valid" not in text.lower() and "direction" not in text.lower()


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("A", "A"),
        ("B", "B"),
        ("b", "B"),
        ("**A**", "A"),
        ("A.", "A"),
        ("(B)", "B"),
        ("Answer: B", "B"),
        ("Argument A is better founded because it cites the loop.", "A"),
        ("B - it names the missing quantities.", "B"),
        ("Both arguments are weak.", None),
        ("A and B are equally good.", "A"),
        ("Neither.", None),
        ("", None),
        ("Argument C", None),
        ("Absolutely B", None),
    ],
)
def test_parse_choice(text: str, want: str | None) -> None:
    assert parse_choice(text) == want


def test_fit_two_items_by_hand() -> None:
    # x beats y 3 times of 4: the unregularised ML Bradley-Terry difference is ln 3, split
    # around mean 0; alpha = 0.01 pulls it slightly towards 0.
    comps = [("C/x/valid/1", "C/x/valid/2")] * 3 + [("C/x/valid/2", "C/x/valid/1")]
    ids = ["C/x/valid/1", "C/x/valid/2"]
    q = fit_ratings(comps, ids, alpha=0.0)
    assert q["C/x/valid/1"] == pytest.approx(math.log(3) / 2, rel=1e-6)
    assert q["C/x/valid/2"] == pytest.approx(-math.log(3) / 2, rel=1e-6)
    q = fit_ratings(comps, ids, alpha=RatingsParams().alpha)
    assert 0.97 * math.log(3) / 2 < q["C/x/valid/1"] < math.log(3) / 2


def test_fit_recovers_known_strengths() -> None:
    rng = np.random.default_rng(11)
    truth: dict[str, float] = {}
    comps: list[tuple[str, str]] = []
    for art in ("A1", "A2", "A3"):
        ids = [f"{art}/lower/valid/{n}" for n in range(1, 13)]
        theta = rng.permutation(np.linspace(-2, 2, 12))
        truth.update(zip(ids, theta, strict=True))
        for _ in range(30):  # 30 rounds of a 6-regular schedule
            for i, j in regular_pairs(12, 6, int(rng.integers(1 << 30))):
                p_i = 1 / (1 + math.exp(theta[j] - theta[i]))
                comps.append((ids[i], ids[j]) if rng.random() < p_i else (ids[j], ids[i]))
    q = fit_ratings(comps, list(truth), alpha=0.01)
    for art in ("A1", "A2", "A3"):
        ids = [a for a in truth if a.startswith(art + "/")]
        tau = kendalltau([truth[a] for a in ids], [q[a] for a in ids]).statistic
        assert tau > 0.75, (art, tau)
        assert abs(sum(q[a] for a in ids)) < 1e-6  # mean 0 per artefact


def test_fit_rejects_unknown_or_cross_artefact_pairs() -> None:
    with pytest.raises(ValueError, match="unknown argument"):
        fit_ratings([("A/x/valid/1", "A/x/valid/9")], ["A/x/valid/1"], alpha=0.01)
    with pytest.raises(ValueError, match="spans two artefacts"):
        fit_ratings([("A/x/valid/1", "B/x/valid/1")], ["A/x/valid/1", "B/x/valid/1"], alpha=0.01)


# --- the global pool (the paper's) ----------------------------------------------------------


def _degrees(pairs: list[Any]) -> Counter[str]:
    return Counter(x.arg_id for p in pairs for x in (p.a, p.b))


def test_global_schedule_is_one_seeded_regular_graph_over_every_argument() -> None:
    items = load_builtin()  # 6 artefacts x 12 arguments = 72
    ids = [x.arg_id for a in items for x in a.arguments]
    pairs = global_schedule(items, 5, seed=3, where=WHERE)
    assert len(pairs) == 72 * 5 // 2  # each edge holds two of the 72 * 5 argument slots
    deg = _degrees(pairs)
    assert set(deg) == set(ids) and set(deg.values()) == {5}  # every argument exactly 5
    assert all(p.a.arg_id != p.b.arg_id for p in pairs)  # no self-pair
    assert len({frozenset((p.a.arg_id, p.b.arg_id)) for p in pairs}) == len(pairs)  # no repeat
    assert any(p.artefact_id == "" for p in pairs)  # pairs span artefacts
    assert pairs == global_schedule(items, 5, seed=3, where=WHERE)
    assert pairs != global_schedule(items, 5, seed=4, where=WHERE)
    # The paper's 70 on a pool of 72: the dense case, drawn as the complement of a 1-regular
    # graph (networkx's pairing method stalls there): 72 * 70 / 2 = 2520 comparisons.
    dense = global_schedule(items, 70, seed=0, where=WHERE)
    assert len(dense) == 2520 and set(_degrees(dense).values()) == {70}
    assert len({frozenset((p.a.arg_id, p.b.arg_id)) for p in dense}) == 2520


def test_global_matches_without_a_regular_graph_is_a_config_error() -> None:
    art = load_builtin()[0]
    five = dataclasses.replace(art, arguments=art.arguments[:5])
    with pytest.raises(ConfigError) as e:  # 5 arguments x 3 matches = 15 slots: odd
        global_schedule([five], 3, seed=0, where=WHERE)
    assert str(e.value) == (
        f"{WHERE}.matches: 3 gives no 3-regular graph on the pool's 5 arguments "
        "(needs 0 < matches < arguments, arguments*matches even)"
    )
    with pytest.raises(ConfigError, match=f"^{WHERE}.matches: 12 gives no"):  # 12 of 12
        global_schedule([art], 12, seed=0, where=WHERE)
    with pytest.raises(ConfigError, match=f"^{WHERE}.matches: must be at least 1, got 0$"):
        parse(RatingsParams, {"matches": 0}, WHERE)
    with pytest.raises(ConfigError, match=f"{WHERE}.pool"):
        parse(RatingsParams, {"pool": "paper"}, WHERE)


def _cross_pair(items: list[Artefact]) -> Any:
    return next(p for p in global_schedule(items, 5, seed=3, where=WHERE) if p.artefact_id == "")


def test_global_judge_sees_each_argument_with_its_own_artefact_and_no_label() -> None:
    items = load_builtin()
    arts = {a.id: a for a in items}
    pair = _cross_pair(items)
    art_a, art_b = arts[pair.a.artefact_id], arts[pair.b.artefact_id]
    system, user = (m["content"] for m in judge_messages(arts, pair, "global"))
    assert system == GLOBAL_JUDGE_SYSTEM
    # Artefact A, then argument A, then artefact B, then argument B.
    at = [user.index(t) for t in (art_a.artefact, pair.a.message, art_b.artefact, pair.b.message)]
    assert at == sorted(at)
    assert art_a.title in user and art_b.title in user
    for arg in (pair.a, pair.b):
        assert arg.basis not in user and arg.arg_id not in user
    # The template names no direction or validity; the question is the paper's "more valid".
    template = GLOBAL_JUDGE_TEMPLATE.lower()
    for word in ("direction", "raise", "lower", "invalid", "valid argument"):
        assert word not in template
    assert "which argument is more valid" in template


def test_global_ratings_through_the_judge() -> None:
    """The auxiliary step on the global pool: one fit, every argument in exactly ``matches``
    comparisons, q on one scale (mean 0 over the pool, not per artefact)."""
    items = load_builtin()[:2]  # 24 arguments
    table = pd.DataFrame(
        [{"dataset": "builtin", "item_id": a.id, "item": json.dumps(record_of(a))} for a in items]
    )
    valid = {x.message for a in items for x in a.arguments if x.validity == "valid"}
    seen: list[dict[str, str]] = []

    def judge(system: str, template: str, options: Any, fields: Any, where: str) -> Any:
        # Prefers the valid argument; UNCLEAR when both or neither are.
        assert (system, template, where) == (GLOBAL_JUDGE_SYSTEM, GLOBAL_JUDGE_TEMPLATE, WHERE)
        seen.extend(fields)
        out = []
        for f in fields:
            a, b = f["a"] in valid, f["b"] in valid
            value = math.nan if a == b else float(options["A" if a else "B"])
            out.append(JudgeLabel(value, "", "", "fake", "0", "0"))
        return out

    r = RatingsParams(source="judge", pool="global", matches=7, seed=1)  # 24 * 7 / 2 = 84
    aux = judge_ratings(r, entries_of(table), judge, WHERE)
    assert len(seen) == 84 and len(aux) == 24 and (aux["n_matches"] == 7).all()
    shown = {"domain_a", "title_a", "artefact_a", "a", "domain_b", "title_b", "artefact_b", "b"}
    assert set(seen[0]) == shown
    assert aux["q"].mean() == pytest.approx(0, abs=1e-9)
    v = aux["arg_id"].str.contains("/valid/")
    assert aux.loc[v, "q"].min() > aux.loc[~v, "q"].max()
    assert judge_ratings(RatingsParams(), table, judge, WHERE).empty  # source: none


# --- the fit --------------------------------------------------------------------------------


def test_global_fit_by_hand_on_a_chain_across_artefacts() -> None:
    # Three arguments, two artefacts: X/1 and X/2 in X, Y/1 in Y; X/1 beats Y/1 2 times of 3,
    # Y/1 beats X/2 2 times of 3. The comparison graph is a chain (a tree), so the likelihood
    # splits by edge and each edge's ML difference is its log-odds: q(X/1) - q(Y/1) = ln 2,
    # q(Y/1) - q(X/2) = ln 2. Mean 0 over the pool: q = (ln 2, 0, -ln 2), order X/1 > Y/1 > X/2.
    x1, x2, y1 = "X/lower/valid/1", "X/raise/invalid/1", "Y/lower/invalid/1"
    comps = [(x1, y1), (x1, y1), (y1, x1), (y1, x2), (y1, x2), (x2, y1)]
    q = fit_ratings(comps, [x1, x2, y1], alpha=0.0, pool="global")
    assert q[x1] == pytest.approx(math.log(2), rel=1e-6)
    assert q[y1] == pytest.approx(0.0, abs=1e-6)
    assert q[x2] == pytest.approx(-math.log(2), rel=1e-6)
    # The per-artefact fit cannot take a pair across artefacts.
    with pytest.raises(ValueError, match="spans two artefacts"):
        fit_ratings(comps, [x1, x2, y1], alpha=0.0)


# --- syps plan counts the comparisons before any is sent ------------------------------------


def _record(aid: str, per_cell: dict[tuple[str, str], int]) -> dict[str, Any]:
    def args(d: str, v: str) -> list[dict[str, Any]]:
        extra: dict[str, Any] = {"fallacy_types": ["assertion"]} if v == "invalid" else {}
        n = per_cell[(d, v)]
        return [{"message": f"{aid} {d} {v} {k}.", "basis": "b"} | extra for k in range(n)]

    return {
        "id": aid,
        "domain": "poetry",
        "length": "short",
        "anchor_band": "mid",
        "title": f"Poem {aid}",
        "artefact": f"The text of {aid}.",
        "initial_prompt": "Rate this from 0 to 100.",
        "pushback": {d: {v: args(d, v) for v in ("valid", "invalid")} for d in ("lower", "raise")},
    }


@pytest.mark.parametrize(
    ("cells", "matches", "want"),
    [
        # 6 arguments (2 + 1 + 2 + 1) at 2 matches: 6 * 2 / 2 = 6 comparisons.
        ([{("lower", "valid"): 2, ("lower", "invalid"): 1, ("raise", "valid"): 2,
           ("raise", "invalid"): 1}], 2, 6),
        # Two artefacts of 4 arguments (one a cell), one pool of 8 at 3 matches: 8 * 3 / 2 = 12.
        ([dict.fromkeys([("lower", "valid"), ("lower", "invalid"), ("raise", "valid"),
                         ("raise", "invalid")], 1)] * 2, 3, 12),
    ],
)  # fmt: skip
def test_plan_counts_the_global_comparisons(
    cells: list[dict[tuple[str, str], int]],
    matches: int,
    want: int,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    records = [_record(f"A{i}", c) for i, c in enumerate(cells)]
    (tmp_path / "items.json").write_text(json.dumps(records))
    raw = read_params()
    raw["models"] = {"api": dict(API)}
    raw["judge"]["model"] = dict(API)
    for name, block in raw["protocols"].items():
        block["enabled"] = name == "discernment"
    block = raw["protocols"]["discernment"]
    block["items"] = "items.json"
    block["ratings"] |= {"source": "judge", "pool": "global", "matches": matches}
    monkeypatch.chdir(tmp_path)
    p = load_params(write_params(tmp_path / "params.yaml", raw), PROTOCOLS)
    with Store(tmp_path / "s.sqlite") as store:
        rows = {r.stage: r for r in plan(p, PROTOCOLS, tmp_path, store, tmp_path)}
    aux = rows["label@discernment (all models)"]
    assert (aux.model, aux.requests, aux.in_store, aux.to_send) == ("judge", want, 0, want)
    assert aux.output_tokens == want  # one token a verdict


# --- the budget diagnostic (Fig. A1a) -------------------------------------------------------

ABCD = {"a": 4.0, "b": 3.0, "c": 2.0, "d": 1.0}


def test_tau_b_by_hand() -> None:
    """Reference a>b>c>d. Budget 2 ranks a>c>b>d: of the 6 pairs (ab ac ad bc bd cd) only bc is
    discordant, P = 5, Q = 1, no ties: τb = (5 - 1) / 6 = 2/3. Budget 4 ranks a>b=c>d: bc is
    tied in the budget's ranking only, P = 5, Q = 0, n0 = 6, n1 = 0, n2 = 1:
    τb = 5 / sqrt((6 - 0)(6 - 1)) = 5 / sqrt(30) = 0.91287 (τa would be 5/6 = 0.8333)."""
    fits = {
        2: {"a": 0.9, "c": 0.5, "b": 0.1, "d": -1.0},
        4: {"a": 2.0, "b": 1.0, "c": 1.0, "d": 0.0},
        6: ABCD,
    }
    got = tau_b(fits, 6)
    assert got == pytest.approx({2: 2 / 3, 4: 5 / math.sqrt(30), 6: 1.0})
    table = pd.DataFrame({"budget": [2, 4, 6], "tau_b": [got[2], got[4], got[6]]})
    assert converged_budget(table, 0.9) == 4  # 0.9129 > 0.9
    assert converged_budget(table, 0.95) == 6
    assert math.isnan(converged_budget(table, 1.0))  # exceeds, strictly


def test_two_factors_of_k5_by_hand() -> None:
    """K5 is 4-regular: two edge-disjoint 2-factors, each a Hamiltonian 5-cycle (a 2-factor on
    5 nodes cannot be a 3-cycle plus a 2-cycle), together every edge once."""
    nodes = "abcde"
    edges = [(u, v) for i, u in enumerate(nodes) for v in nodes[i + 1 :]]
    factors = two_factors(edges)
    assert len(factors) == 2 and sorted(factors[0] + factors[1]) == list(range(10))
    for f in factors:
        assert len(f) == 5
        assert Counter(x for i in f for x in edges[i]) == dict.fromkeys(nodes, 2)


def test_two_factors_split_a_random_regular_graph() -> None:
    """Brute force on the schedule's own graphs: every budget b gives each argument exactly b
    comparisons, budgets are nested, and an odd degree or an irregular graph is refused."""
    edges = [(str(i), str(j)) for i, j in regular_pairs(24, 8, 3)]
    factors = two_factors(edges)
    assert len(factors) == 4 and sorted(i for f in factors for i in f) == list(range(96))
    comps = [(a, b, a) for a, b in edges]
    chosen = budget_comparisons(comps, [2, 4, 6, 8, 10])
    assert sorted(chosen) == [2, 4, 6, 8]  # 10 is above the degree
    for b, cs in chosen.items():
        assert Counter(x for a, c, _ in cs for x in (a, c)) == {str(i): b for i in range(24)}
    assert set(chosen[4]) <= set(chosen[6])
    with pytest.raises(ValueError, match="odd"):
        two_factors([(str(i), str(j)) for i, j in regular_pairs(10, 3, 0)])
    with pytest.raises(ValueError, match="not regular"):
        two_factors([("a", "b"), ("b", "c")])
    with pytest.raises(ValueError, match="even"):
        budget_comparisons(comps, [3])


def test_budget_diagnostic_on_a_round_robin() -> None:
    """K5 judged by the order a>b>c>d>e, one verdict UNCLEAR. The reference (the full degree,
    4) is a row with τb 1 and the full fit's comparisons; budget 2 is a 5-cycle (5 comparisons,
    every argument in 2); a budget above 4 is left out."""
    nodes = "abcde"
    comps: list[tuple[str, str, str | None]] = [
        (u, v, u) for i, u in enumerate(nodes) for v in nodes[i + 1 :]
    ]
    comps[-1] = ("d", "e", None)
    table = budget_diagnostic(comps, list(nodes), [2, 6], alpha=0.01, pool="global")
    assert list(table.columns) == BUDGET_COLUMNS
    assert table["budget"].tolist() == [2, 4] and table["n_comparisons"].tolist() == [5, 10]
    full = table.set_index("budget").loc[4]
    assert full["tau_b"] == pytest.approx(1.0) and full["n_judged"] == 9
    q = fit_ratings([(w, y if w == x else x) for x, y, w in comps if w], list(nodes), alpha=0.01,
                    pool="global")  # fmt: skip
    assert q["a"] > q["b"] > q["c"] > max(q["d"], q["e"])  # d and e each beat nobody
    assert -1 <= table.set_index("budget").loc[2, "tau_b"] <= 1


def test_budget_params_are_checked() -> None:
    assert RatingsParams().budgets == [10, 20, 30, 40, 50, 60, 70]
    with pytest.raises(ConfigError, match="ratings.budgets"):
        RatingsParams(budgets=[10, 15])
    with pytest.raises(ConfigError, match="ratings.tau_threshold"):
        RatingsParams(tau_threshold=1.5)


def test_budget_diagnostic_of_a_global_judge_run(tmp_path: Path) -> None:
    """Through the judge, as the auxiliary step asks it: 24 arguments at 8 matches, a judge that
    prefers the valid argument (UNCLEAR when both or neither are). Budgets 2..8 (10 is above the
    degree and left out), every argument in b of each budget's comparisons: 24·b/2; the
    reference is budget 8 (τb 1). Drawn as a CSV and a PNG."""
    items = load_builtin()[:2]
    table = pd.DataFrame(
        [{"dataset": "builtin", "item_id": a.id, "item": json.dumps(record_of(a))} for a in items]
    )
    valid = {x.message for a in items for x in a.arguments if x.validity == "valid"}

    def judge(system: str, template: str, options: Any, fields: Any, where: str) -> Any:
        out = []
        for f in fields:
            a, b = f["a"] in valid, f["b"] in valid
            value = math.nan if a == b else float(options["A" if a else "B"])
            out.append(JudgeLabel(value, "", "", "fake", "0", "0"))
        return out

    r = RatingsParams(source="judge", pool="global", matches=8, seed=1, budgets=[2, 4, 6, 10])
    got = judge_budget_diagnostic(r, entries_of(table), judge, WHERE)
    assert got["budget"].tolist() == [2, 4, 6, 8]
    assert got["n_comparisons"].tolist() == [24, 48, 72, 96]
    assert (got["n_judged"] <= got["n_comparisons"]).all()
    assert got["tau_b"].iloc[-1] == pytest.approx(1.0)
    draw_budget(got, r.tau_threshold, tmp_path / "a1a.png", tmp_path / "a1a.csv")
    assert (tmp_path / "a1a.png").stat().st_size > 0
    back = pd.read_csv(tmp_path / "a1a.csv")
    assert list(back.columns) == BUDGET_COLUMNS and len(back) == 4


@pytest.mark.parametrize("dry", [False, True])
def test_a_plan_counts_the_verdicts_without_the_diagnostic(dry: bool) -> None:
    """The auxiliary step under a planning judge (``dry``) asks for the same comparisons and
    carries the planning marker instead of the diagnostic, which only the outputs need."""
    items = load_builtin()[:2]
    table = pd.DataFrame(
        [{"dataset": "builtin", "item_id": a.id, "item": json.dumps(record_of(a))} for a in items]
    )

    class Counting:
        def __init__(self) -> None:
            self.dry, self.asked = dry, 0

        def __call__(
            self, system: str, template: str, options: Any, fields: Any, where: str
        ) -> Any:
            self.asked += len(fields)
            return [JudgeLabel(math.nan if dry else 1.0, "", "", "f", "0", "0") for _ in fields]

    judge = Counting()
    r = RatingsParams(source="judge", pool="global", matches=8, seed=1, budgets=[2, 4])
    aux = judge_ratings_and_budget(r, entries_of(table), judge, WHERE)
    assert judge.asked == 24 * 8 // 2  # 24 arguments at 8 matches, either way
    budgets = set(aux[BUDGET_COLUMN])
    if dry:
        assert budgets == {PLANNING}
    else:
        assert [row[0] for row in json.loads(budgets.pop())["rows"]] == [2, 4, 8]


_FACTORS_IN_A_PROCESS = """
import json
from syps.protocols.discernment.ratings import regular_pairs
from syps.protocols.discernment.ratings_budget import two_factors
one = [(f"A{i:02d}/arg{i % 3}", f"A{j:02d}/arg{j % 3}") for i, j in regular_pairs(40, 6, 5)]
# Two components: the same graph again on other names.
two = one + [(f"B{a}", f"B{b}") for a, b in one]
print(json.dumps([two_factors(one), two_factors(two)]))
"""


def test_two_factors_do_not_depend_on_string_hashing() -> None:
    """Each model's label stage splits the ratings' graph again, in its own process: the split
    must not change with PYTHONHASHSEED (networkx's matching iterated over sets of nodes and
    gave two models two budget diagnostics of the same verdicts)."""
    outs = set()
    for seed in ("0", "1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        run = subprocess.run(
            [sys.executable, "-c", _FACTORS_IN_A_PROCESS],
            env=env, capture_output=True, text=True, check=True,
        )  # fmt: skip
        outs.add(run.stdout)
    assert len(outs) == 1
    one, two = json.loads(outs.pop())
    assert len(one) == 3 and len(two) == 3  # degree 6: three 2-factors each
