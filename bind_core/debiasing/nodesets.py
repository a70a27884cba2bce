"""Node sets with non-overlapping computation graphs (the paper's Theorem 3).

When the computation graphs of the deleted training nodes are disjoint, the influence of deleting the set is
the sum of the members' influences (no member's deletion changes another's loss or the same test node). Here
the computation graph of a node is its ``L``-hop neighbourhood (``L`` = the model's layers), and two nodes
*overlap* when those neighbourhoods intersect, i.e. when they are within ``2L`` hops of each other.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import torch
from torch import Tensor
from torch_geometric.utils import k_hop_subgraph

from bind_core.data.graph import Graph
from bind_core.errors import ConfigError


def _ball(graph: Graph, node: int, hops: int, rowptr: Tensor) -> Tensor:
    """The ``hops``-hop neighbourhood of ``node``, itself included."""
    if hops == 0:
        return torch.tensor([node])
    if hops == 1:
        return torch.cat([torch.tensor([node]), graph.edge_index[1, rowptr[node] : rowptr[node + 1]]])
    return cast(Tensor, k_hop_subgraph(node, hops, graph.edge_index, num_nodes=graph.num_nodes)[0])


def resolve_budget(budget: float, num_train: int) -> int:
    """A budget as a count (``>= 1``) or a fraction of the training set (``0 < b < 1``) → a node count (at least 1).
    A count above the training set is refused (:func:`check_budgets`), not cut to it."""
    if budget <= 0:
        raise ConfigError(f"budget: {budget!r} must be positive (a count, or a fraction below 1)")
    check_budgets((budget,), num_train)
    count = round(budget * num_train) if budget < 1 else int(budget)
    return max(1, count)


def check_budgets(budgets: Sequence[float], num_train: int) -> None:
    """:class:`ConfigError` naming ``budgets`` when a count (``>= 1``) is more than the ``num_train`` training nodes."""
    over = [b for b in budgets if b >= 1 and b > num_train]
    if over:
        raise ConfigError(
            f"budgets: {', '.join(f'{b:g}' for b in over)} {'is' if len(over) == 1 else 'are'} more than the "
            f"{num_train} training nodes (a budget is a fraction below 1, or a count from 1 to {num_train})"
        )


def select(
    influence: Tensor,
    graph: Graph,
    budget: float,
    direction: str = "harmful",
    *,
    hops: int = 1,
) -> Tensor:
    """The most harmful (or helpful) training nodes whose computation graphs do not overlap.

    Greedy in the order of the estimate: take the next node unless its ``hops``-hop neighbourhood meets that
    of a node already taken; stop at the budget or when the candidates run out (the set may then be smaller).

    Args:
        influence: estimated ΔΓ per training node, aligned with ``graph.train_idx`` (negative = harmful).
        budget: a count (``>= 1``) or a fraction of the training set (``0 < budget < 1``).
        direction: ``"harmful"`` (most negative ΔΓ first; only nodes with ΔΓ < 0) or ``"helpful"`` (most
            positive first; only ΔΓ > 0).
        hops: the model's number of message-passing layers; ``0`` allows overlapping computation graphs (the
            top of the ranking; for a set estimated as a whole).

    Returns:
        Node indices (into the graph), int64, in the order they were chosen.
    """
    if direction not in ("harmful", "helpful"):
        raise ConfigError(f"direction: {direction!r} is not one of harmful, helpful")
    if influence.shape != graph.train_idx.shape:
        raise ConfigError("influence must have one value per training node")
    k = resolve_budget(budget, graph.train_idx.numel())
    sign = 1.0 if direction == "harmful" else -1.0
    order = torch.argsort(sign * influence.double())
    rowptr = torch.zeros(graph.num_nodes + 1, dtype=torch.long)
    rowptr[1:] = torch.cumsum(graph.degree, 0)
    covered = torch.zeros(graph.num_nodes, dtype=torch.bool)
    chosen: list[int] = []
    for pos in order.tolist():
        if sign * float(influence[pos]) >= 0:
            break
        node = int(graph.train_idx[pos])
        ball = _ball(graph, node, hops, rowptr)
        if bool(covered[ball].any()):
            continue
        covered[ball] = True
        chosen.append(node)
        if len(chosen) == k:
            break
    return torch.tensor(chosen, dtype=torch.long)
