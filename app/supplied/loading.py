"""Loading a supplied model for an audit (:func:`bind_core.pipeline.reference.prepare_for_audit`: audited as given, or a
polished copy beside it with ``reference="polished"``; a PyG model checked against the PyG module), with the record
the results keep under ``supplied_model``; on another version of the graph it was registered for, that version's
inputs carried over first (:func:`app.graphs.model_inputs.carry_model_inputs`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from bind_core import AuditConfig, Graph, TrainedModel
from bind_core.codec import decode, encode
from bind_core.pipeline import OutputsMatch, prepare_for_audit, read_outputs
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
    confirmed: dict[str, Any] | None = None,
    outputs: tuple[bytes, str] | None = None,
) -> tuple[TrainedModel, dict[str, Any]]:
    """The model ready to audit with ``config`` on ``device`` and a record of what was done to it.
    ``progress(fraction)`` is called through the polish, when ``config.reference`` asks for one (it may raise to
    stop it). ``carried``: what :func:`~app.graphs.model_inputs.carry_model_inputs` did to ``graph`` (the record's
    ``carried``). ``confirmed``: the match of the model's own outputs its registration kept
    (:func:`confirmed_outputs`), where ``graph`` is the graph it was registered for. ``outputs``: the model's own
    outputs its registration kept but could not compare (bytes and file name), compared here.

    Raises:
        ModelGone: the model was deleted.
        bind_core.ConfigError: the stored weights no longer fit (never expected: checked on upload), or a PyG
            model's conversion does not reproduce the PyG module's logits.
        bind_core.errors.NonFiniteError: the model predicts NaN or inf on the graph.
        bind_core.pipeline.OutputsDifferError: the model does not give the ``outputs`` kept (a ``ConfigError`` too
            where they do not read).
    """
    if parts is None:
        raise ModelGone(f"model {model_id} was deleted")
    match = None if confirmed is None else decode(OutputsMatch, confirmed, "registration.fit.outputs")
    given = None if outputs is None else read_outputs(outputs[0], outputs[1], graph)
    model, record = prepare_for_audit(
        *parts, graph, config, device, progress=progress, carried=carried, confirmed=match, outputs=given
    )
    record.id = str(model_id)
    return model, encode(record)


def confirmed_outputs(registration: dict[str, Any] | None) -> dict[str, Any] | None:
    """The match of the model's own outputs a registration's reading kept (``fit.outputs``), where they matched."""
    return matched(((registration or {}).get("fit") or {}).get("outputs"))


def matched(found: object) -> dict[str, Any] | None:
    """A kept comparison of the owner's outputs with the model (a registration's, or a version's), where it found a
    match; ``None`` otherwise."""
    return found if isinstance(found, dict) and found.get("matches") else None
