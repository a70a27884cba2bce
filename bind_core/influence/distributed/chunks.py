"""The per-node half of a linear influence estimate, in chunks that can run anywhere (see
:mod:`bind_core.influence.distributed.plan`), and their combination into the estimate."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch

from bind_core.errors import ConfigError
from bind_core.influence.distributed.plan import InfluenceChunk, InfluencePlan, stack_chunks
from bind_core.influence.functional import FunctionalModel
from bind_core.influence.result import InfluenceResult
from bind_core.influence.terms import deletion_terms
from bind_core.training.fit import TrainedModel

ChunkRunner = Callable[[InfluencePlan, TrainedModel], list[InfluenceChunk]]
"""Computes the per-node terms of a plan for the model it was made for, e.g. as chunks on several workers (see
``plan.chunk_bounds`` and :func:`estimate_chunk`)."""

ChunkContext = FunctionalModel
"""What a worker prepares once per plan and reuses for each of its chunks (:func:`chunk_context`)."""


def chunk_context(plan: InfluencePlan, model: TrainedModel, graph: Any) -> ChunkContext:
    """The model's functional form on ``graph`` over the plan's groups, shared by the chunks of one plan."""
    return FunctionalModel.from_trained(model, graph, plan.groups)


def estimate_chunk(
    plan: InfluencePlan,
    model: TrainedModel,
    graph: Any,
    start: int,
    stop: int,
    *,
    fm: FunctionalModel | None = None,
    progress: Callable[[float], None] | None = None,
) -> InfluenceChunk:
    """The per-node terms of training positions ``start..stop-1`` (see :mod:`bind_core.influence.distributed.plan`).
    ``progress(fraction of the positions)`` is called after each batch of affected pairs; it may raise."""
    t0 = time.perf_counter()
    fm = fm or FunctionalModel.from_trained(model, graph, plan.groups)
    theta = fm.theta
    ref = plan.theta.to(theta.device, theta.dtype)
    if ref.shape != theta.shape or not torch.equal(ref, theta):
        raise ConfigError("the model's weights are not the ones the influence plan was made for")
    m = int(graph.train_idx.numel())
    if plan.num_train != m or not 0 <= start <= stop <= m:
        raise ConfigError(f"chunk {start}..{stop} does not fit a plan of {plan.num_train} training nodes ({m} here)")
    s = plan.s.to(fm.device)
    a = plan.a.to(fm.device)
    k = stop - start
    non_iid_part = torch.zeros(k, 2, dtype=torch.float64, device=fm.device)
    direct_part = torch.zeros(k, 2, dtype=torch.float64, device=fm.device)
    if plan.non_iid or plan.direct:
        deletion_terms(
            fm,
            theta,
            s,
            a,
            plan.gamma.to(fm.device),
            non_iid_part,
            direct_part,
            non_iid=plan.non_iid,
            direct=plan.direct,
            exact=plan.direct_exact,
            start=start,
            stop=stop,
            progress=progress,
        )
    return InfluenceChunk(
        start,
        stop,
        iid=a[start:stop] / m,
        non_iid=non_iid_part / m,
        direct=direct_part,
        seconds=time.perf_counter() - t0,
    )


def combine(plan: InfluencePlan, graph: Any, chunks: list[InfluenceChunk]) -> InfluenceResult:
    """The estimate from its plan and chunks covering every training position exactly once."""
    parts = stack_chunks(chunks, plan.num_train)
    total = parts["iid"] + parts["non_iid"] + parts["direct"]
    lam, gam = plan.lam, plan.gamma
    timings = dict(plan.timings)
    timings["per_node_terms"] = float(sum(c.seconds for c in chunks))
    timings["chunks"] = float(len(chunks))
    return InfluenceResult.of_columns(graph.train_idx, total, parts, lam, gam, plan.solve, plan.grad_norm, timings)
