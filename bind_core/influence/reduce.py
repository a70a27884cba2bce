"""The model inputs of ``G − S`` for many node sets ``S`` of one model, each in time proportional to what ``S``
touches rather than to the graph.

The step estimate (:mod:`bind_core.influence.step`) evaluates the model on ``G − v`` for every training node ``v``,
in the full graph's numbering. Rebuilding the adjacency of ``G − v`` costs passes over every edge (a 20,000-node,
420,000-entry graph: ~12 ms, plus ~11 ms to cut the training and test rows' block and its transpose), a third of
what a two-layer GCN's deletion cost. Here the CSR structure of the full graph is kept, and a deletion only
rewrites values:

* the entries of ``S``'s rows and columns become explicit zeros (a deleted node keeps GCN's self-loop, which
  touches no other node), so every other node's output is exactly its output on ``G − S``;
* the entries whose value depends on a changed degree are recomputed: GCN's ``d_i^{-1/2}·d_j^{-1/2}`` in the rows
  and columns of ``S ∪ N(S)``; SAGE's ``1/d_i`` in the rows of ``S ∪ N(S)``; GIN's ones need nothing more;
* the aggregated features (the first layer's input) move by the rewritten entries' change, in the rows whose adjacency
  row changed;
* the block of the rows the estimate reads (training and test rows) and its transpose, and the training nodes'
  computation graph (:meth:`GraphReducer.restrict`), are copied from their values on ``G``, made once, and patched at
  the rewritten entries: a copy, not a gather through an index map (making a 20,000-node GCN's reduced inputs this
  way took 2.8 ms a deletion instead of 4.9).

A graph's edges are stored both ways (:class:`~bind_core.data.graph.Graph`), so the structure is symmetric and each
entry's mirror ``(j, i)`` is found once. GAT's attention is not a fixed linear aggregation: its edges are masked
instead (one pass over the edges per deletion).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from bind_core.data.sparse import Adjacency, row_entries
from bind_core.influence.functional import FunctionalModel
from bind_core.models.propagation import GraphInputs, aggregate_features, message_adjacency
from bind_core.training.compgraph import attention_layers


@dataclass(frozen=True)
class Reduction:
    """What :meth:`GraphReducer.reduce` gives for one node set ``S``."""

    inputs: GraphInputs
    """The inputs of ``G − S`` in the full graph's numbering."""
    changed: Tensor | None
    """The rows whose aggregated features ``S`` changed (sorted; ``None`` for GAT, which has none): every other row
    of the first layer's output is the full graph's at any weights."""
    affected: Tensor | None = None
    """The positions of the adjacency's entries that ``S`` rewrote (``None`` for GAT)."""
    new: Tensor | None = None
    """Their values on ``G − S``."""
    dropped: Tensor | None = None
    """GAT: the nodes ``S`` whose edges were masked (``None`` for the others)."""


