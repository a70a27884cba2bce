"""The per-group picture of a trained model on the test nodes: the audit's breakdown and probability histograms."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from bind_core.data.graph import Graph
from bind_core.data.groups import exclusion_reasons
from bind_core.data.labels import group_label
from bind_core.fairness.records import GroupMetrics, Histograms
from bind_core.training.fit import TrainedModel


def probability_histograms(model: TrainedModel, graph: Graph, bins: int = 20) -> Histograms:
    """Each group's histogram of P(y=1) over the test nodes (all, and those with y=1): the picture behind PDD. With
    more than two classes, of the last class's probability (all, and those of the last class)."""
    test = graph.test_idx
    proba = model.predict_proba(graph, test).double()
    score, last = proba[:, -1], int(proba.shape[1]) - 1
    y, s = graph.y[test], graph.sens[test]
    edges = torch.linspace(0, 1, bins + 1, dtype=torch.float64)

    def hist(mask: torch.Tensor) -> list[int]:
        return torch.histc(score[mask], bins=bins, min=0.0, max=1.0).long().tolist()

    return Histograms(
        bin_edges=edges.tolist(),
        all={str(g): hist(s == g) for g in range(graph.num_groups)},
        positives={str(g): hist((s == g) & (y == last)) for g in range(graph.num_groups)},
    )


def group_breakdown(model: TrainedModel, graph: Graph, min_group_size: int = 0) -> list[GroupMetrics]:
    """Per sensitive group on the test nodes: name, size, positive-prediction rate, TPR, mean P(y=1), accuracy,
    whether the metrics include it (``included``, see :func:`bind_core.data.groups.included_groups`) and, when not,
    why (``excluded_reason``, else ``None``)."""
    excluded = exclusion_reasons(graph, min_group_size)
    test = graph.test_idx
    proba = model.predict_proba(graph, test).double()
    pred, y, s = proba.argmax(1), graph.y[test], graph.sens[test]
    last = int(proba.shape[1]) - 1  # the positive class of a binary label; the last class of more
    rows = []
    for grp in range(graph.num_groups):
        mask = s == grp
        pos = mask & (y == last)
        rows.append(
            GroupMetrics(
                group=grp,
                name=group_label(graph, grp),
                size=int(mask.sum()),
                included=grp not in excluded,
                excluded_reason=excluded.get(grp),
                positive_rate=float((pred[mask] == last).double().mean()) if mask.any() else None,
                tpr=float((pred[pos] == last).double().mean()) if pos.any() else None,
                mean_probability=float(proba[mask, -1].mean()) if mask.any() else None,
                accuracy=float((pred[mask] == y[mask]).double().mean()) if mask.any() else None,
                **(_per_class(pred[mask], y[mask], last + 1) if last > 1 and mask.any() else {}),
            )
        )
    return rows


def _per_class(pred: Tensor, y: Tensor, classes: int) -> dict[str, Any]:
    """A group's ``class_rates``, ``class_counts`` and ``class_tprs`` (more than two classes) from its test nodes'
    predictions and labels."""
    rates = [float((pred == c).double().mean()) for c in range(classes)]
    counts = [int((y == c).sum()) for c in range(classes)]
    tprs = [float((pred[y == c] == c).double().mean()) if counts[c] else None for c in range(classes)]
    return {"class_rates": rates, "class_counts": counts, "class_tprs": tprs}
