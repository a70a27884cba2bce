"""Size limits on user-supplied graphs, checked before and after reading."""

from __future__ import annotations

from dataclasses import dataclass

from bind_core.errors import GraphValidationError


def check_limit(field: str, what: str, count: int, limit: int | None) -> None:
    """Raise if ``count`` exceeds ``limit`` (``None`` means unlimited).

    Args:
        field: the field named in the error (``"nodes"``, ``"edges"``...).
        what: what is counted, for the message (``"rows"``, ``"columns"``...).
        count: the measured count.
        limit: the maximum allowed, or ``None``.

    Raises:
        GraphValidationError: ``count > limit``.
    """
    if limit is not None and count > limit:
        raise GraphValidationError(field, f"{count} {what} exceed the limit of {limit}")


@dataclass(frozen=True)
class Limits:
    """The limits of one upload, ``None`` for none: nodes, edges, columns, and what a compressed file may unpack to."""

    nodes: int | None
    edges: int | None
    columns: int | None
    unpacked_bytes: int | None
