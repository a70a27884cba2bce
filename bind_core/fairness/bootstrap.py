"""Bootstrap confidence intervals for the utility and fairness metrics, all resamples at once.

A bootstrap resample of ``k`` test nodes is a vector of multiplicities ``w`` (how often each node was drawn,
summing to ``k``). Every metric here is a function of weighted counts, so ``B`` resamples become a ``[B, k]``
weight matrix and each metric a few tensor operations over it, with no Python loop over resamples (only over
the classes and the pairs of groups):

* accuracy, F1, ΔSP, ΔEO: weighted sums of indicator vectors, all of them one matrix product;
* ROC-AUC: with a class's scores sorted once, the weighted number of negatives below each positive is a
  cumulative sum (ties count one half);
* Γ_SP, Γ_EO: the 1-D Wasserstein-1 distance between weighted empirical distributions,
  ``W1 = Σ_i |F_a(x_i) − F_b(x_i)|·(x_{i+1} − x_i)`` over the sorted values, i.e. cumulative sums again.

Each resample's value is exactly what :mod:`bind_core.fairness.metrics` gives on the resampled nodes (the node
repeated as often as it was drawn), for binary and multi-class labels and any number of groups:

* binary labels: F1 of class 1, AUC of P(y=1), ΔSP and ΔEO on ŷ=1, Γ_SP and Γ_EO on P(y=1) (Γ_EO over the
  positives);
* multi-class labels: accuracy; macro F1; macro one-vs-rest AUC (classes without positives or negatives in
  the resample skipped); ΔSP and ΔEO the mean over classes c of the gap in P(ŷ=c | s) and P(ŷ=c | y=c, s);
  Γ_EO the mean over classes c of the W1 between the groups' P(c) over the nodes with y=c. **Γ_SP is not
  resampled**: for more than two classes it is an exact optimal transport between probability vectors (one
  linear program per pair of groups), which has no closed form to vectorise; its interval is NaN.
* several groups: ΔSP, ΔEO, Γ_SP and Γ_EO are the mean over pairs of groups; a group absent from a resample
  (or, for ΔEO and Γ_EO, from its nodes of the class) is skipped in that resample, as the metrics skip it.
* a resample that leaves fewer than two groups to compare (for ΔEO and Γ_EO: a group with positives lost all
  of them) does not define the metric: it is NaN there, as :func:`bind_core.fairness.metrics.evaluate` gives, never 0.

Intervals are percentile intervals over the resamples that define the metric; ``Interval.dropped`` counts the
others. (Counting them as 0, "perfectly fair", pinned ΔEO's lower bound at 0 for a group with 3 positive test
nodes: about 43 resamples in 1000 draw none of them.)

For speed the nodes are put in one base order (binary labels: sorted by P(y=1), so Γ_SP, Γ_EO and the AUC
need no permutation at all) and the resamples drawn for that order (the bootstrap's distribution does not
depend on the nodes' order); another class's sorted order is one gather of the weights. The resamples run in
float32 in chunks (weights are small integers, exact in float32) while the full-sample estimate is computed
in float64.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from bind_core.errors import ConfigError
from bind_core.fairness import records
from bind_core.fairness.metrics import gamma_sp as exact_gamma_sp
from bind_core.models.gnn import require_finite

METRICS = ("accuracy", "auc", "f1", "delta_sp", "delta_eo", "gamma_sp", "gamma_eo")
NOT_RESAMPLED_MULTICLASS = ("gamma_sp",)
"""Metrics without bootstrap intervals for more than two classes (exact OT between probability vectors)."""


@dataclass(frozen=True)
class Interval:
    """A metric on the full sample and its percentile interval over the resamples that define it; ``dropped``
    resamples did not (NaN bounds when none did, or when the metric is not resampled)."""

    estimate: float
    low: float
    high: float
    dropped: int = 0

    def record(self) -> records.Interval:
        """The interval as the results record it: a NaN (undefined, or not resampled) is ``None``.

        Returns:
            The :class:`~bind_core.fairness.records.Interval`.
        """
        return records.Interval(
            estimate=_or_none(self.estimate), low=_or_none(self.low), high=_or_none(self.high), dropped=self.dropped
        )


def _or_none(value: float) -> float | None:
    return None if math.isnan(value) else value


def resample_weights(k: int, resamples: int, *, seed: int = 0, dtype: torch.dtype = torch.float64) -> Tensor:
    """Multiplicities ``[B, k]`` of ``B`` bootstrap resamples of ``k`` items."""
    return _draw(k, resamples, torch.Generator().manual_seed(seed), dtype)


def _draw(k: int, resamples: int, gen: torch.Generator, dtype: torch.dtype) -> Tensor:
    draws = torch.randint(0, k, (resamples, k), generator=gen)
    weights = torch.zeros(resamples, k, dtype=dtype)
    return weights.scatter_add_(1, draws, torch.ones(1, 1, dtype=dtype).expand(resamples, k))


def _safe_div(a: Tensor, b: Tensor) -> Tensor:
    return torch.where(b > 0, a / b.clamp(min=1e-30), torch.full_like(a, float("nan")))


class _Pairs:
    """The pairs ``(a, b)``, ``a < b``, of ``G`` groups, and the mean of a per-pair value over the valid pairs."""

    def __init__(self, num_groups: int) -> None:
        self.a, self.b = torch.triu_indices(num_groups, num_groups, 1)

    def mean_gap(self, values: Tensor, present: Tensor) -> Tensor:
        """Mean over pairs of groups both present of ``|values_a − values_b|``; NaN without such a pair.
        ``values``, ``present``: ``[B, G]`` → ``[B]``."""
        gap = (values[:, self.a] - values[:, self.b]).abs()
        return self.mean(gap, present[:, self.a] & present[:, self.b])

    @staticmethod
    def mean(per_pair: Tensor, valid: Tensor) -> Tensor:
        """Mean over the valid pairs (``[B, P]`` → ``[B]``), NaN where none is valid (undefined, as
        :func:`bind_core.fairness.metrics.evaluate` says)."""
        count = valid.sum(1)
        total = torch.where(valid, per_pair, torch.zeros_like(per_pair)).sum(1)
        return torch.where(count > 0, total / count.clamp(min=1), torch.full_like(total, float("nan")))


class _Column:
    """One class's scores, sorted, with what its AUC and W1 need; ``perm`` takes base order to sorted order."""

    def __init__(self, score: Tensor, is_class: Tensor, member: Tensor, perm: Tensor | None) -> None:
        self.perm = perm
        if perm is not None:
            score, is_class, member = score[perm], is_class[perm], member[:, perm]
        self.pos = torch.nonzero(is_class).flatten()
        self.neg = (~is_class).double()
        _, inverse, counts = torch.unique_consecutive(score, return_inverse=True, return_counts=True)
        ends = torch.cumsum(counts, 0)
        self.first = (ends - counts)[inverse][self.pos]  # first and last index of each positive's tie block
        self.last = (ends - 1)[inverse][self.pos]
        self.dx = torch.diff(score)
        self.member = member.double()  # [G, k]
        self.dx_pos = torch.diff(score[self.pos])
        self.member_pos = self.member[:, self.pos]  # [G, k_c]

    def weights(self, w: Tensor) -> Tensor:
        return w if self.perm is None else w[:, self.perm]

    def auc(self, w: Tensor, total: Tensor) -> Tensor:
        """Weighted one-vs-rest ROC-AUC of this class (NaN without positives or negatives)."""
        wp = w[:, self.pos]
        neg_w = w * self.neg.to(w.dtype)
        upto = torch.cumsum(neg_w, 1)  # weighted negatives at or below each position
        below = upto[:, self.first] - neg_w[:, self.first]
        wins = (wp * 0.5 * (below + upto[:, self.last])).sum(1)  # ties count one half
        positives = wp.sum(1)
        return _safe_div(wins, positives * (total - positives))

    def w1(self, w: Tensor, pairs: _Pairs, *, positives_only: bool) -> Tensor:
        """Mean over pairs of groups (both present) of the W1 between their weighted distributions of the
        class's score, over all nodes or over the nodes of the class."""
        member, dx = (self.member_pos, self.dx_pos) if positives_only else (self.member, self.dx)
        if positives_only:
            w = w[:, self.pos]
        member = member.to(w.dtype)
        size = w @ member.T  # [B, G]
        cdfs = [_safe_div(torch.cumsum(w * m, 1)[:, :-1], size[:, g : g + 1]) for g, m in enumerate(member)]
        dx = dx.to(w.dtype)
        if dx.numel() == 0:
            per_pair = torch.zeros(w.shape[0], pairs.a.numel(), dtype=w.dtype)
        else:
            per_pair = torch.stack(
                [(cdfs[a] - cdfs[b]).abs() @ dx for a, b in zip(pairs.a.tolist(), pairs.b.tolist(), strict=True)], 1
            )
        present = size > 0
        return pairs.mean(per_pair, present[:, pairs.a] & present[:, pairs.b])


