"""A profile of the harmful training nodes: what they have in common.

For the harmful nodes (the :data:`FRACTION` of training nodes with the most negative ΔΓ, only those with ΔΓ < 0),
the helpful ones (the same fraction with the largest ΔΓ > 0) and all training nodes: the distribution of the
sensitive group, the label, the degree, the share of neighbours from another group and every feature (mean and
quantiles of a numeric column, the share at the higher value of a binary one). Then the rules that pick out where
the harm concentrates (:mod:`bind_core.explain.rules`), each checked on a held-out half of the nodes.

Why the top 10%: the audit's debiasing deletes the top-ranked few percent, and a tenth of the training nodes is the
smallest set that still gives stable distributions on the paper's datasets (hundreds of training nodes); the
profile also reports which share of the total harm (the sum of −ΔΓ over the nodes with ΔΓ < 0) the set holds, so
that a reader sees whether the harm is concentrated there. An undefined number (an empty set, a feature with no
spread) is null with its reason under ``undefined``, never 0.

The features speak the table's units: where the graph was min-max scaled when read (``Graph.feature_ranges``) the
scaling is undone before anything is computed, so a mean, a quantile, a binary column's ``high`` and a rule's
threshold are the node table's own numbers (``feature_units`` says which); a graph without recorded ranges is
profiled on its values as given. A binary column that stands for a text value is named by it (``level``): a
one-hot column ``job=a``, and a text sensitive column held as its group codes by the group (``region=south``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from bind_core.data.graph import Graph
from bind_core.data.labels import class_value, group_labels
from bind_core.explain.records import (
    FeatureProfile,
    FeatureStats,
    GroupShare,
    LabelShare,
    NodeProfile,
    NumericSummary,
    ProfileSet,
    ProfileSets,
)
from bind_core.explain.rules import Candidate, Condition, find_rules, halves

__all__ = ["FRACTION", "Profile", "candidate_splits", "cross_group_share", "profile_nodes", "user_features"]

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]
FRACTION = 0.1
"""The share of training nodes in the harmful (and in the helpful) set."""
QUANTILES = (("p10", 0.1), ("p50", 0.5), ("p90", 0.9))
MAX_THRESHOLDS = 8
TABLE_UNITS = "table"
"""``feature_units`` where the scaling the graph records was undone: the node table's own values."""
AS_GIVEN = "as given"
"""``feature_units`` where the graph records no scaling: the feature values as the graph was given them."""


@dataclass(frozen=True)
class UserFeatures:
    """The feature matrix in the user's units (:func:`user_features`).

    Attributes:
        x: float64 ``[n, d]``: the table's own values where the graph records a scaling, else ``graph.x``.
        units: :data:`TABLE_UNITS` or :data:`AS_GIVEN`.
        levels: per column, ``(low, high)``: what its two values stand for in the user's terms, or ``None`` (a
            number of the table, or not a binary column).
    """

    x: FloatArray
    units: str
    levels: list[tuple[str, str] | None]


def user_features(graph: Graph) -> UserFeatures:
    """``graph.x`` with the min-max scaling of ``graph.feature_ranges`` undone (``lo + (x + 1)·(hi − lo)/2``; a
    constant column is its ``lo``), and the names of the binary columns' values."""
    x = graph.x.numpy().astype(np.float64)
    units = AS_GIVEN
    if graph.feature_ranges:
        lo, hi = (np.array(v, dtype=np.float64) for v in zip(*graph.feature_ranges, strict=True))
        x = np.where(hi > lo, lo + (x + 1.0) * (hi - lo) / 2.0, lo)
        units = TABLE_UNITS
    return UserFeatures(x, units, [_levels(graph, j, x[:, j]) for j in range(x.shape[1])])


def _levels(graph: Graph, j: int, col: FloatArray) -> tuple[str, str] | None:
    """What the values 0 and 1 of column ``j`` stand for: a one-hot column ``c=v`` (``c=v`` and ``c≠v``), or a
    sensitive column held as its group codes, checked node by node (``region=south`` and ``region=north``)."""
    values = np.unique(col)
    if values.size > 2 or not np.isin(values, (0.0, 1.0)).all():
        return None
    name = _feature_name(graph, j)
    if name in graph.sensitive:
        coded = _coded_levels(graph, name, col)
        if coded is not None:
            return coded
    column, sep, value = name.partition("=")  # a one-hot column of a text column (``column=value``)
    return (f"{column}≠{value}", name) if sep and column and value else None


