"""The self-check's record (``ValidationResult.record``): its noise floor, or why there is none, and the deletions
without a ground truth are typed fields, written under the keys the results have always had."""

from __future__ import annotations

import math

import numpy as np
import torch

from bind_core.codec import decode, encode
from bind_core.debiasing.records import UndefinedTruth, Validation
from bind_core.debiasing.validation import ValidationResult, _undefined

NAN = math.nan


def test_deletions_without_a_ground_truth_are_named_and_left_out() -> None:
    actual = np.array([[NAN, NAN, NAN], [0.1, 0.2, 0.3], [0.2, NAN, 0.1]])
    gone = _undefined([[0], [1], [2, 1]], actual, torch.tensor([10, 11, 12]))
    assert gone is not None and gone.count == 2 and gone.nodes == [[10], [12, 11]] and "left out" in gone.reason
    assert _undefined([[1]], actual[1:2], torch.tensor([10, 11, 12])) is None


def test_the_record_writes_the_reason_and_the_undefined_truth_after_the_named_keys() -> None:
    result = ValidationResult(
        protocol="sample",
        mode="scratch",
        sets=[[3], [4]],
        estimated=np.zeros((2, 3)),
        actual=np.array([[NAN, NAN, NAN], [0.1, 0.2, 0.3]]),
        lam=0.5,
        seconds=1.0,
        noise_floor_reason="scratch retraining has no deterministic drift",
        undefined_truth=UndefinedTruth(count=1, nodes=[[3]], reason="no finite optimum"),
        extra={"population": "sampled"},
    )
    body = encode(result.record())
    assert "noise_floor" not in body and "clear_of_noise" not in body
    assert list(body)[-3:] == ["noise_floor_reason", "undefined_truth", "population"]
    assert body["undefined_truth"] == {"count": 1, "nodes": [[3]], "reason": "no finite optimum"}
    assert body["points"][0]["actual"] is None
    assert decode(Validation, body) == result.record()


def test_a_deterministic_truth_writes_its_noise_floor() -> None:
    result = ValidationResult(
        protocol="sample",
        mode="reoptimize",
        sets=[[3]],
        estimated=np.zeros((1, 3)),
        actual=np.ones((1, 3)),
        lam=0.5,
        seconds=1.0,
        noise_floor=1e-9,
        clear_of_noise=1.0,
    )
    body = encode(result.record())
    assert list(body)[-2:] == ["noise_floor", "clear_of_noise"] and body["noise_floor"] == 1e-9
    assert "undefined_truth" not in body and "noise_floor_reason" not in body


def test_the_reports_trust_section_names_the_nodes_without_a_ground_truth() -> None:
    from bind_core.reporting.report_sections import trust_view

    actual = np.array([[NAN, NAN, NAN], [0.1, 0.2, 0.3], [0.2, 0.1, 0.3], [0.3, 0.3, 0.2]])
    result = ValidationResult(
        protocol="sample",
        mode="proximal",
        sets=[[3], [4], [5], [6]],
        estimated=np.array([[0.0, 0.0, 0.0], [0.1, 0.2, 0.3], [0.2, 0.1, 0.3], [0.35, 0.3, 0.2]]),
        actual=actual,
        lam=0.5,
        seconds=1.0,
        undefined_truth=_undefined([[0], [1], [2], [3]], actual, torch.tensor([3, 4, 5, 6])),
    )
    view = trust_view(result.record())
    assert view is not None and view.without_truth is not None
    assert view.without_truth.startswith("1 of the 4 checked nodes have no ground truth: the re-optimisation found")
    assert "n=3" in str(view.svg) and "1 without a ground truth, not shown" in str(view.svg)  # the points it draws