class _Resampler:
    """The evaluated nodes in base order, with everything the metrics need that does not depend on ``w``."""

    def __init__(self, proba: Tensor, y: Tensor, sens: Tensor, groups: list[int]) -> None:
        num_classes = proba.shape[1]
        self.binary = num_classes == 2
        self.classes = [1] if self.binary else list(range(num_classes))
        self.num_groups = len(groups)
        self.pairs = _Pairs(self.num_groups)
        pred = proba.argmax(1)
        member = torch.stack([sens == g for g in groups])  # [G, k]
        columns = [torch.ones_like(pred, dtype=torch.bool), pred == y]
        for c in self.classes:
            columns += [(pred == c) & (y == c), (pred == c) & (y != c), (pred != c) & (y == c)]
        columns += list(member)
        for c in self.classes:
            columns += [*(member & (pred == c)), *(member & (y == c)), *(member & (pred == c) & (y == c))]
        self.indicators = torch.stack(columns, dim=1).double()  # [k, 2 + 3C' + G + 3C'G]
        self.columns = []
        for c in self.classes:
            score = proba[:, c]
            order = torch.argsort(score, stable=True)
            identity = bool(torch.equal(order, torch.arange(order.numel())))
            self.columns.append(_Column(score, y == c, member, None if identity else order))

    def metrics(self, w: Tensor) -> dict[str, Tensor]:
        """Every metric of every resample: ``w: [B, k]`` (base order) → ``{metric: [B]}``."""
        dt, num_groups, nc = w.dtype, self.num_groups, len(self.classes)
        counts = w @ self.indicators.to(dt)
        total, correct = counts[:, 0], counts[:, 1]
        tp, fp, fn = counts[:, 2 : 2 + 3 * nc].reshape(-1, nc, 3).unbind(2)  # each [B, C']
        size = counts[:, 2 + 3 * nc : 2 + 3 * nc + num_groups]  # [B, G]
        per_class = counts[:, 2 + 3 * nc + num_groups :].reshape(-1, nc, 3, num_groups)
        predicted, true, hits = per_class.unbind(2)  # each [B, C', G]
        denominator = 2 * tp + fp + fn
        f1 = torch.where(denominator > 0, 2 * tp / denominator.clamp(min=1e-30), torch.zeros_like(tp))
        weighted = [column.weights(w) for column in self.columns]
        aucs = torch.stack([column.auc(wc, total) for column, wc in zip(self.columns, weighted, strict=True)], 1)
        out = {
            "accuracy": correct / total,
            "auc": aucs[:, 0] if self.binary else torch.nanmean(aucs, 1),
            "f1": f1.mean(1),
            "delta_sp": torch.stack(
                [self.pairs.mean_gap(_safe_div(predicted[:, i], size), size > 0) for i in range(nc)], 1
            ).mean(1),
            "delta_eo": torch.stack(
                [self.pairs.mean_gap(_safe_div(hits[:, i], true[:, i]), true[:, i] > 0) for i in range(nc)], 1
            ).mean(1),
            "gamma_eo": torch.stack(
                [c.w1(wc, self.pairs, positives_only=True) for c, wc in zip(self.columns, weighted, strict=True)], 1
            ).mean(1),
        }
        if self.binary:
            out["gamma_sp"] = self.columns[0].w1(weighted[0], self.pairs, positives_only=False)
        return out


