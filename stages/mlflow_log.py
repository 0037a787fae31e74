"""DVC stage `mlflow`: see :func:`syps.core.pipeline.mlflow`. Paths come from dvc.yaml; it logs
every protocol of the registry.

Not stages/mlflow.py: run as a script, it would shadow the mlflow package.
"""

from syps.core.pipeline import mlflow
from syps.protocols import PROTOCOLS
from syps.stage import run_stage

if __name__ == "__main__":
    run_stage(mlflow, PROTOCOLS)
