"""The graph in the user's terms: the groups as ``attribute=value`` and the nodes by the user's own ids.

Every output that names a group or lists a node goes through here, so that an audit speaks of ``race=1`` and of
``user_id 725731259612196864`` (or of row 17 of the user's file) rather than of group 1 and node index 17.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from torch import Tensor

_COMPARISONS = ("=", "<", ">")


class Graph(Protocol):
    """What naming needs of :class:`bind_core.data.graph.Graph` (which uses this module: no import back)."""

    @property
    def group_names(self) -> tuple[str, ...]: ...
    @property
    def group_meanings(self) -> tuple[str, ...]: ...
    @property
    def sensitive(self) -> tuple[str, ...]: ...
    @property
    def node_ids(self) -> Tensor: ...
    @property
    def node_keys(self) -> tuple[str, ...]: ...
    @property
    def node_id_column(self) -> str | None: ...
    @property
    def num_groups(self) -> int: ...
    @property
    def class_names(self) -> tuple[str, ...]: ...


def group_label(graph: Graph, group: int) -> str:
    """The group in the user's terms: ``race=1``, ``age>=25`` (a bin), ``gender=F & age=young`` (an intersectional
    group), with its documented meaning in parentheses where the data's provenance gives one (``WHITE=1 (white)``).

    Args:
        graph: the graph.
        group: the group's code.

    Returns:
        The label.
    """
    value = group_value(graph, group)
    label = value
    if len(graph.sensitive) == 1 and not any(c in value for c in _COMPARISONS):
        label = f"{graph.sensitive[0]}={value}"
    meaning = graph.group_meanings[group] if group < len(graph.group_meanings) else ""
    return f"{label} ({meaning})" if meaning else label


def group_value(graph: Graph, group: int) -> str:
    """The group as the user's data writes it (``graph.group_names``: ``F``, ``age>=25``, ``gender=F & race=B``),
    the code as text where the graph names none (as the graph's ``summary().group_names``).

    Args:
        graph: the graph.
        group: the group's code.

    Returns:
        The name.
    """
    return graph.group_names[group] if group < len(graph.group_names) else str(group)


def class_value(graph: Graph, label: int) -> str:
    """The class as the user's data writes it (``graph.class_names``: ``approved``), the code as text where the graph
    names none (as the graph's ``summary().class_names``).

    Args:
        graph: the graph.
        label: the class's code.

    Returns:
        The name.
    """
    return graph.class_names[label] if 0 <= label < len(graph.class_names) else str(label)


def group_labels(graph: Graph) -> list[str]:
    """:func:`group_label` of every group ``0..G-1``."""
    return [group_label(graph, g) for g in range(graph.num_groups)]


def user_ids(graph: Graph, nodes: Iterable[int]) -> list[int | str]:
    """The user's ids of ``nodes`` (indices into the graph): the id column's values (integers, or text where the
    column holds text), else the rows' positions in the user's node table, counted from 0.

    Args:
        graph: the graph.
        nodes: node indices.

    Returns:
        One id per node, in order.
    """
    index = [int(v) for v in nodes]
    if graph.node_keys:
        return [graph.node_keys[v] for v in index]
    ids = graph.node_ids
    return [int(ids[v]) for v in index]


def id_legend(graph: Graph) -> str:
    """What the ids :func:`user_ids` gives are, in a phrase a reader of the output needs (``node_id`` columns and
    lists say it once)."""
    if graph.node_id_column is not None:
        return f"the values of the node table's column {graph.node_id_column!r}"
    return "row positions in the node table (or the arrays), counted from 0, the header row not counted"
