"""Utility and fairness metrics: accuracy, ROC-AUC, F1, ΔSP, ΔEO and PDD (Γ_SP, Γ_EO).

PDD (the paper's probabilistic distribution disparity) is the Wasserstein-1 distance between the sensitive
groups' distributions of predicted probabilities. In 1-D it is computed exactly by quantile matching
(:func:`wasserstein_1d`), which is differentiable almost everywhere in the inputs, so ``Γ`` can be
differentiated with respect to model parameters. With more than two groups every metric is the mean over
all group pairs (ΔSP, ΔEO: mean absolute pairwise difference of rates).

**Undefined is not zero.** A gap needs two groups to compare: ΔEO and Γ_EO need two groups with a positive
node (each class's nodes, for more than two classes), ΔSP and Γ_SP two groups with any node. Where they are
missing, :func:`delta_sp`, :func:`delta_eo` and :func:`evaluate` give NaN (``null`` in JSON) and
:func:`undefined_reasons` says why, rather than 0, which would read as "perfectly fair". The tensor functions
(:func:`pdd`, :func:`gamma_sp`, :func:`gamma_eo`, :func:`gamma`) keep 0 there: they are the differentiable
influence objective, which the audit only forms over groups that have positives
(:func:`bind_core.data.groups.included_groups`). Probabilities that are not finite are refused
(:func:`~bind_core.models.gnn.require_finite`), never turned into predictions.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import cast

import numpy as np
import torch
from scipy.stats import rankdata
from torch import Tensor

from bind_core.errors import MetricInputError
from bind_core.fairness.records import MetricValues, WorstPair
from bind_core.models.gnn import require_finite


# ---------------------------------------------------------------------- utility
def accuracy(y_true: Tensor, y_pred: Tensor) -> float:
    """Fraction of correct predictions."""
    return float((y_true == y_pred).double().mean())


def roc_auc(y_true: Tensor, proba: Tensor) -> float:
    """ROC-AUC from class probabilities ``[k, C]``; macro one-vs-rest for ``C > 2``.

    Computed with the Mann-Whitney rank statistic (ties get average ranks), equal to scikit-learn's value.
    Classes absent from ``y_true`` are skipped; returns NaN if no class can be scored.
    """
    y = y_true.cpu().numpy()
    p = proba.detach().double().cpu().numpy()
    classes = [1] if p.shape[1] == 2 else list(range(p.shape[1]))
    scores = []
    for c in classes:
        pos = y == c
        n_pos, n_neg = int(pos.sum()), int((~pos).sum())
        if n_pos == 0 or n_neg == 0:
            continue
        ranks = rankdata(p[:, c])
        scores.append((ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))
    return float(np.mean(scores)) if scores else float("nan")


def f1_score(y_true: Tensor, y_pred: Tensor, num_classes: int = 2) -> float:
    """F1 of the positive class (label 1) for binary labels; macro F1 otherwise."""
    classes = [1] if num_classes == 2 else list(range(num_classes))
    values = []
    for c in classes:
        tp = int(((y_pred == c) & (y_true == c)).sum())
        fp = int(((y_pred == c) & (y_true != c)).sum())
        fn = int(((y_pred != c) & (y_true == c)).sum())
        values.append(2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0)
    return float(np.mean(values))


# ---------------------------------------------------------------------- classic group fairness
def _pairwise_gap(rates: list[float]) -> float:
    """Mean absolute gap over pairs of rates; NaN with fewer than two (a gap needs two groups)."""
    pairs = list(itertools.combinations(rates, 2))
    return float(np.mean([abs(a - b) for a, b in pairs])) if pairs else float("nan")


def delta_sp(
    y_pred: Tensor,
    sens: Tensor,
    *,
    num_groups: int | None = None,
    num_classes: int = 2,
    groups: Sequence[int] | None = None,
) -> float:
    """Statistical parity difference |P(ŷ=1|s=0) − P(ŷ=1|s=1)|.

    Multi-valued ``sens``: mean over group pairs. Multi-class: mean over classes of the gap in P(ŷ=c|s).
    Groups with no node in ``sens`` are skipped; ``groups`` restricts the pairs to those groups (the groups
    an audit includes, see :func:`bind_core.data.groups.included_groups`). NaN with fewer than two such groups.
    """
    groups = _groups(sens, num_groups, groups)
    classes = [1] if num_classes == 2 else list(range(num_classes))
    gaps = []
    for c in classes:
        rates = [float((y_pred[sens == g] == c).double().mean()) for g in groups]
        gaps.append(_pairwise_gap(rates))
    return float(np.mean(gaps))


def delta_eo(
    y_true: Tensor,
    y_pred: Tensor,
    sens: Tensor,
    *,
    num_groups: int | None = None,
    num_classes: int = 2,
    groups: Sequence[int] | None = None,
) -> float:
    """Equal opportunity difference |P(ŷ=1|y=1,s=0) − P(ŷ=1|y=1,s=1)| (multi-group/class as :func:`delta_sp`).

    NaN when fewer than two groups have a positive node (for more than two classes: when any class's nodes
    fall in fewer than two groups): a true-positive rate needs positives, and 0 would read as equal rates.
    """
    classes = [1] if num_classes == 2 else list(range(num_classes))
    gaps = []
    for c in classes:
        mask = y_true == c
        present = _groups(sens[mask], num_groups, groups)
        rates = [float((y_pred[mask][sens[mask] == g] == c).double().mean()) for g in present]
        gaps.append(_pairwise_gap(rates))
    return float(np.mean(gaps))


def undefined_reasons(
    y: Tensor,
    sens: Tensor,
    *,
    num_groups: int | None = None,
    num_classes: int = 2,
    groups: Sequence[int] | None = None,
    lam: float = 0.5,
    group_names: Sequence[str] = (),
    class_names: Sequence[str] = (),
) -> dict[str, str]:
    """``{metric: why it is undefined}`` for the metrics of :class:`FairnessReport` these nodes cannot define.

    ΔSP and Γ_SP need two of the ``groups`` among the nodes; ΔEO and Γ_EO two with a positive node (for more
    than two classes, two with nodes of each class c); Γ both parts it weighs (only Γ_SP when ``lam`` is 1);
    ROC-AUC a positive and a negative node.

    Args:
        group_names, class_names: the groups and the classes in the user's terms (``region=south``,
            ``approved=1``), by code; where absent the reasons say ``group 1`` and ``class 1`` (``y=1``).
    """

    def group(g: int) -> str:
        return group_names[g] if g < len(group_names) else f"group {g}"

    def groups_text(codes: Sequence[int]) -> str:
        return ", ".join(group(g) for g in codes) or "none"

    out: dict[str, str] = {}
    present = _groups(sens, num_groups, groups)
    too_few = f"fewer than two groups among the nodes (present: {groups_text(present)})"
    if len(present) < 2:
        out["delta_sp"] = out["gamma_sp"] = too_few
    classes = [1] if num_classes == 2 else list(range(num_classes))
    for c in classes:
        with_c = _groups(sens[y == c], num_groups, groups)
        if len(with_c) < 2:
            named = class_names[c] if c < len(class_names) else f"y={c}"
            kind = f"a positive ({named}) node" if num_classes == 2 else f"a node of class {named}"
            missing = [g for g in present if g not in with_c]
            if len(present) < 2:  # no pair of groups at all: the same reason as ΔSP's
                why = too_few
            else:
                verb = "has" if len(missing) == 1 else "have"
                why = f"fewer than two groups have {kind} ({groups_text(missing)} {verb} none)"
            out["delta_eo"] = out["gamma_eo"] = f"{why}, so true-positive rates cannot be compared"
            break
    weighed = [k for k, w in (("gamma_sp", lam), ("gamma_eo", 1 - lam)) if w > 0 and k in out]
    if weighed:
        out["gamma"] = f"{_SHOWN[weighed[0]]} is undefined: {out[weighed[0]]}"
    if torch.unique(y).numel() < 2:
        out["auc"] = "the nodes hold only one class, so ROC-AUC is undefined"
    return out


_SHOWN = {"gamma_sp": "Γ_SP", "gamma_eo": "Γ_EO"}


def _groups(sens: Tensor, num_groups: int | None, groups: Sequence[int] | None = None) -> list[int]:
    present = set(torch.unique(sens).tolist())
    universe = range(num_groups) if num_groups is not None else sorted(present)
    if groups is not None:
        chosen = {int(g) for g in groups}
        universe = [g for g in universe if g in chosen]
    return [g for g in universe if g in present]


# ---------------------------------------------------------------------- Wasserstein / PDD
def wasserstein_1d(a: Tensor, b: Tensor) -> Tensor:
    """Exact Wasserstein-1 distance between two empirical 1-D distributions (uniform weights).

    ``W1 = ∫₀¹ |F_a⁻¹(t) − F_b⁻¹(t)| dt``. Both quantile functions are step functions with breakpoints at
    ``i/len(a)`` and ``j/len(b)``; between consecutive breakpoints of the merged grid both are constant, so the
    integral is an exact finite sum. Differentiable in ``a`` and ``b`` (through the sort) almost everywhere.

    Shapes: ``a: [..., n]``, ``b: [..., m]`` → ``[...]`` (leading dimensions are a batch of independent
    pairs). Equal to ``scipy.stats.wasserstein_distance(a, b)``.
    """
    n, m = a.shape[-1], b.shape[-1]
    if n == 0 or m == 0:
        raise ValueError("wasserstein_1d needs two non-empty samples")
    a_sorted = torch.sort(a, dim=-1).values
    b_sorted = torch.sort(b, dim=-1).values
    # Breakpoints as integers on the common denominator n*m: i*m (from a) and j*n (from b).
    ticks: Tensor = torch.unique(
        torch.cat([torch.arange(n + 1, device=a.device) * m, torch.arange(m + 1, device=a.device) * n])
    )
    left, width = ticks[:-1], (ticks[1:] - ticks[:-1]).to(a.dtype) / (n * m)
    return ((a_sorted[..., left // m] - b_sorted[..., left // n]).abs() * width).sum(dim=-1)


def pdd(
    scores: Tensor,
    sens: Tensor,
    *,
    num_groups: int | None = None,
    batched: bool = False,
    groups: Sequence[int] | None = None,
) -> Tensor:
    """Mean Wasserstein-1 distance between the groups' score distributions over all group pairs.

    Args:
        scores: ``[k]`` (the probability of the positive class; exact 1-D W1) or ``[k, C]`` (probability
            vectors; exact optimal transport with POT, Euclidean ground cost, differentiable in ``scores``).
        sens: ``[k]`` group of each node. Groups absent from ``sens`` are skipped.
        batched: ``scores`` is ``[B, k]``, a batch of 1-D score vectors over the same nodes → ``[B]``.
        groups: only pairs of these groups (default: all).
    """
    if batched or scores.ndim == 1:
        return GroupPDD(sens, num_groups=num_groups, groups=groups)(scores)
    present = _groups(sens, num_groups, groups)
    if len(present) < 2:
        return scores.new_zeros(())
    dists = [_w1_vectors(scores[sens == g], scores[sens == h]) for g, h in itertools.combinations(present, 2)]
    return torch.stack(dists).mean(dim=0)


class GroupPDD:
    """:func:`pdd` of 1-D scores over fixed nodes, for many score vectors: the groups' positions and each pair's
    merged quantile grid (:func:`wasserstein_1d`) are made once, and each group's scores are sorted once per call
    rather than once per pair. Equal to :func:`pdd` exactly (the same sums in the same order).

    ``subset`` (a mask over the nodes) restricts it to those nodes (Γ_EO's positives) while the scores passed stay
    those of every node. Call with ``[k]`` scores (→ ``[]``) or a batch ``[B, k]`` (→ ``[B]``).
    """

    def __init__(
        self,
        sens: Tensor,
        *,
        num_groups: int | None = None,
        groups: Sequence[int] | None = None,
        subset: Tensor | None = None,
    ) -> None:
        inside = torch.ones_like(sens, dtype=torch.bool) if subset is None else subset
        present = _groups(sens[inside], num_groups, groups)
        self.index = {g: torch.nonzero(inside & (sens == g)).flatten() for g in present}
        self.pairs: list[tuple[int, int, Tensor, Tensor, Tensor, int]] = []
        for g, h in itertools.combinations(present, 2):
            n, m = self.index[g].numel(), self.index[h].numel()
            ticks = torch.unique(
                torch.cat([torch.arange(n + 1, device=sens.device) * m, torch.arange(m + 1, device=sens.device) * n])
            )
            left = ticks[:-1]
            self.pairs.append((g, h, left // m, left // n, ticks[1:] - left, n * m))
        self._widths: dict[torch.dtype, list[Tensor]] = {}

    def __call__(self, scores: Tensor) -> Tensor:
        if not self.pairs:
            return scores.new_zeros(scores.shape[:-1])
        ordered = {g: torch.sort(scores[..., idx], dim=-1).values for g, idx in self.index.items()}
        widths = self._widths.get(scores.dtype)
        if widths is None:  # each pair's grid widths over n·m, in the scores' dtype: made once per dtype
            widths = self._widths[scores.dtype] = [steps.to(scores.dtype) / nm for *_, steps, nm in self.pairs]
        dists = [
            ((ordered[g][..., a] - ordered[h][..., b]).abs() * width).sum(dim=-1)
            for (g, h, a, b, _, _), width in zip(self.pairs, widths, strict=True)
        ]
        return torch.stack(dists).mean(dim=0)


def _w1_vectors(a: Tensor, b: Tensor) -> Tensor:
    import ot  # POT: imported lazily, only multi-class labels need it

    cost = torch.cdist(a, b)
    wa = torch.full((a.shape[0],), 1.0 / a.shape[0], dtype=a.dtype, device=a.device)
    wb = torch.full((b.shape[0],), 1.0 / b.shape[0], dtype=b.dtype, device=b.device)
    return cast(Tensor, ot.emd2(wa, wb, cost))


def _positive_scores(proba: Tensor) -> Tensor:
    return proba[:, 1] if proba.shape[1] == 2 else proba


GroupsArg = Sequence[int] | None


def gamma_sp(proba: Tensor, sens: Tensor, *, num_groups: int | None = None, groups: GroupsArg = None) -> Tensor:
    """Γ_SP: PDD of the predicted probabilities over the given nodes. ``proba: [k, C]``."""
    return pdd(_positive_scores(proba), sens, num_groups=num_groups, groups=groups)


def gamma_eo(
    proba: Tensor, y: Tensor, sens: Tensor, *, num_groups: int | None = None, groups: GroupsArg = None
) -> Tensor:
    """Γ_EO: PDD over the nodes with ``y = 1`` (binary), or the mean over classes c of the PDD of P(c)
    over the nodes with ``y = c`` (multi-class)."""
    if proba.shape[1] == 2:
        mask = y == 1
        return pdd(proba[mask, 1], sens[mask], num_groups=num_groups, groups=groups)
    parts = [pdd(proba[y == c, c], sens[y == c], num_groups=num_groups, groups=groups) for c in range(proba.shape[1])]
    return torch.stack(parts).mean()


def gamma(
    proba: Tensor,
    y: Tensor,
    sens: Tensor,
    *,
    lam: float = 0.5,
    num_groups: int | None = None,
    groups: GroupsArg = None,
) -> Tensor:
    """Γ = lam·Γ_SP + (1 − lam)·Γ_EO, differentiable in ``proba``."""
    return lam * gamma_sp(proba, sens, num_groups=num_groups, groups=groups) + (1 - lam) * gamma_eo(
        proba, y, sens, num_groups=num_groups, groups=groups
    )


# ---------------------------------------------------------------------- report
@dataclass(frozen=True)
class FairnessReport:
    """Utility and fairness of predictions on one set of nodes. Rates are fractions in [0, 1].

    A metric these nodes cannot define is NaN here, ``None`` in :meth:`values` and ``null`` in its JSON
    (:func:`bind_core.codec.encode`), with its reason in ``undefined`` (:func:`undefined_reasons`).
    """

    nodes: int
    accuracy: float
    auc: float
    f1: float
    delta_sp: float
    delta_eo: float
    gamma_sp: float
    gamma_eo: float
    gamma: float
    undefined: dict[str, str] = field(default_factory=dict)

    def values(self) -> MetricValues:
        """The metrics as the results record them.

        Returns:
            The :class:`~bind_core.fairness.records.MetricValues`: an undefined metric is ``None``, and ``undefined``
            (only when some metric is) maps it to the reason.
        """
        numbers = {k: v for k, v in asdict(self).items() if k not in ("nodes", "undefined")}
        for name in self.undefined:
            numbers[name] = None
        return MetricValues(nodes=self.nodes, undefined=dict(self.undefined) or None, **numbers)


def evaluate(
    proba: Tensor,
    y: Tensor,
    sens: Tensor,
    *,
    lam: float = 0.5,
    num_groups: int | None = None,
    groups: GroupsArg = None,
    group_names: Sequence[str] = (),
    class_names: Sequence[str] = (),
) -> FairnessReport:
    """All metrics for predicted probabilities ``proba: [k, C]`` of nodes with labels ``y`` and groups ``sens``.

    ``groups``: the fairness metrics are means over pairs of these groups only; accuracy, AUC and F1 are
    over all the given nodes. Metrics the nodes cannot define are NaN, with the reasons in ``undefined``, said with
    ``group_names`` and ``class_names`` (the user's terms, by code) where given.

    Raises:
        MetricInputError: ``proba`` is not a ``[k, C]`` matrix (``C >= 2``) of probabilities whose rows sum to 1
            (logits, or a 1-D vector of one class's probability), ``y`` or ``sens`` is not one integer code per row
            of ``proba``, or ``y`` holds a class ``proba`` has no column for (the message names the argument).
        NonFiniteError: ``proba`` holds NaN or inf.
    """
    proba, y, sens = _checked(proba, y, sens)
    num_classes = proba.shape[1]
    pred = proba.argmax(dim=1)
    undefined = undefined_reasons(
        y,
        sens,
        num_groups=num_groups,
        num_classes=num_classes,
        groups=groups,
        lam=lam,
        group_names=group_names,
        class_names=class_names,
    )
    nan = float("nan")
    g_sp = nan if "gamma_sp" in undefined else float(gamma_sp(proba, sens, num_groups=num_groups, groups=groups))
    g_eo = nan if "gamma_eo" in undefined else float(gamma_eo(proba, y, sens, num_groups=num_groups, groups=groups))
    g = nan if "gamma" in undefined else sum(w * v for w, v in ((lam, g_sp), (1 - lam, g_eo)) if w > 0)
    return FairnessReport(
        nodes=int(y.numel()),
        accuracy=accuracy(y, pred),
        auc=roc_auc(y, proba),
        f1=f1_score(y, pred, num_classes),
        delta_sp=delta_sp(pred, sens, num_groups=num_groups, num_classes=num_classes, groups=groups),
        delta_eo=delta_eo(y, pred, sens, num_groups=num_groups, num_classes=num_classes, groups=groups),
        gamma_sp=g_sp,
        gamma_eo=g_eo,
        gamma=g,
        undefined=undefined,
    )


def _checked(proba: Tensor, y: Tensor, sens: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """:func:`evaluate`'s inputs checked: ``proba`` a finite ``[k, C]`` matrix of probabilities (rows summing to 1),
    ``y`` and ``sens`` ``k`` integer codes each (integral floats taken as integers), ``y`` in ``[0, C)``."""
    proba = torch.as_tensor(proba).detach()
    if proba.ndim != 2 or proba.shape[1] < 2:
        hint = "; for one class's probability p, pass torch.stack([1 - p, p], dim=1)" if proba.ndim == 1 else ""
        raise MetricInputError(
            "proba", f"expected a [nodes, classes] matrix with at least 2 classes, got shape {list(proba.shape)}{hint}"
        )
    require_finite(proba)
    k = int(proba.shape[0])
    if k:
        sums = proba.double().sum(dim=1)
        off = ((sums - 1).abs() > 1e-4) | (proba < 0).any(dim=1)
        if bool(off.any()):
            row = int(off.nonzero()[0])
            raise MetricInputError(
                "proba",
                f"rows must be probabilities (non-negative, summing to 1): {int(off.sum())} of {k} are not (row {row} "
                f"sums to {float(sums[row]):.4g}); pass softmax(logits, dim=1), not logits or scores",
            )
    codes = []
    for name, values in (("y", y), ("sens", sens)):
        t = torch.as_tensor(values).detach()
        if t.ndim != 1 or t.shape[0] != k:
            raise MetricInputError(name, f"expected one code per row of proba ({k}), got shape {list(t.shape)}")
        if t.is_floating_point() or t.dtype == torch.bool:
            if t.is_floating_point() and not bool((t == t.round()).all()):
                raise MetricInputError(name, "expected integer codes, got non-integral values")
            t = t.long()
        if k and int(t.min()) < 0:
            raise MetricInputError(name, f"codes must be non-negative, got {int(t.min())}")
        codes.append(t)
    if k and int(codes[0].max()) >= proba.shape[1]:
        raise MetricInputError(
            "y",
            f"class {int(codes[0].max())} has no column in proba ({proba.shape[1]} classes: 0..{proba.shape[1] - 1})",
        )
    return proba, codes[0], codes[1]


WORST_PAIR_METRICS = ("delta_sp", "delta_eo", "gamma_sp", "gamma_eo")


def worst_pairs(
    proba: Tensor, y: Tensor, sens: Tensor, *, groups: Sequence[int] | None = None
) -> dict[str, WorstPair | None]:
    """For ΔSP, ΔEO, Γ_SP and Γ_EO: the largest value over pairs of ``groups`` (default: all present) and
    the pair, ``{metric: WorstPair(value, groups=[a, b])}`` (``None`` when no pair defines it).

    Each pair's value is the metric restricted to that pair, so the mean over pairs is the audit's figure; a
    pair that cannot define a metric (ΔEO of a pair with a group without positives) is skipped for it.
    """
    proba = proba.detach()
    present = _groups(sens, None, groups)
    out: dict[str, WorstPair | None] = dict.fromkeys(WORST_PAIR_METRICS)
    for a, b in itertools.combinations(present, 2):
        values = evaluate(proba, y, sens, groups=[a, b]).values()
        for name in WORST_PAIR_METRICS:
            value, best = getattr(values, name), out[name]
            if value is not None and (best is None or value > best.value):
                out[name] = WorstPair(value=float(value), groups=[int(a), int(b)])
    return out
