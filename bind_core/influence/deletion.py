"""Outputs of the nodes affected by deleting one training node, on the graph without it, in batches.

Deleting training node ``v`` changes the output of every node whose computation graph (its ``L``-hop
neighbourhood, ``L`` the number of message-passing layers) contains ``v``. For each such affected node ``j``
that matters to the estimate (a training node: the non-i.i.d. loss term; a test node: the direct change of
Γ), we need ``j``'s logits on ``G − v`` as a function of the parameters. These come in *pairs* ``(v, j)``.

* One-layer GCN, GIN and SAGE (row-separable models): ``j``'s aggregated row on ``G − v`` is recomputed
  directly, all pairs at once, with no graph forward: GCN ``z'_j = Σ_{u ∈ N[j] \\ {v}} x_u / sqrt(d̃'_j·d̃'_u)``
  with ``d̃' = d̃ − [adjacent to v]``; GIN ``z'_j = z_j − x_v``; SAGE ``mean'_j = (deg_j·mean_j − x_v)/(deg_j − 1)``.
* Any other model: for each ``v``, the subgraph induced by the nodes within ``2L`` hops of ``v`` minus ``v``
  holds the full computation graph of every affected node; GCN normalisation uses the degrees of ``G − v``
  (global degree minus adjacency to ``v``), not the subgraph's. The subgraphs of a chunk of ``v``'s are
  batched as one disjoint union and go through the model in one forward pass.

Approximation (documented in docs/METHOD.md): for GCN the degree change of ``v``'s neighbours also shifts the
rows of nodes two hops from ``v``; those second-order normalisation effects are left out, as in the paper,
whose computation graph of a one-layer GCN is the 1-hop neighbourhood.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
from torch import Tensor

from bind_core.influence.functional import FunctionalModel, forward_derivative
from bind_core.influence.incremental import IncrementalBatch, incremental_batches
from bind_core.models import GraphInputs
from bind_core.neighbourhood import Csr


@dataclass
class PairBatch:
    """Affected pairs ``(v, j)``: ``v_pos`` (position of ``v`` in ``train_idx``), ``node`` (``j``), and
    ``logits(θ)``: the logits ``[P, out]`` of each ``j`` on ``G − v``."""

    v_pos: Tensor
    node: Tensor
    logits: Callable[[Tensor], Tensor]

    def jvp(self, flat: Tensor, s: Tensor, column: int) -> tuple[Tensor, Tensor]:
        """The logits and their derivative along ``s[:, column]``."""
        return forward_derivative(self.logits, (flat,), (s[:, column],))


Batch = PairBatch | IncrementalBatch
"""What :func:`pair_batches` yields: ``v_pos``, ``node``, ``logits(θ)`` and ``jvp(θ, s, column)``."""


def _relevant(fm: FunctionalModel) -> Tensor:
    g = fm.graph
    mask = torch.zeros(g.num_nodes, dtype=torch.bool)
    mask[g.train_idx] = True
    mask[g.test_idx] = True
    return mask


def _edge_lookup(edge_index: Tensor, n: int) -> Callable[[Tensor, Tensor], Tensor]:
    keys = edge_index[0] * n + edge_index[1]  # sorted: a Graph's edge_index is sorted by (source, target)

    def has_edge(a: Tensor, b: Tensor) -> Tensor:
        q = a * n + b
        pos = torch.searchsorted(keys, q).clamp(max=max(keys.numel() - 1, 0))
        return (keys[pos] == q) if keys.numel() else torch.zeros_like(q, dtype=torch.bool)

    return has_edge


def pair_batches(
    fm: FunctionalModel,
    *,
    start: int = 0,
    stop: int | None = None,
    max_pairs: int = 200_000,
    max_nodes: int = 400_000,
) -> Iterator[Batch]:
    """The affected pairs of the deleted nodes ``train_idx[start:stop]``, in batches (see the module docstring).

    Row-separable models take the row shortcut; any other model the incremental path
    (:mod:`bind_core.influence.incremental`), which recomputes only the rows the deletion changes.
    """
    stop = int(fm.graph.train_idx.numel()) if stop is None else stop
    if fm.module.row_separable:
        yield from _row_batches(fm, max_pairs, start, stop)
    else:
        yield from incremental_batches(fm, max_nodes, start, stop)


def _row_batches(fm: FunctionalModel, max_pairs: int, first: int = 0, stop: int | None = None) -> Iterator[PairBatch]:
    g = fm.graph
    n = g.num_nodes
    stop = int(g.train_idx.numel()) if stop is None else stop
    deg = g.degree
    dtilde = (deg + 1).to(torch.float64)
    rowptr = torch.zeros(n + 1, dtype=torch.long)
    rowptr[1:] = torch.cumsum(deg, 0)
    # the deleted nodes' neighbour lists, read from the CSR rows (no scan of every edge)
    v_pos_all = torch.repeat_interleave(torch.arange(first, stop), deg[g.train_idx[first:stop]])
    v_all, j_all = _rows_of(g.train_idx[first:stop], g.edge_index[1], rowptr, deg)
    keep = _relevant(fm)[j_all]
    v_pos_all, v_all, j_all = v_pos_all[keep], v_all[keep], j_all[keep]
    adjacent = _adjacency_marks(g.edge_index[1], rowptr, n)
    x = fm.inputs.x.cpu()
    arch = fm.module.config.arch
    for start in range(0, v_all.numel(), max_pairs):
        v, j = v_all[start : start + max_pairs], j_all[start : start + max_pairs]
        v_pos = v_pos_all[start : start + max_pairs]
        gcn = arch == "gcn"
        z = _gcn_rows(fm, v, j, deg, dtilde, rowptr, adjacent, x) if gcn else _gin_sage_rows(fm, v, j, deg)

        def logits(flat: Tensor, z: Tensor = z) -> Tensor:
            return fm.logits_z(flat, z)

        yield PairBatch(v_pos, j, logits)


def _rows_of(nodes: Tensor, col: Tensor, rowptr: Tensor, deg: Tensor) -> tuple[Tensor, Tensor]:
    """``(owner, neighbour)`` for every edge leaving ``nodes`` (CSR rows, in the order of ``nodes``)."""
    counts = deg[nodes]
    owner = torch.repeat_interleave(nodes, counts)
    first = torch.cumsum(counts, 0) - counts
    offsets = torch.arange(owner.numel()) - torch.repeat_interleave(first, counts)
    return owner, col[torch.repeat_interleave(rowptr[nodes], counts) + offsets]


def _adjacency_marks(col: Tensor, rowptr: Tensor, n: int) -> Callable[[Tensor, Tensor], Tensor]:
    """``adjacent(u, v)``: is ``u`` a neighbour of ``v``, for queries grouped by ``v`` (runs of equal ``v``).

    Each run marks ``v``'s neighbours in one reusable ``[n]`` mask, reads the mask at its ``u``'s and clears
    it: ``O(deg v)`` per run plus ``O(1)`` per query, where a sorted-key lookup costs ``O(log E)`` per query
    (the difference between 0.5 s and several seconds at 10⁷ edges).
    """
    mask = torch.zeros(n, dtype=torch.bool)

    def adjacent(u: Tensor, v: Tensor) -> Tensor:
        out = torch.empty(u.numel(), dtype=torch.bool)
        if v.numel() == 0:
            return out
        starts = torch.nonzero(torch.cat([torch.tensor([True]), v[1:] != v[:-1]])).flatten().tolist()
        bounds = [*starts, v.numel()]
        for a, b in itertools.pairwise(bounds):
            node = int(v[a])
            nb = col[int(rowptr[node]) : int(rowptr[node + 1])]
            mask[nb] = True
            out[a:b] = mask[u[a:b]]
            mask[nb] = False
        return out

    return adjacent


def _gin_sage_rows(fm: FunctionalModel, v: Tensor, j: Tensor, deg: Tensor) -> Tensor:
    """Aggregated rows of ``j`` on ``G − v``: GIN's sum loses ``x_v``; SAGE's mean is taken over one fewer."""
    assert fm.inputs.x_prop is not None
    x, z = fm.inputs.x, fm.inputs.x_prop[j.to(fm.device)]
    xv = x[v.to(fm.device)]
    if fm.module.config.arch == "gin":
        return z - xv
    d = fm.module.in_dim
    dj = deg[j].to(x.dtype).to(fm.device).unsqueeze(1)
    mean = torch.where(dj > 1, (dj * z[:, :d] - xv) / (dj - 1).clamp(min=1), torch.zeros_like(xv))
    return torch.cat([mean, z[:, d:]], dim=1)


def _gcn_rows(
    fm: FunctionalModel,
    v: Tensor,
    j: Tensor,
    deg: Tensor,
    dtilde: Tensor,
    rowptr: Tensor,
    adjacent: Callable[[Tensor, Tensor], Tensor],
    x: Tensor,
) -> Tensor:
    """Rows of ``Â·X`` for ``j`` on ``G − v`` with the degrees of ``G − v``, from the full graph's rows.

    With ``S_j = Σ_{u∈N[j]} x_u/√d̃_u = √d̃_j·z_j`` (``N[j]`` with ``j``), deleting ``v`` (a neighbour of ``j``)
    removes ``v``'s term and lowers by one the degree of every node adjacent to ``v`` (``j`` itself and the
    common neighbours of ``j`` and ``v``), so

        z'_j = [S_j − x_v/√d̃_v + Σ_{u ∈ {j} ∪ (N(j) ∩ N(v))} x_u·(1/√(d̃_u − 1) − 1/√d̃_u)] / √(d̃_j − 1).

    Only the triangles ``(v, j, u)`` touch feature rows; finding them scans ``j``'s neighbour list (integer
    work), so the float work grows with the number of affected pairs, not with pairs times degree.
    """
    assert fm.inputs.x_prop is not None
    g = fm.graph
    counts = deg[j]
    rep = torch.repeat_interleave(torch.arange(j.numel()), counts)
    offsets = torch.arange(rep.numel()) - torch.repeat_interleave(torch.cumsum(counts, 0) - counts, counts)
    u = g.edge_index[1][rowptr[j][rep] + offsets]
    triangle = adjacent(u, v[rep])  # u is adjacent to both j and v (never v itself: no self-loops)
    rep, u = rep[triangle], u[triangle]
    inv = dtilde.rsqrt()
    change = (dtilde - 1.0).clamp(min=1.0).rsqrt() - inv  # 1/√(d̃ − 1) − 1/√d̃, for nodes adjacent to v
    z = fm.inputs.x_prop[j.to(fm.device)].cpu().to(torch.float64)
    s = z * dtilde[j].sqrt().unsqueeze(1) - x[v] * inv[v].unsqueeze(1) + x[j] * change[j].unsqueeze(1)
    s.index_add_(0, rep, x[u] * change[u].unsqueeze(1))
    return (s * (dtilde[j] - 1.0).rsqrt().unsqueeze(1)).to(fm.device, fm.inputs.x_prop.dtype)


def _subgraph_batches(  # the reference the incremental path is tested against: whole model, 2L-hop subgraphs
    fm: FunctionalModel, max_nodes: int, first: int = 0, stop: int | None = None
) -> Iterator[PairBatch]:
    g = fm.graph
    n, hops = g.num_nodes, fm.module.config.layers
    ei = g.edge_index
    csr = Csr.from_edge_index(ei, n)
    relevant = _relevant(fm)
    has_edge = _edge_lookup(ei, n)
    is_gcn = fm.module.config.arch == "gcn"
    dtilde = (g.degree + 1).to(torch.float64)
    parts: list[tuple[int, Tensor, Tensor, Tensor, Tensor | None, Tensor]] = []
    size = 0
    stop = int(g.train_idx.numel()) if stop is None else stop
    for v_pos in range(first, stop):
        v = int(g.train_idx[v_pos])
        seed = torch.tensor([v])
        near = csr.k_hop(seed, hops)
        targets = near[(near != v) & relevant[near]]
        if targets.numel() == 0:
            continue
        nodes = csr.k_hop(seed, 2 * hops)
        nodes = nodes[nodes != v]
        sub_ei = csr.induced(nodes)
        weights = None
        if is_gcn:
            d = dtilde[nodes] - has_edge(nodes, torch.full_like(nodes, v)).to(torch.float64)
            loops = torch.arange(nodes.numel())
            sub_ei = torch.cat([sub_ei, torch.stack([loops, loops])], dim=1)
            dinv = d.pow(-0.5)
            weights = dinv[sub_ei[0]] * dinv[sub_ei[1]]
        parts.append((v_pos, nodes, sub_ei, torch.searchsorted(nodes, targets), weights, targets))
        size += nodes.numel()
        if size >= max_nodes:
            yield _union(fm, parts)
            parts, size = [], 0
    if parts:
        yield _union(fm, parts)


def _union(fm: FunctionalModel, parts: list[tuple[int, Tensor, Tensor, Tensor, Tensor | None, Tensor]]) -> PairBatch:
    xs, eis, ws, rows, v_pos, nodes_out = [], [], [], [], [], []
    offset = 0
    for vp, nodes, sub_ei, target_local, weights, targets in parts:
        xs.append(fm.inputs.x[nodes.to(fm.device)])
        eis.append(sub_ei + offset)
        if weights is not None:
            ws.append(weights)
        rows.append(target_local + offset)
        v_pos.append(torch.full((targets.numel(),), vp, dtype=torch.long))
        nodes_out.append(targets)
        offset += nodes.numel()
    inputs = GraphInputs(
        x=torch.cat(xs),
        edge_index=torch.cat(eis, dim=1).to(fm.device),
        edge_weight=torch.cat(ws).to(fm.device, torch.float64) if ws else None,
        x_prop=None,
    )
    row_index = torch.cat(rows).to(fm.device)

    def logits(flat: Tensor) -> Tensor:
        return fm.logits(flat, row_index, inputs)

    return PairBatch(torch.cat(v_pos), torch.cat(nodes_out), logits)
