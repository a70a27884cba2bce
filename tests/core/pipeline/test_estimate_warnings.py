"""What a low self-check tells the user to do (bind_core.pipeline.caveats.estimate_warnings): causes found in this
audit's data and model, advice that applies to this model, nothing about other architectures."""

from __future__ import annotations

from bind_core import synthetic
from bind_core.debiasing.records import Validation
from bind_core.influence.records import Refinement
from bind_core.models.gnn import ModelConfig
from bind_core.pipeline.caveats import LOW_SELF_CHECK, AuditContext, estimate_warnings


def _check(pearson: float, mode: str = "reoptimize") -> Validation:
    """A self-check with this Pearson correlation (its other figures do not matter here)."""
    return Validation(
        protocol="sample",
        mode=mode,
        count=10,
        pearson=pearson,
        spearman=pearson,
        correlations={},
        points=[],
        seconds=1.0,
    )


def test_a_low_self_check_advises_the_step_estimate_only_for_a_model_that_needs_it() -> None:
    graph = synthetic(2000, seed=1)  # every group has 30+ positive test nodes: no Γ_EO cause here
    gin = AuditContext(graph, ModelConfig(arch="gin"), lam=0.5)
    (text,) = estimate_warnings(None, _check(0.38), None, gin)
    assert "0.38" in text and f"below {LOW_SELF_CHECK}" in text and 'estimator="step"' in text and "gin" in text
    gcn = AuditContext(graph, ModelConfig(arch="gcn"), lam=0.5)
    (text,) = estimate_warnings(None, _check(0.38), None, gcn)
    assert 'estimator="step"' not in text and "GIN" not in text and "No cause could be named" in text


def test_few_positive_test_nodes_are_named_as_the_cause_when_gamma_eo_counts() -> None:
    graph = synthetic(300, seed=1)  # the minority group has few positive test nodes
    (text,) = estimate_warnings(None, _check(0.69), None, AuditContext(graph, ModelConfig(), lam=0.5))
    assert "Likely cause: group sens=" in text and "positive test nodes" in text and "lam=1" in text
    (text,) = estimate_warnings(None, _check(0.69), None, AuditContext(graph, ModelConfig(), lam=1.0))
    assert "Likely cause" not in text  # Γ_EO has no weight in Γ then


def test_refined_estimates_are_not_told_to_refine_and_a_good_self_check_says_nothing() -> None:
    (text,) = estimate_warnings(None, _check(0.5, "proximal"), Refinement(deletions=10))
    assert "already refined" in text and "refine_steps" not in text and "proximal Bregman re-optimisation" in text
    assert estimate_warnings(None, _check(0.99), None) == []
