"""Datasets: the BIND paper's graphs, a synthetic biased-graph generator, and graphs from user files.

Public API:

* :func:`load` / :func:`available` / :class:`DatasetInfo` — Income, Recidivism, Pokec-z, Pokec-n.
* :func:`paper_split` — the paper's per-label train/validation/test rule.
* :func:`synthetic` — a seeded generator of biased attributed graphs for demos and tests.
* :func:`from_files`, :func:`save_npz`, :func:`load_npz` — user uploads and the service's storage format;
  :func:`ingest_files` also returns the :class:`IngestReport` of what reading the files did (its typed summary,
  :class:`IngestSummary`, is what the service shows).
"""

from bind_core.data.datasets.files import from_files, ingest_files
from bind_core.data.datasets.ingest_report import Ingested, IngestReport
from bind_core.data.datasets.npz import load_npz, save_npz
from bind_core.data.datasets.registry import DATASET_NAMES, DatasetInfo, available, canonical_name, load
from bind_core.data.datasets.scaling import minmax_scale
from bind_core.data.datasets.split import PAPER_SPLIT_SEED, PAPER_TRAIN_PER_CLASS, paper_split
from bind_core.data.datasets.synthetic import synthetic
from bind_core.data.records import IngestSummary

__all__ = [
    "DATASET_NAMES",
    "PAPER_SPLIT_SEED",
    "PAPER_TRAIN_PER_CLASS",
    "DatasetInfo",
    "IngestReport",
    "IngestSummary",
    "Ingested",
    "available",
    "canonical_name",
    "from_files",
    "ingest_files",
    "load",
    "load_npz",
    "minmax_scale",
    "paper_split",
    "save_npz",
    "synthetic",
]
