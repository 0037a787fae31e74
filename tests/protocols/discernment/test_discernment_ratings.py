import math
from collections import Counter

import numpy as np
import pytest
from scipy.stats import kendalltau

from syps.protocols.discernment.items import load_builtin
from syps.protocols.discernment.ratings import (
    fit_ratings,
    judge_messages,
    parse_choice,
    regular_pairs,
    schedule,
)


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
    msgs = judge_messages(art, pair)
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
    q = fit_ratings(comps, ids)
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
    q = fit_ratings(comps, list(truth))
    for art in ("A1", "A2", "A3"):
        ids = [a for a in truth if a.startswith(art + "/")]
        tau = kendalltau([truth[a] for a in ids], [q[a] for a in ids]).statistic
        assert tau > 0.75, (art, tau)
        assert abs(sum(q[a] for a in ids)) < 1e-6  # mean 0 per artefact


def test_fit_rejects_unknown_or_cross_artefact_pairs() -> None:
    with pytest.raises(ValueError, match="unknown argument"):
        fit_ratings([("A/x/valid/1", "A/x/valid/9")], ["A/x/valid/1"])
    with pytest.raises(ValueError, match="spans two artefacts"):
        fit_ratings([("A/x/valid/1", "B/x/valid/1")], ["A/x/valid/1", "B/x/valid/1"])