def _chosen_groups(sens: Tensor, groups: list[int] | None) -> list[int]:
    present = set(sens.tolist())
    chosen = sorted(present & {int(g) for g in groups}) if groups is not None else sorted(present)
    if len(chosen) < 2:
        raise ConfigError(f"bootstrap intervals need two groups, got {chosen}")
    return chosen


def _check(proba: Tensor, y: Tensor, sens: Tensor) -> None:
    if proba.ndim != 2 or proba.shape[1] < 2 or proba.shape[0] != y.numel() or sens.shape != y.shape:
        raise ConfigError(
            f"bootstrap intervals need proba [k, C >= 2] and y, sens [k]; got {list(proba.shape)}, "
            f"{list(y.shape)}, {list(sens.shape)}"
        )
    require_finite(proba)


def resample_metrics(
    proba: Tensor, y: Tensor, sens: Tensor, weights: Tensor, *, groups: list[int] | None = None
) -> dict[str, Tensor]:
    """Every metric on each of the resamples ``weights: [B, k]`` (multiplicities of the nodes in the given
    order): ``{metric: [B]}``, equal to :func:`bind_core.fairness.metrics.evaluate` on the resampled nodes (multi-class
    labels: no ``gamma_sp``, see the module docstring)."""
    _check(proba, y, sens)
    order, nodes = _in_base_order(proba.detach().double(), y, sens, _chosen_groups(sens, groups))
    return nodes.metrics(weights[:, order])


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
    lam: float | None = None,
) -> dict[str, Interval]:
    """Percentile bootstrap intervals (resampling nodes) for :data:`METRICS`, and for Γ with ``lam``.

    Args:
        proba: ``[k, C]`` class probabilities of the evaluated (test) nodes, ``C >= 2``.
        y, sens: ``[k]`` labels and groups.
        resamples: number of bootstrap resamples ``B``.
        level: coverage of the interval, e.g. 0.95.
        groups: the fairness metrics are means over pairs of these groups (default: all present).
        chunk_bytes: about the most memory one chunk of resamples may take.
        lam: Γ's weighting of Γ_SP: with it, ``gamma`` too, ``λ·Γ_SP + (1 − λ)·Γ_EO`` on each resample (for more
            than two classes the exact value and NaN bounds, as Γ_SP's).

    Returns:
        ``{metric: Interval(estimate on the full sample, low, high, dropped)}``; metrics are fractions in
        [0, 1]. The estimates equal :func:`bind_core.fairness.metrics.evaluate`'s (NaN where it is undefined). The
        bounds are over the resamples that define the metric; ``dropped`` counts the rest. For more than two
        classes ``gamma_sp`` has NaN bounds (:data:`NOT_RESAMPLED_MULTICLASS`).

    Raises:
        ConfigError: bad shapes, level or resamples, or fewer than two groups.
        NonFiniteError: ``proba`` holds NaN or inf.
    """
    _check(proba, y, sens)
    _check_settings(level, resamples)
    k = y.numel()
    proba = proba.detach().double()
    chosen = _chosen_groups(sens, groups)
    _, nodes = _in_base_order(proba, y, sens, chosen)
    full = nodes.metrics(torch.ones(1, k, dtype=torch.float64))
    gen = torch.Generator().manual_seed(seed)
    step = _chunk(resamples, k, len(chosen), proba.shape[1], chunk_bytes)
    parts = [nodes.metrics(_draw(k, min(step, resamples - s), gen, torch.float32)) for s in range(0, resamples, step)]
    out = {}
    for name in METRICS:
        if name not in full:  # not resampled: the exact value, no interval
            out[name] = Interval(float(exact_gamma_sp(proba, sens, groups=chosen)), float("nan"), float("nan"))
            continue
        out[name] = _percentile(float(full[name][0]), torch.cat([p[name] for p in parts]), level)
    if lam is not None:
        out["gamma"] = _gamma(out, parts, lam, level)
    return out


