"""The rows each layer of a deep model computes when only some rows' outputs are wanted: a *ladder* of row sets.

An ``L``-layer GCN, GIN or SAGE whose last layer computes only the wanted rows ``R`` reads, from the layer before,
only the rows within one hop of ``R``; that layer reads the rows within two hops, and so on. A layer between the first
and the last (a *middle* layer, from the third layer on) computed on every row of the graph does work nobody reads: a
three-layer model on Income evaluated for its 1,000 training and 3,706 test rows computes its middle layer on all
14,821 rows where 12,797 are read, and for its training rows alone on 5,280 (docs/SCALE.md, "Deep models").

:func:`ladder` gives each middle layer its rows and the block of the adjacency between one layer's rows and the
next's, relabelled to positions (the columns kept in their order within each row, so that each output row sums the
same entries in the same order as on the whole graph: the forward values are the whole graph's, the gradients equal to
rounding). The first layer stays on every row it is given (it is cached per graph and reused by the influence code),
and a two-layer model has no middle layer, so nothing here touches it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import torch
from torch import Tensor

from bind_core.data.kept import KeptByIdentity
from bind_core.data.sparse import BLOCKS_KEPT, Adjacency, csr_parts, row_entries


@dataclass(frozen=True)
class Rung:
    """One layer's step of a :func:`ladder`: its output rows' block of the adjacency, with its columns relabelled to
    the positions of the layer's input rows, and the positions of the output rows among the input rows (the root term
    of SAGE and GIN)."""

    block: Adjacency
    root: Tensor


def reach(adjacency: Adjacency, seeds: Tensor, hops: int) -> Tensor:
    """The sorted nodes within ``hops`` steps of ``seeds`` along ``adjacency``'s entries (seeds included)."""
    crow, col, _ = adjacency.parts
    nodes: Tensor = torch.unique(seeds)
    frontier = nodes
    for _ in range(hops):
        if frontier.numel() == 0:
            break
        reached = torch.unique(col[row_entries(crow, frontier)[1]])
        pos = torch.searchsorted(nodes, reached).clamp(max=nodes.numel() - 1)
        frontier = reached[nodes[pos] != reached]
        nodes = torch.unique(torch.cat([nodes, frontier]))
    return nodes


def ladder(adjacency: Adjacency, rows: Tensor, middle: int) -> list[Rung]:
    """The rungs of ``middle`` middle layers and the last layer, whose output is ``rows`` (in their order): the first
    middle layer reads every row of the graph and computes the rows within ``middle`` hops of ``rows``; each next one
    reads those and computes one hop fewer; the last reads the rows within one hop and computes ``rows``.

    The row sets and the blocks' structure are kept per adjacency structure (its column tensor: a deletion's reduced
    graph keeps the whole graph's, its removed entries explicit zeros) and ``rows`` tensor while both live, and the
    rungs per adjacency: an evaluation loop passes the same tensors every time, and each deletion only gathers its
    values.

    Args:
        adjacency: the square propagation matrix the layers run on (the whole graph's numbering).
        rows: the rows whose outputs are wanted.
        middle: the number of middle layers (at least 1).

    Returns:
        ``middle + 1`` rungs, the first middle layer's first.
    """
    hit = adjacency.ladders.get((rows,), middle)
    if hit is not None:
        return cast(list[Rung], hit)
    values = adjacency.parts[2]
    rungs = [shape.rung(values) for shape in _shapes(adjacency, rows, middle)]
    adjacency.ladders.put((rows,), rungs, middle)
    return rungs


@dataclass(frozen=True)
class _Shape:
    """A rung's structure: which of the adjacency's entries it holds (``take``), as CSR parts relabelled, and the
    order of its transpose's entries."""

    crow: Tensor
    col: Tensor
    take: Tensor
    crow_t: Tensor
    col_t: Tensor
    order_t: Tensor
    root: Tensor
    shape: tuple[int, int]

    @classmethod
    def of(cls, adjacency: Adjacency, out: Tensor, into: Tensor | None) -> _Shape:
        """The block ``A[out][:, into]`` (``into`` sorted and holding every neighbour of ``out``; ``None``: every
        column, unrelabelled)."""
        crow, col, _ = adjacency.parts
        local, take = row_entries(crow, out)
        block_crow = torch.zeros(out.numel() + 1, dtype=torch.long, device=crow.device)
        block_crow[1:] = torch.cumsum(crow[out + 1] - crow[out], 0)
        cols = col[take] if into is None else torch.searchsorted(into, col[take])
        width = adjacency.shape[1] if into is None else int(into.numel())
        position = torch.arange(take.numel(), device=crow.device)
        crow_t, col_t, order_t = csr_parts(cols, local, position, width)
        root = out if into is None else torch.searchsorted(into, out)
        return cls(block_crow, cols, take, crow_t, col_t, order_t, root, (int(out.numel()), width))

    def rung(self, values: Tensor) -> Rung:
        """The rung of an adjacency with this structure and entries ``values``."""
        kept = values[self.take]
        block = Adjacency((self.crow, self.col, kept), (self.crow_t, self.col_t, kept[self.order_t]), self.shape)
        return Rung(block, self.root)


_SHAPES: KeptByIdentity[list[_Shape]] = KeptByIdentity(BLOCKS_KEPT)


def _shapes(adjacency: Adjacency, rows: Tensor, middle: int) -> list[_Shape]:
    """The rungs' structures for an adjacency with ``adjacency``'s structure (see :func:`ladder`)."""
    col = adjacency.parts[1]
    hit = _SHAPES.get((col, rows), middle)
    if hit is not None:
        return hit
    wanted = rows.to(col.device)
    sets = [reach(adjacency, wanted, hops) for hops in range(middle, 0, -1)]
    shapes = [_Shape.of(adjacency, sets[0], None)]
    shapes += [_Shape.of(adjacency, out, into) for into, out in zip(sets, [*sets[1:], wanted], strict=True)]
    return _SHAPES.put((col, rows), shapes, middle)
