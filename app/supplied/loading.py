"""Loading a supplied model for an audit (:func:`bind_core.training.supplied.prepare_supplied`: polished to a stationary
point first when it is not yet; a PyG model checked against the PyG module), with the record the results keep
under ``supplied_model``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from bind_core import Graph
from bind_core.training.fit import TrainedModel
from bind_core.training.supplied import prepare_supplied


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
        bind_core.ConfigError: the stored weights no longer fit (never expected: checked on upload), or a PyG
            model's conversion does not reproduce the PyG module's logits.
        bind_core.errors.NonFiniteError: the model predicts NaN or inf on the graph (checked before polishing,
            which would otherwise chase a NaN objective and report the model as not stationary).
    """
    if parts is None:
        raise ModelGone(f"model {model_id} was deleted")
    model, record = prepare_supplied(*parts, graph, device, progress=progress)
    return model, {"id": str(model_id), **record}
