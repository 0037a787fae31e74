"""DVC stage `lint`: see :func:`syps.protocols.cues.lint.lint`. Paths come from dvc.yaml."""

from syps.cli import run_stage
from syps.protocols.cues.lint import lint

if __name__ == "__main__":
    run_stage(lint)
