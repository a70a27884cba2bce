"""POST /v1/graphs with the quirks of real published graphs, each as a small file (tests/quirk_files.py)."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import quirk_files as q
from apihelp import assert_problem
from fastapi.testclient import TestClient

from app.core.settings import Settings
from app.main import create_app

FORM = {"label": "good", "sensitive": "gender", "node_id": "id"}


def _post(client: TestClient, auth: dict[str, str], paths: tuple[Path, Path], **form: str) -> Any:
    nodes, edges = paths
    files = {"nodes": (nodes.name, nodes.read_bytes()), "edges": (edges.name, edges.read_bytes())}
    return client.post("/v1/graphs", headers=auth, files=files, data=FORM | form)


def _summary(client: TestClient, auth: dict[str, str], paths: tuple[Path, Path], **form: str) -> dict[str, Any]:
    response = _post(client, auth, paths, **form)
    assert response.status_code == 201, response.text
    summary: dict[str, Any] = response.json()["summary"]
    return summary


def _error(client: TestClient, auth: dict[str, str], paths: tuple[Path, Path], **form: str) -> dict[str, Any]:
    problem = assert_problem(_post(client, auth, paths, **form), 422)
    assert len(problem["errors"]) == 1, problem
    error: dict[str, Any] = problem["errors"][0]
    return error


def test_text_feature_and_64_bit_ids(client: TestClient, auth: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    summary = _summary(client, auth, q.text_feature(tmp_path / "a"))
    assert summary["features"] == 13 and summary["ingest"]["encoded"] == {"purpose": q.PURPOSES}
    assert summary["ingest"]["booleans"] == ["married"]
    error = _error(client, auth, q.text_feature(tmp_path / "a"), max_categories="9")
    assert (error["field"], error["column"], error["file"]) == ("features", "purpose", "people.csv")
    assert "listing the feature columns (features), or raise max_categories" in error["message"]
    summary = _summary(client, auth, q.big_ids(tmp_path / "b"))
    assert (summary["nodes"], summary["edges"]) == (q.N, q.N)


def test_sentinel_label(client: TestClient, auth: dict[str, str], tmp_path: Path) -> None:
    paths = q.sentinel_label(tmp_path)
    summary = _summary(client, auth, paths)
    assert summary["classes"] == 3 and "pass unlabeled=-1" in summary["ingest"]["hints"][0]
    summary = _summary(client, auth, paths, unlabeled="-1")
    assert (summary["classes"], summary["unlabeled"], summary["class_sizes"]) == (2, 8, [16, 16])
    assert summary["train"] + summary["val"] + summary["test"] <= 32


def test_dangling_edges(client: TestClient, auth: dict[str, str], tmp_path: Path) -> None:
    paths = q.dangling_edges(tmp_path)
    problem = assert_problem(_post(client, auth, paths), 422, "invalid-graph")
    assert problem["errors"] == [
        {
            "field": "edges",
            "message": "edges.csv, column 'src/dst': node ids absent from the node table's column 'id' in 2 row(s): "
            "row 3 ('9999'), row 5 ('8888'); to drop such edges, pass on_unknown_nodes=drop",
            "column": "src/dst",
            "file": "edges.csv",
            "rows": [3, 5],
            "values": ["9999", "8888"],
            "count": 2,
        }
    ]
    summary = _summary(client, auth, paths, on_unknown_nodes="drop")
    assert summary["edges"] == q.N
    assert (summary["ingest"]["dropped_edges"], summary["ingest"]["unknown_ids"]) == (2, ["9999", "8888"])
    assert _error(client, auth, paths, on_unknown_nodes="ignore")["field"] == "on_unknown_nodes"


def test_extra_edge_columns_and_gzip(client: TestClient, auth: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    summary = _summary(client, auth, q.extra_edge_columns(tmp_path / "a"))
    assert summary["ingest"]["ignored_edge_columns"] == ["weight", "timestamp"] and summary["edges"] == q.N
    response = _post(client, auth, q.gzipped(tmp_path / "b"))
    assert response.status_code == 201, response.text
    assert response.json()["name"] == "people" and response.json()["summary"]["edges"] == q.N


def test_empty_edge_file(client: TestClient, auth: dict[str, str], tmp_path: Path) -> None:
    paths = q.empty_edges(tmp_path)
    error = _error(client, auth, paths)
    assert error["field"] == "edges" and error["message"].startswith("edges.csv: it holds no edges")
    assert _summary(client, auth, paths, allow_no_edges="true")["edges"] == 0
    assert _error(client, auth, paths, allow_no_edges="maybe")["field"] == "allow_no_edges"


def test_continuous_sensitive_and_near_duplicate_groups(
    client: TestClient, auth: dict[str, str], tmp_path: Path
) -> None:
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    paths = q.continuous_sensitive(tmp_path / "a")
    error = _error(client, auth, paths, sensitive="age")
    assert (error["field"], error["value"]) == ("sensitive", "age")
    assert "numeric with 40 distinct values" in error["message"] and "sensitive_bins=age>=39.5" in error["message"]
    summary = _summary(client, auth, paths, sensitive="age", sensitive_bins="age>=30")
    assert summary["group_names"] == ["age<30", "age>=30"] and summary["group_sizes"] == [10, 30]
    summary = _summary(client, auth, q.near_duplicate_groups(tmp_path / "b"))
    assert summary["group_names"] == ["F", "F ", "M"]
    summary = _summary(client, auth, q.near_duplicate_groups(tmp_path / "b"), sensitive="branch")
    assert summary["group_names"] == ["1234567", "1234568"]


def test_missing_values_name_rows_and_impute(client: TestClient, auth: dict[str, str], tmp_path: Path) -> None:
    table = q.people()
    table.loc[[2, 6], "amount"] = None
    paths = q.write(tmp_path, table, q.ring(table["id"].astype(str).tolist()))
    error = _error(client, auth, paths)
    assert (error["field"], error["column"], error["rows"], error["count"]) == ("nodes", "amount", [4, 8], 2)
    summary = _summary(client, auth, paths, impute_missing="true")
    assert summary["ingest"]["imputed"]["amount"]["count"] == 2


def test_compressed_parts_are_recognised_by_their_first_bytes(
    client: TestClient, auth: dict[str, str], tmp_path: Path
) -> None:
    nodes, edges = q.gzipped(tmp_path)
    files = {"nodes": ("export", nodes.read_bytes()), "edges": ("links", edges.read_bytes())}
    response = client.post("/v1/graphs", headers=auth, files=files, data=FORM)
    assert response.status_code == 201, response.text
    assert response.json()["summary"]["edges"] == q.N
    files["nodes"] = ("export.csv.zst", b"\x28\xb5\x2f\xfd" + b"\x00" * 16)
    error = _error_of(client.post("/v1/graphs", headers=auth, files=files, data=FORM))
    assert error["field"] == "nodes" and error["file"] == "export.csv.zst"


def _error_of(response: Any) -> dict[str, Any]:
    problem = assert_problem(response, 422, "invalid-graph")
    error: dict[str, Any] = problem["errors"][0]
    return error


def test_a_gzip_bomb_is_refused_while_it_unpacks(settings: Settings, auth: dict[str, str]) -> None:
    header = b"id,good,gender\n"
    bomb = gzip.compress(header + b"1,0,F\n" * 400_000, compresslevel=9)  # 2.4 MB of text in a few kB
    assert len(bomb) < 20_000
    files = {"nodes": ("people.csv.gz", bomb), "edges": ("edges.txt", b"1 1\n")}
    with TestClient(create_app(settings.model_copy(update={"max_unpacked_bytes": 1_000_000}))) as small_client:
        problem = assert_problem(small_client.post("/v1/graphs", headers=auth, files=files, data=FORM), 422)
    assert problem["errors"][0]["field"] == "nodes"
    assert problem["errors"][0]["message"] == "people.csv.gz unpacks to more than the limit of 1000000 bytes"
