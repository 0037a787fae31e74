"""DVC stage `p-lint`: see :func:`syps.protocols.stages.lint`. Paths come from dvc.yaml."""

from syps.cli import run_stage
from syps.protocols.stages import lint

if __name__ == "__main__":
    run_stage(lint)
