"""DVC stage `fetch`: see :func:`syps.core.pipeline.fetch`. Paths come from dvc.yaml."""

from syps.cli import run_stage
from syps.core.pipeline import fetch

if __name__ == "__main__":
    run_stage(fetch)
