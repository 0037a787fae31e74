"""The study's file layout: the one place that knows where the pipeline's files lie.

dvc.yaml passes every stage the paths it reads and writes; a stage takes them from its
arguments and builds no path of its own. This object is what is left: how those paths relate
(the responses folder beside the labels one, the run logs above a protocol's folders, the MLflow
store that holds the stage's marker) and where each lies by default for a command run outside
a stage (``syps score``, ``syps judge``, ``syps audit``), which is where dvc.yaml puts it::

    out/protocols/<protocol>/items.parquet              fetch
    out/protocols/<protocol>/lint.json, conversations.parquet    variants
    out/protocols/<protocol>/responses/<model>.parquet  generate
    out/protocols/<protocol>/labels/<model>.parquet     label
    out/run-log/<stage>.<protocol>.<model>.json         what a stage did in its last run
    out/tracks/<protocol>.json                          score's bundle for the mlflow stage
    mlruns/                                             the MLflow store (mlflow.db), unless
                                                        MLFLOW_TRACKING_URI names a server
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from syps.core.runs import repo_root

# The outputs' and the store's folders in a study, the folder names below ``out/``, and the
# step that writes each per-model table.
OUT, MLRUNS = "out", "mlruns"
PROTOCOLS = "protocols"
TABLES = {"generate": "responses", "label": "labels"}


@dataclass(frozen=True)
class Layout:
    """Where a study's outputs (``out``) and its MLflow store (``mlruns``) lie."""

    out: Path
    mlruns: Path

    @classmethod
    def of(cls, root: Path) -> Layout:
        """The layout dvc.yaml gives a study in the repository ``root``."""
        return cls(root / OUT, root / MLRUNS)

    @classmethod
    def here(cls) -> Layout:
        """The layout of the study a command runs in: its outputs below the working directory
        (dvc.yaml's paths are relative to it), its MLflow store in the repository's
        (``repo_root``: a queued experiment logs to its parent's store)."""
        return cls(Path(OUT), repo_root() / MLRUNS)

    def protocol(self, name: str) -> Path:
        """The folder of protocol ``name``'s stage outputs."""
        return self.out / PROTOCOLS / name

    def items(self, name: str) -> Path:
        return self.protocol(name) / "items.parquet"

    def labels(self, name: str) -> Path:
        """The folder of ``name``'s label tables, ``<model>.parquet``."""
        return self.protocol(name) / TABLES["label"]

    def table(self, name: str, step: str, model: str) -> Path:
        """The table ``step`` (generate or label) writes for ``model``."""
        return self.protocol(name) / TABLES[step] / f"{model}.parquet"


def responses_beside(labels: Path) -> Path:
    """The responses folder that goes with the label folder ``labels`` (its sibling)."""
    return labels.parent / TABLES["generate"]


def run_log_dir(output: Path) -> Path:
    """Where a stage leaves the record of its last run (``syps.core.runs``): the layout's
    ``out`` for an output in it (``out/protocols/<p>/<dir>/<model>.parquet``), beside the output
    for a stage run by hand on another path. Outside every DVC output and dependency either
    way."""
    in_layout = len(output.parents) > 3 and output.parents[2].name == PROTOCOLS
    return output.parents[3] if in_layout else output.parent
