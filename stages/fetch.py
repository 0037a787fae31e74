"""DVC stage `fetch`: see :func:`syps.core.pipeline.fetch`. Paths come from dvc.yaml; the protocol
named is imported alone."""

from syps.core.pipeline import fetch
from syps.stage import run_stage

if __name__ == "__main__":
    run_stage(fetch)
