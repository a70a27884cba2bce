"""Hostile uploads: each gets a 4xx problem document and leaves nothing behind (no rows, no temp files).

Cases already covered in ``tests/app/api/test_api_graph_uploads.py`` (object arrays in ``sens``, a body over
the limit, a graph over the node limit, malformed CSV) are not repeated; here are the rest, each checked
for leftovers: the tenant still has no graph (or model) and no ``bind-upload-*`` folder is left in the
temp directory.
"""

from __future__ import annotations

import io
import json
import struct
import tempfile
import time
import tracemalloc
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from apihelp import assert_problem, fields, npz_bytes, zeros_npz
from fastapi.testclient import TestClient

from app.core.settings import Settings
from app.main import create_app


def _uploads() -> set[Path]:
    return set(Path(tempfile.gettempdir()).glob("bind-upload-*"))


@pytest.fixture
def nothing_left(client: TestClient, auth: dict[str, str]) -> Iterator[None]:
    """After the test: the tenant owns no graph and no model, and no upload folder is left."""
    before = _uploads()
    yield
    assert _uploads() <= before
    assert client.get("/v1/graphs", headers=auth).json()["items"] == []
    models = client.get("/v1/models", headers=auth)
    if models.status_code == 200:
        assert models.json()["items"] == []


def _npz(**arrays: Any) -> bytes:
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    return buffer.getvalue()


