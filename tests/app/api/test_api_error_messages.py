"""Errors that say what is wrong: a non-finite number, a body that is not JSON, a multipart body cut off, a rule of
the request's own in its own words."""

from __future__ import annotations

import httpx
from apihelp import assert_problem, fields
from fastapi.testclient import TestClient


def test_nan_is_not_a_finite_number(client: TestClient, auth: dict[str, str], graph_id: str) -> None:
    headers = auth | {"Content-Type": "application/json"}
    for field, text in (("training.lr", '{"training": {"lr": NaN}}'), ("lam", '{"lam": Infinity}')):
        body = text[:-1] + f', "graph_id": "{graph_id}"}}'
        problem = assert_problem(client.post("/v1/audits", headers=headers, content=body), 422)
        assert fields(problem) == {field}  # was "Input should be less than or equal to 10"
        assert problem["errors"][0]["message"] == "Input should be a finite number"


def test_a_rule_of_the_request_is_said_in_its_own_words(client: TestClient, auth: dict[str, str]) -> None:
    """A validator's sentence comes without pydantic's ``Value error, `` before it."""
    body = {"graph_name": "g", "dataset": "synthetic", "interval_seconds": 3600}
    problem = assert_problem(client.post("/v1/schedules", headers=auth, json=body), 422)
    assert problem["errors"][0]["message"] == "give exactly one of graph_name and dataset (or model_id)"
    assert problem["detail"] == "body: give exactly one of graph_name and dataset (or model_id)"


def test_a_truncated_json_body_names_no_field(client: TestClient, auth: dict[str, str]) -> None:
    headers = auth | {"Content-Type": "application/json"}
    problem = assert_problem(client.post("/v1/audits", headers=headers, content=b'{"dataset": '), 422)
    assert problem["detail"] == "The body is not valid JSON (at character 12: Expecting value)."
    assert "errors" not in problem  # was errors[0].field "12", a character offset


def test_a_multipart_body_cut_off_is_400_malformed(client: TestClient, auth: dict[str, str], graph_npz: bytes) -> None:
    request = httpx.Request("POST", "http://x/v1/graphs", files={"npz": ("g.npz", graph_npz)})
    body = request.read()
    cut = body[: body.rindex(b"\r\n--")]  # the whole file part, without the closing boundary
    headers = auth | {"Content-Type": request.headers["Content-Type"]}
    problem = assert_problem(client.post("/v1/graphs", headers=headers, content=cut), 400, "malformed-multipart")
    assert "closing boundary" in problem["detail"]  # was the generic 422 "A graph upload is a nodes table, ..."
    whole = client.post("/v1/graphs", headers=headers, content=body)
    assert whole.status_code == 201, whole.text
