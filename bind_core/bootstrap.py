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

For speed the nodes are sorted by score once and the resamples drawn for the sorted nodes (the bootstrap's
distribution does not depend on the nodes' order), so no resample is ever permuted; every count is one matrix
product of the weights with a fixed indicator matrix; the resamples run in float32 in chunks (weights are
small integers, exact in float32) while the full-sample estimate is computed in float64.
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


def resample_weights(k: int, resamples: int, *, seed: int = 0, dtype: torch.dtype = torch.float64) -> Tensor:
    """Multiplicities ``[B, k]`` of ``B`` bootstrap resamples of ``k`` items."""
    return _draw(k, resamples, torch.Generator().manual_seed(seed), dtype)


def _draw(k: int, resamples: int, gen: torch.Generator, dtype: torch.dtype) -> Tensor:
    draws = torch.randint(0, k, (resamples, k), generator=gen)
    weights = torch.zeros(resamples, k, dtype=dtype)
    return weights.scatter_add_(1, draws, torch.ones(1, 1, dtype=dtype).expand(resamples, k))


def _safe_div(a: Tensor, b: Tensor) -> Tensor:
    return torch.where(b > 0, a / b.clamp(min=1e-30), torch.full_like(a, float("nan")))


def _pair_mean(values: list[Tensor]) -> Tensor:
    return torch.stack([(a - b).abs() for a, b in itertools.combinations(values, 2)]).mean(0)


class _Sorted:
    """The evaluated nodes sorted by score, with everything the metrics need that does not depend on ``w``."""

    def __init__(self, score: Tensor, y: Tensor, sens: Tensor, groups: list[int]) -> None:
        self.groups = groups
        self.score = score
        pred, truth = score > 0.5, y == 1
        member = torch.stack([sens == g for g in groups])  # [G, k]
        columns = [torch.ones_like(pred), pred == truth, pred & truth, pred & ~truth, ~pred & truth, ~truth]
        columns += [*member, *(member & pred), *(member & truth), *(member & pred & truth)]
        self.indicators = torch.stack(columns, dim=1).double()  # [k, 6 + 4G]
        self.member = member.double()
        self.pos = torch.nonzero(truth).flatten()
        self.neg = (~truth).double()
        self.dx = torch.diff(score)
        self.dx_pos = torch.diff(score[self.pos])
        _, inverse, counts = torch.unique_consecutive(score, return_inverse=True, return_counts=True)
        ends = torch.cumsum(counts, 0)
        self.first = (ends - counts)[inverse][self.pos]  # first and last index of each positive's tie block
        self.last = (ends - 1)[inverse][self.pos]

    def metrics(self, w: Tensor) -> dict[str, Tensor]:
        dt = w.dtype
        counts = w @ self.indicators.to(dt)  # [B, 6 + 4G]
        total, correct, tp, fp, fn, negatives = counts[:, :6].unbind(1)
        size, pred_pos, true_pos, hits = counts[:, 6:].reshape(w.shape[0], 4, -1).unbind(1)  # each [B, G]
        wp = w[:, self.pos]
        member_pos = self.member[:, self.pos]
        return {
            "accuracy": correct / total,
            "auc": self._auc(w, wp, total - negatives, negatives),
            "f1": _safe_div(2 * tp, 2 * tp + fp + fn),
            "delta_sp": _pair_mean(list(_safe_div(pred_pos, size).unbind(1))),
            "delta_eo": _pair_mean(list(_safe_div(hits, true_pos).unbind(1))),
            "gamma_sp": _w1(w, self.member.to(dt), size, self.dx.to(dt)),
            "gamma_eo": _w1(wp, member_pos.to(dt), true_pos, self.dx_pos.to(dt)),
        }

    def _auc(self, w: Tensor, wp: Tensor, positives: Tensor, negatives: Tensor) -> Tensor:
        neg_w = w * self.neg.to(w.dtype)
        upto = torch.cumsum(neg_w, 1)  # weighted negatives at or below each position
        below = upto[:, self.first] - neg_w[:, self.first]
        wins = (wp * 0.5 * (below + upto[:, self.last])).sum(1)  # ties count one half
        return _safe_div(wins, positives * negatives)


def _w1(w: Tensor, member: Tensor, size: Tensor, dx: Tensor) -> Tensor:
    """Mean over group pairs of ``Σ_i |F_a(x_i) − F_b(x_i)|·(x_{i+1} − x_i)`` (weighted empirical CDFs)."""
    cdfs = [_safe_div(torch.cumsum(w * m, 1)[:, :-1], size[:, g : g + 1]) for g, m in enumerate(member)]
    return torch.stack([(a - b).abs() @ dx for a, b in itertools.combinations(cdfs, 2)]).mean(0)


def _weighted_auc(w: Tensor, scores: Tensor, y: Tensor) -> Tensor:
    """Weighted ROC-AUC of each row of ``w`` (any node order)."""
    order = torch.argsort(scores, stable=True)
    sorted_ = _Sorted(scores[order], y[order], torch.zeros_like(y), [0])
    wo = w[:, order]
    positives = (wo * (y[order] == 1)).sum(1)
    return sorted_._auc(wo, wo[:, sorted_.pos], positives, wo.sum(1) - positives)


def bootstrap_metrics(
    proba: Tensor,
    y: Tensor,
    sens: Tensor,
    *,
    resamples: int = 1000,
    level: float = 0.95,
    seed: int = 0,
    groups: list[int] | None = None,
    chunk_bytes: int = 64 << 20,
) -> dict[str, Interval]:
    """Percentile bootstrap intervals (resampling nodes) for :data:`METRICS`.

    Args:
        proba: ``[k, 2]`` class probabilities of the evaluated (test) nodes.
        y, sens: ``[k]`` labels and groups.
        resamples: number of bootstrap resamples ``B``.
        level: coverage of the interval, e.g. 0.95.
        groups: the fairness metrics are means over pairs of these groups (default: all present).
        chunk_bytes: about the most memory one chunk of resamples may take.

    Returns:
        ``{metric: Interval(estimate on the full sample, low, high)}``; metrics are fractions in [0, 1].
    """
    if proba.ndim != 2 or proba.shape[1] != 2:
        raise ConfigError("bootstrap intervals need binary labels (proba of shape [k, 2])")
    if not 0 < level < 1 or resamples < 2:
        raise ConfigError("level must be in (0, 1) and resamples >= 2")
    k = y.numel()
    score = proba.double()[:, 1]
    order = torch.argsort(score, stable=True)
    present = set(sens.tolist())
    chosen = sorted(present & set(groups)) if groups is not None else sorted(present)
    if len(chosen) < 2:
        raise ConfigError(f"bootstrap intervals need two groups, got {chosen}")
    nodes = _Sorted(score[order], y[order], sens[order], chosen)
    full = nodes.metrics(torch.ones(1, k, dtype=torch.float64))
    gen = torch.Generator().manual_seed(seed)
    step = max(1, min(resamples, chunk_bytes // (4 * k * (len(chosen) + 4))))
    parts = [nodes.metrics(_draw(k, min(step, resamples - s), gen, torch.float32)) for s in range(0, resamples, step)]
    alpha = (1 - level) / 2
    out = {}
    for name in METRICS:
        v = torch.cat([p[name] for p in parts]).double()
        boot = v[~torch.isnan(v)]
        if boot.numel() == 0:
            out[name] = Interval(float(full[name][0]), float("nan"), float("nan"))
            continue
        lo, hi = torch.quantile(boot, torch.tensor([alpha, 1 - alpha], dtype=torch.float64)).tolist()
        out[name] = Interval(float(full[name][0]), lo, hi)
    return out
