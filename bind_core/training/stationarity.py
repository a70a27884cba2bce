"""How stationary the audited weights are: information, never a refusal.

The audit describes the model as given (docs/METHOD.md, "The model as given"). Its influence estimate answers the
proximal Bregman response (:mod:`bind_core.influence.bregman`), a question that is defined at any weights, so a model
that stopped short of a minimum (early stopping, Adam, a ReLU model resting on kinks) is attributed like any other;
how far it is from a stationary point is reported beside the estimates (``results.stationarity``), with a caveat
(:func:`bind_core.pipeline.caveats.model_warnings`).

A model with ReLU kinks whose minimum sits on them never gets a vanishing gradient. When the largest gradient entry
is within :data:`KINK_CHECK_RANGE` of the tolerance, a restarted L-BFGS (:mod:`bind_core.training.kinks`) tells a
minimum on the kinks (``stationary: "kinks"``) from weights the optimiser merely left early; further away the answer
is plainly "not stationary" and that search is not paid for.
"""

from __future__ import annotations

import math

from bind_core.data.graph import Graph
from bind_core.training.fit import TrainedModel
from bind_core.training.kinks import kink_stall
from bind_core.training.polish import gradient_norm, max_abs_gradient
from bind_core.training.records import StationarityCheck

STATIONARY_SLACK = 100.0
"""Weights count as stationary when their largest gradient entry is at most ``STATIONARY_SLACK·polish_tol`` (1e-5
with the default tolerance): the polish aims at ``polish_tol``."""

KINK_CHECK_RANGE = 100.0
"""The kink check runs when the largest gradient entry is at most ``KINK_CHECK_RANGE`` times the tolerance."""


def is_stationary(model: TrainedModel, graph: Graph) -> bool:
    """Whether the largest gradient entry of the training objective is at most ``STATIONARY_SLACK·polish_tol``."""
    worst = max_abs_gradient(model, graph)
    return not math.isnan(worst) and worst <= STATIONARY_SLACK * model.train_config.polish_tol


def describe_stationarity(model: TrainedModel, graph: Graph) -> StationarityCheck:
    """The stationarity record of ``model`` on ``graph``. Never raises on weights that are not stationary: the audit
    reports them as they are.

    Args:
        model: the trained model (not changed).
        graph: the graph it was trained on.

    Returns:
        A :class:`~bind_core.training.records.StationarityCheck`: ``max_abs_grad``, ``grad_norm``, ``tolerance`` and
        ``stationary`` (``True``, ``False`` or ``"kinks"``: a minimum on ReLU kinks, with
        :func:`~bind_core.training.kinks.kink_stall`'s record under ``kinks``).
    """
    tolerance = STATIONARY_SLACK * model.train_config.polish_tol
    worst = max_abs_gradient(model, graph)
    norm = gradient_norm(model, graph)
    record = StationarityCheck(max_abs_grad=worst, grad_norm=norm, tolerance=tolerance, stationary=False)
    if math.isnan(worst):
        return record
    if worst <= tolerance:
        record.stationary = True
        return record
    if worst <= KINK_CHECK_RANGE * tolerance:
        stall = kink_stall(model, graph)
        if stall is not None and stall.no_descent:
            record.stationary, record.kinks = "kinks", stall
    return record
