"""DVC stage `p-score`: see :func:`syps.protocols.stages.score`. Paths come from dvc.yaml."""

from syps.cli import run_stage
from syps.protocols.stages import score

if __name__ == "__main__":
    run_stage(score)
