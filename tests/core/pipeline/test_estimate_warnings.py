"""What a low self-check tells the user to do (bind_core.pipeline.caveats.estimate_warnings)."""

from __future__ import annotations

from bind_core.pipeline.caveats import LOW_SELF_CHECK, estimate_warnings


def test_a_low_self_check_names_the_step_estimate_and_refinement_as_remedies() -> None:
    (text,) = estimate_warnings(None, {"pearson": 0.38, "mode": "reoptimize"}, None)
    assert "0.38" in text and f"below {LOW_SELF_CHECK}" in text
    assert 'estimator="step"' in text and "refine_steps" in text


def test_refined_estimates_are_not_told_to_refine_and_a_good_self_check_says_nothing() -> None:
    (text,) = estimate_warnings(None, {"pearson": 0.5, "mode": "proximal"}, {"deletions": 10})
    assert "they were refined" in text and "refine_steps" not in text and "proximal Bregman re-optimisation" in text
    assert estimate_warnings(None, {"pearson": 0.99}, None) == []