def _small_graph_arrays(x: np.ndarray) -> dict[str, np.ndarray]:
    n = x.shape[0]
    return {"x": x, "edge_index": np.array([[0, 1], [1, 0]]), "y": np.arange(n) % 2, "sens": (np.arange(n) // 2) % 2}


def test_zip_bomb_npz(settings: Settings, auth: dict[str, str], nothing_left: None) -> None:
    """40 MB of zeros compressed to ~40 kB: refused by the unpacked-size limit before anything is inflated."""
    bomb = _npz(**_small_graph_arrays(np.zeros((20_000, 250), dtype=np.float64)))
    assert len(bomb) < 200_000
    with TestClient(create_app(settings.model_copy(update={"max_unpacked_bytes": 8 * 1024 * 1024}))) as small:
        problem = assert_problem(small.post("/v1/graphs", headers=auth, files={"npz": ("b.npz", bomb)}), 422)
    assert fields(problem) == {"npz"}


def test_npz_declaring_a_huge_array_in_a_tiny_member(
    client: TestClient, auth: dict[str, str], nothing_left: None
) -> None:
    """An ``.npy`` header that declares 8 GB (within the node and column limits) over a few bytes of data."""
    header = {"descr": "<f8", "fortran_order": False, "shape": (1_000_000, 1_000)}
    member = io.BytesIO()
    np.lib.format.write_array_header_1_0(member, header)
    member.write(b"\0" * 64)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("x.npy", member.getvalue())
        for key, value in _small_graph_arrays(np.zeros((4, 1))).items():
            if key != "x":
                one = io.BytesIO()
                np.save(one, value)
                archive.writestr(f"{key}.npy", one.getvalue())
    response = client.post("/v1/graphs", headers=auth, files={"npz": ("h.npz", buffer.getvalue())})
    assert fields(assert_problem(response, 422)) == {"x"}


def test_object_array_features(client: TestClient, auth: dict[str, str], nothing_left: None) -> None:
    arrays: dict[str, Any] = _small_graph_arrays(np.zeros((4, 1)))
    arrays["x"] = np.array([[object()], [1], [2], [3]], dtype=object)
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)  # pickled: load_npz refuses it (allow_pickle=False)
    assert_problem(client.post("/v1/graphs", headers=auth, files={"npz": ("o.npz", buffer.getvalue())}), 422)


def test_graph_over_the_edge_limit(
    settings: Settings, auth: dict[str, str], graph_npz: bytes, nothing_left: None
) -> None:
    with TestClient(create_app(settings.model_copy(update={"max_edges": 50}))) as small:
        response = small.post("/v1/graphs", headers=auth, files={"npz": ("g.npz", graph_npz)})
        problem = assert_problem(response, 422, "invalid-graph")
        csv = small.post(
            "/v1/graphs", headers=auth, data={"label": "y", "sensitive": "s"},
            files={"nodes": ("n.csv", b"y,s\n" + b"0,1\n1,0\n" * 20), "edges": ("e.csv", b"0,1\n" * 60)},
        )  # fmt: skip
        assert_problem(csv, 422)
    assert fields(problem) == {"edge_index"}


def test_oversize_body_leaves_nothing(settings: Settings, auth: dict[str, str], nothing_left: None) -> None:
    with TestClient(create_app(settings.model_copy(update={"max_upload_bytes": 20_000}))) as small:
        big = npz_bytes(num_nodes=600)
        assert_problem(small.post("/v1/graphs", headers=auth, files={"npz": ("g.npz", big)}), 413)


@pytest.mark.parametrize("filename", ["../../etc/passwd", "..\\..\\windows\\win.ini", "/etc/shadow", "a/../../b.npz"])
def test_path_like_file_names(client: TestClient, auth: dict[str, str], graph_npz: bytes, filename: str) -> None:
    """The client's file name never becomes a path: the graph is stored, named by the last part's stem."""
    response = client.post("/v1/graphs", headers=auth, files={"npz": (filename, graph_npz)})
    assert response.status_code == 201, response.text
    name = response.json()["name"]
    assert "/" not in name and ".." not in name, name
    assert not Path(tempfile.gettempdir(), "..", "etc", "passwd.npz").exists()
    assert client.delete(f"/v1/graphs/{response.json()['id']}", headers=auth).status_code == 204


def test_non_utf8_csv(client: TestClient, auth: dict[str, str], nothing_left: None) -> None:
    table = "id,ville,y,s\n1,Besançon,0,a\n2,Orléans,1,b\n".encode("latin-1")
    response = client.post(
        "/v1/graphs", headers=auth, data={"label": "y", "sensitive": "s", "node_id": "id"},
        files={"nodes": ("n.csv", table), "edges": ("e.csv", b"1,2\n")},
    )  # fmt: skip
    problem = assert_problem(response, 422)
    assert fields(problem) == {"nodes"} and "UTF-8" in problem["detail"]


def test_csv_with_a_million_columns(settings: Settings, auth: dict[str, str], nothing_left: None) -> None:
    header = ",".join(f"c{i}" for i in range(1_000_000)).encode()
    table = header + b"\n" + b"0," * 999_999 + b"0\n"
    limits = {"max_upload_bytes": 32 * 1024 * 1024}
    with TestClient(create_app(settings.model_copy(update=limits))) as big:
        response = big.post(
            "/v1/graphs", headers=auth, data={"label": "c0", "sensitive": "c1"},
            files={"nodes": ("wide.csv", table), "edges": ("e.csv", b"0,0\n")},
        )  # fmt: skip
    problem = assert_problem(response, 422)
    assert fields(problem) == {"nodes"} and "columns" in problem["detail"]


def _refusal(call: Callable[[], Any]) -> tuple[Any, float, float]:
    """``call()``'s answer, its seconds and the peak of Python allocations (MiB) in this process meanwhile
    (the API runs in-process under TestClient, its parsing thread included)."""
    tracemalloc.start()
    start = time.perf_counter()
    try:
        response = call()
        return response, time.perf_counter() - start, tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def test_csv_header_with_a_quoted_newline(client: TestClient, auth: dict[str, str], nothing_left: None) -> None:
    """``"a\nb",c0,…,c99999`` (0.9 MB): the raw first line has one column; the parsed header has 100,001.

    It passed the old raw-byte pre-check and pandas parsed the header for ~8 s (+300 MB) before the column
    limit refused it."""
    header = b'"a\nb",' + b",".join(b"c%d" % i for i in range(100_000)) + b"\n"
    table = header + b"1," + b",".join(b"0" for _ in range(100_000)) + b"\n"
    response, seconds, peak = _refusal(
        lambda: client.post(
            "/v1/graphs", headers=auth, data={"label": "c0", "sensitive": "c1"},
            files={"nodes": ("wide.csv", table), "edges": ("e.csv", b"0,1\n")},
        )
    )  # fmt: skip
    problem = assert_problem(response, 422, "invalid-graph")
    assert fields(problem) == {"nodes"} and "10001 columns exceed the limit of 10000" in problem["detail"]
    assert seconds < 5 and peak < 40, (seconds, peak)  # the upload itself is 0.9 MB, held a few times


def test_npz_inflating_an_x_that_cannot_fit_y(client: TestClient, auth: dict[str, str], nothing_left: None) -> None:
    """500,000 × 128 float64 zeros (2 MB compressed, 488 MiB inflated) beside a ``y`` of two nodes: within
    every limit, so the old code read ``x`` (+900 MB) before the shapes refused it; the headers do now."""
    small = _small_graph_arrays(np.zeros((2, 1)))
    bomb = zeros_npz(500_000, 128, **{k: v for k, v in small.items() if k != "x"})
    response, seconds, peak = _refusal(lambda: client.post("/v1/graphs", headers=auth, files={"npz": ("z.npz", bomb)}))
    problem = assert_problem(response, 422, "invalid-graph")
    assert fields(problem) == {"y"}, problem
    assert seconds < 5 and peak < 40, (seconds, peak)


def _post_model(client: TestClient, auth: dict[str, str], graph_id: str, weights: bytes) -> Any:
    config = {"model": {}, "training": {}, "in_dim": 4, "num_classes": 2}
    return client.post(
        "/v1/models", headers=auth, files={"weights": ("m.safetensors", weights)},
        data={"config": json.dumps(config), "graph_id": graph_id},
    )  # fmt: skip


NOT_SAFETENSORS: list[tuple[str, Callable[[], bytes]]] = [
    ("empty", lambda: b""),
    ("pickle", lambda: b"\x80\x04\x95\x10\x00\x00\x00\x00\x00\x00\x00\x8c\x02os\x94\x8c\x06system\x94\x93\x94."),
    ("header length 2^60", lambda: struct.pack("<Q", 1 << 60) + b"{}"),
    ("header not JSON", lambda: struct.pack("<Q", 8) + b"not json"),
    (
        "tensor past the end",
        lambda: _safetensors_header({"w": {"dtype": "F32", "shape": [10**6], "data_offsets": [0, 4 * 10**6]}}),
    ),
    ("zip", lambda: npz_bytes(num_nodes=40)),
]


def _safetensors_header(meta: dict[str, Any]) -> bytes:
    raw = json.dumps(meta).encode()
    return struct.pack("<Q", len(raw)) + raw + b"\0" * 16


@pytest.mark.parametrize("case", [c[1] for c in NOT_SAFETENSORS], ids=[c[0] for c in NOT_SAFETENSORS])
def test_weights_that_are_not_safetensors(client: TestClient, auth: dict[str, str], case: Callable[[], bytes]) -> None:
    graph = client.post("/v1/graphs", headers=auth, files={"npz": ("g.npz", npz_bytes(num_nodes=40))})
    assert graph.status_code == 201, graph.text
    response = _post_model(client, auth, graph.json()["id"], case())
    if response.status_code == 404:
        pytest.skip("POST /v1/models is not served")
    assert_problem(response, 422)
    assert client.get("/v1/models", headers=auth).json()["items"] == []


@pytest.mark.parametrize("case", [c[1] for c in NOT_SAFETENSORS], ids=[c[0] for c in NOT_SAFETENSORS])
def test_trained_model_from_bytes_refuses_non_safetensors(case: Callable[[], bytes]) -> None:
    from bind_core import ConfigError
    from bind_core.training.fit import TrainedModel

    config = {"model": {}, "training": {}, "in_dim": 4, "num_classes": 2}
    with pytest.raises(ConfigError):
        TrainedModel.from_bytes(case(), config)
