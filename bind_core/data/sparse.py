"""A sparse adjacency product that ``torch.func`` can differentiate, for message passing at memory speed.

PyG's ``GCNConv`` propagates with a gather, a multiply and a scatter over an ``[E, d]`` message tensor; on the CPU a
CSR sparse-dense product is about ten times faster (Income, 100k edges, float64: a two-layer GCN's forward pass
from ~30 ms to a few ms). ``torch.func`` transforms (``grad``, ``jvp``, ``vmap``), which the influence code relies
on, cannot take sparse tensors as inputs ("Sparse CSR tensors do not have strides"), so :func:`spmm` is a custom
autograd function whose inputs are the CSR index and value tensors (dense) and which builds the sparse matrix inside:
its backward is the product with the transpose, its forward derivative the product itself, and its batching rule
one product with the batch folded into the columns (or, when each member has its own values on the same structure,
one product with the block-diagonal union of the members' matrices, :func:`_block_diagonal_product`).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from bind_core.autograd import apply
from bind_core.data.kept import KeptByIdentity

BLOCKS_KEPT = 8
"""Row blocks an :class:`Adjacency` keeps cut (the training, validation and test rows, and a few more)."""


@dataclass(frozen=True)
class Adjacency:
    """``A`` (``[r, n]``, ``out[i] = Σ_j A_ij·x[j]``) as CSR parts, and those of ``Aᵀ`` (the same if symmetric).

    ``shape`` is ``(r, n)``: a graph's adjacency is square; :meth:`rows` cuts the block of some rows, which a
    model's last layer uses when only those rows' outputs are wanted (the training rows, say: a twentieth of the
    graph's rows in a typical split, so the last layer's product costs a twentieth).
    """

    parts: tuple[Tensor, Tensor, Tensor]
    transposed: tuple[Tensor, Tensor, Tensor]
    shape: tuple[int, int]
    _blocks: KeptByIdentity[Adjacency] = field(
        default_factory=lambda: KeptByIdentity(BLOCKS_KEPT), compare=False, repr=False
    )
    ladders: KeptByIdentity[Any] = field(default_factory=lambda: KeptByIdentity(BLOCKS_KEPT), compare=False, repr=False)
    """:func:`~bind_core.data.ladder.ladder`'s rungs, kept per rows tensor (its cache; nothing else reads it)."""

    @classmethod
    def from_edges(cls, edge_index: Tensor, weight: Tensor, num_nodes: int, *, symmetric: bool = False) -> Adjacency:
        """From edges ``(i, j)`` with weights ``A_ij``; ``symmetric=True`` promises ``A = Aᵀ`` (no transpose built)."""
        parts = csr_parts(edge_index[0], edge_index[1], weight, num_nodes)
        transposed = parts if symmetric else csr_parts(edge_index[1], edge_index[0], weight, num_nodes)
        return cls(parts, transposed, (num_nodes, num_nodes))

    @classmethod
    def from_entries(cls, row: Tensor, col: Tensor, weight: Tensor, shape: tuple[int, int]) -> Adjacency:
        """A ``[r, c]`` matrix (``shape``) from its entries ``A[row, col] = weight``, in any order (a sampled
        mini-batch block, or a submatrix); its transpose is built too."""
        parts = csr_parts(row, col, weight, shape[0])
        return cls(parts, csr_parts(col, row, weight, shape[1]), shape)

    def submatrix(self, nodes: Tensor) -> Adjacency:
        """``A[nodes][:, nodes]`` of a square matrix for sorted unique ``nodes``, relabelled to positions in
        ``nodes``, with the entries' values unchanged (so a GCN's normalisation stays the whole graph's)."""
        crow, col, values = self.parts
        nodes = nodes.to(crow.device)
        local, take = row_entries(crow, nodes)
        cols = col[take]
        pos = torch.searchsorted(nodes, cols).clamp(max=max(nodes.numel() - 1, 0))
        keep = nodes[pos] == cols
        size = int(nodes.numel())
        return Adjacency.from_entries(local[keep], pos[keep], values[take][keep], (size, size))

    @property
    def num_nodes(self) -> int:
        """The number of columns (the graph's nodes)."""
        return self.shape[1]

    def rows(self, rows: Tensor) -> Adjacency:
        """The block ``A[rows]`` (``[len(rows), n]``), cached per ``rows`` tensor while it lives.

        The cache is keyed by the tensor's identity (checked through a weak reference, so a freed tensor's id
        reused by another never hits) and holds a few blocks, so a caller that passes the same index tensor
        every epoch cuts the block once, and nothing outlives the adjacency.
        """
        hit = self._blocks.get((rows,))
        return hit if hit is not None else self._blocks.put((rows,), self._cut(rows))

    def keep_block(self, rows: Tensor, block: Adjacency) -> None:
        """Cache ``block`` as :meth:`rows` of ``rows`` (a caller that made the block more cheaply than a cut)."""
        self._blocks.put((rows,), block)

    def _cut(self, rows: Tensor) -> Adjacency:
        parts, local = self._row_block(rows)
        shape = (int(parts[0].numel()) - 1, self.shape[1])
        return Adjacency(parts, csr_parts(parts[1], local, parts[2], shape[1]), shape)

    def product_rows(self, rows: Tensor, x: Tensor) -> Tensor:
        """``A[rows] @ x``, forward only (not differentiable in ``x``): no block or transpose is cut or cached, for
        rows asked for once."""
        parts, _ = self._row_block(rows)
        return _product(parts, (int(parts[0].numel()) - 1, self.shape[1]), x.detach())

    def _row_block(self, rows: Tensor) -> tuple[tuple[Tensor, Tensor, Tensor], Tensor]:
        """The CSR parts of ``A[rows]`` and each entry's row within ``rows``."""
        crow, col, values = self.parts
        rows = rows.to(crow.device)
        local, take = row_entries(crow, rows)
        block_crow = torch.zeros(rows.numel() + 1, dtype=torch.long, device=crow.device)
        block_crow[1:] = torch.cumsum(crow[rows + 1] - crow[rows], 0)
        return (block_crow, col[take], values[take]), local

    def __matmul__(self, x: Tensor) -> Tensor:
        return spmm(self, x)

    def times(self, x: Tensor) -> Tensor:
        """``A @ x`` outside autograd (``x`` is read as it is, no graph recorded), for callers that form their own
        gradients (:mod:`bind_core.influence.fused`)."""
        return _product(self.parts, self.shape, x)

    def transpose_times(self, x: Tensor) -> Tensor:
        """``Aᵀ @ x`` outside autograd (``x``: ``[r, d]``), from the transpose's CSR parts."""
        return _product(self.transposed, (self.shape[1], self.shape[0]), x)


