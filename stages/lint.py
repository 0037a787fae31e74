"""DVC stage `lint`: see :func:`syps.lint.lint`. Paths come from dvc.yaml."""

from syps.cli import run_stage
from syps.lint import lint

if __name__ == "__main__":
    run_stage(lint)
