"""DVC stage `p-label`: see :func:`syps.protocols.stages.label`. Paths come from dvc.yaml."""

from syps.cli import run_stage
from syps.protocols.stages import label

if __name__ == "__main__":
    run_stage(label)
