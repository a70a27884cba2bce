"""The audit result's metrics (fairness and utility, per group, their histograms and bootstrap intervals), typed:
part of :mod:`bind_core.pipeline.results`."""

# ruff: noqa: RUF009  (key() and open_keys() return dataclasses.field(...): fields with metadata, not shared defaults)
from __future__ import annotations

from dataclasses import dataclass

from bind_core.codec import key

NULLABLE = " (null when undefined; see ``undefined``)"


@dataclass(kw_only=True)
class MetricValues:
    """Utility and fairness on a set of test nodes (:class:`bind_core.fairness.metrics.FairnessReport`).

    Attributes:
        nodes: the number of nodes measured
        accuracy: accuracy (null when undefined; see ``undefined``)
        auc: ROC AUC (null when undefined; see ``undefined``)
        f1: F1 of the positive class (null when undefined; see ``undefined``)
        delta_sp: ΔSP, the largest gap in predicted positive rates (null when undefined; see ``undefined``)
        delta_eo: ΔEO, the largest gap in true positive rates (null when undefined; see ``undefined``)
        gamma_sp: Γ_SP, PDD of the predicted probabilities (null when undefined; see ``undefined``)
        gamma_eo: Γ_EO, PDD over the positive nodes (null when undefined; see ``undefined``)
        gamma: Γ = lam·Γ_SP + (1−lam)·Γ_EO (null when undefined; see ``undefined``)
        undefined: present only when some metric is undefined (null)
    """

    nodes: int = key("integer: the number of nodes measured")
    accuracy: float | None = key("number in [0, 1]: accuracy" + NULLABLE)
    auc: float | None = key("number in [0, 1]: ROC AUC" + NULLABLE)
    f1: float | None = key("number in [0, 1]: F1 of the positive class" + NULLABLE)
    delta_sp: float | None = key("number >= 0: ΔSP, the largest gap in predicted positive rates" + NULLABLE)
    delta_eo: float | None = key("number >= 0: ΔEO, the largest gap in true positive rates" + NULLABLE)
    gamma_sp: float | None = key("number >= 0: Γ_SP, PDD of the predicted probabilities" + NULLABLE)
    gamma_eo: float | None = key("number >= 0: Γ_EO, PDD over the positive nodes" + NULLABLE)
    gamma: float | None = key("number >= 0: Γ = lam·Γ_SP + (1−lam)·Γ_EO" + NULLABLE)
    undefined: dict[str, str] | None = key(
        "object, metric name → reason: present only when some metric is undefined (null)", optional=True
    )

    def same_figures(self, other: MetricValues) -> bool:
        """Whether ``other`` gives the same accuracy, ΔSP and ΔEO (to 10⁻⁹): the same model measured again.

        Args:
            other: metrics to compare with.

        Returns:
            True where each of the three is equal (both null, or within 10⁻⁹).
        """
        pairs = [(self.accuracy, other.accuracy), (self.delta_sp, other.delta_sp), (self.delta_eo, other.delta_eo)]
        return all(a == b or (a is not None and b is not None and abs(a - b) <= 1e-9) for a, b in pairs)


@dataclass(kw_only=True)
class WorstPair:
    """The pair of groups with the largest gap for one fairness metric."""

    value: float = key("number: the metric over that pair")
    groups: list[int] = key("[integer, integer]: the two group codes")
    names: list[str] | None = key(
        "[string, string]: the two groups' names, as metrics.groups' name (gender=F); absent in audits stored before "
        "they were written",
        optional=True,
    )


@dataclass(kw_only=True)
class TestMetrics(MetricValues):
    """The metrics on all test nodes, and the worst pair of groups per fairness metric."""

    worst_pairs: dict[str, WorstPair | None] = key(
        "object, metric (delta_sp, delta_eo, gamma_sp, gamma_eo) → its worst pair, null when no pair defines it"
    )


