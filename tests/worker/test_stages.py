"""`app.audits.stages`: the planned stages of an audit and its overall progress."""

from __future__ import annotations

import pytest

from app.audits.stages import OverallProgress
from bind_core.pipeline.audit import AuditConfig
from bind_core.pipeline.stages import planned_stages


@pytest.mark.parametrize(
    ("settings", "plan"),
    [
        ({}, ("training", "metrics", "influence", "debiasing", "validation")),
        ({"validation_sample": 0}, ("training", "metrics", "influence", "debiasing")),
        ({"budgets": []}, ("training", "metrics", "influence", "validation")),
        ({"stages": ["training", "metrics"]}, ("training", "metrics")),
    ],
)
def test_planned_stages(settings: dict[str, object], plan: tuple[str, ...]) -> None:
    assert planned_stages(AuditConfig.from_dict(settings)) == plan


def test_overall_progress_gives_each_stage_an_equal_share_and_never_goes_back() -> None:
    overall = OverallProgress(("training", "metrics", "influence", "debiasing"))
    assert overall("training", 0.5) == ("training", 0.125)
    assert overall("metrics", 0.0) == ("metrics", 0.25)
    assert overall("fine_tune", 0.9) == ("metrics", 0.25)  # a sub-step: no change
    assert overall("influence", 0.0) == ("influence", 0.5)
    assert overall("training", 0.1) == ("influence", 0.5)  # a stage already passed: no change
    assert overall("debiasing", 1.0) == ("debiasing", 1.0)
