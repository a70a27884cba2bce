"""The report's section "Debiasing": each budget's deletion of the most harmful training nodes, before and after
retraining, and the check against deleting random nodes, as plain-text cells that the template escapes."""

from __future__ import annotations

from bind_core.codec import encode
from bind_core.debiasing.records import DebiasingRow, EffectSpread, RandomSpread
from bind_core.fairness.records import Intervals, MetricValues
from bind_core.reporting import plots
from bind_core.reporting.page import fmt, trusted_svg
from bind_core.reporting.retraining import recipe_text, retraining
from bind_core.reporting.views import ChanceView, DebiasingView

__all__ = ["DEBIAS_METRICS", "backfire", "budget_text", "debiasing_view"]

DEBIAS_METRICS = (("accuracy", "accuracy"), ("delta_sp", "ΔSP"), ("delta_eo", "ΔEO"), ("gamma", "Γ"))


def _metric(values: MetricValues, key: str) -> float | None:
    value: float | None = getattr(values, key)
    return value


def budget_text(budget: float) -> str:
    """A budget as the audit took it.

    Args:
        budget: a fraction of the training set (< 1) or a count of nodes.

    Returns:
        ``10% of training nodes`` or ``5 nodes``.
    """
    return f"{budget:.0%} of training nodes" if budget < 1 else f"{int(budget)} nodes"


def backfire(row: DebiasingRow) -> str:
    """Which bias metrics a budget's deletion raised, and whether each rise is clear of the test nodes' sampling noise.

    Args:
        row: a debiasing row whose ``backfired`` names the metrics that rose (``within_noise``: those whose change's
            interval reaches 0).

    Returns:
        ``the deletion backfired: it raised ΔSP (0.169 → 0.266)`` for the clear rises, then ``ΔEO (0.042 → 0.055)
        rose within the test nodes' sampling noise, not a clear backfire`` for the others.
    """
    clear, inside = row.clear_rises(), row.within_noise or []
    parts = []
    if clear:
        parts.append("the deletion backfired: it raised " + _rises(row, clear))
    if inside:
        parts.append(_rises(row, inside) + " rose within the test nodes' sampling noise, not a clear backfire")
    return "; ".join(parts)


def _rises(row: DebiasingRow, keys: list[str]) -> str:
    """``ΔSP (0.169 → 0.266)`` for each of ``keys``."""
    names = dict(DEBIAS_METRICS)
    return ", ".join(f"{names.get(k, k)} ({fmt(_metric(row.before, k))} → {fmt(_metric(row.after, k))})" for k in keys)


def debiasing_view(runs: list[DebiasingRow] | None, audited: MetricValues) -> DebiasingView | None:
    """The section: each budget's deletion, before and after, the bars, and the comparison with random deletion.

    Args:
        runs: the audit's debiasing rows, one per budget (``None`` when debiasing did not run).
        audited: the audited model's test metrics, to say whether the "before" row is that model or a retraining.

    Returns:
        The section's view, or ``None`` without debiasing.
    """
    if not runs:
        return None
    head = ["budget", "deleted", "estimated ΔΓ"] + [f"{n} before → after" for _, n in DEBIAS_METRICS]
    rows = [
        [budget_text(r.budget), fmt(r.deleted), fmt(r.estimated_delta, 4)]
        + [f"{fmt(_metric(r.before, k))} → {fmt(_metric(r.after, k))}{_change(r, k)}" for k, _ in DEBIAS_METRICS]
        for r in runs
    ]
    svg = trusted_svg(plots.debiasing_bars([encode(r) for r in runs], DEBIAS_METRICS, ident="debiasing"))
    kind = runs[0].retrain
    how = retraining(kind)
    if how is not None:
        if kind == "audit" and runs[0].recipe is not None:
            how += f" ({recipe_text(runs[0].recipe)})"
        if kind == "adam":
            how += "; before is the unchanged graph retrained the same way with the model's seed"
        elif not runs[0].before.same_figures(audited):
            how += (
                "; before is the whole graph retrained the same way, another model than the audited one (its "
                "figures are in the metrics above), so that before and after differ only by the deletion"
            )
        else:
            how += "; before is the audited model"
    caveats = [f"{budget_text(r.budget)}: {r.caveat}" for r in runs if r.caveat]
    caveats += [f"{budget_text(r.budget)}: {backfire(r)}" for r in runs if r.backfired]
    changed = next((r.change for r in runs if r.change is not None), None)
    noise = None
    if changed is not None:
        noise = (
            f"In brackets, the change's {changed.level:.0%} interval over {changed.resamples} resamples of the test "
            "nodes, the same nodes drawn for before and after: one that excludes 0 is not an artefact of which nodes "
            "were tested (retraining's own noise is the check against chance's below)."
        )
    return DebiasingView(
        head=head, rows=rows, svg=svg, chance=_chance(runs), retraining=how, caveats=caveats, noise=noise
    )


def _change(row: DebiasingRow, key: str) -> str:
    """`` [low, high]``: the interval of the change of ``key`` (after − before), where the row has one."""
    return change_bracket(row.change, key)


def change_bracket(change: Intervals | None, key: str, digits: int = 3) -> str:
    """`` [low, high]``: the interval of a change's ``key`` (after − before), where there is one."""
    band = None if change is None else getattr(change, key, None)
    if band is None or band.low is None or band.high is None:
        return ""
    return f" [{fmt(band.low, digits)}, {fmt(band.high, digits)}]"


def _spread(part: EffectSpread | RandomSpread | None) -> str:
    return "—" if part is None else f"{fmt(part.mean, 4)} ± {fmt(part.std, 4)}"


def _chance(runs: list[DebiasingRow]) -> ChanceView | None:
    """ "Does deleting these nodes help more than deleting any nodes?" (``against_random`` of each budget)."""
    checked = [(r, r.against_random) for r in runs if r.against_random and r.against_random.selected]
    if not checked:
        return None
    rows = [
        [
            budget_text(r.budget),
            _spread(c.selected),
            _spread(c.random),
            fmt(c.yardstick, 4),
            "yes" if c.beats_random else "no",
            c.verdict,
        ]
        for r, c in checked
    ]
    return ChanceView(seeds=", ".join(str(s) for s in checked[0][1].seeds), rows=rows)
