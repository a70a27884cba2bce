"""Vectorised bootstrap intervals: exact full-sample values, every resample equal to the metrics on the resampled
nodes (binary and multi-class labels, two or more groups), known-answer coverage checks."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
import torch

from bind_core.codec import encode
from bind_core.data.datasets import synthetic
from bind_core.errors import ConfigError
from bind_core.fairness.bootstrap import (
    METRICS,
    bootstrap_metrics,
    mean_paired_change,
    paired_change,
    resample_metrics,
    resample_weights,
)
from bind_core.fairness.metrics import evaluate
from bind_core.pipeline.audit import AuditConfig, run_audit
from bind_core.reporting.exports import model_card
from bind_core.reporting.report import render_report
from bind_core.training.fit import TrainConfig


def _sample(k: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    p1 = torch.rand(k, generator=gen, dtype=torch.float64)
    p1[::5] = 0.5  # ties
    y = (torch.rand(k, generator=gen) < p1).long()
    sens = (torch.rand(k, generator=gen) < 0.4).long()
    return torch.stack([1 - p1, p1], dim=1), y, sens


def _multiclass(k: int, classes: int, groups: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Probabilities with ties (rounded), labels correlated with them, groups of unequal sizes (one tiny)."""
    gen = torch.Generator().manual_seed(seed)
    proba = torch.softmax(2 * torch.randn(k, classes, generator=gen, dtype=torch.float64), 1)
    proba = (proba * 20).round() / 20 + 1e-3
    proba = proba / proba.sum(1, keepdim=True)
    y = torch.where(torch.rand(k, generator=gen) < 0.6, proba.argmax(1), torch.randint(0, classes, (k,), generator=gen))
    sens = torch.randint(0, groups - 1, (k,), generator=gen)
    sens[:2] = groups - 1  # a group of two nodes: absent from many resamples
    return proba, y, sens


def _expanded(weights: torch.Tensor, *tensors: torch.Tensor) -> list[torch.Tensor]:
    idx = torch.repeat_interleave(torch.arange(weights.numel()), weights.long())
    return [t[idx] for t in tensors]


@pytest.mark.parametrize(
    ("case", "groups"),
    [("binary", None), ("binary3", None), ("binary3", [0, 2]), ("multi", None), ("multi", [1, 2, 3])],
)
def test_full_sample_estimates_equal_the_metrics(case: str, groups: list[int] | None) -> None:
    if case == "binary":
        proba, y, sens = _sample(500, 0)
    elif case == "binary3":
        proba, y, _ = _sample(400, 4)
        sens = torch.randint(0, 3, (400,), generator=torch.Generator().manual_seed(5))
    else:
        proba, y, sens = _multiclass(300, 3, 4, 6)
    intervals = bootstrap_metrics(proba, y, sens, resamples=50, groups=groups)
    report = encode(evaluate(proba, y, sens, groups=groups).values())
    assert set(intervals) == set(METRICS)
    for name, interval in intervals.items():
        assert interval.estimate == pytest.approx(report[name], abs=1e-12), name
        if case == "multi" and name == "gamma_sp":  # exact OT between probability vectors: not resampled
            assert math.isnan(interval.low) and math.isnan(interval.high)
        else:
            assert interval.low <= interval.high, name


@pytest.mark.parametrize(
    ("case", "groups"), [("binary", None), ("binary3", None), ("multi", None), ("multi", [0, 1, 3])]
)
def test_each_resample_equals_the_metrics_on_the_resampled_nodes(case: str, groups: list[int] | None) -> None:
    """The vectorised value of every resample is bind_core.fairness.metrics on the nodes repeated as drawn: AUC with
    ties, F1 with empty classes, and groups absent from a resample (the tiny group) skipped as the metrics skip them."""
    if case == "binary":
        proba, y, sens = _sample(60, 1)
    elif case == "binary3":
        proba, y, _ = _sample(60, 2)
        sens = torch.randint(0, 2, (60,), generator=torch.Generator().manual_seed(3))
        sens[:2] = 2
    else:
        proba, y, sens = _multiclass(50, 4, 4, 7)
    weights = resample_weights(y.numel(), 40, seed=11)
    got = resample_metrics(proba, y, sens, weights, groups=groups)
    if case != "binary":  # the tiny group is missing from some resamples
        assert bool((weights[:, sens == int(sens.max())].sum(1) == 0).any())
    assert set(got) == set(METRICS) - ({"gamma_sp"} if case == "multi" else set())
    for b in range(weights.shape[0]):
        want = encode(evaluate(*_expanded(weights[b], proba, y, sens), groups=groups).values())
        for name, values in got.items():
            expected = float("nan") if want[name] is None else want[name]  # undefined: null there, NaN here
            assert float(values[b]) == pytest.approx(expected, abs=1e-9, nan_ok=True), (b, name)


