"""Neighbour sampling for mini-batch training of multi-layer GCN, GIN and SAGE models, from the graph's CSR view.

For a batch of seed nodes (training nodes) and a fan-out per hop, :class:`NeighbourSampler` draws, hop by hop
outward from the seeds, at most ``fan_out[k]`` neighbours of every node reached so far, uniformly and without
replacement, from a ``torch.Generator`` (so a seed fixes every batch), and builds each layer's bipartite block: the
sampled computation graph that :meth:`bind_core.models.gnn.GNN.forward_blocks` runs the model on.

**Order of the fan-outs**: as PyG's ``NeighborLoader`` (``num_neighbors``), ``fan_out[0]`` is the number of
neighbours drawn for the seeds themselves (the last layer's aggregation), ``fan_out[-1]`` the first layer's.
``-1`` (or ``None``) takes every neighbour.

**The first layer**: its aggregation has no weights, so the graph's aggregated features (``Â·X``,
``(1 + ε)·X + A·X``, ``[mean_N(X), X]``; :meth:`GNN.prepare`) already hold it over every neighbour. When the first
layer's fan-out is ``-1`` the sampler stops one hop early and the batch starts from those rows: exact, and the
outermost (largest) hop is never expanded. A finite first fan-out samples that hop like the others.

**Normalisation** (each exact when the fan-out covers every neighbour, so full fan-out reproduces full-batch
training to round-off; and an unbiased estimate of the full aggregation of the previous layer's rows otherwise):

* GCN: ``Â = D̃^{-1/2}(A + I)D̃^{-1/2}`` with the *whole graph's* degrees ``d̃ = deg + 1``; the entry of a sampled
  neighbour ``j`` of ``i`` is ``(deg_i / k_i)·d̃_i^{-1/2}·d̃_j^{-1/2}`` with ``k_i`` the neighbours drawn, and the
  self-loop ``1/d̃_i`` is always there. (Renormalising on the sampled subgraph, as a PyG GCN on a
  ``NeighborLoader`` batch does, would neither be unbiased nor equal the full model at full fan-out.)
* SAGE: the mean over the ``k_i`` sampled neighbours (``1/k_i``): the sample mean is unbiased for the mean.
* GIN: the sum over the sampled neighbours scaled by ``deg_i / k_i`` (unbiased for the sum; a plain sum over a
  sample would shrink a hub's aggregation by ``k_i / deg_i``); the root term ``(1 + ε)·h_i`` is exact.

GAT's attention is not a fixed linear aggregation and is not sampled here.

PyG's ``NeighborLoader`` needs ``pyg-lib`` or ``torch-sparse`` (no wheels for this torch on the package index);
:data:`PYG_SAMPLER` says whether either is importable. This module does not use it even then: its GCN blocks
renormalise on the sampled subgraph (see above), and its neighbour draws do not come from the training's own
``torch.Generator``, so the project's own sampler is the one training uses either way.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from bind_core.data.graph import Graph
from bind_core.data.sparse import Adjacency, row_entries
from bind_core.errors import ConfigError

SAMPLED_ARCHS = ("gcn", "gin", "sage")
"""Architectures with a linear aggregation, which mini-batch training samples."""
ALL = -1
"""A fan-out that takes every neighbour."""
PYG_SAMPLER = any(importlib.util.find_spec(name) is not None for name in ("pyg_lib", "torch_sparse"))
"""Whether PyG's ``NeighborLoader`` could run here (it needs ``pyg-lib`` or ``torch-sparse``); see the module doc."""
_KEY_BITS = 31
"""Random bits of a sampling key (the row index fills the bits above them)."""


@dataclass(frozen=True)
class SampledBatch:
    """One mini-batch's computation graph.

    Attributes:
        seeds: the batch's nodes (global ids), the last block's output rows in this order.
        blocks: one ``[r, c]`` :class:`~bind_core.data.sparse.Adjacency` per sampled layer, the first layer's first;
            block ``i``'s ``r`` output rows are the first ``r`` of its ``c`` input rows.
        input_nodes: the global ids of the first block's input rows (the seeds when there is no block): the rows of
            the raw features (one block per layer) or of the aggregated features (one fewer) the model starts from.
        aggregated: True when the first layer starts from the aggregated features (its fan-out is ``-1``).
    """

    seeds: Tensor
    blocks: tuple[Adjacency, ...]
    input_nodes: Tensor
    aggregated: bool


