"""The verdict first: an audit's results said in a few plain sentences, in the user's terms.

:func:`summarize` reads the typed results (:class:`~bind_core.pipeline.results.AuditResults`) and says

* which group gets the positive prediction (and, among the truly positive, the true-positive rate) more often, by
  how much, with the gap's bootstrap interval and whether the difference of the two rates excludes 0 (a normal
  approximation over the two groups' test nodes, so that a gap within chance is said to be so). With more than two
  groups the metric is the mean gap over the pairs of groups: the sentence names the pair with the widest gap and
  its own gap beside the mean, and that pair's interval is widened for the pairs compared (Bonferroni), since it was
  picked as the widest. With more than two classes the metric is the mean gap over the classes: the sentence quotes
  the class (and pair) with the widest gap in the groups' per-class rates, widened for classes times pairs;
* the share of the harm the most harmful training nodes carry, their ids, and the profile's strongest rule that held
  on the held-out half;
* what the best debiasing budget did, which budgets backfired, and whether the selection beat deleting random nodes,
  or that this was not checked and how to check it;
* how far to trust the attribution: the self-check's Pearson with a bootstrap interval over the checked nodes.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from bind_core.debiasing.debias import said
from bind_core.fairness.records import GroupMetrics, Intervals
from bind_core.influence.records import InfluenceSummary
from bind_core.pipeline.label_check import many_classes
from bind_core.pipeline.output_order import supplied_model_doubt
from bind_core.pipeline.results import AuditResults, DebiasingRow, MetricValues, Validation
from bind_core.pipeline.results_summary import (
    AttributionFinding,
    DebiasingFinding,
    GapFinding,
    Summary,
    TrustFinding,
)

Z95 = 1.959963984540054
"""The standard normal's 97.5th percentile: a two-sided 95% interval."""
TRUST_BOOTSTRAP = 2000
"""Resamples of the checked nodes for the interval on the self-check's Pearson."""
TRUSTWORTHY = 0.9
"""The self-check's Pearson, and ROUGH its interval's lower bound, above which the attribution is trustworthy."""
ROUGH = 0.5
CHANCE_FLAG = "debias_seeds (on the command line: --debias-seeds 1,10,100)"
"""How to run the check against chance, named for both edges."""


def summarize(results: AuditResults) -> Summary:
    """The audit's verdict and findings (see the module docstring).

    Args:
        results: an audit's typed results (without a summary, or with one: it is not read).

    Returns:
        The :class:`~bind_core.pipeline.results_summary.Summary`.
    """
    labels = _labels(results)
    positive = positive_class(results)
    bias = [_gap(results, metric, labels, positive) for metric in ("delta_sp", "delta_eo")]
    attribution = _attribution(results)
    debiasing = _debiasing(results.debiasing, results.metrics.test)
    trust = _trust(results.validation, results.influence_summary)
    many = _many_classes(results)
    measured = (
        bias[0].text if many else _one_class(results, positive) or _verdict(bias[0], bias[0].label_class or positive)
    )
    withheld = supplied_model_doubt(results.supplied_model) or many
    # the figure as measured, after the reason it cannot be read as a verdict
    verdict = measured if withheld is None else f"No verdict: {withheld}. As measured: {measured}"
    lines = [verdict, *(b.text for b in bias[1:])]
    lines += [f.text for f in (attribution, debiasing) if f is not None]
    lines.append(trust.text)
    sensitive = results.graph.sensitive or ["sens"]
    return Summary(
        verdict=verdict,
        withheld=withheld,
        sensitive=sensitive,
        bias=bias,
        attribution=attribution,
        debiasing=debiasing,
        trust=trust,
        text="\n".join(lines),
    )


# ---------------------------------------------------------------------- bias
def _labels(results: AuditResults) -> list[str]:
    graph = results.graph
    if graph.group_labels:
        return graph.group_labels
    return [g.name for g in sorted(results.metrics.groups, key=lambda g: g.group)]


def positive_class(results: AuditResults) -> str:
    """The positive class in the user's terms: the label column and its last class, ``approved=1``."""
    graph = results.graph
    names = graph.class_names or [str(c) for c in range(graph.classes)]
    return f"{graph.label or 'y'}={names[-1]}"


def _positives(results: AuditResults, group: int) -> int:
    return int(sum(results.metrics.histograms.positives.get(str(group), [])))


