"""How deleting each training node would change the model's utility: its loss on the validation nodes.

The same influence function as the bias estimate (:mod:`bind_core.influence.estimate`), with Γ replaced by
the mean cross-entropy on the validation nodes, ``L_val``:

    ΔL_val(v) ≈ (1/m)·∇c_vᵀ·H⁻¹·∇L_val(θ̂) + [L_val(θ̂; G−v) − L_val(θ̂; G)],

``c_v`` being ``v``'s loss plus the change of the losses of the training nodes whose computation graph holds
``v`` (the non-i.i.d. term), the bracket the direct change of validation nodes near ``v``. **Positive**:
deleting ``v`` would raise the validation loss (``v`` is useful to the model); negative: the model would fit
the validation nodes better without it. The validation nodes, not the test nodes, so that a selection using it
does not peek at the nodes the audit reports on.

:func:`bind_core.debiasing.debias.debias` takes it as ``utility=`` and then deletes only harmful nodes whose deletion is
not estimated to raise the validation loss (a utility-aware BIND; docs/METHOD.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from bind_core.data.graph import positions
from bind_core.influence.deletion import pair_batches
from bind_core.influence.estimate import solve_hessian
from bind_core.influence.functional import FunctionalModel
from bind_core.influence.terms import batch_loss_derivatives, train_loss_derivatives
from bind_core.models.gnn import node_losses
from bind_core.training.fit import TrainedModel


def utility_influence(
    model: TrainedModel,
    graph: Any,
    *,
    non_iid: bool = True,
    direct: bool = True,
    solver: str = "auto",
    rtol: float = 1e-6,
    progress: Callable[[float], None] | None = None,
) -> Tensor:
    """Estimated change of the validation loss if each training node were deleted, ``[m]`` aligned with
    ``train_idx`` (see the module docstring; ``solver`` and ``rtol`` as in :func:`~bind_core.influence.estimate`;
    a graph's validation split is never empty). ``progress(fraction)`` is called as the solve and the per-node
    loop advance; it may raise to abort.
    """
    val = graph.val_idx
    fm = FunctionalModel.from_trained(model, graph)
    theta, device = fm.theta, fm.device
    y = graph.y.to(device)
    val_d, train = val.to(device), graph.train_idx.to(device)

    def val_loss(flat: Tensor) -> Tensor:
        return node_losses(fm.logits(flat, val_d), y[val_d]).mean()

    solve_progress = None if progress is None else (lambda f: progress(0.5 * f))
    s, _ = solve_hessian(
        fm, torch.func.grad(val_loss)(theta).unsqueeze(1), solver=solver, rtol=rtol, progress=solve_progress
    )
    a = train_loss_derivatives(fm, theta, s)[:, 0]  # ∇ℓ_jᵀ·s
    m, n = int(train.numel()), graph.num_nodes
    iid_plus = a.clone()
    direct_part = torch.zeros(m, dtype=torch.float64, device=device)
    if non_iid or direct:
        train_pos, val_pos = positions(graph.train_idx, n), positions(val, n)
        targets = torch.zeros(n, dtype=torch.bool)
        targets[graph.train_idx] = non_iid
        targets[val] = direct
        with torch.no_grad():
            base = node_losses(fm.logits(theta, val_d), y[val_d])
        for batch in pair_batches(fm, targets=targets):
            nodes = batch.node
            is_train = train_pos[nodes] >= 0
            if bool(is_train.any()):
                b = batch_loss_derivatives(batch, theta, s, y[nodes.to(device)])[:, 0]
                mask = is_train.to(device)
                contrib = a[train_pos[nodes[is_train]].to(device)] - b[mask]
                iid_plus.index_add_(0, batch.v_pos[is_train].to(device), contrib)
            is_val = val_pos[nodes] >= 0
            if bool(is_val.any()):
                with torch.no_grad():
                    logits = batch.logits(theta)[is_val.to(device)]
                after = node_losses(logits, y[nodes[is_val].to(device)])
                change = (after - base[val_pos[nodes[is_val]].to(device)]) / val.numel()
                direct_part.index_add_(0, batch.v_pos[is_val].to(device), change.double())
            if progress is not None and batch.v_pos.numel():
                progress(0.5 + 0.5 * min(1.0, (int(batch.v_pos.max()) + 1) / m))
    return (iid_plus / m + direct_part).detach().cpu()