def row_entries(crow: Tensor, rows: Tensor) -> tuple[Tensor, Tensor]:
    """The entries of ``rows`` in a CSR matrix with row pointer ``crow``, row after row: for each, the index of its
    row within ``rows`` and its position in the matrix's column and value arrays."""
    counts = crow[rows + 1] - crow[rows]
    local = torch.repeat_interleave(torch.arange(rows.numel(), device=crow.device), counts)
    offsets = torch.cumsum(counts, 0) - counts
    return local, crow[rows][local] + torch.arange(local.numel(), device=crow.device) - offsets[local]


def spmm(adj: Adjacency, x: Tensor) -> Tensor:
    """``A @ x`` for ``x`` of shape ``[n, d]``, differentiable by autograd and ``torch.func``."""
    return _apply(x, adj.parts, adj.transposed, adj.shape)


def is_symmetric(edge_index: Tensor, weight: Tensor, num_nodes: int) -> bool:
    """Whether the weighted edge list equals its transpose."""
    key = edge_index[0] * num_nodes + edge_index[1]
    key_t = edge_index[1] * num_nodes + edge_index[0]
    a, b = torch.argsort(key), torch.argsort(key_t)
    return bool(torch.equal(key[a], key_t[b]) and torch.equal(weight[a], weight[b]))


def csr_parts(row: Tensor, col: Tensor, weight: Tensor, n: int) -> tuple[Tensor, Tensor, Tensor]:
    """CSR parts of the entries ``(row, col, weight)`` with ``n`` rows (columns sorted within each row)."""
    order = torch.argsort(row * (int(col.max()) + 1 if col.numel() else 1) + col)
    crow = torch.zeros(n + 1, dtype=torch.long, device=row.device)
    crow[1:] = torch.cumsum(torch.bincount(row, minlength=n), 0)
    return crow, col[order].contiguous(), weight[order].contiguous()


