"""Which sensitive groups an audit measures.

A group is kept out of every fairness metric, Γ and the influence objective, while it stays in the per-group
breakdown (and a warning says why), when

* it has no node in the test split (an intersectional combination that occurs only among training or
  validation nodes): nothing of it can be measured;
* it has fewer test nodes than the audit's minimum group size (``min_group_size``);
* (binary labels) it has no positive (y = 1) test node: its true-positive rate, hence ΔEO and Γ_EO, is
  undefined.

:func:`exclusion_reasons` is the one rule; :func:`included_groups` is its complement.
"""

from __future__ import annotations

import torch

from bind_core.data.graph import Graph
from bind_core.data.labels import group_label
from bind_core.errors import ConfigError


def test_group_sizes(graph: Graph) -> list[int]:
    """Number of test nodes in each group ``0..G-1`` (:meth:`Graph.test_group_sizes`)."""
    return graph.test_group_sizes()


def test_group_positives(graph: Graph) -> list[int]:
    """Number of positive (y = 1) test nodes in each group ``0..G-1`` (:meth:`Graph.test_group_positives`)."""
    return graph.test_group_positives()


def exclusion_reasons(graph: Graph, min_size: int = 0) -> dict[int, str]:
    """``{group: why it is kept out of the metrics}`` for every excluded group (see the module docstring)."""
    return GroupCounts.of_graph(graph).exclusions(min_size)


class GroupCounts:
    """What the rule reads of a graph: each group's test nodes (``sizes``), positive test nodes (``positives``) and
    nodes (``members``), and whether the label is ``binary``; from a graph or from its stored summary."""

    def __init__(self, sizes: list[int], positives: list[int], members: list[int], binary: bool) -> None:
        self.sizes, self.positives, self.members, self.binary = sizes, positives, members, binary

    @classmethod
    def of_graph(cls, graph: Graph) -> GroupCounts:
        """The counts of ``graph``."""
        members = torch.bincount(graph.sens, minlength=graph.num_groups).tolist()
        return cls(test_group_sizes(graph), test_group_positives(graph), members, graph.num_classes == 2)

    def exclusions(self, min_size: int) -> dict[int, str]:
        """``{group: why it is kept out of the metrics}`` (the module docstring's rule)."""
        out: dict[int, str] = {}
        for g, size in enumerate(self.sizes):
            if size == 0:
                out[g] = f"absent from the test split ({self.members[g]} node(s) in the graph, none of them test nodes)"
            elif size < min_size:
                out[g] = f"{size} test node(s), fewer than min_group_size {min_size}"
            elif self.binary and self.positives[g] == 0:
                out[g] = (
                    f"no positive (y=1) test node among its {size}, so its true-positive rate (ΔEO, Γ_EO) is undefined"
                )
        return out

    def included(self, min_size: int) -> list[int]:
        """The groups kept (:func:`included_groups`).

        Raises:
            ConfigError: fewer than two groups remain.
        """
        excluded = self.exclusions(min_size)
        kept = [g for g in range(len(self.sizes)) if g not in excluded]
        if len(kept) < 2:
            raise ConfigError(
                f"min_group_size: {min_size} leaves {len(kept)} group(s) that can be measured on the test nodes "
                f"(test group sizes {self.sizes}, positives {self.positives}); at least two are needed"
            )
        return kept


def included_groups(graph: Graph, min_size: int = 0) -> list[int]:
    """The groups every metric, Γ and the influence objective are computed over (means over their pairs):
    those with at least ``min_size`` test nodes (and at least one), and, for binary labels, a positive one.

    Raises:
        ConfigError: fewer than two groups remain.
    """
    return GroupCounts.of_graph(graph).included(min_size)


def groups_arg(graph: Graph, groups: list[int] | None) -> list[int] | None:
    """``None`` when ``groups`` is every group (so callers keep the plain, all-groups path)."""
    if groups is None or len(groups) == graph.num_groups:
        return None
    return groups


def exclusion_warnings(graph: Graph, min_size: int) -> list[str]:
    """One warning per group kept out of the metrics, naming it and the reason."""
    return [
        f"group {group_label(graph, g)} is kept out of every fairness metric, Γ and the influence objective: "
        f"{reason}; it is still reported in the per-group breakdown"
        for g, reason in exclusion_reasons(graph, min_size).items()
    ]
