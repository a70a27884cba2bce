"""The activation functions by name, and their second-order expansions, for forming Hessians faster.

A dense Hessian by rows (:func:`bind_core.training.hessian.dense_hessian_by_rows`) runs one backward pass per
parameter through the same retained gradient graph, and where the activation is GELU each of those passes
differentiates ``gelu_backward`` again, recomputing ``erf`` and ``exp`` at the same pre-activations every time
(30% of a two-layer GCN's Hessian on Income). Every row is taken at the same weights, so the activation may be
replaced by its second-order Taylor polynomial about the point it is evaluated at,

    σ̃(z) = σ(z̄) + σ'(z̄)·(z − z̄) + ½·σ''(z̄)·(z − z̄)²,    z̄ = z (detached),

whose value, gradient and Hessian at that point are σ's exactly: ``z − z̄`` is zero there, but its derivative is
one, so autograd differentiates the polynomial, whose coefficients are constants of the graph. Only derivatives up
to the second at the point itself are exact; a third derivative, or anything evaluated elsewhere, is not, so this is
for forming Hessians only (:attr:`bind_core.models.gnn.GNN.expand_activations`; GELU between layers and in GAT's
attention scores; the MLP inside a GIN layer keeps its own).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

_SQRT_2 = math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def identity(h: Tensor) -> Tensor:
    """No activation: ``h`` itself (a PyG model built with ``act=None``)."""
    return h


ACTIVATION_FNS: dict[str, Callable[[Tensor], Tensor]] = {
    "gelu": F.gelu,
    "relu": F.relu,
    "tanh": torch.tanh,
    "elu": F.elu,
    "identity": identity,
}
"""The activation functions by name (between layers; see :class:`bind_core.models.gnn.ModelConfig`)."""

ACTIVATION_MODULES: dict[str, type[nn.Module]] = {
    "gelu": nn.GELU,
    "relu": nn.ReLU,
    "tanh": nn.Tanh,
    "elu": nn.ELU,
    "identity": nn.Identity,
}
"""Each activation as the module inside a GIN layer's MLP."""


def gelu_expansion(z: Tensor) -> Tensor:
    """GELU's second-order Taylor polynomial about ``z`` itself (exact GELU value, gradient and Hessian there)."""
    at = z.detach()
    pdf = torch.exp(-0.5 * at * at) * _INV_SQRT_2PI
    cdf = 0.5 * (1.0 + torch.erf(at / _SQRT_2))
    first = cdf + at * pdf  # GELU'(z̄)
    second = pdf * (2.0 - at * at)  # GELU''(z̄)
    dz = z - at
    return at * cdf + dz * (first + 0.5 * second * dz)


EXPANSIONS: dict[str, Callable[[Tensor], Tensor]] = {"gelu": gelu_expansion}
"""Activations with an expansion; the others (ReLU, whose second derivative is zero almost everywhere; ELU and tanh,
rarely trained here) are used as they are."""


def activation_fn(name: str, *, expanded: bool = False) -> Callable[[Tensor], Tensor]:
    """The activation ``name``, or its second-order expansion when ``expanded`` and it has one."""
    return EXPANSIONS[name] if expanded and name in EXPANSIONS else ACTIVATION_FNS[name]
