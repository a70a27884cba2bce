"""Message passing as sparse products: the CSR adjacency of each architecture's aggregation, GCN's normalisation,
the aggregated first-layer features a model starts from, and a per-graph cache of a model's prepared inputs.
"""

from __future__ import annotations

import threading
import warnings
import weakref
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from bind_core.data.graph import Graph
from bind_core.data.sparse import Adjacency, is_symmetric


@dataclass(frozen=True)
class GraphInputs:
    """What a model needs of a graph, precomputed once (see :meth:`GNN.prepare`).

    Shapes: ``x [n, d]``; ``edge_index [2, E']`` (with self-loops for GCN); ``edge_weight [E']`` (GCN's
    symmetric normalisation) or None; ``x_prop`` the aggregated features of a GCN/GIN/SAGE (``[n, d]``,
    ``[n, d]``, ``[n, 2d]``; :func:`aggregate_features`): a one-layer model's rows, a deeper model's first layer's
    input; None for GAT.
    """

    x: Tensor
    edge_index: Tensor
    edge_weight: Tensor | None
    x_prop: Tensor | None
    adjacency: Adjacency | None = None
    """GCN's ``Â`` as a CSR product (:mod:`bind_core.data.sparse`), used instead of PyG's scatter when present."""
    layer_edges: tuple[Tensor, ...] | None = None
    """GAT on a computation graph (:func:`~bind_core.training.compgraph.computation_graph`): each layer's edges, those
    into the rows the next layer (or the output) reads; ``None``: every layer takes ``edge_index``."""


def gcn_norm(edge_index: Tensor, num_nodes: int, dtype: torch.dtype = torch.float32) -> tuple[Tensor, Tensor]:
    """``Â = D̃^{-1/2} (A + I) D̃^{-1/2}`` as (edge_index with self-loops, edge weights).

    ``edge_index`` must hold no self-loops (a :class:`Graph` guarantees it). Shapes: ``[2, E] → [2, E+n], [E+n]``.
    """
    ei = with_self_loops(edge_index, num_nodes)
    deg = torch.bincount(ei[0], minlength=num_nodes).to(dtype)
    dinv = deg.pow(-0.5)
    return ei, dinv[ei[0]] * dinv[ei[1]]


def aggregate_features(
    arch: str, adjacency: Adjacency, x: Tensor, eps: float = 0.0, *, root: Tensor | None = None
) -> Tensor:
    """What the first layer of a GCN, GIN or SAGE aggregates before any weight: ``Â·X``; ``(1 + ε)·X + A·X``;
    ``[mean_N(X), X]``. Constant for a graph, so computed once: training and every evaluation then start from it,
    and a multi-layer model's first layer costs no sparse product (forward or backward). For a block of rows of
    the adjacency, ``root`` names those rows (their own features, for GIN and SAGE)."""
    return combine_aggregated(arch, adjacency @ x, x if root is None else x[root], eps)


def combine_aggregated(arch: str, summed: Tensor, own: Tensor, eps: float = 0.0) -> Tensor:
    """:func:`aggregate_features` from the adjacency's product ``summed`` (``A·X`` over some rows) and those rows'
    own features ``own``."""
    if arch == "gin":
        return summed + (1 + eps) * own
    if arch == "sage":
        return torch.cat([summed, own], dim=1)
    return summed


def with_self_loops(edge_index: Tensor, num_nodes: int) -> Tensor:
    """``edge_index`` (no self-loops) with one self-loop per node appended, as GCN's ``A + I`` needs."""
    loops = torch.arange(num_nodes, device=edge_index.device)
    return torch.cat([edge_index, torch.stack([loops, loops])], dim=1)


