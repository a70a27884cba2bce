"""Which sensitive groups an audit measures: a minimum group size keeps small groups out of every fairness
metric, Γ and the influence objective, while they stay in the per-group breakdown (and a warning says so)."""

from __future__ import annotations

import torch

from bind_core.errors import ConfigError
from bind_core.graph import Graph


def test_group_sizes(graph: Graph) -> list[int]:
    """Number of test nodes in each group ``0..G-1``."""
    return torch.bincount(graph.sens[graph.test_idx], minlength=graph.num_groups).tolist()


def group_name(graph: Graph, group: int) -> str:
    """The group's name (the value, or the combination of values, it stands for), or its code as text."""
    return graph.group_names[group] if graph.group_names else str(group)


def included_groups(graph: Graph, min_size: int = 0) -> list[int]:
    """The groups with at least ``min_size`` test nodes: the ones every metric, Γ and the influence
    objective are computed over (means over their pairs).

    Raises:
        ConfigError: fewer than two groups reach ``min_size``.
    """
    sizes = test_group_sizes(graph)
    kept = [g for g, size in enumerate(sizes) if size >= min_size]
    if len(kept) < 2:
        raise ConfigError(
            f"min_group_size: {min_size} leaves {len(kept)} group(s) with enough test nodes "
            f"(test group sizes {sizes}); at least two are needed"
        )
    return kept


def groups_arg(graph: Graph, groups: list[int] | None) -> list[int] | None:
    """``None`` when ``groups`` is every group (so callers keep the plain, all-groups path)."""
    if groups is None or len(groups) == graph.num_groups:
        return None
    return groups


def exclusion_warnings(graph: Graph, min_size: int) -> list[str]:
    """One warning per group below ``min_size`` test nodes, naming it and its size."""
    out = []
    for g, size in enumerate(test_group_sizes(graph)):
        if size < min_size:
            out.append(
                f"group {g} ({group_name(graph, g)}) has {size} test nodes, fewer than min_group_size {min_size}: "
                "it is reported in the per-group breakdown but kept out of every fairness metric, Γ and the "
                "influence objective"
            )
    return out
