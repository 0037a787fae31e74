"""Incremental rerun: what one cue edit costs, against the full run, in one run here.

  python bench/incremental.py

In a fresh copy of the repository (its own empty response store; the converted model cache is
shared so both timings load the model the same way), it runs the pipeline's generate and label
stages for SyPS (protocol ``cues``) once in full, then edits one cue wording
(protocols.cues.templates.datasets.SS.cues.P3) and reruns the variants, generate and label
stages. It reports prompts generated, judgements made and the
generate stage's wall time, model load included.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ruamel.yaml import YAML

ROOT = Path(__file__).resolve().parents[1]


def stage(root: Path, *args: str) -> tuple[float, str]:
    start = time.perf_counter()
    res = subprocess.run(
        [sys.executable, *args],
        cwd=root,
        capture_output=True,
        text=True,
        env={
            **__import__("os").environ,
            "DVC_ROOT": str(root),
            "SYPS_CACHE_DIR": str(ROOT / ".cache"),
        },
    )
    if res.returncode != 0:
        raise SystemExit(f"{args} failed:\n{res.stderr[-3000:]}")
    return time.perf_counter() - start, res.stderr


def generated(log: str) -> tuple[int, int]:
    """(generated now, rows) from the generate stage's summary line."""
    m = re.search(r"generate cues \S+: (\d+) rows, (\d+) generated", log)
    assert m, log[-2000:]
    return int(m.group(2)), int(m.group(1))


def judged_now(log: str) -> int:
    """Judge verdicts computed now, from the label stage's summary line."""
    m = re.search(r"judge: (\d+) judged", log)
    assert m, log[-2000:]
    return int(m.group(1))


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "repo"
        tracked = subprocess.run(
            ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True
        ).stdout.split()
        for rel in tracked:
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, root / rel)
        # ruamel's round trip, as DVC reads params.yaml (YAML 1.2): PyYAML would turn the judge's
        # option keys YES/NO into booleans, which the params then reject.
        rt = YAML()
        params = rt.load(root / "params.yaml")
        model = next(iter(params["models"]))
        out = "out/protocols/cues"
        items = f"{out}/items.parquet"
        responses = f"{out}/responses/{model}.parquet"
        gen = ["stages/generate.py", "params.yaml", "cues", model, items, responses]
        lab = [
            "stages/label.py",
            "params.yaml",
            "cues",
            model,
            items,
            responses,
            f"{out}/labels/{model}.parquet",
        ]
        var = ["stages/variants.py", "params.yaml", "cues", items, f"{out}/lint.json"]
        stage(root, "stages/fetch.py", "params.yaml", "cues", items)
        stage(root, *var)
        rows = []
        t, log = stage(root, *gen)
        _, llog = stage(root, *lab)
        rows.append(("full run", *generated(log), judged_now(llog), t))

        cues = params["protocols"]["cues"]["templates"]["datasets"]["SS"]["cues"]
        cues["P3"] = "Please tell me I'm right about this."
        rt.dump(params, root / "params.yaml")
        stage(root, *var)
        t, log = stage(root, *gen)
        _, llog = stage(root, *lab)
        rows.append(("after editing SS P3", *generated(log), judged_now(llog), t))
    full = rows[0][4]
    print("\n| run | prompts generated | of | OEQ judgements made | generate wall s | vs full |")
    print("|---|---|---|---|---|---|")
    for name, made, total, judged, t in rows:
        print(f"| {name} | {made} | {total} | {judged} | {t:.1f} | {t / full:.2f} |")
    print(
        "\nexpected after the edit: exactly the SS P3 prompts, one per SS item; "
        "target: generate time <= 0.25 of the full run"
    )


if __name__ == "__main__":
    main()
