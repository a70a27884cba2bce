"""Dense Hessians of a flat-parameter objective, formed by forward-over-reverse Hessian-vector products.

Used by the training polish's Newton finish (:mod:`bind_core.training.newton`) and by the influence solvers; it
imports nothing from ``bind_core`` but :mod:`bind_core.threads`, so either side may import it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import torch
from torch import Tensor
from torch.func import grad, jvp

from bind_core.threads import check_threads, each_in_order, threads_on

ROW_BATCH = {"cpu": 1, "cuda": 32}
"""Rows of a Hessian formed per backward pass (:func:`dense_hessian_by_rows`) by device type. On this project's CPU a
batch costs more than the rows one by one once the graph is large (a two-layer GCN on 5,000 nodes: 0.46 CPU s one by
one, 0.80 in blocks of 8, 2.15 in blocks of 128; docs/SCALE.md), so the CPU forms them one by one; on a GPU a row is a
few hundred small kernels, which a block shares (not measured: no device was lent when this was written). Other
devices take the CPU's."""


def row_batch(device: torch.device) -> int:
    """The default rows per backward pass on ``device`` (:data:`ROW_BATCH`).

    Args:
        device: where the Hessian is formed.

    Returns:
        Rows per pass (1: one by one).
    """
    return ROW_BATCH.get(device.type, ROW_BATCH["cpu"])


class HessianForm(Protocol):
    """Forms the dense Hessian of ``objective`` at ``theta``; ``progress(fraction)`` may raise to abort."""

    def __call__(
        self,
        objective: Callable[[Tensor], Tensor],
        theta: Tensor,
        *,
        progress: Callable[[float], None] | None = None,
    ) -> Tensor: ...


def dense_hessian(
    objective: Callable[[Tensor], Tensor],
    theta: Tensor,
    chunk: int = 256,
    *,
    progress: Callable[[float], None] | None = None,
) -> Tensor:
    """The symmetrised ``[p, p]`` Hessian of ``objective`` at ``theta`` (flat, ``[p]``).

    Columns by forward-over-reverse Hessian-vector products, ``chunk`` of them at a time under ``vmap`` (which
    bounds memory to ``chunk`` copies of the activations), one by one where ``vmap`` does not apply.
    ``progress(fraction of the columns)`` is called after each chunk and may raise to abort.
    """
    p = theta.numel()
    g = grad(objective)

    def hvp(v: Tensor) -> Tensor:
        tangent: Tensor = jvp(g, (theta,), (v,))[1]
        return tangent

    eye = torch.eye(p, dtype=theta.dtype, device=theta.device)
    cols = []
    for start in range(0, p, chunk):
        block = eye[start : start + chunk]
        try:
            cols.append(torch.vmap(hvp)(block))
        except (RuntimeError, NotImplementedError):
            cols.append(torch.stack([hvp(e) for e in block]))
        if progress is not None:
            progress(min(p, start + chunk) / p)
    h = torch.cat(cols)
    return 0.5 * (h + h.T)


def dense_hessian_by_rows(
    objective: Callable[[Tensor], Tensor],
    theta: Tensor,
    *,
    progress: Callable[[float], None] | None = None,
    batch: int | None = None,
    threads: int = 1,
) -> Tensor:
    """The symmetrised Hessian row by row, by reverse-over-reverse products on one retained gradient graph.

    For message-passing models on a large graph this is the cheaper way: the gradient's graph is built once and
    each row costs one more backward pass (about 0.18 s against 0.5 s for a forward-over-reverse product through
    PyG's scatter on a 20,000-node graph), with the memory of one forward pass, however many rows.

    Args:
        objective: the objective of the flat parameters.
        theta: ``[p]``, where the Hessian is formed.
        progress: ``progress(fraction of the rows)``, called after each block of rows; it may raise to abort.
        batch: rows per backward pass (``None``: :func:`row_batch` of ``theta``'s device). Above 1, a block of rows
            is one batched backward pass (``vmap`` over the gradient's graph, ``is_grads_batched``), which shares a
            GPU's kernel launches among the rows; a block whose backward pass ``vmap`` cannot batch is formed row by
            row. The rows are the same to rounding.
        threads: CPU threads forming blocks of rows at once, each a backward pass on the shared retained graph
            (:mod:`bind_core.threads`; the Hessian is the same, bit for bit). On a GPU one thread forms them (the
            blocks are its batching).

    Returns:
        The ``[p, p]`` Hessian, symmetrised.
    """
    check_threads(threads)
    probe = theta.detach().clone().requires_grad_(True)
    (g,) = torch.autograd.grad(objective(probe), probe, create_graph=True)
    p = probe.numel()
    eye = torch.eye(p, dtype=theta.dtype, device=theta.device)
    step = max(1, row_batch(theta.device) if batch is None else batch)
    starts = range(0, p, step)
    rows: list[Tensor] = []

    def put(_: int, block: list[Tensor]) -> None:
        rows.extend(block)
        if progress is not None:
            progress(len(rows) / p)

    # Every pass retains the graph when threads share it (the last one may free it only when it is the last to run).
    threads = threads_on(theta.device, threads)
    alone = threads == 1
    each_in_order(
        starts,
        lambda _, start: _rows(g, probe, eye[start : start + step], retain=not alone or start + step < p),
        put,
        [None] * threads,
        processes=False,  # threads: forking for a Hessian's few seconds cost more than it saved (docs/SCALE.md)
    )
    h = torch.stack(rows).detach()
    return 0.5 * (h + h.T)


def _rows(g: Tensor, probe: Tensor, block: Tensor, *, retain: bool) -> list[Tensor]:
    """The Hessian's rows ``block`` selects (``[k, p]`` unit vectors): one batched backward pass for ``k > 1``, else
    (or where ``vmap`` cannot batch the backward pass) one pass a row."""
    if block.shape[0] > 1:
        try:
            (found,) = torch.autograd.grad(
                g, probe, grad_outputs=block, retain_graph=True, is_grads_batched=True, allow_unused=True
            )
            return list(torch.zeros_like(block) if found is None else found)
        except (RuntimeError, NotImplementedError):
            pass
    out = []
    for i, unit in enumerate(block):
        keep = retain or i < block.shape[0] - 1
        (row,) = torch.autograd.grad(g, probe, grad_outputs=unit, retain_graph=keep, allow_unused=True)
        out.append(torch.zeros_like(probe) if row is None else row)
    return out
