"""Graphs from user files (node tables, edge lists, .npz) and the .npz round trip."""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from bind_core.cli_errors import flag
from bind_core.data.datasets import from_files, ingest_files, load_npz, save_npz, synthetic
from bind_core.data.graph import Graph
from bind_core.errors import BindError, GraphValidationError

N = 40


def _table(n: int = N) -> pd.DataFrame:
    i = np.arange(n)
    return pd.DataFrame(
        {
            "id": 500 + i * 3,
            "age": 20.0 + i,
            "score": (i * 7) % 11,
            "flag": i % 3 == 0,
            "gender": np.where(i % 2 == 0, "f", "m"),
            "outcome": np.where(i % 4 < 2, "approved", "denied"),
        }
    )


def _ring(n: int = N) -> list[tuple[int, int]]:
    return [(i, (i + 1) % n) for i in range(n)]


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def nodes_csv(tmp_path: Path) -> Path:
    path = tmp_path / "nodes.csv"
    _table().to_csv(path, index=False)
    return path


@pytest.fixture
def edges_txt(tmp_path: Path) -> Path:
    return _write(tmp_path / "edges.txt", "".join(f"{a} {b}\n" for a, b in _ring()))


def _build(nodes: Path, edges: Path | None = None, **kwargs) -> Graph:
    kwargs.setdefault("label", "outcome")
    kwargs.setdefault("sensitive", "gender")
    return from_files(nodes, edges, **kwargs)


# ---------------------------------------------------------------------- happy paths
def test_csv_with_position_edges(nodes_csv: Path, edges_txt: Path) -> None:
    g = _build(nodes_csv, edges_txt, features=["age", "score", "flag"])
    assert g.name == "nodes"
    assert (g.num_nodes, g.num_edges, g.num_features) == (N, N, 3)
    assert g.feature_names == ("age", "score", "flag")
    assert g.y.tolist() == [0 if i % 4 < 2 else 1 for i in range(N)]  # "approved" < "denied"
    assert g.sens.tolist() == [i % 2 for i in range(N)]  # "f" < "m"
    assert float(g.x.min()) == -1.0 and float(g.x.max()) == 1.0
    assert torch.bincount(g.y[g.train_idx]).tolist() == [10, 10]  # the paper split, half per class


def test_default_features_keep_the_sensitive_column(nodes_csv: Path) -> None:
    g = _build(nodes_csv, node_id="id")
    assert g.feature_names == ("age", "score", "flag", "gender")
    assert g.x[:, 3].tolist() == [-1.0 if i % 2 == 0 else 1.0 for i in range(N)]
    assert g.num_edges == 0


def test_unscaled(nodes_csv: Path) -> None:
    g = _build(nodes_csv, features=["age"], scale=False)
    assert g.x[:, 0].tolist() == [20.0 + i for i in range(N)]
    assert g.feature_ranges == () and g.summary().features_scaled is False


def test_scaling_keeps_each_columns_range_and_says_so(nodes_csv: Path) -> None:
    """The default min-max scaling is recorded (the graph's ranges, the report's ``scaled`` and a note advising the
    option that turns it off, in the caller's terms), and the ranges map the scaled values back to the table's."""
    ingested = ingest_files(nodes_csv, label="outcome", sensitive="gender", features="age, score", allow_no_edges=True)
    g, report = ingested.graph, ingested.report
    assert g.feature_names == ("age", "score")  # a comma-separated string, as the command line gives it
    assert g.feature_ranges == ((20.0, 20.0 + N - 1), (0.0, 10.0))
    assert report.scaled == {"age": (20.0, 20.0 + N - 1), "score": (0.0, 10.0)}
    assert g.summary().features_scaled is True
    lo, hi = torch.tensor(g.feature_ranges, dtype=torch.float64).T
    back = (g.x.double() + 1) / 2 * (hi - lo) + lo
    table = _table()
    assert torch.allclose(back, torch.tensor(table[["age", "score"]].to_numpy(float)), atol=1e-5)
    note = next(n for n in report.notes() if "min-max" in n)
    assert "2 feature column(s)" in note and note.endswith("scale=False")
    assert report.summary(flag).notes[-1].endswith("--scale off")
    assert report.summary().scaled == {"age": [20.0, 20.0 + N - 1], "score": [0.0, 10.0]}


