"""The training nodes' computation graph: the exact training objective of a multi-layer model on the part of the
graph its training nodes' outputs read, for the polish (L-BFGS, the Newton finish's Hessians) and its gradient.

An ``L``-layer GCN, GIN or SAGE starts from the aggregated features (:meth:`GNN.prepare`: the first layer's
aggregation over *every* neighbour, computed once on the whole graph), so a training node's output reads the
aggregated rows of the nodes within ``L − 1`` hops of it and nothing else. The computation graph holds those nodes
``S`` (the training nodes' ``(L − 1)``-hop neighbourhood), their aggregated rows, and the whole graph's propagation
matrix restricted to ``S × S`` with its values unchanged (GCN's normalisation keeps the whole graph's degrees).
Layer ``l ≥ 1`` is then exact on every row within ``L − 1 − l`` hops of the training nodes (all its neighbours are in
``S``), which is every row the next layer reads; rows farther out are wrong (their neighbours outside ``S`` are
missing) but never read, and the last layer computes only the training rows. So the objective, its gradient and its
Hessian are the whole graph's, exactly (no sampling: the polished weights are a stationary point of the full-batch
objective; tested to 1e-10 in float64), at a cost proportional to ``|S|`` rather than ``n``.

It is used when ``|S|`` is at most :data:`MAX_FRACTION` of the graph (a few hundred training nodes of a large graph;
Recidivism's two-layer models: 75%). On a small or dense graph ``S`` is nearly all of it, and the whole graph is used,
except by the influence estimate of a two-layer GCN or SAGE, whose objective is formed by hand on ``S`` only
(:meth:`~bind_core.influence.functional.FunctionalModel.objective_rows`: any share).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from bind_core.data.graph import Graph
from bind_core.data.ladder import reach
from bind_core.data.sparse import Adjacency
from bind_core.models.gnn import GNN
from bind_core.models.propagation import GraphInputs
from bind_core.training.objective import LabelledRows

MAX_FRACTION = 0.8
"""The computation graph replaces the whole graph when it holds at most this fraction of the nodes. Its objective is the
whole graph's exactly and costs in proportion to its nodes; what it adds is the restricted structure, made once, and
(for the step estimate) a separate pass over the test rows where Γ is read. The 20,000-node two-layer GCN of
docs/SCALE.md (63% of the nodes): its Hessian and deletions cost less on it (docs/SCALE.md, "fifth part")."""


@dataclass(frozen=True)
class ComputationGraph:
    """The training nodes' computation graph (module doc), in the form the objective's functions take.

    Attributes:
        inputs: the prepared inputs of the nodes ``nodes`` (rows of the whole graph's aggregated features, the
            restricted propagation matrix).
        train_idx: the training nodes' positions in ``nodes``.
        y: the labels of ``nodes``.
        nodes: the whole graph's ids of the computation graph's nodes (sorted).
    """

    inputs: GraphInputs
    train_idx: Tensor
    y: Tensor
    nodes: Tensor


def computation_graph(
    module: GNN, inputs: GraphInputs, graph: Graph, *, attention: bool = False
) -> ComputationGraph | None:
    """The training nodes' computation graph for ``module`` (a GCN, GIN or SAGE of two or more layers, with its
    prepared ``inputs`` of ``graph``; with ``attention``, a GAT too: :func:`attention_graph`); None for a model that
    has none (one layer: its rows are read directly; GAT without ``attention``)."""
    if attention and module.config.arch == "gat":
        return attention_graph(module, inputs, graph)
    if module.row_separable or inputs.adjacency is None or inputs.x_prop is None:
        return None
    adjacency = inputs.adjacency
    train = graph.train_idx.to(adjacency.parts[0].device)
    nodes = reach(adjacency, train, module.config.layers - 1)
    sub = adjacency.submatrix(nodes)
    crow, col, values = sub.parts
    row = torch.repeat_interleave(torch.arange(nodes.numel(), device=crow.device), crow[1:] - crow[:-1])
    local = nodes.to(inputs.x.device)
    restricted = GraphInputs(
        x=inputs.x[local],
        edge_index=torch.stack([row, col]),
        edge_weight=values if inputs.edge_weight is not None else None,
        x_prop=inputs.x_prop[local],
        adjacency=sub,
    )
    positions = torch.searchsorted(nodes, train).to(inputs.x.device)
    return ComputationGraph(restricted, positions, graph.y.to(inputs.x.device)[local], nodes)


def attention_graph(module: GNN, inputs: GraphInputs, graph: Graph) -> ComputationGraph:
    """A GAT's training nodes' computation graph: the nodes within ``L`` hops of the training nodes (a GAT reads the
    features themselves, not aggregated rows), and for each layer ``i`` only the edges into the nodes within
    ``L − 1 − i`` hops, the rows the next layer reads (the last layer's: into the training nodes). A row's attention
    is a softmax over its own incoming edges and its self-loop, all of them there, so every row read is exact; the
    rest are computed from fewer edges and never read. On Income (1000 training nodes of 14,821) a one-layer GAT's
    layer takes 6,270 of the 85,662 edges and 5,280 nodes' self-loops rather than 14,821."""
    n, edges = graph.num_nodes, inputs.edge_index
    train = graph.train_idx.to(edges.device)
    nodes, per_layer = attention_layers(edges, n, train, module.config.layers)
    local = torch.full((n,), -1, dtype=torch.long, device=edges.device)
    local[nodes] = torch.arange(nodes.numel(), device=edges.device)
    within = torch.zeros(n, dtype=torch.bool, device=edges.device)
    within[nodes] = True
    induced = local[edges[:, within[edges[0]] & within[edges[1]]]]
    at = nodes.to(inputs.x.device)
    layer_edges = tuple(local[e] for e in per_layer)
    restricted = GraphInputs(x=inputs.x[at], edge_index=induced, edge_weight=None, x_prop=None, layer_edges=layer_edges)
    positions = torch.searchsorted(nodes, train).to(inputs.x.device)
    return ComputationGraph(restricted, positions, graph.y.to(inputs.x.device)[at], nodes)


def attention_layers(edges: Tensor, n: int, rows: Tensor, layers: int) -> tuple[Tensor, list[Tensor]]:
    """What ``layers`` attention layers need of ``edges`` (``[2, E]``, source first, over ``n`` nodes) for the outputs
    of ``rows``: the nodes within ``layers`` hops of them (sorted), and each layer ``i``'s edges into the nodes within
    ``layers − 1 − i`` hops (the rows the next layer reads), in the same numbering as ``edges``."""
    into = Adjacency.from_edges(edges.flip(0), torch.ones(edges.shape[1], device=edges.device), n)  # row i: sources
    per_layer = []
    for i in range(layers):
        targets = torch.zeros(n, dtype=torch.bool, device=edges.device)
        targets[reach(into, rows, layers - 1 - i)] = True
        per_layer.append(edges[:, targets[edges[1]]])
    return reach(into, rows, layers), per_layer


def objective_inputs(
    module: GNN, inputs: GraphInputs, graph: Graph, *, max_fraction: float = MAX_FRACTION, attention: bool = False
) -> tuple[GraphInputs, LabelledRows]:
    """What the training objective is evaluated on: the computation graph's inputs and rows when it holds at most
    ``max_fraction`` of the graph's nodes, else the whole graph's (``inputs``, ``graph``); with ``attention``, a GAT's
    at any share, its layers taking fewer edges however many nodes it holds (:func:`attention_graph`; not in
    training, whose dropout draws a mask over every edge and row)."""
    sub = computation_graph(module, inputs, graph, attention=attention)
    if sub is None or (sub.inputs.layer_edges is None and sub.nodes.numel() > max_fraction * graph.num_nodes):
        return inputs, graph
    return sub.inputs, sub
