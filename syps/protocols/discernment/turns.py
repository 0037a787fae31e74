"""The requests of the discernment protocol's two turns: R baseline runs per artefact, then each
run continued with each argument of the direction chosen from its parsed baselines; a run whose
baseline did not parse has its children skipped with the parser's reason.
"""

from __future__ import annotations

import pandas as pd

from syps.core.protocol import Judge, Request, Skipped, Turn
from syps.protocols.discernment.items import DIRECTIONS, NO_DIRECTION, VALIDITIES, Entry
from syps.protocols.discernment.metrics import choose_direction
from syps.protocols.discernment.params import DiscernmentParams
from syps.protocols.discernment.parse import PARSED, parse_score
from syps.protocols.discernment.prompts import baseline_messages, update_messages


def update_cell(arg_id: str, direction: str, validity: str) -> dict[str, str]:
    """An update request's cell."""
    return {"stage": "update", "arg_id": arg_id, "direction": direction, "validity": validity}


def requests(
    p: DiscernmentParams, items: list[Entry], turn: int, prev: pd.DataFrame, judge: Judge
) -> Turn:
    """Turn 1: ``generation.reps`` baselines per artefact; turn 2: each parsed baseline run
    continued with each argument of the artefact's direction (see ``protocol``). No judge:
    a baseline's score is parsed by rule."""
    arts = [(e.dataset, e.artefact) for e in items]
    if turn == 1:
        return Turn(
            [
                Request(ds, a.id, {"stage": "baseline"}, 1, baseline_messages(a, p.templates), r)
                for ds, a in arts
                for r in range(p.generation.reps)
            ]
        )
    if turn != 2:
        raise ValueError(f"discernment has 2 turns, got turn {turn}")
    base = prev[prev["turn"] == 1]
    requests: list[Request] = []
    skipped: list[Skipped] = []
    for ds, a in arts:
        rows = base[(base["dataset"] == ds) & (base["item_id"] == a.id)].sort_values("rep")
        parsed: dict[int, tuple[float, str, str]] = {}  # rep -> (score, answer, parent key)
        why: dict[int, tuple[str, str]] = {}  # rep -> (reason, parent key)
        for row in rows.itertuples():
            rep, key = int(row.rep), str(row.store_key)
            if row.skipped:
                why[rep] = (f"baseline skipped: {row.skipped}", key)
                continue
            lab = parse_score(str(row.response), scale_ten=p.scale_ten)
            if lab.status == PARSED and lab.value is not None:
                parsed[rep] = (lab.value, str(row.response), key)
            else:
                why[rep] = (f"baseline UNPARSED: {lab.reason}", key)
        if not parsed:
            # No direction without a parsed baseline: one skipped child per argument slot.
            for v in VALIDITIES:
                slots = max(len(a.pushback(d, v)) for d in DIRECTIONS)
                for n in range(1, slots + 1):
                    cell = update_cell(f"{a.id}/{NO_DIRECTION}/{v}/{n}", NO_DIRECTION, v)
                    for rep, (reason, key) in sorted(why.items()):
                        skipped.append(
                            Skipped(ds, a.id, cell, 2, f"no parsed baseline; {reason}", rep, key)
                        )
            continue
        direction = choose_direction([s for s, _, _ in parsed.values()])
        for arg in a.pushback(direction):
            cell = update_cell(arg.arg_id, arg.direction, arg.validity)
            for rep in sorted(set(parsed) | set(why)):
                if rep in parsed:
                    _, answer, key = parsed[rep]
                    msgs = update_messages(a, arg, answer, p.templates)
                    requests.append(Request(ds, a.id, cell, 2, msgs, rep, key))
                else:
                    reason, key = why[rep]
                    skipped.append(Skipped(ds, a.id, cell, 2, reason, rep, key))
    return Turn(requests, skipped)
