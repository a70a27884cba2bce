"""The check against chance's retrainings in forked processes (:func:`bind_core.forks.each_self_seeded`): the same
values as one at a time, bit for bit, torch's generator left as it was, progress in order, and the chance rule's
sharing of the cost."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import torch
from planted_graphs import planted_cross_group_edges

from bind_core.data.datasets import synthetic
from bind_core.debiasing.chance import against_random, seed_baselines
from bind_core.debiasing.debias import debias
from bind_core.debiasing.edge_debias import debias_edges
from bind_core.influence.edges import estimate_edges
from bind_core.models.gnn import ModelConfig
from bind_core.pipeline.audit import AuditConfig, run_audit
from bind_core.pipeline.chance_rule import chance_decision
from bind_core.training.fit import TrainConfig, train

SEEDS = (1, 10, 100)
CONFIG = TrainConfig(epochs=60, lr=0.01)


@pytest.fixture(autouse=True)
def forked(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Forking allowed here (a test process may hold idle threads that earlier tests left, which the rule counts:
    ``bind_core.forks.fork_is_safe``), and the forked runs counted, so that a test can tell that forks did the work."""
    import bind_core.forks as forks
    import bind_core.threads as threads

    assert torch.get_num_threads() == 1  # the part of the rule that matters for the children (tests/conftest.py)
    for module in (forks, threads):
        monkeypatch.setattr(module, "fork_is_safe", lambda: True)
    runs: list[int] = []
    each = forks.each_in_forks

    def counted(units: Any, work: Any, put: Any, states: Any) -> None:
        runs.append(len(units))
        each(units, work, put, states)

    monkeypatch.setattr(forks, "each_in_forks", counted)
    monkeypatch.setattr(threads, "each_in_forks", counted)
    return runs


@pytest.mark.heavy  # retrains 15–30 models twice
def test_forked_retrainings_equal_one_at_a_time_and_leave_the_generator_as_it_was(forked: list[int]) -> None:
    g = synthetic(300, seed=4, train_per_class=60)
    model = train(g, CONFIG, ModelConfig(layers=2, hidden=8))
    nodes = g.train_idx[:12]
    torch.manual_seed(123)
    state = torch.get_rng_state()
    one = seed_baselines(model, g, SEEDS)
    check_one = against_random(model, g, nodes, one, random_sets=2)
    assert torch.equal(torch.get_rng_state(), state)  # one at a time, the generator is restored too
    assert forked == []
    seen: list[float] = []
    two = seed_baselines(model, g, SEEDS, processes=2, hold=lambda: seen.append(0.0))
    check_two = against_random(model, g, nodes, two, random_sets=2, processes=3, progress=seen.append)
    assert torch.equal(torch.get_rng_state(), state)
    assert forked == [3, 9]  # three baselines, then (1 + 2 sets) × 3 seeds
    assert two == one
    assert check_two == check_one
    fractions = seen[3:]
    assert len(seen[:3]) == 3 and fractions == sorted(fractions) and fractions[-1] == 1.0  # one per retraining


@pytest.mark.heavy  # retrains 15–30 models twice
def test_an_audit_with_processes_equals_one_process(forked: list[int]) -> None:
    """The whole audit, chance check and validation included: the same results, whatever runs them."""
    g = synthetic(240, seed=5, train_per_class=40)
    config = AuditConfig.from_dict(
        {
            "model": {"layers": 2, "hidden": 6},
            "training": {"epochs": 40},
            "budgets": [0.1],
            "debias_seeds": list(SEEDS),
            "debias_random_sets": 2,
            "validation_sample": 6,
            "bootstrap": 0,
        }
    )
    one = run_audit(g, config)
    assert forked == []
    two = run_audit(g, config, deletion_threads=2)
    assert len(forked) >= 4  # the deletions, the baselines, the budget's check, the validation
    assert one.debiasing is not None and two.debiasing is not None and one.debiasing[0].against_random is not None
    for row_one, row_two in zip(one.debiasing, two.debiasing, strict=True):
        assert dataclasses.replace(row_one, seconds=0.0) == dataclasses.replace(row_two, seconds=0.0)
    assert one.influence is not None and two.influence is not None
    torch.testing.assert_close(one.influence.delta, two.influence.delta, rtol=0, atol=0, equal_nan=True)
    assert one.validation is not None and two.validation is not None
    assert dataclasses.replace(one.validation, seconds=0.0) == dataclasses.replace(two.validation, seconds=0.0)


def test_the_chance_rule_shares_the_cost_over_the_processes() -> None:
    g = synthetic(120, seed=1)
    model = train(g, TrainConfig(epochs=20))
    retrains = 4 * 3 + 3  # one budget, 3 random sets and the set, 3 seeds; and the 3 baselines
    seconds = float(model.history.seconds) + float(model.stationarity.seconds)
    config = AuditConfig.from_dict({"budgets": [0.1], "chance_seconds": retrains * seconds * 0.75})
    assert chance_decision(model, config)[0] == ()  # one process: over the allowance
    seeds, rule = chance_decision(model, config, processes=2)
    assert seeds and rule is not None and "/ 2 processes" in rule


def test_edge_debiasing_in_processes_equals_one_process(forked: list[int]) -> None:
    graph, _ = planted_cross_group_edges()
    model = train(graph, TrainConfig(epochs=40, seed=0))
    result = estimate_edges(model, graph)
    one = debias_edges(model, graph, result, (0.05,), SEEDS, random_sets=2, resamples=100)
    two = debias_edges(model, graph, result, (0.05,), SEEDS, random_sets=2, processes=2, resamples=100)
    assert one.budgets[0].selected is not None and one.budgets[0].change is not None and len(forked) == 2
    assert one == two


def test_the_debiasings_own_retrainings_in_processes_equal_one_process(forked: list[int]) -> None:
    """The unchanged graph and each budget's graph, retrained at once: the same rows, and the same models handed to
    ``keep`` in order, as one at a time."""
    g = synthetic(300, seed=4, train_per_class=60)
    model = train(g, CONFIG, ModelConfig(layers=2, hidden=8))
    delta = torch.linspace(1.0, -1.0, int(g.train_idx.numel()), dtype=torch.float64)
    kept: dict[int, list[tuple[int, torch.Tensor]]] = {1: [], 2: []}
    seen: list[float] = []

    def run(processes: int) -> list[Any]:
        def keep(i: int, trained: Any) -> None:
            kept[processes].append((i, torch.cat([p.detach().flatten() for p in trained.module.parameters()])))

        return debias(
            model,
            g,
            delta,
            budgets=(5, 10),
            retrain=dataclasses.replace(CONFIG, polish=False),
            keep=keep,
            processes=processes,
            progress=(lambda _stage, f: seen.append(f)) if processes == 2 else None,
        )

    one = run(1)
    assert forked == []
    two = run(2)
    assert forked == [3]  # the unchanged graph and the two budgets' graphs
    assert [dataclasses.replace(r, seconds=0.0) for r in one] == [dataclasses.replace(r, seconds=0.0) for r in two]
    assert [i for i, _ in kept[1]] == [i for i, _ in kept[2]] == [0, 1]
    assert all(torch.equal(a, b) for (_, a), (_, b) in zip(kept[1], kept[2], strict=True))
    assert seen == sorted(seen) and seen[-1] == 1.0
