"""DVC stage `generate`: see :func:`syps.core.pipeline.generate`. Paths come from dvc.yaml."""

from syps.cli import run_stage
from syps.core.pipeline import generate

if __name__ == "__main__":
    run_stage(generate)
