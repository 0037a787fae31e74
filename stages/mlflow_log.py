"""DVC stage `mlflow`: see :func:`syps.core.pipeline.mlflow`. Paths come from dvc.yaml.

Not stages/mlflow.py: run as a script, it would shadow the mlflow package.
"""

from syps.cli import run_stage
from syps.core.pipeline import mlflow

if __name__ == "__main__":
    run_stage(mlflow)
