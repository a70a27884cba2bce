"""bind_core: BIND (Dong et al., AAAI 2023) as a pure library.

Graphs, datasets, GNN training, fairness metrics, training-node influence on bias, debiasing by deletion and
validation against retraining. Explicit arguments only: no environment reads, no web, database or queue code.
"""

from bind_core.data.graph import Graph
from bind_core.errors import BindError, ConfigError, DatasetNotFoundError, GraphValidationError

__all__ = ["BindError", "ConfigError", "DatasetNotFoundError", "Graph", "GraphValidationError"]
