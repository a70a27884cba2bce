"""A node table's column that numbers the nodes while no node-id column is named
(:mod:`bind_core.data.datasets.positions`): refused where the edge list would be read against other numbers, reported
where it equals the row positions, left alone where the features are listed or the table is small."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bind_core.data.datasets import ingest_files
from bind_core.errors import GraphValidationError

N = 40
OPTIONS = {"label": "good", "sensitive": "gender"}


def _files(tmp_path: Path, ids: np.ndarray, n: int = N) -> tuple[Path, Path]:
    """A node table with an ``id`` column, and a ring over the rows written in those ids."""
    rows = np.arange(n)
    nodes = pd.DataFrame(
        {"id": ids, "age": 20.0 + rows % 7, "good": rows % 2, "gender": np.where(rows % 3 == 0, "f", "m")}
    )
    nodes_path, edges_path = tmp_path / "people.csv", tmp_path / "links.csv"
    nodes.to_csv(nodes_path, index=False)
    ring = [f"{ids[k]},{ids[(k + 1) % n]}" for k in range(n)]
    edges_path.write_text("\n".join(["src,dst", *ring]) + "\n")
    return nodes_path, edges_path


def _shuffled(n: int = N, start: int = 0) -> np.ndarray:
    return np.random.default_rng(0).permutation(n) + start


def test_a_column_numbering_the_nodes_out_of_row_order_is_refused(tmp_path: Path) -> None:
    with pytest.raises(GraphValidationError) as info:
        ingest_files(*_files(tmp_path, _shuffled()), **OPTIONS)
    err = info.value
    assert (err.field, err.column, err.file) == ("node_id", "id", "people.csv")
    text = str(err)
    assert f"holds every whole number from 0 to {N - 1} once, in another order than the rows" in text
    assert "node_id='id'" in text and "features=" in text


def test_named_as_the_node_id_column_the_same_files_read_by_their_ids(tmp_path: Path) -> None:
    ids = _shuffled()
    graph = ingest_files(*_files(tmp_path, ids), **OPTIONS, node_id="id").graph
    assert graph.feature_names == ("age", "gender")
    assert graph.node_ids is not None and graph.node_ids.tolist() == ids.tolist()
    pairs = {tuple(sorted(p)) for p in graph.node_ids[graph.edge_index].T.tolist()}
    assert pairs == {tuple(sorted((int(ids[k]), int(ids[(k + 1) % N])))) for k in range(N)}


def test_listed_features_say_the_edges_hold_row_positions(tmp_path: Path) -> None:
    graph = ingest_files(*_files(tmp_path, _shuffled()), **OPTIONS, features=["age", "gender"]).graph
    assert graph.feature_names == ("age", "gender") and graph.node_id_column is None


def test_one_based_numbers_are_refused_even_in_row_order(tmp_path: Path) -> None:
    with pytest.raises(GraphValidationError, match=f"from 1 to {N} once, in row order"):
        ingest_files(*_files(tmp_path, np.arange(1, N + 1)), **OPTIONS)


def test_a_column_equal_to_the_row_positions_is_reported_and_kept(tmp_path: Path) -> None:
    ingested = ingest_files(*_files(tmp_path, np.arange(N)), **OPTIONS)
    assert "id" in ingested.graph.feature_names
    hints = [str(h) for h in ingested.report.hints]
    assert any("column 'id' holds the row positions 0 to 39 in order" in h for h in hints)


@pytest.mark.parametrize(
    "ids",
    [
        np.arange(N) * 2,  # distinct whole numbers, not 0 … n−1
        np.arange(N) % 10,  # repeats
        _shuffled() + 0.5,  # not whole numbers
    ],
    ids=["spread", "repeated", "fractional"],
)
def test_other_integer_columns_are_features(tmp_path: Path, ids: np.ndarray) -> None:
    nodes, _ = _files(tmp_path, ids)
    edges = tmp_path / "positions.csv"
    edges.write_text("\n".join(["src,dst", *(f"{k},{(k + 1) % N}" for k in range(N))]) + "\n")
    assert "id" in ingest_files(nodes, edges, **OPTIONS).graph.feature_names


def test_a_small_table_is_not_checked(tmp_path: Path) -> None:
    n = 10
    nodes, _ = _files(tmp_path, _shuffled(n), n=n)
    edges = tmp_path / "positions.csv"
    edges.write_text("\n".join(["src,dst", *(f"{k},{(k + 1) % n}" for k in range(n))]) + "\n")
    assert "id" in ingest_files(nodes, edges, **OPTIONS).graph.feature_names