def test_feature_ranges_round_trip_and_are_checked(nodes_csv: Path, tmp_path: Path) -> None:
    g = _build(nodes_csv, features=["age", "score"])
    buffer = io.BytesIO()
    save_npz(g, buffer)
    assert load_npz(buffer.getvalue()).feature_ranges == g.feature_ranges
    unscaled = _build(nodes_csv, features=["age", "score"], scale=False)
    buffer = io.BytesIO()
    save_npz(unscaled, buffer)
    assert load_npz(buffer.getvalue()).feature_ranges == ()
    with pytest.raises(GraphValidationError, match="one \\(min, max\\) per feature column"):
        dataclasses.replace(g, feature_ranges=((0.0, 1.0),))
    with pytest.raises(GraphValidationError, match="finite, with min <= max"):
        dataclasses.replace(g, feature_ranges=((0.0, 1.0), (2.0, 1.0)))


@pytest.mark.parametrize(
    ("text", "sep"),
    [
        ("source,target\n{rows}", ","),
        ("src\tdst\n{rows}", "\t"),
        ("# a comment\n\n{rows}", " "),
        ("u v\n{rows}", "  "),
    ],
)
def test_edge_list_formats_and_node_ids(nodes_csv: Path, tmp_path: Path, text: str, sep: str) -> None:
    ids = _table()["id"].to_numpy()
    rows = "".join(f"{ids[a]}{sep}{ids[b]}\n" for a, b in _ring())
    path = _write(tmp_path / "edges.csv", text.format(rows=rows))
    g = _build(nodes_csv, path, node_id="id")
    assert g.num_edges == N
    assert g.node_ids.tolist() == ids.tolist()
    assert sorted(g.edge_index[:, g.edge_index[0] == 0][1].tolist()) == [1, N - 1]


def test_float_formatted_positions_and_duplicates(nodes_csv: Path, tmp_path: Path) -> None:
    rows = "".join(f"{float(a):.18e} {float(b):.18e}\n{b} {a}\n" for a, b in _ring())
    path = _write(tmp_path / "edges.txt", rows + "3 3\n")
    g = _build(nodes_csv, path)
    assert g.num_edges == N  # both directions merged, the self-loop dropped
    ingested = ingest_files(nodes_csv, path, label="outcome", sensitive="gender")
    assert ingested.report.duplicate_edges == 0  # both directions of an edge are not a repeat
    assert not any("repeat" in n for n in ingested.report.notes())
    repeated = _write(tmp_path / "repeats.txt", rows + "0 1\n0 1\n3 3\n")
    report = ingest_files(nodes_csv, repeated, label="outcome", sensitive="gender").report
    assert report.duplicate_edges == 2 and report.self_loops == 1
    assert any(n.startswith("2 edge row(s) repeat an earlier row, node for node: merged") for n in report.notes())


def test_string_node_ids(tmp_path: Path) -> None:
    table = _table()
    table["id"] = [f"user-{i}" for i in range(N)]
    nodes = tmp_path / "nodes.csv"
    table.to_csv(nodes, index=False)
    edges = _write(tmp_path / "e.tsv", "a\tb\n" + "".join(f"user-{a}\tuser-{b}\n" for a, b in _ring()))
    g = _build(nodes, edges, node_id="id")
    assert g.num_edges == N
    assert g.node_ids.tolist() == list(range(N))


