"""The layer arithmetic a :class:`~bind_core.models.gnn.GNN` shares with the paths that run its layers by hand: SAGE's
first layer as one product and its output normalisation, which order of a GCN layer's products costs less, and
dropout with cheap random bits."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from bind_core.data.sparse import Adjacency


def sage_first_layer(
    z: Tensor, weight_l: Tensor, bias_l: Tensor | None, weight_r: Tensor, *, normalize: bool = False
) -> Tensor:
    """SAGE's ``W_l·mean_N(X) + b + W_r·X`` from ``z = [mean_N(X) | X]`` as one product with ``[W_l | W_r]``
    (each row divided by its L2 norm where the layer normalises, :func:`sage_output`).
    Two products on ``z``'s column halves read strided rows and add two ``[n, d_out]`` results: on the 10⁶-node
    two-layer SAGE's computation graph (187,860 rows, 16 + 16 → 128, float64) the layer's forward and backward took
    1.26–1.79 s that way and 0.48 s this way (docs/SCALE.md, "sixth part"); equal to rounding."""
    return sage_output(F.linear(z, torch.cat([weight_l, weight_r], dim=1), bias_l), normalize)


def sage_output(out: Tensor, normalize: bool) -> Tensor:
    """A SAGE layer's output ``out`` as the layer returns it: each row divided by its L2 norm where it normalises
    (``normalize``; PyG's ``F.normalize(out, p=2, dim=-1)``, a norm below 10⁻¹² taken as 10⁻¹²), else as it is."""
    return F.normalize(out, p=2.0, dim=-1) if normalize else out


def aggregate_first(adjacency: Adjacency, d_in: int, d_out: int) -> bool:
    """Whether ``(A·h)·Wᵀ`` costs fewer multiplications than ``A·(h·Wᵀ)`` for ``A`` of shape ``[r, c]`` (``nnz``
    entries): ``nnz·d_in + r·d_in·d_out`` against ``c·d_in·d_out + nnz·d_out``. A last layer cut to the wanted rows
    (``r`` the training rows, ``c`` their neighbours) aggregates first: its weights then multiply ``r`` rows, not
    ``c``. Measured on the 20,000-node two-layer GCN's deletions (docs/SCALE.md)."""
    rows, cols = adjacency.shape
    nnz = int(adjacency.parts[1].numel())
    return nnz * d_in + rows * d_in * d_out < cols * d_in * d_out + nnz * d_out


def dropout(x: Tensor, p: float, training: bool) -> Tensor:
    """Dropout with a mask from 15 random bits per entry: the rate is ``p`` rounded to a multiple of 2⁻¹⁵, and the
    kept entries are scaled by the inverse of the exact keep rate (so the expectation is unchanged).

    ``F.dropout`` draws a Bernoulli variable per entry, which on the CPU costs 15 ns an entry: 20 ms for the
    ``20000 × 64`` hidden layer of a two-layer SAGE, half of a training epoch. Comparing 15-bit integers cut from
    64-bit random words (``random_`` fills 63 bits; each 16-bit quarter has 15 uniform low bits) costs a fifth of
    that. Deterministic under ``torch.manual_seed``, as ``F.dropout``.
    """
    if not training or p == 0.0:
        return x
    words = torch.empty((x.numel() + 3) // 4, dtype=torch.int64, device=x.device).random_()
    bits = words.view(torch.int16)[: x.numel()].view(x.shape) & 0x7FFF
    dropped = round(p * 32768)
    mask = (bits >= dropped).to(x.dtype).mul_(32768 / (32768 - dropped))
    return x * mask
