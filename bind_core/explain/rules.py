"""Rules that pick out where the harm concentrates, checked on a held-out half of the training nodes.

A shallow regression tree (CART: least squares, numpy only) is fitted to the per-node estimates ΔΓ of one random
half of the training nodes (seeded), over candidate splits on the sensitive group, the label, the degree, the share
of neighbours from another group and every feature. Each leaf whose mean ΔΓ is negative and below the half's mean is
a candidate rule (the conjunction of the conditions on its path). A candidate is reported only when it holds on the
other half, which the fit never saw (:data:`CRITERION`).

The split search uses the fit half's estimates clipped to their 1st and 99th percentiles (influence estimates are
heavy-tailed; a single extreme node should not decide a split); every reported number is on the raw estimates.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from bind_core.explain.records import ProfileRule, RuleCondition, RuleSearch, RuleStats

__all__ = ["ALPHA", "CRITERION", "Candidate", "Condition", "FoundRules", "find_rules", "halves"]

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]

ALPHA = 0.05
"""The family-wise error rate of the held-out check (Bonferroni over the candidates tested)."""
HARM_SHARE_KEPT = 0.5
"""The least fraction of its fitted harm share a rule must keep on the held-out half."""
MIN_HOLDOUT_SUPPORT = 5
PERMUTATIONS = 2000
CHUNK = 256
"""Candidate splits evaluated together (the memory of the split search: nodes × CHUNK numbers)."""

CRITERION = (
    f"a rule holds when, on the held-out half: it covers at least {MIN_HOLDOUT_SUPPORT} nodes; their mean ΔΓ is "
    f"negative; their share of the half's harm is at least {HARM_SHARE_KEPT:g} of the share fitted; and their mean "
    f"ΔΓ is below that of random sets of the same size (one-sided permutation test, {PERMUTATIONS} permutations) at "
    f"p <= {ALPHA:g} / the number of candidate rules tested (Bonferroni: at most a {ALPHA:g} chance that any rule "
    "is reported from estimates without structure)"
)


@dataclass(frozen=True)
class Condition:
    """One side of a split: ``variable op value`` (op ``==``, ``!=``, ``<=`` or ``>``), as text for people."""

    variable: str
    op: str
    value: float
    text: str

    def record(self) -> RuleCondition:
        """The condition as the results record it."""
        return RuleCondition(variable=self.variable, op=self.op, value=self.value, text=self.text)


@dataclass(frozen=True)
class Candidate:
    """A split of the training nodes: ``mask`` (over all of them) satisfies ``left``, the rest ``right``."""

    left: Condition
    right: Condition
    mask: BoolArray


@dataclass
class _Node:
    idx: IntArray
    conditions: list[Condition]
    children: list[_Node] = field(default_factory=list)


def halves(n: int, seed: int) -> tuple[IntArray, IntArray]:
    """The fit half and the held-out half of ``n`` positions (a seeded random split; the fit half has ``n // 2``)."""
    order = np.random.default_rng(seed).permutation(n).astype(np.int64)
    return np.sort(order[: n // 2]), np.sort(order[n // 2 :])


def _best_split(values: FloatArray, idx: IntArray, candidates: list[Candidate], min_leaf: int) -> int | None:
    """The candidate whose split of ``idx`` lowers the squared error of ``values`` most (``None``: none helps)."""
    if not candidates or idx.size < 2 * min_leaf:
        return None
    v = values[idx]
    n_left = np.empty(len(candidates))
    s_left = np.empty(len(candidates))
    for start in range(0, len(candidates), CHUNK):  # a bounded block of masks at a time (many features, many nodes)
        block = np.stack([c.mask[idx] for c in candidates[start : start + CHUNK]], axis=1).astype(np.float64)
        n_left[start : start + block.shape[1]] = block.sum(axis=0)
        s_left[start : start + block.shape[1]] = v @ block
    n_right = idx.size - n_left
    s_right = v.sum() - s_left
    ok = (n_left >= min_leaf) & (n_right >= min_leaf)
    if not ok.any():
        return None
    with np.errstate(divide="ignore", invalid="ignore"):
        gain = s_left**2 / n_left + s_right**2 / n_right - v.sum() ** 2 / idx.size
    gain = np.where(ok, gain, -np.inf)
    best = int(np.argmax(gain))
    return best if gain[best] > 1e-12 * max(float(v @ v), 1e-300) else None


def _grow(node: _Node, values: FloatArray, candidates: list[Candidate], depth: int, min_leaf: int) -> None:
    if depth == 0:
        return
    best = _best_split(values, node.idx, candidates, min_leaf)
    if best is None:
        return
    c = candidates[best]
    inside = c.mask[node.idx]
    node.children = [
        _Node(node.idx[inside], [*node.conditions, c.left]),
        _Node(node.idx[~inside], [*node.conditions, c.right]),
    ]
    for child in node.children:
        _grow(child, values, candidates, depth - 1, min_leaf)


def _collapse(node: _Node, harmful: Any) -> None:
    """Undo a split whose two sides are both harmful or both not: it does not change which nodes a rule names."""
    for child in node.children:
        _collapse(child, harmful)
    if node.children and all(not c.children for c in node.children):
        left, right = node.children
        if harmful(left.idx) == harmful(right.idx):
            node.children = []


def _leaves(node: _Node) -> list[_Node]:
    return [node] if not node.children else [leaf for c in node.children for leaf in _leaves(c)]


def _simplify(conditions: list[Condition]) -> list[Condition]:
    """Drop a threshold implied by a tighter one on the same variable (``x > 1`` and ``x > 2``: ``x > 2``)."""
    out: list[Condition] = []
    for c in conditions:
        if c.op in ("<=", ">"):
            same = [o for o in out if o.variable == c.variable and o.op == c.op]
            tighter = [o for o in same if (o.value >= c.value if c.op == ">" else o.value <= c.value)]
            if tighter:
                continue
            out = [o for o in out if o not in same]
        out.append(c)
    return out


def _stats(delta: FloatArray, members: BoolArray) -> RuleStats:
    """Support, mean ΔΓ and share of the harm (the sum of −ΔΓ over the nodes with ΔΓ < 0) of ``members``."""
    harm = np.clip(-delta, 0.0, None)
    total = float(harm.sum())
    count = int(members.sum())
    undefined = {}
    if not count:
        undefined["mean_delta"] = "the rule covers no node of this half"
    if total <= 0:
        undefined["harm_share"] = "no node of this half has ΔΓ < 0"
    return RuleStats(
        support=count,
        support_share=count / delta.size if delta.size else None,
        mean_delta=float(delta[members].mean()) if count else None,
        harm_share=float(harm[members].sum()) / total if total > 0 else None,
        undefined=undefined or None,
    )


def _p_value(delta: FloatArray, members: BoolArray, rng: np.random.Generator) -> float:
    """One-sided permutation p-value: how often a random set of the same size has a mean ΔΓ at most the rule's."""
    k = int(members.sum())
    observed = float(delta[members].mean())
    hits, done = 0, 0
    while done < PERMUTATIONS:
        chunk = min(250, PERMUTATIONS - done)
        draws = rng.permuted(np.tile(delta, (chunk, 1)), axis=1)[:, :k].mean(axis=1)
        hits += int((draws <= observed + 1e-15 * abs(observed)).sum())
        done += chunk
    return (hits + 1) / (PERMUTATIONS + 1)


def _holds(fit: RuleStats, held: RuleStats, p: float, tested: int) -> str | None:
    """``None`` when the rule holds on the held-out half (:data:`CRITERION`), else why not."""
    if held.support < MIN_HOLDOUT_SUPPORT:
        return f"covers {held.support} held-out node(s), fewer than {MIN_HOLDOUT_SUPPORT}"
    if held.mean_delta is None or held.mean_delta >= 0:
        return "its mean ΔΓ on the held-out half is not negative"
    if held.harm_share is None or fit.harm_share is None:
        return "its share of the harm is undefined on a half"
    if held.harm_share < HARM_SHARE_KEPT * fit.harm_share:
        return f"its held-out harm share is below {HARM_SHARE_KEPT:g} of the fitted one"
    if p > ALPHA / tested:
        return f"its held-out mean ΔΓ is not significantly low (p = {p:.3g} > {ALPHA:g}/{tested})"
    return None


class FoundRules(NamedTuple):
    """What :func:`find_rules` found: the rules that held, each rule's training positions, and the search."""

    rules: list[ProfileRule]
    """The rules that held on the held-out half, most held-out harm first."""
    members: list[list[int]]
    """Per rule, the positions (in the delta's order) of the training nodes it covers."""
    search: RuleSearch
    """How the rules were searched and checked."""


def find_rules(
    delta: FloatArray, candidates: list[Candidate], *, seed: int, max_depth: int = 2, min_leaf: int | None = None
) -> FoundRules:
    """Fit the tree on one half of ``delta`` (per training node, in the candidates' order), check its harmful leaves
    on the other half, and return the rules that hold (most held-out harm first) with how they were searched."""
    n = delta.size
    fit_idx, held_idx = halves(n, seed)
    leaf = min_leaf if min_leaf is not None else max(10, int(0.05 * fit_idx.size))
    search: dict[str, Any] = {
        "seed": seed,
        "fit_nodes": int(fit_idx.size),
        "holdout_nodes": int(held_idx.size),
        "max_depth": max_depth,
        "min_leaf": leaf,
        "splits_considered": len(candidates),
        "alpha": ALPHA,
        "permutations": PERMUTATIONS,
        "criterion": CRITERION,
    }
    if fit_idx.size < 2 * leaf or held_idx.size < MIN_HOLDOUT_SUPPORT:
        return FoundRules([], [], RuleSearch(**search, tested=0, rejected=0, reason="too few training nodes"))
    fit_delta = delta[fit_idx]
    lo, hi = np.quantile(fit_delta, [0.01, 0.99])
    clipped = np.zeros(n)
    clipped[fit_idx] = np.clip(fit_delta, lo, hi)
    fit_mean = float(fit_delta.mean())

    def harmful(idx: IntArray) -> bool:
        mean = float(delta[idx].mean())
        return mean < 0 and mean < fit_mean

    root = _Node(fit_idx, [])
    _grow(root, clipped, candidates, max_depth, leaf)
    _collapse(root, harmful)
    leaves = [lf for lf in _leaves(root) if lf.conditions and harmful(lf.idx)]
    rng = np.random.default_rng(seed + 1)
    held_delta = delta[held_idx]
    rules: list[tuple[ProfileRule, list[int]]] = []
    for lf in leaves:
        members = np.ones(n, dtype=bool)
        for cond in lf.conditions:
            members &= _condition_mask(cond, candidates)
        fit = _stats(fit_delta, members[fit_idx])
        held = _stats(held_delta, members[held_idx])
        p = _p_value(held_delta, members[held_idx], rng) if held.support else 1.0
        if _holds(fit, held, p, len(leaves)) is None:
            rules.append((_rule(lf.conditions, fit, held, p), np.flatnonzero(members).tolist()))
    rules.sort(key=lambda r: -float(r[0].holdout.harm_share or 0.0))  # a rule that held has a held-out harm share
    reason = None
    if not rules:
        reason = (
            "no split of the fit half separates a harmful subset"
            if not leaves
            else "no candidate rule held on the held-out half"
        )
    checked = RuleSearch(**search, tested=len(leaves), rejected=len(leaves) - len(rules), reason=reason)
    return FoundRules([r for r, _ in rules], [m for _, m in rules], checked)


def _rule(conditions: list[Condition], fit: RuleStats, held: RuleStats, p: float) -> ProfileRule:
    """A rule that held: its conditions (simplified), its figures on each half and its p-value."""
    simplified = _simplify(conditions)
    return ProfileRule(
        conditions=[c.record() for c in simplified],
        text=" and ".join(c.text for c in simplified),
        fit=fit,
        holdout=held,
        p_value=p,
    )


def _condition_mask(cond: Condition, candidates: list[Candidate]) -> BoolArray:
    for c in candidates:
        if c.left == cond:
            return c.mask
        if c.right == cond:
            return ~c.mask
    raise KeyError(cond.text)
