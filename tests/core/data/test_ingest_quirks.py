"""Real-world quirks of node tables and edge lists, each as a small file, through ``from_files``."""

from __future__ import annotations

import dataclasses
import gzip
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import quirk_files as q
import torch

from bind_core.data.datasets import from_files, ingest_files, load_npz, save_npz
from bind_core.data.records import Imputation
from bind_core.errors import GraphValidationError
from bind_core.pipeline.caveats import warnings_for

BASE = {"label": "good", "sensitive": "gender", "node_id": "id"}


def _error(nodes: Path, edges: Path | None, **options: object) -> GraphValidationError:
    with pytest.raises(GraphValidationError) as info:
        from_files(nodes, edges, **(BASE | options))
    return info.value


def _ring_pairs(g_ids: torch.Tensor, ids: list[int]) -> set[tuple[int, int]]:
    return {(min(a, b), max(a, b)) for a, b in zip(ids, ids[1:] + ids[:1], strict=True)}


def _edge_ids(g) -> set[tuple[int, int]]:
    src, dst = g.node_ids[g.edge_index[0]].tolist(), g.node_ids[g.edge_index[1]].tolist()
    return {(a, b) for a, b in zip(src, dst, strict=True) if a < b}


def test_text_feature_is_one_hot_encoded_and_booleans_are_0_1(tmp_path: Path) -> None:
    ingested = ingest_files(*q.text_feature(tmp_path), **BASE, scale=False)
    g, report = ingested.graph, ingested.report
    assert g.feature_names == ("amount", *(f"purpose={p}" for p in q.PURPOSES), "married", "gender")
    purpose = g.x[:, 1:11]
    assert purpose.sum(dim=1).tolist() == [1.0] * q.N
    assert purpose.argmax(dim=1).tolist() == [i % 10 for i in range(q.N)]
    assert g.x[:, 11].tolist() == [float(i % 3 == 0) for i in range(q.N)]
    assert g.x[:, 12].tolist() == [float(i % 2) for i in range(q.N)]  # the text sensitive column as its codes
    assert report.encoded == {"purpose": q.PURPOSES} and report.booleans == ["married"]
    assert "column 'purpose' one-hot encoded into 10 feature columns" in ingested.summary().ingest.notes[0]


def test_text_feature_over_the_cap_names_the_column(tmp_path: Path) -> None:
    err = _error(*q.text_feature(tmp_path), max_categories=9)
    assert (err.field, err.column, err.file) == ("features", "purpose", "people.csv")
    assert str(err).startswith(
        "features: people.csv, column 'purpose' holds text with 10 distinct values (e.g. 'business', 'car', "
        "'education', 'furniture', 'holiday'), more than the 9 that are one-hot encoded; leave it out by listing "
        "the feature columns (features=)"
    )
    g = from_files(*q.text_feature(tmp_path), **BASE, features=["amount", "married"], max_categories=9)
    assert g.feature_names == ("amount", "married")


def test_missing_numeric_values_are_refused_or_imputed_with_the_median(tmp_path: Path) -> None:
    table = q.people()
    table.loc[[3, 7, 8, 9, 10, 11], "amount"] = np.nan
    nodes, edges = q.write(tmp_path, table, q.ring(table["id"].astype(str).tolist()))
    err = _error(nodes, edges)
    assert (err.field, err.column, err.rows, err.count) == ("nodes", "amount", (5, 9, 10, 11, 12), 6)
    assert err.values == ("",) * 5
    assert "people.csv, column 'amount': missing values in 6 row(s): row 5 (''), row 9 ('')" in str(err)
    assert "and 1 more" in str(err)
    ingested = ingest_files(nodes, edges, **BASE, impute_missing=True, scale=False)
    median = float(table["amount"].median())
    assert ingested.graph.x[3, 0].item() == pytest.approx(median)
    assert ingested.report.imputed == {"amount": Imputation(rule="median", count=6, value=median)}


def test_64_bit_ids_are_exact(tmp_path: Path) -> None:
    g = from_files(*q.big_ids(tmp_path), **BASE)
    ids = [q.BIG + 7 * i for i in range(q.N)]
    assert g.node_ids.tolist() == ids  # no float64 round trip: BIG + 7 differs from BIG
    assert g.num_edges == q.N and _edge_ids(g) == _ring_pairs(g.node_ids, ids)


def test_whole_float_ids_in_both_files(tmp_path: Path) -> None:
    g = from_files(*q.float_ids(tmp_path), **BASE)
    ids = [100 + i for i in range(q.N)]
    assert g.node_ids.tolist() == ids and _edge_ids(g) == _ring_pairs(g.node_ids, ids)


