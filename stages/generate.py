"""DVC stage `generate`: see :func:`syps.pipeline.generate`. Paths come from dvc.yaml."""

from syps.cli import run_stage
from syps.pipeline import generate

if __name__ == "__main__":
    run_stage(generate)
