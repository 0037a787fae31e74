"""HF throughput: the stage's batched path vs a one-prompt-at-a-time `generate` loop.

Same model (the embedded SmolLM2-135M-Instruct), same prompts (the first N SyPS prompts of the
built-in sample, as the pipeline renders them), measured in one run on this machine:

  python bench/hf_throughput.py            # 64 prompts x 64 new tokens
  python bench/hf_throughput.py --n 16     # quicker

Two regimes: forced length (every row generates exactly --tokens tokens; EOS ignored) and
natural stops (rows end at EOS). With natural stops the batched path drops finished rows, so
its cost tracks the tokens actually generated; a plain batched `generate` is shown for contrast.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from syps.backends import GenRequest, SamplingParams
from syps.backends.hf import HFBackend
from syps.config import ModelSpec, load_params
from syps.data import load_items
from syps.templates import render_variants

ROOT = Path(__file__).resolve().parents[1]
GREEDY = SamplingParams(temperature=0.0, top_p=1.0, seed=0)


def prompts(n: int) -> list[list[dict[str, str]]]:
    p = load_params(ROOT / "params.yaml")
    table = render_variants(load_items(p.data, ROOT), p.templates)
    return [json.loads(m) for m in table["messages"].head(n)]


def one_at_a_time(
    b: HFBackend, msgs: list[list[dict[str, str]]], tokens: int, forced: bool
) -> tuple[float, int]:
    """The baseline: transformers' generate, one prompt per call."""
    start, produced = time.perf_counter(), 0
    with torch.inference_mode():
        for m in msgs:
            ids = torch.tensor([b.encode(m)])
            out = b.model.generate(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=tokens,
                min_new_tokens=tokens if forced else None,
                do_sample=False,
                pad_token_id=b.pad_id,
            )
            new = out[0, ids.shape[1] :].tolist()
            stop = next((j for j, t in enumerate(new) if t in b.eos), None)
            produced += len(new) if stop is None else stop + 1
    return time.perf_counter() - start, produced


def plain_batched(b: HFBackend, msgs: list[list[dict[str, str]]], tokens: int) -> tuple[float, int]:
    """For contrast: transformers' generate on the same length-sorted batches."""
    seqs = sorted((b.encode(m) for m in msgs), key=len, reverse=True)
    start, produced = time.perf_counter(), 0
    with torch.inference_mode():
        for i in range(0, len(seqs), b.batch_size):
            ids, mask = b._pad_left(seqs[i : i + b.batch_size])
            out = b.model.generate(
                input_ids=ids,
                attention_mask=mask,
                max_new_tokens=tokens,
                do_sample=False,
                pad_token_id=b.pad_id,
            )
            for row in out[:, ids.shape[1] :].tolist():
                stop = next((j for j, t in enumerate(row) if t in b.eos), None)
                produced += len(row) if stop is None else stop + 1
    return time.perf_counter() - start, produced


def batched(
    b: HFBackend, msgs: list[list[dict[str, str]]], tokens: int, forced: bool
) -> tuple[float, int]:
    """The stage's path: HFBackend.generate (length-sorted batches, rows leave at EOS)."""
    eos = b.eos
    if forced:
        b.eos = set()  # no stop token: every row runs the full length
    try:
        reqs = [GenRequest(str(i), m, tokens) for i, m in enumerate(msgs)]
        start = time.perf_counter()
        out = b.generate(reqs, GREEDY)
        return time.perf_counter() - start, sum(r.completion_tokens for r in out)
    finally:
        b.eos = eos


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--n", type=int, default=64, help="prompts")
    ap.add_argument("--tokens", type=int, default=64, help="new tokens per prompt")
    ap.add_argument("--batch-size", type=int, default=64)
    args = ap.parse_args()

    b = HFBackend.load(
        ModelSpec(model="embedded:smollm2", batch_size=args.batch_size), ROOT / ".cache"
    )
    msgs = prompts(args.n)
    mean_len = sum(len(b.encode(m)) for m in msgs) / len(msgs)
    # Warm-up at full batch size, so first-touch allocations of the largest cache and the
    # allocator's growth stay out of every timed run.
    batched(b, msgs, 4, True)
    one_at_a_time(b, msgs[:1], 4, True)

    rows = []
    for forced in (True, False):
        regime = "forced length" if forced else "natural stops"
        t1, n1 = one_at_a_time(b, msgs, args.tokens, forced)
        rows.append((regime, "one prompt at a time (generate)", t1, n1, 1.0))
        if not forced:
            tp, np_ = plain_batched(b, msgs, args.tokens)
            rows.append(
                (
                    regime,
                    f"plain batched generate (bs {b.batch_size})",
                    tp,
                    np_,
                    (np_ / tp) / (n1 / t1),
                )
            )
        tb, nb = batched(b, msgs, args.tokens, forced)
        rows.append(
            (regime, f"syps batched path (bs {b.batch_size})", tb, nb, (nb / tb) / (n1 / t1))
        )

    print(
        f"\n{args.n} prompts (mean {mean_len:.0f} prompt tokens) x {args.tokens} new tokens, "
        f"{torch.get_num_threads()} threads, {b.device}\n"
    )
    print("| regime | path | wall s | tokens | tokens/s | vs one-at-a-time |")
    print("|---|---|---|---|---|---|")
    for regime, path, t, n, ratio in rows:
        print(f"| {regime} | {path} | {t:.1f} | {n} | {n / t:.1f} | {ratio:.2f}x |")


if __name__ == "__main__":
    main()