def test_sentinel_label_gets_a_hint_and_unlabeled_makes_it_unlabeled(tmp_path: Path) -> None:
    nodes, edges = q.sentinel_label(tmp_path)
    plain = ingest_files(nodes, edges, **BASE)
    assert plain.graph.num_classes == 3
    assert plain.report.notes()[-2] == (
        "label column 'good' holds -1 beside 0 and 1: it is read as a third class; if -1 marks unlabeled nodes, "
        "pass unlabeled='-1'"
    )
    assert "label column 'good' has 3 classes ('-1', '0', '1')" in plain.report.notes()[-1]
    ingested = ingest_files(nodes, edges, **BASE, unlabeled="-1")
    g = ingested.graph
    unlabeled = [i for i in range(q.N) if i % 5 == 4]
    assert g.num_classes == 2 and torch.nonzero(g.y < 0).flatten().tolist() == unlabeled
    in_split = torch.cat([g.train_idx, g.val_idx, g.test_idx]).tolist()
    assert not set(unlabeled) & set(in_split)
    assert g.num_edges == q.N  # unlabeled nodes keep their edges
    assert ingested.report.unlabeled == 8 and ingested.summary().unlabeled == 8
    assert load_npz(_saved(g, tmp_path)).y.tolist() == g.y.tolist()


def test_empty_label_cells_are_unlabeled(tmp_path: Path) -> None:
    table = q.people()
    table["good"] = table["good"].astype(object)
    table.loc[[0, 5], "good"] = None
    g = from_files(*q.write(tmp_path, table, q.ring(table["id"].astype(str).tolist())), **BASE)
    assert torch.nonzero(g.y < 0).flatten().tolist() == [0, 5]


def test_dangling_edges_are_refused_or_dropped(tmp_path: Path) -> None:
    nodes, edges = q.dangling_edges(tmp_path)
    err = _error(nodes, edges)
    assert str(err) == (
        "edges: edges.csv, column 'src/dst': node ids absent from the node table's column 'id' in 2 row(s): "
        "row 3 ('9999'), row 5 ('8888'); to drop such edges, pass on_unknown_nodes='drop'"
    )
    assert (err.field, err.file, err.rows, err.values, err.count) == ("edges", "edges.csv", (3, 5), ("9999", "8888"), 2)
    ingested = ingest_files(nodes, edges, **BASE, on_unknown_nodes="drop")
    assert ingested.graph.num_edges == q.N
    assert (ingested.report.dropped_edges, ingested.report.unknown_ids) == (2, ["9999", "8888"])


def test_positions_out_of_range_name_the_file_not_edge_index(tmp_path: Path) -> None:
    nodes, _ = q.text_feature(tmp_path)
    edges = tmp_path / "pos.txt"
    edges.write_text("0 1\n1 2\n2 40\n")
    err = _error(nodes, edges, node_id=None)
    assert err.field == "edges" and "edge_index" not in str(err)
    assert "pos.txt: node positions outside 0..39 (the table has 40 rows) in 1 row(s): row 3 ('40')" in str(err)


def test_extra_edge_columns_are_reported_and_ignored(tmp_path: Path) -> None:
    ingested = ingest_files(*q.extra_edge_columns(tmp_path), **BASE)
    assert ingested.graph.num_edges == q.N
    assert ingested.report.ignored_edge_columns == ["weight", "timestamp"]


def test_gzip_files_read_like_plain_ones(tmp_path: Path) -> None:
    (tmp_path / "gz").mkdir()
    packed = from_files(*q.gzipped(tmp_path / "gz"), **BASE)
    plain = from_files(*q.text_feature(tmp_path), **BASE)
    assert packed.name == "people"
    for key in ("x", "edge_index", "y", "sens", "train_idx", "node_ids"):
        assert torch.equal(getattr(packed, key), getattr(plain, key))
    err = _error(*q.gzipped(tmp_path / "gz"), max_unpacked_bytes=100)
    assert err.field == "nodes" and "people.csv.gz unpacks to more than the limit of 100 bytes" in str(err)
    broken = tmp_path / "broken.csv.gz"
    broken.write_bytes(gzip.compress(b"id,good\n")[:-6])
    assert _error(broken, None).field == "nodes"


def test_empty_edge_file_is_an_error_unless_allowed(tmp_path: Path) -> None:
    nodes, edges = q.empty_edges(tmp_path)
    err = _error(nodes, edges)
    assert str(err) == (
        "edges: edges.csv: it holds no edges; a GNN on a graph without edges sees only each node's own features. "
        "Pass allow_no_edges=True to audit it anyway"
    )
    g = from_files(nodes, edges, **BASE, allow_no_edges=True)
    assert g.num_edges == 0
    assert any("the graph has no edges" in w for w in warnings_for(g))
    assert not any("no edges" in w for w in warnings_for(from_files(*q.text_feature(tmp_path), **BASE)))


