"""HF throughput: the stage's batched path vs plain batched `generate`, in one run.

Same model (the embedded SmolLM2-135M-Instruct), same prompts (the first N SyPS prompts of the
built-in sample, as the pipeline renders them), same batch size, measured in one run:

  taskset -c 0,1 python bench/hf_throughput.py     # 64 prompts x 64 new tokens, batch size 64
  python bench/hf_throughput.py --n 16 --tokens 16  # quicker

The baseline is what a transformers user writes: `model.generate` on left-padded batches of
--batch-size prompts, sorted by length so that it pays for little padding (the stage groups
prompts by shared prefix instead), greedy. Two regimes: forced length (every row generates
exactly --tokens tokens: the stage runs with no stop token and `generate` with
`eos_token_id=None`, so both may emit the EOS id and go on) and natural stops (rows end at EOS;
`generate` keeps computing finished rows until the last one stops, the stage drops them). Each
path runs --repeats times, alternating; the table shows the median. The greedy tokens of both
paths are compared per prompt; where they part, it says where (in float32 the stage's chunked
prefill and static cache round differently from `generate`'s, which can flip a near-tie).
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import time
from pathlib import Path
from typing import Any, cast

import torch

from syps.core.backends import GenRequest, SamplingParams
from syps.core.backends.hf import HFBackend, prefix_order
from syps.core.config import ModelSpec
from syps.core.params import load_params
from syps.protocols import PROTOCOLS
from syps.protocols.cues.data import load_items
from syps.protocols.cues.params import CuesParams
from syps.protocols.cues.templates import render_variants

ROOT = Path(__file__).resolve().parents[1]
GREEDY = SamplingParams(temperature=0.0, top_p=1.0, seed=0)
Tokens = list[tuple[list[int], bool]]  # per prompt: new tokens before any EOS, stopped at EOS


def prompts(n: int) -> list[list[dict[str, str]]]:
    p = load_params(ROOT / "params.yaml", PROTOCOLS)
    cues = cast(CuesParams, p.protocols["cues"])
    table = render_variants(load_items(cues.data, ROOT), cues.templates)
    return [json.loads(m) for m in table["messages"].head(n)]


def plain_batched(
    b: HFBackend, msgs: list[list[dict[str, str]]], tokens: int, forced: bool
) -> tuple[float, Tokens]:
    """The baseline: transformers' `generate` on left-padded, length-sorted batches."""
    config = copy.deepcopy(b.model.generation_config)
    config.do_sample, config.max_new_tokens, config.pad_token_id = False, tokens, b.pad_id
    if forced:
        config.eos_token_id = None  # no stop token: every row runs the full length
    seqs = [b.encode(m) for m in msgs]
    order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]), reverse=True)
    out: Tokens = [([], False) for _ in seqs]
    start = time.perf_counter()
    with torch.inference_mode():
        for i in range(0, len(order), b.batch_size):
            batch = order[i : i + b.batch_size]
            ids, mask = b._pad_left([seqs[j] for j in batch])
            gen = b.model.generate(input_ids=ids, attention_mask=mask, generation_config=config)
            for j, row in zip(batch, gen[:, ids.shape[1] :].tolist(), strict=True):
                stop = None if forced else next((k for k, t in enumerate(row) if t in b.eos), None)
                out[j] = (row, False) if stop is None else (row[:stop], True)
    return time.perf_counter() - start, out


