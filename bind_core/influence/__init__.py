"""Training-node influence on bias (BIND): estimation (the influence function; damped steps with Γ exact for
multi-layer and attention models), node sets, solvers, refinement; edge attribution (:mod:`.edges`)."""

from bind_core.influence.edges import EdgeInfluenceResult, estimate_edges, undirected_edges
from bind_core.influence.estimate import (
    SIGN_CONVENTION,
    ChunkRunner,
    InfluenceResult,
    combine,
    estimate,
    estimate_chunk,
    plan,
)
from bind_core.influence.plan import InfluenceChunk, InfluencePlan, chunk_bounds
from bind_core.influence.refinement import Refinement, refine, refine_deletions
from bind_core.influence.solvers import SOLVERS
from bind_core.influence.step import DAMPING_RULE, StepEstimate, Stepper, step_estimate
from bind_core.influence.utility import utility_influence

__all__ = [
    "DAMPING_RULE",
    "SIGN_CONVENTION",
    "SOLVERS",
    "ChunkRunner",
    "EdgeInfluenceResult",
    "InfluenceChunk",
    "InfluencePlan",
    "InfluenceResult",
    "Refinement",
    "StepEstimate",
    "Stepper",
    "chunk_bounds",
    "combine",
    "estimate",
    "estimate_chunk",
    "estimate_edges",
    "plan",
    "refine",
    "refine_deletions",
    "step_estimate",
    "undirected_edges",
    "utility_influence",
]
