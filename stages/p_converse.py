"""DVC stage `p-converse`: see :func:`syps.protocols.stages.converse`. Paths come from dvc.yaml."""

from syps.cli import run_stage
from syps.protocols.stages import converse

if __name__ == "__main__":
    run_stage(converse)
