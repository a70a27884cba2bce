"""A supplied model (trained elsewhere) made ready to audit: loaded, checked against the PyG module it came from,
and polished to a stationary point when it is not one yet.

BIND's influence estimate is a first-order expansion around a minimum of the training objective; a model trained
elsewhere usually stopped short of one (Adam, early stopping, dropout). Unless its config's ``stationarity`` says
``polished``, it is re-optimised in place (:func:`bind_core.training.polish.polish`, float64 full-batch L-BFGS) and the
audit describes the polished model, which predicts almost exactly as the supplied one when that one was near a
minimum. A ``torch_geometric.nn.models`` model (:mod:`bind_core.models.pyg`) is first run beside the PyG module
itself, built from its config and weights, and refused unless the two give the same logits on the graph.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from safetensors.torch import load as st_load

from bind_core.data.graph import Graph
from bind_core.errors import ConfigError
from bind_core.models.pyg import REPRODUCTION_TOLERANCE, bind_config, is_pyg_config, reproduction
from bind_core.training.fit import TrainedModel
from bind_core.training.polish import gradient_norm, polish


def prepare_supplied(
    weights: bytes,
    config: dict[str, Any],
    graph: Graph,
    device: str | torch.device = "cpu",
    *,
    progress: Callable[[float], None] | None = None,
) -> tuple[TrainedModel, dict[str, Any]]:
    """The model ready to audit on ``device`` and a record of what was done to it (``progress``: the polish's,
    which may raise to stop it).

    Returns:
        The model and ``{"polished_by_service", "grad_norm_supplied" (when polished), "grad_norm", "pyg"
        (a PyG model: :func:`~bind_core.models.pyg.reproduction` before the polish)}``.

    Raises:
        ConfigError: the weights do not fit the config, or the converted PyG model does not reproduce the PyG
            module's logits within :data:`~bind_core.models.pyg.REPRODUCTION_TOLERANCE`.
        NonFiniteError: the model predicts NaN or inf on the graph.
    """
    model = TrainedModel.from_bytes(weights, config)
    record: dict[str, Any] = {"polished_by_service": False}
    source = bind_config(config)["source"] if is_pyg_config(config) else config.get("source")
    if is_pyg_config(source):
        check = reproduction(model.module, st_load(weights), source, graph)
        if not check["max_logit_difference"] <= REPRODUCTION_TOLERANCE:
            raise ConfigError(
                f"the model read from the {source['class']} weights does not reproduce the PyG module's logits "
                f"(largest relative difference {check['max_logit_difference']:.2e} > {REPRODUCTION_TOLERANCE:g})"
            )
        record["pyg"] = check
    model.module.to(device)
    model.predict_proba(graph)  # refuses probabilities that are not finite (NonFiniteError) before the polish
    if not model.stationarity.get("polished"):
        record["grad_norm_supplied"] = gradient_norm(model, graph)
        polish(model, graph, newton_max_seconds=model.train_config.newton_seconds, progress=progress)
        record["polished_by_service"] = True
    record["grad_norm"] = float(model.stationarity.get("grad_norm", gradient_norm(model, graph)))
    return model, record
