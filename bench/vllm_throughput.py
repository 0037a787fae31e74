"""The two local backends against what a user would otherwise run, in one run, on the same
token ids: plain batched `generate`, the HF backend (fp32, bf16), bare `vllm.LLM.generate` and
syps's vLLM backend (fp32, bf16).

  taskset -c 0,1 python bench/vllm_throughput.py          # in the engine's environment
  python bench/vllm_throughput.py --items 2 --reps 4 --tokens 8   # quicker

Needs vLLM (`bash setup.sh --vllm`). Two prompt sets on the embedded SmolLM2-135M-Instruct,
greedy, up to --tokens new tokens, natural stops (EOS), as bench/hf_prefix.py builds them:

  syps: the first --items items of the default SyPS prompt set, all eight variants each;
  reps: one discernment scoring prompt repeated --reps times.

Every prompt is encoded once by syps's chat encoder; bare vLLM gets those ids as
``TokensPrompt``s. The syps paths encode for themselves (their cost is part of theirs). Bare
vLLM and syps's vLLM backend share one engine per dtype, started by ``VLLMBackend.load`` with
vLLM's defaults otherwise (prefix caching on, compiled unless --eager); the prefix cache is
emptied before every timed run, so no path is served what another computed. Engine start and
the HF model load are reported apart from generation. "identical" counts the prompts whose new
token ids (and stop) equal the HF backend's fp32 ones.

The HF paths run first, before any engine starts: vLLM's CPU worker pins the process's threads
when it starts, and the HF paths should run as a transformers user runs them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path
from typing import Any

import torch
from hf_prefix import GREEDY, Messages, plain, reps_set, syps, syps_set

from syps.core.backends import GenRequest
from syps.core.backends.hf import HFBackend
from syps.core.config import ModelSpec

ROOT = Path(__file__).resolve().parents[1]
Ids = list[list[int]]


def bare_vllm(llm: Any, encoded: Ids, tokens: int) -> Ids:
    """`LLM.generate` on the token ids, greedy; new ids up to EOS, -1 marking a stop."""
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    outs = llm.generate(
        [TokensPrompt(prompt_token_ids=ids) for ids in encoded],
        SamplingParams(temperature=0.0, max_tokens=tokens),
        use_tqdm=False,
    )
    ids = []
    for o in outs:
        c = o.outputs[0]
        stopped = c.finish_reason == "stop"
        ids.append([*c.token_ids[:-1], -1] if stopped else list(c.token_ids))
    return ids


def syps_vllm(backend: Any, msgs: list[Messages], tokens: int) -> Ids:
    """VLLMBackend.generate; the new ids of each prompt, recorded as the backend decodes them
    (each result is handed over right after its decode, so the last decoded ids are its)."""
    decode = backend.tok.decode
    last: list[list[int]] = []
    got: dict[int, list[int]] = {}

    def recording(ids: Any, **kw: Any) -> Any:
        last.append(list(ids))
        return decode(ids, **kw)

    def done(idx: list[int], res: list[Any]) -> None:
        for k, r in zip(idx, res, strict=True):
            got[k] = last[-1] + ([-1] if r.finish_reason == "stop" else [])

    backend.tok.decode = recording
    try:
        backend.generate([GenRequest(str(i), m, tokens) for i, m in enumerate(msgs)], GREEDY, done)
    finally:
        del backend.tok.decode
    return [got[i] for i in range(len(msgs))]


def timed(fn: Any, *args: Any) -> tuple[float, Ids]:
    start = time.perf_counter()
    ids = fn(*args)
    return time.perf_counter() - start, ids


Runs = dict[tuple[str, str], list[tuple[float, Ids]]]


def parse_args() -> argparse.Namespace:
    """The command line: prompt set sizes, answer length, batch size, repeats, eager vLLM."""
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--items", type=int, default=8, help="SyPS items (x 8 variants)")
    ap.add_argument("--reps", type=int, default=20, help="repetitions of the scoring prompt")
    ap.add_argument("--tokens", type=int, default=32, help="max new tokens per prompt")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=1, help="timed runs of each path")
    ap.add_argument("--eager", action="store_true", help="vLLM without compilation")
    return ap.parse_args()


def record(runs: Runs, set_name: str, path: str, fn: Any, *fargs: Any) -> None:
    """Time ``fn(*fargs)`` and keep its seconds and ids under (set, path), in run order."""
    runs.setdefault((set_name, path), []).append(timed(fn, *fargs))


def run_hf(
    sets: dict[str, list[Messages]],
    args: argparse.Namespace,
    cache: Path,
    runs: Runs,
    starts: dict[str, float],
) -> int:
    """The HF paths (plain `generate` fp32, the HF backend fp32 and bf16) on every set, into
    ``runs``, their model loads into ``starts``; the threads torch ran them on."""
    hf: dict[str, HFBackend] = {}
    for dtype in ("float32", "bfloat16"):
        t0 = time.perf_counter()
        spec = ModelSpec(model="embedded:smollm2", batch_size=args.batch_size, dtype=dtype)
        hf[dtype] = HFBackend.load(spec, cache)
        starts[f"HF backend {dtype}"] = time.perf_counter() - t0
        syps(hf[dtype], reps_set(4), 2)  # warm-up: first-touch allocations
    plain(hf["float32"], reps_set(4), 2)
    for _ in range(args.repeats):
        for set_name, msgs in sets.items():
            record(
                runs,
                set_name,
                "plain batched generate fp32",
                plain,
                hf["float32"],
                msgs,
                args.tokens,
            )
            for dtype, short in (("float32", "fp32"), ("bfloat16", "bf16")):
                record(runs, set_name, f"HF backend {short}", syps, hf[dtype], msgs, args.tokens)
    return torch.get_num_threads()


def run_vllm(
    sets: dict[str, list[Messages]],
    args: argparse.Namespace,
    cache: Path,
    runs: Runs,
    starts: dict[str, float],
) -> None:
    """Bare `vllm.LLM.generate` and syps's vLLM backend, fp32 then bf16, on one engine per
    dtype, into ``runs`` (the prefix cache emptied before each timed run); the engine starts
    into ``starts``."""
    from syps.core.backends.vllm_engine import VLLMBackend

    for dtype, short in (("float32", "fp32"), ("bfloat16", "bf16")):
        t0 = time.perf_counter()
        spec = ModelSpec(
            model="embedded:smollm2",
            backend="vllm",
            batch_size=args.batch_size,
            dtype=dtype,  # type: ignore[arg-type]
            enforce_eager=args.eager,
        )
        engine = VLLMBackend.load(spec, cache)
        starts[f"vLLM engine {short}"] = time.perf_counter() - t0
        encoded = {name: [engine.encoder.encode(m) for m in msgs] for name, msgs in sets.items()}
        bare_vllm(engine.llm, encoded["reps"][:4], 2)  # warm-up
        for _ in range(args.repeats):
            for set_name, msgs in sets.items():
                engine.llm.reset_prefix_cache()
                record(
                    runs,
                    set_name,
                    f"bare vllm.LLM.generate {short}",
                    bare_vllm,
                    engine.llm,
                    encoded[set_name],
                    args.tokens,
                )
                engine.llm.reset_prefix_cache()
                record(
                    runs,
                    set_name,
                    f"syps vLLM backend {short}",
                    syps_vllm,
                    engine,
                    msgs,
                    args.tokens,
                )
        del engine


def print_results(
    sets: dict[str, list[Messages]],
    runs: Runs,
    starts: dict[str, float],
    args: argparse.Namespace,
    threads: int,
) -> None:
    """The settings line, a markdown table of every path's median run per set (tokens/s against
    the set's first path, ids against the HF backend's fp32), and the start times."""
    print(
        f"\nup to {args.tokens} new tokens, greedy, natural stops, batch size {args.batch_size}, "
        f"{threads} threads, median of {args.repeats} run(s); vLLM "
        f"{'eager' if args.eager else 'compiled (its default)'}\n"
    )
    print("| prompts | path | wall s | new tokens | tokens/s | vs plain generate | identical |")
    print("|---|---|---|---|---|---|---|")
    for set_name, msgs in sets.items():
        reference = runs[(set_name, "HF backend fp32")][-1][1]
        base = None
        for (s, path), times in runs.items():
            if s != set_name:
                continue
            wall = statistics.median(t for t, _ in times)
            ids = times[-1][1]
            n = sum(len(x) for x in ids)  # a stop counts as one token, as EOS is generated
            base = base or n / wall
            same = sum(a == b for a, b in zip(ids, reference, strict=True))
            print(
                f"| {set_name} ({len(msgs)}) | {path} | {wall:.1f} | {n} | {n / wall:.1f} "
                f"| {(n / wall) / base:.2f}x | {same}/{len(msgs)} |"
            )
    print("\n| start | s |\n|---|---|")
    for name, secs in starts.items():
        print(f"| {name} | {secs:.1f} |")


def main() -> None:
    args = parse_args()
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")

    sets = {"syps": syps_set(args.items), "reps": reps_set(args.reps)}
    cache = ROOT / ".cache"
    runs: Runs = {}
    starts: dict[str, float] = {}
    threads = run_hf(sets, args, cache, runs, starts)
    run_vllm(sets, args, cache, runs, starts)
    print_results(sets, runs, starts, args, threads)


if __name__ == "__main__":
    main()
