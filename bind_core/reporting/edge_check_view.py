"""The report's "Edge self-check" in the edges section: the sampled edge estimates against deleting the edge and
re-optimising (the ``edges`` section's ``validation``, :mod:`bind_core.pipeline.edge_selfcheck`), as plain-text cells
that the template escapes and the validation scatter plot."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bind_core.reporting import plots
from bind_core.reporting.page import fmt, trusted_svg

__all__ = ["edge_check_view"]


def edge_check_view(edges: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The check's figures and scatter, ``{"reason": ...}`` when it did not run, or ``None`` when the edges were not
    attributed (the section says why)."""
    if not edges or not edges.get("computed"):
        return None
    check = edges.get("validation")
    if not check:
        return {"reason": str(edges.get("validation_reason") or "it did not run")}
    points = list(check.get("points") or [])
    undefined = check.get("undefined") or {}
    return {
        "reason": None,
        "ground_truth": str(check.get("ground_truth") or ""),
        "population": str(check.get("population") or "the edges whose deletion changes anything"),
        "rows": [
            [
                fmt(check.get("count")),
                fmt(check.get("affecting")),
                fmt(check.get("pearson")),
                fmt(check.get("spearman")),
                fmt(check.get("slope")),
                fmt(check.get("noise_floor"), 4),
                "—" if check.get("clear_of_noise") is None else f"{100 * check['clear_of_noise']:.0f}%",
            ]
        ],
        "undefined": [f"{k}: {v}" for k, v in undefined.items()],
        "svg": trusted_svg(
            plots.validation_scatter(points, check.get("pearson"), check.get("spearman"), ident="edge-trust")
        )
        if points
        else None,
    }
