"""L-hop neighbourhoods and induced subgraphs from a CSR view of the graph, in time proportional to their size.

``torch_geometric.utils.k_hop_subgraph`` scans every edge of the graph once per hop and per call, which is
fine for one call on a small graph but makes ``m`` calls on a graph of ``E`` edges cost ``O(m·E)``. Here the
graph's (sorted) edge list is read as CSR once, and a neighbourhood costs only the degrees of what it holds.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class Csr:
    """Row pointers ``[n + 1]`` and column indices ``[E]`` of a directed edge list sorted by source."""

    rowptr: Tensor
    col: Tensor

    @classmethod
    def from_edge_index(cls, edge_index: Tensor, num_nodes: int) -> Csr:
        """``edge_index`` ``[2, E]`` must be sorted by source (a :class:`bind_core.data.graph.Graph`'s is)."""
        src = edge_index[0]
        if src.numel() > 1 and not bool((src[1:] >= src[:-1]).all()):
            order = torch.argsort(src, stable=True)
            edge_index = edge_index[:, order]
            src = edge_index[0]
        counts = torch.bincount(src, minlength=num_nodes)
        rowptr = torch.zeros(num_nodes + 1, dtype=torch.long)
        rowptr[1:] = torch.cumsum(counts, 0)
        return cls(rowptr, edge_index[1].contiguous())

    @classmethod
    def of_degrees(cls, edge_index: Tensor, degree: Tensor) -> Csr:
        """From an edge list already sorted by source and its out-degrees (a graph's cached ``degree``)."""
        rowptr = torch.zeros(degree.numel() + 1, dtype=torch.long)
        rowptr[1:] = torch.cumsum(degree, 0)
        return cls(rowptr, edge_index[1].contiguous())

    def neighbours_of(self, node: int) -> Tensor:
        """The sorted neighbours of one node."""
        return self.col[int(self.rowptr[node]) : int(self.rowptr[node + 1])]

    @property
    def num_nodes(self) -> int:
        return int(self.rowptr.numel() - 1)

    def degree(self, nodes: Tensor) -> Tensor:
        return self.rowptr[nodes + 1] - self.rowptr[nodes]

    def neighbours(self, nodes: Tensor) -> tuple[Tensor, Tensor]:
        """``(owner, neighbour)`` for every edge leaving ``nodes``; ``owner`` indexes ``nodes``."""
        counts = self.degree(nodes)
        owner = torch.repeat_interleave(torch.arange(nodes.numel()), counts)
        first = torch.cumsum(counts, 0) - counts
        offsets = torch.arange(owner.numel()) - first[owner]
        return owner, self.col[self.rowptr[nodes][owner] + offsets]

    def k_hop(self, seeds: Tensor, hops: int) -> Tensor:
        """Sorted unique nodes within ``hops`` of any seed (the seeds included)."""
        nodes: Tensor = torch.unique(seeds)
        frontier = nodes
        for _ in range(hops):
            if frontier.numel() == 0:
                break
            reached = torch.unique(self.neighbours(frontier)[1])
            new = reached[~member(reached, nodes)]
            nodes = torch.unique(torch.cat([nodes, new]))
            frontier = new
        return nodes

    def induced(self, nodes: Tensor) -> Tensor:
        """Edges among the sorted unique ``nodes``, relabelled to positions in ``nodes``: ``[2, E']``."""
        owner, nb = self.neighbours(nodes)
        keep = member(nb, nodes)
        return torch.stack([owner[keep], torch.searchsorted(nodes, nb[keep])])


def member(values: Tensor, sorted_set: Tensor) -> Tensor:
    """``values[i] ∈ sorted_set`` for a sorted 1-D ``sorted_set``."""
    if sorted_set.numel() == 0:
        return torch.zeros_like(values, dtype=torch.bool)
    pos = torch.searchsorted(sorted_set, values).clamp(max=sorted_set.numel() - 1)
    return sorted_set[pos] == values
