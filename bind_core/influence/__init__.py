"""Training-node influence on bias (BIND): estimation, node sets, solvers."""

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
from bind_core.influence.utility import utility_influence

__all__ = [
    "SIGN_CONVENTION",
    "SOLVERS",
    "ChunkRunner",
    "InfluenceChunk",
    "InfluencePlan",
    "InfluenceResult",
    "Refinement",
    "chunk_bounds",
    "combine",
    "estimate",
    "estimate_chunk",
    "plan",
    "refine",
    "refine_deletions",
    "utility_influence",
]
