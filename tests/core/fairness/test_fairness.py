"""Metric values on small hand-computed cases, and the exact W1 against SciPy."""

from __future__ import annotations

import pytest
import torch
from scipy.stats import wasserstein_distance

from bind_core.fairness.metrics import (
    GroupPDD,
    delta_eo,
    delta_sp,
    evaluate,
    f1_score,
    gamma,
    gamma_eo,
    gamma_sp,
    pdd,
    roc_auc,
    wasserstein_1d,
)


@pytest.mark.parametrize(("n", "m", "seed"), [(1, 1, 0), (3, 5, 1), (7, 7, 2), (100, 37, 3), (250, 1, 4)])
def test_wasserstein_matches_scipy(n: int, m: int, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    a = torch.rand(n, generator=gen, dtype=torch.float64)
    b = torch.rand(m, generator=gen, dtype=torch.float64) * 0.5 + 0.3
    assert float(wasserstein_1d(a, b)) == pytest.approx(wasserstein_distance(a.numpy(), b.numpy()), abs=1e-12)


def test_wasserstein_hand_case_and_ties() -> None:
    a = torch.tensor([0.0, 1.0], dtype=torch.float64)
    b = torch.tensor([0.5], dtype=torch.float64)
    assert float(wasserstein_1d(a, b)) == pytest.approx(0.5)
    same = torch.tensor([0.2, 0.2, 0.9], dtype=torch.float64)
    assert float(wasserstein_1d(same, same.flip(0))) == 0.0


def test_wasserstein_batched_equals_loop() -> None:
    gen = torch.Generator().manual_seed(0)
    a, b = torch.rand(4, 9, generator=gen, dtype=torch.float64), torch.rand(4, 5, generator=gen, dtype=torch.float64)
    batched = wasserstein_1d(a, b)
    assert torch.allclose(batched, torch.stack([wasserstein_1d(x, y) for x, y in zip(a, b, strict=True)]))


def test_wasserstein_gradient_matches_finite_differences() -> None:
    gen = torch.Generator().manual_seed(1)
    a = torch.rand(6, generator=gen, dtype=torch.float64, requires_grad=True)
    b = torch.rand(4, generator=gen, dtype=torch.float64)
    assert torch.autograd.gradcheck(lambda t: wasserstein_1d(t, b), (a,))


def test_group_gaps_hand_computed() -> None:
    y_true = torch.tensor([1, 1, 0, 0, 1, 1, 0, 0])
    y_pred = torch.tensor([1, 1, 1, 0, 1, 0, 0, 0])
    sens = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1])
    # P(ŷ=1|s=0) = 3/4, P(ŷ=1|s=1) = 1/4; among y=1: 2/2 vs 1/2.
    assert delta_sp(y_pred, sens) == pytest.approx(0.5)
    assert delta_eo(y_true, y_pred, sens) == pytest.approx(0.5)
    # tp=3, fp=1, fn=1 → F1 = 6/8.
    assert f1_score(y_true, y_pred) == pytest.approx(0.75)


def test_multigroup_gap_is_mean_over_pairs() -> None:
    y_pred = torch.tensor([1, 1, 0, 0, 1, 0])
    sens = torch.tensor([0, 0, 1, 1, 2, 2])  # rates 1, 0, 0.5 → pairs 1, 0.5, 0.5
    assert delta_sp(y_pred, sens) == pytest.approx(2 / 3)


def test_roc_auc_hand_case_with_ties() -> None:
    y = torch.tensor([0, 0, 1, 1])
    p1 = torch.tensor([0.1, 0.4, 0.35, 0.8])
    proba = torch.stack([1 - p1, p1], dim=1)
    assert roc_auc(y, proba) == pytest.approx(0.75)
    tied = torch.full((4, 2), 0.5)
    assert roc_auc(y, tied) == pytest.approx(0.5)


def test_pdd_is_mean_pairwise_w1() -> None:
    scores = torch.tensor([0.1, 0.2, 0.6, 0.7, 0.9], dtype=torch.float64)
    sens = torch.tensor([0, 0, 1, 1, 2])
    pairs = [(0, 1), (0, 2), (1, 2)]
    expected = sum(float(wasserstein_1d(scores[sens == a], scores[sens == b])) for a, b in pairs) / 3
    assert float(pdd(scores, sens)) == pytest.approx(expected)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_group_pdd_equals_the_pairwise_loop_exactly(dtype: torch.dtype) -> None:
    """GroupPDD (grids made once, each group sorted once) gives pdd's very numbers: the same sums in the same order,
    over a subset of the nodes, a batch of score vectors and a choice of groups."""
    gen = torch.Generator().manual_seed(3)
    sens = torch.randint(0, 3, (301,), generator=gen)
    subset = torch.rand(301, generator=gen) > 0.4
    scores = torch.rand(4, 301, generator=gen, dtype=torch.float64).to(dtype)

    def loop(s: torch.Tensor, mask: torch.Tensor, groups: list[int]) -> torch.Tensor:
        pairs = [(a, b) for a in groups for b in groups if a < b]
        return torch.stack(
            [wasserstein_1d(s[..., mask & (sens == a)], s[..., mask & (sens == b)]) for a, b in pairs]
        ).mean(0)

    everyone = torch.ones(301, dtype=torch.bool)
    assert torch.equal(GroupPDD(sens)(scores[0]), loop(scores[0], everyone, [0, 1, 2]))
    assert torch.equal(GroupPDD(sens, subset=subset)(scores), loop(scores, subset, [0, 1, 2]))
    assert torch.equal(GroupPDD(sens, groups=[0, 2])(scores), loop(scores, everyone, [0, 2]))
    assert torch.equal(pdd(scores[1], sens), GroupPDD(sens)(scores[1]))
    assert float(GroupPDD(sens, groups=[1])(scores[0])) == 0.0  # one group: no pair (pdd's convention)


def test_gammas_and_evaluate_are_consistent() -> None:
    gen = torch.Generator().manual_seed(0)
    p1 = torch.rand(40, generator=gen, dtype=torch.float64)
    proba = torch.stack([1 - p1, p1], dim=1)
    y = (torch.rand(40, generator=gen) > 0.5).long()
    sens = torch.arange(40) % 2
    g_sp = float(gamma_sp(proba, sens))
    g_eo = float(gamma_eo(proba, y, sens))
    assert g_sp == pytest.approx(wasserstein_distance(p1[sens == 0].numpy(), p1[sens == 1].numpy()))
    pos = y == 1
    assert g_eo == pytest.approx(wasserstein_distance(p1[pos & (sens == 0)].numpy(), p1[pos & (sens == 1)].numpy()))
    report = evaluate(proba, y, sens, lam=0.3)
    assert report.gamma == pytest.approx(0.3 * g_sp + 0.7 * g_eo)
    assert float(gamma(proba, y, sens, lam=0.3)) == pytest.approx(report.gamma)


def test_multiclass_gamma_uses_exact_transport_and_is_differentiable() -> None:
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(30, 3, generator=gen, dtype=torch.float64, requires_grad=True)
    proba = torch.softmax(logits, dim=1)
    y = torch.arange(30) % 3
    sens = (torch.arange(30) // 3) % 2
    value = gamma(proba, y, sens)
    value.backward()
    assert float(value) > 0
    assert logits.grad is not None and torch.isfinite(logits.grad).all()