def _gamma(found: dict[str, Interval], parts: list[dict[str, Tensor]], lam: float, level: float) -> Interval:
    """Γ = λ·Γ_SP + (1 − λ)·Γ_EO on the full sample (``found``) and on each resample (``parts``' values); NaN bounds
    where Γ_SP is not resampled (more than two classes)."""
    sp, eo = found["gamma_sp"], found["gamma_eo"]
    estimate = lam * sp.estimate + (1 - lam) * eo.estimate
    if any("gamma_sp" not in p for p in parts):  # Γ_SP not resampled: no interval for Γ either
        return Interval(estimate, float("nan"), float("nan"))
    resampled = [torch.cat([p[name] for p in parts]).double() for name in ("gamma_sp", "gamma_eo")]
    return _percentile(estimate, lam * resampled[0] + (1 - lam) * resampled[1], level)


def paired_change(
    before: Tensor,
    after: Tensor,
    y: Tensor,
    sens: Tensor,
    *,
    resamples: int = 1000,
    level: float = 0.95,
    seed: int = 0,
    groups: list[int] | None = None,
    chunk_bytes: int = 64 << 20,
    lam: float | None = None,
) -> dict[str, Interval]:
    """The change of each metric of :data:`METRICS` (and of Γ with ``lam``) from one model to another on the same
    test nodes, with its paired percentile bootstrap interval: every resample draws the same nodes for both models,
    so the interval is that of the difference, not of either side (a debiasing's after − before; the two models'
    metrics move together with the nodes drawn, and unpaired intervals would overlap where the change is clear).

    Args:
        before: ``[k, C]`` class probabilities of the first model on the test nodes.
        after: ``[k, C]`` the second model's on the same nodes, in the same order.
        y, sens: ``[k]`` labels and groups.
        resamples: number of bootstrap resamples ``B``.
        level: coverage of the interval.
        seed: the resamples' seed.
        groups: the fairness metrics are means over pairs of these groups (default: all present).
        chunk_bytes: about the most memory one chunk of resamples may take.
        lam: Γ's weighting of Γ_SP: with it, ``gamma``'s change too.

    Returns:
        ``{metric: Interval(after − before on the full sample, low, high, dropped)}``; ``dropped`` counts the
        resamples where either side is undefined. For more than two classes ``gamma_sp`` has the exact change and
        NaN bounds (:data:`NOT_RESAMPLED_MULTICLASS`).

    Raises:
        ConfigError: bad shapes, level or resamples, the two models' nodes differ in number, or fewer than two groups.
        NonFiniteError: a probability is NaN or inf.
    """
    return mean_paired_change(
        [(before, after)], y, sens, resamples=resamples, level=level, seed=seed, groups=groups,
        chunk_bytes=chunk_bytes, lam=lam,
    )  # fmt: skip


