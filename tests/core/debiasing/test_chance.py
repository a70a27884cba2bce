"""Debiasing checked against chance: a planted harmful cluster is found, a random pick is not called a win."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from bind_core.data.datasets import synthetic
from bind_core.data.graph import Graph
from bind_core.debiasing.chance import against_random, seed_baselines, verdict
from bind_core.debiasing.debias import debias
from bind_core.debiasing.nodesets import select
from bind_core.errors import ConfigError
from bind_core.influence import estimate
from bind_core.training.fit import TrainConfig, train

SEEDS = (1, 10, 100)
CONFIG = TrainConfig(epochs=150, lr=0.01)


def _planted() -> Graph:
    """Labels independent of the group, except in a planted cluster of 40 training nodes labelled by group."""
    g = synthetic(500, seed=4, sens_label_corr=0.0, train_per_class=100)
    gen = torch.Generator().manual_seed(0)
    cluster = g.train_idx[torch.randperm(g.train_idx.numel(), generator=gen)[:40]]
    y = g.y.clone()
    y[cluster] = (g.sens[cluster] == 0).long()
    return dataclasses.replace(g, y=y)


@pytest.mark.heavy  # 8 s here
def test_deleting_a_planted_harmful_cluster_beats_deleting_random_nodes() -> None:
    g = _planted()
    model = train(g, CONFIG)
    influence = estimate(model, g)
    rows = debias(model, g, influence.delta, budgets=(10,), chance_seeds=SEEDS, random_sets=3)
    check = rows[0].against_random
    assert check is not None and check.selected is not None and check.random is not None
    assert check.seeds == list(SEEDS) and check.size == rows[0].deleted > 0
    assert len(check.selected.effects) == 3 and len(check.random.sets) == 3
    assert check.beats_random and check.reduces_bias
    assert check.advantage is not None and check.yardstick is not None
    assert check.advantage > 2 * check.yardstick >= 2 * check.noise_floor and check.selected.mean < 0
    assert check.verdict.startswith("deleting the selected nodes reduces bias more than deleting random nodes")


def test_a_random_selection_is_not_reported_as_beating_random_deletion() -> None:
    g = synthetic(500, seed=4, sens_label_corr=0.0, train_per_class=100)
    model = train(g, CONFIG)
    scores = -torch.rand(g.train_idx.numel(), generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    nodes = select(scores, g, 30, "harmful")
    baselines = seed_baselines(model, g, SEEDS)
    check = against_random(model, g, nodes, baselines, random_sets=2)
    assert not check.beats_random
    assert "not" in check.verdict


def test_the_check_needs_three_seeds_and_handles_an_empty_selection() -> None:
    g = synthetic(200, seed=1)
    model = train(g, TrainConfig(epochs=20))
    with pytest.raises(ConfigError):
        seed_baselines(model, g, (1, 2))
    empty = against_random(model, g, torch.tensor([], dtype=torch.long), {1: 0.1, 2: 0.2, 3: 0.15})
    assert empty.selected is None and empty.beats_random is None and empty.reason
    assert "no effect beyond the noise" in verdict(-0.001, 0.0, 0.01, beats=False, reduces=False)


def test_a_selection_that_raises_bias_is_said_to_do_so_not_to_have_no_effect() -> None:
    # Income's one-layer GCN, 5% of the edges by the edge estimate: Γ rose by 0.091 against random sets' −0.001
    said = verdict(0.0913, -0.0009, 0.0066, beats=False, reduces=False, items="edges", increases=True)
    assert said.startswith("deleting the selected edges increases bias") and "no effect" not in said
