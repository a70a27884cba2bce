"""Training-node influence on bias (BIND): estimation, node sets, solvers."""

from bind_core.influence.estimate import SIGN_CONVENTION, InfluenceResult, estimate
from bind_core.influence.solvers import SOLVERS

__all__ = ["SIGN_CONVENTION", "SOLVERS", "InfluenceResult", "estimate"]
