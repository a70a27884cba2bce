"""The inputs of a batch of deletions (:mod:`bind_core.influence.batched`): what every member shares (the CSR
structures of the computation graph's training-row block and of the test-row block, which a deletion leaves as they
are, only rewriting values) and what each has of its own, stacked (its aggregated features, the rows it changed,
the losses it keeps, its blocks' values)."""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from dataclasses import dataclass

import torch
from torch import Tensor

from bind_core.data.sparse import Adjacency
from bind_core.influence.reduce import Reduction
from bind_core.influence.step import Stepper
from bind_core.models.propagation import GraphInputs

_FLOAT, _INDEX = 8, 8
"""Bytes of a float64 value and of an index."""


@dataclass(eq=False)
class Structures:
    """What every deletion of one stepper shares: the computation graph's inputs (features, edges, the adjacency
    whose values a two-layer model never reads past the training-row block) and the CSR structure of its
    training-row block; the reduced graph's adjacency and the structure of its test-row block; and the sizes that
    :meth:`bytes_per_deletion` counts."""

    view: GraphInputs
    train_block: Adjacency
    graph: GraphInputs
    """The computation graph's inputs on ``G`` itself (nothing deleted), whose training-row block the Bregman tilt
    reads."""
    full: GraphInputs
    test_block: Adjacency
    train_rows: Tensor
    test: Tensor
    hidden: int

    @classmethod
    def of(cls, stepper: Stepper) -> Structures:
        """The structures of ``stepper``'s deletions, made once per stepper from the deletion of its first training
        node."""
        hit = _MADE.get(stepper)
        if hit is not None:
            return hit
        assert stepper.view is not None and stepper.first is not None
        reduction = stepper.reducer.reduce(stepper.train[:1])
        part = stepper.view(reduction)
        graph = stepper.view(stepper.reducer.reduce(stepper.train[:0]))
        assert part.adjacency is not None and reduction.inputs.adjacency is not None and graph.adjacency is not None
        graph.adjacency.rows(stepper.train_rows)  # cut (and cached) once
        made = cls(
            part,
            part.adjacency.rows(stepper.train_rows),
            graph,
            reduction.inputs,
            reduction.inputs.adjacency.rows(stepper.test),
            stepper.train_rows,
            stepper.test,
            int(stepper.first.act0.shape[1]),
        )
        _MADE[stepper] = made
        return made

    def bytes_per_deletion(self) -> int:
        """The memory one member of a batch takes: its stacked inputs (aggregated features and a mask over the
        computation graph's rows and over the graph's, a loss mask, its two blocks' values and their transposes'),
        the activations of the objective's pass (six ``[rows, hidden]`` arrays forward and backward on the
        computation graph) and of Γ's read (three on the graph), and the block-diagonal structures' indices (two per
        block entry, for the matrix and its transpose)."""
        assert self.view.x_prop is not None and self.full.x_prop is not None
        rows_view, features = self.view.x_prop.shape
        rows_full = int(self.full.x_prop.shape[0])
        entries = int(self.train_block.parts[1].numel() + self.test_block.parts[1].numel())
        stacked = (rows_view + rows_full) * (features + 1) + int(self.train_rows.numel()) + 2 * entries
        activations = (6 * rows_view + 3 * rows_full) * self.hidden
        return _FLOAT * (stacked + activations) + _INDEX * 4 * entries

    def view_inputs(self, block: Tensor, block_t: Tensor) -> GraphInputs:
        """A member's computation-graph inputs for the layers after the first: its training-row block's values."""
        return _with_block(self.view, self.train_block, self.train_rows, block, block_t)

    def graph_block(self) -> tuple[Tensor, Tensor]:
        """The values of the computation graph's training-row block on ``G`` and of its transpose."""
        assert self.graph.adjacency is not None
        block = self.graph.adjacency.rows(self.train_rows)
        return block.parts[2], block.transposed[2]

    def test_inputs(self, block: Tensor, block_t: Tensor) -> GraphInputs:
        """A member's reduced-graph inputs for the layers after the first: its test-row block's values."""
        return _with_block(self.full, self.test_block, self.test, block, block_t)


_MADE: weakref.WeakKeyDictionary[Stepper, Structures] = weakref.WeakKeyDictionary()


def _with_block(inputs: GraphInputs, structure: Adjacency, rows: Tensor, block: Tensor, block_t: Tensor) -> GraphInputs:
    """``inputs`` with the block of ``rows`` on ``structure`` with the given values (a two-layer model's last layer
    reads only that block; the adjacency's own values and the aggregated features are never read)."""
    assert inputs.adjacency is not None
    crow, col, _ = structure.parts
    crow_t, col_t, _ = structure.transposed
    adjacency = Adjacency(inputs.adjacency.parts, inputs.adjacency.transposed, inputs.adjacency.shape)
    adjacency.keep_block(rows, Adjacency((crow, col, block), (crow_t, col_t, block_t), structure.shape))
    return GraphInputs(inputs.x, inputs.edge_index, inputs.edge_weight, x_prop=inputs.x_prop, adjacency=adjacency)


