"""Edge debiasing checked against chance: planted harmful edges beat random edges; a random ranking does not."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from planted_graphs import planted_cross_group_edges

from bind_core.debiasing.edge_debias import debias_edges, harmful_edges
from bind_core.errors import ConfigError
from bind_core.influence.edges import estimate_edges
from bind_core.training.fit import TrainConfig, train

SEEDS = (1, 10, 100)
CONFIG = TrainConfig(epochs=200, seed=0)


@pytest.mark.heavy  # 6 s here
def test_deleting_the_harmful_edges_beats_deleting_random_edges() -> None:
    graph, planted = planted_cross_group_edges()
    model = train(graph, CONFIG)
    result = estimate_edges(model, graph)
    out = debias_edges(model, graph, result, (0.05,), SEEDS, random_sets=3, resamples=300)
    row = out.budgets[0]
    assert out.pool == int(result.affects.sum()) and set(out.baselines) == {str(s) for s in SEEDS}
    assert row.requested == round(0.05 * out.pool) and 0 < row.deleted <= row.requested
    # the deleted edges are the most harmful by the estimate, mostly the planted cross-group ones
    chosen = result.edges[harmful_edges(result, row.requested)]
    assert row.cross_group == int((graph.sens[chosen[:, 0]] != graph.sens[chosen[:, 1]]).sum())
    assert sum((u, v) in planted for u, v in chosen.tolist()) >= 0.5 * row.deleted
    assert row.selected is not None and row.estimated < 0 and row.selected.mean < 0
    assert (row.caveat is None) == (row.estimated >= -result.gamma["total"])
    assert row.after == pytest.approx(row.before + row.selected.mean)
    assert row.beats_random and row.reduces_bias, row.verdict
    assert row.advantage is not None and row.yardstick is not None and row.advantage > 2 * row.yardstick
    # the mean change over the seeds with its interval over the test nodes: clear of 0, the figures' own
    assert row.change is not None and row.change.gamma is not None and row.change.resamples == 300
    assert row.change.gamma.estimate == pytest.approx(row.selected.mean, abs=1e-12)
    assert row.change.gamma.low <= row.change.gamma.estimate <= row.change.gamma.high < 0


@pytest.mark.heavy  # 7 s here
def test_a_random_ranking_is_not_reported_as_beating_random_edges() -> None:
    graph, _ = planted_cross_group_edges()
    model = train(graph, CONFIG)
    result = estimate_edges(model, graph)
    noise = -torch.rand(result.delta.shape, generator=torch.Generator().manual_seed(5), dtype=result.delta.dtype)
    shuffled = dataclasses.replace(result, delta=torch.where(result.affects, noise, torch.zeros_like(noise)))
    row = debias_edges(model, graph, shuffled, (0.05,), SEEDS, random_sets=3).budgets[0]
    assert not row.beats_random, row.verdict


def test_budgets_are_fractions_and_an_empty_selection_says_why() -> None:
    graph, _ = planted_cross_group_edges()
    model = train(graph, TrainConfig(epochs=20, seed=0))
    result = estimate_edges(model, graph)
    with pytest.raises(ConfigError):
        debias_edges(model, graph, result, (1.5,), SEEDS)
    helpful = dataclasses.replace(result, delta=result.delta.abs() + 1e-9)
    row = debias_edges(model, graph, helpful, (0.01,), SEEDS, resamples=50).budgets[0]
    assert row.deleted == 0 and row.selected is None and row.after is None and row.change is None
    assert row.reason is not None and "harmful" in row.reason
