"""DVC stage `variants`: see :func:`syps.core.pipeline.variants`. Paths come from dvc.yaml."""

from syps.cli import run_stage
from syps.core.pipeline import variants

if __name__ == "__main__":
    run_stage(variants)
