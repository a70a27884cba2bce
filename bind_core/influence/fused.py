"""The proximal objective of a two-layer GCN or SAGE, its gradient formed by hand: one pass forward, one back.

A deletion's settle (:class:`bind_core.influence.step.Stepper`) evaluates the proximal objective

    F(θ) = (1/m)·Σ_{kept} ℓ_j(θ; G − S) + (λ/2)·‖θ‖² + (μ/2)·‖θ − θ̂‖² + r(θ),
    r(θ) = −Σ_i s_iᵀ·f_i(θ; G) − λ·θ̂ᵀθ      (s_i = ĝ_i/m, the Bregman tilt, :meth:`FunctionalModel.tilt`),

and its gradient two to five times, on the training nodes' computation graph. Through autograd each evaluation ran
the second layer twice (on ``G − S`` for the losses, on ``G`` for the tilt: a sparse product forward and its
transpose back, each), the activation forward and then its derivative apart, and copies of every row for the rows
the deletion changed. For a two-layer GCN or SAGE with a linear head the model is, after the activation, linear in
the first layer's output ``H``: the tilt's logits on ``G`` enter only through

    Σ_i s_iᵀ·f_i(θ; G) = ⟨V, H_G⟩ + (Σ_i s_i)ᵀ·(W_h·b₂ + b_h),    V = U·W_h·W_a + U_r·W_h·W_r,

with ``U = A_G[train]ᵀ·s`` and ``U_r`` the slopes on the training rows (SAGE's root term), both made once per model.
So the tilt costs dense products over the rows and no sparse product, its gradient with respect to ``H`` is ``−V``,
and ``H_G`` is ``H`` except at the rows whose aggregated features ``S`` changed. The activation and its derivative
are formed in one pass, and every gradient is a product of arrays already at hand. An evaluation away from ``θ̂`` of
the 20,000-node two-layer GCN's settle took 4.2 ms against 6.4 ms (docs/SCALE.md, "The objective by hand").

Γ's reads (:meth:`FusedObjective.test_logits`, :meth:`FusedObjective.test_logits_at_hat`) use the same linearity
forward only: each row of ``H`` is projected through the later layers first, so the test rows' sparse product runs
over ``out`` columns rather than ``hidden``.

Equal to the autograd evaluation (:func:`bind_core.influence.proximal.proximal_objective`) to rounding, for GCN and
SAGE, every activation, one logit or several, with or without a head, at ``θ̂`` and elsewhere
(``tests/core/influence/test_fused.py``). Other models (GIN's MLP, deeper models, GAT) keep autograd.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from bind_core.influence.firstlayer import FirstLayerCache
from bind_core.influence.functional import FunctionalModel, dloss_dlogits
from bind_core.influence.proximal import Evaluation
from bind_core.influence.twolayer import HEAD, Layout, activated, layout
from bind_core.models.gnn import node_losses
from bind_core.models.propagation import GraphInputs

__all__ = ["FusedObjective", "activated"]


@dataclass(eq=False)
class FusedObjective:
    """What every deletion's objective shares for one model (:meth:`of` makes it): the tilt's ``U`` and ``U_r``, the
    slopes' sum, and the computation graph's aggregated features on ``G``."""

    fm: FunctionalModel
    layout: Layout
    u: Tensor
    """``[rows, out]``: ``A_G[train]ᵀ·s``."""
    u_root: Tensor | None
    """``[rows, out]``: ``s`` on the training rows, 0 elsewhere (SAGE), else ``None``."""
    slope_sum: Tensor
    """``[out]``: ``Σ_i s_i``."""
    z_graph: Tensor
    """The computation graph's aggregated features on ``G``."""
    base_projected: Tensor | None = None
    """``[n, k]``: the full graph's activated first layer at ``θ̂`` times :meth:`projection`'s matrix there, for
    :meth:`test_logits_at_hat` (``None`` without it)."""

    @classmethod
    def of(
        cls,
        fm: FunctionalModel,
        first: FirstLayerCache | None,
        graph: GraphInputs,
        rows: Tensor,
        base_first: Tensor | None = None,
    ) -> FusedObjective | None:
        """The fused objective of ``fm``, or ``None`` where it does not apply (anything but a two-layer GCN or SAGE
        whose first layer is cached on its computation graph, or while the activations are expanded).

        Args:
            fm: the model at ``θ̂``.
            first: its first layer on the computation graph (:class:`FirstLayerCache`).
            graph: the computation graph's inputs on ``G``.
            rows: the training rows there.
            base_first: the full graph's activated first layer at ``θ̂`` (for Γ's direct term), when known.

        Returns:
            The shared part of every deletion's objective, or ``None``.
        """
        found = layout(fm)
        if found is None or first is None or graph.adjacency is None or graph.x_prop is None:
            return None
        slopes = fm.slopes
        u = graph.adjacency.rows(rows).transpose_times(slopes)
        u_root = None
        if found.root is not None:
            u_root = torch.zeros_like(u)
            u_root[rows] = slopes
        fused = cls(fm, found, u, u_root, slopes.sum(dim=0), graph.x_prop)
        if base_first is not None:
            fused.base_projected = base_first @ fused.projection(fm.theta)[0]
        return fused

    def projection(self, at: Tensor) -> tuple[Tensor, Tensor]:
        """What the layers after the first do to a row of ``H`` at ``at``, for logits read without a gradient:
        ``M = [(W_h·W_a)ᵀ | (W_h·W_r)ᵀ]`` (``[hidden, out]``, or ``[hidden, 2·out]`` with SAGE's root term) and the
        constant ``c = W_h·b₂ + b_h``, so that the logits of rows ``R`` are ``A[R]·(H·M)[:, :out] + c`` (plus
        ``(H·M)[R, out:]`` for SAGE): the sparse product over ``out`` columns rather than ``hidden``.

        Args:
            at: the weights.

        Returns:
            ``(M, c)``.
        """
        w = self.layout.weights(self.fm.unflatten(at))
        wa, b2, wr, wh, bh = w.wa, w.b2, w.wr, w.wh, w.bh
        mats = [wa if wh is None else wh @ wa]
        if wr is not None:
            mats.append(wr if wh is None else wh @ wr)
        constant = b2 if wh is None or bh is None else wh @ b2 + bh
        return torch.cat(mats, dim=0).T, constant

    def first_rows(self, at: Tensor, z: Tensor) -> Tensor:
        """The activated first layer at ``at`` of the aggregated features ``z`` (no gradient)."""
        w = self.layout.weights(self.fm.unflatten(at))
        return self.layout.value(torch.addmm(w.b1, z, w.w1.T))

    def test_logits(self, at: Tensor, first: FirstLayerCache, reduced: GraphInputs, test: Tensor) -> Tensor | None:
        """The logits of the ``test`` rows on the reduced graph at ``at``, with the computation graph's first-layer
        rows from ``first``'s last evaluation when it was at ``at`` (``None`` otherwise): the other rows' first
        layer formed and every row projected (:meth:`projection`) before the sparse product.

        Args:
            at: the weights.
            first: the first-layer cache (its last evaluation's rows, by their weights).
            reduced: ``G − S``'s inputs in the full graph's numbering.
            test: the test rows (the reduced adjacency's block is cut for this tensor).

        Returns:
            ``[len(test), out]`` logits, or ``None``.
        """
        if first.last is None or first.last[0] is not at or reduced.x_prop is None:
            return None
        matrix, constant = self.projection(at)
        projected = torch.empty(reduced.x_prop.shape[0], matrix.shape[1], dtype=matrix.dtype, device=matrix.device)
        projected[first.nodes] = first.last[1] @ matrix
        projected[first.others] = self.first_rows(at, reduced.x_prop[first.others]) @ matrix
        return self._logits(projected, reduced, test, constant)

    def test_logits_at_hat(self, reduced: GraphInputs, changed: Tensor, test: Tensor) -> Tensor | None:
        """The logits of the ``test`` rows on the reduced graph at ``θ̂``: the full graph's projected first layer with
        the ``changed`` rows (the full graph's numbering) formed again. ``None`` without the full graph's first
        layer."""
        if self.base_projected is None or reduced.x_prop is None:
            return None
        theta = self.fm.theta
        matrix, constant = self.projection(theta)
        projected = self.base_projected.clone()
        projected[changed] = self.first_rows(theta, reduced.x_prop[changed]) @ matrix
        return self._logits(projected, reduced, test, constant)

    def _logits(self, projected: Tensor, reduced: GraphInputs, test: Tensor, constant: Tensor) -> Tensor:
        """``A[test]·P[:, :out] + c`` (plus ``P[test, out:]``, SAGE's root term) from the projected rows ``P``."""
        assert reduced.adjacency is not None
        out = int(constant.numel())
        logits = reduced.adjacency.rows(test).times(projected[:, :out]) + constant
        if self.layout.root is not None:
            logits = logits + projected[test, out:]
        return logits

    def objective(
        self,
        first: FirstLayerCache,
        part: GraphInputs,
        rows: Tensor,
        rest: Tensor,
        y: Tensor,
        mu: float,
        changed: Tensor,
    ) -> Callable[[Tensor], Evaluation]:
        """``θ ↦ (F(θ), ∇F(θ), None)`` for one deletion, as :func:`~bind_core.influence.proximal.proximal_objective`
        gives it on the computation graph with ``first``, ``changed``, the tilt and ``tilt_hat``.

        Args:
            first: the stepper's first-layer cache (its last evaluation is remembered there, for Γ's read).
            part: ``G − S``'s inputs on the computation graph.
            rows: the training rows there (the block of ``part``'s adjacency is cut for this tensor).
            rest: ``[m]`` bool, the training positions kept.
            y: ``[m]``, every training row's label.
            mu: the damping.
            changed: positions in the computation graph of the rows whose aggregated features ``S`` changed.

        Returns:
            The objective.
        """
        fm, names = self.fm, self.layout
        theta_hat, lam = fm.theta, fm.weight_decay
        m = int(rest.numel())
        assert part.x_prop is not None and part.adjacency is not None
        z, z_changed = part.x_prop, self.z_graph[changed]
        block = part.adjacency.rows(rows)
        gone = ~rest

        def evaluate(at: Tensor) -> Evaluation:
            p = fm.unflatten(at)
            w1, b1, wa, b2, wr, wh, bh = names.weights(p)
            if at is theta_hat:  # the kept rows' first layer is the full graph's: only the changed rows are formed
                h, slope = first.act0.clone(), first.slope0.clone()
                h[changed], slope[changed] = names.activated(torch.addmm(b1, z[changed], w1.T))
            else:
                h, slope = names.activated(torch.addmm(b1, z, w1.T))
            first.last = (at, h)
            h_graph, slope_graph = names.activated(torch.addmm(b1, z_changed, w1.T))  # G's changed rows
            aggregated = block.times(h)
            s = torch.addmm(b2, aggregated, wa.T)
            if wr is not None:
                s = s + h[rows] @ wr.T
            logits = s if wh is None or bh is None else torch.addmm(bh, s, wh.T)
            # The kept losses (G − S) and their derivatives in the logits.
            value = node_losses(logits[rest], y[rest]).sum() / m
            dlogits = dloss_dlogits(logits, y) / m
            dlogits[gone] = 0.0
            # The tilt on G, through V (the module docstring): −⟨V, H_G⟩ − (Σs)ᵀ·(W_h·b₂ + b_h) − λ·θ̂ᵀθ.
            v = self.u @ (wa if wh is None else wh @ wa)
            if wr is not None and self.u_root is not None:
                v = v + self.u_root @ (wr if wh is None else wh @ wr)
            delta = h_graph - h[changed]
            sums = self.slope_sum if wh is None else self.slope_sum @ wh
            tilt = torch.dot(v.reshape(-1), h.reshape(-1)) + (v[changed] * delta).sum() + sums @ b2
            if bh is not None:
                tilt = tilt + self.slope_sum @ bh
            value = value - tilt - lam * (theta_hat @ at)
            move = at - theta_hat
            value = value + 0.5 * lam * (at @ at) + 0.5 * mu * (move @ move)
            # Gradients: the head, the second layer, then the first through the activation's derivative.
            grads: dict[str, Tensor] = {}
            ds = dlogits if wh is None else dlogits @ wh
            # U·H_G (and U_r·H_G): what the tilt's second-layer and head gradients read.
            u_h = self.u.T @ h + self.u[changed].T @ delta
            ur_h = None if self.u_root is None else self.u_root.T @ h + self.u_root[changed].T @ delta
            if wh is not None and bh is not None:
                g_head = dlogits.T @ s - u_h @ wa.T - torch.outer(self.slope_sum, b2)
                if wr is not None and ur_h is not None:
                    g_head = g_head - ur_h @ wr.T
                grads[HEAD[0]], grads[HEAD[1]] = g_head, dlogits.sum(dim=0) - self.slope_sum
            grads[names.second] = ds.T @ aggregated - (u_h if wh is None else wh.T @ u_h)
            grads[names.second_bias] = ds.sum(dim=0) - sums
            dh = block.transpose_times(ds @ wa).sub_(v)
            dh[changed] += v[changed]  # H's changed rows are not G's: the tilt reads H_G there
            if wr is not None and names.root is not None and ur_h is not None:
                grads[names.root] = ds.T @ h[rows] - (ur_h if wh is None else wh.T @ ur_h)
                dh.index_add_(0, rows, ds @ wr)
            dpre = dh.mul_(slope)
            dpre_graph = -v[changed] * slope_graph
            g1 = dpre.T @ z + dpre_graph.T @ z_changed
            grads[names.first[1]] = dpre.sum(dim=0) + dpre_graph.sum(dim=0)
            grads |= names.first_grads(p, g1)  # W₁'s column blocks, back to their parameters
            flat = torch.cat([grads[name].reshape(-1) for name in fm.names])
            flat = flat - lam * theta_hat + lam * at + mu * move
            return float(value), flat, None

        return evaluate