@pytest.mark.parametrize("suffix", [".csv", ".tsv", ".parquet"])
def test_text_node_ids_are_kept_as_written(tmp_path: Path, suffix: str) -> None:
    table = _table()
    table["id"] = [f"user_{i}" for i in range(N)]
    table.loc[0, "id"], table.loc[1, "id"], table.loc[2, "id"] = "  padded ", "x\t", " user_3"
    nodes = tmp_path / f"nodes{suffix}"
    if suffix == ".parquet":
        table.to_parquet(nodes)
    else:
        table.to_csv(nodes, index=False, sep="\t" if suffix == ".tsv" else ",")
    ids = table["id"].tolist()
    rows = "".join(f'"{ids[a]}","{ids[b]}"\n' for a, b in _ring())
    g = _build(nodes, _write(tmp_path / "e.csv", "src,dst\n" + rows), node_id="id")
    assert g.node_keys[:4] == ("  padded ", "x\t", " user_3", "user_3")  # " user_3" and "user_3": two nodes
    assert g.num_edges == N
    # an edge list whose ids differ from the table's only in spaces is refused, saying so
    stripped = "".join(f"{ids[a].strip()},{ids[b].strip()}\n" for a, b in _ring())
    err = _error(_build, nodes, _write(tmp_path / "s.csv", "src,dst\n" + stripped), node_id="id")
    assert err.field == "edges" and "'padded'" in str(err)
    assert "edge endpoint 'padded' is not a node id; '  padded ' is (they differ in spaces" in str(err)


def test_a_forgotten_node_id_column_is_suggested(tmp_path: Path) -> None:
    """Text ids in a column ``uid`` and edges by them, without ``node_id``: both errors advise ``node_id='uid'``."""
    table = _table()
    table["uid"] = [f"user_{i}" for i in range(N)]
    nodes = tmp_path / "nodes.csv"
    table.to_csv(nodes, index=False)
    edges = _write(tmp_path / "e.csv", "src,dst\n" + "".join(f"user_{a},user_{b}\n" for a, b in _ring()))
    err = _error(_build, nodes, edges)  # uid taken as a feature: too many categories, and it looks like ids
    assert err.field == "features" and "every row has its own value, as node ids do" in str(err)
    assert "(--node-id uid)" in err.text(flag) and "node_id='uid'" in str(err)
    err = _error(_build, nodes, edges, features="age,score")  # the edges read as row positions
    assert err.field == "edges" and "values that are not integer node positions" in str(err)
    assert "the values of column 'uid' of the node table" in str(err) and "(--node-id uid)" in err.text(flag)
    assert _build(nodes, edges, node_id="uid").num_edges == N  # following the advice works


@pytest.mark.parametrize(("sep", "said"), [(";", "';'"), ("\t", "tabs")])
def test_a_csv_separated_by_semicolons_or_tabs_is_read_and_said(
    nodes_csv: Path, edges_txt: Path, tmp_path: Path, sep: str, said: str
) -> None:
    other = tmp_path / "other.csv"
    _table().to_csv(other, index=False, sep=sep)
    ingested = ingest_files(other, edges_txt, label="outcome", sensitive="gender")
    usual = from_files(nodes_csv, edges_txt, label="outcome", sensitive="gender")
    assert ingested.graph.feature_names == usual.feature_names and torch.equal(ingested.graph.x, usual.x)
    assert f"other.csv read as separated by {said}: its header line holds no ','" in ingested.report.notes()[-1]
    plain = ingest_files(nodes_csv, edges_txt, label="outcome", sensitive="gender")
    assert not any("separated" in n for n in plain.report.notes())  # a comma CSV: nothing to say


def test_parquet_and_split_column(tmp_path: Path, edges_txt: Path) -> None:
    table = _table()
    table["part"] = (["train", "VAL", "test", "", "other"] * N)[:N]
    nodes = tmp_path / "nodes.parquet"
    table.to_parquet(nodes)
    g = _build(nodes, edges_txt, split="part", name="custom")
    assert g.name == "custom"
    assert g.train_idx.tolist() == list(range(0, N, 5))
    assert g.val_idx.tolist() == list(range(1, N, 5))
    assert g.test_idx.tolist() == list(range(2, N, 5))
    assert "part" not in g.feature_names


def test_numeric_labels_are_recoded(tmp_path: Path, edges_txt: Path) -> None:
    table = _table()
    table["outcome"] = np.where(np.arange(N) % 4 < 2, 5, 9)
    table["gender"] = np.where(np.arange(N) % 2 == 0, -1.0, 2.5)
    nodes = tmp_path / "n.csv"
    table.to_csv(nodes, index=False)
    g = _build(nodes, edges_txt)
    assert set(g.y.tolist()) == {0, 1} and set(g.sens.tolist()) == {0, 1}