def test_continuous_sensitive_column_needs_a_binning_rule(tmp_path: Path) -> None:
    nodes, edges = q.continuous_sensitive(tmp_path)
    err = _error(nodes, edges, sensitive="age")
    assert (err.field, err.value, err.column) == ("sensitive", "age", "age")
    assert "column 'age' is numeric with 40 distinct values, more than the 10 groups" in str(err)
    assert "sensitive_bins='age>=39.5' (its median)" in str(err)
    ingested = ingest_files(nodes, edges, **BASE | {"sensitive": "age"}, sensitive_bins="age>=30")
    g = ingested.graph
    assert g.group_names == ("age<30", "age>=30") and g.sens.tolist() == [int(i >= 10) for i in range(q.N)]
    assert ingested.report.binned == {"age": ["age<30", "age>=30"]}
    g = from_files(nodes, edges, **BASE | {"sensitive": "gender,age"}, sensitive_bins="age:25,50")
    assert g.group_names == tuple(f"gender={s} & {b}" for s in ("F", "M") for b in ("age<25", "25<=age<50", "age>=50"))
    assert _error(nodes, edges, sensitive="age", sensitive_bins="age>=x").field == "sensitive_bins"
    assert _error(nodes, edges, sensitive="gender", sensitive_bins="age>=30").field == "sensitive_bins"


def test_near_duplicate_group_values_stay_apart(tmp_path: Path) -> None:
    nodes, edges = q.near_duplicate_groups(tmp_path)
    g = from_files(nodes, edges, **BASE)
    assert g.group_names == ("F", "F ", "M")
    assert g.sens.tolist() == [1 if i % 4 == 0 else (0 if i % 2 == 0 else 2) for i in range(q.N)]
    g = from_files(nodes, edges, **BASE | {"sensitive": "branch"})
    assert g.group_names == ("1234567", "1234568")


def test_graph_level_errors_use_the_users_names(tmp_path: Path) -> None:
    table = q.people()
    table["gender"] = "F"
    err = _error(*q.write(tmp_path, table, q.ring(table["id"].astype(str).tolist())))
    assert (err.field, err.column) == ("sensitive", "gender") and "sens" not in err.text().replace("sensitive", "")
    assert "the graph built from people.csv" in str(err) and "groups 0='F'" in str(err)


def test_fair_graph_benchmark_layout_loads_with_only_label_and_sensitive_named(tmp_path: Path) -> None:
    """The German credit layout of the fair-graph benchmarks: text and numeric columns, a -1/1 label, row
    positions written by numpy.savetxt in a separate edges file."""
    rng = np.random.default_rng(0)
    n = 60
    table = pd.DataFrame(
        {
            "Gender": np.where(np.arange(n) % 2 == 0, "Female", "Male"),
            "PurposeOfLoan": rng.choice(["Business", "Education", "NewCar", "UsedCar", "Other"], n),
            "LoanAmount": rng.integers(500, 10_000, n),
            "Single": rng.integers(0, 2, n),
            "GoodCustomer": np.where(np.arange(n) % 4 < 2, 1, -1),
        }
    )
    table.to_csv(tmp_path / "german.csv", index=False)
    pairs = np.array([(i, (i + 1) % n) for i in range(n)], dtype=np.float64)
    np.savetxt(tmp_path / "german_edges.txt", pairs)
    ingested = ingest_files(tmp_path / "german.csv", tmp_path / "german_edges.txt", label="GoodCustomer",
                            sensitive="Gender")  # fmt: skip
    g = ingested.graph
    assert (g.num_nodes, g.num_edges, g.num_classes, g.group_names) == (n, n, 2, ("Female", "Male"))
    assert "PurposeOfLoan" in ingested.report.encoded and not ingested.report.hints


def _saved(g, folder: Path) -> Path:
    path = folder / "g.npz"
    save_npz(g, path)
    return path


