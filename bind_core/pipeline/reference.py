"""A supplied model audited with ``reference="polished"``: the polished copy and the supplied weights side by side.

The audit then describes the polished copy (influence, debiasing), but the model the user deployed is the supplied
one, so its metrics are reported beside the polished model's, with the share of test predictions on which the two
disagree (polishing changed 8-38% of them on Income and a 1000-node credit graph; docs/METHOD.md, "The model as
given"). Neither is reported in place of the other.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from typing import Any

import torch

from bind_core.codec import decode, encode
from bind_core.data.graph import Graph
from bind_core.data.records import CarriedInputs
from bind_core.debiasing.debias import report
from bind_core.pipeline.config import AuditConfig
from bind_core.pipeline.results import ReferenceComparison, SuppliedModel
from bind_core.pipeline.stages import metric_groups
from bind_core.training.fit import TrainedModel
from bind_core.training.outputs import GivenOutputs, OutputsMatch
from bind_core.training.supplied import Supplied, prepare_model, prepare_supplied


def compare_reference(
    given: TrainedModel, polished: TrainedModel, graph: Graph, *, lam: float = 0.5, groups: list[int] | None = None
) -> ReferenceComparison:
    """The supplied model's and the polished copy's test metrics (:func:`~bind_core.debiasing.debias.report`, over
    pairs of ``groups``) and the share of test nodes whose predicted label differs.

    Args:
        given: the supplied model, as given.
        polished: its polished copy.
        graph: the graph whose test nodes they are measured on.
        lam: Γ's weighting of Γ_SP.
        groups: the groups the fairness metrics compare (default: every group).

    Returns:
        The :class:`~bind_core.pipeline.results.ReferenceComparison`: ``as_given``, ``polished``,
        ``predictions_differ`` (``None`` without test nodes) and ``test_nodes``.
    """
    test = graph.test_idx
    before = given.predict_proba(graph, test).argmax(1)
    after = polished.predict_proba(graph, test).argmax(1)
    count = int(test.numel())
    return ReferenceComparison(
        as_given=report(given, graph, lam, groups),
        polished=report(polished, graph, lam, groups),
        predictions_differ=float((before != after).double().mean()) if count else None,
        test_nodes=count,
    )


def prepare_for_audit(
    weights: bytes,
    model_config: dict[str, Any],
    graph: Graph,
    config: AuditConfig,
    device: str | torch.device = "cpu",
    *,
    progress: Callable[[float], None] | None = None,
    carried: CarriedInputs | None = None,
    outputs: GivenOutputs | None = None,
    confirmed: OutputsMatch | None = None,
) -> tuple[TrainedModel, SuppliedModel]:
    """A supplied model ready for an audit with ``config`` (:func:`~bind_core.training.supplied.prepare_supplied`
    with ``config.reference``) and its record (the result's ``supplied_model``).

    Args:
        weights: the model's weights (safetensors, or a ``torch.save`` state dict read with ``weights_only``).
        model_config: its configuration (bind-audit's or a PyG model's).
        graph: the graph it will be audited on.
        config: the audit's settings (``reference``, ``lam``, ``min_group_size``).
        device: where to compute.
        progress: ``progress(fraction)`` through the polish, when ``config.reference`` asks for one.
        carried: where ``graph`` is another version of the graph the model was registered for, what
            :func:`~bind_core.data.carry.carry_inputs` did to it (kept as the record's ``carried``).
        outputs: the owner's outputs on ``graph`` (with ``carried``, on that version, as the deployed model gives
            them), compared with the model's (the record's ``outputs``;
            :class:`~bind_core.training.outputs.OutputsDifferError` where they differ).
        confirmed: a match of the owner's outputs found earlier on this same graph (a registration's).

    Returns:
        The model to audit and the :class:`~bind_core.pipeline.results.SuppliedModel` record; with
        ``reference="polished"`` its ``comparison`` holds both models' metrics, over the groups the audit's metrics
        take. The service sets its ``id``.
    """
    supplied = prepare_supplied(
        weights,
        model_config,
        graph,
        device,
        reference=config.reference,
        progress=progress,
        outputs=outputs,
        confirmed=confirmed,
        carried=carried is not None,
    )
    return _recorded(supplied, graph, config, carried)


def prepare_model_for_audit(
    model: TrainedModel,
    graph: Graph,
    config: AuditConfig,
    device: str | torch.device = "cpu",
    *,
    progress: Callable[[float], None] | None = None,
    carried: CarriedInputs | None = None,
    outputs: GivenOutputs | None = None,
) -> tuple[TrainedModel, SuppliedModel]:
    """:func:`prepare_for_audit` of a model already read (:meth:`TrainedModel.from_bytes`, whose
    :attr:`~TrainedModel.supplied` form says how it was described), as ``run_audit(model=...)`` takes it: a copy is
    prepared, ``model`` is left as it is. ``carried`` as for :func:`prepare_for_audit`.

    Returns:
        As :func:`prepare_for_audit`.
    """
    supplied = prepare_model(
        copy.deepcopy(model),
        graph,
        device,
        reference=config.reference,
        progress=progress,
        outputs=outputs,
        carried=carried is not None,
    )
    return _recorded(supplied, graph, config, carried)


def _recorded(
    supplied: Supplied, graph: Graph, config: AuditConfig, carried: CarriedInputs | None = None
) -> tuple[TrainedModel, SuppliedModel]:
    """The prepared model and its record, kept with it (``model.supplied.record``) for the audit to report."""
    record = decode(SuppliedModel, supplied.record, "supplied_model")
    record.carried = carried
    if supplied.given is not None:
        groups = metric_groups(graph, config.min_group_size)
        record.comparison = compare_reference(supplied.given, supplied.model, graph, lam=config.lam, groups=groups)
    form = supplied.model.supplied
    if form is not None:
        supplied.model.supplied = dataclasses.replace(form, record=encode(record))
    return supplied.model, record
