"""DVC stage `label`: see :func:`syps.core.pipeline.label`. Paths come from dvc.yaml; the protocol
named is imported alone."""

from syps.core.pipeline import label
from syps.stage import run_stage

if __name__ == "__main__":
    run_stage(label)
