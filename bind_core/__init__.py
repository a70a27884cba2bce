"""bind_core: BIND (Dong et al., AAAI 2023) as a pure library.

Graphs, datasets, GNN training, fairness metrics, training-node influence on bias, debiasing by deletion and
validation against retraining. Explicit arguments only: no environment reads, no web, database or queue code.

The library in six lines (README, "The library")::

    import bind_core as bc

    graph = bc.synthetic(300, seed=1)  # or bc.load_dataset("income", root=...), bc.from_files(...)
    model = bc.train(graph, bc.TrainConfig(epochs=200))
    influence = bc.estimate_influence(model, graph)  # ΔΓ of deleting each training node (bc.SIGN_CONVENTION)
    rows = bc.debias(model, graph, influence, budgets=(0.05,))  # delete the most harmful 5%, retrain, compare
    print(rows[0].before.delta_sp, "->", rows[0].after.delta_sp)  # typed rows: bc.DebiasingRow

or the whole audit at once: ``bc.run_audit(graph, bc.AuditConfig())``. The names below are the public face;
everything else is reachable by its module, and may change between releases.
"""

from bind_core.data.datasets import from_files, synthetic
from bind_core.data.datasets import load as load_dataset
from bind_core.data.graph import Graph
from bind_core.debiasing.debias import debias
from bind_core.debiasing.records import DebiasingRow
from bind_core.errors import (
    AuditCancelled,
    BindError,
    ConfigError,
    DatasetNotFoundError,
    GraphValidationError,
    ModelDoesNotFitError,
    NonFiniteError,
    Option,
)
from bind_core.fairness.records import MetricValues
from bind_core.influence.arguments import InfluenceArguments
from bind_core.influence.estimate import estimate as estimate_influence
from bind_core.influence.result import SIGN_CONVENTION, InfluenceResult
from bind_core.models.gnn import ModelConfig
from bind_core.models.pyg import UnsupportedModelError
from bind_core.pipeline.audit import AuditResult, run_audit
from bind_core.pipeline.config import AuditConfig
from bind_core.pipeline.results import AuditResults
from bind_core.training.document import ModelDocument, read_document
from bind_core.training.fit import TrainConfig, TrainedModel, train

__all__ = [
    "SIGN_CONVENTION",
    "AuditCancelled",
    "AuditConfig",
    "AuditResult",
    "AuditResults",
    "BindError",
    "ConfigError",
    "DatasetNotFoundError",
    "DebiasingRow",
    "Graph",
    "GraphValidationError",
    "InfluenceArguments",
    "InfluenceResult",
    "MetricValues",
    "ModelConfig",
    "ModelDocument",
    "ModelDoesNotFitError",
    "NonFiniteError",
    "Option",
    "TrainConfig",
    "TrainedModel",
    "UnsupportedModelError",
    "debias",
    "estimate_influence",
    "from_files",
    "load_dataset",
    "read_document",
    "run_audit",
    "synthetic",
    "train",
]
