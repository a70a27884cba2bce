"""Converge or refuse: influence estimates are only published for weights at a stationary point.

An influence function linearises the re-optimisation around ``θ̂`` and assumes ``∇L(θ̂) = 0``. From weights that
are not stationary, the "effect" of any deletion carries the drift the optimiser would have made anyway (a two-layer
GCN left at a largest gradient entry of 5.9e-5 moved Γ by 0.0025 when merely re-optimised further, as much as most
single deletions; docs/METHOD.md). The polish (:func:`bind_core.training.polish.polish`) finishes with a Newton method
for every architecture; :func:`require_stationary` is the audit's check that it got there. A model with ReLU kinks whose
minimum sits on them never gets a vanishing gradient; it is accepted when a restarted L-BFGS finds no descent from
its weights (:mod:`bind_core.training.kinks`), and the audit says so.
"""

from __future__ import annotations

import math
from typing import Any

from bind_core.data.graph import Graph
from bind_core.errors import ModelNotStationaryError
from bind_core.training.fit import TrainedModel
from bind_core.training.kinks import kink_stall
from bind_core.training.polish import gradient_norm, max_abs_gradient

STATIONARY_SLACK = 100.0
"""The audit refuses weights whose largest gradient entry exceeds ``STATIONARY_SLACK·polish_tol`` (1e-5 with the
default tolerance): the polish aims at ``polish_tol``; two orders of magnitude above it the drift of further
re-optimisation is comparable to single-node effects."""


def require_stationary(model: TrainedModel, graph: Graph) -> dict[str, Any]:
    """The stationarity record of ``model`` on ``graph`` (``max_abs_grad``, ``grad_norm``, ``tolerance``,
    ``stationary``); raises :class:`ModelNotStationaryError` when the largest gradient entry exceeds the tolerance,
    unless the model has kinks and no descent is found from its weights (``stationary: "kinks"``, with
    :func:`~bind_core.training.kinks.kink_stall`'s record under ``kinks``)."""
    tolerance = STATIONARY_SLACK * model.train_config.polish_tol
    worst = max_abs_gradient(model, graph)
    norm = gradient_norm(model, graph)
    record: dict[str, Any] = {"max_abs_grad": worst, "grad_norm": norm, "tolerance": tolerance, "stationary": True}
    if worst > tolerance and not math.isnan(worst):
        stall = kink_stall(model, graph)
        if stall is not None and stall["no_descent"]:
            return {**record, "stationary": "kinks", "kinks": stall}
    if not worst <= tolerance or math.isnan(worst):
        raise ModelNotStationaryError(
            f"the model's weights are not a stationary point of its training objective (largest gradient entry "
            f"{worst:.2e}, gradient norm {norm:.2e}; at most {tolerance:.0e} is needed), so influence estimates "
            "would measure the optimiser's drift as much as any deletion: polish it (training.polish, more "
            "polish_max_iter) or audit without the influence stages",
            max_abs_grad=worst,
            grad_norm=norm,
            tolerance=tolerance,
        )
    return record
