"""A normalisation between layers, as PyG's ``BasicGNN`` places it (``norm="batch_norm"``, or ``norm="layer_norm"``
with ``norm_kwargs={"mode": "node"}``) and as a module of one's own writes it (``self.bn1 = BatchNorm1d(hidden)`` or
``self.ln1 = LayerNorm(hidden)`` after ``conv1``).

**Batch normalisation.** Training normalises each forward pass's rows by their own mean and variance and updates the
running statistics (``torch.nn.BatchNorm1d`` in training mode, as the owner trained it); the audited model is the
deployed one, in evaluation mode, where each normalisation is a fixed per-channel affine map ``γ·(h − μ)/√(σ² + ε) +
β`` of the running statistics ``μ``, ``σ²``. That map is elementwise, so a node's row depends on that node's row
alone, as without it, and every path that evaluates the model row by row applies it in place of the activation alone
(:meth:`bind_core.models.gnn.GNN.activate`).

*Held as given.* The attribution's parameters ``θ`` are the convolutions' and the head's
(:func:`bind_core.models.gnn.flat_parameters` leaves a batch normalisation's ``γ`` and ``β`` out): the refit that the
proximal response describes keeps each normalisation as deployed. It loses no model: the convolution before a
normalisation ends in a per-channel linear map with a bias (a GCN's or SAGE's weight rows, a GIN MLP's last layer, a
GAT's weight with its attention vectors rescaled), so any change of ``γ`` or ``β`` is a change of that
convolution's weights with the same outputs; only the distance that the proximal term and the weight decay measure
differs.

**Layer normalisation, node by node.** ``γ·(h − mean(h))/√(var(h) + ε) + β`` over each row's own channels
(``torch.nn.LayerNorm``, PyG's ``LayerNorm`` in ``mode="node"``): the same in training and evaluation, and a function
of that node's row alone, so every row-by-row path reads it as it reads a batch normalisation. Its ``γ`` and ``β`` are
part of ``θ``, fitted like the convolutions' weights: a per-channel scale after the row's normalisation is no change
the convolution before can make. PyG's default ``mode="graph"`` normalises by the whole graph's mean and variance
instead, every node by every other, and is refused (:mod:`bind_core.models.pyg`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar, cast

import torch.nn.functional as F
from torch import Tensor, nn

M = TypeVar("M", bound=nn.Module)

NORMS = ("", "batch", "layer")
"""``ModelConfig.norm``: none, or a batch normalisation or a layer normalisation (node by node) after each
convolution but the logits'."""


BATCH_NORMS = ("batchnorm", "batch")
"""PyG's names for its ``BatchNorm`` (``normalization_resolver`` lowercases a name and drops ``_``, ``-`` and spaces;
``batch`` is the class name without ``Norm``)."""
LAYER_NORMS = ("layernorm", "layer")
"""PyG's names for its ``LayerNorm`` (read only in ``mode="node"``)."""


def resolved_norm(name: str) -> str:
    """A PyG ``norm`` name as ``normalization_resolver`` compares it: lowercased, without ``_``, ``-`` and spaces."""
    return "".join(c for c in name.lower() if c not in "_- ")


def norm_kind(value: object) -> str:
    """:data:`NORMS`' name for a checked PyG ``norm`` argument: ``""`` (none), ``"batch"`` or ``"layer"``."""
    if value is None:
        return ""
    return "layer" if resolved_norm(str(value)) in LAYER_NORMS else "batch"


def make_norm(kind: str, width: int, *, eps: float, momentum: float | None, affine: bool) -> nn.Module:
    """The normalisation of one layer's ``width`` channels (``kind`` ``"batch"`` or ``"layer"``; ``momentum`` is the
    batch normalisation's)."""
    if kind == "batch":
        return nn.BatchNorm1d(width, eps=eps, momentum=momentum, affine=affine)
    if kind == "layer":
        return nn.LayerNorm(width, eps=eps, elementwise_affine=affine)
    raise ValueError(f"no normalisation {kind!r}")


Norm = nn.Module | Callable[[Tensor], Tensor]
"""A normalisation: its module, or a function of the rows (a layer normalisation at other weights,
:func:`layer_norm_at`)."""


def norm_act(norm: Norm | None, act: Callable[[Tensor], Tensor], h: Tensor, *, act_first: bool) -> Tensor:
    """A convolution's output ``h`` through its normalisation and the activation, in the model's order (PyG's
    ``act_first``: the activation before the normalisation)."""
    if norm is None:
        return act(h)
    return normalised(norm, act(h)) if act_first else act(normalised(norm, h))


def layer_norm_at(norm: nn.Module, weight: Tensor | None, bias: Tensor | None) -> Callable[[Tensor], Tensor]:
    """``norm`` (a ``LayerNorm``) with the scale ``weight`` and shift ``bias`` (the attribution's ``θ``'s, not the
    module's): for a path that evaluates the layers by hand outside ``functional_call``."""
    ln = cast(nn.LayerNorm, norm)
    return lambda h: F.layer_norm(h, ln.normalized_shape, weight, bias, ln.eps)


def normalised(norm: Norm, h: Tensor) -> Tensor:
    """``norm`` over ``h``'s last axis, the channels, whatever axes come before it (a batch of members' rows, ``[k,
    rows, channels]``, evaluation mode only), where ``BatchNorm1d`` would read a 3-D input's second axis as them
    (``LayerNorm`` reads the last axis anyway)."""
    if h.dim() == 2:
        return cast(Tensor, norm(h))
    return cast(Tensor, norm(h.reshape(-1, h.shape[-1]))).reshape(h.shape)


def is_normalisation(module: nn.Module) -> bool:
    """Whether ``module`` is a normalisation whose parameters the attribution holds as given: a batch normalisation
    (a layer normalisation's scale and shift are fitted with the rest of ``θ``)."""
    return isinstance(module, nn.modules.batchnorm._BatchNorm)


def held(module: M) -> M:
    """``module`` (a copy for the attribution) with its normalisations' parameters no longer requiring gradients, in
    place: they are constants of every function of ``θ`` formed from it (else each evaluation would record them for
    autograd and return tensors that require a gradient)."""
    for part in module.modules():
        if is_normalisation(part):
            part.requires_grad_(False)
    return module


def affine_map(norm: nn.Module) -> tuple[Tensor, Tensor]:
    """A batch normalisation in evaluation mode as the per-channel map ``a·h + c`` it is: ``a = γ/√(σ² + ε)``,
    ``c = β − μ·a`` (``γ = 1``, ``β = 0`` without an affine part), detached."""
    bn = cast(nn.BatchNorm1d, norm)
    mean, var = cast(Tensor, bn.running_mean), cast(Tensor, bn.running_var)
    scale = (var + bn.eps).rsqrt()
    if bn.weight is not None:
        scale = scale * bn.weight
    shift = -mean * scale
    if bn.bias is not None:
        shift = shift + bn.bias
    return scale.detach(), shift.detach()
