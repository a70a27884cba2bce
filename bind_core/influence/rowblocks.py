"""A multi-layer model's passes over every node of a large graph, with its first layer formed in blocks of rows.

The linear estimate of a deep model reads the full graph's layer outputs three ways: Γ and the test probabilities at
``θ̂`` (no gradient), ``∇Γ`` (reverse mode) and the incremental path's rows with their tangents along the solve's
columns (forward mode, :class:`bind_core.influence.incremental.FullGraphRows`). Run whole, each holds several
``[n, hidden]`` arrays at once: the pre-activation, the activation and its temporaries, their tangents or their
gradients. On a 10⁷-node graph with a 128-wide hidden layer one such array is 10 GB in float64
(``bench/bench_memory.py`` measures each pass per node; docs/SCALE.md, "A 10⁷-node audit's memory").

A GCN, GIN or SAGE with aggregated features computes its first layer row by row (``act(z_i·Wᵀ + b)``, or an MLP of
``z_i``), so it is formed here in blocks of :func:`row_blocks` rows, each block's temporaries freed before the next:
only the activated rows themselves (and their tangent, or their gradient) span the graph. The layers after the first
read every row and run whole, as before. A graph whose first layer fits one block (:data:`ROW_BLOCK_ELEMENTS`) takes
one block, the same arithmetic as the whole pass.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from bind_core.influence.firstlayer import SplitModel
from bind_core.influence.functional import FunctionalModel, forward_derivative, gammas_from_proba
from bind_core.models.gnn import probabilities

ROW_BLOCK_ELEMENTS = 2**24
"""Elements of one ``[rows, width]`` array of a block (128 MiB in float64): a block holds a few such arrays (the
aggregated rows, the pre-activation, the activation's temporaries, their tangents) besides the outputs it fills."""


TANGENT_ROWS_ELEMENTS = 2**28
"""Above this many elements (2 GiB in float64) a full-graph tangent array of a two-layer model's first layer is not
kept: each batch forms the rows it reads (:func:`tangents_by_batch`). That saves two such arrays, ~2 KiB a node at
width 128 (20 GB at 10⁷ nodes), and costs time: the batches' rows overlap, so the first layer is formed more often
(a two-layer SAGE h128 on 2·10⁵ nodes: the deletion terms 37 → 56 s on the CPU, docs/SCALE.md), which is why it
is kept for graphs where the memory is what binds."""


def row_blocks(rows: int, width: int, budget: int | None = None) -> list[slice]:
    """``rows`` in blocks of at most ``budget // width`` rows (at least one row a block; ``budget`` by default
    :data:`ROW_BLOCK_ELEMENTS`, read at each call); one block when they fit."""
    step = max(1, (ROW_BLOCK_ELEMENTS if budget is None else budget) // max(width, 1))
    return [slice(start, min(start + step, rows)) for start in range(0, rows, step)]


def blocked(fm: FunctionalModel) -> bool:
    """Whether ``fm``'s full-graph passes take the first layer in blocks: a GCN, GIN or SAGE of two or more layers on
    aggregated features and a CSR adjacency (a GAT or a one-layer model runs as before)."""
    inputs = fm.inputs
    return (
        fm.module.config.arch in ("gcn", "gin", "sage")
        and len(fm.module.convs) >= 2
        and inputs.x_prop is not None
        and inputs.adjacency is not None
    )


def _width(fm: FunctionalModel) -> int:
    """The widest row a block's arrays hold: the aggregated features or the first layer's output."""
    assert fm.inputs.x_prop is not None
    return max(int(fm.inputs.x_prop.shape[1]), fm.module.config.hidden * fm.module.config.heads)


def _by_blocks(fm: FunctionalModel, budget: int | None, rows_of: Callable[[Tensor], list[Tensor]]) -> list[Tensor]:
    """``rows_of(z_block)`` (arrays of the block's rows) for every block of the aggregated features ``z``, written into
    ``[n, ·]`` arrays; with one block, ``rows_of(z)`` itself."""
    z = fm.inputs.x_prop
    assert z is not None
    blocks = row_blocks(int(z.shape[0]), _width(fm), budget)
    if len(blocks) == 1:
        return rows_of(z)
    out: list[Tensor] = []
    for block in blocks:
        parts = rows_of(z[block])
        if not out:
            out = [part.new_empty(int(z.shape[0]), int(part.shape[1])) for part in parts]
        for whole, part in zip(out, parts, strict=True):
            whole[block] = part
    return out


def activated_first(fm: FunctionalModel, flat: Tensor, *, budget: int | None = None) -> Tensor:
    """``act(H¹)`` on every node at ``flat``, no gradient: ``[n, hidden]``, formed block by block."""
    split = SplitModel(fm)
    with torch.no_grad():
        return _by_blocks(fm, budget, lambda rows: [split.act(split.pre(flat, rows), flat)])[0]


def activated_first_jvp(fm: FunctionalModel, direction: Tensor, *, budget: int | None = None) -> tuple[Tensor, Tensor]:
    """``act(H¹)`` on every node at ``θ̂`` and its derivative along ``direction`` (``[p]``), by forward mode block by
    block: ``([n, hidden], [n, hidden])``."""
    split = SplitModel(fm)
    values, tangents = _by_blocks(fm, budget, lambda rows: list(_first_jvp(split, direction, rows)))
    return values, tangents


def tangents_by_batch(fm: FunctionalModel) -> bool:
    """Whether a two-layer model's incremental path forms each batch's tangent rows itself
    (:func:`activated_first_rows_jvp`) rather than keeping one full-graph ``[n, hidden]`` tangent a column: where such
    an array passes :data:`TANGENT_ROWS_ELEMENTS` (read at each call)."""
    z = fm.inputs.x_prop
    return blocked(fm) and z is not None and int(z.shape[0]) * _width(fm) > TANGENT_ROWS_ELEMENTS


def activated_first_rows_jvp(fm: FunctionalModel, direction: Tensor, rows: Tensor) -> tuple[Tensor, Tensor]:
    """``act(H¹)`` at ``θ̂`` on the nodes ``rows`` only, and its derivative along ``direction`` (``[p]``): the first
    layer is row by row, so these are the rows of :func:`activated_first_jvp`'s arrays (to rounding)."""
    z = fm.inputs.x_prop
    assert z is not None
    return _first_jvp(SplitModel(fm), direction, z[rows])


def _first_jvp(split: SplitModel, direction: Tensor, z: Tensor) -> tuple[Tensor, Tensor]:
    """``act(H¹)`` at ``θ̂`` on the aggregated rows ``z`` and its derivative along ``direction``, detached."""
    value, tangent = forward_derivative(lambda f: split.act(split.pre(f, z), f), (split.fm.theta,), (direction,))
    return value.detach(), tangent.detach()


def test_probabilities(fm: FunctionalModel, flat: Tensor, *, budget: int | None = None) -> Tensor:
    """The test nodes' probabilities at ``flat``, no gradient (:meth:`FunctionalModel.test_proba`'s values), the first
    layer formed block by block where :func:`blocked`."""
    if not blocked(fm):
        with torch.no_grad():
            return fm.test_proba(flat).detach()
    test = fm.graph.test_idx.to(fm.device)
    h = activated_first(fm, flat, budget=budget)
    with torch.no_grad():
        return probabilities(SplitModel(fm).logits(flat, h, fm.inputs, test))


def gamma_gradients(fm: FunctionalModel, theta: Tensor, *, budget: int | None = None) -> tuple[Tensor, Tensor]:
    """``[Γ_SP, Γ_EO]`` at ``theta`` (no gradient) and their gradients ``[2, p]`` by reverse mode, from one forward
    pass; where :func:`blocked`, the first layer's part block by block: the layers after it are differentiated from the
    activated rows ``h`` (held as a leaf), and each block's first layer is formed again and differentiated against its
    rows of ``∂Γ/∂h``."""
    if not blocked(fm):
        probe = theta.clone().requires_grad_(True)
        values = fm.gammas(probe)
        grads = [torch.autograd.grad(values[i], probe, retain_graph=i == 0)[0] for i in range(2)]
        return values.detach(), torch.stack(grads).detach()
    z = fm.inputs.x_prop
    assert z is not None
    split = SplitModel(fm)
    test = fm.graph.test_idx.to(fm.device)
    h = activated_first(fm, theta, budget=budget).requires_grad_(True)
    probe = theta.detach().clone().requires_grad_(True)
    logits = split.logits(probe, h, fm.inputs, test)
    values = gammas_from_proba(probabilities(logits), fm.graph, fm.groups)
    out = []
    for i in range(2):
        grad, grad_h = torch.autograd.grad(values[i], (probe, h), retain_graph=i == 0, allow_unused=True)
        total = torch.zeros_like(theta) if grad is None else grad.detach().clone()
        if grad_h is not None:
            for block in row_blocks(int(z.shape[0]), _width(fm), budget):
                first = theta.detach().clone().requires_grad_(True)
                out_rows = split.act(split.pre(first, z[block]), first)
                (part,) = torch.autograd.grad(out_rows, first, grad_h[block])
                total += part
        del grad_h  # before the second component's: one [n, hidden] gradient alive at a time
        out.append(total)
    return values.detach(), torch.stack(out)