def message_adjacency(
    arch: str, edge_index: Tensor, num_nodes: int, dtype: torch.dtype, *, symmetric: bool | None = None
) -> tuple[Tensor | None, Adjacency | None]:
    """The linear aggregation of ``arch`` over ``edge_index`` as a CSR product, and the PyG layer's edge weights.

    GCN: ``Â = D̃^{-1/2}(A + I)D̃^{-1/2}`` over edges that already hold the self-loops (weights returned, as
    ``GCNConv`` takes them); SAGE: the mean over neighbours, ``D^{-1}A`` (an isolated node aggregates to zero);
    GIN: the sum, ``A``. GAT's attention is not linear: ``(None, None)``. The degrees are those of
    ``edge_index``, so the inputs of a graph with nodes removed renormalise by calling this on its edges.
    ``symmetric`` says whether ``edge_index`` holds every edge both ways (checked when None; a
    :class:`~bind_core.data.graph.Graph`'s edges do, and so do its edges with some nodes' edges removed both ways).
    """
    if arch == "gat":
        return None, None
    row = edge_index[0]
    deg = torch.bincount(row, minlength=num_nodes).to(dtype)
    if arch == "gcn":
        dinv = deg.pow(-0.5)
        weight = dinv[row] * dinv[edge_index[1]]
        if symmetric is None:
            symmetric = is_symmetric(edge_index, weight, num_nodes)
        return weight, Adjacency.from_edges(edge_index, weight, num_nodes, symmetric=symmetric)
    ones = torch.ones(row.numel(), dtype=dtype, device=edge_index.device)
    if arch == "gin":
        if symmetric is None:
            symmetric = is_symmetric(edge_index, ones, num_nodes)
        return None, Adjacency.from_edges(edge_index, ones, num_nodes, symmetric=symmetric)
    return None, Adjacency.from_edges(edge_index, ones / deg.clamp(min=1)[row], num_nodes)


def propagate(x: Tensor, edge_index: Tensor, edge_weight: Tensor) -> Tensor:
    """Sparse ``out[i] = Σ_j w_ij · x[j]`` over edges ``(i, j)``; shapes ``[n, d] → [n, d]``.

    A CSR sparse-dense product (about ten times faster than a gather and ``index_add`` on a CPU, and far less
    memory: no ``[E, d]`` message tensor); the edges are sorted by ``i`` first unless they already are.
    """
    n = x.shape[0]
    row, col = edge_index[0], edge_index[1]
    if row.numel() > 1 and not bool((row[1:] >= row[:-1]).all()):
        order = torch.argsort(row, stable=True)
        row, col, edge_weight = row[order], col[order], edge_weight[order]
    rowptr = torch.zeros(n + 1, dtype=torch.long, device=x.device)
    rowptr[1:] = torch.cumsum(torch.bincount(row, minlength=n), 0)
    with warnings.catch_warnings():  # "sparse CSR support is in beta": the product used here is long stable
        warnings.simplefilter("ignore", UserWarning)
        adj = torch.sparse_csr_tensor(rowptr, col, edge_weight.to(x.dtype), (n, n), check_invariants=False)
    return adj @ x


_PREPARED: dict[int, tuple[weakref.ref[Graph], dict[tuple[object, ...], GraphInputs]]] = {}
_PREPARED_LOCK = threading.Lock()


def prepared_inputs(graph: Graph, key: tuple[object, ...], build: Callable[[], GraphInputs]) -> GraphInputs:
    """A graph's prepared inputs for ``key`` (what they depend on), built on first use and cached with the graph.

    A few entries per graph (the oldest goes first); all of them are freed when the graph is.
    """
    with _PREPARED_LOCK:
        entry = _PREPARED.get(id(graph))
        if entry is None or entry[0]() is not graph:
            ident = id(graph)
            ref = weakref.ref(graph, lambda _r: _PREPARED.pop(ident, None))
            entry = (ref, {})
            _PREPARED[ident] = entry
        store = entry[1]
        cached = store.get(key)
    if cached is not None:
        return cached
    inputs = build()
    with _PREPARED_LOCK:
        if len(store) >= 4:
            store.pop(next(iter(store)))
        store[key] = inputs
    return inputs
