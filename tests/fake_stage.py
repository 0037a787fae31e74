"""Run a stage's own script (stages/<name>.py, what dvc.yaml runs) in a subprocess with the
suite's scripted backend in ``BACKENDS["hf"]``: ``python tests/fake_stage.py
stages/<name>.py ARGS...``. Shared by the tests that kill a stage with ``kill -9``.

Environment: ``FAKE_BATCH`` the backend's batch size (default: the whole call);
``FAKE_PAUSE="<kind> <k>"`` makes the backend write ``FAKE_MARK`` and sleep before batch k of
its first call of that kind (``generate`` or ``judge``), so a test can SIGKILL it there.
"""

from __future__ import annotations

import os
import runpy
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fakes import FakeModels  # noqa: E402

import syps.core.backends  # noqa: E402

PAUSE = os.environ.get("FAKE_PAUSE", "").split()


def on_batch(kind: str, k: int) -> None:
    if PAUSE and kind == PAUSE[0] and k == int(PAUSE[1]):
        Path(os.environ["FAKE_MARK"]).write_text(f"{kind} {k}")
        time.sleep(600)


if __name__ == "__main__":
    batch = os.environ.get("FAKE_BATCH")
    syps.core.backends.BACKENDS["hf"] = FakeModels(
        batch=int(batch) if batch else None, on_batch=on_batch
    )
    sys.argv = sys.argv[1:]
    runpy.run_path(sys.argv[0], run_name="__main__")
