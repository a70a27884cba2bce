"""Validation of the Graph type, one error at a time, and its editing methods."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from bind_core.data.graph import Graph
from bind_core.errors import BindError, GraphValidationError

# 8 nodes: labels 0,1 alternate; groups 0,0,1,1 repeat. Test = nodes 4..7 holds every (group, label) pair.
Y = [0, 1, 0, 1, 0, 1, 0, 1]
S = [0, 0, 1, 1, 0, 0, 1, 1]
EDGES = [[0, 1], [1, 2], [2, 3], [3, 4], [4, 5], [5, 6], [6, 7]]


def _args(**changes: Any) -> dict[str, Any]:
    args: dict[str, Any] = {
        "x": np.arange(16, dtype=np.float32).reshape(8, 2),
        "edges": EDGES,
        "y": Y,
        "sens": S,
        "train_idx": [0, 1],
        "val_idx": [2, 3],
        "test_idx": [4, 5, 6, 7],
    }
    args.update(changes)
    return args


def _build(**changes: Any) -> Graph:
    args = _args(**changes)
    return Graph.build(
        args.pop("x"), args.pop("edges"), args.pop("y"), args.pop("sens"),
        args.pop("train_idx"), args.pop("val_idx"), args.pop("test_idx"), **args,
    )  # fmt: skip


def _error(**changes: Any) -> GraphValidationError:
    with pytest.raises(GraphValidationError) as info:
        _build(**changes)
    assert isinstance(info.value, BindError) and isinstance(info.value, ValueError)
    return info.value


def test_valid_graph() -> None:
    g = _build(feature_names=["a", "b"], name="toy")
    assert (g.num_nodes, g.num_edges, g.num_features, g.num_classes, g.num_groups) == (8, 7, 2, 2, 2)
    assert g.edge_index.shape == (2, 14)
    assert g.node_ids.tolist() == list(range(8))
    assert g.degree.tolist() == [1, 2, 2, 2, 2, 2, 2, 1]
    assert g.summary().test == 4


def test_edges_given_as_e_by_2_or_2_by_e_and_both_directions() -> None:
    reference = _build().edge_index
    assert torch.equal(_build(edges=np.array(EDGES).T).edge_index, reference)
    both = EDGES + [[b, a] for a, b in EDGES]
    assert torch.equal(_build(edges=both).edge_index, reference)


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"y": Y[:7]}, "y"),
        ({"sens": [*S, 0]}, "sens"),
        ({"x": np.zeros(8, dtype=np.float32)}, "x"),
        ({"x": np.zeros((8, 0), dtype=np.float32)}, "x"),
        ({"edges": [[0, 1, 2]]}, "edge_index"),
        ({"node_ids": list(range(7))}, "node_ids"),
    ],
)
def test_shape_mismatch(changes: dict[str, Any], field: str) -> None:
    assert _error(**changes).field == field


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_features(bad: float) -> None:
    x = np.zeros((8, 2), dtype=np.float32)
    x[3, 1] = bad
    err = _error(x=x)
    assert err.field == "x" and "node 3" in str(err) and "column 1" in str(err)


@pytest.mark.parametrize("edge", [[0, 8], [-1, 2], [100, 1]])
def test_edge_out_of_range(edge: list[int]) -> None:
    err = _error(edges=[*EDGES, edge])
    assert err.field == "edge_index" and "out of range" in str(err)


def test_self_loops_dropped_or_rejected() -> None:
    assert _build(edges=[*EDGES, [3, 3]]).num_edges == 7
    err = _error(edges=[*EDGES, [3, 3]], self_loops="error")
    assert err.field == "edge_index" and "self-loop on node 3" in str(err)


def test_duplicates_merged_or_rejected() -> None:
    duplicated = [*EDGES, [1, 0], [2, 3]]
    assert _build(edges=duplicated).num_edges == 7
    err = _error(edges=duplicated, duplicates="error")
    assert err.field == "edge_index" and "2 duplicate" in str(err)


def test_direct_construction_rejects_unclean_edges() -> None:
    g = _build()
    base = {f: getattr(g, f) for f in ("x", "y", "sens", "train_idx", "val_idx", "test_idx")}
    one_way = torch.tensor([[0, 1], [1, 2]])
    with pytest.raises(GraphValidationError, match="undirected"):
        Graph(edge_index=one_way, **base)
    unsorted = torch.tensor([[1, 0], [0, 1]])
    with pytest.raises(GraphValidationError, match="sorted"):
        Graph(edge_index=unsorted, **base)
    with pytest.raises(GraphValidationError, match="self-loops"):
        Graph(edge_index=torch.tensor([[2], [2]]), **base)


def test_non_integral_labels() -> None:
    assert _error(y=[0.5, *Y[1:]]).field == "y"


def test_overlapping_splits() -> None:
    err = _error(val_idx=[1, 2, 3])
    assert err.field == "split" and "node 1" in str(err)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"train_idx": []}, "empty"),
        ({"test_idx": [4, 4, 5, 6, 7]}, "more than once"),
        ({"val_idx": [2, 30]}, "out of range"),
        ({"train_idx": [0]}, "single class"),
    ],
)
def test_bad_split_indices(changes: dict[str, Any], message: str) -> None:
    assert message in str(_error(**changes))


def test_class_missing_from_test() -> None:
    err = _error(train_idx=[0, 1, 5, 7], test_idx=[4, 6])
    assert err.field == "test_idx" and "class(es) [1]" in str(err)


def test_group_missing_from_test() -> None:
    err = _error(train_idx=[0, 1, 6, 7], test_idx=[4, 5])
    assert err.field == "test_idx" and "group(s) [1]" in str(err)


def test_group_without_positive_test_node() -> None:
    err = _error(train_idx=[0, 1, 7], test_idx=[4, 5, 6])
    assert err.field == "test_idx" and "positive" in str(err)


def test_one_group_only() -> None:
    err = _error(sens=[0] * 8)
    assert err.field == "sens" and "two" in str(err)


def test_unused_codes() -> None:
    err = _error(sens=[0, 0, 2, 2, 0, 0, 2, 2])
    assert err.field == "sens" and "unused: [1]" in str(err)
    assert _error(y=[-2, *Y[1:]]).field == "y"


def test_unlabeled_nodes_stay_out_of_every_split() -> None:
    err = _error(y=[-1, *Y[1:]])  # node 0 is a training node
    assert err.field == "split" and "unlabeled" in str(err)
    g = _build(y=[0, 1, 0, -1, *Y[4:]], val_idx=[2])
    summary = g.summary()
    assert summary.unlabeled == 1 and summary.class_sizes == [4, 3]
    assert g.num_classes == 2 and g.num_nodes == 8


def test_without_nodes_reindexes_and_maps() -> None:
    g = _build(node_ids=[10, 11, 12, 13, 14, 15, 16, 17])
    reduced, mapping = g.without_nodes([2])
    assert mapping.tolist() == [0, 1, -1, 2, 3, 4, 5, 6]
    assert reduced.num_nodes == 7
    assert reduced.node_ids.tolist() == [10, 11, 13, 14, 15, 16, 17]
    assert torch.equal(reduced.x, g.x[[0, 1, 3, 4, 5, 6, 7]])
    assert reduced.y.tolist() == [0, 1, 1, 0, 1, 0, 1]
    assert reduced.sens.tolist() == [0, 0, 1, 0, 0, 1, 1]
    assert reduced.train_idx.tolist() == [0, 1]
    assert reduced.val_idx.tolist() == [2]
    assert reduced.test_idx.tolist() == [3, 4, 5, 6]
    # (1,2) and (2,3) are gone; (3,4)...(6,7) become (2,3)...(5,6)
    upper = reduced.edge_index[:, reduced.edge_index[0] < reduced.edge_index[1]].T.tolist()
    assert upper == [[0, 1], [2, 3], [3, 4], [4, 5], [5, 6]]
    again, _ = reduced.without_nodes([])
    assert torch.equal(again.edge_index, reduced.edge_index)


def test_without_nodes_errors() -> None:
    g = _build()
    with pytest.raises(GraphValidationError):
        g.without_nodes([8])
    with pytest.raises(GraphValidationError):
        g.without_nodes([4, 5, 6, 7])  # empties the test split


def test_with_split() -> None:
    g = _build()
    other = g.with_split([2, 3], [0, 1], [4, 5, 6, 7])
    assert other.train_idx.tolist() == [2, 3] and torch.equal(other.edge_index, g.edge_index)
    with pytest.raises(GraphValidationError):
        g.with_split([0, 1], [1, 2], [4, 5, 6, 7])