def mean_paired_change(
    pairs: Sequence[tuple[Tensor, Tensor]],
    y: Tensor,
    sens: Tensor,
    *,
    resamples: int = 1000,
    level: float = 0.95,
    seed: int = 0,
    groups: list[int] | None = None,
    chunk_bytes: int = 64 << 20,
    lam: float | None = None,
) -> dict[str, Interval]:
    """:func:`paired_change` of the mean change over several pairs of models on the same test nodes (an edge
    debiasing's per-seed retrainings with and without the edges: ``[(before_s, after_s) for s in seeds]``): every
    resample draws the same nodes for every model, and the mean over the pairs of after − before on those nodes is the
    resampled value, so the interval is that of the mean change over the test nodes' sampling (the seeds' own spread
    is the check against chance's). One pair is :func:`paired_change`, to the bit.

    Args:
        pairs: ``(before, after)`` class probabilities ``[k, C]`` of each pair, on the same nodes in the same order.
        y, sens, resamples, level, seed, groups, chunk_bytes, lam: as for :func:`paired_change`.

    Returns:
        ``{metric: Interval(mean of after − before on the full sample, low, high, dropped)}``; ``dropped`` counts the
        resamples where a side of any pair is undefined.

    Raises:
        ConfigError: no pair, bad shapes, level or resamples, the models' nodes differ in number, or fewer than two
            groups.
        NonFiniteError: a probability is NaN or inf.
    """
    if not pairs:
        raise ConfigError("mean_paired_change needs at least one pair of models")
    for before, after in pairs:
        if before.shape != after.shape or before.shape != pairs[0][0].shape:
            raise ConfigError(f"paired_change needs the same nodes: {list(before.shape)} against {list(after.shape)}")
        _check(before, y, sens)
        _check(after, y, sens)
    _check_settings(level, resamples)
    k = y.numel()
    chosen = _chosen_groups(sens, groups)
    sides = [[_in_base_order(p.detach().double(), y, sens, chosen) for p in pair] for pair in pairs]
    full = [[nodes.metrics(torch.ones(1, k, dtype=torch.float64)) for _, nodes in pair] for pair in sides]
    gen = torch.Generator().manual_seed(seed)
    models = 2 * len(pairs)
    step = _chunk(resamples, k, len(chosen), pairs[0][0].shape[1], chunk_bytes // models)
    parts: list[dict[str, Tensor]] = []
    for start in range(0, resamples, step):
        w = _draw(k, min(step, resamples - start), gen, torch.float32)  # in the nodes' own order: the same for all
        changes = []
        for (first_order, first), (second_order, second) in sides:
            one, two = first.metrics(w[:, first_order]), second.metrics(w[:, second_order])
            changes.append({name: two[name] - one[name] for name in two})
        parts.append({name: torch.stack([c[name] for c in changes]).mean(0) for name in changes[0]})
    out = {}
    for name in METRICS:
        if name not in full[0][0]:  # not resampled: the exact change, no interval
            exact = [
                float(exact_gamma_sp(after.double(), sens, groups=chosen))
                - float(exact_gamma_sp(before.double(), sens, groups=chosen))
                for before, after in pairs
            ]
            out[name] = Interval(statistics.fmean(exact), float("nan"), float("nan"))
            continue
        estimate = statistics.fmean(float(second[name][0] - first[name][0]) for first, second in full)
        out[name] = _percentile(estimate, torch.cat([p[name] for p in parts]), level)
    if lam is not None:
        out["gamma"] = _gamma(out, parts, lam, level)
    return out


def _in_base_order(proba: Tensor, y: Tensor, sens: Tensor, chosen: list[int]) -> tuple[Tensor, _Resampler]:
    """The nodes' base order (binary labels: sorted by P(y=1), the module docstring) and the resampler over them in
    that order; a resample's weights in the nodes' own order are read in it as ``weights[:, order]``."""
    order = torch.argsort(proba[:, 1], stable=True) if proba.shape[1] == 2 else torch.arange(y.numel())
    return order, _Resampler(proba[order], y[order], sens[order], chosen)


def _check_settings(level: float, resamples: int) -> None:
    if not 0 < level < 1 or resamples < 2:
        raise ConfigError("level must be in (0, 1) and resamples >= 2")


def _chunk(resamples: int, k: int, groups: int, num_classes: int, chunk_bytes: int) -> int:
    """Resamples per chunk: about ``chunk_bytes`` of float32 weights and per-group columns over ``k`` nodes."""
    width = groups + 4 + (2 if num_classes > 2 else 0)
    return max(1, min(resamples, chunk_bytes // (4 * k * width)))


def _percentile(estimate: float, values: Tensor, level: float) -> Interval:
    """``estimate`` with the percentile interval of ``values`` at ``level`` over the resamples that define it (not
    NaN), the others counted as dropped; NaN bounds when none does or the estimate itself is undefined."""
    values = values.double()
    boot = values[~torch.isnan(values)]
    dropped = int(values.numel() - boot.numel())
    if boot.numel() == 0 or math.isnan(estimate):
        return Interval(estimate, float("nan"), float("nan"), dropped)
    alpha = (1 - level) / 2
    lo, hi = torch.quantile(boot, torch.tensor([alpha, 1 - alpha], dtype=torch.float64)).tolist()
    return Interval(estimate, lo, hi, dropped)
