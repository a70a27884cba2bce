"""Training-node influence on bias (BIND): estimation (the influence function; damped steps with Γ exact for
multi-layer and attention models), node sets, solvers, refinement; edge attribution (:mod:`.edges`); the
distributed plumbing of the linear estimate (:mod:`.distributed`)."""

from bind_core.influence.arguments import METHODS, SOLVERS, InfluenceArguments, Method, Solver
from bind_core.influence.curvature import DAMPING_RULE
from bind_core.influence.edges import EdgeInfluenceResult, estimate_edges, undirected_edges
from bind_core.influence.estimate import estimate, plan
from bind_core.influence.refinement import Refinement, refine, refine_deletions
from bind_core.influence.result import SIGN_CONVENTION, InfluenceResult
from bind_core.influence.step import Stepper
from bind_core.influence.step_nodes import StepEstimate, step_estimate
from bind_core.influence.utility import utility_influence

__all__ = [
    "DAMPING_RULE",
    "METHODS",
    "SIGN_CONVENTION",
    "SOLVERS",
    "EdgeInfluenceResult",
    "InfluenceArguments",
    "InfluenceResult",
    "Method",
    "Refinement",
    "Solver",
    "StepEstimate",
    "Stepper",
    "estimate",
    "estimate_edges",
    "plan",
    "refine",
    "refine_deletions",
    "step_estimate",
    "undirected_edges",
    "utility_influence",
]
