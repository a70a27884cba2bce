"""``evaluate`` called directly (docs/RELIABILITY.md): inputs that do not fit together are refused with an error naming
the argument, one group's reasons read as sentences, and the report's JSON is strict (NaN written null)."""

from __future__ import annotations

import json
import math

import pytest
import torch

from bind_core.codec import decode, encode
from bind_core.errors import BindError, MetricInputError
from bind_core.fairness.metrics import evaluate
from bind_core.fairness.records import MetricValues
from bind_core.training.records import NewtonRecord


def inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    p1 = torch.rand(40, generator=gen)
    y = torch.arange(40) % 2
    sens = (torch.arange(40) // 2) % 2
    return torch.stack([1 - p1, p1], 1), y, sens


@pytest.mark.parametrize(
    ("change", "field", "says"),
    [
        (lambda p, y, s: (p[:, 1], y, s), "proba", "torch.stack([1 - p, p], dim=1)"),
        (lambda p, y, s: (p, y[:30], s), "y", "one code per row of proba (40), got shape [30]"),
        (lambda p, y, s: (p, y, s[:39]), "sens", "one code per row of proba (40), got shape [39]"),
        (lambda p, y, s: (p * 3, y, s), "proba", "summing to 1"),
        (lambda p, y, s: (p - 0.5, y, s), "proba", "softmax"),
        (lambda p, y, s: (p, y * 0.5, s), "y", "non-integral"),
        (lambda p, y, s: (p, y + 1, s), "y", "class 2 has no column in proba"),
        (lambda p, y, s: (p, y, s - 1), "sens", "non-negative"),
    ],
)
def test_inputs_that_do_not_fit_are_named(change, field: str, says: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(MetricInputError) as caught:
        evaluate(*change(*inputs()))
    assert caught.value.field == field and says in str(caught.value)
    assert isinstance(caught.value, BindError) and str(caught.value).startswith(f"{field}: ")


def test_integral_float_codes_are_read_as_codes() -> None:
    proba, y, sens = inputs()
    assert evaluate(proba, y.double(), sens.float()) == evaluate(proba, y, sens)


def test_one_group_reads_as_a_sentence() -> None:
    proba, y, _ = inputs()
    report = evaluate(proba, y, torch.zeros(40, dtype=torch.long), group_names=["north", "south"])
    reason = report.undefined["delta_eo"]
    assert "none have none" not in reason and "(present: north)" in reason, reason
    assert reason == "fewer than two groups among the nodes (present: north), so true-positive rates cannot be compared"


def test_the_reports_json_is_strict() -> None:
    proba, y, _ = inputs()
    report = evaluate(proba, y, torch.zeros(40, dtype=torch.long))
    assert math.isnan(report.delta_sp)
    doc = encode(report)
    assert doc["delta_sp"] is None and doc["gamma"] is None
    text = json.dumps(doc, allow_nan=False)  # raises on NaN or infinity
    assert json.loads(text)["undefined"]["delta_sp"]
    values = encode(report.values())
    assert json.dumps(values, allow_nan=False) and decode(MetricValues, values).delta_sp is None


def test_a_required_number_that_was_not_finite_reads_back() -> None:
    """A figure typed ``float`` (not nullable) written null because it was NaN reads back as NaN."""
    record = NewtonRecord(
        iterations=0,
        hessians=0,
        accepted=0,
        converged=False,
        reason="max_seconds",
        max_abs_grad=1.0,
        grad_norm=float("inf"),
        negative_eigenvalues=0,
        min_eigenvalue=math.nan,
        seconds=0.0,
    )
    doc = encode(record)
    assert doc["min_eigenvalue"] is None and doc["grad_norm"] is None
    back = decode(NewtonRecord, json.loads(json.dumps(doc, allow_nan=False)))
    assert math.isnan(back.min_eigenvalue) and math.isnan(back.grad_norm) and encode(back) == doc
