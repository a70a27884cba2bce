"""What can be told of an audit from its graph's stored summary, before the graph is loaded: whether its
``min_group_size`` leaves two groups to measure (:class:`~bind_core.data.groups.GroupCounts`). A service checks this
before it queues the audit, so that the answer comes at once rather than as a failed audit."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bind_core.codec import encode
from bind_core.data.groups import GroupCounts
from bind_core.data.records import GraphSummary


def check_measurable_groups(summary: GraphSummary | Mapping[str, Any], min_group_size: int) -> None:
    """Refuse a ``min_group_size`` that leaves fewer than two groups measurable on the graph's test nodes.

    Args:
        summary: the graph's summary (:meth:`~bind_core.data.graph.Graph.summary`), or its JSON.
        min_group_size: the audit's.

    Raises:
        ConfigError: fewer than two groups remain (the message the audit itself would fail with).
    """
    doc = encode(summary) if isinstance(summary, GraphSummary) else summary  # a stored one may hold more keys
    sizes, positives = doc.get("test_group_sizes"), doc.get("test_group_positives")
    if sizes is None or positives is None:  # a summary stored before it held its test nodes per group
        return  # the audit checks it when it starts
    counts = GroupCounts(list(sizes), list(positives), list(doc["group_sizes"]), int(doc["classes"]) == 2)
    counts.included(min_group_size)
