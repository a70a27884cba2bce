"""Vectorised bootstrap intervals: exact full-sample values, a known-answer coverage check, weighted AUC."""

from __future__ import annotations

import pytest
import torch

from bind_core.bootstrap import _weighted_auc, bootstrap_metrics, resample_weights
from bind_core.fairness import evaluate, roc_auc


def _sample(k: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    p1 = torch.rand(k, generator=gen, dtype=torch.float64)
    p1[::5] = 0.5  # ties
    y = (torch.rand(k, generator=gen) < p1).long()
    sens = (torch.rand(k, generator=gen) < 0.4).long()
    return torch.stack([1 - p1, p1], dim=1), y, sens


def test_full_sample_estimates_equal_the_metrics() -> None:
    proba, y, sens = _sample(500, 0)
    intervals = bootstrap_metrics(proba, y, sens, resamples=50)
    report = evaluate(proba, y, sens).to_dict()
    for name, interval in intervals.items():
        assert interval.estimate == pytest.approx(report[name], abs=1e-12), name
        assert interval.low <= interval.high


def test_weighted_auc_equals_auc_of_the_expanded_sample() -> None:
    proba, y, _ = _sample(60, 1)
    w = resample_weights(60, 5, seed=3)
    got = _weighted_auc(w, proba[:, 1], y)
    for b in range(5):
        idx = torch.repeat_interleave(torch.arange(60), w[b].long())
        assert float(got[b]) == pytest.approx(roc_auc(y[idx], proba[idx]), abs=1e-12)


def test_accuracy_interval_covers_the_truth_about_as_often_as_it_says() -> None:
    # Known answer: each prediction is right with probability 0.7, so the true accuracy is 0.7.
    k, trials, hits = 300, 200, 0
    for t in range(trials):
        gen = torch.Generator().manual_seed(1000 + t)
        y = torch.randint(0, 2, (k,), generator=gen)
        y[:4] = torch.tensor([0, 1, 0, 1])  # both groups hold both labels
        right = torch.rand(k, generator=gen) < 0.7
        p1 = torch.where(right == (y == 1), 0.9, 0.1).double()
        sens = torch.arange(k) % 2
        ci = bootstrap_metrics(torch.stack([1 - p1, p1], 1), y, sens, resamples=200, seed=t)["accuracy"]
        hits += ci.low <= 0.7 <= ci.high
    assert 0.88 <= hits / trials <= 0.99


def test_resamples_are_seeded() -> None:
    assert torch.equal(resample_weights(10, 4, seed=1), resample_weights(10, 4, seed=1))
    assert resample_weights(10, 4, seed=1).sum(1).eq(10).all()
