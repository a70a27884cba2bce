"""The audit result's ``profile`` section (what the harmful training nodes have in common), typed: part of
:mod:`bind_core.pipeline.results`."""

# ruff: noqa: RUF009  (key() and open_keys() return dataclasses.field(...): fields with metadata, not shared defaults)
from __future__ import annotations

from dataclasses import dataclass

from bind_core.codec import key


@dataclass(kw_only=True)
class NumericSummary:
    """The distribution of a number over a set of nodes (those where it is defined)."""

    mean: float = key("number: the mean")
    min: float = key("number: the smallest value")
    p10: float = key("number: 10th percentile")
    p50: float = key("number: median")
    p90: float = key("number: 90th percentile")
    max: float = key("number: the largest value")


@dataclass(kw_only=True)
class GroupShare:
    """One sensitive group's nodes in a set."""

    group: int = key("integer: the group code")
    name: str = key("string: the group's name")
    count: int = key("integer: the set's nodes in the group")
    share: float | None = key("number in [0, 1] or null (an empty set): count / the set's nodes")


@dataclass(kw_only=True)
class LabelShare:
    """One label's nodes in a set."""

    label: int = key("integer: the label's code")
    count: int = key("integer: the set's nodes with the label")
    share: float | None = key("number in [0, 1] or null (an empty set): count / the set's nodes")
    name: str | None = key(
        "string: the label as the user's data writes it (graph.class_names[label]); absent in audits stored before "
        "it was written",
        optional=True,
    )


@dataclass(kw_only=True)
class ProfileSet:
    """The distributions over one set of training nodes (:func:`bind_core.explain.profile.profile_nodes`)."""

    nodes: int = key("integer: training nodes in the set")
    delta_sum: float = key("number: the sum of their ΔΓ")
    delta_mean: float | None = key("number or null (an empty set): their mean ΔΓ")
    harm_share: float | None = key(
        "number in [0, 1] or null (no node has ΔΓ < 0): their share of the harm, the sum of −ΔΓ over nodes with ΔΓ < 0"
    )
    groups: list[GroupShare] = key("per sensitive group: its nodes in the set")
    labels: list[LabelShare] = key("per label: its nodes in the set")
    degree: NumericSummary | None = key("the degree's distribution; null for an empty set")
    cross_group_share: NumericSummary | None = key(
        "the distribution of the share of a node's neighbours in another group (nodes with a neighbour); null when "
        "none has one"
    )
    no_neighbours: int = key("integer: nodes without a neighbour (no cross-group share)")
    undefined: dict[str, str] | None = key("object, number → why it is null: present when one is", optional=True)


@dataclass(kw_only=True)
class ProfileSets:
    """The harmful, helpful and all training nodes."""

    harmful: ProfileSet = key("the most harmful nodes (see ``definition``)")
    helpful: ProfileSet = key("the most helpful nodes")
    all: ProfileSet = key("every training node")


@dataclass(kw_only=True)
class FeatureStats:
    """A feature column over one set of nodes."""

    mean: float = key("number: its mean")
    share: float | None = key("number in [0, 1]: share of nodes at the higher value (binary columns)", optional=True)
    p10: float | None = key("number: 10th percentile (numeric columns)", optional=True)
    p50: float | None = key("number: median (numeric columns)", optional=True)
    p90: float | None = key("number: 90th percentile (numeric columns)", optional=True)


@dataclass(kw_only=True)
class FeatureProfile:
    """One feature column in the harmful, helpful and all training nodes."""

    index: int = key("integer: the column (0-based)")
    name: str = key("string: its name (x<index> when the graph names none)")
    kind: str = key("string: binary (two values; one-hot columns) or numeric")
    high: float | None = key(
        "number: a binary column's higher value, whose share is given (in the units of the profile's feature_units)",
        optional=True,
    )
    level: str | None = key(
        "string: what a binary column's higher value stands for in the user's terms: a one-hot column's "
        "column=value (job=a), a text sensitive column's group (region=south); absent where it is the table's number",
        optional=True,
    )
    harmful: FeatureStats | None = key("the column over the harmful nodes; null when the set is empty")
    helpful: FeatureStats | None = key("over the helpful nodes; null when the set is empty")
    all: FeatureStats | None = key("over all training nodes")
    difference: float | None = key(
        "number or null: (harmful mean − all mean) / the column's standard deviation on the training nodes"
    )
    undefined: dict[str, str] | None = key("object, number → why it is null: present when one is", optional=True)


