"""DVC stage `p-items`: see :func:`syps.protocols.stages.items`. Paths come from dvc.yaml."""

from syps.cli import run_stage
from syps.protocols.stages import items

if __name__ == "__main__":
    run_stage(items)
