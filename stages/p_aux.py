"""DVC stage `p-aux`: see :func:`syps.protocols.stages.aux`. Paths come from dvc.yaml."""

from syps.cli import run_stage
from syps.protocols.stages import aux

if __name__ == "__main__":
    run_stage(aux)