@dataclass(kw_only=True)
class RuleCondition:
    """One condition of a rule."""

    variable: str = key("string: group, label, degree, cross_group_share or feature:<name>")
    op: str = key("string: ==, !=, <= or >")
    value: float = key(
        "number: the level or threshold compared with (a feature's in the units of the profile's feature_units)"
    )
    text: str = key("string: the condition for people")


@dataclass(kw_only=True)
class RuleStats:
    """A rule on one half of the training nodes."""

    support: int = key("integer: the half's nodes it covers")
    support_share: float | None = key("number in [0, 1]: their share of the half")
    mean_delta: float | None = key("number or null (it covers no node): their mean ΔΓ")
    harm_share: float | None = key("number in [0, 1] or null (no node of the half has ΔΓ < 0): their share of its harm")
    undefined: dict[str, str] | None = key("object, number → why it is null: present when one is", optional=True)


@dataclass(kw_only=True)
class ProfileRule:
    """A rule that picks out where the harm concentrates, and held on the held-out half."""

    conditions: list[RuleCondition] = key("the conditions, all of which a node meets")
    text: str = key("string: the rule for people")
    fit: RuleStats = key("on the half the rule was fitted on")
    holdout: RuleStats = key("on the held-out half")
    p_value: float = key("number: one-sided permutation p-value of its held-out mean ΔΓ")
    members: list[int] | None = key(
        "array of integers: the training nodes it covers (both halves), as positions in the training split (the "
        "influence rows' position); absent in audits stored before it was kept",
        optional=True,
    )


@dataclass(kw_only=True)
class RuleSearch:
    """How the rules were searched and checked (:mod:`bind_core.explain.rules`)."""

    seed: int = key("integer: the seed of the split into halves (the training seed)")
    fit_nodes: int = key("integer: training nodes in the fit half")
    holdout_nodes: int = key("integer: training nodes in the held-out half")
    max_depth: int = key("integer: the tree's depth (conditions per rule at most)")
    min_leaf: int = key("integer: fit nodes a leaf must hold at least")
    splits_considered: int = key("integer: candidate splits")
    alpha: float = key("number: the family-wise error rate of the held-out check")
    permutations: int = key("integer: permutations of the held-out test")
    criterion: str = key("string: when a rule holds on the held-out half")
    tested: int = key("integer: candidate rules (harmful leaves) checked on the held-out half")
    rejected: int = key("integer: those that did not hold (not reported)")
    reason: str | None = key("string or null: why no rule is reported (null when some is)")


@dataclass(kw_only=True)
class NodeProfile:
    """What the harmful training nodes have in common (:func:`bind_core.explain.profile.profile_nodes`)."""

    fraction: float = key("number in (0, 1): the share of training nodes in the harmful and the helpful set")
    definition: str = key("string: how the sets are chosen")
    sets: ProfileSets = key("the distributions over the harmful, helpful and all training nodes")
    features: list[FeatureProfile] = key("per feature column, in column order")
    rules: list[ProfileRule] = key("the rules that held on the held-out half, most held-out harm first")
    search: RuleSearch = key("how the rules were searched and checked")
    feature_units: str | None = key(
        "string: the units of the features' statistics and of the rules' feature thresholds: table (the node table's "
        "own values: the min-max scaling applied when it was read is undone) or as given (the graph records no "
        "scaling: its feature values as they were given); absent in audits stored before it was said (scaled values)",
        optional=True,
    )
