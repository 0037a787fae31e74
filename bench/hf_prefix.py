"""Shared-prefix generation: plain batched `generate` vs the syps HF path, in one run.

  taskset -c 0,1 python bench/hf_prefix.py        # 8 items x 8 variants, 20 repetitions
  SYPS_THREADS=1 taskset -c 0,1 python bench/hf_prefix.py  # on cores other jobs share too
  python bench/hf_prefix.py --items 2 --tokens 8  # quicker

Two prompt sets on the embedded SmolLM2-135M-Instruct (CPU, float32 unless --dtype), natural
stops (EOS):

  syps: the first --items items of the default SyPS prompt set, all eight variants each, rendered
        from params.yaml and data/builtin as the variants stage does (cue after the situation,
        so the variants of an item share the system turn and the situation);
  reps: one discernment scoring prompt (the first built-in artefact) repeated --reps times,
        greedy (to compare with `generate`) and sampled with a seed per repetition (as a
        study runs it; the two syps paths only, `generate` has no per-prompt seed).

Three paths on the same prompts and batch size: plain batched `generate` (left padding, batches
sorted by length: what a transformers user writes), the syps path with every prompt prefilled
in full (share_prefixes off), and the syps path as shipped (a shared prefix prefilled once).
The script asserts that all three give the same token ids for every prompt. Where the time
goes: every model forward pass is timed as prefill (the prompt) or decode (one new token per
row and pass); the rest of the wall time is Python outside the model (the decode
loop, cache copies, tokenising). Each path runs --repeats times, alternating; the table shows
the median.
"""

from __future__ import annotations

import argparse
import copy
import json
import time
from pathlib import Path
from typing import Any, cast

import torch

from syps.core.backends import GenRequest, SamplingParams
from syps.core.backends.hf import HFBackend
from syps.core.config import ModelSpec
from syps.core.params import load_params
from syps.protocols import PROTOCOLS
from syps.protocols.cues.data import load_items
from syps.protocols.cues.params import CuesParams
from syps.protocols.cues.templates import render_variants
from syps.protocols.discernment.items import load_builtin
from syps.protocols.discernment.prompts import Templates, baseline_messages

ROOT = Path(__file__).resolve().parents[1]
GREEDY = SamplingParams(temperature=0.0, top_p=1.0, seed=0)
Messages = list[dict[str, str]]


def syps_set(items: int) -> list[Messages]:
    """All variants of the first ``items`` items of the default SyPS prompt set."""
    p = load_params(ROOT / "params.yaml", PROTOCOLS)
    cues = cast(CuesParams, p.protocols["cues"])
    table = render_variants(load_items(cues.data, ROOT), cues.templates)
    keep = table[["dataset", "item_id"]].drop_duplicates().head(items)
    rows = table.merge(keep, on=["dataset", "item_id"])
    return [json.loads(m) for m in rows["messages"]]


def reps_set(reps: int) -> list[Messages]:
    return [baseline_messages(load_builtin()[0], Templates())] * reps


class Timer:
    """Times every forward pass of the model, as prefill or decode.

    `generate` decodes one position per pass; the syps decode loop is the only caller that
    names cache_position (a shared prefix's rests can be one token wide, yet are prefill).
    """

    def __init__(self, model: Any, syps: bool):
        self.prefill = self.decode = 0.0
        self.steps = 0
        forward = model.forward

        def timed(*args: Any, **kw: Any) -> Any:
            start = time.perf_counter()
            out = forward(*args, **kw)
            took = time.perf_counter() - start
            if kw.get("cache_position") is not None if syps else kw["input_ids"].shape[1] == 1:
                self.decode += took
                self.steps += 1
            else:
                self.prefill += took
            return out

        model.forward = timed


def plain(b: HFBackend, msgs: list[Messages], tokens: int) -> list[list[int]]:
    """transformers' `generate` on left-padded, length-sorted batches; new ids up to EOS."""
    config = copy.deepcopy(b.model.generation_config)
    config.do_sample, config.max_new_tokens, config.pad_token_id = False, tokens, b.pad_id
    seqs = [b.encode(m) for m in msgs]
    order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]), reverse=True)
    out: list[list[int]] = [[] for _ in seqs]
    with torch.inference_mode():
        for i in range(0, len(order), b.batch_size):
            batch = order[i : i + b.batch_size]
            ids, mask = b._pad_left([seqs[j] for j in batch])
            gen = b.model.generate(input_ids=ids, attention_mask=mask, generation_config=config)
            for j, row in zip(batch, gen[:, ids.shape[1] :].tolist(), strict=True):
                stop = next((k for k, t in enumerate(row) if t in b.eos), None)
                out[j] = row if stop is None else [*row[:stop], -1]  # -1: stopped at EOS
    return out


def syps(
    b: HFBackend, msgs: list[Messages], tokens: int, sampling: SamplingParams = GREEDY
) -> list[list[int]]:
    """HFBackend.generate; the new ids of each prompt (EOS included), recorded as decoded."""
    seen: list[list[int]] = []
    by_key: dict[str, list[int]] = {}
    decode, run = b.tok.decode, b._decode

    def recording(ids: Any, **kw: Any) -> Any:
        seen.append(list(ids))
        return decode(ids, **kw)

    def batch(seqs: Any, keys: list[str], max_new: int, sampling: Any) -> Any:
        mark = len(seen)
        done = run(seqs, keys, max_new, sampling)
        for k, ids, r in zip(keys, seen[mark:], done, strict=True):
            by_key[k] = ids + ([] if r.finish_reason == "length" else [-1])  # -1: EOS
        return done

    b.tok.decode, b._decode = recording, batch  # type: ignore[method-assign]
    try:
        b.generate([GenRequest(str(i), m, tokens) for i, m in enumerate(msgs)], sampling)
    finally:
        del b.tok.decode, b._decode
    return [by_key[str(i)] for i in range(len(msgs))]


