"""The training rows' Jacobian of a two-layer GCN or SAGE at its weights, formed by hand.

The damped curvature's dense matrix is ``(1/m)·J̃ᵀJ̃ + λI`` (:mod:`bind_core.influence.gaussnewton`). Forward-mode
products (``jvp`` under ``vmap``) form ``J`` a block of columns at a time, each block a pass of the model with the
tangents batched beside it: 1.5 of the 20,000-node two-layer GCN's 1.7 s curvature. For a two-layer GCN or SAGE
(:mod:`bind_core.influence.twolayer` names the weights) every entry of ``J`` is a product of arrays at hand. With
``M = W_h`` (the head; the identity without one), ``c_a = M·W_a``, ``c_r = M·W_r`` and ``D = σ'(z·W₁ᵀ + b₁)``, the
logit ``c`` of training row ``i`` moves with

    W_h[c, k]: s_ik (the second layer's output)      b_h[c]: 1
    W_a[k, l]: M_ck·(A·H)_il                         b₂[k]: M_ck          W_r[k, l]: M_ck·H_il
    W₁[k, l]: c_a[c, k]·Σ_j A_ij·D_jk·z_jl + c_r[c, k]·D_ik·z_il
    b₁[k]:    c_a[c, k]·Σ_j A_ij·D_jk      + c_r[c, k]·D_ik

The first layer's sums are one sparse product of the training rows' block with ``D_jk·z_jl`` (``[rows, hidden ×
features]``, a few hidden units at a time within :data:`CHUNK_ELEMENTS`). Equal to the ``jvp`` Jacobian to rounding
(``tests/core/influence/test_jacobian_by_hand.py``).
"""

from __future__ import annotations

import torch
from torch import Tensor

from bind_core.data.sparse import Adjacency
from bind_core.influence.functional import FunctionalModel
from bind_core.influence.twolayer import HEAD, layout

CHUNK_ELEMENTS = 2**24
"""The first layer's products ``D_jk·z_jl`` are formed for this many elements at most at once (128 MiB in float64):
a block of hidden units at a time."""


def training_jacobian(fm: FunctionalModel, *, chunk_elements: int = CHUNK_ELEMENTS) -> Tensor | None:
    """``J``: the training rows' logits' derivatives in the weights at ``θ̂``, on the computation graph where the
    training objective is evaluated (:meth:`FunctionalModel.objective_rows`); ``None`` where the model is not a
    two-layer GCN or SAGE (:func:`~bind_core.influence.twolayer.layout`) or runs without an adjacency.

    Args:
        fm: the model as given, on its graph.
        chunk_elements: the first layer's products are formed this many elements at a time at most.

    Returns:
        ``[p, m, C]``: column ``k`` of ``J`` (the weights in ``fm.names``' order) for each training row's ``C``
        logits, as ``jvp`` along the unit vectors gives it.
    """
    found = layout(fm)
    rows = fm.objective_rows()
    z, adjacency, train = rows.inputs.x_prop, rows.inputs.adjacency, rows.train
    if found is None or z is None or adjacency is None:
        return None
    p = fm.unflatten(fm.theta)
    w = found.weights(p)
    with torch.no_grad():
        h, slope = found.activated(torch.addmm(w.b1, z, w.w1.T))
        block = adjacency.rows(train)
        aggregated = block.times(h)  # [m, hidden]
        s = torch.addmm(w.b2, aggregated, w.wa.T)
        h_own, slope_own, z_own = h[train], slope[train], z[train]
        if w.wr is not None:
            s = s + h_own @ w.wr.T
        m, width = int(train.numel()), int(s.shape[1])
        mix = torch.eye(width, dtype=s.dtype, device=s.device) if w.wh is None else w.wh  # M: [C, out]
        classes = int(mix.shape[0])
        c_a = mix @ w.wa  # [C, hidden]
        c_r = None if w.wr is None else mix @ w.wr
        grads: dict[str, Tensor] = {}
        if w.wh is not None:
            eye = torch.eye(classes, dtype=s.dtype, device=s.device)
            grads[HEAD[0]] = eye[None, :, :, None] * s[:, None, None, :]
            grads[HEAD[1]] = eye.expand(m, classes, classes)
        grads[found.second] = mix[None, :, :, None] * aggregated[:, None, None, :]
        grads[found.second_bias] = mix.expand(m, classes, width)
        if found.root is not None:
            grads[found.root] = mix[None, :, :, None] * h_own[:, None, None, :]
        summed = _first_layer_sums(block, slope, z, chunk_elements)  # [m, hidden, features]: Σ_j A_ij·D_jk·z_jl
        g1 = c_a[None, :, :, None] * summed[:, None]
        gb = c_a[None] * block.times(slope)[:, None]
        if c_r is not None:
            g1 = g1 + c_r[None, :, :, None] * (slope_own[:, :, None] * z_own[:, None, :])[:, None]
            gb = gb + c_r[None] * slope_own[:, None]
        grads[found.first[1]] = gb
        grads |= found.first_grads(p, g1)
        flat = torch.cat([grads[name].reshape(m, classes, -1) for name in fm.names], dim=2)
    return flat.permute(2, 0, 1)


def _first_layer_sums(block: Adjacency, slope: Tensor, z: Tensor, chunk_elements: int) -> Tensor:
    """``Σ_j A_ij·D_jk·z_jl`` for the block's rows ``i``, ``[m, hidden, features]``: ``block.times`` of ``D_jk·z_jl``,
    a block of hidden units ``k`` at a time within ``chunk_elements``."""
    rows, hidden = slope.shape
    features = int(z.shape[1])
    step = max(1, chunk_elements // max(1, rows * features))
    parts = []
    for start in range(0, hidden, step):
        stop = min(hidden, start + step)
        products = slope[:, start:stop, None] * z[:, None, :]  # [rows, k, features]
        parts.append(block.times(products.reshape(rows, -1)).reshape(-1, stop - start, features))
    return torch.cat(parts, dim=1)