@dataclass(kw_only=True)
class GroupMetrics:
    """One sensitive group's test nodes (:func:`bind_core.fairness.breakdown.group_breakdown`)."""

    group: int = key("integer: the group code")
    name: str = key("string: the group's name (an intersectional group's is its combination, e.g. female|black)")
    size: int = key("integer: its test nodes")
    included: bool = key("boolean: whether the fairness metrics include it (min_group_size)")
    excluded_reason: str | None = key("string or null: why it is left out of the metrics")
    positive_rate: float | None = key(
        "number in [0, 1] or null (no test node): predicted positive rate (more than two classes: of the last class)"
    )
    tpr: float | None = key(
        "number in [0, 1] or null (no positive test node): true positive rate (more than two classes: of the last "
        "class)"
    )
    mean_probability: float | None = key("number in [0, 1] or null: mean predicted probability of the last class")
    accuracy: float | None = key("number in [0, 1] or null: accuracy on its test nodes")
    class_rates: list[float] | None = key(
        "more than two classes only, numbers in [0, 1]: the share of its test nodes predicted each class, in class "
        "order (what ΔSP compares between groups, class by class)",
        optional=True,
    )
    class_counts: list[int] | None = key(
        "more than two classes only, integers: its test nodes of each class, in class order", optional=True
    )
    class_tprs: list[float | None] | None = key(
        "more than two classes only: for each class c, the share of its test nodes of class c predicted c (what ΔEO "
        "compares), null for a class it has no test node of",
        optional=True,
    )


@dataclass(kw_only=True)
class Histograms:
    """Histograms of the predicted probability of the last class on the test nodes, per group."""

    bin_edges: list[float] = key("numbers: the bins' edges, one more than the counts")
    all: dict[str, list[int]] = key("object, group code → counts per bin of all its test nodes")
    positives: dict[str, list[int]] = key("object, group code → counts per bin of its positive test nodes")


@dataclass(kw_only=True)
class Interval:
    """A metric's percentile bootstrap interval (:class:`bind_core.fairness.bootstrap.Interval`)."""

    estimate: float | None = key("number or null: the metric on the full test sample")
    low: float | None = key("number or null: lower bound (null when no resample defines it)")
    high: float | None = key("number or null: upper bound")
    dropped: int = key("integer: resamples that could not define the metric, left out")

    def clear_of_zero(self) -> bool | None:
        """Whether the interval excludes 0 (a change's: not an artefact of which nodes were tested).

        Returns:
            True where both bounds lie on one side of 0, False where they straddle it, ``None`` without bounds.
        """
        if self.low is None or self.high is None:
            return None
        return self.low > 0 or self.high < 0


@dataclass(kw_only=True)
class Intervals:
    """Bootstrap confidence intervals of the test metrics (present when ``bootstrap`` > 0)."""

    level: float = key("number in (0, 1): the intervals' coverage")
    resamples: int = key("integer: bootstrap resamples drawn")
    accuracy: Interval | None = key("accuracy's interval", optional=True)
    auc: Interval | None = key("ROC AUC's interval", optional=True)
    f1: Interval | None = key("F1's interval", optional=True)
    delta_sp: Interval | None = key("ΔSP's interval", optional=True)
    delta_eo: Interval | None = key("ΔEO's interval", optional=True)
    gamma_sp: Interval | None = key("Γ_SP's interval (none for more than two classes)", optional=True)
    gamma_eo: Interval | None = key("Γ_EO's interval", optional=True)
    gamma: Interval | None = key(
        "Γ's interval (λ·Γ_SP + (1 − λ)·Γ_EO on each resample; none for more than two classes, as Γ_SP's)",
        optional=True,
    )


@dataclass(kw_only=True)
class Metrics:
    """The metrics stage: the trained model on the test split."""

    test: TestMetrics = key("the metrics on all test nodes")
    groups: list[GroupMetrics] = key("the per-group breakdown, one entry per sensitive group")
    included_groups: list[int] = key("integers: the groups the fairness metrics compare")
    histograms: Histograms = key("probability histograms per group")
    intervals: Intervals | None = key("bootstrap confidence intervals; absent without bootstrap", optional=True)
