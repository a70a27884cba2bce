"""Outputs on ``G − v`` for models of any depth, recomputing only the rows that deleting ``v`` changes.

Deleting training node ``v`` changes layer ``l``'s output (``l = 1..L``) only at the nodes within ``l`` hops of
``v`` (``l + 1`` for GCN, whose normalisation also changes at ``v``'s neighbours' neighbours). Every other row of
every layer is the same as on ``G``. So, for each ``v``, layer ``l`` is recomputed only at those *changed*
nodes, from their in-neighbours' layer ``l − 1`` rows: recomputed ones where they changed, the full graph's
rows (computed once for all ``v``) elsewhere. The last layer is recomputed only at the targets the estimate
needs (training and test nodes within ``L`` hops of ``v``). The cost per ``v`` is the size of those
neighbourhoods, not of the ``2L``-hop subgraph the generic path (:func:`deletion._subgraph_batches`) runs the
whole model on, and nothing per ``v`` touches the rest of the graph.

Differentiation: the estimate needs ``∂logits/∂θ · s`` along the two columns of ``s``. The full graph's rows
``H^l(θ)`` depend on ``θ`` too, so they are computed with their tangents ``∂H^l/∂θ · s`` once per column (one
forward-mode pass over the graph each), and enter each batch's ``jvp`` as inputs with those tangents.
The result is exactly the generic path's (tested), which is exactly a forward pass on ``G − v``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import cast

import torch
from torch import Tensor, nn
from torch.func import functional_call
from torch.nn import functional as F

from bind_core.data.sparse import Adjacency, spmm
from bind_core.influence.functional import FunctionalModel, estimate_targets, forward_derivative
from bind_core.influence.neighbourhood import Csr, member
from bind_core.influence.rowblocks import (
    activated_first,
    activated_first_jvp,
    activated_first_rows_jvp,
    blocked,
    tangents_by_batch,
)
from bind_core.models.layers import sage_first_layer, sage_output


@dataclass
class _Layer:
    """One layer of one batch (a disjoint union over the batch's deleted nodes).

    ``sources``: the global node of each input row; ``from_prev``: True where that row is one the previous
    layer recomputed (its index in the previous layer's outputs in ``prev_index``), else it is the full
    graph's row ``sources``; ``edge_index``/``edge_weight``: the union's edges in input-row numbering;
    ``targets``: the input rows whose outputs this layer returns, in order; ``adjacency``: for GCN, GIN and SAGE,
    the layer's aggregation as a ``[targets, input rows]`` CSR matrix, so that it computes the target rows only,
    by one sparse product (``None`` for GAT, whose PyG layer runs on the edges).
    """

    sources: Tensor
    from_prev: Tensor
    prev_index: Tensor
    edge_index: Tensor
    edge_weight: Tensor | None
    targets: Tensor
    adjacency: Adjacency | None = None


class FullGraphRows:
    """The full graph's layer outputs ``H^1..H^{L-1}`` at ``θ̂``, activated (what the next layer reads: the activation
    is applied once here rather than to every batch's copy of the rows), and, per column of ``s``, their tangents."""

    def __init__(self, fm: FunctionalModel) -> None:
        self.fm = fm
        self._values: list[Tensor] | None = None
        self._tangents: dict[int, list[Tensor]] = {}
        self._s: Tensor | None = None

    def values(self) -> list[Tensor]:
        if self._values is None:
            if blocked(self.fm):
                self._values = _deeper(self.fm, [activated_first(self.fm, self.fm.theta)])
            else:
                with torch.no_grad():
                    self._values = [h.detach() for h in _activated(self.fm, self.fm.theta)]
        return self._values

    def tangents(self, s: Tensor, column: int) -> list[Tensor]:
        if self._s is not s:
            self._tangents, self._s = {}, s
        if column not in self._tangents:
            if blocked(self.fm):  # the first layer block by block (rowblocks), the layers after it whole
                value, tangent = activated_first_jvp(self.fm, s[:, column])
                primal, tangents = _deeper_jvp(self.fm, s[:, column], value, tangent)
            else:
                primal, tangents = forward_derivative(
                    lambda f: tuple(_activated(self.fm, f)), (self.fm.theta,), (s[:, column],)
                )
            self._values = [h.detach() for h in primal]
            self._tangents[column] = [t.detach() for t in tangents]
        return self._tangents[column]


def _deeper(fm: FunctionalModel, rows: list[Tensor]) -> list[Tensor]:
    """``rows`` (``[act(H¹)]``) extended by ``act(H^l)`` for ``l = 2..L−1``, no gradient: the CSR layers after the
    first on every row."""
    params, activate = fm.unflatten(fm.theta), fm.module.activate
    assert fm.inputs.adjacency is not None
    with torch.no_grad():
        for layer in range(1, len(fm.module.convs) - 1):
            h = rows[-1]
            rows.append(activate(layer, csr_conv_step(fm, params, layer, fm.inputs.adjacency, h, h)))
    return rows


def _deeper_jvp(
    fm: FunctionalModel, direction: Tensor, value: Tensor, tangent: Tensor
) -> tuple[list[Tensor], list[Tensor]]:
    """:func:`_deeper` with tangents along ``direction``, from ``act(H¹)``'s ``value`` and ``tangent``."""
    activate, adjacency = fm.module.activate, fm.inputs.adjacency
    assert adjacency is not None
    values, tangents = [value], [tangent]
    for layer in range(1, len(fm.module.convs) - 1):

        def step(f: Tensor, h: Tensor, layer: int = layer) -> Tensor:
            return activate(layer, csr_conv_step(fm, fm.unflatten(f), layer, adjacency, h, h))

        v, t = forward_derivative(step, (fm.theta, values[-1]), (direction, tangents[-1]))
        values.append(v.detach())
        tangents.append(t.detach())
    return values, tangents


def _sub_params(params: dict[str, Tensor], prefix: str) -> dict[str, Tensor]:
    return {k[len(prefix) :]: v for k, v in params.items() if k.startswith(prefix)}


def conv_step(
    fm: FunctionalModel, params: dict[str, Tensor], layer: int, h: Tensor, ei: Tensor, w: Tensor | None
) -> Tensor:
    """Layer ``layer``'s conv (0-based) on input rows ``h`` (already activated), as :meth:`GNN.forward` runs it."""
    conv = fm.module.convs[layer]
    args = (h, ei) if w is None else (h, ei, w)
    return cast(Tensor, functional_call(conv, _sub_params(params, f"convs.{layer}."), args, tie_weights=False))


def csr_conv_step(
    fm: FunctionalModel, params: dict[str, Tensor], layer: int, adjacency: Adjacency, h: Tensor, root: Tensor
) -> Tensor:
    """Layer ``layer``'s conv (0-based, GCN, GIN or SAGE) at the target rows only: ``adjacency`` (``[targets, input
    rows]``) holds the aggregation's weights, ``h`` the input rows, ``root`` the targets' own rows. The arithmetic of
    the PyG layers (:meth:`bind_core.models.gnn.GNN._csr_layer`), aggregating before the weights (a linear map
    commutes with the aggregation; equal to rounding)."""
    arch, pre = fm.module.config.arch, f"convs.{layer}."
    aggregated = spmm(adjacency, h)
    if arch == "gcn":  # Â·(h·Wᵀ) + b
        return F.linear(aggregated, params[pre + "lin.weight"]) + params[pre + "bias"]
    if arch == "sage":  # W_l·mean_N(h) + b + W_r·h
        out = F.linear(aggregated, params[pre + "lin_l.weight"], params[pre + "lin_l.bias"]) + F.linear(
            root, params[pre + "lin_r.weight"]
        )
        return sage_output(out, fm.module.config.normalize)
    eps = float(getattr(fm.module.convs[layer], "eps", 0.0))  # GIN: MLP((1 + ε)·h + Σ_N h)
    mlp = cast(nn.Module, fm.module.convs[layer].nn)
    return cast(
        Tensor,
        functional_call(mlp, _sub_params(params, pre + "nn."), ((1 + eps) * root + aggregated,), tie_weights=False),
    )


def _activated(fm: FunctionalModel, flat: Tensor) -> list[Tensor]:
    """``act(H^l)`` for ``l = 1..L−1`` on the full graph (normalised first where the model is,
    :meth:`~bind_core.models.gnn.GNN.activate`): the inputs of layers 2..L (the last layer is not run)."""
    outputs, params = layer_outputs(fm, flat, layers=len(fm.module.convs) - 1), fm.unflatten(flat)
    return [fm.module.activate(i, h, params) for i, h in enumerate(outputs)]


def _first_layer(fm: FunctionalModel, params: dict[str, Tensor], z: Tensor) -> Tensor:
    """The first conv from the aggregated features ``z`` (:meth:`bind_core.models.gnn.GNN.first_layer`)."""
    arch, pre = fm.module.config.arch, "convs.0."
    if arch == "gcn":
        return F.linear(z, params[pre + "lin.weight"]) + params[pre + "bias"]
    if arch == "sage":
        weight_l, bias_l, weight_r = (params[pre + k] for k in ("lin_l.weight", "lin_l.bias", "lin_r.weight"))
        return sage_first_layer(z, weight_l, bias_l, weight_r, normalize=fm.module.config.normalize)
    mlp = cast(nn.Module, fm.module.convs[0].nn)
    return cast(Tensor, functional_call(mlp, _sub_params(params, pre + "nn."), (z,), tie_weights=False))


def layer_outputs(fm: FunctionalModel, flat: Tensor, layers: int | None = None) -> list[Tensor]:
    """Every conv's output on the full graph (before the activation), and the logits last: GCN, GIN and SAGE from
    the aggregated features and CSR products (as :meth:`bind_core.models.gnn.GNN.forward` runs them), GAT by its
    PyG layers. With ``layers = k`` below the model's depth, only the first ``k`` convs' outputs (no logits)."""
    params = fm.unflatten(flat)
    inputs, outs = fm.inputs, []
    csr = inputs.adjacency is not None and inputs.x_prop is not None and fm.module.config.arch in ("gcn", "gin", "sage")
    h = inputs.x
    depth = len(fm.module.convs)
    for layer in range(depth if layers is None else min(layers, depth)):
        if layer > 0:
            h = fm.module.activate(layer - 1, h, params)
        if csr and layer == 0:
            assert inputs.x_prop is not None
            h = _first_layer(fm, params, inputs.x_prop)
        elif csr:
            assert inputs.adjacency is not None
            h = csr_conv_step(fm, params, layer, inputs.adjacency, h, h)
        else:
            h = conv_step(fm, params, layer, h, inputs.edge_index, inputs.edge_weight)
        outs.append(h)
    if layers is not None and layers < depth:
        return outs
    outs.append(functional_call(fm.module.head, _sub_params(params, "head."), (h,), tie_weights=False))
    return outs


class IncrementalBatch:
    """Affected pairs ``(v, j)`` of a batch (``v_pos``, ``node``) with their logits on ``G − v``."""

    def __init__(
        self, fm: FunctionalModel, full: FullGraphRows, layers: list[_Layer], v_pos: Tensor, node: Tensor
    ) -> None:
        self.fm, self.full, self.layers = fm, full, layers
        self.v_pos, self.node = v_pos, node

    def _forward(self, flat: Tensor, *base: Tensor, gathered: bool = False) -> Tensor:
        """The pairs' logits at ``flat`` from the full graph's activated rows ``base`` (``gathered``: a two-layer
        model's second layer's input rows, already gathered, instead of every row)."""
        fm = self.fm
        params = fm.unflatten(flat)
        prev: Tensor | None = None
        for layer, spec in enumerate(self.layers):
            if layer == 0:
                h = fm.inputs.x[spec.sources.to(fm.device)]
            else:
                assert prev is not None
                # the full graph's rows come activated; each row is the full graph's or a recomputed one (gathered
                # apart: concatenating the two would copy all n full-graph rows for every batch)
                h = base[0] if gathered else base[layer - 1][spec.sources.to(fm.device)]
                if prev.shape[0]:
                    recomputed = fm.module.activate(layer - 1, prev, params)[spec.prev_index.to(fm.device)]
                    h = torch.where(spec.from_prev.to(fm.device).unsqueeze(1), recomputed, h)
            if spec.adjacency is not None:
                prev = csr_conv_step(fm, params, layer, spec.adjacency, h, h[spec.targets.to(fm.device)])
            else:
                out = conv_step(fm, params, layer, h, spec.edge_index.to(fm.device), _to(spec.edge_weight, fm))
                prev = out[spec.targets.to(fm.device)]
        assert prev is not None
        return cast(Tensor, functional_call(fm.module.head, _sub_params(params, "head."), (prev,), tie_weights=False))

    def _base_rows(self, values: Callable[[], list[Tensor]]) -> list[Tensor]:
        if len(self.layers) == 1:
            return []  # a one-layer model reads only the (constant) features
        return values()  # whole: each layer gathers its input rows from them and its recomputed rows at once

    def logits(self, flat: Tensor) -> Tensor:
        """The logits ``[P, out]`` of every pair at ``flat`` (the full graph's rows are those at ``θ̂``)."""
        return self._forward(flat, *self._base_rows(self.full.values))

    def jvp(self, flat: Tensor, s: Tensor, column: int) -> tuple[Tensor, Tensor]:
        """Logits and their derivative along ``s[:, column]`` (through the full graph's rows too). A two-layer model
        on a graph where :func:`~bind_core.influence.rowblocks.tangents_by_batch` holds forms the rows this batch
        reads, with their tangents, here: no full-graph tangent is kept (:class:`FullGraphRows` would hold one
        ``[n, hidden]`` array a column)."""
        if len(self.layers) == 2 and tangents_by_batch(self.fm):
            rows = self.layers[1].sources.to(self.fm.device)
            value, tangent = activated_first_rows_jvp(self.fm, s[:, column], rows)
            return forward_derivative(
                lambda f, h: self._forward(f, h, gathered=True), (flat, value), (s[:, column], tangent)
            )
        tangents = self._base_rows(lambda: self.full.tangents(s, column))
        primals = self._base_rows(self.full.values)
        return forward_derivative(self._forward, (flat, *primals), (s[:, column], *tangents))


def _to(t: Tensor | None, fm: FunctionalModel) -> Tensor | None:
    return None if t is None else t.to(fm.device, torch.float64)


LayerSpec = tuple[Tensor, Tensor, Tensor, Tensor | None]
"""One deletion's layer: the input rows' global nodes (sorted), the local edges ``[2, E']``, the positions of the
output nodes among the input rows, and GCN's edge weights (None for other models)."""


def layer_spec(
    csr: Csr,
    out_nodes: Tensor,
    keep: Callable[[Tensor, Tensor], Tensor],
    lowered: Tensor,
    dtilde: Tensor | None,
) -> LayerSpec:
    """The local subgraph that recomputes a layer at ``out_nodes`` after a deletion: every in-neighbour of each
    output node for which ``keep(output node, neighbour)`` holds (the deleted entries fail it); with ``dtilde``
    (GCN's degrees with the self-loop, ``[n]``) the normalised weights, with the degrees of ``lowered`` (a sorted
    set) one smaller, and the self-loops."""
    owner, nb = csr.neighbours(out_nodes)
    kept = keep(out_nodes[owner], nb)
    owner, nb = owner[kept], nb[kept]
    sources = torch.unique(torch.cat([out_nodes, nb]))
    src = torch.searchsorted(sources, nb)
    dst = torch.searchsorted(sources, out_nodes)[owner]
    weight = None
    if dtilde is not None:
        loops = torch.searchsorted(sources, out_nodes)
        src, dst = torch.cat([src, loops]), torch.cat([dst, loops])
        adjacent = member(sources, lowered).to(torch.float64)
        dinv = (dtilde[sources] - adjacent).pow(-0.5)
        weight = dinv[src] * dinv[dst]
    return sources, torch.stack([src, dst]), torch.searchsorted(sources, out_nodes), weight


DeletionSpec = tuple[int, Tensor, list[LayerSpec]]
"""One deletion for :func:`union_batches`: its position (a training position, or an edge's), the affected nodes worth
yielding, and its layers."""


def incremental_batches(
    fm: FunctionalModel,
    max_rows: int,
    first: int,
    stop: int,
    relevant: Tensor | None = None,
    check: Callable[[], None] | None = None,
) -> Iterator[IncrementalBatch]:
    """The affected pairs of ``train_idx[first:stop]``, batched to about ``max_rows`` input rows per layer;
    ``relevant`` (an ``[n]`` mask, default training and test nodes) are the affected nodes worth yielding.
    ``check()`` is called for every deleted node (it may raise to abort)."""
    g = fm.graph
    depth = len(fm.module.convs)
    gcn = fm.module.config.arch == "gcn"
    csr = Csr.of_degrees(g.edge_index, g.degree)
    relevant = estimate_targets(g) if relevant is None else relevant
    dtilde = (g.degree + 1).to(torch.float64)

    def deletions() -> Iterator[DeletionSpec]:
        for v_pos in range(first, stop):
            if check is not None:
                check()
            v = int(g.train_idx[v_pos])
            seed = torch.tensor([v])
            targets = csr.k_hop(seed, depth)
            targets = targets[(targets != v) & relevant[targets]]
            if targets.numel() == 0:
                continue
            outputs = [_without(csr.k_hop(seed, layer + 1 + int(gcn)), v) for layer in range(depth - 1)] + [targets]
            lowered = csr.neighbours_of(v)  # their degree falls by one on G − v

            def keep(owner_nodes: Tensor, nb: Tensor, v: int = v) -> Tensor:
                return nb != v

            yield (
                v_pos,
                targets,
                [layer_spec(csr, out_nodes, keep, lowered, dtilde if gcn else None) for out_nodes in outputs],
            )

    return union_batches(fm, deletions(), max_rows)


def union_batches(fm: FunctionalModel, deletions: Iterator[DeletionSpec], max_rows: int) -> Iterator[IncrementalBatch]:
    """``deletions`` gathered into batches of about ``max_rows`` input rows (summed over layers), each one disjoint
    union (:func:`union_batch`) sharing the full graph's rows."""
    full = FullGraphRows(fm)
    pending: list[DeletionSpec] = []
    rows = 0
    for item in deletions:
        pending.append(item)
        rows += sum(int(spec[0].numel()) for spec in item[2])
        if rows >= max_rows:
            yield union_batch(fm, full, pending)
            pending, rows = [], 0
    if pending:
        yield union_batch(fm, full, pending)


def _aggregation(
    fm: FunctionalModel, edge_index: Tensor, weight: Tensor | None, targets: Tensor, sources: int
) -> Adjacency | None:
    """A union layer's aggregation as a ``[targets, sources]`` CSR matrix (every edge ends at a target): GCN's
    normalised weights (self-loops among the edges), SAGE's mean (``1/in-degree``), GIN's sum; ``None`` for GAT."""
    arch = fm.module.config.arch
    if arch not in ("gcn", "gin", "sage"):
        return None
    position = torch.full((sources,), -1, dtype=torch.long)
    position[targets] = torch.arange(targets.numel())
    row, col = position[edge_index[1]], edge_index[0]
    if arch == "gcn":
        assert weight is not None
        values = weight
    elif arch == "sage":
        values = 1.0 / torch.bincount(row, minlength=targets.numel()).to(torch.float64)[row]
    else:
        values = torch.ones(row.numel(), dtype=torch.float64)
    dtype, device = fm.theta.dtype, fm.device
    return Adjacency.from_entries(
        row.to(device), col.to(device), values.to(device, dtype), (int(targets.numel()), sources)
    )


def _without(nodes: Tensor, v: int) -> Tensor:
    return nodes[nodes != v]


def union_batch(
    fm: FunctionalModel,
    full: FullGraphRows,
    pending: list[tuple[int, Tensor, list[LayerSpec]]],
) -> IncrementalBatch:
    depth = len(pending[0][2])
    layers: list[_Layer] = []
    prev_offsets = [0] * len(pending)
    prev_nodes: list[Tensor] = []
    for layer in range(depth):
        sources, from_prev, prev_index, eis, weights, targets = [], [], [], [], [], []
        offset, out_offset = 0, 0
        offsets_here, nodes_here = [], []
        for k, (_v_pos, _t, per_layer) in enumerate(pending):
            src_nodes, ei, target_rows, weight = per_layer[layer]
            sources.append(src_nodes)
            if layer > 0:
                inside = member(src_nodes, prev_nodes[k])
                from_prev.append(inside)
                local = torch.searchsorted(prev_nodes[k], src_nodes).clamp(max=max(prev_nodes[k].numel() - 1, 0))
                prev_index.append(torch.where(inside, local + prev_offsets[k], torch.zeros_like(local)))
            eis.append(ei + offset)
            if weight is not None:
                weights.append(weight)
            targets.append(target_rows + offset)
            offsets_here.append(out_offset)
            nodes_here.append(src_nodes[target_rows])
            offset += int(src_nodes.numel())
            out_offset += int(target_rows.numel())
        all_sources = torch.cat(sources)
        edge_index, target_rows = torch.cat(eis, dim=1), torch.cat(targets)
        layers.append(
            _Layer(
                sources=all_sources,
                from_prev=torch.cat(from_prev) if layer > 0 else torch.zeros(all_sources.numel(), dtype=torch.bool),
                prev_index=torch.cat(prev_index) if layer > 0 else torch.zeros(all_sources.numel(), dtype=torch.long),
                edge_index=edge_index,
                edge_weight=torch.cat(weights) if weights else None,
                targets=target_rows,
                adjacency=_aggregation(fm, edge_index, torch.cat(weights) if weights else None, target_rows, offset),
            )
        )
        prev_offsets, prev_nodes = offsets_here, nodes_here
    v_pos = torch.cat([torch.full((t.numel(),), vp, dtype=torch.long) for vp, t, _ in pending])
    node = torch.cat([t for _, t, _ in pending])
    return IncrementalBatch(fm, full, layers, v_pos, node)
