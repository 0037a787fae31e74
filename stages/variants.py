"""DVC stage `variants`: see :func:`syps.pipeline.variants`. Paths come from dvc.yaml."""

from syps.cli import run_stage
from syps.pipeline import variants

if __name__ == "__main__":
    run_stage(variants)
