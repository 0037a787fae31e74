"""Decoding beside another CPU-bound job: how much one competing process slows the generate stage.

A new user runs `dvc repro` while a test suite or a second `dvc repro` runs in another terminal.
On 2 cores, two torch threads per process then spin against the other job at every parallel
region. This measures, in one run, the generate stage's own path (``HFBackend.generate`` on the
default study's first --n SyPS prompts, its batch size and answer length) in a fresh process per
configuration: syps's default (every core, ``OMP_WAIT_POLICY=PASSIVE``), one thread, and every
core with OpenMP's own default wait (torch imported before syps, as before syps set a policy),
each alone and beside one competing process (a Python busy loop, as a test
suite is), alternating, --repeats times each; the table shows the median seconds per prompt and
the slowdown beside the other job.

    python bench/busy_machine.py                 # 16 prompts, 2 repeats: a few minutes
    python bench/busy_machine.py --n 8 --repeats 1

Model loading is left out of the timing (it is the same in every configuration); the competing
process is started with its own session and stopped by its pid.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, cast

ROOT = Path(__file__).resolve().parents[1]
HOG = "while True: pass"
TORCH_FIRST = "--torch-first"


def child(n: int, torch_first: bool) -> None:
    """Load the default model, warm it up, and print the seconds that generating n prompts took.
    syps is imported first, as a stage imports it (it sets the wait policy before torch loads),
    unless ``torch_first``: then torch loads with OpenMP's own default, as before syps set one."""
    if torch_first:
        import torch  # noqa: F401  (loaded before syps: OpenMP's default wait policy)

    from syps.core.backends import GenRequest, SamplingParams
    from syps.core.backends.hf import HFBackend
    from syps.core.params import load_params
    from syps.protocols import PROTOCOLS
    from syps.protocols.cues.data import load_items
    from syps.protocols.cues.params import CuesParams
    from syps.protocols.cues.templates import render_variants

    p = load_params(ROOT / "params.yaml", PROTOCOLS)
    cues = cast(CuesParams, p.protocols["cues"])
    table = render_variants(load_items(cues.data, ROOT), cues.templates)
    limit = cues.max_new_tokens["OEQ"]  # the first prompts are OEQ's
    msgs = [json.loads(m) for m in table["messages"].head(n)]
    b = HFBackend.load(p.models["smollm2-135m"], ROOT / ".cache")
    greedy = SamplingParams(temperature=0.0, top_p=1.0, seed=0)
    b.generate([GenRequest("w", msgs[0], 4)], greedy)  # first-touch allocations
    start = time.perf_counter()
    got = b.generate([GenRequest(str(i), m, limit) for i, m in enumerate(msgs)], greedy)
    elapsed = time.perf_counter() - start
    texts = [r.text for r in got]
    import torch  # loaded by now, by the backend or above

    print(json.dumps({"seconds": elapsed, "threads": torch.get_num_threads(), "texts": texts}))


def run(n: int, env: dict[str, str]) -> dict[str, Any]:
    first = [TORCH_FIRST] if env.pop(TORCH_FIRST, None) else []
    done = subprocess.run(
        [sys.executable, __file__, "--child", "--n", str(n), *first],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--n", type=int, default=16, help="prompts per timed run")
    ap.add_argument("--repeats", type=int, default=2, help="timed runs of each configuration")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument(TORCH_FIRST, action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.n, args.torch_first)
        return

    cores = len(os.sched_getaffinity(0))
    base = {k: v for k, v in os.environ.items() if k not in ("SYPS_THREADS", "OMP_WAIT_POLICY")}
    configs = {
        "syps default (OMP_WAIT_POLICY=PASSIVE)": {},
        "1 thread (SYPS_THREADS=1)": {"SYPS_THREADS": "1"},
        f"{cores} threads, OpenMP's default wait (torch loaded before syps)": {
            "SYPS_THREADS": str(cores),
            TORCH_FIRST: "1",
        },
    }
    reference = "1 thread (SYPS_THREADS=1)"
    times: dict[tuple[str, bool], list[float]] = {}
    threads: dict[str, int] = {}
    texts: dict[str, list[str]] = {}
    for _ in range(args.repeats):
        for busy in (False, True):
            hog = (
                subprocess.Popen([sys.executable, "-c", HOG], start_new_session=True)
                if busy
                else None
            )
            try:
                for name, extra in configs.items():
                    got = run(args.n, {**base, **extra})
                    times.setdefault((name, busy), []).append(got["seconds"] / args.n)
                    threads[name] = int(got["threads"])
                    texts[name] = got["texts"]
            finally:
                if hog is not None:
                    os.kill(hog.pid, signal.SIGKILL)
                    hog.wait()

    print(
        f"\n{args.n} prompts of the default study, {cores} usable cores, median of "
        f"{args.repeats} runs; beside = one competing CPU-bound process\n"
    )
    print(
        "| configuration | torch threads | s/prompt alone | s/prompt beside | slowdown "
        "| answers as 1 thread's |"
    )
    print("|---|---|---|---|---|---|")
    for name in configs:
        alone = statistics.median(times[(name, False)])
        beside = statistics.median(times[(name, True)])
        same = sum(x == y for x, y in zip(texts[name], texts[reference], strict=True))
        print(
            f"| {name} | {threads[name]} | {alone:.2f} | {beside:.2f} | {beside / alone:.1f}x "
            f"| {same}/{args.n} |"
        )


if __name__ == "__main__":
    main()
