"""Bootstrap confidence intervals for the utility and fairness metrics, all resamples at once.

A bootstrap resample of ``k`` test nodes is a vector of multiplicities ``w`` (how often each node was drawn,
summing to ``k``). Every metric here is a function of weighted counts, so ``B`` resamples become a ``[B, k]``
weight matrix and each metric a few tensor operations over it, with no Python loop over resamples:

* accuracy, F1, ΔSP, ΔEO: weighted sums of indicator vectors;
* ROC-AUC: with the scores sorted once, the weighted number of negatives below each positive is a cumulative
  sum (ties count one half);
* Γ_SP, Γ_EO: the 1-D Wasserstein-1 distance between weighted empirical distributions,
  ``W1 = Σ_i |F_a(x_i) − F_b(x_i)|·(x_{i+1} − x_i)`` over the sorted values, i.e. cumulative sums again.

Intervals are percentile intervals. Binary labels only (the metrics' multi-class forms are not resampled).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import torch
from torch import Tensor

from bind_core.errors import ConfigError

METRICS = ("accuracy", "auc", "f1", "delta_sp", "delta_eo", "gamma_sp", "gamma_eo")


@dataclass(frozen=True)
class Interval:
    estimate: float
    low: float
    high: float

    def to_dict(self) -> dict[str, float]:
        return {"estimate": self.estimate, "low": self.low, "high": self.high}


def resample_weights(k: int, resamples: int, *, seed: int = 0) -> Tensor:
    """Multiplicities ``[B, k]`` (float64) of ``B`` bootstrap resamples of ``k`` items."""
    gen = torch.Generator().manual_seed(seed)
    draws = torch.randint(0, k, (resamples, k), generator=gen)
    weights = torch.zeros(resamples, k, dtype=torch.float64)
    return weights.scatter_add_(1, draws, torch.ones_like(draws, dtype=torch.float64))


def _safe_div(a: Tensor, b: Tensor) -> Tensor:
    return torch.where(b > 0, a / b.clamp(min=1e-300), torch.full_like(a, float("nan")))


def _rate_gap(w: Tensor, hit: Tensor, sens: Tensor, groups: list[int]) -> Tensor:
    rates = [_safe_div((w * (hit & (sens == g))).sum(1), (w * (sens == g)).sum(1)) for g in groups]
    gaps = [(a - b).abs() for a, b in itertools.combinations(rates, 2)]
    return torch.stack(gaps).mean(0)


def _weighted_w1(w: Tensor, scores: Tensor, sens: Tensor, groups: list[int]) -> Tensor:
    order = torch.argsort(scores)
    x, ws, s = scores[order], w[:, order], sens[order]
    dx = torch.diff(x)  # [k-1]
    cdfs = []
    for g in groups:
        wg = ws * (s == g)
        cdfs.append(_safe_div(torch.cumsum(wg, 1), wg.sum(1, keepdim=True)))
    dists = [((a - b).abs()[:, :-1] * dx).sum(1) for a, b in itertools.combinations(cdfs, 2)]
    return torch.stack(dists).mean(0)


def _weighted_auc(w: Tensor, scores: Tensor, y: Tensor) -> Tensor:
    order = torch.argsort(scores)
    x, ws, pos = scores[order], w[:, order], y[order] == 1
    neg_w = ws * ~pos
    # Weighted negatives strictly below, and tied with, each item (ties: same score value).
    _, inverse, counts = torch.unique_consecutive(x, return_inverse=True, return_counts=True)
    group_neg = torch.zeros(w.shape[0], counts.numel(), dtype=w.dtype).index_add_(1, inverse, neg_w)
    below = torch.cumsum(group_neg, 1) - group_neg
    wins = (ws * pos) * (below[:, inverse] + 0.5 * group_neg[:, inverse])
    return _safe_div(wins.sum(1), (ws * pos).sum(1) * neg_w.sum(1))


def bootstrap_metrics(
    proba: Tensor,
    y: Tensor,
    sens: Tensor,
    *,
    resamples: int = 1000,
    level: float = 0.95,
    seed: int = 0,
    groups: list[int] | None = None,
) -> dict[str, Interval]:
    """Percentile bootstrap intervals (resampling nodes) for :data:`METRICS`.

    Args:
        proba: ``[k, 2]`` class probabilities of the evaluated (test) nodes.
        y, sens: ``[k]`` labels and groups.
        resamples: number of bootstrap resamples ``B``.
        level: coverage of the interval, e.g. 0.95.
        groups: the fairness metrics are means over pairs of these groups (default: all present).

    Returns:
        ``{metric: Interval(estimate on the full sample, low, high)}``; metrics are fractions in [0, 1].
    """
    if proba.ndim != 2 or proba.shape[1] != 2:
        raise ConfigError("bootstrap intervals need binary labels (proba of shape [k, 2])")
    if not 0 < level < 1 or resamples < 2:
        raise ConfigError("level must be in (0, 1) and resamples >= 2")
    k = y.numel()
    weights = torch.cat([torch.ones(1, k, dtype=torch.float64), resample_weights(k, resamples, seed=seed)])
    values = _metrics(weights, proba.double()[:, 1], y, sens, groups)
    alpha = (1 - level) / 2
    out = {}
    for name, v in values.items():
        boot = v[1:][~torch.isnan(v[1:])]
        if boot.numel() == 0:
            out[name] = Interval(float(v[0]), float("nan"), float("nan"))
            continue
        lo, hi = torch.quantile(boot, torch.tensor([alpha, 1 - alpha], dtype=torch.float64)).tolist()
        out[name] = Interval(float(v[0]), lo, hi)
    return out


def _metrics(w: Tensor, score: Tensor, y: Tensor, sens: Tensor, only: list[int] | None) -> dict[str, Tensor]:
    pred = score > 0.5
    truth = y == 1
    groups = sorted(set(sens.tolist()) & (set(only) if only is not None else set(sens.tolist())))
    tp = (w * (pred & truth)).sum(1)
    fp = (w * (pred & ~truth)).sum(1)
    fn = (w * (~pred & truth)).sum(1)
    pos_mask = truth
    return {
        "accuracy": (w * (pred == truth)).sum(1) / w.sum(1),
        "auc": _weighted_auc(w, score, y),
        "f1": _safe_div(2 * tp, 2 * tp + fp + fn),
        "delta_sp": _rate_gap(w, pred, sens, groups),
        "delta_eo": _rate_gap(w[:, pos_mask], pred[pos_mask], sens[pos_mask], groups),
        "gamma_sp": _weighted_w1(w, score, sens, groups),
        "gamma_eo": _weighted_w1(w[:, pos_mask], score[pos_mask], sens[pos_mask], groups),
    }