def syps_batched(
    b: HFBackend, msgs: list[list[dict[str, str]]], tokens: int, forced: bool
) -> tuple[float, Tokens]:
    """The stage's path: HFBackend.generate (shared prefixes once, rows leave at EOS)."""
    # GenResult carries text, not ids: record the ids the backend decodes. It decodes each
    # batch's rows in the order it runs the prompts: prefix_order, as HFBackend.generate does.
    seen: list[list[int]] = []
    decode = b.tok.decode

    def recording(ids: Any, **kw: Any) -> Any:
        seen.append(list(ids))
        return decode(ids, **kw)

    eos = b.eos
    if forced:
        b.eos = set()  # no stop token: every row runs the full length
    b.tok.decode = recording
    try:
        reqs = [GenRequest(str(i), m, tokens) for i, m in enumerate(msgs)]
        start = time.perf_counter()
        results = b.generate(reqs, GREEDY)
        elapsed = time.perf_counter() - start
    finally:
        b.eos = eos
        del b.tok.decode  # back to the class's method
    order = prefix_order([b.encode(m) for m in msgs], [tokens] * len(msgs), b.batch_size)
    out: Tokens = [([], False) for _ in msgs]
    for i, ids in zip(order, seen, strict=True):
        r = results[i]
        assert decode(ids, skip_special_tokens=True) == r.text, "decode order assumption broke"
        out[i] = (ids, r.finish_reason == "stop")  # ids without the EOS, as for the baseline
    return elapsed, out


def divergence(b: HFBackend, plain: tuple[list[int], bool], syps: tuple[list[int], bool]) -> str:
    """Where two greedy continuations of one prompt part, and whether an EOS came before."""
    (p, p_stop), (s, s_stop) = plain, syps
    k = next((j for j, (x, y) in enumerate(zip(p, s, strict=False)) if x != y), min(len(p), len(s)))
    after_eos = any(t in b.eos for t in p[:k])
    return (
        f"first differs at new token {k} of {len(p)}/{len(s)} (plain/syps; stopped at EOS: "
        f"{p_stop}/{s_stop}){'; after an EOS the model was forced past' if after_eos else ''}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--n", type=int, default=64, help="prompts")
    ap.add_argument("--tokens", type=int, default=64, help="new tokens per prompt")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=2, help="timed runs of each path")
    args = ap.parse_args()

    b = HFBackend.load(
        ModelSpec(model="embedded:smollm2", batch_size=args.batch_size), ROOT / ".cache"
    )
    msgs = prompts(args.n)
    mean_len = sum(len(b.encode(m)) for m in msgs) / len(msgs)
    # Warm-up at full batch size, so first-touch allocations stay out of every timed run.
    syps_batched(b, msgs, 4, True)
    plain_batched(b, msgs, 4, True)

    rows = []
    for forced in (True, False):
        regime = "forced length" if forced else "natural stops"
        times: dict[str, list[float]] = {"plain": [], "syps": []}
        got: dict[str, Tokens] = {}
        for _ in range(args.repeats):
            for name, path in (("plain", plain_batched), ("syps", syps_batched)):
                t, toks = path(b, msgs, args.tokens, forced)
                times[name].append(t)
                got[name] = toks
        same = sum(p == s for p, s in zip(got["plain"], got["syps"], strict=True))
        print(
            f"{regime}: greedy tokens identical for {same} of {len(msgs)} prompts; runs (s): "
            + "; ".join(f"{k} " + ", ".join(f"{t:.1f}" for t in v) for k, v in times.items())
        )
        for i, (p, s) in enumerate(zip(got["plain"], got["syps"], strict=True)):
            if p != s:
                print(f"  prompt {i}: {divergence(b, p, s)}")
        base = None
        for name, label in (
            ("plain", f"plain batched generate (bs {args.batch_size})"),
            ("syps", f"syps batched path (bs {args.batch_size})"),
        ):
            t = statistics.median(times[name])
            n = sum(len(ids) + stopped for ids, stopped in got[name])  # EOS counts as a token
            base = base or n / t
            rows.append((regime, label, t, n, n / t, (n / t) / base))

    print(
        f"\n{args.n} prompts (mean {mean_len:.0f} prompt tokens) x {args.tokens} new tokens, "
        f"{torch.get_num_threads()} threads, {b.device}, median of {args.repeats} runs\n"
    )
    print("| regime | path | wall s | tokens | tokens/s | vs plain batched generate |")
    print("|---|---|---|---|---|---|")
    for regime, label, t, n, rate, ratio in rows:
        print(f"| {regime} | {label} | {t:.1f} | {n} | {rate:.1f} | {ratio:.2f}x |")


if __name__ == "__main__":
    main()
