"""POST /v1/graphs: good uploads give a summary; each kind of bad upload gives a 4xx problem."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from apihelp import assert_problem, fields, npz_bytes
from fastapi.testclient import TestClient

from app.core.settings import Settings
from app.main import create_app


def node_table(n: int = 60, *, seed: int = 0) -> pd.DataFrame:
    """A small node table with ids 100.., two groups, two labels and a split column."""
    rng = np.random.default_rng(seed)
    table = pd.DataFrame(
        {
            "id": np.arange(100, 100 + n),
            "age": rng.normal(40, 10, n).round(1),
            "score": rng.uniform(0, 1, n),
            "gender": np.where(np.arange(n) % 2 == 0, "f", "m"),
            "income": np.where(np.arange(n) % 4 < 2, ">50k", "<=50k"),
        }
    )
    table["split"] = np.where(np.arange(n) < n // 2, "train", np.where(np.arange(n) < 3 * n // 4, "val", "test"))
    return table


def edge_list(n: int = 60) -> str:
    lines = ["src,dst"] + [f"{100 + i},{100 + (i + 1) % n}" for i in range(n)]
    return "\n".join(lines) + "\n"


def csv_upload(table: pd.DataFrame, edges: str, **form: str) -> tuple[dict[str, tuple[str, bytes]], dict[str, str]]:
    data = {"label": "income", "sensitive": "gender", "split": "split", "node_id": "id"} | form
    files = {"nodes": ("people.csv", table.to_csv(index=False).encode()), "edges": ("e.csv", edges.encode())}
    return files, data


def test_npz_upload(client: TestClient, auth: dict[str, str], graph_npz: bytes) -> None:
    response = client.post("/v1/graphs", headers=auth, files={"npz": ("my-graph.npz", graph_npz)})
    assert response.status_code == 201, response.text
    body = response.json()
    assert response.headers["location"] == f"/v1/graphs/{body['id']}"
    assert body["name"] == "my-graph"
    summary = body["summary"]
    assert summary["nodes"] == 120
    assert summary["groups"] == 2 and summary["classes"] == 2
    assert summary["train"] + summary["val"] + summary["test"] <= 120
    assert body["size_bytes"] > 0


def test_csv_upload(client: TestClient, auth: dict[str, str]) -> None:
    files, data = csv_upload(node_table(), edge_list(), name="people")
    response = client.post("/v1/graphs", headers=auth, files=files, data=data)
    assert response.status_code == 201, response.text
    summary = response.json()["summary"]
    assert response.json()["name"] == "people"
    assert (summary["nodes"], summary["edges"], summary["groups"], summary["classes"]) == (60, 60, 2, 2)
    assert (summary["train"], summary["val"], summary["test"]) == (30, 15, 15)
    # age, score and the sensitive column (kept as a feature, as in the paper)
    assert summary["features"] == 3


def test_several_sensitive_columns_give_intersectional_groups(client: TestClient, auth: dict[str, str]) -> None:
    table = node_table()
    table["region"] = np.where(np.arange(len(table)) % 8 < 4, "n", "s")
    files, data = csv_upload(table, edge_list(), sensitive="gender, region")
    response = client.post("/v1/graphs", headers=auth, files=files, data=data)
    assert response.status_code == 201, response.text
    summary = response.json()["summary"]
    assert summary["groups"] == 4 and summary["features"] == 4  # both sensitive columns stay features
    assert summary["group_names"] == [f"gender={g} & region={r}" for g in "fm" for r in "ns"]


def test_parquet_upload_with_chosen_features(client: TestClient, auth: dict[str, str]) -> None:
    buffer = io.BytesIO()
    node_table().to_parquet(buffer)
    data = {"label": "income", "sensitive": "gender", "split": "split", "node_id": "id", "features": "age, score"}
    files = {"nodes": ("t.parquet", buffer.getvalue()), "edges": ("e.txt", edge_list().encode())}
    response = client.post("/v1/graphs", headers=auth, files=files, data=data)
    assert response.status_code == 201, response.text
    assert response.json()["summary"]["features"] == 2
    # a JSON array, as clients that send lists write it (and as a column name holding a comma needs)
    listed = client.post("/v1/graphs", headers=auth, files=files, data={**data, "features": '["score", "age"]'})
    assert listed.status_code == 201, listed.text
    assert list(listed.json()["summary"]["ingest"]["scaled"]) == ["score", "age"]  # in the order listed


def test_scale_off_keeps_the_tables_values(client: TestClient, auth: dict[str, str]) -> None:
    """By default the features are min-max scaled and the summary says so (each column's range, a note advising
    ``scale=false``); ``scale=false`` keeps the table's own values, what a model trained on them must see."""
    table = node_table()
    files, data = csv_upload(table, edge_list(), features="age,score")
    scaled = client.post("/v1/graphs", headers=auth, files=files, data=data).json()["summary"]
    assert scaled["features_scaled"] is True
    assert scaled["ingest"]["scaled"]["age"] == [table.age.min(), table.age.max()]
    assert any(n.endswith("read it with scale=false") for n in scaled["ingest"]["notes"]), scaled["ingest"]["notes"]
    files, data = csv_upload(table, edge_list(), features="age,score", scale="false")
    response = client.post("/v1/graphs", headers=auth, files=files, data=data)
    assert response.status_code == 201, response.text
    summary = response.json()["summary"]
    assert summary["features_scaled"] is False and summary["ingest"]["scaled"] == {}
    files, data = csv_upload(table, edge_list(), scale="maybe")
    problem = assert_problem(client.post("/v1/graphs", headers=auth, files=files, data=data), 422)
    assert problem["errors"][0]["field"] == "scale"


