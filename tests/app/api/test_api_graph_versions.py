"""Graph versions: an upload under an existing name adds a version; audits may name a graph by name."""

from __future__ import annotations

from apihelp import assert_problem, fields
from fastapi.testclient import TestClient


def test_versions_are_kept_and_audits_take_the_latest(
    client: TestClient, auth: dict[str, str], graph_npz: bytes
) -> None:
    ids = []
    for expected in (1, 2, 3):
        response = client.post("/v1/graphs", headers=auth, files={"npz": ("g.npz", graph_npz)}, data={"name": "g"})
        assert response.status_code == 201, response.text
        assert response.json()["version"] == expected
        ids.append(response.json()["id"])
    client.post("/v1/graphs", headers=auth, files={"npz": ("g.npz", graph_npz)}, data={"name": "other"})
    listed = client.get("/v1/graphs", headers=auth, params={"name": "g"}).json()["items"]
    assert [(g["id"], g["version"]) for g in listed] == [(ids[2], 3), (ids[1], 2), (ids[0], 1)]

    audit = client.post("/v1/audits", headers=auth, json={"graph_name": "g", "training": {"epochs": 1}})
    assert audit.status_code == 202, audit.text
    assert (audit.json()["graph_id"], audit.json()["graph_version"]) == (ids[2], 3)
    pinned = client.post("/v1/audits", headers=auth, json={"graph_id": ids[0], "training": {"epochs": 1}})
    assert pinned.json()["graph_version"] == 1
    missing = client.post("/v1/audits", headers=auth, json={"graph_name": "nope"})
    assert fields(assert_problem(missing, 422)) == {"graph_name"}
    both = client.post("/v1/audits", headers=auth, json={"graph_name": "g", "graph_id": ids[0]})
    assert_problem(both, 422)
