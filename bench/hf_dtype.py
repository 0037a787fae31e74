"""The HF backend in float32 and in bfloat16 on this machine, in one run: the speed and how
many prompts keep the float32 tokens (why ``dtype: auto`` is float32 on a CPU).

Same model (the embedded SmolLM2-135M-Instruct), same prompts (the first N SyPS prompts of the
built-in sample, as the pipeline renders them), the stage's own path (``HFBackend.generate``,
greedy, natural stops), each dtype --repeats times, alternating; the table shows the median:

  taskset -c 0,1 python bench/hf_dtype.py            # 64 prompts, up to 32 new tokens
  python bench/hf_dtype.py --n 16 --tokens 16         # quicker

bf16 is fast on a CPU only with bf16 matrix instructions (AMX, AVX512-BF16), which the line
before the table lists from /proc/cpuinfo.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import torch
from hf_throughput import prompts, syps_batched

from syps.core.backends.hf import HFBackend
from syps.core.config import ModelSpec

ROOT = Path(__file__).resolve().parents[1]
FLAGS = ("amx_bf16", "avx512_bf16", "avx512f")


def cpu_flags() -> list[str]:
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8")
    except OSError:
        return []
    line = next((ln for ln in text.splitlines() if ln.startswith("flags")), "")
    return [f for f in FLAGS if f in line.split()]


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--n", type=int, default=64, help="prompts")
    ap.add_argument("--tokens", type=int, default=32, help="new tokens per prompt at most")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=2, help="timed runs of each dtype")
    args = ap.parse_args()

    dtypes = ("float32", "bfloat16")
    backends = {
        d: HFBackend.load(
            ModelSpec(model="embedded:smollm2", batch_size=args.batch_size, dtype=d),  # type: ignore[arg-type]
            ROOT / ".cache",
        )
        for d in dtypes
    }
    msgs = prompts(args.n)
    for b in backends.values():  # warm-up: first-touch allocations stay out of the timings
        syps_batched(b, msgs, 4, True)
    times: dict[str, list[float]] = {d: [] for d in dtypes}
    got = {}
    for _ in range(args.repeats):
        for d in dtypes:
            t, toks = syps_batched(backends[d], msgs, args.tokens, False)
            times[d].append(t)
            got[d] = toks
    flags = ", ".join(cpu_flags()) or f"none of {', '.join(FLAGS)}"
    print(
        f"\n{args.n} prompts x up to {args.tokens} new tokens (natural stops), "
        f"{torch.get_num_threads()} threads, CPU flags: {flags}, median of {args.repeats} runs\n"
    )
    print("| dtype | wall s | tokens | tokens/s | vs float32 | greedy tokens as float32's |")
    print("|---|---|---|---|---|---|")
    base = None
    for d in dtypes:
        t = statistics.median(times[d])
        n = sum(len(ids) + stopped for ids, stopped in got[d])  # EOS counts as a token
        base = base or n / t
        same = sum(a == b for a, b in zip(got["float32"], got[d], strict=True))
        print(
            f"| {d} | {t:.1f} | {n} | {n / t:.1f} | {(n / t) / base:.2f}x | {same} of {len(msgs)} |"
        )


if __name__ == "__main__":
    main()
