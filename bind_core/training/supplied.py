"""A supplied model (trained elsewhere) made ready to audit: loaded, checked against the PyG module it came from, and
audited **as given** (docs/METHOD.md, "The model as given").

The governance question is about the model the user deployed, so its weights are audited as they are: every metric
comes from its own forward pass (in float64), and the influence estimate answers the proximal Bregman response at
those weights (:mod:`bind_core.influence.bregman`), which needs no minimum. Only on request (``reference="polished"``,
for research) is a copy re-optimised to a stationary point first (:func:`bind_core.training.polish.polish`, float64
full-batch L-BFGS and the Newton finish); the audit then describes that polished model and reports the supplied one
beside it (:func:`bind_core.pipeline.reference.compare_reference`), never one in place of the other. A
``torch_geometric.nn.models`` model (:mod:`bind_core.models.pyg`) is first run beside the PyG module itself, built
from its config and weights, and refused unless the two give the same logits on the graph.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any, NamedTuple

import torch
from safetensors.torch import load as st_load

from bind_core.codec import encode
from bind_core.data.graph import Graph
from bind_core.errors import ConfigError
from bind_core.models.pyg import REPRODUCTION_TOLERANCE, reproduction
from bind_core.training.document import read_document
from bind_core.training.fit import TrainedModel
from bind_core.training.polish import gradient_norm, polish

REFERENCES = ("as_given", "polished")
"""Which model a supplied model's audit describes: the supplied weights (``as_given``, the default) or a copy polished
to a stationary point first (``polished``; the supplied one is then reported beside it)."""


class Supplied(NamedTuple):
    """A supplied model ready to audit (:func:`prepare_supplied`)."""

    model: TrainedModel
    """The model the audit describes: the supplied weights, or the polished copy with ``reference="polished"``."""
    record: dict[str, Any]
    """What was done to it: ``reference``, ``polished_by_service``, ``grad_norm_supplied``, ``grad_norm`` and, for a
    PyG model, ``pyg`` (:func:`~bind_core.models.pyg.reproduction`)."""
    given: TrainedModel | None
    """The supplied weights as they are, when ``model`` is a polished copy; ``None`` otherwise."""


def prepare_supplied(
    weights: bytes,
    config: object,
    graph: Graph,
    device: str | torch.device = "cpu",
    *,
    reference: str = "as_given",
    progress: Callable[[float], None] | None = None,
) -> Supplied:
    """The supplied model ready to audit on ``device``, in float64 (its own forward pass; nothing is changed).

    Args:
        reference: ``"as_given"`` (default): the audit describes the supplied weights. ``"polished"``: a copy is
            polished to a stationary point and audited; the supplied model comes back as ``given`` so that the
            audit can report both (``progress``: the polish's, which may raise to stop it).

    Raises:
        ConfigError: the weights do not fit the config, ``reference`` is unknown, or the converted PyG model does
            not reproduce the PyG module's logits within :data:`~bind_core.models.pyg.REPRODUCTION_TOLERANCE`.
        NonFiniteError: the model predicts NaN or inf on the graph.
    """
    if reference not in REFERENCES:
        raise ConfigError(f"reference: {reference!r} is not one of {', '.join(REFERENCES)}")
    document = read_document(config)
    model = TrainedModel.from_document(weights, document)
    record: dict[str, Any] = {"reference": reference, "polished_by_service": False}
    if document.source is not None:
        check = reproduction(model.module, st_load(weights), document.source, graph)
        difference = check.max_logit_difference
        if difference is None or not difference <= REPRODUCTION_TOLERANCE:
            raise ConfigError(
                f"the model read from the {document.source.cls} weights does not reproduce the PyG module's logits "
                f"(largest relative difference {difference:.2e} > {REPRODUCTION_TOLERANCE:g})"
            )
        record["pyg"] = encode(check)
    model.module.to(device).double()
    model.predict_proba(graph)  # refuses probabilities that are not finite (NonFiniteError)
    record["grad_norm_supplied"] = gradient_norm(model, graph)
    if reference == "as_given":
        record["grad_norm"] = record["grad_norm_supplied"]
        return Supplied(model, record, None)
    polished = TrainedModel(
        copy.deepcopy(model.module), model.model_config, model.train_config, copy.deepcopy(model.history)
    )
    polish(polished, graph, newton_max_seconds=model.train_config.newton_seconds, progress=progress)
    record["polished_by_service"] = True
    polished_norm = polished.stationarity.grad_norm
    record["grad_norm"] = float(gradient_norm(polished, graph) if polished_norm is None else polished_norm)
    return Supplied(polished, record, model)
