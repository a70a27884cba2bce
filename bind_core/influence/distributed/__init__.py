"""The distributed plumbing of the linear influence estimate: a plan made once (the shared solve), chunks of the
per-node terms computed anywhere, and their combination. What the service's workers call; a library user
calls :func:`bind_core.estimate_influence` (with ``chunk_runner`` to spread the chunks)."""

from bind_core.influence.distributed.chunks import ChunkContext, ChunkRunner, chunk_context, combine, estimate_chunk
from bind_core.influence.distributed.plan import (
    CHUNK_FORMAT,
    PLAN_FORMAT,
    InfluenceChunk,
    InfluencePlan,
    chunk_bounds,
    stack_chunks,
)

__all__ = [
    "CHUNK_FORMAT",
    "PLAN_FORMAT",
    "ChunkContext",
    "ChunkRunner",
    "InfluenceChunk",
    "InfluencePlan",
    "chunk_bounds",
    "chunk_context",
    "combine",
    "estimate_chunk",
    "stack_chunks",
]
