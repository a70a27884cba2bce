"""The synthetic biased-graph generator."""

from __future__ import annotations

import time

import pytest
import torch

from bind_core.data.datasets import synthetic
from bind_core.data.graph import Graph
from bind_core.errors import ConfigError


def _same(a: Graph, b: Graph) -> bool:
    fields = ("x", "edge_index", "y", "sens", "train_idx", "val_idx", "test_idx")
    return all(torch.equal(getattr(a, f), getattr(b, f)) for f in fields)


def _positive_rates(g: Graph, values: torch.Tensor) -> list[float]:
    test = g.test_idx
    return [float(values[test][g.sens[test] == k].float().mean()) for k in range(g.num_groups)]


def test_defaults_and_determinism() -> None:
    g = synthetic()
    assert g.name == "synthetic"
    assert (g.num_nodes, g.num_features, g.num_groups, g.num_classes) == (1000, 8, 2, 2)
    assert g.feature_names[-1] == "sens"
    assert 2500 <= g.num_edges <= 3000
    assert 0.25 * 1000 <= g.train_idx.numel() <= 0.5 * 1000 + 1
    assert float(g.x.min()) == -1.0 and float(g.x.max()) == 1.0
    assert _same(g, synthetic())
    assert not _same(g, synthetic(seed=1))


def test_fast() -> None:
    synthetic(seed=99)  # warm-up
    start = time.perf_counter()
    for seed in range(10):
        synthetic(seed=seed)
    assert (time.perf_counter() - start) / 10 < 0.1


def test_labels_depend_on_group() -> None:
    biased = synthetic(seed=3)
    rates = _positive_rates(biased, biased.y)
    assert rates[0] - rates[1] > 0.3  # about 0.75 vs 0.25
    fair = synthetic(seed=3, sens_label_corr=0.0)
    rates = _positive_rates(fair, fair.y)
    assert abs(rates[0] - rates[1]) < 0.15


def _two_hop_ridge_predictions(g: Graph) -> torch.Tensor:
    """SGC in closed form (two propagation steps, ridge regression): a cheap stand-in for a trained GCN."""
    n = g.num_nodes
    loops = torch.arange(n)
    ei = torch.cat([g.edge_index, torch.stack([loops, loops])], dim=1)
    deg = torch.bincount(ei[0], minlength=n).float()
    w = deg[ei[0]].rsqrt() * deg[ei[1]].rsqrt()

    def propagate(z: torch.Tensor) -> torch.Tensor:
        return torch.zeros_like(z).index_add_(0, ei[0], w[:, None] * z[ei[1]])

    h = propagate(propagate(g.x))
    h = torch.cat([h, torch.ones(n, 1)], dim=1)
    target = torch.nn.functional.one_hot(g.y, g.num_classes).float()
    a = h[g.train_idx]
    coef = torch.linalg.solve(a.T @ a + 1e-2 * torch.eye(a.shape[1]), a.T @ target[g.train_idx])
    return (h @ coef).argmax(dim=1)


def test_a_graph_model_inherits_the_bias() -> None:
    g = synthetic(seed=0)
    pred = _two_hop_ridge_predictions(g)
    accuracy = float((pred[g.test_idx] == g.y[g.test_idx]).float().mean())
    rates = _positive_rates(g, pred)
    assert accuracy > 0.8
    assert rates[0] - rates[1] > 0.1  # ΔSP of well over "several points"


def test_homophily() -> None:
    def same_group_share(h: float) -> float:
        g = synthetic(seed=1, homophily=h)
        s = g.sens[g.edge_index]
        return float((s[0] == s[1]).float().mean())

    assert same_group_share(0.9) > same_group_share(0.0) + 0.2


@pytest.mark.parametrize(
    "kwargs",
    [
        {"num_nodes": 32},
        {"num_nodes": 72, "num_groups": 3, "num_classes": 3},
        {"num_nodes": 500, "num_groups": 4},
        {"num_nodes": 300, "num_classes": 4, "sens_label_corr": 1.0},
        {"num_nodes": 64, "sens_label_corr": 1.0, "homophily": 1.0},
        {"num_nodes": 200, "avg_degree": 0.5, "sens_in_features": False, "num_features": 1},
        {"num_nodes": 3000, "train_per_class": 100},
    ],
)
def test_always_valid(kwargs: dict) -> None:
    for seed in range(15):
        g = synthetic(seed=seed, **kwargs)  # Graph validation would raise otherwise
        test = g.test_idx
        for group in range(g.num_groups):
            for label in range(g.num_classes):
                assert bool(((g.sens[test] == group) & (g.y[test] == label)).any())
    assert g.num_groups == kwargs.get("num_groups", 2)
    assert g.num_classes == kwargs.get("num_classes", 2)


def test_train_per_class() -> None:
    g = synthetic(num_nodes=3000, train_per_class=100)
    assert torch.bincount(g.y[g.train_idx]).tolist() == [100, 100]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"num_nodes": 31},
        {"num_groups": 1},
        {"num_classes": 1},
        {"sens_label_corr": 1.5},
        {"homophily": -0.1},
        {"avg_degree": 0.0},
        {"feature_signal": -1.0},
        {"num_features": 1},
    ],
)
def test_bad_arguments(kwargs: dict) -> None:
    with pytest.raises(ConfigError):
        synthetic(**kwargs)