class GraphReducer:
    """``reducer(nodes)``: the inputs of ``G − nodes`` (see the module docstring); ``rows``: index tensors of rows
    whose blocks of the adjacency each reduced input carries ready-cut (the model's last layer computes those rows
    only; :meth:`bind_core.data.sparse.Adjacency.rows` finds a block by the identity of its index tensor)."""

    def __init__(self, fm: FunctionalModel, rows: Tensor | Sequence[Tensor] = ()) -> None:
        self.fm = fm
        self.n = n = fm.graph.num_nodes
        self.arch = fm.module.config.arch
        self.rows = (rows,) if isinstance(rows, Tensor) else tuple(rows)
        inputs, dtype = fm.inputs, fm.theta.dtype
        if self.arch == "gat":
            ei = inputs.edge_index
            order = torch.argsort(ei[0] * n + ei[1])
            self.edges = ei[:, order]
            return
        adjacency = inputs.adjacency
        if adjacency is None:  # a one-layer model keeps only its aggregated rows: make the adjacency once
            _, adjacency = message_adjacency(self.arch, inputs.edge_index, n, dtype, symmetric=True)
            assert adjacency is not None
        self.crow, self.col, self.values = adjacency.parts
        device = self.col.device
        self.count = self.crow.diff()
        self.row = torch.repeat_interleave(torch.arange(n, device=device), self.count)
        self.mirror = torch.argsort(self.col * n + self.row)  # the position of (j, i) for each entry (i, j)
        self.structure = torch.stack([self.row, self.col])  # every G − S's edges: removed entries are zeros
        self.eps = float(getattr(fm.module.convs[0], "eps", 0.0))
        if inputs.x_prop is not None and inputs.adjacency is not None:
            self.x_prop = inputs.x_prop
        else:
            self.x_prop = aggregate_features(self.arch, adjacency, inputs.x, self.eps)
        self.blocks = [_BlockCut(self.crow, self.col, n, r.to(device), self.values) for r in self.rows]
        self.mirrored = None if self.arch != "sage" else _Gathered(self.values, self.mirror)

    def __call__(self, nodes: int | Tensor) -> GraphInputs:
        return self.reduce(nodes).inputs

    def reduce(self, nodes: int | Tensor) -> Reduction:
        """The inputs of ``G − nodes``, the rows whose aggregated features changed and the entries rewritten."""
        fm = self.fm
        if self.arch == "gat":
            dropped = torch.as_tensor(nodes, dtype=torch.long, device=self.edges.device).reshape(-1)
            return Reduction(self._masked(dropped), None, dropped=dropped)
        n, dtype = self.n, fm.theta.dtype
        drop = torch.unique(torch.as_tensor(nodes, dtype=torch.long, device=self.col.device).reshape(-1))
        in_s = torch.zeros(n, dtype=torch.bool, device=drop.device)
        in_s[drop] = True
        own = row_entries(self.crow, drop)[1]  # the entries of S's rows
        touched = torch.unique(torch.cat([drop, self.col[own]]))  # S ∪ N(S): the rows whose degree changes
        in_rows = row_entries(self.crow, touched)[1]
        affected = torch.unique(torch.cat([in_rows, self.mirror[in_rows]])) if self.arch == "gcn" else in_rows
        # The degrees of G − S (GCN's self-loops counted, as in Â): N(S) loses its edges to S, S keeps its loop.
        degree = self.count.to(dtype).clone()
        off = own[self.row[own] != self.col[own]]
        degree.index_add_(0, self.col[off], torch.full((off.numel(),), -1.0, dtype=dtype, device=drop.device))
        degree[drop] = 1.0 if self.arch == "gcn" else 0.0
        r, c = self.row[affected], self.col[affected]
        alive = (~(in_s[r] | in_s[c]) | (r == c)).to(dtype)
        return self._reduced(affected, alive, degree)

    def reduce_edges(self, pairs: Tensor) -> Reduction:
        """The inputs of ``G − pairs`` (undirected edges, ``[k, 2]``: both directions go), as :meth:`reduce` gives
        those of ``G − S``: the edges' entries become explicit zeros, and the entries whose value depends on an
        endpoint's degree are recomputed (GCN: the endpoints' rows and columns; SAGE: their rows; GIN: the
        edges' entries only, within the endpoints' rows).

        Args:
            pairs: the edges, each an existing edge of the graph.

        Returns:
            The reduced inputs, the rows whose aggregated features changed and the entries rewritten.
        """
        if self.arch == "gat":
            raise ValueError("a GAT's deletions mask edges; its reducer rewrites no values")
        n, dtype = self.n, self.fm.theta.dtype
        pairs = torch.as_tensor(pairs, dtype=torch.long, device=self.col.device).reshape(-1, 2)
        own = row_entries(self.crow, torch.unique(pairs.reshape(-1)))[1]  # the endpoints' rows
        gone = torch.cat([pairs[:, 0] * n + pairs[:, 1], pairs[:, 1] * n + pairs[:, 0]])
        removed = own[torch.isin(self.row[own] * n + self.col[own], gone) & (self.row[own] != self.col[own])]
        degree = self.count.to(dtype).clone()
        degree.index_add_(0, self.row[removed], torch.full((removed.numel(),), -1.0, dtype=dtype, device=own.device))
        affected = torch.unique(torch.cat([own, self.mirror[own]])) if self.arch == "gcn" else own
        alive = (~torch.isin(affected, removed)).to(dtype)
        return self._reduced(affected, alive, degree)

    def _reduced(self, affected: Tensor, alive: Tensor, degree: Tensor) -> Reduction:
        """The reduction whose rewritten entries are ``affected``: kept where ``alive`` (1, else an explicit 0),
        normalised with the reduced graph's ``degree`` (GCN's self-loops counted)."""
        fm, n = self.fm, self.n
        r, c = self.row[affected], self.col[affected]
        if self.arch == "gcn":
            dinv = degree.pow(-0.5)
            new = alive * dinv[r] * dinv[c]
        elif self.arch == "gin":
            new = alive
        else:  # sage: the mean over the remaining neighbours
            new = alive / degree.clamp(min=1)[r]
        new = new.to(self.values.dtype)
        values = self.values.clone()
        values[affected] = new
        parts = (self.crow, self.col, values)
        transposed = parts if self.mirrored is None else (self.crow, self.col, self.mirrored(affected, new)[0])
        adjacency = Adjacency(parts, transposed, (n, n))
        for rows, block in zip(self.rows, self.blocks, strict=True):
            adjacency.keep_block(rows, block(affected, new))
        changed = torch.unique(r)
        # The aggregated features move by the rewritten entries' change: z_i += Σ (new_ij − old_ij)·x_j over them (the
        # aggregated half of SAGE's [A·X | X]; GIN's own term does not move). One scatter over the rewritten entries
        # rather than the changed rows' products again (0.3–0.8 ms of a 20,000-node GCN's deletion).
        x = fm.inputs.x
        z = self.x_prop.clone()
        moved = (new - self.values[affected]).to(x.dtype).unsqueeze(1) * x[c]
        z[:, : x.shape[1]].index_add_(0, r, moved)
        weight = values if self.arch == "gcn" else None
        inputs = GraphInputs(x, self.structure, weight, x_prop=z, adjacency=adjacency)
        return Reduction(inputs, changed, affected, new)

    def restrict(self, nodes: Tensor, rows: Tensor) -> Callable[[Reduction], GraphInputs]:
        """A view of the reduced inputs on ``nodes`` (sorted: the training nodes' computation graph of ``G``,
        :mod:`bind_core.training.compgraph`): ``view(reducer.reduce(S))`` are the inputs of ``G − S`` restricted to
        ``nodes × nodes``, with the values of ``G − S`` (its degrees, its aggregated features), renumbered to positions
        in ``nodes``, the block of ``rows`` (positions in ``nodes``) cut. Deleting nodes only removes edges, so the
        training nodes' computation graph of ``G − S`` lies inside that of ``G``, and the training objective there is
        ``G − S``'s exactly, at a cost proportional to ``nodes``. The index maps are made once, here."""
        if self.arch == "gat":
            return self._attention_view(nodes)
        nodes = nodes.to(self.col.device)
        local, take = row_entries(self.crow, nodes)
        cols = self.col[take]
        pos = torch.searchsorted(nodes, cols).clamp(max=max(nodes.numel() - 1, 0))
        keep = nodes[pos] == cols
        row, col, source = local[keep], pos[keep], take[keep]  # rows sorted, columns sorted within each row
        size = int(nodes.numel())
        crow = torch.zeros(size + 1, dtype=torch.long, device=nodes.device)
        crow[1:] = torch.cumsum(torch.bincount(row, minlength=size), 0)
        order = torch.argsort(col * max(size, 1) + row)
        crow_t = torch.zeros(size + 1, dtype=torch.long, device=nodes.device)
        crow_t[1:] = torch.cumsum(torch.bincount(col, minlength=size), 0)
        row_t = row[order].contiguous()
        structure = torch.stack([row, col])
        rows = rows.to(nodes.device)
        gathered = _Gathered(self.values, source, order)
        block = _BlockCut(crow, col, size, rows, self.values, parent=gathered)
        x = self.fm.inputs.x[nodes.to(self.fm.inputs.x.device)]

        def view(reduction: Reduction) -> GraphInputs:
            inputs, affected, new = reduction.inputs, reduction.affected, reduction.new
            assert inputs.x_prop is not None and affected is not None and new is not None
            kept, kept_t = gathered(affected, new)
            assert kept_t is not None
            adjacency = Adjacency((crow, col, kept), (crow_t, row_t, kept_t), (size, size))
            adjacency.keep_block(rows, block(affected, new))
            weight = kept if self.arch == "gcn" else None
            z = inputs.x_prop[nodes.to(inputs.x_prop.device)]
            return GraphInputs(x=x, edge_index=structure, edge_weight=weight, x_prop=z, adjacency=adjacency)

        return view

    def _attention_view(self, nodes: Tensor) -> Callable[[Reduction], GraphInputs]:
        """:meth:`restrict` for a GAT: its computation graph's inputs
        (:func:`~bind_core.training.compgraph.attention_graph`, on ``nodes``) without the edges of the deleted nodes,
        each layer's edges masked."""
        sub = self.fm.objective_rows().inputs
        assert sub.layer_edges is not None, "a GAT's objective lives on its computation graph"
        ids = nodes.to(self.edges.device)
        lists = (sub.edge_index, *sub.layer_edges)
        ends = [(ids[e[0]], ids[e[1]]) for e in lists]  # each edge's endpoints in the whole graph's numbering

        def view(reduction: Reduction) -> GraphInputs:
            kept = self._unmasked(reduction, lists, ends)
            return GraphInputs(x=sub.x, edge_index=kept[0], edge_weight=None, x_prop=None, layer_edges=kept[1:])

        return view

    def attention_rows(self, rows: Tensor) -> Callable[[Reduction], GraphInputs]:
        """A GAT's inputs of ``G − S`` from which only ``rows``' outputs are read (the test nodes': Γ), in the full
        graph's numbering: each layer takes only the edges into the rows the next one reads
        (:func:`~bind_core.training.compgraph.attention_layers`), less those of the deleted nodes."""
        if self.arch != "gat":
            raise ValueError("only a GAT's deletions mask edges")
        layers = len(self.fm.module.convs)
        _, lists = attention_layers(self.edges, self.n, rows.to(self.edges.device), layers)

        def view(reduction: Reduction) -> GraphInputs:
            kept = self._unmasked(reduction, lists, lists)
            x, edges = self.fm.inputs.x, reduction.inputs.edge_index
            return GraphInputs(x=x, edge_index=edges, edge_weight=None, x_prop=None, layer_edges=kept)

        return view

    def _unmasked(
        self, reduction: Reduction, lists: Sequence[Tensor], ends: Sequence[tuple[Tensor, Tensor] | Tensor]
    ) -> tuple[Tensor, ...]:
        """Each edge list of ``lists`` without the edges of the nodes ``reduction`` deleted, ``ends`` giving each
        list's endpoints in the whole graph's numbering."""
        assert reduction.dropped is not None
        drop = torch.zeros(self.n, dtype=torch.bool, device=self.edges.device)
        drop[reduction.dropped] = True
        return tuple(e[:, ~(drop[a] | drop[b])] for e, (a, b) in zip(lists, ends, strict=True))

    def _masked(self, nodes: int | Tensor) -> GraphInputs:
        """GAT: the edges without those of ``nodes`` (PyG's attention layer adds its own self-loops)."""
        drop = torch.zeros(self.n, dtype=torch.bool, device=self.edges.device)
        drop[torch.as_tensor(nodes, dtype=torch.long, device=drop.device).reshape(-1)] = True
        keep = ~(drop[self.edges[0]] | drop[self.edges[1]])
        return GraphInputs(x=self.fm.inputs.x, edge_index=self.edges[:, keep], edge_weight=None, x_prop=None)


