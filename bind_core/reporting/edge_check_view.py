"""The report's "Edge self-check" in the edges section: the sampled edge estimates against deleting the edge and
re-optimising (the ``edges`` section's ``validation``, :mod:`bind_core.pipeline.edge_selfcheck`), as plain-text cells
that the template escapes and the validation scatter plot."""

from __future__ import annotations

from dataclasses import dataclass

from markupsafe import Markup

from bind_core.codec import encode
from bind_core.pipeline.results_edges import EdgeAttribution
from bind_core.reporting import plots
from bind_core.reporting.page import fmt, trusted_svg
from bind_core.reporting.views import Skipped, Table, without_truth

__all__ = ["EdgeCheckView", "edge_check_view"]


@dataclass(frozen=True, kw_only=True)
class EdgeCheckView:
    """The edge self-check's figures and scatter (``reason`` is always ``None``: see :class:`Skipped`)."""

    reason: None = None
    ground_truth: str
    population: str
    rows: Table
    undefined: list[str]
    svg: Markup | None
    without_truth: str | None = None
    """The line for the checked edges without a ground truth, or ``None``."""


def edge_check_view(edges: EdgeAttribution | None) -> EdgeCheckView | Skipped | None:
    """The "Edge self-check" of the edges section.

    Args:
        edges: the audit's edge attribution (``None`` when the audit did not ask for edges).

    Returns:
        The check's figures and scatter, :class:`Skipped` when it did not run, or ``None`` when the edges were not
        attributed (the section says why).
    """
    if edges is None or not edges.computed:
        return None
    check = edges.validation
    if check is None:
        return Skipped(reason=edges.validation_reason or "it did not run")
    points = [encode(p) for p in check.points]
    undefined = check.undefined or {}
    return EdgeCheckView(
        ground_truth=check.ground_truth or "",
        population=check.population or "the edges whose deletion changes anything",
        rows=[
            [
                fmt(check.count),
                fmt(check.affecting),
                fmt(check.pearson),
                fmt(check.spearman),
                fmt(check.slope),
                fmt(check.noise_floor, 4),
                "—" if check.clear_of_noise is None else f"{100 * check.clear_of_noise:.0f}%",
            ]
        ],
        undefined=[f"{k}: {v}" for k, v in undefined.items()],
        without_truth=without_truth(check.undefined_truth, check.count, "edges"),
        svg=trusted_svg(
            plots.validation_scatter(points, check.pearson, check.spearman, ident="edge-trust", mode=check.mode)
        )
        if points
        else None,
    )
