"""The audit's verdict, first: one short plain-language summary with its structured fields (:mod:`.summary`);
part of :mod:`bind_core.pipeline.results`."""

# ruff: noqa: RUF009  (key() and open_keys() return dataclasses.field(...): fields with metadata, not shared defaults)
from __future__ import annotations

from dataclasses import dataclass

from bind_core.codec import key


@dataclass(kw_only=True)
class GapFinding:
    """One fairness gap between two groups, in the groups' own terms."""

    metric: str = key("string: delta_sp (predicted positive rates) or delta_eo (true positive rates)")
    value: float | None = key("number in [0, 1] or null (undefined): the gap")
    interval: list[float] | None = key("[low, high]: the gap's bootstrap interval; null without bootstrap")
    higher: str | None = key("string: the group with the higher rate, attribute=value")
    lower: str | None = key("string: the group with the lower rate")
    higher_rate: float | None = key("number in [0, 1]: its rate")
    lower_rate: float | None = key("number in [0, 1]: the other's rate")
    difference_interval: list[float] | None = key(
        "[low, high]: the 95% interval of higher_rate − lower_rate (normal approximation over the two groups' test "
        "nodes; widened for the comparisons the named pair was picked from as the widest, pairs of groups times "
        "classes with more than two classes, each at 1 − 0.05/comparisons (Bonferroni)); null where a rate is "
        "undefined"
    )
    excludes_zero: bool | None = key("boolean or null: difference_interval excludes 0 (the gap is not chance)")
    text: str = key("string: the finding in words")
    pairs: int | None = key(
        "integer: the pairs of groups the metric is the mean gap over; with more than two groups value is that mean, "
        "and higher and lower are the pair with the widest gap (absent in results made before 2026-11-29)",
        optional=True,
    )
    pair_gap: float | None = key(
        "number in [0, 1]: higher_rate − lower_rate, the named pair's own gap (value itself with two groups and two "
        "classes)",
        optional=True,
    )
    label_class: str | None = key(
        "string, more than two classes only: the class (label=value) whose rates higher_rate and lower_rate are, the "
        "class with the widest gap; value is then the mean over the classes",
        optional=True,
    )


@dataclass(kw_only=True)
class AttributionFinding:
    """Which training nodes carry the bias."""

    harmful_nodes: int = key("integer: the most harmful training nodes profiled (the profile's fraction)")
    harm_share: float | None = key("number in [0, 1] or null: their share of all the harm (negative ΔΓ)")
    top_ids: list[int | str] = key("the user's ids of the most harmful nodes, most harmful first (at most 5)")
    rule: str | None = key("string or null: the profile's strongest rule that held on the held-out half")
    text: str = key("string: the finding in words")


@dataclass(kw_only=True)
class DebiasingFinding:
    """What the best debiasing budget achieved, and whether it beat chance."""

    budget: float = key("number: the budget with the lowest Γ after retraining")
    deleted: int = key("integer: training nodes it deleted")
    before: dict[str, float | None] = key("object: accuracy, delta_sp, delta_eo, gamma before")
    after: dict[str, float | None] = key("object: the same after retraining without the nodes")
    backfired: list[str] = key(
        "strings: budgets (as 'budget 0.1: delta_sp') whose deletion raised a bias metric clear of the test nodes' "
        "sampling noise (every rise, without the bootstrap; before 2026-12-06: every rise)"
    )
    chance_checked: bool = key("boolean: whether the budget was checked against deleting random nodes")
    beats_random: bool | None = key("boolean or null (not checked): the selection beat random deletion")
    text: str = key("string: the finding in words")
    change: dict[str, list[float] | None] | None = key(
        "object: delta_sp, delta_eo, gamma → [low, high], the paired bootstrap interval of after − before over the "
        "test nodes (null where undefined); absent without the bootstrap",
        optional=True,
    )
    within_noise: list[str] | None = key(
        "strings: budgets (as 'budget 0.1: delta_eo') whose deletion raised a bias metric only within the test nodes' "
        "sampling noise (its change's interval reaches 0): not a clear backfire; absent without the bootstrap and in "
        "audits from before it was recorded",
        optional=True,
    )


@dataclass(kw_only=True)
class TrustFinding:
    """How far the attribution can be trusted: the self-check, with a bootstrap interval on its Pearson."""

    verdict: str = key("string: trustworthy, rough, no better than chance, or not checked")
    pearson: float | None = key("number or null: Pearson of estimated against actual ΔΓ over the checked nodes")
    interval: list[float] | None = key("[low, high]: its 95% bootstrap interval (resampling the checked nodes)")
    points: int = key("integer: nodes (or sets) checked")
    text: str = key("string: the finding in words")


@dataclass(kw_only=True)
class Summary:
    """The audit in a few plain sentences, verdict first (:func:`bind_core.pipeline.summary.summarize`)."""

    verdict: str = key("string: the headline: is there a gap, against whom, how large, is it chance")
    withheld: str | None = key(
        "string: why the verdict is withheld (it then reads 'No verdict: <this>. As measured: ...'): the supplied "
        "model's outputs may be in another order than the label's classes, or it fits its own training nodes no "
        "better than a constant (fed other inputs than it was trained on), or the label has many classes of few "
        "nodes each; absent when there is a verdict",
        optional=True,
    )
    sensitive: list[str] = key("strings: the sensitive attribute(s)")
    bias: list[GapFinding] = key("the gaps in predicted positive rates and in true positive rates")
    attribution: AttributionFinding | None = key("which training nodes carry the bias; null without influence")
    debiasing: DebiasingFinding | None = key("what deleting them did; null without debiasing")
    trust: TrustFinding = key("how far the attribution can be trusted")
    text: str = key("string: the whole summary, one finding per line")
