"""Loading a supplied model for an audit (:func:`bind_core.pipeline.reference.prepare_for_audit`: audited as given, or a
polished copy beside it with ``reference="polished"``; a PyG model checked against the PyG module), with the record
the results keep under ``supplied_model``; on another version of the graph it was registered for, that version's
inputs carried over first (:func:`carry_model_inputs`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from app.core.settings import Settings
from app.graphs.loading import load_graph
from bind_core import AuditConfig, Graph, TrainedModel
from bind_core.codec import encode
from bind_core.pipeline import InputSchema, carry_inputs, prepare_for_audit
from bind_core.pipeline.results import CarriedInputs


class ModelGone(LookupError):
    """The supplied model an audit names was deleted before the audit ran."""


def prepare_model(
    parts: tuple[bytes, dict[str, Any]] | None,
    model_id: uuid.UUID,
    graph: Graph,
    config: AuditConfig,
    device: str,
    progress: Callable[[float], None] | None = None,
    carried: CarriedInputs | None = None,
) -> tuple[TrainedModel, dict[str, Any]]:
    """The model ready to audit with ``config`` on ``device`` and a record of what was done to it.
    ``progress(fraction)`` is called through the polish, when ``config.reference`` asks for one (it may raise to
    stop it). ``carried``: what :func:`carry_model_inputs` did to ``graph`` (the record's ``carried``).

    Raises:
        ModelGone: the model was deleted.
        bind_core.ConfigError: the stored weights no longer fit (never expected: checked on upload), or a PyG
            model's conversion does not reproduce the PyG module's logits.
        bind_core.errors.NonFiniteError: the model predicts NaN or inf on the graph.
    """
    if parts is None:
        raise ModelGone(f"model {model_id} was deleted")
    model, record = prepare_for_audit(*parts, graph, config, device, progress=progress, carried=carried)
    record.id = str(model_id)
    return model, encode(record)


def carry_model_inputs(
    sessions: sessionmaker[Session],
    settings: Settings,
    graph: Graph,
    graph_id: uuid.UUID | None,
    registered: tuple[uuid.UUID, int] | None,
) -> tuple[Graph, CarriedInputs | None]:
    """``graph`` (the stored version ``graph_id``) as a supplied model registered for the graph version
    ``registered`` (``(id, version)``) reads it: itself, with no record, where that is the version audited (or the
    model is gone: :func:`prepare_model` says so); otherwise the registration's graph is loaded for its
    :class:`~bind_core.data.carry.InputSchema` and :func:`~bind_core.data.carry.carry_inputs` checks and carries the
    version's features (while both graphs are in memory).

    Raises:
        bind_core.ModelDoesNotFitError: the version's feature columns, label or classes are not the registration's
            (the audit fails with ``model-does-not-fit``, each difference named).
    """
    if registered is None or registered[0] == graph_id:
        return graph, None
    schema = InputSchema.of(load_graph(sessions, settings, registered[0], None))
    carried, record = carry_inputs(graph, schema)
    record.registered_graph_id, record.registered_version = str(registered[0]), registered[1]
    return carried, record
