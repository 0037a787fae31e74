"""DVC stage `generate`: see :func:`syps.core.pipeline.generate`. Paths come from dvc.yaml;
the protocol named is imported alone."""

from syps.core.pipeline import generate
from syps.stage import run_stage

if __name__ == "__main__":
    run_stage(generate)
