"""DVC stage `label`: see :func:`syps.core.pipeline.label`. Paths come from dvc.yaml."""

from syps.cli import run_stage
from syps.core.pipeline import label

if __name__ == "__main__":
    run_stage(label)
