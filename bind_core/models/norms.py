"""A batch normalisation between layers, as PyG's ``BasicGNN`` places it (``norm="batch_norm"``) and as a module of
one's own writes it (``self.bn1 = BatchNorm1d(hidden)`` after ``conv1``).

Training normalises each forward pass's rows by their own mean and variance and updates the running statistics
(``torch.nn.BatchNorm1d`` in training mode, as the owner trained it); the audited model is the deployed one, in
evaluation mode, where each normalisation is a fixed per-channel affine map ``γ·(h − μ)/√(σ² + ε) + β`` of the
running statistics ``μ``, ``σ²``. That map is elementwise, so a node's row depends on that node's row alone, as
without it, and every path that evaluates the model row by row applies it in place of the activation alone
(:meth:`bind_core.models.gnn.GNN.activate`).

**Held as given.** The attribution's parameters ``θ`` are the convolutions' and the head's
(:func:`bind_core.models.gnn.flat_parameters` leaves a normalisation's ``γ`` and ``β`` out): the refit that the
proximal response describes keeps each normalisation as deployed. It loses no model: the convolution before a
normalisation ends in a per-channel linear map with a bias (a GCN's or SAGE's weight rows, a GIN MLP's last layer, a
GAT's weight with its attention vectors rescaled), so any change of ``γ`` or ``β`` is a change of that
convolution's weights with the same outputs; only the distance that the proximal term and the weight decay measure
differs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar, cast

from torch import Tensor, nn

M = TypeVar("M", bound=nn.Module)

NORMS = ("", "batch")
"""``ModelConfig.norm``: none, or a batch normalisation after each convolution but the logits'."""


def make_norm(kind: str, width: int, *, eps: float, momentum: float | None, affine: bool) -> nn.Module:
    """The normalisation of one layer's ``width`` channels (``kind`` ``"batch"``)."""
    if kind != "batch":
        raise ValueError(f"no normalisation {kind!r}")
    return nn.BatchNorm1d(width, eps=eps, momentum=momentum, affine=affine)


def norm_act(norm: nn.Module | None, act: Callable[[Tensor], Tensor], h: Tensor, *, act_first: bool) -> Tensor:
    """A convolution's output ``h`` through its normalisation and the activation, in the model's order (PyG's
    ``act_first``: the activation before the normalisation)."""
    if norm is None:
        return act(h)
    return normalised(norm, act(h)) if act_first else act(normalised(norm, h))


def normalised(norm: nn.Module, h: Tensor) -> Tensor:
    """``norm`` over ``h``'s last axis, the channels, whatever axes come before it (a batch of members' rows, ``[k,
    rows, channels]``, evaluation mode only), where ``BatchNorm1d`` would read a 3-D input's second axis as them."""
    if h.dim() == 2:
        return cast(Tensor, norm(h))
    return cast(Tensor, norm(h.reshape(-1, h.shape[-1]))).reshape(h.shape)


def is_normalisation(module: nn.Module) -> bool:
    """Whether ``module`` is a normalisation whose parameters the attribution holds as given."""
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
