"""The ratings' budget diagnostic (Big-Big-SycoBench Fig. A1a): how the ranking of the arguments
at a smaller comparison budget agrees with the ranking at the reference budget (Kendall's τb),
and the first budget whose τb exceeds a threshold (0.9 in the paper).

A budget b is a sub-graph of the comparison graph in which every argument is in exactly b of its
comparisons, so a budget gives every argument the same number of matches, as a shorter run of
the same schedule would. The schedule's graph is d-regular (``ratings.regular_pairs``) but is not
drawn in rounds, so the budgets come from Petersen's 2-factor theorem: a d-regular graph with d
even is the union of d/2 edge-disjoint 2-factors (spanning sub-graphs where every argument has 2
comparisons). Orienting each component along an Eulerian circuit gives every argument d/2 out-
and d/2 in-edges; the bipartite graph (out-copy, in-copy) is then d/2-regular and splits into d/2
perfect matchings (König), each a 2-factor of the original. Budget b is the first b/2 of them, so
budgets are nested and even; the split is deterministic given the (seeded) schedule and never
looks at the judge's verdicts.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence

import networkx as nx
import numpy as np
import pandas as pd
from scipy.sparse import csr_array
from scipy.sparse.csgraph import maximum_bipartite_matching
from scipy.stats import kendalltau

from syps.core.protocol import Judge
from syps.protocols.discernment.items import Artefact, Entry
from syps.protocols.discernment.params import Pool, RatingsParams
from syps.protocols.discernment.ratings import (
    AUX_COLUMNS,
    Pair,
    fit_ratings,
    judge_comparisons,
    ratings_of_comparisons,
)

BUDGET_COLUMNS = ["budget", "n_comparisons", "n_judged", "tau_b"]
# One comparison: the two argument ids as shown, and the winner's id (None: UNCLEAR verdict).
Comparison = tuple[str, str, str | None]


def two_factors(edges: Sequence[tuple[str, str]]) -> list[list[int]]:
    """The indices of ``edges`` (a simple d-regular graph, d even) split into d/2 edge-disjoint
    2-factors, in a fixed order; a ``ValueError`` when the graph is not simple, not regular or
    of odd degree.

    The split depends on the edges and their order alone, never on Python's string hashing
    (which differs between processes): the label stage of each model computes it again, and
    every one must give the same budgets. So each component's Eulerian circuit runs on a graph
    built in edge order from its first edge's first argument, and the perfect matchings come
    from ``scipy.sparse.csgraph.maximum_bipartite_matching`` over a biadjacency matrix in
    sorted argument order (networkx's Hopcroft-Karp iterates over sets of nodes)."""
    deg = Counter(x for e in edges for x in e)
    if len({frozenset(e) for e in edges}) != len(edges) or any(a == b for a, b in edges):
        raise ValueError("the comparisons repeat a pair or pair an argument with itself")
    if len(set(deg.values())) > 1:
        raise ValueError("the comparisons are not regular: arguments differ in their matches")
    d = next(iter(deg.values()), 0)
    if d % 2:
        raise ValueError(f"the comparison graph's degree {d} is odd: no split into 2-factors")
    g = nx.Graph()
    g.add_edges_from((a, b, {"i": i}) for i, (a, b) in enumerate(edges))
    ids = {x: k for k, x in enumerate(sorted(deg))}
    arcs: dict[tuple[int, int], int] = {}  # (out, in) argument positions: the edge's index
    component = {x: k for k, part in enumerate(nx.connected_components(g)) for x in part}
    own: dict[int, list[tuple[str, str]]] = {}  # each component's edges, in edge order
    for e in edges:
        own.setdefault(component[e[0]], []).append(e)
    for part in own.values():
        h = nx.Graph(part)
        for u, v in nx.eulerian_circuit(h, source=part[0][0]):
            arcs[ids[u], ids[v]] = g.edges[u, v]["i"]
    factors: list[list[int]] = []
    n = len(ids)
    for _ in range(d // 2):
        # A regular bipartite graph has a perfect matching; removing it leaves one regular again.
        keys = sorted(arcs)
        rows, cols = zip(*keys, strict=True) if keys else ((), ())
        adjacency = csr_array((np.ones(len(keys)), (rows, cols)), shape=(n, n))
        match = maximum_bipartite_matching(adjacency, perm_type="column")
        chosen = [(u, int(match[u])) for u in range(n)]
        factors.append(sorted(arcs.pop(arc) for arc in chosen))
    return factors


def budget_comparisons(
    comparisons: Sequence[Comparison], budgets: Sequence[int]
) -> dict[int, list[Comparison]]:
    """Each budget's comparisons: those of the first b/2 2-factors (``two_factors``), so every
    argument is in exactly b; budgets above the graph's degree are left out, odd ones are a
    ``ValueError``."""
    factors = two_factors([(a, b) for a, b, _ in comparisons])
    out: dict[int, list[Comparison]] = {}
    for b in sorted(set(budgets)):
        if b < 2 or b % 2:
            raise ValueError(f"budget {b}: budgets are even and at least 2")
        if b <= 2 * len(factors):
            out[b] = [comparisons[i] for f in factors[: b // 2] for i in f]
    return out


def budget_diagnostic(
    comparisons: Sequence[Comparison],
    arg_ids: Sequence[str],
    budgets: Sequence[int],
    *,
    alpha: float,
    pool: Pool = "artefact",
    reference: int | None = None,
) -> pd.DataFrame:
    """``BUDGET_COLUMNS`` per budget (ascending, budgets above the degree left out): its
    comparisons, those with a verdict, and Kendall's τb (``scipy.stats.kendalltau``, variant b)
    of its I-LSR strengths (``ratings.fit_ratings``, UNCLEAR verdicts dropped as the full fit
    drops them) against the reference budget's, over every argument. The reference is the
    graph's full degree by default and is always a row (τb 1). Under the ``artefact`` pool
    strengths are centred per artefact, so τb there also counts pairs from two artefacts."""
    degree = Counter(x for a, b, _ in comparisons for x in (a, b))
    ref = max(degree.values(), default=0) if reference is None else reference
    chosen = budget_comparisons(comparisons, [*budgets, ref])
    if ref not in chosen:
        raise ValueError(f"reference budget {ref} exceeds the comparisons' degree")
    fits = {
        b: fit_ratings(
            [(w, y if w == x else x) for x, y, w in cs if w is not None],
            arg_ids,
            alpha=alpha,
            pool=pool,
        )
        for b, cs in chosen.items()
    }
    taus = tau_b(fits, ref)
    rows = [[b, len(cs), sum(w is not None for _, _, w in cs), taus[b]] for b, cs in chosen.items()]
    return pd.DataFrame(rows, columns=BUDGET_COLUMNS)


def tau_b(fits: Mapping[int, Mapping[str, float]], reference: int) -> dict[int, float]:
    """Kendall's τb (``scipy.stats.kendalltau``, variant b: ties in either ranking shrink the
    denominator) of each budget's strengths against the reference budget's, over the
    reference's arguments."""
    ids = list(fits[reference])
    ref = [fits[reference][x] for x in ids]
    return {
        b: float(kendalltau(ref, [q[x] for x in ids], variant="b").statistic)
        for b, q in fits.items()
    }


def converged_budget(table: pd.DataFrame, threshold: float) -> float:
    """The first (smallest) budget whose τb exceeds ``threshold``; NaN if none does."""
    over = table.loc[table["tau_b"] > threshold, "budget"]
    return float(over.min()) if len(over) else math.nan


def judge_budget_diagnostic(
    r: RatingsParams, items: Sequence[Entry], judge: Judge, where: str
) -> pd.DataFrame:
    """``budget_diagnostic`` of a judge rating run (``ratings.judge_comparisons``, the same
    pairs and verdicts the auxiliary step fits, so a judge that reads the store sends nothing
    new) at ``r.budgets``, against the full graph (``r.matches`` or ``r.degree`` per argument)."""
    arts, _, judged = judge_comparisons(r, items, judge, where)
    return _diagnostic(r, arts, judged)


def _diagnostic(
    r: RatingsParams, arts: Mapping[str, Artefact], judged: Sequence[tuple[Pair, float]]
) -> pd.DataFrame:
    comps: list[Comparison] = [
        (x.a.arg_id, x.b.arg_id, None if math.isnan(v) else (x.a if v == 1 else x.b).arg_id)
        for x, v in judged
    ]
    ids = [x.arg_id for a in arts.values() for x in a.arguments]
    return budget_diagnostic(comps, ids, r.budgets, alpha=r.alpha, pool=r.pool)


# The label rows' column that carries the budget diagnostic of the ratings they rest on.
BUDGET_COLUMN = "ratings_budget"
# Its value while planning (``Judge.dry``), where no diagnostic is computed.
PLANNING = json.dumps({"skipped": "planning: verdicts counted, not fitted"})


def judge_ratings_and_budget(
    r: RatingsParams, items: Sequence[Entry], judge: Judge, where: str
) -> pd.DataFrame:
    """The auxiliary step of a study whose judge rates the arguments: each argument's q
    (``ratings.AUX_COLUMNS``) and, in ``BUDGET_COLUMN``, the budget diagnostic of those very
    verdicts (:func:`budget_record`), judged once; an empty table unless ``r.source`` is
    ``judge``.

    The diagnostic spans every argument of the pool, also those a model's labels never show
    (only one direction is pushed per artefact), so it is computed here, where the judge's
    whole graph is, and carried as one JSON value on every label row; the score stage reads it
    back (``read_budget``) without a judge.
    """
    if r.source != "judge":
        return pd.DataFrame(columns=[*AUX_COLUMNS, BUDGET_COLUMN])
    arts, datasets, judged = judge_comparisons(r, items, judge, where)
    aux = ratings_of_comparisons(r, arts, datasets, judged)
    # A plan only counts verdicts: the diagnostic (a fit per budget) would be a third of it.
    budget = PLANNING if judge.dry else budget_record(r, arts, judged)
    return aux.assign(**{BUDGET_COLUMN: budget})


def budget_record(
    r: RatingsParams, arts: Mapping[str, Artefact], judged: Sequence[tuple[Pair, float]]
) -> str:
    """The budget diagnostic as JSON: ``{"rows": [BUDGET_COLUMNS values, ...]}``, or
    ``{"skipped": why}`` when the comparison graph splits into no budgets (an odd degree, e.g.
    ``ratings.degree: 3``, or a graph made irregular by a small pool)."""
    try:
        table = _diagnostic(r, arts, judged)
    except ValueError as e:
        return json.dumps({"skipped": str(e)})
    rows = [[int(b), int(n), int(j), float(t)] for b, n, j, t in table[BUDGET_COLUMNS].to_numpy()]
    return json.dumps({"rows": rows})


def read_budget(labels: pd.DataFrame) -> pd.DataFrame | str | None:
    """The budget diagnostic a label table carries (``BUDGET_COLUMN``): the ``BUDGET_COLUMNS``
    table, the reason it was skipped, or None where the table has none (ratings not judged, a
    label table from elsewhere); every row carrying one must carry the same."""
    if BUDGET_COLUMN not in labels.columns:
        return None
    values = set(labels[BUDGET_COLUMN].dropna().astype(str)) - {""}
    if not values:
        return None
    if len(values) > 1:
        raise ValueError(f"the label rows carry {len(values)} different {BUDGET_COLUMN} values")
    record = json.loads(values.pop())
    if "skipped" in record:
        return str(record["skipped"])
    table = pd.DataFrame(record["rows"], columns=BUDGET_COLUMNS)
    return table.astype({"budget": int, "n_comparisons": int, "n_judged": int, "tau_b": float})


def budget_metrics(table: pd.DataFrame, threshold: float) -> dict[str, float]:
    """``ratings_tau_b/<b>`` per budget and ``ratings_budget_converged`` (the first budget
    whose τb exceeds ``threshold``; NaN if none does)."""
    pairs = zip(table["budget"], table["tau_b"], strict=True)
    out = {f"ratings_tau_b/{int(b)}": float(t) for b, t in pairs}
    out["ratings_budget_converged"] = converged_budget(table, threshold)
    return out