def _coded_levels(graph: Graph, column: str, col: FloatArray) -> tuple[str, str] | None:
    """The groups a sensitive column's codes 0 and 1 stand for, when every node's value names its group: with one
    sensitive column the value is the group, with several the group's ``column=value`` part; else ``None``."""
    sens, names = graph.sens.numpy(), group_labels(graph)
    codes = np.rint(col).astype(np.int64)
    out: list[str] = []
    for code in (0, 1):
        groups = np.unique(sens[codes == code]).tolist()
        if not groups:
            return None
        if len(graph.sensitive) == 1:
            if groups != [code] or code >= len(names):
                return None
            out.append(names[code])
            continue
        prefix = f"{column}="
        parts = {p for g in groups for p in names[g].split(" & ") if p.startswith(prefix)}
        if len(parts) != 1:
            return None
        out.append(parts.pop())
    return (out[0], out[1]) if out[0] != out[1] else None


@dataclass(frozen=True)
class Profile:
    """The profile as the audit result records it (``document``) and each reported rule's training positions."""

    document: NodeProfile
    members: list[list[int]]


def cross_group_share(graph: Graph) -> FloatArray:
    """Per node, the share of its neighbours in another sensitive group (NaN for a node without neighbours)."""
    src, dst = graph.edge_index[0].numpy(), graph.edge_index[1].numpy()
    sens = graph.sens.numpy()
    other = np.bincount(src, weights=(sens[src] != sens[dst]).astype(np.float64), minlength=graph.num_nodes)
    degree = np.bincount(src, minlength=graph.num_nodes).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(degree > 0, other / degree, np.nan)


def _numeric(values: FloatArray) -> NumericSummary | None:
    """The mean, extremes and quantiles of the defined (not NaN) values; ``None`` when none is."""
    values = values[~np.isnan(values)]
    if values.size == 0:
        return None
    q = {k: float(np.quantile(values, p)) for k, p in QUANTILES}
    return NumericSummary(mean=float(values.mean()), min=float(values.min()), max=float(values.max()), **q)


def _shares(codes: npt.NDArray[np.int64], levels: int) -> list[tuple[int, int, float | None]]:
    """Per level: the level, its count among ``codes`` and its share (``None`` for no code)."""
    counts = np.bincount(codes, minlength=levels)
    total = int(counts.sum())
    return [(level, count, count / total if total else None) for level, count in enumerate(counts.tolist())]


def _set_profile(graph: Graph, train: IntArray, delta: FloatArray, members: BoolArray, cross: FloatArray) -> ProfileSet:
    """The distributions over one set of the training nodes ``train`` (``members``, a mask in their order)."""
    idx = train[members]
    harm = np.clip(-delta, 0.0, None)
    total_harm = float(harm.sum())
    count = int(members.sum())
    names = group_labels(graph)
    cross_here = cross[idx]
    undefined: dict[str, str] = {}
    if not count:
        undefined["nodes"] = "the set is empty: every mean, share and distribution is undefined"
    if total_harm <= 0:
        undefined["harm_share"] = "no training node has ΔΓ < 0"
    isolated = int(np.isnan(cross_here).sum())
    if count and isolated == count:
        undefined["cross_group_share"] = "no node of the set has a neighbour"
    groups = _shares(graph.sens.numpy()[idx], graph.num_groups)
    labels = _shares(np.clip(graph.y.numpy()[idx], 0, None), graph.num_classes)
    return ProfileSet(
        nodes=count,
        delta_sum=float(delta[members].sum()),
        delta_mean=float(delta[members].mean()) if count else None,
        harm_share=float(harm[members].sum()) / total_harm if total_harm > 0 else None,
        groups=[GroupShare(group=g, name=names[g], count=c, share=sh) for g, c, sh in groups],
        labels=[LabelShare(label=lab, count=c, share=sh, name=class_value(graph, lab)) for lab, c, sh in labels],
        degree=_numeric(graph.degree.numpy()[idx].astype(np.float64)),
        cross_group_share=_numeric(cross_here),
        no_neighbours=isolated,
        undefined=undefined or None,
    )


