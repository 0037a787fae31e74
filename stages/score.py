"""DVC stage `score`: see :func:`syps.core.pipeline.score`. Paths come from dvc.yaml; the protocol
named is imported alone."""

from syps.core.pipeline import score
from syps.stage import run_stage

if __name__ == "__main__":
    run_stage(score)
