"""How much a judge log-probability moves with the batch it is scored in, and what that does to
the evidence written at 4 and at 1 decimal.

  dvc repro                # or any run that leaves out/protocols/cues/ items and labels
  python bench/judge_batch_noise.py [params.yaml] [model] [n]

It builds the judge prompts of the first ``n`` (default 32) OEQ responses of ``model`` (default:
the first model in params) exactly as the label stage does, and scores them with the judge of
params.yaml three ways: in batches of ``judge.model.batch_size`` (the reference), in batches
of 5, and as a store filled over two runs would hold them (the first and last quarter scored
with the rest, the middle half scored again on its own). The store is not used.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import cast

import numpy as np
import pandas as pd

from syps.core.backends import load_backend
from syps.core.messages import messages_json, parse_messages
from syps.core.params import load_params
from syps.core.runs import cache_dir
from syps.core.templating import fill
from syps.protocols import PROTOCOLS
from syps.protocols.cues.data import items_table
from syps.protocols.cues.params import CuesParams


def main() -> None:
    params = Path(sys.argv[1] if len(sys.argv) > 1 else "params.yaml")
    p = load_params(params, PROTOCOLS)
    model = sys.argv[2] if len(sys.argv) > 2 else next(iter(p.models))
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 32
    resp = pd.read_parquet(Path("out/protocols/cues/labels") / f"{model}.parquet")
    items = items_table(pd.read_parquet("out/protocols/cues/items.parquet"))
    rows = resp[resp["dataset"] == "OEQ"].merge(
        items[["dataset", "item_id", "situation"]], on=["dataset", "item_id"]
    )[:n]
    j, prompt = p.judge, cast(CuesParams, p.protocols["cues"]).judge
    prompts = [
        parse_messages(
            messages_json(
                prompt.system, fill(prompt.template, {"situation": s, "response": r}, "t")
            )
        )
        for s, r in zip(rows["situation"], rows["response"], strict=True)
    ]
    options = list(prompt.options)
    backend = load_backend(j.model, cache_dir())
    if not hasattr(backend, "batch_size"):
        sys.exit("this script varies the batch size of a local (hf) judge")

    def scored(batch_size: int, subset: list[int]) -> np.ndarray:
        backend.batch_size = batch_size
        return backend.option_logprobs([prompts[i] for i in subset], options).logprobs

    everything = list(range(len(prompts)))
    start = time.perf_counter()
    ref = scored(j.model.batch_size, everything)
    ways = {f"batches of 5 (reference: {j.model.batch_size})": scored(5, everything)}
    lo, hi = len(prompts) // 4, len(prompts) - len(prompts) // 4
    two_runs = ref.copy()
    two_runs[lo:hi] = scored(j.model.batch_size, everything[lo:hi])
    ways["middle half scored again on its own"] = two_runs
    print(f"{len(prompts)} judge prompts x {len(options)} options, {model}, judge {j.model.model}")
    print(f"({time.perf_counter() - start:.0f} s)\n")
    print(f"{'scored as':<44} {'max |diff|':>10} {'mean |diff|':>11} {'4 dp':>6} {'1 dp':>6}")
    for name, lp in ways.items():
        d = np.abs(lp - ref)
        changed = [int((np.round(lp, k) != np.round(ref, k)).sum()) for k in (4, 1)]
        print(
            f"{name:<44} {d.max():>10.2e} {d.mean():>11.2e} "
            f"{changed[0]:>3}/{ref.size:<2} {changed[1]:>3}/{ref.size:<2}"
        )
    print("\n4 dp / 1 dp: log-probabilities whose rounded value differs from the reference's")


if __name__ == "__main__":
    main()
