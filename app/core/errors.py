"""The service's one error hierarchy, rendered as RFC 9457 ``application/problem+json`` documents.

Raise a :class:`ProblemError` (or a subclass) anywhere in a request; :mod:`app.core.problems` turns it, and
every framework or unexpected error, into a problem document. The worker records the same documents on a
failed audit through :meth:`ProblemError.to_problem`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from bind_core import (
    BindError,
    ConfigError,
    DatasetNotFoundError,
    GraphValidationError,
    ModelDoesNotFitError,
    NonFiniteError,
    Option,
)
from bind_core.codec import encode
from bind_core.pipeline import OutputsDifferError

PROBLEM_BASE = "https://bind-audit.dev/problems/"
PROBLEM_CONTENT_TYPE = "application/problem+json"


def problem_type(slug: str) -> str:
    """The ``type`` URI of a problem slug, e.g. ``validation-error``."""
    return PROBLEM_BASE + slug


class ProblemError(Exception):
    """An error with an HTTP status and an RFC 9457 body.

    Args:
        status: the HTTP status code.
        title: a short summary that does not change between occurrences of the same ``slug``.
        detail: what went wrong this time, for a person.
        slug: the last part of the ``type`` URI.
        errors: field errors, each ``{"field": ..., "message": ...}``.
        headers: extra response headers (``WWW-Authenticate``, ``Retry-After``...).
    """

    status: int = 500
    title: str = "Internal server error"
    slug: str = "internal-error"

    def __init__(
        self,
        detail: str | None = None,
        *,
        status: int | None = None,
        title: str | None = None,
        slug: str | None = None,
        errors: Sequence[Mapping[str, object]] = (),
        headers: Mapping[str, str] | None = None,
        extensions: Mapping[str, Any] | None = None,
    ) -> None:
        self.extensions = dict(extensions or {})
        self.status = status if status is not None else type(self).status
        self.title = title if title is not None else type(self).title
        self.slug = slug if slug is not None else type(self).slug
        self.detail = detail
        self.errors = [dict(e) for e in errors]
        self.headers = dict(headers or {})
        super().__init__(detail or self.title)

    def to_problem(self, instance: str | None = None) -> dict[str, Any]:
        """The problem document (a JSON-ready dict)."""
        doc: dict[str, Any] = {"type": problem_type(self.slug), "title": self.title, "status": self.status}
        if self.detail:
            doc["detail"] = self.detail
        if instance:
            doc["instance"] = instance
        if self.errors:
            doc["errors"] = self.errors
        return doc | self.extensions  # RFC 9457 extension members


class BadRequest(ProblemError):
    status, title, slug = 400, "Bad request", "bad-request"


class Unauthorized(ProblemError):
    status, title, slug = 401, "Unauthorized", "unauthorized"

    def __init__(self, detail: str = "A valid API key is required: 'Authorization: Bearer <key>'.") -> None:
        super().__init__(detail, headers={"WWW-Authenticate": "Bearer"})


class Forbidden(ProblemError):
    status, title, slug = 403, "Forbidden", "forbidden"


class NotFound(ProblemError):
    status, title, slug = 404, "Not found", "not-found"

    def __init__(self, resource: str, ident: object) -> None:
        super().__init__(f"No {resource} with id {ident}.", slug=f"{resource}-not-found")


class Conflict(ProblemError):
    status, title, slug = 409, "Conflict", "conflict"


class PayloadTooLarge(ProblemError):
    status, title, slug = 413, "Content too large", "payload-too-large"


class UnsupportedMediaType(ProblemError):
    status, title, slug = 415, "Unsupported media type", "unsupported-media-type"


class ValidationProblem(ProblemError):
    """Input that is well-formed but wrong (422), with the fields to blame."""

    status, title, slug = 422, "Validation error", "validation-error"


class TooManyRequests(ProblemError):
    status, title, slug = 429, "Too many requests", "rate-limited"


class ServiceUnavailable(ProblemError):
    status, title, slug = 503, "Service unavailable", "service-unavailable"


def request_field(option: Option) -> str:
    """An option bind_core's advice names, said as the request field that takes it: the API's fields are
    spelled as bind_core's parameters, with form values (``on_unknown_nodes=drop``, ``impute_missing=true``,
    ``scale=false``, ``features``)."""
    if option.value is None:
        return option.name
    value = str(option.value).lower() if isinstance(option.value, bool) else option.value
    return f"{option.name}={value}"


def bind_error_problem(exc: BindError, name: Callable[[Option], str] = request_field) -> ProblemError:
    """The one mapping of ``bind_core``'s errors to problems, for the API and for failed audits alike: all are
    the caller's input refused (422), with a message that names the field and the bad value.

    ``invalid-graph`` (with one ``errors[]`` entry per problem: ``field`` the parameter at fault, ``value`` the
    bad value given to it, ``column``, ``file``, ``rows``, ``values``, ``count``, ``suggestions`` where known;
    options in the messages said by ``name``), ``dataset-not-found``, ``model-output-not-finite``,
    ``model-does-not-fit`` (a supplied model's inputs or outputs are not the graph's, each in ``errors[]``),
    ``outputs-differ`` (a supplied model does not give its own outputs as given; their figures in ``outputs``),
    ``invalid-config``, and ``invalid-input`` for the rest.
    """
    if isinstance(exc, GraphValidationError):
        errors = [{"field": p.field, "message": p.text(name)} | p.details() for p in exc.problems or (exc,)]
        detail = f"{exc.field}: {exc.text(name)}"
        return ValidationProblem(detail, slug="invalid-graph", title="Invalid graph", errors=errors)
    if isinstance(exc, DatasetNotFoundError):
        return ValidationProblem(str(exc), slug="dataset-not-found", title="Dataset not found")
    if isinstance(exc, NonFiniteError):
        return ValidationProblem(str(exc), slug="model-output-not-finite", title="Model output not finite")
    if isinstance(exc, ModelDoesNotFitError):
        errors = [{"field": field, "message": message} for field, message in exc.problems]
        title = "Model does not fit the graph"
        return ValidationProblem(str(exc), slug="model-does-not-fit", title=title, errors=errors)
    if isinstance(exc, OutputsDifferError):  # at registration, or by the first audit of kept outputs
        match = exc.match
        detail = f"The model as read does not give its own outputs: {match.differing} of {match.nodes} nodes differ."
        return ValidationProblem(
            detail,
            slug="outputs-differ",
            title="The model does not give its outputs",
            errors=[{"field": "outputs", "message": str(exc)}],
            extensions={"outputs": encode(match)},
        )
    if isinstance(exc, ConfigError):
        return ValidationProblem(str(exc), slug="invalid-config", title="Invalid audit configuration")
    return ValidationProblem(str(exc), slug="invalid-input", title="Invalid input")
