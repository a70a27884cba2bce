"""The first layer's rows of a deletion's evaluations, reused where they are known.

A deletion's settle (:class:`bind_core.influence.step.Stepper`) evaluates a multi-layer model on the training nodes'
computation graph of ``G − S`` two or three times, then the test rows at the weights reached. Two of those passes
repeat work whose answer is already known:

* **At** ``θ̂``: the first layer's output on ``G − S`` is the full graph's except at the rows whose aggregated
  features ``S`` changed (a few hundred of 12,722 on a 20,000-node graph). The activation of the other rows and its
  derivative are those of the full graph, kept once: ``h = H₀ + D₀ ⊙ (P − P₀)`` there, with ``P`` the pre-activation
  at the weights evaluated (equal to ``P₀`` at ``θ̂``, so the value is ``H₀`` and the gradient is the exact one,
  ``D₀`` being the activation's derivative at ``P₀``), and the activation itself on the changed rows. The
  activation and its derivative (a float64 GELU over every row, forward and backward) were the largest items of
  the evaluation.
* **The test rows at the weights reached**: Γ reads the first layer's output on every row; the last evaluation
  computed it on the computation graph's rows at those weights, so only the other rows are computed.

The model is split into its first layer's pre-activation and the layers after it (:class:`SplitModel`), each a
functional call with the flat weights, so autograd sees the same arithmetic as the whole forward pass.
"""

from __future__ import annotations

import copy
from typing import Any, cast

import torch
from torch import Tensor, nn
from torch.func import functional_call

from bind_core.autograd import apply
from bind_core.influence.functional import FunctionalModel
from bind_core.influence.twolayer import linear_first
from bind_core.models.gnn import GNN
from bind_core.models.propagation import GraphInputs


class _FirstLayer(nn.Module):
    def __init__(self, gnn: GNN) -> None:
        super().__init__()
        self.gnn = gnn

    def forward(self, z: Tensor) -> Tensor:
        return self.gnn.first_layer(z)


class _AfterFirst(nn.Module):
    def __init__(self, gnn: GNN) -> None:
        super().__init__()
        self.gnn = gnn

    def forward(self, h: Tensor, inputs: GraphInputs, rows: Tensor | None) -> Tensor:
        return self.gnn.forward_after_first(h, inputs, rows)


class SplitModel:
    """``fm``'s model as its first layer's pre-activation, the activation, and the layers after it (a GCN, GIN or
    SAGE with at least two layers and aggregated features)."""

    def __init__(self, fm: FunctionalModel) -> None:
        self.fm = fm
        self.first, self.after = _FirstLayer(fm.module), _AfterFirst(fm.module)

    def _params(self, flat: Tensor) -> dict[str, Tensor]:
        return {f"gnn.{name}": t for name, t in self.fm.unflatten(flat).items()}

    def act(self, pre: Tensor, flat: Tensor | None = None) -> Tensor:
        """The first layer's output as the second reads it (its normalisation and the activation) from its
        pre-activation ``pre``; at ``flat`` where a layer normalisation's scale and shift are part of ``θ``
        (:meth:`~bind_core.models.gnn.GNN.activate`), else the module's own."""
        return self.fm.module.activate(0, pre, None if flat is None else self.fm.unflatten(flat))

    def pre(self, flat: Tensor, z: Tensor) -> Tensor:
        """The first layer's pre-activation output at ``flat`` from aggregated features ``z``."""
        return cast(Tensor, functional_call(self.first, self._params(flat), (z,), tie_weights=False))

    def logits(self, flat: Tensor, h: Tensor, inputs: GraphInputs, rows: Tensor | None) -> Tensor:
        """Logits of ``rows`` from the activated first-layer output ``h`` (every row of ``inputs``)."""
        return cast(Tensor, functional_call(self.after, self._params(flat), (h, inputs, rows), tie_weights=False))


