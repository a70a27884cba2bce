"""What an audit says of a supplied model read against its own training labels: one whose outputs may be in another
order than the label's classes (:func:`~bind_core.training.output_order.check_output_order`: a warning, and a verdict
that says so first), or one that fits them no better than a constant
(:func:`~bind_core.training.fit_check.check_training_fit`: a warning)."""

from __future__ import annotations

from bind_core.pipeline.results import SuppliedModel


def supplied_model_warnings(record: SuppliedModel | None) -> list[str]:
    """The warning of a supplied model whose scores rank its training labels below chance (its outputs may be in
    another order), else of one that fits its own training nodes no better than a constant, or worse than guessing
    every class alike (fed other inputs than it was trained on, or untrained); empty otherwise."""
    if record is None:
        return []
    fit, found = record.training_fit, record.output_order
    if found is not None and found.below_chance and found.text:  # outputs read in another order explain a poor fit
        return [found.text]
    return [fit.text] if fit is not None and fit.suspect and fit.text else []


def output_order_verdict(record: SuppliedModel | None, verdict: str) -> str:
    """``verdict``, led by the doubt on the model's output order where there is one (no verdict then: every figure
    may be inverted)."""
    found = None if record is None else record.output_order
    if found is None or not found.below_chance:
        return verdict
    what = "AUC" if found.statistic == "auc" else "accuracy"
    return (
        f"No verdict: the model's outputs may be in another order than the label's classes ({found.advice}); on its "
        f"training nodes its {what} is {found.value:.2f}, below chance. As measured: {verdict}"
    )