def _nan_feature() -> pd.DataFrame:
    table = node_table()
    table.loc[3, "age"] = np.nan
    return table


def _one_group() -> pd.DataFrame:
    table = node_table()
    table["gender"] = "f"
    return table


BAD_TABLES: list[tuple[str, Any, str, dict[str, str]]] = [
    ("wrong column", node_table(), edge_list(), {"label": "salary"}),
    ("NaN feature", _nan_feature(), edge_list(), {}),
    ("edge to unknown node", node_table(), edge_list() + "100,999\n", {}),
    ("single sensitive group", _one_group(), edge_list(), {}),
]


@pytest.mark.parametrize(("case", "table", "edges", "form"), BAD_TABLES, ids=[c[0] for c in BAD_TABLES])
def test_bad_table_uploads(
    client: TestClient, auth: dict[str, str], case: str, table: pd.DataFrame, edges: str, form: dict[str, str]
) -> None:
    files, data = csv_upload(table, edges, **form)
    problem = assert_problem(client.post("/v1/graphs", headers=auth, files=files, data=data), 422, "invalid-graph")
    assert problem["errors"] and problem["errors"][0]["field"], problem
    assert problem["detail"]


def test_edges_out_of_range_positions(client: TestClient, auth: dict[str, str]) -> None:
    files, data = csv_upload(node_table(), "0,1\n1,2\n2,60\n")
    del data["node_id"]
    problem = assert_problem(client.post("/v1/graphs", headers=auth, files=files, data=data), 422)
    assert fields(problem) == {"edges"} or "60" in str(problem["detail"]), problem


def test_malformed_csv(client: TestClient, auth: dict[str, str]) -> None:
    files = {"nodes": ("n.csv", b'id,income,gender\n1,"a,f\n2,b\x00\xff\xfe,m,7,8\n'), "edges": ("e", b"1,2\n")}
    data = {"label": "income", "sensitive": "gender"}
    assert_problem(client.post("/v1/graphs", headers=auth, files=files, data=data), 422)


def test_npz_with_object_arrays(client: TestClient, auth: dict[str, str]) -> None:
    buffer = io.BytesIO()
    np.savez(buffer, x=np.array([[1.0], [2.0]]), edge_index=np.array([[0], [1]]), y=np.array([0, 1]),
             sens=np.array([{"a": 1}, None], dtype=object))  # fmt: skip
    problem = assert_problem(client.post("/v1/graphs", headers=auth, files={"npz": ("o.npz", buffer.getvalue())}), 422)
    assert fields(problem)