@dataclass(frozen=True)
class _Compared:
    """The two groups a gap finding names (``a`` the higher rate), their rates and node counts, and what the pair
    was picked from: ``pairs`` of groups times ``classes`` (more than two classes: ``label_class`` is the class)."""

    a: GroupMetrics
    b: GroupMetrics
    ra: float
    rb: float
    na: int
    nb: int
    pairs: int
    classes: int = 1
    label_class: str | None = None


def _gap(results: AuditResults, metric: str, labels: list[str], positive: str) -> GapFinding:
    value = getattr(results.metrics.test, metric)
    interval = _interval(results, metric)
    found = _compared(results, metric) if value is not None else None
    if found is None:
        why = (results.metrics.test.undefined or {}).get(metric, "no pair of groups defines it")
        name = "ΔSP" if metric == "delta_sp" else "ΔEO"
        return GapFinding(
            metric=metric,
            value=value,
            interval=interval,
            higher=None,
            lower=None,
            higher_rate=None,
            lower_rate=None,
            difference_interval=None,
            excludes_zero=None,
            text=f"{name} is undefined: {why}.",
        )
    diff = _difference_interval(found.ra, found.na, found.rb, found.nb, found.pairs * found.classes)
    finding = GapFinding(
        metric=metric,
        value=value,
        interval=interval,
        higher=labels[found.a.group],
        lower=labels[found.b.group],
        higher_rate=found.ra,
        lower_rate=found.rb,
        difference_interval=diff,
        excludes_zero=None if diff is None else diff[0] > 0,
        text="",
        pairs=found.pairs,
        pair_gap=found.ra - found.rb,
        label_class=found.label_class,
    )
    finding.text = _gap_text(finding, found.label_class or positive, found.na, found.nb, found.classes)
    return finding


