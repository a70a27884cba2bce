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

from bind_core.influence.functional import FunctionalModel, estimate_targets, forward_derivative
from bind_core.influence.incremental import IncrementalBatch, incremental_batches
from bind_core.influence.neighbourhood import Csr, member
from bind_core.models.propagation import GraphInputs


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


def pair_batches(
    fm: FunctionalModel,
    *,
    start: int = 0,
    stop: int | None = None,
    max_pairs: int = 200_000,
    max_nodes: int = 400_000,
    targets: Tensor | None = None,
    check: Callable[[], None] | None = None,
) -> Iterator[Batch]:
    """The affected pairs of the deleted nodes ``train_idx[start:stop]``, in batches (see the module docstring).

    Row-separable models take the row shortcut; any other model the incremental path
    (:mod:`bind_core.influence.incremental`), which recomputes only the rows the deletion changes. ``targets``
    (an ``[n]`` mask) are the affected nodes worth yielding; default: training and test nodes
    (:func:`~bind_core.influence.functional.estimate_targets`). ``check()`` is called for every deleted node
    while the incremental path assembles a batch (it may raise to abort).
    """
    stop = int(fm.graph.train_idx.numel()) if stop is None else stop
    relevant = estimate_targets(fm.graph) if targets is None else targets
    if fm.module.row_separable:
        yield from _row_batches(fm, max_pairs, start, stop, relevant)
    else:
        yield from incremental_batches(fm, max_nodes, start, stop, relevant, check)


def _row_batches(
    fm: FunctionalModel, max_pairs: int, first: int = 0, stop: int | None = None, relevant: Tensor | None = None
) -> Iterator[PairBatch]:
    g = fm.graph
    stop = int(g.train_idx.numel()) if stop is None else stop
    deg = g.degree
    dtilde = (deg + 1).to(torch.float64)
    csr = Csr.of_degrees(g.edge_index, deg)
    # the deleted nodes' neighbour lists, read from their CSR rows (no scan of every edge)
    deleted = g.train_idx[first:stop]
    owner, j_all = csr.neighbours(deleted)
    keep = (estimate_targets(fm.graph) if relevant is None else relevant)[j_all]
    owner, j_all = owner[keep], j_all[keep]
    v_pos_all, v_all = owner + first, deleted[owner]
    adjacent = _adjacency_marks(csr)
    x = fm.inputs.x.cpu()
    gcn = fm.module.config.arch == "gcn"
    for start in range(0, v_all.numel(), max_pairs):
        v, j = v_all[start : start + max_pairs], j_all[start : start + max_pairs]
        v_pos = v_pos_all[start : start + max_pairs]
        z = _gcn_rows(fm, v, j, dtilde, csr, adjacent, x) if gcn else _gin_sage_rows(fm, v, j, deg)

        def logits(flat: Tensor, z: Tensor = z) -> Tensor:
            return fm.logits_z(flat, z)

        yield PairBatch(v_pos, j, logits)


def _adjacency_marks(csr: Csr) -> Callable[[Tensor, Tensor], Tensor]:
    """``adjacent(u, v)``: is ``u`` a neighbour of ``v``, for queries grouped by ``v`` (runs of equal ``v``).

    Each run marks ``v``'s neighbours in one reusable ``[n]`` mask, reads the mask at its ``u``'s and clears
    it: ``O(deg v)`` per run plus ``O(1)`` per query, where a sorted-key lookup costs ``O(log E)`` per query
    (the difference between 0.5 s and several seconds at 10⁷ edges).
    """
    mask = torch.zeros(csr.num_nodes, dtype=torch.bool)

    def adjacent(u: Tensor, v: Tensor) -> Tensor:
        out = torch.empty(u.numel(), dtype=torch.bool)
        if v.numel() == 0:
            return out
        starts = torch.nonzero(torch.cat([torch.tensor([True]), v[1:] != v[:-1]])).flatten().tolist()
        for a, b in itertools.pairwise([*starts, v.numel()]):
            nb = csr.neighbours_of(int(v[a]))
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
    dtilde: Tensor,
    csr: Csr,
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
    rep, u = csr.neighbours(j)
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
    hops = fm.module.config.layers
    ei = g.edge_index
    csr = Csr.of_degrees(ei, g.degree)
    relevant = estimate_targets(fm.graph)
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
            d = dtilde[nodes] - member(nodes, csr.neighbours_of(v)).to(torch.float64)
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