def test_npz_round_trip_exact(tmp_path: Path) -> None:
    g = synthetic(num_nodes=200, seed=4, name="roundtrip")
    g, _ = g.without_nodes([0, 5, 7])  # node ids no longer arange(n)
    buffer = io.BytesIO()
    save_npz(g, buffer)
    path = tmp_path / "g.npz"
    save_npz(g, path)
    for loaded in (load_npz(buffer.getvalue()), load_npz(io.BytesIO(buffer.getvalue())), load_npz(path)):
        for field in ("x", "edge_index", "y", "sens", "train_idx", "val_idx", "test_idx", "node_ids"):
            assert torch.equal(getattr(loaded, field), getattr(g, field)), field
        assert loaded.feature_names == g.feature_names
        assert loaded.name == "roundtrip"
    assert from_files(path).name == "roundtrip"


def test_npz_without_split_uses_paper_split(tmp_path: Path) -> None:
    g = synthetic(num_nodes=100, seed=2)
    path = tmp_path / "plain.npz"
    np.savez(
        path,
        x=g.x.numpy(),
        edge_index=g.edge_index.numpy()[:, g.edge_index[0] < g.edge_index[1]].T,
        y=g.y.numpy(),
        sens=g.sens.numpy(),
    )
    loaded = load_npz(path, split_seed=7)
    assert torch.equal(loaded.edge_index, g.edge_index)
    assert loaded.name == "graph"
    assert torch.bincount(loaded.y[loaded.train_idx]).tolist() == [n // 2 for n in torch.bincount(g.y).tolist()]


# ---------------------------------------------------------------------- errors
def _error(call, *args, **kwargs) -> GraphValidationError:
    with pytest.raises(GraphValidationError) as info:
        call(*args, **kwargs)
    assert isinstance(info.value, BindError) and isinstance(info.value, ValueError)
    return info.value


def test_missing_and_non_numeric_columns(nodes_csv: Path) -> None:
    err = _error(_build, nodes_csv, label="nope")
    assert (err.field, err.value) == ("label", "nope")
    err = _error(_build, nodes_csv, features=["age", "ghost"])
    assert (err.field, err.value) == ("features", "ghost")
    err = _error(_build, nodes_csv, features=["age", "outcome"])
    assert (err.field, err.value) == ("features", "outcome")
    g = _build(nodes_csv, sensitive="flag", features=["gender", "score"])
    assert g.feature_names == ("gender=f", "gender=m", "score")
    err = _error(_build, nodes_csv, sensitive="flag", features=["gender", "score"], max_categories=1)
    assert (err.field, err.column) == ("features", "gender")
    assert "features=" in str(err) and "2 distinct values" in str(err)
    assert _error(from_files, nodes_csv, sensitive="gender").field == "label"


def test_missing_values(tmp_path: Path) -> None:
    table = _table()
    table.loc[3, "age"] = np.nan
    table.loc[4, "outcome"] = None
    nodes = tmp_path / "n.csv"
    table.to_csv(nodes, index=False)
    err = _error(_build, nodes)
    assert (err.field, err.column) == ("nodes", "age") and "row 5 ('')" in str(err)
    assert err.rows == (5,) and err.count == 1
    assert err.file == "n.csv"
    g = _build(nodes, features=["score"])
    assert g.y[4] == -1 and g.summary().unlabeled == 1
    err = _error(_build, nodes, label="gender", sensitive="outcome", features=["age"])
    assert [(p.field, p.column, p.rows) for p in err.problems] == [("nodes", "outcome", (6,)), ("nodes", "age", (5,))]
    err = _error(_build, nodes, label="gender", sensitive="outcome", features=["score"])
    assert (err.field, err.column, err.rows) == ("nodes", "outcome", (6,))


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("nodes.csv", b""),
        ("nodes.csv", b"a,b\n"),
        ("nodes.csv", b'age,outcome\n1,"unterminated\n'),
        ("nodes.csv", b"\xff\xfe\x00garbage\x00,\x81\n1,2\n"),
        ("nodes.parquet", b"PAR1 not really parquet"),
        ("nodes.npz", b"not a zip"),
        ("nodes.json", b"{}"),
        ("nodes.xlsx", b"PK"),
    ],
)
def test_unreadable_node_files(tmp_path: Path, name: str, content: bytes) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    _error(_build, path)