def _feature_stats(column: FloatArray, binary: bool, high: float) -> FeatureStats | None:
    """A column's mean over a set, with the share at ``high`` (binary) or its quantiles (numeric); ``None`` for an
    empty set."""
    if column.size == 0:
        return None
    if binary:
        return FeatureStats(mean=float(column.mean()), share=float((column == high).mean()))
    return FeatureStats(mean=float(column.mean()), **{k: float(np.quantile(column, p)) for k, p in QUANTILES})


def _features(
    graph: Graph, features: UserFeatures, train: IntArray, sets: dict[str, BoolArray]
) -> list[FeatureProfile]:
    """Per feature column (in the user's units): its kind, its statistics in each set (masks over the training nodes
    ``train``), and the harmful set's standardised difference."""
    x = features.x[train]
    return [_feature(graph, j, x[:, j], sets, features.levels[j]) for j in range(x.shape[1])]


def _feature(
    graph: Graph, j: int, col: FloatArray, sets: dict[str, BoolArray], levels: tuple[str, str] | None
) -> FeatureProfile:
    """Column ``j`` (``col``: its values on the training nodes) in the harmful, helpful and all training nodes."""
    values = np.unique(col)
    binary = values.size <= 2
    high = float(values.max())
    std = float(col.std())
    stats = {name: _feature_stats(col[members], binary, high) for name, members in sets.items()}
    harmful, everyone = stats["harmful"], stats["all"]
    undefined: dict[str, str] = {}
    difference = None
    if harmful is None:
        undefined["difference"] = "the harmful set is empty"
    elif std == 0:
        undefined["difference"] = "the column is constant on the training nodes"
    elif everyone is not None:
        difference = (harmful.mean - everyone.mean) / std
    return FeatureProfile(
        index=j,
        name=_feature_name(graph, j),
        kind="binary" if binary else "numeric",
        high=high if binary else None,
        level=None if not binary or levels is None else levels[1 if high == 1.0 else 0],
        harmful=harmful,
        helpful=stats["helpful"],
        all=everyone,
        difference=difference,
        undefined=undefined or None,
    )


def _feature_name(graph: Graph, j: int) -> str:
    return graph.feature_names[j] if j < len(graph.feature_names) else f"x{j}"


def _fmt(value: float) -> str:
    return f"{value:.4g}"


def _threshold_splits(variable: str, label: str, values: FloatArray, fit: npt.NDArray[np.int64]) -> list[Candidate]:
    """``label > t`` against ``label <= t`` at the fit half's quantiles; NaN (undefined) satisfies neither bound, so
    it goes with ``<= t`` and the text says so."""
    known = values[fit][~np.isnan(values[fit])]
    if known.size == 0:
        return []
    cuts = np.unique(np.quantile(known, np.arange(1, MAX_THRESHOLDS + 1) / (MAX_THRESHOLDS + 1)))
    undefined = bool(np.isnan(values).any())
    out = []
    for t in cuts.tolist():
        mask = np.nan_to_num(values, nan=-np.inf) > t
        if mask.all() or not mask.any():
            continue
        low = f"{label} <= {_fmt(t)}" + (" or no neighbour" if undefined else "")
        out.append(
            Candidate(Condition(variable, ">", t, f"{label} > {_fmt(t)}"), Condition(variable, "<=", t, low), mask)
        )
    return out


def _level_splits(variable: str, codes: npt.NDArray[np.int64], names: list[str]) -> list[Candidate]:
    """``variable = v`` against ``variable ≠ v`` for each level present (one split for two levels)."""
    present = np.unique(codes).tolist()
    if len(present) < 2:
        return []
    levels = present[1:] if len(present) == 2 else present
    return [
        Candidate(
            Condition(variable, "==", v, f"{variable} = {names[v]}"),
            Condition(variable, "!=", v, f"{variable} ≠ {names[v]}"),
            codes == v,
        )
        for v in levels
    ]


