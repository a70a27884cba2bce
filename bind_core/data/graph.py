"""An immutable attributed graph with a train/validation/test split, validated on construction."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal, Unpack

import numpy as np
import torch
from torch import Tensor

from bind_core.data.graph_checks import validate
from bind_core.data.graph_inputs import ArrayLike, as_tensor, clean_edges, example, same_length, split_index
from bind_core.data.labels import class_value, group_label, group_labels, id_legend
from bind_core.data.naming import Naming, named
from bind_core.data.records import GraphSummary
from bind_core.errors import GraphValidationError

__all__ = ["ArrayLike", "Graph", "positions", "row_numbers"]


@dataclass(frozen=True, eq=False)
class Graph:
    """An undirected attributed graph for node classification with a sensitive attribute.

    Construct it directly only from clean tensors (every field is validated and nothing is repaired);
    use :meth:`Graph.build` to convert arrays, symmetrise edges and drop self-loops and duplicates.

    Attributes:
        x: node features, float32, shape ``[n, d]``, all finite.
        edge_index: int64, shape ``[2, E]``; each undirected edge stored in both directions, sorted by
            (source, target), no self-loops, no duplicates. ``E / 2`` undirected edges.
        y: int64 labels in ``[0, C)``, shape ``[n]``, ``C >= 2``; ``-1`` marks an unlabeled node, which stays
            in the graph (it passes messages) and is in no split.
        sens: int64 sensitive group in ``[0, G)``, shape ``[n]``, ``G >= 2``.
        train_idx, val_idx, test_idx: int64 node indices, pairwise disjoint, none empty. Every class
            occurs in the test split, and at least two groups do (binary labels: among its positives); a
            group missing there is reported by an audit and kept out of its metrics.
        node_ids: int64 original id of each node (``arange(n)`` unless nodes were removed).
        feature_names: optional names of the ``d`` feature columns.
        name: a label for reports.
        group_names: optional names of the ``G`` sensitive groups as the user's file writes them: the value
            (``"F"``), a bin (``"age>=25"``) or, for an intersectional group, ``"gender=F & race=B"``; empty
            (the codes stand for themselves) or one per group.
        sensitive: the name(s) of the sensitive attribute(s): the user's column(s), or ``"sens"`` (the array's
            name) for arrays.
        group_meanings: what each group stands for where the data's provenance documents it (``"white"``), empty
            or one per group (``""`` where unknown).
        node_id_column: the column of the user's node table that ``node_ids`` (or ``node_keys``) hold; ``None``:
            ``node_ids`` are the rows' positions in the node table or arrays, counted from 0 (header not counted).
        label_name: the name of the label: the user's column, or ``"y"`` (the array's name) for arrays.
        class_names: each class's value as the user's file writes it, empty (the codes stand for themselves) or
            one per class.
        node_keys: the user's node ids when they are text (then ``node_ids`` are the rows' positions), empty or
            one per node. :func:`bind_core.data.labels.user_ids` gives the user's id of any node.
        feature_ranges: where the features were min-max scaled to ``[-1, 1]`` when the graph was read
            (:func:`~bind_core.data.datasets.ingest_files` with ``scale=True``), each column's ``(min, max)`` before
            scaling, one per column; empty: ``x`` holds the values as given. A model trained on the given values
            sees other inputs here, which a supplied model's audit warns about.
    """

    x: Tensor
    edge_index: Tensor
    y: Tensor
    sens: Tensor
    train_idx: Tensor
    val_idx: Tensor
    test_idx: Tensor
    node_ids: Tensor = field(default_factory=lambda: torch.empty(0, dtype=torch.long))
    feature_names: tuple[str, ...] = ()
    name: str = "graph"
    group_names: tuple[str, ...] = ()
    sensitive: tuple[str, ...] = ("sens",)
    group_meanings: tuple[str, ...] = ()
    node_id_column: str | None = None
    node_keys: tuple[str, ...] = ()
    label_name: str = "y"
    class_names: tuple[str, ...] = ()
    feature_ranges: tuple[tuple[float, float], ...] = ()

    def __post_init__(self) -> None:
        if self.node_ids.numel() == 0 and self.x.ndim == 2 and self.x.shape[0] > 0:
            object.__setattr__(self, "node_ids", torch.arange(self.x.shape[0], dtype=torch.long))
        validate(self)

    # ------------------------------------------------------------------ sizes
    @property
    def num_nodes(self) -> int:
        return int(self.x.shape[0])

    @property
    def num_features(self) -> int:
        return int(self.x.shape[1])

    @property
    def num_edges(self) -> int:
        """Number of undirected edges (half the columns of ``edge_index``)."""
        return int(self.edge_index.shape[1]) // 2

    @cached_property
    def num_classes(self) -> int:
        return int(self.y.max().item()) + 1

    @cached_property
    def num_groups(self) -> int:
        return int(self.sens.max().item()) + 1

    @cached_property
    def degree(self) -> Tensor:
        """Degree of every node (without self-loops), int64 ``[n]``."""
        return torch.bincount(self.edge_index[0], minlength=self.num_nodes)

    def summary(self) -> GraphSummary:
        """Sizes a person would want to see first (:func:`bind_core.codec.encode` gives its JSON).

        Returns:
            The :class:`~bind_core.data.records.GraphSummary`: ``group_names`` and ``class_names`` never empty (the
            codes when the graph names none), ``node_id_column`` only when the ids come from one.
        """
        return GraphSummary(
            name=self.name,
            nodes=self.num_nodes,
            edges=self.num_edges,
            features=self.num_features,
            classes=self.num_classes,
            groups=self.num_groups,
            group_sizes=torch.bincount(self.sens, minlength=self.num_groups).tolist(),
            group_names=list(self.group_names) or [str(g) for g in range(self.num_groups)],
            sensitive=list(self.sensitive),
            group_labels=group_labels(self),
            label=self.label_name,
            class_names=list(self.class_names) or [str(c) for c in range(self.num_classes)],
            node_id_column=self.node_id_column,
            node_id_meaning=id_legend(self),
            class_sizes=torch.bincount(self.y[self.y >= 0], minlength=self.num_classes).tolist(),
            unlabeled=int((self.y < 0).sum()),
            train=int(self.train_idx.numel()),
            val=int(self.val_idx.numel()),
            test=int(self.test_idx.numel()),
            test_group_sizes=self.test_group_sizes(),
            test_group_positives=self.test_group_positives(),
            features_scaled=bool(self.feature_ranges),
        )

    def test_group_sizes(self) -> list[int]:
        """Number of test nodes in each group.

        Returns:
            One count per group ``0..G-1``.
        """
        return torch.bincount(self.sens[self.test_idx], minlength=self.num_groups).tolist()

    def test_group_positives(self) -> list[int]:
        """Number of positive (y = 1) test nodes in each group.

        Returns:
            One count per group ``0..G-1``.
        """
        test = self.test_idx
        return torch.bincount(self.sens[test][self.y[test] == 1], minlength=self.num_groups).tolist()

    # ------------------------------------------------------------------ construction
    @classmethod
    def build(
        cls,
        x: ArrayLike,
        edges: ArrayLike,
        y: ArrayLike,
        sens: ArrayLike,
        train_idx: ArrayLike,
        val_idx: ArrayLike,
        test_idx: ArrayLike,
        *,
        self_loops: Literal["drop", "error"] = "drop",
        duplicates: Literal["merge", "error"] = "merge",
        node_ids: ArrayLike | None = None,
        feature_ranges: Sequence[tuple[float, float]] = (),
        **naming: Unpack[Naming],
    ) -> Graph:
        """Build a graph from arrays, cleaning the edge list.

        Args:
            x: node features, ``[n, d]``, converted to float32.
            edges: ``[2, E]`` or ``[E, 2]`` integer node pairs, in one or both directions.
            y: labels, ``[n]``, in ``[0, C)``; ``-1`` marks an unlabeled node.
            sens: sensitive group codes, ``[n]``, in ``[0, G)``.
            train_idx: training node indices, or a boolean mask with one entry per node (``True``: in the split;
                PyG's ``train_mask``), taken as its indices (``mask.nonzero().flatten()``). A mask of 0/1 integers is
                refused (it reads as indices listing nodes 0 and 1 again and again): pass it as booleans or indices.
            val_idx: validation node indices, or a boolean mask, as ``train_idx``.
            test_idx: test node indices, or a boolean mask, as ``train_idx``.
            self_loops: ``"drop"`` removes ``(v, v)`` pairs; ``"error"`` rejects them.
            duplicates: ``"merge"`` keeps one copy of a repeated (undirected) edge; ``"error"`` rejects it.
            node_ids: the original id of each node, ``[n]`` (default ``arange(n)``).
            feature_ranges: each feature column's ``(min, max)`` before it was scaled to ``[-1, 1]``; empty when
                ``x`` is as given.
            **naming: the graph in the user's terms, as keywords (:class:`Naming`: ``feature_names``, ``name``,
                ``group_names``, ``sensitive``, ``group_meanings``, ``node_id_column``, ``node_keys``,
                ``label_name``, ``class_names``; the class's attributes say what each holds).

        Returns:
            The validated :class:`Graph`, each undirected edge stored in both directions.

        Raises:
            GraphValidationError: a field is malformed (the message names it); ``x``, ``y``, ``sens`` (and
                ``node_ids``) disagree in their number of nodes (the message names the one that differs, before the
                edges are read against them).
        """
        xt = as_tensor(x, torch.float32, "x")
        n = int(xt.shape[0]) if xt.ndim >= 1 else 0
        ids = torch.empty(0, dtype=torch.long) if node_ids is None else as_tensor(node_ids, torch.long, "node_ids")
        yt, st = as_tensor(y, torch.long, "y"), as_tensor(sens, torch.long, "sens")
        same_length({"x": xt, "y": yt, "sens": st, **({"node_ids": ids} if node_ids is not None else {})})
        return cls(
            x=xt,
            edge_index=clean_edges(edges, n, self_loops, duplicates),
            y=yt,
            sens=st,
            train_idx=split_index(train_idx, "train_idx", n),
            val_idx=split_index(val_idx, "val_idx", n),
            test_idx=split_index(test_idx, "test_idx", n),
            node_ids=ids,
            feature_ranges=tuple((float(lo), float(hi)) for lo, hi in feature_ranges),
            **named(naming),
        )

    # ------------------------------------------------------------------ editing
    def without_nodes(self, nodes: ArrayLike) -> tuple[Graph, Tensor]:
        """Remove ``nodes`` and their edges.

        Args:
            nodes: row numbers (0-based indices into this graph) of the nodes to remove; :meth:`rows_of` turns the
                user's ids into them.

        Returns:
            ``(graph, mapping)``: the reduced graph, re-indexed ``0..n-k-1`` in the old order with the
            splits and ``node_ids`` carried over, and ``mapping`` (int64 ``[n]``), the new index of each
            old node or ``-1`` for a removed one.

        Raises:
            GraphValidationError: ``nodes`` holds text (the user's ids: the message points at :meth:`rows_of`), or a
                row number out of range.
        """
        drop = row_numbers(self, nodes, "nodes")
        keep = torch.ones(self.num_nodes, dtype=torch.bool)
        keep[drop] = False
        mapping = torch.full((self.num_nodes,), -1, dtype=torch.long)
        mapping[keep] = torch.arange(int(keep.sum()), dtype=torch.long)
        ei = self.edge_index
        ei = mapping[ei[:, keep[ei[0]] & keep[ei[1]]]]

        def split(idx: Tensor) -> Tensor:
            return mapping[idx[keep[idx]]]

        kept = keep.nonzero().reshape(-1).tolist() if self.node_keys else []
        reduced = dataclasses.replace(
            self,
            x=self.x[keep],
            edge_index=ei,
            y=self.y[keep],
            sens=self.sens[keep],
            train_idx=split(self.train_idx),
            val_idx=split(self.val_idx),
            test_idx=split(self.test_idx),
            node_ids=self.node_ids[keep],
            node_keys=tuple(self.node_keys[i] for i in kept),
        )
        return reduced, mapping

    def without_edges(self, edges: ArrayLike) -> Graph:
        """The same nodes and splits without some undirected edges.

        Args:
            edges: ``[k, 2]`` node pairs, either order; both directions of each are removed.

        Returns:
            A new :class:`Graph` with the same nodes, ids, names and split.

        Raises:
            GraphValidationError: a pair is not an edge of the graph.
        """
        pairs = as_tensor(edges, torch.long, "edges").reshape(-1, 2)
        n = self.num_nodes
        ei = self.edge_index
        keys = ei[0] * n + ei[1]
        drop = torch.cat([pairs[:, 0] * n + pairs[:, 1], pairs[:, 1] * n + pairs[:, 0]])
        present = torch.isin(drop, keys)
        if not bool(present.all()):
            raise GraphValidationError("edges", f"{int((~present).sum()) // 2 or 1} pair(s) are not edges of the graph")
        return dataclasses.replace(self, edge_index=ei[:, ~torch.isin(keys, drop)])

    def with_split(self, train_idx: ArrayLike, val_idx: ArrayLike, test_idx: ArrayLike) -> Graph:
        """The same graph with another split.

        Args:
            train_idx: training node indices.
            val_idx: validation node indices.
            test_idx: test node indices (pairwise disjoint from the others, none empty).

        Returns:
            A new, validated :class:`Graph`.
        """
        n = self.num_nodes
        return dataclasses.replace(
            self,
            train_idx=split_index(train_idx, "train_idx", n),
            val_idx=split_index(val_idx, "val_idx", n),
            test_idx=split_index(test_idx, "test_idx", n),
        )

    # ------------------------------------------------------------------ the user's ids
    def rows_of(self, ids: int | str | ArrayLike) -> Tensor:
        """The row numbers (0-based indices into this graph, what :meth:`without_nodes`, the splits and
        ``predict_proba(graph, rows)`` take) of nodes given by the user's ids.

        The user's ids are what the audit's outputs call ``node_id``: the values of the node table's id column
        (text as written, or integers), else the rows' positions in the node table or arrays, counted from 0
        (``summary().node_id_meaning`` says which).

        Args:
            ids: one id, or a sequence (list, array, tensor) of them.

        Returns:
            int64 ``[k]``: the row number of each id, in the order given.

        Raises:
            GraphValidationError: some id is not one of this graph's (``ids``; the message names up to five).
        """
        given = ids.tolist() if isinstance(ids, Tensor | np.ndarray) else ids
        wanted: list[object] = [given] if isinstance(given, str | int | np.integer) else list(given)
        index = self._id_index
        rows: list[int] = []
        unknown: list[object] = []
        for v in wanted:
            key = int(v) if isinstance(v, int | np.integer) and not isinstance(v, bool) else v
            row = index.get(key) if isinstance(key, str | int) else None
            if row is None:
                unknown.append(v)
            else:
                rows.append(row)
        if unknown:
            kind = "text ids" if self.node_keys else "integer ids"
            shown = ", ".join(repr(v) for v in unknown[:5]) + (
                f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
            )
            raise GraphValidationError(
                "ids", f"{len(unknown)} id(s) not in this graph: {shown} (its node ids are {kind}: {id_legend(self)})"
            )
        return torch.tensor(rows, dtype=torch.long)

    @cached_property
    def _id_index(self) -> dict[int | str, int]:
        """The user's id → row number (the first row where an id repeats)."""
        keys: Sequence[int | str] = self.node_keys or self.node_ids.tolist()
        index: dict[int | str, int] = {}
        for row, key in enumerate(keys):
            index.setdefault(key, row)
        return index

    def __repr__(self) -> str:
        """A short description: sizes, groups, label and split counts (not the tensors; :meth:`summary` has more).

        Returns:
            One line, e.g. ``Graph('nodes': 400 nodes, 1200 edges, 3 features; groups {region=north: 225,
            region=south: 175}; label 'decision' {approved: 203, denied: 197}; split train 203 / val 89 / test 108)``.
        """
        groups = torch.bincount(self.sens, minlength=self.num_groups).tolist()
        classes = torch.bincount(self.y[self.y >= 0], minlength=self.num_classes).tolist()
        unlabeled = int((self.y < 0).sum())
        group_list = ", ".join(f"{group_label(self, g)}: {k}" for g, k in enumerate(groups))
        class_list = ", ".join(f"{class_value(self, c)}: {k}" for c, k in enumerate(classes))
        return (
            f"Graph({self.name!r}: {self.num_nodes} nodes, {self.num_edges} edges, {self.num_features} features; "
            f"groups {{{group_list}}}; label {self.label_name!r} {{{class_list}}}"
            f"{f', {unlabeled} unlabeled' if unlabeled else ''}; split train {self.train_idx.numel()} / "
            f"val {self.val_idx.numel()} / test {self.test_idx.numel()})"
        )


# ---------------------------------------------------------------------- helpers
def positions(index: Tensor, num_nodes: int) -> Tensor:
    """``[num_nodes]``: each node's place in ``index`` (e.g. ``train_idx``), −1 for the nodes not in it."""
    out = torch.full((num_nodes,), -1, dtype=torch.long, device=index.device)
    out[index] = torch.arange(index.numel(), device=index.device)
    return out


def row_numbers(graph: Graph, rows: ArrayLike, name: str = "rows") -> Tensor:
    """``rows`` (row numbers: 0-based indices into ``graph``; a list, an array or a tensor) as int64 ``[k]``, checked.

    Raises:
        GraphValidationError: ``rows`` holds text (the user's ids: the message points at :meth:`Graph.rows_of`),
            something other than integers, or a row number out of range.
    """
    if not isinstance(rows, Tensor):
        try:
            kind = np.asarray(rows).dtype.kind
        except (TypeError, ValueError):
            kind = "O"
        if kind in "USO":
            raise GraphValidationError(
                name,
                "takes row numbers (0-based indices into the graph), not the user's ids: turn ids into row numbers "
                f"with graph.rows_of(ids), e.g. graph.rows_of({example(rows)!r})",
            )
    out = as_tensor(rows, torch.long, name).reshape(-1)
    n = graph.num_nodes
    if out.numel() and (int(out.min()) < 0 or int(out.max()) >= n):
        bad = int(out.min()) if int(out.min()) < 0 else int(out.max())
        raise GraphValidationError(name, f"row number {bad} out of range for {n} nodes (0..{n - 1})")
    return out
