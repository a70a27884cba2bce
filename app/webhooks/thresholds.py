"""Threshold checks of a succeeded audit's test-set metrics (the API's run history and the worker's alerts)."""

from __future__ import annotations

from typing import Any

METRICS = ("delta_sp", "delta_eo", "gamma")


def test_metrics(results: dict[str, Any] | None) -> dict[str, float | None]:
    """ΔSP, ΔEO and Γ on the test nodes of an audit's results (``None`` where absent)."""
    test = ((results or {}).get("metrics") or {}).get("test") or {}
    return {m: (float(test[m]) if isinstance(test.get(m), int | float) else None) for m in METRICS}


def breaches(results: dict[str, Any] | None, thresholds: dict[str, Any] | None) -> list[dict[str, Any]]:
    """``[{metric, value, threshold}]`` for each metric strictly above its threshold."""
    values = test_metrics(results)
    found = []
    for metric, limit in (thresholds or {}).items():
        value = values.get(metric)
        if limit is not None and value is not None and value > float(limit):
            found.append({"metric": metric, "value": value, "threshold": float(limit)})
    return found
