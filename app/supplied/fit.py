"""A supplied model read on its graph when it is registered (``POST /v1/models``): the checks an audit's first seconds
make, said in the registration's answer instead of an audit's (or a schedule's every run's) warnings.

The model is prepared as an audit prepares it (:func:`bind_core.pipeline.prepare_for_audit`, as given): a PyG model
must reproduce the PyG module's logits and the model must predict finite probabilities, or the registration is
refused (the audit would fail); then its fit to its own training nodes and the order of its outputs are measured
(``training_fit``, ``output_order``), and a model that does no better than a constant, or ranks its training labels
below chance, is registered with the warning the audit would give, in time to register the right inputs instead.
A graph above :data:`CHECK_MAX_NODES` nodes is not read here (the API's memory and time): the answer says so, and the
audit checks it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.core.errors import ValidationProblem, bind_error_problem
from bind_core import AuditConfig, ConfigError, Graph, NonFiniteError
from bind_core.codec import decode, encode
from bind_core.pipeline import (
    Caveat,
    OutputsDifferError,
    OutputsMatch,
    codes_of,
    prepare_for_audit,
    read_outputs,
    supplied_model_warnings,
)
from bind_core.pipeline.results import CarriedInputs

CHECK_MAX_NODES = 200_000
"""The largest graph a registration reads to check the model's fit (its forward pass, in the API process)."""


@dataclass
class RegistrationCheck:
    """What reading the model on its graph found: ``fit`` (``training_fit`` and ``output_order`` as an audit's
    ``supplied_model`` has them) and the warnings, or why it was not read (``not_checked``)."""

    fit: dict[str, Any] | None
    warnings: list[Caveat]
    not_checked: str | None = None
    outputs_pending: bool = False
    """The model's own outputs were given but not compared here (a graph too large): the first audit compares them."""

    def kept(self, before: list[Caveat]) -> dict[str, Any]:
        """What the model's row keeps (``supplied_models.registration``), the warnings ``before`` this reading's
        first: ``warnings``, ``warning_codes`` (in their order), ``fit`` and ``fit_not_checked``."""
        warnings = before + self.warnings
        return {
            "warnings": [str(w) for w in warnings],
            "warning_codes": codes_of(warnings),
            "fit": self.fit,
            "fit_not_checked": self.not_checked,
            "outputs_pending": self.outputs_pending,
        }


def too_large(summary: dict[str, Any]) -> str | None:
    """Why a graph of this summary is not read at registration, or ``None``."""
    nodes = int(summary.get("nodes") or 0)
    if nodes <= CHECK_MAX_NODES:
        return None
    return (
        f"the graph has {nodes:,} nodes, above the {CHECK_MAX_NODES:,} a registration reads: an audit checks the "
        "model's fit in its first seconds (warning codes training_fit, output_order)"
    )


def check_on_graph(
    weights: bytes,
    config: dict[str, Any],
    graph: Graph,
    outputs: tuple[bytes, str] | None = None,
    confirmed: dict[str, Any] | None = None,
    carried: CarriedInputs | None = None,
) -> RegistrationCheck:
    """The model read on ``graph`` as an audit reads it (CPU; call from a worker thread).

    Args:
        weights: the safetensors weights.
        config: the canonical config.
        graph: the model's graph.
        outputs: the model's own outputs on the graph as its owner uploaded them (the file's bytes and name).
        confirmed: a match of the owner's outputs an earlier reading of this graph kept (``fit.outputs``).
        carried: where ``graph`` is another version of the model's graph, its inputs carried over to the
            registration's (:func:`bind_core.pipeline.carry_inputs`), what that did.

    Raises:
        ValidationProblem: a PyG model that does not reproduce the PyG module's logits (``unsupported-model``), or
            probabilities that are not finite (``invalid-model``): every audit of it would fail; outputs that do
            not read (``invalid-outputs``) or that the model as read does not give (``outputs-differ``).
    """
    given = None
    if outputs is not None:
        try:
            given = read_outputs(outputs[0], outputs[1], graph)
        except ConfigError as exc:
            raise _refused("The model's outputs cannot be read", exc, "invalid-outputs", "outputs") from exc
    earlier = None if confirmed is None else decode(OutputsMatch, confirmed, "fit.outputs")
    try:
        _, record = prepare_for_audit(
            weights, config, graph, AuditConfig(), outputs=given, confirmed=earlier, carried=carried
        )
    except OutputsDifferError as exc:
        raise bind_error_problem(exc) from exc
    except NonFiniteError as exc:
        raise _refused(
            "The model predicts values that are not finite on its graph", exc, "invalid-model", "weights"
        ) from exc
    except ConfigError as exc:
        raise _refused("The model cannot be audited as it is", exc, "unsupported-model", "config") from exc
    fit = {"training_fit": encode(record.training_fit), "output_order": encode(record.output_order)}
    if record.outputs is not None:
        fit["outputs"] = encode(record.outputs)
    return RegistrationCheck(fit, supplied_model_warnings(record))


_TITLES = {
    "invalid-outputs": "Invalid outputs",
    "invalid-model": "Invalid model",
    "unsupported-model": "Unsupported model",
}


def _refused(what: str, exc: Exception, slug: str, field: str) -> ValidationProblem:
    """A registration refused by what reading the model found: ``what`` and why, blaming the part ``field``."""
    return ValidationProblem(
        f"{what}: {exc}.", slug=slug, title=_TITLES[slug], errors=[{"field": field, "message": str(exc)}]
    )
