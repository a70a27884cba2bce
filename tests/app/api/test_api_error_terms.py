"""``POST /v1/graphs`` says bind_core's errors in the API's terms: ``errors[].field`` is the request field at
fault with the bad value apart, and every option a message advises is a field the endpoint accepts, said as a
form value, one that fixes the upload when sent."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import quirk_files as q
from advised_options import advised_options
from apihelp import assert_problem
from fastapi.testclient import TestClient

from app.core.errors import request_field
from bind_core.data.datasets import ingest_files
from bind_core.errors import GraphValidationError, Option

FORM = {"label": "good", "sensitive": "gender", "node_id": "id"}


def _post(client: TestClient, auth: dict[str, str], paths: tuple[Path, Path], **form: str) -> Any:
    nodes, edges = paths
    files = {"nodes": (nodes.name, nodes.read_bytes()), "edges": (edges.name, edges.read_bytes())}
    return client.post("/v1/graphs", headers=auth, files=files, data=FORM | form)


def _fields(client: TestClient) -> set[str]:
    """The fields of ``POST /v1/graphs`` as its OpenAPI document publishes them."""
    body = client.get("/openapi.json").json()["paths"]["/v1/graphs"]["post"]["requestBody"]
    return set(body["content"]["multipart/form-data"]["schema"]["properties"])


def _advised(paths: tuple[Path, Path], form: dict[str, str]) -> list[Option]:
    """The options bind_core's error advises for the same input (every problem's)."""
    options: dict[str, Any] = FORM | form
    if "max_categories" in options:
        options["max_categories"] = int(options["max_categories"])
    with pytest.raises(GraphValidationError) as info:
        ingest_files(*paths, **options)
    return [o for p in info.value.problems or (info.value,) for o in p.message.options()]


def test_every_advised_option_is_a_field_of_the_endpoint(client: TestClient) -> None:
    assert advised_options() <= _fields(client)


@pytest.mark.parametrize(
    ("option", "said"),
    [
        (Option("on_unknown_nodes", "drop"), "on_unknown_nodes=drop"),
        (Option("impute_missing", True), "impute_missing=true"),
        (Option("features"), "features"),
        (Option("unlabeled", "-1"), "unlabeled=-1"),
    ],
)
def test_an_option_said_as_a_request_field(option: Option, said: str) -> None:
    assert request_field(option) == said


Quirk = Callable[[Path], tuple[Path, Path]]
CASES: dict[str, tuple[Quirk, dict[str, str], str, dict[str, str]]] = {
    "dangling": (q.dangling_edges, {}, "edges", {"on_unknown_nodes": "drop"}),
    "empty": (q.empty_edges, {}, "edges", {"allow_no_edges": "true"}),
    "tokens": (lambda p: q.stray_text(p, stray=False), {}, "nodes", {"impute_missing": "true"}),
    "stray": (q.stray_text, {}, "nodes", {"features": "amount,purpose,married,gender"}),
    "cap": (q.text_feature, {"max_categories": "5"}, "features", {"max_categories": "10"}),
    "age": (q.continuous_sensitive, {"sensitive": "age"}, "sensitive", {"sensitive_bins": "age>=39.5"}),
}


@pytest.mark.parametrize("case", CASES)
def test_an_error_names_fields_the_endpoint_accepts_and_following_them_works(
    case: str, client: TestClient, auth: dict[str, str], tmp_path: Path
) -> None:
    quirk, form, field, advice = CASES[case]
    paths = quirk(tmp_path)
    problem = assert_problem(_post(client, auth, paths, **form), 422, "invalid-graph")
    [error] = problem["errors"]
    assert error["field"] == field and field in _fields(client)
    advised = _advised(paths, form)
    assert advised and {o.name for o in advised} <= _fields(client)
    for option in advised:
        assert request_field(option) in error["message"], (option, error["message"])
    assert "--" not in error["message"] and "=True" not in error["message"], error["message"]
    assert set(advice) <= {o.name for o in advised}
    response = _post(client, auth, paths, **form | advice)
    assert response.status_code == 201, response.text


def test_a_misspelled_label_is_the_label_field_with_its_value_apart(
    client: TestClient, auth: dict[str, str], tmp_path: Path
) -> None:
    problem = assert_problem(_post(client, auth, q.text_feature(tmp_path), label="godo"), 422, "invalid-graph")
    assert problem["errors"] == [
        {
            "field": "label",
            "value": "godo",
            "message": "no column 'godo' in people.csv; did you mean 'good'? (columns: id, amount, purpose, married, "
            "gender, good)",
            "file": "people.csv",
            "suggestions": ["good"],
        }
    ]


def test_stray_cells_are_listed_with_their_rows_and_values(
    client: TestClient, auth: dict[str, str], tmp_path: Path
) -> None:
    [error] = assert_problem(_post(client, auth, q.stray_text(tmp_path)), 422, "invalid-graph")["errors"]
    assert (error["field"], error["column"], error["rows"], error["values"], error["count"]) == (
        "nodes", "income", [5, 9, 22, 32], ["unknown", "", "?", "12,5"], 4,
    )  # fmt: skip
    assert error["message"].endswith(
        "correct the stray text, or leave the column out with features (impute_missing=true treats the missing "
        "cells as missing: the column's median)"
    )


def test_every_problem_is_an_entry_of_errors(client: TestClient, auth: dict[str, str], tmp_path: Path) -> None:
    table = q.people()
    table["income"] = [str(20000 + 250 * k) if k != 6 else "unknown" for k in range(q.N)]
    table["purpose"] = [f"p{k}" for k in range(q.N)]
    paths = q.write(tmp_path, table, q.ring(table["id"].astype(str).tolist()))
    problem = assert_problem(_post(client, auth, paths), 422, "invalid-graph")
    assert [(e["field"], e["column"]) for e in problem["errors"]] == [("features", "purpose"), ("nodes", "income")]
    assert problem["detail"].startswith("features: 2 problems: (1) people.csv, column 'purpose'")


def test_the_ingest_notes_name_request_fields(client: TestClient, auth: dict[str, str], tmp_path: Path) -> None:
    response = _post(client, auth, q.sentinel_label(tmp_path))
    assert response.status_code == 201, response.text
    ingest = response.json()["summary"]["ingest"]
    assert ingest["hints"][0].endswith("if -1 marks unlabeled nodes, pass unlabeled=-1")
    assert ingest["notes"][-1].startswith("label column 'good' has 3 classes ('-1', '0', '1')")


@pytest.mark.parametrize(
    ("form", "value"), [({"on_unknown_nodes": "ignore"}, "ignore"), ({"impute_missing": "maybe"}, "maybe")]
)
def test_a_bad_form_value_is_its_field_with_the_value_apart(
    form: dict[str, str], value: str, client: TestClient, auth: dict[str, str], tmp_path: Path
) -> None:
    [error] = assert_problem(_post(client, auth, q.text_feature(tmp_path), **form), 422)["errors"]
    assert (error["field"], error["value"]) == (next(iter(form)), value)