def _inverse(index: Tensor, size: int) -> Tensor:
    """``out[index[k]] = k`` and −1 elsewhere, over ``size`` positions (int32 where that holds them: these maps span the
    whole matrix's entries)."""
    dtype = torch.int32 if size < 2**31 else torch.long
    out = torch.full((size,), -1, dtype=dtype, device=index.device)
    out[index] = torch.arange(index.numel(), dtype=dtype, device=index.device)
    return out


class _Gathered:
    """Entries gathered at ``source`` from the full matrix's values (a block's, a view's, a mirror's) or from another
    gathered array (``parent``: a block of a view), and optionally their transpose's order: their values on ``G``,
    gathered once, and per deletion a copy with the rewritten entries patched in, rather than a new gather. One
    inverse map of the source spans the parent's entries; the transpose is patched through a map of the array's own
    size."""

    def __init__(
        self, values: Tensor, source: Tensor, order: Tensor | None = None, parent: _Gathered | None = None
    ) -> None:
        self.parent = parent
        self.base = values[source]
        self.slot = _inverse(source, values.numel())
        self.base_t = None if order is None else self.base[order]
        self.slot_t = None if order is None else _inverse(order, order.numel())

    def landing(self, affected: Tensor, new: Tensor) -> tuple[Tensor, Tensor]:
        """Where the full matrix's rewritten entries ``affected`` land here, and their values ``new`` there."""
        if self.parent is not None:
            affected, new = self.parent.landing(affected, new)
        slots = self.slot[affected].long()
        hit = slots >= 0
        return slots[hit], new[hit]

    def __call__(self, affected: Tensor, new: Tensor) -> tuple[Tensor, Tensor | None]:
        """The gathered values, and their transpose's (when kept), with the entries ``affected`` set to ``new``."""
        positions, values = self.landing(affected, new)
        out = self.base.clone()
        out[positions] = values
        if self.base_t is None or self.slot_t is None:
            return out, None
        out_t = self.base_t.clone()
        out_t[self.slot_t[positions].long()] = values
        return out, out_t


