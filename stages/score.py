"""DVC stage `score`: see :func:`syps.core.pipeline.score`. Paths come from dvc.yaml."""

from syps.cli import run_stage
from syps.core.pipeline import score

if __name__ == "__main__":
    run_stage(score)