class FirstLayerCache:
    """The first layer on the rows ``nodes`` (the training nodes' computation graph) at ``θ̂`` on ``G``: its
    pre-activation ``P₀``, activation ``H₀`` and the activation's derivative ``D₀``; and the last evaluation's
    activated rows, by the weights they were computed at."""

    def __init__(self, split: SplitModel, z: Tensor, nodes: Tensor) -> None:
        self.split, self.nodes = split, nodes
        fm = split.fm
        assert fm.module.elementwise_between_layers, "the kept rows' linearisation needs an elementwise activation"
        with torch.no_grad():
            self.pre0 = split.pre(fm.theta, z[nodes])
        probe = self.pre0.clone().requires_grad_(True)
        with torch.enable_grad():
            out = split.act(probe)
            (self.slope0,) = torch.autograd.grad(out, probe, torch.ones_like(out))
        self.act0 = out.detach()
        self.position = torch.full((int(z.shape[0]),), -1, dtype=torch.long, device=nodes.device)
        self.position[nodes] = torch.arange(nodes.numel(), device=nodes.device)
        self.others = torch.nonzero(self.position < 0).flatten()
        self.last: tuple[Tensor, Tensor] | None = None
        self.linear = linear_first(fm)
        """The first layer's weights (in ``z``'s column order) and bias, where it is linear (GCN, SAGE)."""

    def fork(self, split: SplitModel) -> FirstLayerCache:
        """A copy for another thread's model (``split``, of :meth:`FunctionalModel.fork`): the rows at ``θ̂`` shared, the
        last evaluation's its own."""
        twin = copy.copy(self)
        twin.split, twin.last = split, None
        return twin

    def changed_positions(self, changed: Tensor) -> Tensor:
        """The positions in ``nodes`` of the graph's rows ``changed`` that lie there."""
        pos = self.position[changed]
        return pos[pos >= 0]

    def activate(self, at: Tensor, pre: Tensor, changed: Tensor | None) -> Tensor:
        """The activated first layer from its pre-activation ``pre`` on ``nodes`` at weights ``at``: at ``θ̂`` with
        the rows ``changed`` (positions in ``nodes``) known, the kept activation linearised at its own point (exact
        in value and gradient there) and the activation on the changed rows only; else the activation. The result
        is remembered (detached) for :meth:`full_rows` at the same weights."""
        if at is self.split.fm.theta and changed is not None:
            h = self.act0 + self.slope0 * (pre - self.pre0)
            h = h.index_put((changed,), self.split.act(pre[changed]))
        else:
            h = self.split.act(pre)
        self.last = (at, h.detach())
        return h

    def rows(self, at: Tensor, flat: Tensor, z: Tensor, changed: Tensor | None) -> Tensor:
        """The activated first layer on ``nodes`` at ``at`` (``flat``: its differentiable copy) from aggregated features
        ``z``: :meth:`at_hat` at ``θ̂`` where that applies, else :meth:`activate` of the pre-activation."""
        h = self.at_hat(at, flat, z, changed) if at is self.split.fm.theta else None
        return h if h is not None else self.activate(at, self.split.pre(flat, z), changed)

    def at_hat(self, at: Tensor, flat: Tensor, z: Tensor, changed: Tensor | None) -> Tensor | None:
        """:meth:`activate` at ``θ̂`` (``flat``, a differentiable copy of it) for a linear first layer, without its
        forward product over every row: there the kept rows' pre-activation is exactly ``P₀``, so their activated
        rows are ``H₀`` and only the gradient of ``D₀ ⊙ (P − P₀)`` is needed, which the backward pass forms from
        ``z`` (:class:`_KeptRows`); the ``changed`` rows (positions in ``nodes``) are computed and activated. ``None``
        where that does not apply (a GIN's MLP, or ``changed`` unknown): :meth:`activate` then.

        Args:
            at: ``θ̂`` itself (the evaluation is remembered by it, as :meth:`activate` does).
            flat: the weights, ``θ̂``'s values, requiring grad.
            z: ``[rows, features]``, ``G − S``'s aggregated features on ``nodes``.
            changed: the positions in ``nodes`` of the rows ``S`` changed.

        Returns:
            ``[rows, hidden]``: the activated first layer, or ``None``.
        """
        if self.linear is None or changed is None:
            return None
        params = self.split.fm.unflatten(flat)
        names, bias = self.linear
        weight = torch.cat([params[name] for name in names], dim=1) if len(names) > 1 else params[names[0]]
        rows = self.split.act(self.split.pre(flat, z[changed]), flat)
        h = _apply_kept(weight, params[bias], rows, z, self.slope0, self.act0, changed)
        self.last = (at, h.detach())
        return h

    def on_graph(self, flat: Tensor, h: Tensor, graph: GraphInputs, changed: Tensor) -> Tensor:
        """The activated first layer on ``nodes`` on ``G`` itself at ``flat``, from ``h``, ``G − S``'s there: the two
        differ only at the rows whose aggregated features ``S`` changed (``changed``, positions in ``nodes``), which
        are computed again from ``graph``'s (the computation graph's inputs on ``G``). Differentiable in ``flat``.

        Args:
            flat: the weights ``h`` was computed at.
            h: ``[rows, hidden]``, ``G − S``'s activated first layer on ``nodes``.
            graph: the computation graph's inputs on ``G`` (its aggregated features are read).
            changed: the positions in ``nodes`` of the rows ``S`` changed.

        Returns:
            ``[rows, hidden]``: ``G``'s activated first layer on ``nodes``.
        """
        assert graph.x_prop is not None
        return h.index_put((changed,), self.split.act(self.split.pre(flat, graph.x_prop[changed]), flat))

    def full_rows(self, at: Tensor, z: Tensor) -> Tensor | None:
        """The activated first layer on every row at ``at`` from aggregated features ``z`` (``G − S``'s), with the
        rows of ``nodes`` from the last evaluation when it was at ``at`` (``None`` otherwise)."""
        if self.last is None or self.last[0] is not at:
            return None
        with torch.no_grad():
            h = torch.empty(int(z.shape[0]), self.last[1].shape[1], dtype=z.dtype, device=z.device)
            h[self.nodes] = self.last[1]
            h[self.others] = self.split.act(self.split.pre(at, z[self.others]), at)
        return h


class _KeptRows(torch.autograd.Function):
    """The activated first layer at ``θ̂`` of a linear first layer: ``H₀`` with the changed rows replaced, whose
    gradient at the kept rows is that of ``D₀ ⊙ (z·Wᵀ + b)`` (the forward product there gives exactly ``P₀``, so it is
    not computed)."""

    @staticmethod
    def forward(
        weight: Tensor, bias: Tensor, rows: Tensor, z: Tensor, slope: Tensor, value: Tensor, changed: Tensor
    ) -> Tensor:
        return value.index_put((changed,), rows)

    @staticmethod
    def setup_context(ctx: Any, inputs: Any, output: Any) -> None:
        ctx.save_for_backward(inputs[3], inputs[4], inputs[6])

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Any:
        z, slope, changed = ctx.saved_tensors
        kept = grad * slope
        kept[changed] = 0.0
        return kept.T @ z, kept.sum(dim=0), grad[changed], None, None, None, None


def _apply_kept(
    weight: Tensor, bias: Tensor, rows: Tensor, z: Tensor, slope: Tensor, value: Tensor, changed: Tensor
) -> Tensor:
    """``_KeptRows.apply``, typed."""
    out: Tensor = apply(_KeptRows, weight, bias, rows, z, slope, value, changed)
    return out
