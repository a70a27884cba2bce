"""A supplied model's inputs on another version of the graph it was registered for: where it was registered, and
that version's features carried over to the registration's (:func:`bind_core.pipeline.carry_inputs`). Shared by the
audit's attempt and the distributed estimate's chunk workers, which load the graph again and must read it as the
attempt did."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.core.db.tables import Graph as GraphRow
from app.core.db.tables import SuppliedModel
from bind_core import Graph
from bind_core.pipeline import InputSchema, UnknownCategories, carry_inputs
from bind_core.pipeline.results import CarriedInputs


@dataclass(frozen=True)
class Registration:
    """Where a supplied model was registered: the graph version, and what a later version's category its encoder
    never saw becomes (``refuse`` or ``ignore``)."""

    graph_id: uuid.UUID
    version: int
    unknown_categories: UnknownCategories


def registration(session: Session, model_id: uuid.UUID) -> Registration | None:
    """The graph version a supplied model was registered for, and how it reads unseen categories (``None`` if
    deleted)."""
    row = session.execute(
        select(GraphRow.id, GraphRow.version, SuppliedModel.unknown_categories)
        .join(SuppliedModel, SuppliedModel.graph_id == GraphRow.id)
        .where(SuppliedModel.id == model_id)
    ).one_or_none()
    if row is None:
        return None
    policy: UnknownCategories = "ignore" if row.unknown_categories == "ignore" else "refuse"
    return Registration(row.id, row.version, policy)


def carry_model_inputs(
    sessions: sessionmaker[Session],
    load: Callable[[uuid.UUID], Graph],
    graph: Graph,
    graph_id: uuid.UUID | None,
    model_id: uuid.UUID | None,
) -> tuple[Graph, CarriedInputs | None]:
    """``graph`` (the stored version ``graph_id``) as the supplied model ``model_id`` reads it: itself, with no record,
    without a model, where the model was registered for this very version, or where it is gone (the attempt says so);
    otherwise the registration's graph is loaded (``load(graph id)``) for its
    :class:`~bind_core.pipeline.InputSchema` (with the registration's ``unknown_categories``, fixed when it was
    registered, so that every reader of the version reads it alike), and :func:`~bind_core.pipeline.carry_inputs`
    checks and carries the version's features (while both graphs are in memory).

    Raises:
        bind_core.ModelDoesNotFitError: the version's feature columns, label or classes are not the registration's
            (the audit fails with ``model-does-not-fit``, each difference named).
    """
    if model_id is None:
        return graph, None
    with sessions() as session:
        registered = registration(session, model_id)
    if registered is None or registered.graph_id == graph_id:
        return graph, None
    return carry_to(graph, load(registered.graph_id), registered)


def carry_to(graph: Graph, registered_graph: Graph, registered: Registration) -> tuple[Graph, CarriedInputs]:
    """``graph`` (another version) carried over to the inputs the model was registered with on ``registered_graph``
    (its :class:`~bind_core.pipeline.InputSchema`, read with the registration's ``unknown_categories``), and the
    record, naming the registration's version.

    Raises:
        bind_core.ModelDoesNotFitError: as :func:`carry_model_inputs`.
    """
    schema = InputSchema.of(registered_graph, unknown_categories=registered.unknown_categories)
    carried, record = carry_inputs(graph, schema)
    record.registered_graph_id, record.registered_version = str(registered.graph_id), registered.version
    return carried, record
