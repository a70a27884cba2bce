"""The checks a :class:`~bind_core.data.graph.Graph` passes on construction: shapes and dtypes, the label's and the
groups' codes, names, the undirected edge list, the splits (each class and at least two groups in the test split)."""

from __future__ import annotations

from typing import Protocol

import numpy as np
import torch
from torch import Tensor

from bind_core.errors import GraphValidationError


class GraphFields(Protocol):
    """The fields of a :class:`~bind_core.data.graph.Graph` the checks read (a protocol, so that this module does not
    import the one that calls it)."""

    @property
    def x(self) -> Tensor: ...
    @property
    def edge_index(self) -> Tensor: ...
    @property
    def y(self) -> Tensor: ...
    @property
    def sens(self) -> Tensor: ...
    @property
    def train_idx(self) -> Tensor: ...
    @property
    def val_idx(self) -> Tensor: ...
    @property
    def test_idx(self) -> Tensor: ...
    @property
    def node_ids(self) -> Tensor: ...
    @property
    def group_names(self) -> tuple[str, ...]: ...
    @property
    def sensitive(self) -> tuple[str, ...]: ...
    @property
    def group_meanings(self) -> tuple[str, ...]: ...
    @property
    def node_keys(self) -> tuple[str, ...]: ...
    @property
    def class_names(self) -> tuple[str, ...]: ...
    @property
    def feature_ranges(self) -> tuple[tuple[float, float], ...]: ...


def validate(g: GraphFields) -> None:
    """Check a constructed graph's fields (shapes, dtypes, codes, names, edges, splits), raising
    :class:`~bind_core.errors.GraphValidationError` naming the field."""
    if g.x.ndim != 2:
        raise GraphValidationError("x", f"expected a 2-D [nodes, features] matrix, got shape {list(g.x.shape)}")
    n, d = g.x.shape
    if n < 2 or d < 1:
        raise GraphValidationError("x", f"need at least 2 nodes and 1 feature, got shape {[n, d]}")
    if g.x.dtype != torch.float32:
        raise GraphValidationError("x", f"expected float32, got {g.x.dtype}")
    if not bool(torch.isfinite(g.x).all()):
        bad = (~torch.isfinite(g.x)).nonzero()[0].tolist()
        raise GraphValidationError("x", f"features must be finite; NaN or inf at node {bad[0]}, column {bad[1]}")
    for name in ("y", "sens", "node_ids"):
        t: Tensor = getattr(g, name)
        if t.dtype != torch.long:
            raise GraphValidationError(name, f"expected int64, got {t.dtype}")
        if t.shape != (n,):
            raise GraphValidationError(name, f"expected shape [{n}] (one per node), got {list(t.shape)}")
    if int(g.y.min()) < -1:
        raise GraphValidationError("y", f"values must be class codes (or -1: unlabeled), got {int(g.y.min())}")
    _validate_values(g.y[g.y >= 0], "y", "classes")
    _validate_values(g.sens, "sens", "sensitive groups")
    _validate_names(g, n)
    _validate_ranges(g, d)
    _validate_edges(g.edge_index, n)
    _validate_splits(g, n)


def _validate_names(g: GraphFields, n: int) -> None:
    """The names of the groups, the sensitive attributes and the nodes' text ids. A graph reduced by
    :meth:`Graph.without_nodes` keeps every group's name even where the last group lost all its nodes."""
    groups = int(g.sens.max()) + 1
    for name, values in (("group_names", g.group_names), ("group_meanings", g.group_meanings)):
        if values and len(values) < groups:
            raise GraphValidationError(name, f"{len(values)} names for {groups} sensitive groups")
    if not g.sensitive or not all(s.strip() for s in g.sensitive):
        raise GraphValidationError("sensitive", f"needs the sensitive attribute's name(s), got {list(g.sensitive)}")
    if g.class_names and len(g.class_names) < int(g.y.max()) + 1:
        raise GraphValidationError("class_names", f"{len(g.class_names)} names for {int(g.y.max()) + 1} classes")
    if g.node_keys and len(g.node_keys) != n:
        raise GraphValidationError("node_keys", f"expected one text id per node ({n}), got {len(g.node_keys)}")


def _validate_ranges(g: GraphFields, d: int) -> None:
    """``feature_ranges``: none, or one finite ``(min, max)`` per feature column."""
    if g.feature_ranges and len(g.feature_ranges) != d:
        raise GraphValidationError(
            "feature_ranges", f"expected one (min, max) per feature column ({d}), got {len(g.feature_ranges)}"
        )
    if any(not (np.isfinite(lo) and np.isfinite(hi) and lo <= hi) for lo, hi in g.feature_ranges):
        raise GraphValidationError("feature_ranges", "each (min, max) must be finite, with min <= max")