def test_not_an_npz(client: TestClient, auth: dict[str, str]) -> None:
    assert_problem(client.post("/v1/graphs", headers=auth, files={"npz": ("x.npz", b"hello")}), 422)


def test_missing_parts(client: TestClient, auth: dict[str, str]) -> None:
    files = {"nodes": ("n.csv", node_table().to_csv(index=False).encode())}
    problem = assert_problem(client.post("/v1/graphs", headers=auth, files=files, data={"label": "income"}), 422)
    assert fields(problem) == {"edges", "sensitive"}


def test_npz_and_table_fields_conflict(client: TestClient, auth: dict[str, str], graph_npz: bytes) -> None:
    response = client.post("/v1/graphs", headers=auth, files={"npz": ("g.npz", graph_npz)}, data={"label": "y"})
    assert fields(assert_problem(response, 422)) == {"label"}


def test_npz_with_table_options_at_their_defaults(client: TestClient, auth: dict[str, str], graph_npz: bytes) -> None:
    """A client generated from /openapi.json sends the declared defaults; they are not table options."""
    defaults = {
        "on_unknown_nodes": "error",
        "allow_no_edges": "false",
        "impute_missing": "False",
        "max_categories": "20",
    }
    response = client.post("/v1/graphs", headers=auth, files={"npz": ("g.npz", graph_npz)}, data=defaults)
    assert response.status_code == 201, response.text
    changed = {**defaults, "max_categories": "5", "allow_no_edges": "true"}
    response = client.post("/v1/graphs", headers=auth, files={"npz": ("g.npz", graph_npz)}, data=changed)
    assert fields(assert_problem(response, 422)) == {"max_categories", "allow_no_edges"}


def test_unexpected_part(client: TestClient, auth: dict[str, str], graph_npz: bytes) -> None:
    response = client.post("/v1/graphs", headers=auth, files={"npz": ("g.npz", graph_npz)}, data={"lable": "y"})
    assert fields(assert_problem(response, 422)) == {"lable"}


def test_not_multipart(client: TestClient, auth: dict[str, str]) -> None:
    assert_problem(client.post("/v1/graphs", headers=auth, json={"nodes": "x"}), 415)


def test_malformed_multipart(client: TestClient, auth: dict[str, str]) -> None:
    headers = auth | {"Content-Type": "multipart/form-data"}
    assert_problem(client.post("/v1/graphs", headers=headers, content=b"--x\r\nnonsense"), 400)


def test_oversize_upload(settings: Settings, client: TestClient, auth: dict[str, str]) -> None:
    small = create_app(settings.model_copy(update={"max_upload_bytes": 10_000}))
    with TestClient(small) as small_client:
        big = npz_bytes(num_nodes=400)
        assert len(big) > 10_000
        assert_problem(small_client.post("/v1/graphs", headers=auth, files={"npz": ("g.npz", big)}), 413)

        def chunks() -> Any:  # no Content-Length: the limit is enforced while the body streams
            body = b'--b\r\nContent-Disposition: form-data; name="npz"; filename="g.npz"\r\n\r\n'
            yield body
            for _ in range(100):
                yield b"\0" * 1000

        headers = auth | {"Content-Type": "multipart/form-data; boundary=b"}
        assert_problem(small_client.post("/v1/graphs", headers=headers, content=chunks()), 413)


def test_node_limit(settings: Settings, auth: dict[str, str], graph_npz: bytes) -> None:
    with TestClient(create_app(settings.model_copy(update={"max_nodes": 50}))) as small_client:
        response = small_client.post("/v1/graphs", headers=auth, files={"npz": ("g.npz", graph_npz)})
        assert_problem(response, 422, "invalid-graph")


def test_upload_leaves_no_temp_files(client: TestClient, auth: dict[str, str], graph_npz: bytes) -> None:
    import tempfile

    before = set(Path(tempfile.gettempdir()).glob("bind-upload-*"))
    client.post("/v1/graphs", headers=auth, files={"npz": ("../../etc/passwd", graph_npz)})
    client.post("/v1/graphs", headers=auth, files={"npz": ("g.npz", b"junk")})
    assert set(Path(tempfile.gettempdir()).glob("bind-upload-*")) == before
