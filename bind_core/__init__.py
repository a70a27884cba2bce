"""bind_core: BIND (Dong et al., AAAI 2023) as a pure library.

Graphs, datasets, GNN training, fairness metrics, training-node influence on bias, debiasing by deletion and
validation against retraining. Explicit arguments only: no environment reads, no web, database or queue code.
"""

from bind_core.errors import BindError, ConfigError, DatasetNotFoundError, GraphValidationError
from bind_core.graph import Graph

__all__ = ["BindError", "ConfigError", "DatasetNotFoundError", "Graph", "GraphValidationError"]