@dataclass
class BatchInputs:
    """Each member's own inputs, stacked along a first dimension (:meth:`gather`)."""

    structures: Structures
    z_view: Tensor
    changed_view: Tensor
    rest: Tensor
    train_block: Tensor
    train_block_t: Tensor
    z_full: Tensor
    changed_full: Tensor
    test_block: Tensor
    test_block_t: Tensor
    changed_index: Tensor
    """``[B, C]``: each member's changed rows of the computation graph (positions, ascending), padded with 0 to the
    most any member has."""
    changed_valid: Tensor
    """``[B, C]``: which entries of :attr:`changed_index` are rows, not padding."""

    @classmethod
    def gather(cls, stepper: Stepper, sets: list[list[int]]) -> BatchInputs:
        """Reduce the graph for each set of training positions (:meth:`GraphReducer.reduce`, one at a time) and
        stack what each member's passes read."""
        indices = [torch.tensor(positions, dtype=torch.long) for positions in sets]
        train_idx = stepper.fm.graph.train_idx
        return cls._stacked(stepper, ((stepper.reducer.reduce(train_idx[index]), index) for index in indices))

    @classmethod
    def gather_edges(cls, stepper: Stepper, edges: list[Tensor]) -> BatchInputs:
        """Reduce the graph for each set of undirected edges (``[k, 2]`` each, :meth:`GraphReducer.reduce_edges`)
        and stack what each member's passes read: no loss is removed, only the reduced graph's values change."""
        none = torch.zeros(0, dtype=torch.long)
        return cls._stacked(stepper, ((stepper.reducer.reduce_edges(pairs), none) for pairs in edges))

    @classmethod
    def _stacked(cls, stepper: Stepper, members: Iterable[tuple[Reduction, Tensor]]) -> BatchInputs:
        """Stack each member's inputs: its reduction of the graph and the training positions whose losses it
        removes (made one at a time: a reduction's whole-graph values are dropped once its parts are stacked)."""
        assert stepper.view is not None and stepper.first is not None
        structures = Structures.of(stepper)
        columns: list[list[Tensor]] = [[] for _ in range(9)]
        device = stepper.fm.device
        for reduction, index in members:
            part = stepper.view(reduction)
            full = reduction.inputs
            assert part.adjacency is not None and full.adjacency is not None and reduction.changed is not None
            assert part.x_prop is not None and full.x_prop is not None
            train_block = part.adjacency.rows(stepper.train_rows)
            test_block = full.adjacency.rows(stepper.test)
            changed_view = torch.zeros(part.x_prop.shape[0], dtype=torch.bool, device=device)
            changed_view[stepper.first.changed_positions(reduction.changed)] = True
            changed_full = torch.zeros(full.x_prop.shape[0], dtype=torch.bool, device=device)
            changed_full[reduction.changed] = True
            rest = torch.ones(stepper.m, dtype=stepper.fm.theta.dtype, device=device)
            rest[index.to(device)] = 0.0
            row = [part.x_prop, changed_view, rest, train_block.parts[2], train_block.transposed[2]]
            row += [full.x_prop, changed_full, test_block.parts[2], test_block.transposed[2]]
            for column, value in zip(columns, row, strict=True):
                column.append(value)
        z_view, changed_view, rest, block, block_t, z_full, changed_full, test, test_t = (
            torch.stack(column) for column in columns
        )
        index, valid = _padded(changed_view)
        return cls(
            structures, z_view, changed_view, rest, block, block_t, z_full, changed_full, test, test_t, index, valid
        )

    def objective_part(self, members: Tensor | None) -> tuple[Tensor, ...]:
        """The objective's inputs of ``members`` (all when ``None``): aggregated features, changed rows (a mask, and
        padded positions with their validity), kept losses, training-row block values and their transpose's."""
        parts: tuple[Tensor, ...] = (self.z_view, self.changed_view, self.changed_index, self.changed_valid)
        parts += (self.rest, self.train_block, self.train_block_t)
        return parts if members is None else tuple(part[members] for part in parts)

    def test_part(self) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """Γ's inputs of every member: aggregated features, changed rows, test-row block values and their
        transpose's."""
        return self.z_full, self.changed_full, self.test_block, self.test_block_t


def _padded(mask: Tensor) -> tuple[Tensor, Tensor]:
    """``[B, C]`` positions of each row's set entries of ``mask`` (``[B, n]``), ascending, padded with 0 to the most
    any row has, and which of them are set entries."""
    counts = mask.sum(dim=1)
    width = max(int(counts.max()) if counts.numel() else 0, 1)
    valid = torch.arange(width, device=mask.device).unsqueeze(0) < counts.unsqueeze(1)
    index = torch.zeros(mask.shape[0], width, dtype=torch.long, device=mask.device)
    index[valid] = mask.nonzero(as_tuple=True)[1]
    return index, valid
