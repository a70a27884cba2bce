"""Loading a supplied model for an audit, polished to a stationary point first when it is not yet.

BIND's influence estimate is a first-order expansion around a minimum of the training objective; a model
trained elsewhere usually stopped short of one (Adam, early stopping, dropout). Unless its config's
``stationarity`` says ``polished``, the worker re-optimises it in place (``bind_core.training.polish``,
float64 full-batch L-BFGS) before the audit, and records the gradient norms before and after in the
results under ``supplied_model``. The audit then describes the polished model, which predicts almost
exactly as the supplied one when that one was near a minimum.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from bind_core import Graph
from bind_core.training import TrainedModel, gradient_norm, polish


class ModelGone(LookupError):
    """The supplied model an audit names was deleted before the audit ran."""


def prepare_model(
    parts: tuple[bytes, dict[str, Any]] | None,
    model_id: uuid.UUID,
    graph: Graph,
    device: str,
    progress: Callable[[float], None] | None = None,
) -> tuple[TrainedModel, dict[str, Any]]:
    """The model ready to audit on ``device`` and a record of what was done to it. ``progress(fraction)`` is
    called through the polish (it may raise to stop it).

    Raises:
        ModelGone: the model was deleted.
        bind_core.ConfigError: the stored weights no longer fit (never expected: checked on upload).
    """
    if parts is None:
        raise ModelGone(f"model {model_id} was deleted")
    model = TrainedModel.from_bytes(*parts)
    model.module.to(device)
    record: dict[str, Any] = {"id": str(model_id), "polished_by_service": False}
    if not model.stationarity.get("polished"):
        record["grad_norm_supplied"] = gradient_norm(model, graph)
        polish(model, graph, newton_max_seconds=model.train_config.newton_seconds, progress=progress)
        record["polished_by_service"] = True
    record["grad_norm"] = float(model.stationarity.get("grad_norm", gradient_norm(model, graph)))
    return model, record