def candidate_splits(
    graph: Graph,
    cross: FloatArray,
    fit: npt.NDArray[np.int64],
    train: IntArray | None = None,
    features: UserFeatures | None = None,
) -> list[Candidate]:
    """Every split the rule search may use, as masks over the training nodes ``train`` (default: the graph's
    training split), thresholds from the fit half only, features in the user's units (:func:`user_features`)."""
    train = graph.train_idx.numpy() if train is None else train
    features = user_features(graph) if features is None else features
    group_names = group_labels(graph)
    out = _level_splits("group", graph.sens.numpy()[train], group_names)
    out += _level_splits("label", graph.y.numpy()[train], [str(c) for c in range(graph.num_classes)])
    out += _threshold_splits("degree", "degree", graph.degree.numpy()[train].astype(np.float64), fit)
    out += _threshold_splits("cross_group_share", "cross-group share", cross[train], fit)
    x = features.x[train]
    for j in range(x.shape[1]):
        name = _feature_name(graph, j)
        values = np.unique(x[:, j])
        if values.size == 2:
            lo, hi = float(values[0]), float(values[1])
            levels = features.levels[j]
            texts = (f"{name} = {_fmt(hi)}", f"{name} = {_fmt(lo)}") if levels is None else (levels[1], levels[0])
            out.append(
                Candidate(
                    Condition(f"feature:{name}", "==", hi, texts[0]),
                    Condition(f"feature:{name}", "==", lo, texts[1]),
                    x[:, j] == hi,
                )
            )
        elif values.size > 2:
            out += _threshold_splits(f"feature:{name}", name, x[:, j], fit)
    return out


def _extreme(delta: FloatArray, fraction: float, harmful: bool) -> BoolArray:
    """The ``fraction`` of positions with the most negative (``harmful``) or most positive ΔΓ, of that sign only."""
    k = max(1, int(np.ceil(fraction * delta.size)))
    order = np.argsort(delta if harmful else -delta, kind="stable")[:k]
    members = np.zeros(delta.size, dtype=bool)
    members[order] = True
    return members & (delta < 0 if harmful else delta > 0)


def profile_nodes(
    graph: Graph, delta: FloatArray, *, seed: int = 0, fraction: float = FRACTION, max_depth: int = 2
) -> Profile:
    """The profile of the training nodes by their estimates ``delta`` (ΔΓ per node, in ``graph.train_idx``
    order): the sets' distributions, the features and the rules that hold on the held-out half (seeded)."""
    delta = np.asarray(delta, dtype=np.float64)
    if delta.shape != (graph.train_idx.numel(),):
        raise ValueError(f"delta has shape {delta.shape}, expected one value per training node")
    keep = np.flatnonzero(np.isfinite(delta))  # a node without a ΔΓ (no minimum near the weights) is left out
    if keep.size == 0:
        raise ValueError("no training node has a ΔΓ to profile (no deletion has a minimum near the weights)")
    found = _profile(
        graph, graph.train_idx.numpy()[keep], delta[keep], seed=seed, fraction=fraction, max_depth=max_depth
    )
    if keep.size == delta.size:
        return found
    members = [[int(keep[p]) for p in positions] for positions in found.members]  # back to the whole split's
    for rule, positions in zip(found.document.rules, members, strict=True):
        rule.members = positions
    found.document.definition += (
        f"; over the {keep.size} training nodes with a ΔΓ: {delta.size - keep.size} without one (their deletion has "
        "no minimum near the given weights) are left out"
    )
    return Profile(found.document, members)


def _profile(
    graph: Graph, train: IntArray, delta: FloatArray, *, seed: int, fraction: float, max_depth: int
) -> Profile:
    """:func:`profile_nodes` over the training nodes ``train`` (``delta`` in their order)."""
    cross = cross_group_share(graph)
    sets = {
        "harmful": _extreme(delta, fraction, True),
        "helpful": _extreme(delta, fraction, False),
        "all": np.ones(delta.size, dtype=bool),
    }
    fit, _ = halves(delta.size, seed)
    features = user_features(graph)
    found = find_rules(delta, candidate_splits(graph, cross, fit, train, features), seed=seed, max_depth=max_depth)
    for rule, positions in zip(found.rules, found.members, strict=True):
        rule.members = positions  # the what-if deletes a rule's members (``app/what_ifs/rules.py``)
    document = NodeProfile(
        fraction=fraction,
        definition=(
            f"harmful: the {fraction:.0%} of training nodes with the most negative ΔΓ (ΔΓ < 0 only); helpful: the "
            f"{fraction:.0%} with the largest ΔΓ (ΔΓ > 0 only); all: every training node"
        ),
        sets=ProfileSets(**{name: _set_profile(graph, train, delta, m, cross) for name, m in sets.items()}),
        features=_features(graph, features, train, sets),
        rules=found.rules,
        search=found.search,
        feature_units=features.units,
    )
    return Profile(document, found.members)
