"""The per-group picture of a trained model on the test nodes: the audit's breakdown and probability histograms."""

from __future__ import annotations

import torch

from bind_core.data.graph import Graph
from bind_core.data.groups import exclusion_reasons
from bind_core.data.labels import group_label
from bind_core.fairness.records import GroupMetrics, Histograms
from bind_core.training.fit import TrainedModel


def probability_histograms(model: TrainedModel, graph: Graph, bins: int = 20) -> Histograms:
    """Each group's histogram of P(y=1) over the test nodes (all, and those with y=1): the picture behind PDD."""
    test = graph.test_idx
    score = model.predict_proba(graph, test).double()[:, -1]
    y, s = graph.y[test], graph.sens[test]
    edges = torch.linspace(0, 1, bins + 1, dtype=torch.float64)

    def hist(mask: torch.Tensor) -> list[int]:
        return torch.histc(score[mask], bins=bins, min=0.0, max=1.0).long().tolist()

    return Histograms(
        bin_edges=edges.tolist(),
        all={str(g): hist(s == g) for g in range(graph.num_groups)},
        positives={str(g): hist((s == g) & (y == 1)) for g in range(graph.num_groups)},
    )


def group_breakdown(model: TrainedModel, graph: Graph, min_group_size: int = 0) -> list[GroupMetrics]:
    """Per sensitive group on the test nodes: name, size, positive-prediction rate, TPR, mean P(y=1), accuracy,
    whether the metrics include it (``included``, see :func:`bind_core.data.groups.included_groups`) and, when not,
    why (``excluded_reason``, else ``None``)."""
    excluded = exclusion_reasons(graph, min_group_size)
    test = graph.test_idx
    proba = model.predict_proba(graph, test).double()
    pred, y, s = proba.argmax(1), graph.y[test], graph.sens[test]
    rows = []
    for grp in range(graph.num_groups):
        mask = s == grp
        pos = mask & (y == 1)
        rows.append(
            GroupMetrics(
                group=grp,
                name=group_label(graph, grp),
                size=int(mask.sum()),
                included=grp not in excluded,
                excluded_reason=excluded.get(grp),
                positive_rate=float((pred[mask] == 1).double().mean()) if mask.any() else None,
                tpr=float((pred[pos] == 1).double().mean()) if pos.any() else None,
                mean_probability=float(proba[mask, -1].mean()) if mask.any() else None,
                accuracy=float((pred[mask] == y[mask]).double().mean()) if mask.any() else None,
            )
        )
    return rows
