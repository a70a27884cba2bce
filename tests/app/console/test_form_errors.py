"""The audit form's refusals in the form's words (:mod:`app.console.form_errors`): its labels and plain sentences, not
the request body's paths and pydantic's wording."""

from __future__ import annotations

import uuid

import pytest
from pydantic import ValidationError

from app.audits.schemas import AuditCreate
from app.console.form_errors import form_errors


def _errors(body: dict[str, object]) -> list[dict[str, str]]:
    with pytest.raises(ValidationError) as info:
        AuditCreate.model_validate({"graph_id": str(uuid.uuid4()), **body})
    return form_errors(info.value)


def test_each_field_by_its_label_each_problem_as_a_sentence() -> None:
    got = _errors({"model": {"arch": "gcx", "layers": 9}, "training": {"epochs": -3}, "budgets": [0.1, "half"]})
    assert got == [
        {"field": "Architecture", "message": "must be one of 'gcn', 'gin', 'sage' or 'gat'"},
        {"field": "Layers", "message": "must be at most 8"},
        {"field": "Training epochs", "message": "must be at least 0"},
        {"field": "Debiasing budgets, the second value", "message": "must be a number"},
    ]


def test_a_whole_number_and_a_field_the_form_does_not_show() -> None:
    got = _errors({"model": {"arch": "gcn", "layers": "nine"}, "lam": 2})
    assert {"field": "Layers", "message": "must be a whole number"} in got
    assert {"field": "lam", "message": "must be at most 1.0"} in got  # not the form's field: its path kept
