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
import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple

import torch
from safetensors.torch import load as st_load
from torch import Tensor

from bind_core.codec import encode
from bind_core.data.graph import Graph
from bind_core.errors import ConfigError
from bind_core.models.fits import class_order
from bind_core.models.pyg import REPRODUCTION_TOLERANCE, reproduction
from bind_core.models.pyg_names import pyg_state_dict
from bind_core.training.document import read_document
from bind_core.training.fit import SuppliedForm, TrainedModel
from bind_core.training.fit_check import check_training_fit
from bind_core.training.output_order import check_output_order, reorder_outputs
from bind_core.training.outputs import (
    GivenOutputs,
    OutputsDifferError,
    OutputsMatch,
    compare_outputs,
    outputs_problem,
)
from bind_core.training.polish import gradient_norm, polish

REFERENCES = ("as_given", "polished")
"""Which model a supplied model's audit describes: the supplied weights (``as_given``, the default) or a copy polished
to a stationary point first (``polished``; the supplied one is then reported beside it)."""


class Supplied(NamedTuple):
    """A supplied model ready to audit (:func:`prepare_supplied`)."""

    model: TrainedModel
    """The model the audit describes: the supplied weights, or the polished copy with ``reference="polished"``."""
    record: dict[str, Any]
    """What was done to it: ``reference``, ``polished_by_service``, ``grad_norm_supplied``, ``grad_norm``,
    ``output_order`` (:func:`~bind_core.training.output_order.check_output_order`), ``training_fit``
    (:func:`~bind_core.training.fit_check.check_training_fit`), ``classes`` where the config
    gave them (the outputs were put in the graph's class order) and, for a PyG model, ``pyg``
    (:func:`~bind_core.models.pyg.reproduction`)."""
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
    outputs: GivenOutputs | None = None,
    confirmed: OutputsMatch | None = None,
    carried: bool = False,
) -> Supplied:
    """The supplied model ready to audit on ``device``, in float64 (its own forward pass; nothing is changed but the
    order of its outputs where its config's ``classes`` says it differs from the graph's): :func:`prepare_model` of
    the model the weights and config describe, a PyG model checked against the PyG module with the weights as
    supplied.

    Raises:
        ConfigError: the weights do not fit the config, and as :func:`prepare_model`.
        NonFiniteError: the model predicts NaN or inf on the graph.
    """
    if reference not in REFERENCES:
        raise ConfigError(f"reference: {reference!r} is not one of {', '.join(REFERENCES)}")
    model = TrainedModel.from_document(weights, read_document(config))
    return prepare_model(
        model,
        graph,
        device,
        reference=reference,
        progress=progress,
        weights=st_load(weights),
        outputs=outputs,
        confirmed=confirmed,
        carried=carried,
    )


def prepare_model(
    model: TrainedModel,
    graph: Graph,
    device: str | torch.device = "cpu",
    *,
    reference: str = "as_given",
    progress: Callable[[float], None] | None = None,
    weights: dict[str, Tensor] | None = None,
    outputs: GivenOutputs | None = None,
    confirmed: OutputsMatch | None = None,
    carried: bool = False,
) -> Supplied:
    """A model read from a supplied config (:meth:`TrainedModel.from_bytes`) ready to audit on ``device``, in float64.
    ``model`` itself is changed (its dtype and device, the order of its outputs): pass a copy to keep it.

    In order: the model must fit the graph (its inputs the graph's features, its outputs the label's classes); a PyG
    model must reproduce the PyG module's logits; the outputs are put in the graph's class order where the config's
    ``classes`` says they are in another (:func:`~bind_core.training.output_order.reorder_outputs`), and checked
    against the training labels (:func:`~bind_core.training.output_order.check_output_order`).

    Args:
        model: the model (its :attr:`~TrainedModel.supplied` form says how it was described).
        graph: the graph it will be audited on.
        device: where to compute.
        reference: ``"as_given"`` (default): the audit describes the supplied weights. ``"polished"``: a copy is
            polished to a stationary point and audited; the supplied model comes back as ``given`` so that the
            audit can report both (``progress``: the polish's, which may raise to stop it).
        weights: a PyG model's weights as supplied (under PyG's names); default: the model's own, renamed.
        outputs: the owner's outputs on ``graph`` (:func:`~bind_core.training.outputs.read_outputs`), compared with
            the model's before anything is reordered (:func:`~bind_core.training.outputs.compare_outputs`): the
            record's ``outputs``; where they match, the fit check takes the inputs as confirmed.
        confirmed: a match found earlier on this same graph (a registration's), taken as it is.
        carried: ``graph`` is another version of the graph the model was registered for, its inputs carried over
            (:func:`~bind_core.data.carry.carry_inputs`): where ``outputs`` differ, that carry is the likely cause.

    Raises:
        ModelDoesNotFitError: the model's inputs are not the graph's features, its outputs not the label's classes,
            or its config's ``classes`` names a value that is not the label's.
        ConfigError: ``reference`` is unknown, or the converted PyG model does not reproduce the PyG module's logits
            within :data:`~bind_core.models.pyg.REPRODUCTION_TOLERANCE`.
        NonFiniteError: the model predicts NaN or inf on the graph.
        OutputsDifferError: ``outputs`` are not the model's as read (what most likely differs said).
    """
    if reference not in REFERENCES:
        raise ConfigError(f"reference: {reference!r} is not one of {', '.join(REFERENCES)}")
    if reference == "polished" and model.model_config.stationary_point is not None:
        raise ConfigError(
            f"reference: polished: {model.model_config.stationary_point}, so no polish can end; audit it as given"
        )
    form = model.supplied or SuppliedForm()
    model.module.require_fit(graph)  # before any forward pass: torch's own error names neither
    record: dict[str, Any] = {"reference": reference, "polished_by_service": False}
    if form.source is not None:
        if weights is None:
            weights = pyg_state_dict(model.module.state_dict(), form.source, form.names)
        check = reproduction(model.module, weights, form.source, graph)
        difference = check.max_logit_difference
        if difference is None or not difference <= REPRODUCTION_TOLERANCE:
            raise ConfigError(
                f"the model read from the {form.source.cls} weights does not reproduce the PyG module's logits "
                f"(largest relative difference {difference:.2e} > {REPRODUCTION_TOLERANCE:g})"
            )
        record["pyg"] = encode(check)
    model.module.to(device).double()
    match = confirmed
    if outputs is not None:
        match = compare_outputs(model.predict_proba(graph), outputs, graph)  # the model's own output order
        if not match.matches:
            named = form.source is not None and bool(form.source.layer_names)
            problem = outputs_problem(match, graph, layer_names=named, form=outputs.form, carried=carried)
            raise OutputsDifferError(problem, match)
    if match is not None:
        record["outputs"] = encode(match)
    if form.classes is not None:
        names = graph.class_names or tuple(str(c) for c in range(graph.num_classes))
        reorder_outputs(model.module, class_order(form.classes, names, graph.label_name), graph)
        record["classes"] = list(form.classes)
    proba = model.predict_proba(graph)  # refuses probabilities that are not finite (NonFiniteError)
    width = model.model_config.num_outputs(model.module.num_classes)
    record["output_order"] = encode(check_output_order(proba, graph, outputs=width, classes=form.classes))
    confirms = match is not None and match.matches
    record["training_fit"] = encode(check_training_fit(proba, graph, inputs_confirmed=confirms))
    record["grad_norm_supplied"] = gradient_norm(model, graph)
    model.supplied = dataclasses.replace(form, record=record)
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
    polished.supplied = model.supplied
    return Supplied(polished, record, model)