def normalise_fan_out(fan_out: Sequence[int | None], layers: int) -> tuple[int, ...]:
    """``fan_out`` with ``None`` as ``-1``, checked: one entry per layer (an empty one: every neighbour everywhere),
    each ``-1`` or positive.

    Raises:
        ConfigError: a wrong length or a value below 1 other than ``-1``.
    """
    values = tuple(ALL if f is None else int(f) for f in fan_out) or (ALL,) * layers
    if len(values) != layers:
        raise ConfigError(f"fan_out: {list(values)} needs one entry per layer ({layers})")
    if any(f < 1 and f != ALL for f in values):
        raise ConfigError(f"fan_out: {list(values)} entries must be positive or -1 (every neighbour)")
    return values


class NeighbourSampler:
    """Samples the computation graphs of batches of nodes of ``graph`` for an ``arch`` model with ``layers`` layers.

    Args:
        graph: the graph (its edge list is already CSR-sorted by source, without self-loops).
        arch: ``"gcn"``, ``"gin"`` or ``"sage"``.
        fan_out: neighbours per hop, the seeds' first (see the module doc); ``-1``/``None``: every neighbour.
        dtype, device: of the blocks' values and of the blocks.
        generator: the source of every random draw (a CPU generator; seed it from the training seed).
    """

    def __init__(
        self,
        graph: Graph,
        arch: str,
        fan_out: Sequence[int | None],
        *,
        layers: int,
        dtype: torch.dtype,
        device: torch.device | str = "cpu",
        generator: torch.Generator | None = None,
    ) -> None:
        if arch not in SAMPLED_ARCHS:
            raise ConfigError(f"mini-batch training samples {', '.join(SAMPLED_ARCHS)} models, not {arch}")
        self.arch = arch
        self.fan_out = normalise_fan_out(fan_out, layers)
        self.aggregated = self.fan_out[-1] == ALL
        self.dtype, self.device = dtype, torch.device(device)
        self.generator = generator
        self.degree = graph.degree.cpu()
        self.crow = torch.zeros(graph.num_nodes + 1, dtype=torch.long)
        self.crow[1:] = torch.cumsum(self.degree, 0)
        self.col = graph.edge_index[1].cpu().contiguous()
        self.dinv = (self.degree + 1).to(dtype).pow(-0.5)
        self._local = torch.full((graph.num_nodes,), -1, dtype=torch.long)  # scratch: a node's row in a hop's src
        self._mark = torch.zeros(graph.num_nodes, dtype=torch.bool)  # scratch: the new nodes of a hop

    def sample(self, seeds: Tensor, *, exact: bool = False) -> SampledBatch:
        """The sampled computation graph of ``seeds`` (global ids, distinct); ``exact``: every neighbour at every
        hop, from the aggregated features (deterministic; what a validation loss is evaluated on)."""
        nodes = seeds.cpu()
        aggregated = self.aggregated or exact
        hops = (ALL,) * (len(self.fan_out) - 1) if exact else self.fan_out[: len(self.fan_out) - aggregated]
        blocks: list[Adjacency] = []
        for fan in hops:
            owner, neighbour, count = self._draw(nodes, fan)
            src, position = self._extend(nodes, neighbour)
            blocks.append(self._block(nodes, owner, neighbour, position, count, int(src.numel())))
            nodes = src
        return SampledBatch(seeds.cpu(), tuple(reversed(blocks)), nodes, aggregated)

    def batches(self, nodes: Tensor, batch_size: int) -> Iterator[SampledBatch]:
        """``nodes`` in a random order (from the generator) cut into batches of ``batch_size``, each sampled."""
        order = nodes.cpu()[torch.randperm(nodes.numel(), generator=self.generator)]
        for start in range(0, order.numel(), batch_size):
            yield self.sample(order[start : start + batch_size])

    def _draw(self, nodes: Tensor, fan: int) -> tuple[Tensor, Tensor, Tensor]:
        """For each of ``nodes``, ``min(fan, deg)`` of its neighbours, uniformly without replacement:
        ``(owner, neighbour, count)``, ``owner`` indexing ``nodes`` and ``count`` the number drawn per node.

        Nodes of degree at most ``fan`` keep every neighbour; the others draw ``fan`` distinct positions among their
        neighbours by Floyd's algorithm, vectorised over the nodes (``fan`` rounds of one uniform draw each, so the
        cost is ``O(fan²)`` per node, never a sort of the neighbourhoods)."""
        degree = self.degree[nodes]
        if fan == ALL or degree.numel() == 0 or int(degree.max()) <= fan:
            owner, take = row_entries(self.crow, nodes)
            return owner, self.col[take], degree
        big = degree > fan
        small_rows, big_rows = (~big).nonzero().squeeze(1), big.nonzero().squeeze(1)
        owner_small, take_small = row_entries(self.crow, nodes[small_rows])
        top = degree[big_rows]
        chosen = torch.empty((big_rows.numel(), fan), dtype=torch.long)
        for step in range(fan):  # Floyd: j = deg − fan + step; r uniform in [0, j]; r if not yet chosen, else j
            last = top - fan + step
            pick = (torch.rand(last.shape, generator=self.generator, dtype=torch.float64) * (last + 1)).long()
            pick = torch.minimum(pick, last)
            if step:
                pick = torch.where((chosen[:, :step] == pick[:, None]).any(1), last, pick)
            chosen[:, step] = pick
        take_big = (self.crow[nodes[big_rows]][:, None] + chosen).reshape(-1)
        owner = torch.cat([small_rows[owner_small], big_rows.repeat_interleave(fan)])
        return owner, self.col[torch.cat([take_small, take_big])], degree.clamp(max=fan)

    def _extend(self, nodes: Tensor, neighbour: Tensor) -> tuple[Tensor, Tensor]:
        """``src``: ``nodes`` followed by the neighbours not among them (in increasing id); and each neighbour's row
        in ``src``. Through two scratch arrays over the graph's nodes (reset before returning), so no sort."""
        local, mark = self._local, self._mark
        local[nodes] = torch.arange(nodes.numel())
        mark[neighbour[local[neighbour] < 0]] = True
        new = mark.nonzero().squeeze(1)
        mark[new] = False
        local[new] = torch.arange(nodes.numel(), nodes.numel() + new.numel())
        position = local[neighbour]
        src = torch.cat([nodes, new])
        local[src] = -1
        return src, position

    def _block(
        self, dst: Tensor, owner: Tensor, neighbour: Tensor, position: Tensor, count: Tensor, num_src: int
    ) -> Adjacency:
        """The ``[len(dst), num_src]`` block of one hop with this architecture's normalisation (module doc)."""
        degree = self.degree[dst].to(self.dtype)
        drawn = count.to(self.dtype).clamp(min=1)
        if self.arch == "sage":
            weight = (1 / drawn)[owner]
        elif self.arch == "gin":
            weight = (degree / drawn)[owner]
        else:
            scale = (degree / drawn)[owner]
            weight = self.dinv[dst][owner] * self.dinv[neighbour] * scale
            loops = torch.arange(dst.numel())
            owner, position = torch.cat([owner, loops]), torch.cat([position, loops])
            weight = torch.cat([weight, self.dinv[dst] * self.dinv[dst]])
        block = Adjacency.from_entries(owner, position, weight, (int(dst.numel()), num_src))
        return _to(block, self.device)


def _to(block: Adjacency, device: torch.device) -> Adjacency:
    if block.parts[0].device == device:
        return block
    parts = tuple(t.to(device) for t in block.parts)
    transposed = tuple(t.to(device) for t in block.transposed)
    return Adjacency((parts[0], parts[1], parts[2]), (transposed[0], transposed[1], transposed[2]), block.shape)