def _product(parts: tuple[Tensor, Tensor, Tensor], shape: tuple[int, int], x: Tensor) -> Tensor:
    crow, col, values = parts
    with warnings.catch_warnings():  # "sparse CSR support is in beta": the product used here is long stable
        warnings.simplefilter("ignore", UserWarning)
        matrix = torch.sparse_csr_tensor(crow, col, values.to(x.dtype), shape, check_invariants=False)
    return matrix @ x


class _SpMM(torch.autograd.Function):
    @staticmethod
    def forward(x: Tensor, parts: Any, transposed: Any, shape: tuple[int, int]) -> Tensor:
        return _product(parts, shape, x)

    @staticmethod
    def setup_context(ctx: Any, inputs: Any, output: Any) -> None:
        ctx.parts, ctx.transposed, ctx.shape = inputs[1], inputs[2], inputs[3]

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Any:
        flipped = (ctx.shape[1], ctx.shape[0])
        return _apply(grad, ctx.transposed, ctx.parts, flipped), None, None, None

    @staticmethod
    def jvp(ctx: Any, x_tangent: Tensor, *_: Any) -> Tensor:
        return _apply(x_tangent, ctx.parts, ctx.transposed, ctx.shape)

    @staticmethod
    def vmap(info: Any, in_dims: Any, x: Tensor, parts: Any, transposed: Any, shape: tuple[int, int]) -> Any:
        if in_dims[1][2] is not None or in_dims[2][2] is not None:  # a matrix per member: one block-diagonal product
            return _block_diagonal_product(info.batch_size, in_dims, x, parts, transposed, shape), 0
        if in_dims[0] is None:
            return _apply(x, parts, transposed, shape), None
        batched = x.movedim(in_dims[0], 1)  # [n, B, d]
        out = _apply(batched.reshape(batched.shape[0], -1), parts, transposed, shape)
        return out.reshape((shape[0], *batched.shape[1:])), 1


def _apply(x: Tensor, parts: Any, transposed: Any, shape: tuple[int, int]) -> Tensor:
    """``_SpMM.apply``, typed: ``torch.autograd.Function.apply`` has no annotations."""
    out: Tensor = apply(_SpMM, x, parts, transposed, shape)
    return out


def _block_diagonal_product(
    size: int, in_dims: Any, x: Tensor, parts: Any, transposed: Any, shape: tuple[int, int]
) -> Tensor:
    """The batching rule for members with their own values on one CSR structure (a batch of deletions,
    :mod:`bind_core.influence.batched`): the ``size`` members' matrices as one block-diagonal CSR matrix and their
    ``x`` stacked, so that each output row sums the same entries in the same order as the member's own product.
    Returns ``[size, r, ...]``."""
    xs = x.movedim(in_dims[0], 0) if in_dims[0] is not None else x.expand(size, *x.shape)
    values = _members(parts[2], in_dims[1][2], size)
    values_t = _members(transposed[2], in_dims[2][2], size)
    rows, cols = shape
    crow, col = _diagonal(parts[0], parts[1], cols, size)
    crow_t, col_t = _diagonal(transposed[0], transposed[1], rows, size)
    out = _apply(
        xs.reshape(size * cols, -1), (crow, col, values), (crow_t, col_t, values_t), (size * rows, size * cols)
    )
    return out.reshape(size, rows, *xs.shape[2:])


def _members(values: Tensor, dim: int | None, size: int) -> Tensor:
    """The members' values, flattened member after member."""
    return (values.movedim(dim, 0) if dim is not None else values.expand(size, *values.shape)).reshape(-1)


_DIAGONALS: KeptByIdentity[tuple[Tensor, Tensor]] = KeptByIdentity(4 * BLOCKS_KEPT)


def _diagonal(crow: Tensor, col: Tensor, cols: int, size: int) -> tuple[Tensor, Tensor]:
    """The row pointer and columns of ``size`` copies of a CSR structure (``cols`` columns) on the diagonal, kept per
    structure while its column tensor lives (a batch evaluates the same few structures many times)."""
    hit = _DIAGONALS.get((col,), cols, size)
    if hit is not None:
        return hit
    nnz = int(col.numel())
    member = torch.arange(size, device=col.device)
    crow_d = torch.cat(
        [(crow[:-1].unsqueeze(0) + nnz * member.unsqueeze(1)).reshape(-1), crow.new_tensor([size * nnz])]
    )
    col_d = (col.unsqueeze(0) + cols * member.unsqueeze(1)).reshape(-1)
    return _DIAGONALS.put((col,), (crow_d, col_d), cols, size)