class _BlockCut:
    """The block ``A[rows]`` of an ``n``-column CSR matrix (``crow``, ``col``) and its transpose, with the values of
    the full matrix's entries (``values``), or of a view of it (``parent``: the view's gathered values), patched per
    deletion."""

    def __init__(
        self, crow: Tensor, col: Tensor, n: int, rows: Tensor, values: Tensor, parent: _Gathered | None = None
    ) -> None:
        local, source = row_entries(crow, rows)
        self.crow = torch.zeros(rows.numel() + 1, dtype=torch.long, device=rows.device)
        self.crow[1:] = torch.cumsum(crow.diff()[rows], 0)
        self.col = col[source]
        order = torch.argsort(self.col * max(rows.numel(), 1) + local)
        self.crow_t = torch.zeros(n + 1, dtype=torch.long, device=rows.device)
        self.crow_t[1:] = torch.cumsum(torch.bincount(self.col, minlength=n), 0)
        self.col_t = local[order].contiguous()
        self.values = _Gathered(values if parent is None else parent.base, source, order, parent)
        self.shape = (int(rows.numel()), n)

    def __call__(self, affected: Tensor, new: Tensor) -> Adjacency:
        """The block with the full matrix's entries ``affected`` set to ``new``."""
        values, values_t = self.values(affected, new)
        assert values_t is not None
        return Adjacency((self.crow, self.col, values), (self.crow_t, self.col_t, values_t), self.shape)