def measure(
    b: HFBackend,
    name: str,
    msgs: list[Messages],
    tokens: int,
    share: bool | None,
    sampling: SamplingParams = GREEDY,
) -> Any:
    timer = Timer(b.model, share is not None)
    b.share_prefixes = bool(share)
    start = time.perf_counter()
    ids = plain(b, msgs, tokens) if share is None else syps(b, msgs, tokens, sampling)
    wall = time.perf_counter() - start
    del b.model.forward
    b.share_prefixes = True
    return name, wall, timer, ids


def parse_args() -> argparse.Namespace:
    """The command line: prompt set sizes, answer length, batch size, repeats, dtype."""
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--items", type=int, default=8, help="SyPS items (x 8 variants)")
    ap.add_argument("--reps", type=int, default=20, help="repetitions of the scoring prompt")
    ap.add_argument("--tokens", type=int, default=32, help="max new tokens per prompt")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=1, help="timed runs of each path")
    ap.add_argument(
        "--dtype",
        default="float32",
        choices=["float32", "bfloat16"],
        help="bfloat16: where the time goes in bf16 (tokens may then differ between paths)",
    )
    return ap.parse_args()


def run_set(
    b: HFBackend,
    set_name: str,
    msgs: list[Messages],
    set_paths: tuple[tuple[str, bool | None], ...],
    sampling: SamplingParams,
    args: argparse.Namespace,
) -> tuple[list[tuple[Any, ...]], list[str]]:
    """Every path of ``set_paths`` on one prompt set, ``args.repeats`` times alternating (the
    runs printed): a table row per path from its median run, and a line per path whose token
    ids differ from the first path's."""
    rows: list[tuple[Any, ...]] = []
    failures: list[str] = []
    lens = [len(b.encode(m)) for m in msgs]
    runs: dict[str, list[Any]] = {name: [] for name, _ in set_paths}
    for _ in range(args.repeats):
        for name, share in set_paths:
            runs[name].append(measure(b, name, msgs, args.tokens, share, sampling))
    base = None
    reference = runs[set_paths[0][0]][-1][3]
    for name, _ in set_paths:
        _, wall, timer, ids = sorted(runs[name], key=lambda r: r[1])[len(runs[name]) // 2]
        same = sum(x == y for x, y in zip(ids, reference, strict=True))
        if same != len(msgs):
            failures.append(f"{set_name}/{name}: {same} of {len(msgs)} identical")
        n = sum(len(t) for t in ids)
        base = base or n / wall
        rows.append(
            (
                f"{set_name} ({len(msgs)} prompts, mean {sum(lens) / len(lens):.0f} tokens)",
                name,
                wall,
                n,
                n / wall,
                (n / wall) / base,
                timer.prefill,
                timer.decode,
                timer.steps,
                wall - timer.prefill - timer.decode,
                same,
                len(msgs),
            )
        )
    print(
        f"{set_name}: runs (s) "
        + "; ".join(f"{k}: " + ", ".join(f"{r[1]:.1f}" for r in v) for k, v in runs.items())
    )
    return rows, failures


def print_table(b: HFBackend, rows: list[tuple[Any, ...]], args: argparse.Namespace) -> None:
    """The settings line and the markdown table of every set's paths."""
    print(
        f"\n{args.tokens} max new tokens, natural stops, batch size {args.batch_size}, "
        f"{torch.get_num_threads()} threads, {b.device}, {args.dtype}, "
        f"median of {args.repeats} run(s)\n"
    )
    print(
        "| prompts | path | wall s | new tokens | tokens/s | vs first path | prefill s "
        "| decode s (steps) | other s | identical |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r[0]} | {r[1]} | {r[2]:.1f} | {r[3]} | {r[4]:.1f} | {r[5]:.2f}x | {r[6]:.1f} "
            f"| {r[7]:.1f} ({r[8]}) | {r[9]:.1f} | {r[10]}/{r[11]} |"
        )


def main() -> None:
    args = parse_args()
    b = HFBackend.load(
        ModelSpec(model="embedded:smollm2", batch_size=args.batch_size, dtype=args.dtype),
        ROOT / ".cache",
    )
    paths: tuple[tuple[str, bool | None], ...] = (
        ("plain batched generate", None),
        ("syps, full prefill each", False),
        ("syps, shared prefix once", True),
    )
    # Repetitions are sampled in a real study (greedy ones would all be equal), each with its
    # own seed; transformers' `generate` has no per-prompt seed, so that set compares the two
    # syps paths only, the first being the baseline of its ratio.
    hot = SamplingParams(temperature=1.0, top_p=1.0, seed=0)
    sets = {
        "syps": (syps_set(args.items), paths, GREEDY),
        "reps": (reps_set(args.reps), paths, GREEDY),
        "reps, sampled": (reps_set(args.reps), paths[1:], hot),
    }
    measure(b, "warm-up", reps_set(4), 2, True)
    measure(b, "warm-up", reps_set(4), 2, None)
    rows, failures = [], []
    for set_name, (msgs, set_paths, sampling) in sets.items():
        set_rows, set_failures = run_set(b, set_name, msgs, set_paths, sampling, args)
        rows += set_rows
        failures += set_failures
    print_table(b, rows, args)
    # In fp32 every path must decode the same tokens; in bf16, rounding differs with the batch
    # layout (a shared prefix, padding), so the identical column is a measurement there.
    assert args.dtype != "float32" or not failures, "token ids differ: " + "; ".join(failures)


if __name__ == "__main__":
    main()