def _validate_values(t: Tensor, name: str, what: str) -> None:
    if int(t.min()) < 0:
        raise GraphValidationError(name, f"values must be non-negative codes, got {int(t.min())}")
    counts = torch.bincount(t)
    present = int((counts > 0).sum())
    if present < 2:
        raise GraphValidationError(name, f"need at least two {what}, got {present}")
    if present != counts.numel():
        missing = (counts == 0).nonzero().flatten().tolist()
        raise GraphValidationError(name, f"codes must be 0..{counts.numel() - 1} with none unused; unused: {missing}")


def _validate_edges(ei: Tensor, n: int) -> None:
    if ei.dtype != torch.long or ei.ndim != 2 or ei.shape[0] != 2:
        raise GraphValidationError("edge_index", f"expected int64 [2, E], got {ei.dtype} {list(ei.shape)}")
    if ei.numel() == 0:
        return
    lo, hi = int(ei.min()), int(ei.max())
    if lo < 0 or hi >= n:
        raise GraphValidationError("edge_index", f"node index {hi if hi >= n else lo} out of range for {n} nodes")
    if bool((ei[0] == ei[1]).any()):
        raise GraphValidationError("edge_index", "self-loops are not allowed (Graph.build drops them)")
    keys = ei[0] * n + ei[1]
    if bool((keys[1:] <= keys[:-1]).any()):
        raise GraphValidationError(
            "edge_index", "must be sorted by (source, target) without duplicates (Graph.build does this)"
        )
    rev = torch.sort(ei[1] * n + ei[0]).values
    if not torch.equal(rev, keys):
        raise GraphValidationError("edge_index", "must be undirected: every edge stored in both directions")


def _validate_splits(g: GraphFields, n: int) -> None:
    seen = torch.zeros(n, dtype=torch.long)
    for name in ("train_idx", "val_idx", "test_idx"):
        idx: Tensor = getattr(g, name)
        if idx.dtype != torch.long or idx.ndim != 1:
            raise GraphValidationError(name, f"expected a 1-D int64 index, got {idx.dtype} {list(idx.shape)}")
        if idx.numel() == 0:
            raise GraphValidationError(name, "split is empty")
        if int(idx.min()) < 0 or int(idx.max()) >= n:
            raise GraphValidationError(name, f"node index out of range for {n} nodes")
        if torch.unique(idx).numel() != idx.numel():
            raise GraphValidationError(name, "lists a node more than once")
        seen[idx] += 1
    if bool((seen > 1).any()):
        v = int((seen > 1).nonzero()[0])
        raise GraphValidationError("split", f"train, val and test overlap (node {v} is in two of them)")
    if bool(((seen > 0) & (g.y < 0)).any()):
        v = int(((seen > 0) & (g.y < 0)).nonzero()[0])
        raise GraphValidationError("split", f"node {v} is unlabeled (y = -1) but in a split")
    test_y, test_s = g.y[g.test_idx], g.sens[g.test_idx]
    num_classes, num_groups = int(g.y.max()) + 1, int(g.sens.max()) + 1
    missing_c = sorted(set(range(num_classes)) - set(torch.unique(test_y).tolist()))
    if missing_c:
        raise GraphValidationError("test_idx", f"class(es) {missing_c} missing from the test split")
    # A group absent from the test split (or, binary labels, from its positives) is allowed: the audit
    # reports it and keeps it out of the metrics (bind_core.data.groups.included_groups). Two groups are needed.
    test_groups = set(torch.unique(test_s).tolist())
    missing_g = sorted(set(range(num_groups)) - test_groups)
    if len(test_groups) < 2:
        raise GraphValidationError(
            "test_idx", f"sensitive group(s) {missing_g} missing from the test split; at least two groups must occur"
        )
    if num_classes == 2:
        pos_groups = set(torch.unique(test_s[test_y == 1]).tolist())
        missing_p = sorted(set(range(num_groups)) - pos_groups)
        if len(pos_groups) < 2:
            raise GraphValidationError(
                "test_idx",
                f"group(s) {missing_p} have no positive (y=1) test node, so ΔEO is undefined; at least two "
                "groups must have one",
            )
    train_classes = set(torch.unique(g.y[g.train_idx]).tolist())
    if len(train_classes) < 2:
        raise GraphValidationError("train_idx", "the training split holds a single class")
