"""Supplied models: checking a user's safetensors weights and JSON config against a graph, and storing them.

Weights are read only as safetensors (``bind_core.training.fit.TrainedModel.from_bytes``), never unpickled. A config
may describe this project's model (``TrainedModel.config_dict()``) or a ``torch_geometric.nn.models`` model
(``bind_core.models.pyg``); the latter's weights are stored as uploaded, with its description under the canonical
config's ``source``.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from dataclasses import dataclass
from typing import Any, NamedTuple

from sqlalchemy import delete, select
from sqlalchemy.orm import Session, defer

from app.core.db.tables import Graph, SuppliedModel, Tenant
from app.core.errors import NotFound, ValidationProblem
from app.core.pagination import newest_first
from app.graphs.loading import graph_bytes
from app.supplied.fit import RegistrationCheck, check_on_graph, too_large
from app.supplied.loading import confirmed_outputs
from bind_core import BindError, ModelDoesNotFitError, TrainedModel, UnsupportedModelError, read_document
from bind_core.codec import encode
from bind_core.data.datasets import load_npz
from bind_core.pipeline import Caveat, UnknownCategories, class_order, fit_problems


def parse_config(raw: bytes | str) -> dict[str, Any]:
    """The model config JSON object, or a 422 naming the ``config`` part."""
    try:
        value = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise _invalid("config", f"not valid JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise _invalid("config", "must be a JSON object")
    return value


def check_model(weights: bytes, config: dict[str, Any], summary: dict[str, Any]) -> dict[str, Any]:
    """Load the model (CPU-heavy: call from a worker thread) and check it fits the graph's dimensions.

    Returns:
        The canonical config (``TrainedModel.config_dict()``, with ``source`` for a PyG model), which the worker
        rebuilds the model from.

    Raises:
        ValidationProblem: not safetensors, weights that do not fit the config, or dimensions that do not
            fit the graph (``in_dim`` vs the graph's features, ``num_classes`` vs its classes, the one check of
            ``bind_core.pipeline.fit_problems``; ``classes`` naming a value that is not the label's); a PyG model
            with options the audit cannot reproduce (``unsupported-model``, each option in ``errors``).
    """
    try:
        document = read_document(config)
        model = TrainedModel.from_document(weights, document)
    except UnsupportedModelError as exc:
        raise ValidationProblem(
            f"The model cannot be audited as it is: {exc}.",
            slug="unsupported-model",
            title="Unsupported model",
            errors=[{"field": field, "message": message} for field, message in exc.problems],
        ) from exc
    except BindError as exc:
        field = "weights" if "weights" in str(exc) else "config"
        raise _invalid(field, str(exc)) from exc
    names = [str(n) for n in summary.get("class_names") or range(int(summary["classes"]))]
    errors = [
        {"field": f"config.{field}", "message": message}
        for field, message in fit_problems(
            model.module.in_dim,
            model.model_config.num_outputs(model.module.num_classes),
            model.module.num_classes,
            int(summary["features"]),
            int(summary["classes"]),
            label=summary.get("label"),
            names=names,
        )
    ]
    if document.classes is not None and not errors:
        try:
            class_order(document.classes, names, summary.get("label"))
        except ModelDoesNotFitError as exc:
            errors += [{"field": f"config.{field}", "message": message} for field, message in exc.problems]
    if errors:
        detail = "The model does not fit the graph: " + "; ".join(f"{e['field']} {e['message']}" for e in errors) + "."
        raise ValidationProblem(detail, slug="model-does-not-fit", title="Model does not fit the graph", errors=errors)
    return encode(dataclasses.replace(model.document(), source=document.source, classes=document.classes))


def check_fit(
    session: Session,
    graph_id: uuid.UUID,
    summary: dict[str, Any],
    weights: bytes,
    config: dict[str, Any],
    outputs: tuple[bytes, str] | None = None,
    confirmed: dict[str, Any] | None = None,
) -> RegistrationCheck:
    """The model read on its graph as an audit's first seconds read it (:mod:`app.supplied.fit`; CPU-heavy: call
    from a worker thread), or why not (a graph too large to read here); ``outputs``, the model's own outputs as its
    owner uploaded them (bytes and file name), compared (on a graph too large, left to its first audit:
    ``outputs_pending``); ``confirmed``, an earlier match kept.

    Raises:
        ValidationProblem: a model every audit of which would fail (not finite, or a PyG model not reproduced), or
            outputs that do not read or that the model does not give (or that a graph too large cannot compare).
    """
    if (why := too_large(summary)) is not None:
        if confirmed is not None:  # compared by an audit (below): the match stands
            return RegistrationCheck({"outputs": confirmed}, [], why)
        if outputs is not None:
            kept = "; the outputs given are kept, and its first audit on this graph compares them (outputs_pending)"
            return RegistrationCheck(None, [], why + kept, outputs_pending=True)
        return RegistrationCheck(None, [], why)
    data = graph_bytes(session, graph_id)
    if data is None:  # deleted meanwhile: the registration's own check refuses it
        return RegistrationCheck(None, [], "the graph was deleted")
    return check_on_graph(weights, config, load_npz(data), outputs, confirmed)


def _invalid(field: str, message: str) -> ValidationProblem:
    """A ``422 invalid-model`` blaming ``field``, named once in the detail (bind_core's messages often begin so)."""
    return ValidationProblem(
        message if message.startswith(field) else f"{field}: {message}",
        slug="invalid-model",
        title="Invalid model",
        errors=[{"field": field, "message": message}],
    )


def graph_summary(session: Session, tenant: Tenant, graph_id: uuid.UUID) -> dict[str, Any]:
    summary = session.scalar(select(Graph.summary).where(Graph.id == graph_id, Graph.tenant_id == tenant.id))
    if summary is None:
        raise ValidationProblem(
            f"No graph with id {graph_id}.", errors=[{"field": "graph_id", "message": "no such graph"}]
        )
    found: dict[str, Any] = summary
    return found


def registration_warnings(summary: dict[str, Any]) -> list[Caveat]:
    """What to check before auditing a model registered for a graph with this summary: features min-max scaled at
    upload, which a model trained on the table's own values never saw."""
    if not summary.get("features_scaled"):
        return []
    return [
        Caveat(
            "the graph's feature columns were min-max scaled to [-1, 1] at upload (summary.features_scaled): if this "
            "model was trained on other values (the table's own, or scaled another way, e.g. to [0, 1] or "
            "standardised), an audit describes it on inputs it never saw; upload a table of the values it was "
            "trained on with scale=false and register the model for that graph",
            "scaled_inputs",
        )
    ]


def read_at_registration(
    session: Session,
    graph_id: uuid.UUID,
    summary: dict[str, Any],
    weights: bytes,
    config: dict[str, Any],
    outputs: tuple[bytes, str] | None = None,
    confirmed: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """What a registration says and the model's row keeps (``supplied_models.registration``): the graph's warnings,
    then the model read on it (:func:`check_fit`, with the model's own ``outputs`` where given, or an earlier
    reading's match ``confirmed``). CPU-heavy: call from a worker thread.

    Raises:
        ValidationProblem: a model every audit of which would fail, or outputs it does not give (see
            :func:`check_fit`).
    """
    check = check_fit(session, graph_id, summary, weights, config, outputs, confirmed)
    before = registration_warnings(summary)
    if check.fit is not None and (check.fit.get("outputs") or {}).get("matches"):
        before = [w for w in before if w.code != "scaled_inputs"]  # the model's own outputs say its inputs are right
    return check.kept(before)


def register(
    session: Session,
    tenant: Tenant,
    graph_id: uuid.UUID,
    weights: bytes,
    config: bytes | str | dict[str, Any],
    *,
    name: str | None = None,
    unknown_categories: UnknownCategories = "refuse",
    outputs: tuple[bytes, str] | None = None,
    default_name: str | None = None,
) -> SuppliedModel:
    """Register a model for one of the tenant's graphs, as ``POST /v1/models``, the console's form and an audit's
    retrained model do: its config read (JSON, or an object already), its weights checked against it and the graph
    (:func:`check_model`), the model read on its graph (with its own ``outputs`` where given,
    :func:`read_at_registration`) and stored, named ``name`` or else ``default_name`` or its architecture.
    CPU-heavy: call from a worker thread.

    Raises:
        NotFound: no such graph of the tenant's.
        ValidationProblem: as :func:`parse_config`, :func:`check_model` and :func:`read_at_registration`.
    """
    parsed = config if isinstance(config, dict) else parse_config(config)
    summary = graph_summary(session, tenant, graph_id)
    canonical = check_model(weights, parsed, summary)
    reading = read_at_registration(session, graph_id, summary, weights, canonical, outputs)
    label = (name or "").strip() or default_name or str(canonical["model"].get("arch", "model"))
    row = create_model(
        session,
        tenant,
        graph_id=graph_id,
        name=label[:200],
        weights=weights,
        config=canonical,
        unknown_categories=unknown_categories,
        registration=reading,
    )
    if outputs is not None and reading.get("outputs_pending"):
        row.outputs, row.outputs_name = outputs[0], outputs[1][:200] or "outputs"
    return row


def create_model(
    session: Session,
    tenant: Tenant,
    *,
    graph_id: uuid.UUID,
    name: str,
    weights: bytes,
    config: dict[str, Any],
    unknown_categories: UnknownCategories = "refuse",
    registration: dict[str, Any] | None = None,
) -> SuppliedModel:
    """Store a checked model; ``registration`` is what reading it on its graph found (:func:`read_at_registration`)."""
    row = SuppliedModel(
        tenant_id=tenant.id,
        graph_id=graph_id,
        name=name,
        config=config,
        weights=weights,
        size_bytes=len(weights),
        unknown_categories=unknown_categories,
        registration=registration,
    )
    session.add(row)
    session.flush()
    return row


def parse_unknown_categories(value: str | None) -> UnknownCategories:
    """The registration's ``unknown_categories`` form field (``refuse`` when left out), or a 422 naming it."""
    if value is None or value == "refuse":
        return "refuse"
    if value == "ignore":
        return "ignore"
    raise _invalid("unknown_categories", f"must be 'refuse' or 'ignore', not {value!r}")


def get_model(session: Session, tenant: Tenant, model_id: uuid.UUID) -> SuppliedModel:
    row = session.scalar(
        select(SuppliedModel).where(SuppliedModel.id == model_id, SuppliedModel.tenant_id == tenant.id)
    )
    if row is None:
        raise NotFound("model", model_id)
    return row


def list_models(
    session: Session, tenant: Tenant, *, graph_id: uuid.UUID | None, limit: int, page_token: str | None
) -> tuple[list[SuppliedModel], str | None]:
    stmt = select(SuppliedModel).options(defer(SuppliedModel.weights)).where(SuppliedModel.tenant_id == tenant.id)
    if graph_id is not None:
        stmt = stmt.where(SuppliedModel.graph_id == graph_id)
    return newest_first(session, stmt, SuppliedModel, kind="models", limit=limit, token=page_token)


@dataclass(frozen=True)
class Registered:
    """A supplied model as an audit or a schedule of it needs it: the graph version it was registered for, that
    graph's name (every version of which it can be audited on) and its stored config."""

    graph_id: uuid.UUID
    graph_name: str
    config: dict[str, Any]


def registered_model(session: Session, tenant: Tenant, model_id: uuid.UUID, *, lock: bool = False) -> Registered:
    """The tenant's supplied model ``model_id`` (``lock``: a share lock against its deletion until the commit), or a
    422 naming ``model_id``."""
    stmt = (
        select(SuppliedModel.graph_id, SuppliedModel.config, Graph.name)
        .join(Graph, Graph.id == SuppliedModel.graph_id)
        .where(SuppliedModel.id == model_id, SuppliedModel.tenant_id == tenant.id)
    )
    row = session.execute(stmt.with_for_update(read=True, of=SuppliedModel) if lock else stmt).first()
    if row is None:
        raise ValidationProblem(
            f"No model with id {model_id}.", errors=[{"field": "model_id", "message": "no such model"}]
        )
    return Registered(row.graph_id, str(row.name), dict(row.config))


class ModelChoice(NamedTuple):
    """A model registered for some version of a graph's name, as a form offers it."""

    id: uuid.UUID
    name: str
    registered_on: int
    """The version it was registered on."""
    unknown_categories: str
    warning_codes: list[str]
    """The codes of its registration's warnings (``training_fit``, ``output_order``…); empty where none was kept."""
    outputs_confirmed: bool = False
    """Its own outputs were given at registration and the model as read gave them."""


def models_for_name(session: Session, tenant: Tenant, name: str, *, limit: int) -> list[ModelChoice]:
    """The models registered for any version of the tenant's graph ``name``, newest first: each can be audited on
    every version of it (its inputs carried over to its registration's)."""
    rows = session.execute(
        select(
            SuppliedModel.id,
            SuppliedModel.name,
            Graph.version,
            SuppliedModel.unknown_categories,
            SuppliedModel.registration,
        )
        .join(Graph, Graph.id == SuppliedModel.graph_id)
        .where(SuppliedModel.tenant_id == tenant.id, Graph.name == name)
        .order_by(SuppliedModel.created_at.desc(), SuppliedModel.id.desc())
        .limit(limit)
    ).all()
    return [
        ModelChoice(
            r.id,
            r.name,
            r.version,
            r.unknown_categories,
            list((r.registration or {}).get("warning_codes") or []),
            confirmed_outputs(r.registration) is not None,
        )
        for r in rows
    ]


def read_again(session: Session, tenant: Tenant, model_id: uuid.UUID) -> SuppliedModel:
    """Read the model on its graph again as a registration does (:func:`read_at_registration`) and keep what it
    finds, replacing the registration's reading: for a model registered before readings were kept, or after the
    checks changed. CPU-heavy: call from a worker thread.

    Raises:
        NotFound: no such model of the tenant's.
        ValidationProblem: its graph was deleted, or it predicts values that are not finite on it.
    """
    row = get_model(session, tenant, model_id)
    summary = graph_summary(session, tenant, row.graph_id)
    confirmed = confirmed_outputs(row.registration)  # a match found before stands (the outputs are not kept)
    pending = (row.outputs, row.outputs_name or "outputs") if row.outputs is not None and confirmed is None else None
    row.registration = read_at_registration(session, row.graph_id, summary, row.weights, row.config, pending, confirmed)
    session.flush()
    return row


def delete_model(session: Session, tenant: Tenant, model_id: uuid.UUID) -> None:
    """Delete a model; audits of it keep their results (their ``model_id`` becomes null)."""
    row = get_model(session, tenant, model_id)
    session.execute(delete(SuppliedModel).where(SuppliedModel.id == row.id))
    session.expunge(row)
