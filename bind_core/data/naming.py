"""The graph in the user's terms, as :meth:`bind_core.data.graph.Graph.build` takes it: column names, group and class
values, the id column and text ids (:class:`Naming`), normalised to the graph's fields (:func:`named`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict, cast

__all__ = ["Naming", "named"]


class Naming(TypedDict, total=False):
    """The graph in the user's terms, as :meth:`Graph.build` takes it (each key as the :class:`Graph` attribute of
    the same name; any sequence of strings for the tuples)."""

    feature_names: Sequence[str]
    name: str
    group_names: Sequence[str]
    sensitive: Sequence[str]
    group_meanings: Sequence[str]
    node_id_column: str | None
    node_keys: Sequence[str]
    label_name: str
    class_names: Sequence[str]


_TEXTS = ("feature_names", "group_names", "sensitive", "group_meanings", "node_keys", "class_names")


class _Names(TypedDict, total=False):
    """:class:`Naming` as :class:`Graph`'s fields take it (the sequences as tuples of strings)."""

    feature_names: tuple[str, ...]
    name: str
    group_names: tuple[str, ...]
    sensitive: tuple[str, ...]
    group_meanings: tuple[str, ...]
    node_id_column: str | None
    node_keys: tuple[str, ...]
    label_name: str
    class_names: tuple[str, ...]


def named(naming: Naming) -> _Names:
    """``naming`` as :class:`Graph`'s fields: the sequences as tuples of strings, the rest as given."""
    given: dict[str, object] = dict(naming)
    out = {k: tuple(str(v) for v in cast("Sequence[object]", given[k])) if k in _TEXTS else given[k] for k in given}
    return cast("_Names", out)
