"""Judge validation for any protocol's labeller: draw label rows for people to label, then
measure the labeller as configured now against them (``syps judge sample|validate``).

A protocol describes each labeller it validates as a ``syps.core.protocol.JudgeSpec`` (which
label rows it decides, what a person reads besides the response, the columns that name a row,
the strata to sample by, and how the labeller as configured now labels rows again) and lists
them in its ``judges``. Everything else lives here, the same for every judge, one module a job:

- ``inputs``: what is read from files. ``spec_of`` picks a protocol's judge; ``label_rows``
  reads the label tables (the label stage's ``<model>.parquet``; the response text from the
  responses table beside it where a label table has none) and ``with_context``
  keeps the rows the judge decides, with what a person reads from the items table;
  ``read_annotations`` reads an annotated sample back strictly: each error names the file, the
  row and its sample_id.
- ``sample``: ``judge_sample`` draws ``n`` of the rows the judge decides, stratified by the
  spec's strata, into a CSV with an empty ``human_label`` column (1, 0 or UNCLEAR).
- ``agree``: ``machine_labels`` labels the same rows again through the response store (a
  prompt judged before costs nothing); ``agreement_by_dataset`` gives agreement, Cohen's kappa
  with a bootstrap CI, the confusion matrix and both UNCLEAR rates per dataset and over all
  rows; ``population_rows`` and ``corrected_rates`` give each dataset's judged rate corrected by
  the people's labels.
- ``report``: ``validation_table``, the report as the plain text ``syps judge validate``
  prints.
- ``review``: people's labels in MLflow. ``sample_traces`` finds the sampled rows' traces,
  ``add_to_queue`` attaches them to a review queue asking the judge's question
  (``question_name``); ``annotations_from_queue`` and ``annotations_from_traces`` read the
  answers back as an annotated sample instead of a CSV.
- ``validate``: ``judge_validate`` runs the steps above on an annotated sample, writes the
  report JSON and logs one MLflow run tagged ``syps.kind=judge-validation``.

The modules import in that order (``inputs`` first, ``validate`` last), never back. A protocol
reads no params.yaml, store or MLflow: its spec is handed tables and a judge.
"""

from syps.core.validation.agree import (
    ALL,
    LABELER_KEYS,
    MACHINE_COLUMNS,
    PPI_KEYS,
    agreement_by_dataset,
    corrected_rates,
    machine_labels,
    population_rows,
)
from syps.core.validation.inputs import (
    HUMAN_VALUES,
    ITEM_COLUMNS,
    label_rows,
    read_annotations,
    spec_of,
    with_context,
)
from syps.core.validation.report import validation_table
from syps.core.validation.review import (
    QUEUE_OPTIONS,
    TRACE_TAG_COLUMNS,
    add_to_queue,
    annotations_from_queue,
    annotations_from_traces,
    question_name,
    sample_traces,
)
from syps.core.validation.sample import judge_sample
from syps.core.validation.validate import judge_validate

__all__ = [
    "ALL",
    "HUMAN_VALUES",
    "ITEM_COLUMNS",
    "LABELER_KEYS",
    "MACHINE_COLUMNS",
    "PPI_KEYS",
    "QUEUE_OPTIONS",
    "TRACE_TAG_COLUMNS",
    "add_to_queue",
    "agreement_by_dataset",
    "annotations_from_queue",
    "annotations_from_traces",
    "corrected_rates",
    "judge_sample",
    "judge_validate",
    "label_rows",
    "machine_labels",
    "population_rows",
    "question_name",
    "read_annotations",
    "sample_traces",
    "spec_of",
    "validation_table",
    "with_context",
]
