"""A two-layer GCN or SAGE as the by-hand products see it: where its weights lie, and its activation with its
derivative in one pass.

The proximal objective (:mod:`bind_core.influence.fused`) and the training rows' Jacobian
(:mod:`bind_core.influence.jacobian_by_hand`) form their gradients by hand for these models:

    H = σ(z·W₁ᵀ + b₁)                                  (z: the aggregated features, x_prop)
    s_i = W_a·(A·H)_i + b₂ (+ W_r·H_i, SAGE's root term)
    f_i = W_h·s_i + b_h                                 (the linear head, where the model has one; else f_i = s_i)

:func:`layout` says whether a model is one of them and names its parameters; anything else (GIN's MLP, three or more
layers, GAT, a model whose activations are expanded for a Hessian) keeps autograd.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple, Protocol

import torch
from torch import Tensor

from bind_core.models.gnn import GNN
from bind_core.models.norms import affine_map


class Parameterised(Protocol):
    """What :func:`layout` and :func:`linear_first` read of a model: its module and its parameters' names in the flat
    vector's order (:class:`~bind_core.influence.functional.FunctionalModel`, which asks :func:`layout` where its
    objective runs: the protocol keeps the import one way)."""

    @property
    def module(self) -> GNN: ...

    @property
    def names(self) -> list[str]: ...


_INV_SQRT_2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def _gelu_cdf(pre: Tensor) -> Tensor:
    # in place where it can be: each pass over the rows is a pass over memory
    return torch.mul(pre, _INV_SQRT_2).erf_().add_(1.0).mul_(0.5)


def _gelu(pre: Tensor) -> tuple[Tensor, Tensor]:
    cdf = _gelu_cdf(pre)
    density = torch.mul(pre, pre).mul_(-0.5).exp_().mul_(pre).mul_(_INV_SQRT_2PI)
    return pre * cdf, density.add_(cdf)


def _relu(pre: Tensor) -> tuple[Tensor, Tensor]:
    on = pre > 0
    return pre * on, on.to(pre.dtype)


def _tanh(pre: Tensor) -> tuple[Tensor, Tensor]:
    out = torch.tanh(pre)
    return out, 1.0 - out * out


def _elu_value(pre: Tensor) -> Tensor:
    return torch.where(pre <= 0, torch.expm1(pre.clamp(max=0.0)), pre)


def _elu(pre: Tensor) -> tuple[Tensor, Tensor]:
    negative = pre <= 0
    below = torch.expm1(pre.clamp(max=0.0))
    return torch.where(negative, below, pre), torch.where(negative, below + 1.0, torch.ones_like(pre))


def _identity(pre: Tensor) -> tuple[Tensor, Tensor]:
    return pre, torch.ones_like(pre)


_WITH_DERIVATIVE: dict[str, Callable[[Tensor], tuple[Tensor, Tensor]]] = {
    "gelu": _gelu,
    "relu": _relu,
    "tanh": _tanh,
    "elu": _elu,
    "identity": _identity,
}
"""Each activation of :data:`~bind_core.models.activations.ACTIVATION_FNS` with its derivative, in one pass."""

_VALUE: dict[str, Callable[[Tensor], Tensor]] = {
    "gelu": lambda pre: pre * _gelu_cdf(pre),
    "relu": lambda pre: pre * (pre > 0),
    "tanh": torch.tanh,
    "elu": _elu_value,
    "identity": lambda pre: pre,
}
"""The same activations' values alone, by the same arithmetic (so equal to :func:`activated`'s, bit for bit)."""


def activation_value(name: str, pre: Tensor) -> Tensor:
    """``activated(name, pre)[0]`` without the derivative: for reads that need no gradient (Γ's logits).

    Raises:
        ValueError: an activation without a derivative here (:func:`activated`'s).
    """
    value = _VALUE.get(name)
    if value is None:
        raise ValueError(f"no derivative for the activation {name!r}")
    return value(pre)


def activated(name: str, pre: Tensor) -> tuple[Tensor, Tensor]:
    """The activation ``name`` at ``pre`` and its derivative there, in one pass.

    Args:
        name: ``gelu``, ``relu``, ``tanh``, ``elu`` or ``identity``
            (:data:`~bind_core.models.activations.ACTIVATION_FNS`).
        pre: the pre-activations.

    Returns:
        ``(σ(pre), σ'(pre))``: equal to torch's activation and the derivative its backward pass uses, to rounding
        (ReLU's derivative is 0 at 0, as torch's).

    Raises:
        ValueError: an activation without a derivative here.
    """
    derived = _WITH_DERIVATIVE.get(name)
    if derived is None:
        raise ValueError(f"no derivative for the activation {name!r}")
    return derived(pre)


class Weights(NamedTuple):
    """A two-layer model's weights at one point, as the module docstring names them."""

    w1: Tensor
    """``[hidden, features]``: the first layer's weight, its columns in the aggregated features' order."""
    b1: Tensor
    wa: Tensor
    b2: Tensor
    wr: Tensor | None
    """SAGE's root weight (``None``: GCN)."""
    wh: Tensor | None
    """The head's weight (``None``: no head)."""
    bh: Tensor | None


@dataclass(frozen=True)
class Layout:
    """Where a two-layer GCN's or SAGE's weights lie among its parameters (:func:`layout` makes it)."""

    first: tuple[tuple[str, ...], str]
    """The first layer's weight matrices (their columns in the aggregated features' order) and bias
    (:func:`linear_first`)."""
    second: str
    """The second layer's weight on the aggregated rows ``A·H``."""
    second_bias: str
    root: str | None
    """SAGE's second-layer weight on a row's own ``H`` (``None``: GCN)."""
    head: bool
    activation: str
    norm: tuple[Tensor, Tensor] | None = None
    """The first layer's batch normalisation as the audit holds it (evaluation mode): per channel, its scale ``a``
    and shift ``c`` (``a·h + c``); ``None``: none."""
    act_first: bool = False
    """With ``norm``: the activation before it."""

    def activated(self, pre: Tensor) -> tuple[Tensor, Tensor]:
        """The first layer's pre-activation ``pre`` as the second layer reads it (normalised and activated, in the
        model's order), and its elementwise derivative in ``pre``."""
        if self.norm is None:
            return activated(self.activation, pre)
        scale, shift = self.norm
        if self.act_first:
            h, slope = activated(self.activation, pre)
            return h * scale + shift, slope * scale
        h, slope = activated(self.activation, pre * scale + shift)
        return h, slope * scale

    def value(self, pre: Tensor) -> Tensor:
        """:meth:`activated`'s value alone (for reads that need no gradient)."""
        if self.norm is None:
            return activation_value(self.activation, pre)
        scale, shift = self.norm
        if self.act_first:
            return activation_value(self.activation, pre) * scale + shift
        return activation_value(self.activation, pre * scale + shift)

    def weights(self, p: dict[str, Tensor]) -> Weights:
        """The weights among the parameters ``p`` (``FunctionalModel.unflatten``'s)."""
        names, bias = self.first
        w1 = torch.cat([p[name] for name in names], dim=1) if len(names) > 1 else p[names[0]]
        wr = None if self.root is None else p[self.root]
        wh, bh = (p[HEAD[0]], p[HEAD[1]]) if self.head else (None, None)
        return Weights(w1, p[bias], p[self.second], p[self.second_bias], wr, wh, bh)

    def first_grads(self, p: dict[str, Tensor], g1: Tensor) -> dict[str, Tensor]:
        """``g1`` (``[…, hidden, features]``, a quantity per entry of ``W₁``) split back into the first layer's
        weight matrices, by their columns in ``p``."""
        out, start = {}, 0
        for name in self.first[0]:
            width = p[name].shape[1]
            out[name], start = g1[..., start : start + width], start + width
        return out


HEAD = ("head.weight", "head.bias")

_SECOND = {
    "gcn": ("convs.1.lin.weight", "convs.1.bias", None),
    "sage": ("convs.1.lin_l.weight", "convs.1.lin_l.bias", "convs.1.lin_r.weight"),
}


def layout(fm: Parameterised) -> Layout | None:
    """The layout of ``fm``'s weights, or ``None`` where the by-hand products do not apply: anything but a two-layer
    GCN or SAGE with one of :data:`_WITH_DERIVATIVE`'s activations (a batch normalisation of its first layer held as
    given, :attr:`Layout.norm`) and exactly the parameters named here, or a model whose activations are expanded
    (:attr:`~bind_core.models.gnn.GNN.expand_activations`)."""
    config, module = fm.module.config, fm.module
    second, first = _SECOND.get(config.arch), linear_first(fm)
    if second is None or first is None or config.layers != 2 or module.expand_activations:
        return None
    if config.activation not in _WITH_DERIVATIVE or config.head_activation:
        return None
    if config.norm not in ("", "batch"):
        return None
    norm = affine_map(module.norms[0]) if module.norms else None
    found = Layout(first, second[0], second[1], second[2], config.head, config.activation, norm, config.act_first)
    known = {*first[0], first[1], found.second, found.second_bias}
    known |= {found.root} if found.root is not None else set()
    known |= set(HEAD) if config.head else set()
    return found if known == set(fm.names) else None


def linear_first(fm: Parameterised) -> tuple[tuple[str, ...], str] | None:
    """The names of the parameters whose columns make the first layer's ``W`` (in the aggregated features' column
    order) and of its bias ``b``, where the first layer is ``z·Wᵀ + b`` (GCN, SAGE without ``normalize``); ``None``
    elsewhere."""
    if fm.module.config.normalize:  # each row divided by its norm: not linear
        return None
    linear = _LINEAR_FIRST.get(fm.module.config.arch)
    return linear if linear is not None and {*linear[0], linear[1]} <= set(fm.names) else None


_LINEAR_FIRST = {
    "gcn": (("convs.0.lin.weight",), "convs.0.bias"),
    "sage": (("convs.0.lin_l.weight", "convs.0.lin_r.weight"), "convs.0.lin_l.bias"),
}
"""Per architecture whose first layer is ``z·Wᵀ + b``: the parameters whose columns make ``W`` (in ``z``'s column
order) and ``b``."""
