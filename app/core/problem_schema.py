"""The RFC 9457 problem document, as declared in the OpenAPI schema."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from app.core.errors import PROBLEM_CONTENT_TYPE


class FieldError(BaseModel):
    field: str
    """Dotted path of the offending input, e.g. ``model.hidden`` or ``nodes``."""
    message: str
    file: str | None = None
    """For an error in an uploaded file: the file's name as the client sent it."""
    rows: list[int] | None = None
    """Up to five offending rows, 1-based as a spreadsheet shows them (the header is row 1)."""
    values: list[str] | None = None
    """The offending values at those rows."""
    count: int | None = None
    """How many rows are at fault in all."""


class Problem(BaseModel):
    """An RFC 9457 problem: every 4xx and 5xx answer has this shape."""

    model_config = ConfigDict(extra="allow")

    type: str
    title: str
    status: int
    detail: str | None = None
    instance: str | None = None
    errors: list[FieldError] | None = None


_DESCRIPTIONS = {
    400: "Bad request (malformed body or page token)",
    401: "Missing or invalid API key",
    404: "No such resource (or it belongs to another tenant)",
    409: "Conflict with the resource's current state",
    413: "Upload larger than the configured limit",
    415: "Unsupported media type",
    422: "Validation error, with field errors",
    429: "Rate limit of the API key, or the tenant's limit of queued audits, exceeded (see Retry-After)",
    500: "Internal server error (no details are given)",
    503: "A dependency (database or broker) is unreachable",
}


def problem_schemas() -> dict[str, Any]:
    """The component schemas the ``$ref`` in :func:`problem_responses` points to."""
    schema = Problem.model_json_schema(ref_template="#/components/schemas/{model}")
    defs = schema.pop("$defs", {})
    return {"Problem": schema, **defs}


def problem_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` entries declaring problem+json bodies for ``statuses``."""
    return {
        status: {
            "description": _DESCRIPTIONS.get(status, "Problem"),
            "content": {PROBLEM_CONTENT_TYPE: {"schema": {"$ref": "#/components/schemas/Problem"}}},
        }
        for status in statuses
    }