def _compared(results: AuditResults, metric: str) -> _Compared | None:
    """The pair of groups (and, with more than two classes, the class) a gap finding quotes: the metric's worst pair
    with the positive class's rates; with more than two classes the pair and class of the widest gap in the classes'
    own rates (``class_rates``, ``class_tprs``), since the metric is then their mean. ``None`` where no pair has both
    rates."""
    groups = {g.group: g for g in results.metrics.groups}
    included = [g for g in groups.values() if g.included]
    names = results.graph.class_names or []
    per_class = "class_rates" if metric == "delta_sp" else "class_tprs"
    if len(names) > 2 and included and all(getattr(g, per_class) is not None for g in included):
        return _widest_class(results, metric, included, per_class, names)
    rate = "positive_rate" if metric == "delta_sp" else "tpr"
    pair = results.metrics.test.worst_pairs.get(metric)
    if pair is None or any(getattr(groups[g], rate) is None for g in pair.groups):
        return None
    a, b = sorted((groups[g] for g in pair.groups), key=lambda g: -float(getattr(g, rate)))
    na, nb = (a.size, b.size) if metric == "delta_sp" else (_positives(results, a.group), _positives(results, b.group))
    rated = sum(1 for g in included if getattr(g, rate) is not None)  # the pairs averaged
    return _Compared(a, b, float(getattr(a, rate)), float(getattr(b, rate)), na, nb, max(1, rated * (rated - 1) // 2))


def _widest_class(
    results: AuditResults, metric: str, included: list[GroupMetrics], per_class: str, names: list[str]
) -> _Compared | None:
    """More than two classes: over the pairs of ``included`` groups and the classes, the widest gap in ``per_class``
    rates (its counts: the groups' sizes for ΔSP, their test nodes of the class for ΔEO)."""
    label = results.graph.label or "y"
    best: tuple[float, GroupMetrics, GroupMetrics, int] | None = None
    pairs = 0
    for x, y in itertools.combinations(included, 2):
        pairs += 1
        for c, (rx, ry) in enumerate(zip(getattr(x, per_class), getattr(y, per_class), strict=True)):
            if rx is not None and ry is not None and (best is None or abs(rx - ry) > best[0]):
                best = (abs(rx - ry), x, y, c) if rx >= ry else (abs(rx - ry), y, x, c)
    if best is None:
        return None
    _, a, b, c = best

    def count(g: GroupMetrics) -> int:
        return g.size if metric == "delta_sp" else int((g.class_counts or [0] * len(names))[c])

    ra, rb = float(getattr(a, per_class)[c]), float(getattr(b, per_class)[c])
    return _Compared(a, b, ra, rb, count(a), count(b), pairs, len(names), f"{label}={names[c]}")


def _interval(results: AuditResults, metric: str) -> list[float] | None:
    intervals = results.metrics.intervals
    found = None if intervals is None else getattr(intervals, metric)
    if found is None or found.low is None or found.high is None:
        return None
    return [found.low, found.high]


def _difference_interval(ra: float, na: int, rb: float, nb: int, pairs: int = 1) -> list[float] | None:
    """The 95% normal-approximation interval of ``ra − rb``, two independent proportions over ``na`` and ``nb``; for a
    pair picked as the widest of ``pairs``, each pair's at ``1 − 0.05/pairs`` (Bonferroni), so that the family of
    intervals covers all the pairs' differences 95% of the time."""
    if na < 1 or nb < 1:
        return None
    se = math.sqrt(ra * (1 - ra) / na + rb * (1 - rb) / nb)
    z = Z95 if pairs <= 1 else NormalDist().inv_cdf(1 - 0.025 / pairs)
    d = ra - rb
    return [d - z * se, d + z * se]


def _pct(v: float | None) -> str:
    return "n/a" if v is None else f"{100 * v:.1f}%"


def _points(v: float | None) -> str:
    return "n/a" if v is None else f"{100 * v:.1f}"


def _gap_text(f: GapFinding, positive: str, na: int, nb: int, classes: int = 1) -> str:
    interval = "" if f.interval is None else f" (95% interval {100 * f.interval[0]:.1f} to {100 * f.interval[1]:.1f})"
    name = "ΔSP" if f.metric == "delta_sp" else "ΔEO"
    pairs = f.pairs or 1
    if classes > 1:
        over = f"the {classes} classes" if pairs == 1 else f"the {classes} classes and the {pairs} pairs of groups"
        gap = (
            f"{_points(f.pair_gap)} points, the widest gap of {over}; {name}, the mean gap over the classes"
            f"{'' if pairs == 1 else ' and pairs'}, is {_points(f.value)} points{interval}"
        )
    elif pairs > 1:
        gap = (
            f"{_points(f.pair_gap)} points, the widest gap of the {pairs} pairs of groups; {name}, the mean gap over "
            f"the pairs, is {_points(f.value)} points{interval}"
        )
    else:
        gap = f"a gap of {100 * (f.value or 0):.1f} points{interval}"
    nodes = "test nodes" if f.metric == "delta_sp" else f"test nodes truly {positive}"
    chance = "clearly more than chance" if f.excludes_zero else "within what chance alone could give"
    chance += f" ({na} and {nb} {nodes})"
    often = "equally often" if f.higher_rate == f.lower_rate else "more often"
    pair = f"{f.higher} and {f.lower} are" if f.higher_rate == f.lower_rate else f"{f.higher} is"
    than = "" if f.higher_rate == f.lower_rate else f" than {f.lower}"
    if f.metric == "delta_sp":
        what = f"{pair} predicted {positive} {often}{than}"
    else:
        what = f"Among the test nodes truly {positive}, {pair} recognised {often}{than}"
    return f"{what}: {_pct(f.higher_rate)} vs {_pct(f.lower_rate)}, {gap}; {chance}."


def _one_class(results: AuditResults, positive: str) -> str | None:
    """With two classes, where the model predicts the positive class for no test node or for every one of the
    included groups' test nodes: the verdict that says so (the predicted rates cannot differ, whatever the groups'
    predicted probabilities do); ``None`` otherwise."""
    rates = {g.positive_rate for g in results.metrics.groups if g.included}
    if results.graph.classes != 2 or rates not in ({0.0}, {1.0}):
        return None
    which = "none" if rates == {0.0} else "every one"
    gamma = results.metrics.test.gamma_sp
    pdd = "" if not gamma else f"; the groups' predicted probabilities still differ by Γ_SP {_points(gamma)} points"
    return (
        f"No verdict on predicted rates: the model predicts {positive} for {which} of the test nodes, so no group is "
        f"predicted it more often than another (ΔSP and ΔEO are 0 by construction){pdd}."
    )


def _many_classes(results: AuditResults) -> str | None:
    """For a label of many classes with few nodes each (:func:`~bind_core.pipeline.label_check.many_classes`): why
    there is no verdict; ``None`` otherwise."""
    graph = results.graph
    return many_classes(graph.label, graph.class_names or [], graph.class_sizes)


def _verdict(sp: GapFinding, positive: str) -> str:
    if sp.value is None or sp.excludes_zero is None:
        return f"No verdict on predicted rates: {sp.text}"
    if sp.excludes_zero:
        return f"Biased: {sp.text}"
    return f"No clear bias in predicted {positive} rates: {sp.text}"


# ---------------------------------------------------------------------- attribution, debiasing, trust
def _attribution(results: AuditResults) -> AttributionFinding | None:
    profile, top = results.profile, results.top_harmful
    if profile is None or top is None:
        return None
    harmful = profile.sets.harmful
    ids = [r.node_id for r in top[:5]]
    rule = profile.rules[0].text if profile.rules else None
    share = harmful.harm_share
    text = (
        f"The {harmful.nodes} most harmful training nodes ({100 * profile.fraction:.0f}% of them) carry "
        f"{_pct(share)} of the harm; the most harmful: {', '.join(str(i) for i in ids) or 'none'} "
        f"(node ids: {results.graph.node_id_meaning or 'as in the graph'})."
    )
    text += (
        f" What they have in common (it held on held-out nodes): {rule}."
        if rule
        else " No rule describing them held on held-out nodes."
    )
    carried = results.supplied_model.carried if results.supplied_model is not None else None
    if carried is not None:
        text += " " + carried.text
    return AttributionFinding(harmful_nodes=harmful.nodes, harm_share=share, top_ids=ids, rule=rule, text=text)


def _metric_values(m: MetricValues) -> dict[str, float | None]:
    return {"accuracy": m.accuracy, "delta_sp": m.delta_sp, "delta_eo": m.delta_eo, "gamma": m.gamma}


def _most_harmful(count: int) -> str:
    return "the most harmful training node" if count == 1 else f"the {count} most harmful training nodes"


def _random(count: int) -> str:
    return "1 random training node" if count == 1 else f"{count} random training nodes"


def _by_budget(pairs: list[tuple[float, list[str]]], say: Callable[[list[str]], str]) -> list[str]:
    """``budget 0.1: …`` for each ``(budget, metrics)``, the metrics as ``say`` writes them."""
    return [f"budget {budget:g}: {say(metrics)}" for budget, metrics in pairs]


def _debiasing(rows: list[DebiasingRow] | None, audited: MetricValues) -> DebiasingFinding | None:
    if not rows:
        return None
    done = [r for r in rows if r.after.gamma is not None and r.deleted > 0]
    if not done:
        return None
    best = min(done, key=lambda r: float(r.after.gamma or 0.0))
    rose = [(r.budget, clear) for r in rows if (clear := r.clear_rises())]
    near = [(r.budget, r.within_noise) for r in rows if r.within_noise]
    backfired, inside = _by_budget(rose, ", ".join), _by_budget(near, ", ".join)  # the JSON's keys, as documented
    check = best.against_random
    b, a = best.before, best.after
    if b.same_figures(audited):
        text = (
            f"Deleting {_most_harmful(best.deleted)} (budget {best.budget:g}) and retraining moved "
            f"ΔSP {_points(b.delta_sp)} → {_points(a.delta_sp)} points, ΔEO {_points(b.delta_eo)} → "
            f"{_points(a.delta_eo)} points, accuracy {_pct(b.accuracy)} → {_pct(a.accuracy)}."
        )
    else:  # "before" is a retraining on the whole graph, another model than the one audited: compare like with like
        text = (
            f"Retrained from scratch on the whole graph, the model has ΔSP {_points(b.delta_sp)} points, ΔEO "
            f"{_points(b.delta_eo)} points, accuracy {_pct(b.accuracy)} (the audited model: "
            f"{_points(audited.delta_sp)}, {_points(audited.delta_eo)}, {_pct(audited.accuracy)}); retrained without "
            f"{_most_harmful(best.deleted)} (budget {best.budget:g}): ΔSP {_points(a.delta_sp)}, ΔEO "
            f"{_points(a.delta_eo)}, accuracy {_pct(a.accuracy)}."
        )
    text += _change_text(best.change)
    if check is None:
        rule = best.chance_rule or f"whether that beats deleting random nodes was not checked; set {CHANCE_FLAG}"
        text += f" {rule[0].upper()}{rule[1:]}."
    elif check.beats_random:
        text += f" On Γ, the bias it targets, it beats deleting {_random(check.size)}: "
        text += f"{check.verdict.rstrip('.')}."
    else:
        text += f" On Γ, the bias it targets, it does not beat deleting {_random(check.size)}: "
        text += f"{check.verdict.rstrip('.')}."
    if rose:  # in words, the metrics by their names
        text += f" Backfired (a bias metric rose): {'; '.join(_by_budget(rose, said))}."
    if near:
        listed = "; ".join(_by_budget(near, said))
        text += f" Rose within the test nodes' sampling noise, not a clear backfire: {listed}."
    return DebiasingFinding(
        budget=best.budget,
        deleted=best.deleted,
        before=_metric_values(b),
        after=_metric_values(a),
        backfired=backfired,
        within_noise=inside if any(r.within_noise is not None for r in rows) else None,
        chance_checked=check is not None,
        beats_random=None if check is None else check.beats_random,
        text=text,
        change=_change_bounds(best.change),
    )


_CHANGED = (("delta_sp", "ΔSP"), ("delta_eo", "ΔEO"), ("gamma", "Γ"))
"""The gaps whose change the finding says, with the sampling noise of the test nodes."""


def _change_bounds(change: Intervals | None) -> dict[str, list[float] | None] | None:
    """Each gap's change interval ``[low, high]`` (``None`` where it has none), or ``None`` without the bootstrap."""
    if change is None:
        return None
    out: dict[str, list[float] | None] = {}
    for name, _ in _CHANGED:
        band = getattr(change, name)
        out[name] = None if band is None or band.low is None or band.high is None else [band.low, band.high]
    return out


def _change_text(change: Intervals | None) -> str:
    """A sentence on whether each gap's change is clear of the test nodes' sampling noise (its paired interval
    excludes 0); empty without the bootstrap."""
    if change is None:
        return ""
    parts = []
    for name, label in _CHANGED:
        band = getattr(change, name)
        if band is None or band.estimate is None or band.low is None or band.high is None:
            continue
        said = "clear of 0" if band.clear_of_zero() else "within the test nodes' sampling noise"
        parts.append(f"{label} {_points(band.estimate)} [{_points(band.low)}, {_points(band.high)}], {said}")
    if not parts:
        return ""
    level = f"{change.level:.0%}"
    return f" The changes in points, with {level} intervals over resampled test nodes: {'; '.join(parts)}."


def pearson_interval(x: np.ndarray, y: np.ndarray, *, resamples: int = TRUST_BOOTSTRAP, seed: int = 0) -> list[float]:
    """The 95% percentile bootstrap interval of Pearson's r over the pairs ``(x, y)`` (resamples where either side
    is constant are left out)."""
    rng = np.random.default_rng(seed)
    n = x.size
    idx = rng.integers(0, n, size=(resamples, n))
    xs, ys = x[idx], y[idx]
    xc, yc = xs - xs.mean(axis=1, keepdims=True), ys - ys.mean(axis=1, keepdims=True)
    den = np.sqrt((xc**2).sum(axis=1) * (yc**2).sum(axis=1))
    ok = den > 0
    r = (xc * yc).sum(axis=1)[ok] / den[ok]
    return [float(np.percentile(r, 2.5)), float(np.percentile(r, 97.5))]


def _trust(validation: Validation | None, influence: InfluenceSummary | None = None) -> TrustFinding:
    found = _checked(validation)
    if influence is not None and influence.undefined:
        most = ": most of them, as for a model far from trained." if 2 * influence.undefined >= influence.count else "."
        found.text += (
            f" {influence.undefined} of the {influence.count} training nodes have no estimate at all: deleting one "
            "has no minimum near the given weights (retraining without it carries the weights away), so the "
            f"attribution says nothing about them{most}"
        )
    return found


def _checked(validation: Validation | None) -> TrustFinding:
    if validation is None:
        text = "How far to trust the attribution: not checked (the self-check did not run)."
        return TrustFinding(verdict="not checked", pearson=None, interval=None, points=0, text=text)
    pairs = [(p.estimated[0], p.actual[0]) for p in validation.points if p.actual is not None and p.estimated]
    r = validation.pearson
    if r is None or len(pairs) < 3:
        text = f"How far to trust the attribution: the self-check could not tell ({len(pairs)} usable node(s))."
        return TrustFinding(verdict="not checked", pearson=r, interval=None, points=len(pairs), text=text)
    x, y = (np.array(v, dtype=np.float64) for v in zip(*pairs, strict=True))
    low, high = pearson_interval(x, y)
    if r >= TRUSTWORTHY and low >= ROUGH:
        verdict = "trustworthy"
    elif r >= ROUGH and low > 0:
        verdict = "rough"
    else:
        verdict = "no better than chance"
    text = (
        f"How far to trust the attribution: {verdict}; on {len(pairs)} training nodes deleted and the model "
        f"re-optimised, estimated and actual ΔΓ agree with Pearson {r:.3f} (95% interval {low:.3f} to {high:.3f})."
    )
    return TrustFinding(verdict=verdict, pearson=r, interval=[low, high], points=len(pairs), text=text)
