"""The damped curvature's dense matrix from the training rows' Jacobian: ``B″(θ̂) = (1/m)·J̃ᵀJ̃ + λI``.

At the given weights the Bregman objective's Hessian is the Gauss–Newton matrix plus the weight decay
(:meth:`~bind_core.influence.functional.FunctionalModel.bregman`): ``(1/m)·Σ_i J_iᵀ·Λ_i·J_i + λI``, with ``J_i`` the
Jacobian of training node ``i``'s logits and ``Λ_i`` its loss's Hessian in the logits. ``Λ_i = M_iᵀM_i`` with
``M_i = √p_i ⊙ (I − 1·p_iᵀ)`` for a softmax over ``C`` classes (``diag(p) − ppᵀ``) and ``M_i = √(p(1 − p))`` for one
logit, so the matrix is ``(1/m)·J̃ᵀJ̃ + λI`` with ``J̃_i = M_i·J_i`` (:func:`whitened`).

``J`` is formed by hand for a two-layer GCN or SAGE (:mod:`bind_core.influence.jacobian_by_hand`: 1.5 s → 0.05 s of
the 20,000-node two-layer GCN's curvature). For other models it comes from forward-mode products (``jvp``) of the
training rows' logits along the unit vectors, a block of them at a time under ``vmap``: one batched pass for the block
instead of one backward pass per row of the Hessian (:func:`~bind_core.training.hessian.dense_hessian_by_rows`). The
same matrix to ~10⁻¹⁵ relative; 3–4.5 times as fast on a 20,000-node two-layer GCN, SAGE or GIN on this project's CPU
(docs/SCALE.md, "The curvature from the Jacobian"), and a handful of kernels a block on a GPU rather than hundreds of
small ones a row.

It applies where the logits run on tensors that ``vmap`` and ``jvp`` batch: a row-separable model, or one whose
layers are the CSR products (GCN, SAGE and GIN with an adjacency, :mod:`bind_core.data.sparse`); a GAT's PyG layers
and a Jacobian above :data:`JACOBIAN_ELEMENTS` keep the Hessian's rows (:func:`gauss_newton` gives ``None``).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor
from torch.func import jvp, vmap

from bind_core.influence.functional import FunctionalModel
from bind_core.influence.jacobian_by_hand import training_jacobian
from bind_core.influence.solvers import activation_elements, hessian_chunk
from bind_core.threads import intra_op_times

JACOBIAN_ELEMENTS = 2**26
"""The whitened Jacobian ``J̃`` (``[p, m·C]``) is formed whole up to this many elements (512 MiB in float64); above,
the Hessian's rows, which need only ``p²``."""


def batches(fm: FunctionalModel) -> bool:
    """Whether ``fm``'s training logits run on tensors that ``vmap`` and ``jvp`` batch: a row-separable model, or
    layers that are CSR products."""
    return fm.module.row_separable or fm.objective_rows().inputs.adjacency is not None


def gauss_newton(
    fm: FunctionalModel, *, progress: Callable[[float], None] | None = None, threads: int = 1, by_hand: bool = True
) -> Tensor | None:
    """``B″(θ̂) = (1/m)·J̃ᵀJ̃ + λI`` at ``fm``'s weights, symmetrised, ``[p, p]``; ``None`` where it does not apply:
    logits that do not batch (:func:`batches`), or a whitened Jacobian above :data:`JACOBIAN_ELEMENTS`.

    Args:
        fm: the model as given, on its graph.
        progress: ``progress(fraction of the Jacobian's columns)`` after each block; it may raise to abort.
        threads: torch's intra-op threads are multiplied by this while the blocks run
            (:func:`~bind_core.threads.intra_op_times`): each block is one wide pass, not independent pieces.
        by_hand: form ``J`` by hand where the model allows (:mod:`~bind_core.influence.jacobian_by_hand`); ``False``:
            by ``jvp`` always (the same matrix to rounding; for comparisons).
    """
    if not batches(fm):
        return None
    rows, theta = fm.objective_rows(), fm.theta
    p = theta.numel()

    def logits(flat: Tensor) -> Tensor:
        return fm.logits(flat, rows.train, rows.inputs)

    def column(unit: Tensor) -> Tensor:
        out: Tensor = jvp(logits, (theta,), (unit,))[1]
        return out

    with torch.no_grad():
        at_hat = logits(theta)
    m = at_hat.shape[0]
    if at_hat.numel() * p > JACOBIAN_ELEMENTS:
        return None
    with intra_op_times(theta.device, threads):
        formed = training_jacobian(fm) if by_hand else None  # a two-layer GCN or SAGE: no passes of the model
        if formed is not None:
            jt = whitened(formed, at_hat).reshape(p, -1)
            if progress is not None:
                progress(1.0)
        else:
            jt = _whitened_by_jvp(column, at_hat, p, block=hessian_chunk(activation_elements(fm), p), progress=progress)
        matrix = (jt @ jt.T) / m
    matrix.diagonal().add_(fm.weight_decay)
    return 0.5 * (matrix + matrix.T)


def _whitened_by_jvp(
    column: Callable[[Tensor], Tensor],
    at_hat: Tensor,
    p: int,
    *,
    block: int,
    progress: Callable[[float], None] | None,
) -> Tensor:
    """``J̃ᵀ`` (``[p, m·C]``) from ``column`` (``jvp`` of the training logits along a unit vector), ``block`` columns
    of ``J`` at a time under ``vmap``, reporting ``progress`` after each block."""
    jt = torch.empty(p, at_hat.numel(), dtype=at_hat.dtype, device=at_hat.device)  # J̃ᵀ, a block of its rows at a time
    for start in range(0, p, block):
        count = min(block, p - start)
        units = torch.zeros(count, p, dtype=at_hat.dtype, device=at_hat.device)
        units[torch.arange(count), torch.arange(start, start + count)] = 1.0
        jt[start : start + count] = whitened(vmap(column)(units).detach(), at_hat).reshape(count, -1)
        if progress is not None:
            progress((start + count) / p)
    return jt


def whitened(jacobian: Tensor, logits: Tensor) -> Tensor:
    """``M_i·J_i`` for every training row ``i``: ``jacobian`` ``[k, m, C]`` (``k`` columns of ``J``), ``logits``
    ``[m, C]`` at ``θ̂``; ``Σ_i (M_i·J_i)ᵀ(M_i·J_i) = Σ_i J_iᵀ·Λ_i·J_i`` (module docstring)."""
    if logits.shape[1] == 1:
        p = torch.sigmoid(logits)
        return jacobian * torch.sqrt(p * (1 - p))
    p = torch.softmax(logits, dim=1)
    mean = (jacobian * p).sum(dim=2, keepdim=True)  # pᵀ·J_i
    return torch.sqrt(p) * (jacobian - mean)
