"""The audit form's refusals in the form's own words: each field by the label the page shows it under, each problem
as a plain sentence, rather than the request body's paths (``model.layers``) and pydantic's wording ("Input should
be greater than or equal to 1"). The API keeps its problem documents as they are; only the console's page says it
this way."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from app.core.errors import ProblemError, ValidationProblem

LABELS: dict[tuple[str, ...], str] = {
    ("model", "arch"): "Architecture",
    ("model", "layers"): "Layers",
    ("training", "epochs"): "Training epochs",
    ("model_id",): "Supplied model",
    ("budgets",): "Debiasing budgets",
    ("debias_seeds",): "Check against random nodes",
    ("edges",): "Attribute every edge",
    ("interval_seconds",): "Every",
    ("thresholds", "delta_sp"): "Alert when ΔSP is above",
    ("url",): "URL",
    ("events",): "Events",
    ("warning_codes",): "audit.warned only for",
}
"""The form's label of each request field it fills (``app/console/templates/graph.html``: the audit form's and the
schedule form's; ``webhooks.html``: the webhook forms)."""

_ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth")


def form_errors(exc: ValidationError) -> list[dict[str, str]]:
    """``exc``'s errors as the form says them: ``{"field": label, "message": sentence}`` each.

    Args:
        exc: the request body's validation error.

    Returns:
        One entry per error, in order; a field the form does not show keeps its path.
    """
    return [{"field": _label(e.get("loc", ())), "message": _sentence(e)} for e in exc.errors()]


def _label(loc: Sequence[Any]) -> str:
    """The form's label of the field at ``loc`` (a list's item by its place: "Debiasing budgets, the second value")."""
    parts = tuple(str(p) for p in loc if not isinstance(p, int))
    places = [p for p in loc if isinstance(p, int)]
    label = LABELS.get(parts, ".".join(str(p) for p in loc))
    if places and parts in LABELS:
        place = places[0]
        label += f", the {_ORDINALS[place]} value" if place < len(_ORDINALS) else f", value {place + 1}"
    return label


def _sentence(error: Mapping[str, Any]) -> str:
    """One error's problem as a plain sentence (pydantic's own words where there is none here)."""
    kind, ctx = str(error.get("type", "")), error.get("ctx") or {}
    bounds = {
        "greater_than_equal": ("at least", "ge"),
        "less_than_equal": ("at most", "le"),
        "greater_than": ("more than", "gt"),
        "less_than": ("less than", "lt"),
    }
    if kind in bounds and bounds[kind][1] in ctx:
        words, bound = bounds[kind]
        return f"must be {words} {ctx[bound]}"
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return "must be a whole number"
    if kind in ("float_type", "float_parsing", "finite_number"):
        return "must be a number"
    if kind in ("literal_error", "enum") and "expected" in ctx:
        return f"must be one of {ctx['expected']}"
    if kind == "missing":
        return "is required"
    message = str(error.get("msg", ""))
    return message.removeprefix("Value error, ")


def form_refusal(exc: ValidationError | ProblemError, title: str) -> ProblemError:
    """How a form shows why it was refused: a request body's rule (``exc`` a :class:`ValidationError`) as a problem
    titled ``title`` with its fields in the form's labels (:func:`form_errors`); a service's refusal as it is.

    Args:
        exc: what the form's request raised.
        title: the problem's detail for a body's rule ("The schedule's settings are not valid.").

    Returns:
        The problem the form shows.

    Raises:
        ProblemError: ``exc`` itself where it is a 403 or a 404, which the console answers with its problem page
            rather than the form.
    """
    if isinstance(exc, ValidationError):
        return ValidationProblem(title, errors=form_errors(exc))
    if exc.status in (403, 404):
        raise exc
    return exc