def test_missing_file(tmp_path: Path) -> None:
    assert "no such file" in str(_error(_build, tmp_path / "absent.csv"))


@pytest.mark.parametrize(
    "content",
    [
        b"0 1\n1 2 3\n",  # three columns on a line
        b"0 1\n2 x\n",  # not a number
        b"0 1\n2\n",  # one value
        b"0 1\n1.5 2\n",  # not an integer
        b"0 1\n0 400\n",  # out of range
        b"0 1\n-1 2\n",  # negative
        b"\xff\xfe\x81\n",  # not UTF-8
        b'0,1\n"2,3\n',  # broken quoting
    ],
)
def test_malformed_edge_lists(nodes_csv: Path, tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "edges.txt"
    path.write_bytes(content)
    _error(_build, nodes_csv, path)


def test_unknown_node_id_in_edges(nodes_csv: Path, tmp_path: Path) -> None:
    edges = _write(tmp_path / "e.csv", "500,503\n503,9999\n")
    err = _error(_build, nodes_csv, edges, node_id="id")
    assert err.field == "edges" and "9999" in str(err)


def test_duplicate_node_ids(tmp_path: Path) -> None:
    table = _table()
    table.loc[1, "id"] = table.loc[0, "id"]
    nodes = tmp_path / "n.csv"
    table.to_csv(nodes, index=False)
    err = _error(_build, nodes, node_id="id")
    assert (err.field, err.column, err.rows) == ("nodes", "id", (2, 3))


def test_split_column_errors(tmp_path: Path) -> None:
    table = _table()
    table["part"] = "train"
    nodes = tmp_path / "n.csv"
    table.to_csv(nodes, index=False)
    assert "'val'" in str(_error(_build, nodes, split="part"))


def test_limits(nodes_csv: Path, edges_txt: Path, tmp_path: Path) -> None:
    assert "limit" in str(_error(_build, nodes_csv, max_nodes=N - 1))
    assert "limit" in str(_error(_build, nodes_csv, edges_txt, max_edges=N - 1))
    assert "limit" in str(_error(_build, nodes_csv, max_columns=5))
    _build(nodes_csv, edges_txt, max_nodes=N, max_edges=N, max_columns=6)
    path = tmp_path / "g.npz"
    save_npz(synthetic(num_nodes=100), path)
    assert _error(load_npz, path, max_nodes=99).field == "x"
    assert _error(load_npz, path, max_columns=7).field == "x"
    assert _error(load_npz, path, max_edges=10).field == "edge_index"


def test_bad_npz_archives(tmp_path: Path) -> None:
    g = synthetic(num_nodes=100)
    arrays = {"x": g.x.numpy(), "edge_index": g.edge_index.numpy(), "y": g.y.numpy(), "sens": g.sens.numpy()}

    def saved(**changes) -> bytes:
        buffer = io.BytesIO()
        np.savez(buffer, **{k: v for k, v in {**arrays, **changes}.items() if v is not None})
        return buffer.getvalue()

    assert _error(load_npz, saved(sens=None)).field == "sens"
    assert _error(load_npz, saved(train_idx=g.train_idx.numpy())).field in ("val_idx", "test_idx")
    assert _error(load_npz, saved(y=np.array(["a"] * 100))).field == "y"
    assert _error(load_npz, saved(x=np.array([object()] * 100, dtype=object))).field in ("x", "npz")
    assert _error(load_npz, saved(x=g.x.numpy()[:, 0])).field == "x"
    assert _error(load_npz, saved(y=g.y.numpy()[:50])).field == "y"
    assert _error(load_npz, saved(feature_names=np.array(["a", "b"]))).field == "feature_names"
    assert _error(load_npz, saved(feature_ranges=np.zeros((3, 2)))).field == "feature_ranges"
    assert _error(load_npz, saved(feature_ranges=np.full((g.num_features, 2), np.nan))).field == "feature_ranges"
    assert _error(load_npz, saved()[:100]).field == "npz"  # truncated
    assert _error(load_npz, b"").field == "npz"
    with pytest.raises(GraphValidationError):
        from_files(tmp_path / "g.npz", tmp_path / "edges.txt")
