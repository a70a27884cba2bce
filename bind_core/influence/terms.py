"""The per-node terms of the influence estimate: loss derivatives along the solve's direction, and, per deletion, the
non-i.i.d. change of the affected training losses and the direct change of Γ on ``G − v``
(:func:`bind_core.influence.estimate.estimate`; the edges' estimates share :func:`exact_direct`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from bind_core.data.graph import positions
from bind_core.influence.deletion import Batch, pair_batches
from bind_core.influence.functional import FunctionalModel, dloss_dlogits, forward_derivative, gammas_from_proba
from bind_core.influence.rowblocks import test_probabilities
from bind_core.models.gnn import probabilities


def directional_loss_derivatives(logits_fn: Any, theta: Tensor, s: Tensor, y: Tensor) -> Tensor:
    """``∇ℓ_kᵀ·s[:, c]`` for every output row ``k`` and column ``c`` of ``s``, by forward-mode AD: ``[k, 2]``."""
    cols = []
    for c in range(s.shape[1]):
        z, dz = forward_derivative(logits_fn, (theta,), (s[:, c],))
        cols.append((dloss_dlogits(z, y) * dz).sum(dim=1))
    return torch.stack(cols, dim=1).detach()


def train_loss_derivatives(fm: FunctionalModel, theta: Tensor, s: Tensor) -> Tensor:
    """``∇ℓ_jᵀ·s[:, c]`` for every training node ``j`` (order of ``train_idx``) and column ``c`` of ``s``: ``[m, k]``,
    on the training nodes' computation graph where the objective lives (:meth:`FunctionalModel.objective_rows`; the
    same logits as on the whole graph), so that a multi-layer model's forward-mode pass does not run its first layer,
    with its tangents, over every node of a large graph."""
    rows = fm.objective_rows()
    return directional_loss_derivatives(lambda f: fm.logits(f, rows.train, rows.inputs), theta, s, rows.y)


def batch_loss_derivatives(batch: Batch, theta: Tensor, s: Tensor, y: Tensor) -> Tensor:
    """``∇ℓ_jᵀ·s[:, c]`` on ``G − v`` for every pair ``(v, j)`` of a batch and column ``c``: ``[P, 2]``."""
    cols = []
    for c in range(s.shape[1]):
        z, dz = batch.jvp(theta, s, c)
        cols.append((dloss_dlogits(z, y) * dz).sum(dim=1))
    return torch.stack(cols, dim=1).detach()


def deletion_terms(
    fm: FunctionalModel,
    theta: Tensor,
    s: Tensor,
    a: Tensor,
    gam: Tensor,
    non_iid_part: Tensor,
    direct_part: Tensor,
    *,
    non_iid: bool,
    direct: bool,
    exact: bool,
    start: int,
    stop: int,
    progress: Callable[[float], None] | None = None,
) -> None:
    """Adds the non-i.i.d. and direct terms of training positions ``start..stop-1`` (rows ``0..stop-start-1``)."""
    g = fm.graph
    n = g.num_nodes
    train_pos, test_pos = positions(g.train_idx, n), positions(g.test_idx, n)
    y = g.y.to(fm.device)
    base_proba = test_probabilities(fm, theta)
    if direct and not exact:
        probe = base_proba.clone().requires_grad_(True)
        d_sp = torch.autograd.grad(gammas_from_proba(probe, g, fm.groups)[0], probe)[0]
        d_eo = torch.autograd.grad(gammas_from_proba(probe, g, fm.groups)[1], probe)[0]
    done = 0.0

    def check() -> None:
        if progress is not None:
            progress(done)

    for batch in pair_batches(fm, start=start, stop=stop, check=check):
        is_train = train_pos[batch.node] >= 0
        if non_iid and bool(is_train.any()):
            # ℓ_j(G) − ℓ_j(G−v) for training j affected by v, differentiated along s.
            b = batch_loss_derivatives(batch, theta, s, y[batch.node.to(fm.device)])
            contrib = a[train_pos[batch.node[is_train]]] - b[is_train.to(fm.device)]
            non_iid_part.index_add_(0, (batch.v_pos[is_train] - start).to(fm.device), contrib)
        is_test = test_pos[batch.node] >= 0
        if direct and bool(is_test.any()):
            with torch.no_grad():
                proba = probabilities(batch.logits(theta))[is_test.to(fm.device)]
            t_pos = test_pos[batch.node[is_test]]
            if exact:
                exact_direct(fm, base_proba, gam, batch.v_pos[is_test] - start, t_pos, proba, direct_part)
            else:
                change = proba - base_proba[t_pos]
                lin = torch.stack([(d_sp[t_pos] * change).sum(1), (d_eo[t_pos] * change).sum(1)], dim=1)
                direct_part.index_add_(0, (batch.v_pos[is_test] - start).to(fm.device), lin)
        if progress is not None and batch.v_pos.numel():
            done = min(1.0, (int(batch.v_pos.max()) + 1 - start) / max(stop - start, 1))
            progress(done)


def exact_direct(
    fm: FunctionalModel,
    base: Tensor,
    gam: Tensor,
    pos: Tensor,
    t_pos: Tensor,
    proba: Tensor,
    out: Tensor,
    chunk: int = 128,
) -> None:
    """Adds the exact ``Γ(θ̂; G − d) − Γ(θ̂; G)`` of each deletion ``d`` among ``pos`` (its row in ``out``) to
    ``out``: ``base`` the test probabilities on ``G`` (``gam`` their ``[Γ_SP, Γ_EO]``), patched per deletion at the
    test positions ``t_pos`` with ``proba``, ``chunk`` deletions at a time."""
    users, inverse = torch.unique(pos, return_inverse=True)
    inverse, t_pos = inverse.to(base.device), t_pos.to(base.device)
    evaluate: Callable[[Tensor], Tensor]
    if base.shape[1] == 2:

        def evaluate(batch: Tensor) -> Tensor:
            return gammas_from_proba(batch, fm.graph, fm.groups)

    else:

        def evaluate(batch: Tensor) -> Tensor:
            return torch.stack([gammas_from_proba(p, fm.graph, fm.groups) for p in batch])

    for start in range(0, users.numel(), chunk):
        sel = (inverse >= start) & (inverse < start + chunk)
        k = min(chunk, users.numel() - start)
        batch = base.unsqueeze(0).repeat(k, 1, 1)
        batch[inverse[sel] - start, t_pos[sel]] = proba[sel]
        with torch.no_grad():
            out[users[start : start + k].to(out.device)] += evaluate(batch) - gam
