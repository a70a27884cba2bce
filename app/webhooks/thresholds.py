"""Threshold checks of a succeeded audit's test-set metrics (the API's run history and the worker's alerts)."""

from __future__ import annotations

from typing import Any

from app.gates import Rule, judge

METRICS = ("delta_sp", "delta_eo", "gamma")


def test_metrics(results: dict[str, Any] | None) -> dict[str, float | None]:
    """ΔSP, ΔEO and Γ on the test nodes of an audit's results (``None`` where absent)."""
    test = ((results or {}).get("metrics") or {}).get("test") or {}
    return {m: (float(test[m]) if isinstance(test.get(m), int | float) else None) for m in METRICS}


def withheld(results: dict[str, Any] | None) -> str | None:
    """Why a succeeded audit has no verdict (``results.summary.withheld``: a supplied model that fits its training
    nodes no better than a constant, outputs in another order), or ``None``: its figures are as measured, not a
    finding."""
    said = ((results or {}).get("summary") or {}).get("withheld")
    return said if isinstance(said, str) and said else None


def inputs_confirmed(results: dict[str, Any] | None) -> bool | None:
    """For a succeeded audit of a supplied model: whether its own outputs on the audited graph confirmed the inputs
    the audit read (``results.supplied_model.outputs.matches``; on a later version, the outputs given for it with
    ``PUT /v1/models/{id}/outputs/{graph_id}``); ``None`` for a model the audit trained, or no results."""
    supplied = (results or {}).get("supplied_model")
    if not isinstance(supplied, dict):
        return None
    return bool((supplied.get("outputs") or {}).get("matches"))


def breaches(results: dict[str, Any] | None, thresholds: dict[str, Any] | None) -> list[dict[str, Any]]:
    """``[{metric, value, threshold}]`` for each metric strictly above its threshold: the CI gates' rules
    (:func:`app.gates.judge`), except that an alert needs a value (an undefined metric raises none)."""
    rules = [Rule(metric, None, ">", float(limit)) for metric, limit in (thresholds or {}).items() if limit is not None]
    return [
        {"metric": rule.metric, "value": v.value, "threshold": rule.limit}
        for rule, v in zip(rules, judge(results, rules), strict=True)
        if v.crossed and v.value is not None
    ]