@pytest.mark.heavy  # 3 s here
@pytest.mark.parametrize("layers", [1, 2])
def test_an_audit_never_reads_the_label_of_an_unlabeled_node(layers: int) -> None:
    """Nodes in no split marked unlabeled (-1), or given either real label: training, metrics and the influence
    estimate (including BIND's non-i.i.d. term, which visits neighbours) come out identical."""
    from bind_core.data.datasets import synthetic
    from bind_core.models.gnn import ModelConfig
    from bind_core.pipeline.audit import AuditConfig, run_audit
    from bind_core.training.fit import TrainConfig

    base = synthetic(160, seed=4, train_per_class=20)
    outside = torch.ones(base.num_nodes, dtype=torch.bool)
    outside[torch.cat([base.train_idx, base.val_idx, base.test_idx])] = False
    assert int(outside.sum()) > 20
    config = AuditConfig(
        model=ModelConfig(layers=layers, hidden=4), training=TrainConfig(epochs=20), bootstrap=0,
        stages=("training", "metrics", "influence"),
    )  # fmt: skip
    results = []
    for fill in (-1, 0, 1):
        y = base.y.clone()
        y[outside] = fill
        results.append(run_audit(dataclasses.replace(base, y=y), config))  # validated again
    unlabeled = results[0].to_dict()["graph"]
    assert unlabeled["unlabeled"] == int(outside.sum())
    for other in results[1:]:
        torch.testing.assert_close(results[0].influence.delta, other.influence.delta, rtol=0, atol=0, equal_nan=True)
        assert results[0].to_dict()["metrics"]["test"] == other.to_dict()["metrics"]["test"]


def test_zstandard_files_read_or_say_what_is_missing(tmp_path: Path) -> None:
    nodes, edges = q.text_feature(tmp_path)
    try:
        import zstandard
    except ImportError:
        packed = tmp_path / "people.csv.zst"
        packed.write_bytes(b"\x28\xb5\x2f\xfd" + b"\x00" * 16)
        err = _error(packed, edges)
        assert err.field == "nodes" and "reading .zst files needs the zstandard package" in str(err)
        return
    packed = tmp_path / "people.csv.zst"
    packed.write_bytes(zstandard.ZstdCompressor().compress(nodes.read_bytes()))
    assert torch.equal(from_files(packed, edges, **BASE).x, from_files(nodes, edges, **BASE).x)


def test_parquet_with_nullable_types(tmp_path: Path) -> None:
    """Parquet keeps pandas' nullable types: a missing label (Int64) is unlabeled, a missing text cell and a
    missing boolean are refused or imputed like any other."""
    table = q.people()
    table["id"] = pd.array(q.BIG + np.arange(q.N), dtype="Int64")
    table["good"] = table["good"].astype("Int64")
    table.loc[7, "good"] = pd.NA
    table["purpose"] = table["purpose"].astype("string")
    table.loc[3, "purpose"] = pd.NA
    table["married"] = table["married"].astype("boolean")
    table.loc[5, "married"] = pd.NA
    table.to_parquet(tmp_path / "people.parquet")
    edges = tmp_path / "edges.csv"
    edges.write_text(q.ring([str(v) for v in table["id"]]))
    err = _error(tmp_path / "people.parquet", edges)
    problems = [(e.field, e.column, e.rows) for e in err.problems]
    assert problems == [("nodes", "purpose", (5,)), ("nodes", "married", (7,))]
    ingested = ingest_files(tmp_path / "people.parquet", edges, **BASE, impute_missing=True, scale=False)
    g = ingested.graph
    assert g.y[7] == -1 and g.node_ids[-1] == q.BIG + q.N - 1 and g.num_edges == q.N
    assert g.x[3, 1:11].sum() == 0  # no category for the missing purpose
    assert ingested.report.imputed["married"].count == 1 and ingested.report.booleans == ["married"]


def test_a_row_with_too_many_fields_is_named_as_a_spreadsheet_shows_it(tmp_path: Path) -> None:
    nodes = tmp_path / "people.csv"
    nodes.write_text("id,good,gender\n1,0,F\n\n2,1,M,extra\n")
    err = _error(nodes, None)
    assert (err.field, err.file, err.rows) == ("nodes", "people.csv", (4,))
    assert (
        str(err)
        == "nodes: people.csv: row 4 has 4 fields where the header has 3 (a stray separator, or a quote left open?)"
    )


def test_a_split_column_never_puts_an_unlabeled_node_in_a_split(tmp_path: Path) -> None:
    table = q.people()
    table.loc[table.index % 5 == 4, "good"] = -1
    table["part"] = np.where(np.arange(q.N) < 20, "train", np.where(np.arange(q.N) < 30, "val", "test"))
    nodes, edges = q.write(tmp_path, table, q.ring(table["id"].astype(str).tolist()))
    ingested = ingest_files(nodes, edges, **BASE, split="part", unlabeled="-1")
    g = ingested.graph
    assert (g.train_idx.numel(), g.val_idx.numel(), g.test_idx.numel()) == (16, 8, 8)
    assert bool((g.y[torch.cat([g.train_idx, g.val_idx, g.test_idx])] >= 0).all())
    assert ingested.report.hints == [
        "8 unlabeled node(s) marked train/val/test in column 'part' were left out of the split"
    ]
