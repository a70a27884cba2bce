"""What :meth:`Graph.build` and the node-level helpers say to a new user who passes what PyG or pandas hands them:
split masks, arrays of different lengths, the user's own node ids, lists of rows; and the graph's short repr."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
import torch

from bind_core.data.graph import Graph
from bind_core.errors import GraphValidationError
from bind_core.training.fit import TrainConfig, train

N = 60


def arrays() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    perm = rng.permutation(N)
    return {
        "x": rng.normal(size=(N, 3)),
        "edges": rng.integers(0, N, (2, 150)),
        "y": np.arange(N) % 2,
        "sens": (np.arange(N) // 2) % 2,
        "train_idx": np.sort(perm[:30]),
        "val_idx": np.sort(perm[30:40]),
        "test_idx": np.sort(perm[40:]),
    }


def build(**changes: object) -> Graph:
    return Graph.build(**{**arrays(), **changes})  # type: ignore[arg-type]


def masks() -> dict[str, np.ndarray]:
    return {k: np.isin(np.arange(N), v) for k, v in arrays().items() if k.endswith("_idx")}


@pytest.mark.parametrize("kind", ["numpy", "torch", "list"])
def test_boolean_masks_are_taken_as_their_nodes(kind: str) -> None:
    given = masks()
    options: dict[str, dict[str, Any]] = {
        "numpy": dict(given),
        "torch": {k: torch.from_numpy(v) for k, v in given.items()},
        "list": {k: v.tolist() for k, v in given.items()},
    }
    converted = options[kind]
    g = build(**converted)
    for name, idx in arrays().items():
        if name.endswith("_idx"):
            assert torch.equal(getattr(g, name), torch.from_numpy(idx).long())
    again = g.with_split(**{k: torch.from_numpy(v) for k, v in given.items()})
    assert torch.equal(again.train_idx, g.train_idx)


def test_a_zero_one_integer_mask_says_to_pass_indices() -> None:
    with pytest.raises(GraphValidationError, match=r"mask\.nonzero\(\)\.flatten\(\)") as caught:
        build(train_idx=masks()["train_idx"].astype(int))
    assert caught.value.field == "train_idx" and "more than once" not in str(caught.value)


def test_a_mask_of_another_length_is_named() -> None:
    with pytest.raises(GraphValidationError, match=r"one entry per node \(60\), got 50") as caught:
        build(val_idx=masks()["val_idx"][:50])
    assert caught.value.field == "val_idx"


@pytest.mark.parametrize(
    ("field", "cut"),
    [("x", "x"), ("y", "y"), ("sens", "sens")],
)
def test_arrays_of_another_length_name_the_one_that_differs(field: str, cut: str) -> None:
    given = arrays()
    with pytest.raises(GraphValidationError) as caught:
        build(**{cut: given[cut][:50]})
    assert caught.value.field == field
    assert "has 50 entries where the others have 60" in str(caught.value)
    assert "edge_index" not in str(caught.value)


def test_node_ids_of_another_length_are_named() -> None:
    with pytest.raises(GraphValidationError) as caught:
        build(node_ids=np.arange(59))
    assert caught.value.field == "node_ids"


def keyed() -> Graph:
    return build(node_keys=tuple(f"cust-{i:04d}-x" for i in range(N)), node_id_column="customer")


def test_rows_of_turns_the_users_ids_into_row_numbers() -> None:
    g = keyed()
    assert g.rows_of(["cust-0007-x", "cust-0003-x"]).tolist() == [7, 3]
    assert g.rows_of("cust-0005-x").tolist() == [5]
    numbered = build(node_ids=np.arange(N) + 1000)
    assert numbered.rows_of([1000, np.int64(1059)]).tolist() == [0, 59]
    assert numbered.rows_of(torch.tensor([1002])).tolist() == [2]


def test_rows_of_names_unknown_ids() -> None:
    with pytest.raises(GraphValidationError, match=r"1 id\(s\) not in this graph: 'cust-9999-x'") as caught:
        keyed().rows_of(["cust-0001-x", "cust-9999-x"])
    assert caught.value.field == "ids" and "customer" in str(caught.value)
    with pytest.raises(GraphValidationError, match="not in this graph: '7'"):
        build().rows_of(["7"])  # integer ids: the text "7" is not one (no silent conversion)


def test_without_nodes_refuses_the_users_ids_and_points_at_rows_of() -> None:
    g = keyed()
    with pytest.raises(GraphValidationError, match=r"rows_of\(\['cust-0006-x'\]\)") as caught:
        g.without_nodes(["cust-0006-x"])
    assert caught.value.field == "nodes" and "row numbers" in str(caught.value)
    reduced, mapping = g.without_nodes(g.rows_of(["cust-0006-x"]))
    assert reduced.num_nodes == N - 1 and "cust-0006-x" not in reduced.node_keys and int(mapping[6]) == -1
    with pytest.raises(GraphValidationError, match="row number 60 out of range for 60 nodes"):
        g.without_nodes([60])


def test_predict_proba_takes_a_list_of_rows_and_refuses_ids() -> None:
    g = keyed()
    model = train(g, TrainConfig(epochs=2, polish=False))
    assert torch.equal(model.predict_proba(g, [3, 5]), model.predict_proba(g, torch.tensor([3, 5])))
    assert torch.equal(model.predict_proba(g, np.array([3])), model.predict_proba(g)[[3]])
    with pytest.raises(GraphValidationError, match=r"rows_of"):
        model.predict_proba(g, ["cust-0003-x"])


def test_the_repr_is_short_and_in_the_users_terms() -> None:
    g = build(
        group_names=("north", "south"),
        sensitive=("region",),
        class_names=("approved", "denied"),
        label_name="decision",
        name="loans",
    )
    text = repr(g)
    assert "\n" not in text and len(text) < 300 and "tensor" not in text
    assert text.startswith("Graph('loans': 60 nodes, ") and "3 features" in text
    assert "region=north: 30, region=south: 30" in text and "'decision' {approved: 30, denied: 30}" in text
    assert "train 30 / val 10 / test 20" in text
    json.dumps(text)  # a plain string
