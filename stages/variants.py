"""DVC stage `variants`: see :func:`syps.core.pipeline.variants`. Paths come from dvc.yaml;
the protocol named is imported alone."""

from syps.core.pipeline import variants
from syps.stage import run_stage

if __name__ == "__main__":
    run_stage(variants)
