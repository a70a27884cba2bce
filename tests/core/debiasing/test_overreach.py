"""A debiasing estimate that lowers Γ by more than Γ itself is flagged, for node sets as for edge sets."""

from __future__ import annotations

import torch

from bind_core.data.datasets import synthetic
from bind_core.debiasing.debias import debias
from bind_core.debiasing.overreach import overreach
from bind_core.reporting.debiasing_view import backfire, debiasing_view
from bind_core.training.fit import TrainConfig, train


def test_overreach_flags_only_an_estimate_below_minus_gamma() -> None:
    assert overreach(-0.1, 0.2, "nodes") is None
    assert overreach(0.5, 0.2, "nodes") is None  # a rise is never impossible
    assert overreach(-0.3, None, "nodes") is None  # Γ undefined: nothing to compare with
    text = overreach(-25.7, 0.21, "nodes")
    assert text is not None and "nodes' estimates sum to -25.7000" in text and "Γ = 0.2100" in text


def test_a_node_set_whose_summed_estimate_exceeds_gamma_carries_the_caveat_into_the_report() -> None:
    graph = synthetic(200, seed=1, train_per_class=20)
    model = train(graph, TrainConfig(epochs=30))
    m = graph.train_idx.numel()
    modest = debias(model, graph, torch.full((m,), -1e-6, dtype=torch.float64), budgets=(0.1,))
    assert modest[0].caveat is None and modest[0].estimated_delta < 0
    absurd = debias(model, graph, torch.full((m,), -10.0, dtype=torch.float64), budgets=(0.1,))
    row = absurd[0]
    assert row.before.gamma is not None and row.estimated_delta < -row.before.gamma
    assert row.caveat is not None and "more than Γ" in row.caveat
    view = debiasing_view(absurd, row.before)
    assert view is not None
    caveats = view.caveats
    assert caveats[0] == f"10% of training nodes: {row.caveat}"
    assert caveats[1:] == (["10% of training nodes: " + backfire(row)] if row.backfired else [])
    # the modest set deletes the same nodes (equal estimates: the first by position), so only the overreach differs
    modest_view = debiasing_view(modest, modest[0].before)
    assert modest_view is not None and modest_view.caveats == caveats[1:]