Draw = Callable[[torch.Generator], tuple[torch.Tensor, torch.Tensor, torch.Tensor]]


def _coverage(trials: int, draw: Draw, truth: dict[str, float], resamples: int = 200) -> dict[str, float]:
    """The share of ``trials`` samples (``draw``) whose interval holds each metric's true value."""
    hits = dict.fromkeys(truth, 0)
    for t in range(trials):
        proba, y, sens = draw(torch.Generator().manual_seed(1000 + t))
        intervals = bootstrap_metrics(proba, y, sens, resamples=resamples, seed=t)
        for name, value in truth.items():
            hits[name] += intervals[name].low <= value <= intervals[name].high
    return {name: count / trials for name, count in hits.items()}


def test_accuracy_interval_covers_the_truth_about_as_often_as_it_says() -> None:
    # Known answer: each prediction is right with probability 0.7, so the true accuracy is 0.7.
    def draw(gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        k = 300
        y = torch.randint(0, 2, (k,), generator=gen)
        y[:4] = torch.tensor([0, 1, 0, 1])  # both groups hold both labels
        right = torch.rand(k, generator=gen) < 0.7
        p1 = torch.where(right == (y == 1), 0.9, 0.1).double()
        return torch.stack([1 - p1, p1], 1), y, torch.arange(k) % 2

    rate = _coverage(200, draw, {"accuracy": 0.7})["accuracy"]
    assert 0.88 <= rate <= 0.99


def test_multi_group_intervals_cover_the_known_gaps() -> None:
    """Three groups; group g's P(y=1) is uniform on [a_g, a_g + 0.3] with a = 0.25, 0.35, 0.45, labels independent.

    W1 between two shifted copies of a distribution is the shift, so Γ_SP = Γ_EO = mean(0.1, 0.2, 0.1) = 2/15;
    P(ŷ=1) = P(score > 0.5) is 1/6, 1/2 and 5/6, so ΔSP = ΔEO = mean(1/3, 2/3, 1/3) = 4/9 (mean over pairs)."""
    starts = torch.tensor([0.25, 0.35, 0.45], dtype=torch.float64)

    def draw(gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        k = 600
        sens = torch.arange(k) % 3
        p1 = starts[sens] + 0.3 * torch.rand(k, generator=gen, dtype=torch.float64)
        y = torch.randint(0, 2, (k,), generator=gen)
        return torch.stack([1 - p1, p1], 1), y, sens

    truth = {"gamma_sp": 2 / 15, "gamma_eo": 2 / 15, "delta_sp": 4 / 9, "delta_eo": 4 / 9}
    rates = _coverage(150, draw, truth)
    # The plug-in W1 is biased upward at finite n, so percentile intervals of Γ cover a little less (about 0.91
    # over 400 trials here) than those of the rates (about 0.93).
    assert all(0.85 <= rates[name] <= 0.99 for name in ("gamma_sp", "gamma_eo")), rates
    assert all(0.88 <= rates[name] <= 0.99 for name in ("delta_sp", "delta_eo")), rates
    # A wrong truth is not covered: the intervals are narrow enough to tell.
    assert _coverage(30, draw, {"gamma_sp": 0.2, "delta_sp": 0.6}) == {"gamma_sp": 0.0, "delta_sp": 0.0}


def test_multi_class_intervals_cover_the_known_values() -> None:
    """Three classes, three groups: group g predicts class c with probability P[g][c], independently of the
    label, and the label is the prediction with probability 0.6 (else uniform). Accuracy = 0.6 + 0.4/3;
    ΔSP = mean over classes of the mean pairwise gap of P[·][c]."""
    table = torch.tensor([[0.6, 0.3, 0.1], [0.3, 0.4, 0.3], [0.1, 0.3, 0.6]], dtype=torch.float64)
    delta_sp = sum(
        float((table[a, c] - table[b, c]).abs()) for c in range(3) for a, b in ((0, 1), (0, 2), (1, 2))
    ) / 9  # fmt: skip

    def draw(gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        k = 600
        sens = torch.arange(k) % 3
        pred = torch.multinomial(table[sens], 1, generator=gen).flatten()
        y = torch.where(torch.rand(k, generator=gen) < 0.6, pred, torch.randint(0, 3, (k,), generator=gen))
        proba = torch.full((k, 3), 0.15, dtype=torch.float64).scatter_(1, pred[:, None], 0.7)
        return proba, y, sens

    rates = _coverage(150, draw, {"accuracy": 0.6 + 0.4 / 3, "delta_sp": delta_sp})
    assert all(0.88 <= rate <= 0.99 for rate in rates.values()), rates


def test_resamples_are_seeded_and_inputs_checked() -> None:
    assert torch.equal(resample_weights(10, 4, seed=1), resample_weights(10, 4, seed=1))
    assert resample_weights(10, 4, seed=1).sum(1).eq(10).all()
    proba, y, sens = _sample(50, 0)
    with pytest.raises(ConfigError, match="two groups"):
        bootstrap_metrics(proba, y, sens, groups=[1])
    with pytest.raises(ConfigError):
        bootstrap_metrics(proba[:, :1], y, sens)


def test_a_multi_class_audit_reports_intervals() -> None:
    """Three classes and three groups: the audit resamples every metric but Γ_SP, whose interval is left out
    of the report and the model card rather than shown as NaN."""
    g = synthetic(240, num_classes=3, num_groups=3, seed=4)
    config = AuditConfig(training=TrainConfig(epochs=20), stages=("training", "metrics"), bootstrap=60)
    d = run_audit(g, config).to_dict()
    intervals, test = d["metrics"]["intervals"], d["metrics"]["test"]
    assert intervals["resamples"] == 60
    for name in METRICS:
        assert intervals[name]["estimate"] == pytest.approx(test[name], abs=1e-12), name
        if name == "gamma_sp":
            assert intervals[name]["low"] is None and intervals[name]["high"] is None  # null in JSON, never NaN
        else:
            assert intervals[name]["low"] <= intervals[name]["high"], name
    html = render_report(d)
    cards = re.findall(r"<div class=card><div>([^<]+)</div>.*?<div class=ci>([^<]+)</div>", html)
    bands = dict(cards)
    assert bands["Γ_SP"] == "no interval" and bands["ΔSP"].startswith("95% CI [") and "not resampled" in html
    performance = model_card(d).quantitative_analysis.performance_metrics
    by_type = {m.type: m for m in performance if m.slice == "test"}
    assert by_type["gamma_sp"].confidence_interval is None and by_type["gamma_eo"].confidence_interval is not None


def test_intervals_from_few_resamples_say_so() -> None:
    g = synthetic(240, seed=4)
    config = AuditConfig(training=TrainConfig(epochs=20), stages=("training", "metrics"), bootstrap=40)
    few = [w for w in run_audit(g, config).warnings() if "bootstrap resamples" in w]
    assert few == [
        "the metrics' 95% intervals rest on 40 bootstrap resamples, with one of them beyond each end: the ends move "
        "from one run to the next; 1000 or more (the default) give intervals to quote"
    ]
    enough = replace(config, bootstrap=1000)
    assert not [w for w in run_audit(g, enough).warnings() if "beyond each end" in w]


def test_a_paired_change_is_the_difference_on_the_same_resamples() -> None:
    """after − before per metric: the estimate is the two full-sample metrics' difference, and the bounds are the
    percentiles of the difference over resamples that draw the same nodes for both models."""
    before, y, sens = _sample(300, 3)
    shift = torch.linspace(-0.2, 0.2, 300, dtype=torch.float64)
    p1 = (before[:, 1] + shift * (sens == 1)).clamp(0.01, 0.99)
    after = torch.stack([1 - p1, p1], dim=1)
    change = paired_change(before, after, y, sens, resamples=200, seed=5)
    alone = [bootstrap_metrics(p, y, sens, resamples=2) for p in (before, after)]
    w = resample_weights(300, 200, seed=5, dtype=torch.float32)  # the same draws, one chunk
    moved = {k: v - resample_metrics(before, y, sens, w)[k] for k, v in resample_metrics(after, y, sens, w).items()}
    for name in METRICS:
        assert change[name].estimate == pytest.approx(alone[1][name].estimate - alone[0][name].estimate, abs=1e-12)
        v = moved[name].double()
        lo, hi = torch.quantile(v[~v.isnan()], torch.tensor([0.025, 0.975], dtype=torch.float64)).tolist()
        assert (change[name].low, change[name].high) == pytest.approx((lo, hi), abs=1e-12), name
    same = paired_change(before, before, y, sens, resamples=50)
    assert all((i.estimate, i.low, i.high) == (0.0, 0.0, 0.0) for i in same.values())
    with pytest.raises(ConfigError, match="same nodes"):
        paired_change(before, after[:-1], y, sens)


def test_a_mean_paired_change_over_seeds_averages_each_pairs_change_on_the_same_resamples() -> None:
    """Several pairs (an edge budget's models retrained per seed with and without the edges): the estimate is the
    mean of the pairs' changes, each resample the mean of their changes on the same drawn nodes; one pair is
    :func:`paired_change` to the bit."""
    before, y, sens = _sample(300, 6)
    pairs = []
    for s in range(3):
        shift = torch.linspace(-0.1, 0.1 + 0.05 * s, 300, dtype=torch.float64)
        p1 = (before[:, 1] + shift * (sens == 1)).clamp(0.01, 0.99)
        other = (before[:, 1] + 0.02 * s).clamp(0.01, 0.99)
        pairs.append((torch.stack([1 - other, other], dim=1), torch.stack([1 - p1, p1], dim=1)))
    kw: dict[str, Any] = {"resamples": 300, "seed": 7, "lam": 0.5}
    one = mean_paired_change(pairs[:1], y, sens, **kw)
    assert one == paired_change(*pairs[0], y, sens, **kw)
    each = [paired_change(b, a, y, sens, **kw) for b, a in pairs]
    mean = mean_paired_change(pairs, y, sens, **kw)
    w = resample_weights(300, 300, seed=7, dtype=torch.float32)
    for name in (*METRICS, "gamma"):
        assert mean[name].estimate == pytest.approx(sum(e[name].estimate for e in each) / 3, abs=1e-12), name
    for name in METRICS:
        moved = (
            torch.stack(
                [resample_metrics(a, y, sens, w)[name] - resample_metrics(b, y, sens, w)[name] for b, a in pairs]
            )
            .mean(0)
            .double()
        )
        lo, hi = torch.quantile(moved[~moved.isnan()], torch.tensor([0.025, 0.975], dtype=torch.float64)).tolist()
        assert (mean[name].low, mean[name].high) == pytest.approx((lo, hi), abs=1e-12), name
    with pytest.raises(ConfigError, match="at least one pair"):
        mean_paired_change([], y, sens)


def test_gamma_is_resampled_as_its_two_parts_combined() -> None:
    """With ``lam``, Γ = λ·Γ_SP + (1 − λ)·Γ_EO on the full sample and on each resample; the audit's intervals carry
    it (the report's Γ card shows it), and the paired change too. Three classes: the exact value, no bounds."""
    proba, y, sens = _sample(300, 4)
    lam = 0.3
    found = bootstrap_metrics(proba, y, sens, resamples=200, seed=2, lam=lam)
    drawn = resample_weights(300, 200, seed=2, dtype=torch.float32)  # drawn for the nodes sorted by P(y=1)
    w = torch.empty_like(drawn)
    w[:, torch.argsort(proba[:, 1], stable=True)] = drawn
    each = resample_metrics(proba, y, sens, w)
    combined = lam * each["gamma_sp"].double() + (1 - lam) * each["gamma_eo"].double()
    lo, hi = torch.quantile(combined[~combined.isnan()], torch.tensor([0.025, 0.975], dtype=torch.float64)).tolist()
    gamma = found["gamma"]
    assert gamma.estimate == pytest.approx(lam * found["gamma_sp"].estimate + (1 - lam) * found["gamma_eo"].estimate)
    assert (gamma.low, gamma.high) == pytest.approx((lo, hi), abs=1e-12)
    assert "gamma" not in bootstrap_metrics(proba, y, sens, resamples=20)
    change = paired_change(proba, proba, y, sens, resamples=20, lam=lam)["gamma"]
    assert (change.estimate, change.low, change.high) == (0.0, 0.0, 0.0)
    multi, y3, s3 = _multiclass(240, 3, 3, 5)
    three = bootstrap_metrics(multi, y3, s3, resamples=20, lam=lam)["gamma"]
    assert not math.isnan(three.estimate) and math.isnan(three.low) and math.isnan(three.high)


def test_the_audits_gamma_card_has_its_interval() -> None:
    g = synthetic(240, seed=4)
    config = AuditConfig(training=TrainConfig(epochs=20), stages=("training", "metrics"), bootstrap=200)
    d = run_audit(g, config).to_dict()
    band = d["metrics"]["intervals"]["gamma"]
    assert band["estimate"] == pytest.approx(d["metrics"]["test"]["gamma"], abs=1e-12)
    assert band["low"] <= band["estimate"] <= band["high"] or band["low"] <= band["high"]
    cards = dict(re.findall(r"<div class=card><div>([^<]+)</div>.*?<div class=ci>([^<]+)</div>", render_report(d)))
    assert cards["Γ"].startswith("95% CI [")
