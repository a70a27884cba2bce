"""CI gates on an audit's results: ``--fail-on`` rules, their verdicts, and JUnit XML for CI systems.

A rule is ``METRIC[.lower|.upper](>|>=|<|<=)NUMBER``: a test-set metric (``delta_sp>0.1``), or a bound of its
bootstrap interval (``delta_sp.upper>0.1``: fail when even the interval's upper bound is above 0.1, or
``delta_sp.lower>0.1``: fail only when the whole interval is). A rule whose value is missing (an undefined metric, or
an interval the audit did not compute) counts as crossed: the gate fails closed, and says why. A rule may also be
``warning:CODE``: fail when the audit warns with that code (``warning:training_fit``: a supplied model that fits its
own training nodes no better than a constant; the codes of ``results.warning_codes``); an audit from before the
codes (none stored) fails it closed.

Torch-free on purpose: ``bind-audit submit`` runs from cron jobs and CI, and starts without loading the library.
"""

from __future__ import annotations

import argparse
import operator
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

METRICS = ("accuracy", "auc", "f1", "delta_sp", "delta_eo", "gamma_sp", "gamma_eo", "gamma")
"""The metrics a rule may name: the keys of ``results.metrics.test`` (and of ``results.metrics.intervals``)."""
INTERVAL_METRICS = ("accuracy", "auc", "f1", "delta_sp", "delta_eo", "gamma_sp", "gamma_eo")
"""The metrics the bootstrap gives an interval for (:data:`bind_core.fairness.bootstrap.METRICS`: not Γ itself)."""
BOUNDS = {"lower": "low", "upper": "high"}
"""A rule's interval bound, and its key in ``results.metrics.intervals.<metric>``."""
_OPS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
    ">": operator.gt,
    "<": operator.lt,
}
_RULE = re.compile(r"^\s*([A-Za-z_]+)(?:\.([A-Za-z]+))?\s*(>=|<=|>|<)\s*([-+0-9.eE]+)\s*$")
_WARNING = re.compile(r"^\s*warning\s*:\s*([A-Za-z_]*)\s*$")
WARNING_CODES = (
    "group_excluded", "no_edges", "few_positives", "scaled_inputs", "metric_undefined", "few_resamples",
    "resamples_dropped", "output_order", "training_fit", "overconfident", "unseen_categories", "many_classes",
    "not_stationary",
    "non_smooth", "minimum_on_kinks", "held_normalisation", "proximal_question", "no_minimum", "moved_far", "unsettled",
    "self_check_in_noise", "self_check_low", "other",
)  # fmt: skip
"""The codes a ``warning:CODE`` rule may name: ``bind_core.pipeline.WARNING_CODES``'s, written out here because this
module must not load the library (a test keeps the two lists equal)."""


@dataclass(frozen=True)
class Rule:
    """One ``--fail-on`` threshold."""

    metric: str
    bound: str | None
    """``lower`` or ``upper`` (of the bootstrap interval), or ``None`` for the metric itself."""
    op: str
    limit: float

    @property
    def subject(self) -> str:
        """What the rule reads: ``delta_sp`` or ``delta_sp.upper``."""
        return self.metric if self.bound is None else f"{self.metric}.{self.bound}"

    def __str__(self) -> str:
        return f"{self.subject}{self.op}{self.limit:g}"


@dataclass(frozen=True)
class WarningRule:
    """A ``--fail-on warning:CODE`` rule: the audit must not warn with ``code``."""

    code: str

    @property
    def subject(self) -> str:
        return f"warning:{self.code}"

    def __str__(self) -> str:
        return self.subject


@dataclass(frozen=True)
class Verdict:
    """A rule against one audit's results."""

    rule: Rule | WarningRule
    value: float | None
    crossed: bool
    reason: str
    """What the gate saw, in words (``delta_sp=0.302 > 0.1``, or why the value is missing)."""

    def to_dict(self) -> dict[str, Any]:
        return {"rule": str(self.rule), "value": self.value, "crossed": self.crossed, "reason": self.reason}


def parse_rule(text: str) -> Rule | WarningRule:
    """``"delta_sp.upper>0.1"`` → a :class:`Rule`, ``"warning:training_fit"`` → a :class:`WarningRule`; an unknown
    metric, bound or warning code is an argparse error (exit 2 before anything is queued) that lists the valid
    names."""
    warned = _WARNING.match(text)
    if warned is not None:
        if warned[1] not in WARNING_CODES:
            raise argparse.ArgumentTypeError(
                f"{text!r}: unknown warning code {warned[1]!r}; valid codes: {', '.join(WARNING_CODES)}"
            )
        return WarningRule(warned[1])
    match = _RULE.match(text)
    if match is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not METRIC[.lower|.upper](>|>=|<|<=)NUMBER, e.g. delta_sp>0.1 or delta_sp.upper>0.1"
        )
    metric, bound, op, number = match[1], match[2], match[3], match[4]
    if metric not in METRICS:
        raise argparse.ArgumentTypeError(f"{text!r}: unknown metric {metric!r}; valid metrics: {', '.join(METRICS)}")
    if bound is not None and bound not in BOUNDS:
        raise argparse.ArgumentTypeError(f"{text!r}: unknown bound {bound!r}; valid: {', '.join(BOUNDS)}")
    if bound is not None and metric not in INTERVAL_METRICS:
        raise argparse.ArgumentTypeError(
            f"{text!r}: the bootstrap gives no interval for {metric}; bounds exist for {', '.join(INTERVAL_METRICS)}"
        )
    try:
        limit = float(number)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: {number!r} is not a number") from None
    return Rule(metric, bound, op, limit)


def judge(results: dict[str, Any] | None, rules: Sequence[Rule | WarningRule]) -> list[Verdict]:
    """Each rule against the audit's results (``results.metrics.test`` and ``.intervals``; ``results.warning_codes``
    for a warning rule)."""
    metrics = (results or {}).get("metrics") or {}
    return [
        _judge_warning((results or {}).get("warning_codes"), rule)
        if isinstance(rule, WarningRule)
        else _judge(metrics, rule)
        for rule in rules
    ]


def _judge_warning(codes: Any, rule: WarningRule) -> Verdict:
    if not isinstance(codes, list):
        why = f"{rule}: the audit's results carry no warning codes (audited before 2026-12-07?); failing closed"
        return Verdict(rule, None, True, why)
    count = sum(code == rule.code for code in codes)
    said = f"the audit warns {rule.code}" + (f" ({count} times)" if count > 1 else "") if count else None
    return Verdict(rule, float(count), bool(count), said or f"no {rule.code} warning")


def _judge(metrics: dict[str, Any], rule: Rule) -> Verdict:
    name = rule.subject
    if rule.bound is None:
        value = (metrics.get("test") or {}).get(rule.metric)
        missing = f"{name} is undefined for this audit (see results.metrics.test.undefined); failing closed"
    else:
        intervals = metrics.get("intervals")
        interval = (intervals or {}).get(rule.metric) or {}
        value = interval.get(BOUNDS[rule.bound])
        if intervals is None:
            missing = f"{name}: the audit computed no bootstrap interval (run it with bootstrap > 0); failing closed"
        elif interval:
            missing = f"{name}: no resample defined this bound; failing closed"
        else:
            missing = f"{name}: the audit's bootstrap gave no interval for {rule.metric}; failing closed"
    if not isinstance(value, int | float) or isinstance(value, bool):
        return Verdict(rule, None, True, missing)
    crossed = _OPS[rule.op](float(value), rule.limit)
    relation = rule.op if crossed else {">": "<=", ">=": "<", "<": ">=", "<=": ">"}[rule.op]
    return Verdict(rule, float(value), crossed, f"{name}={float(value):.4g} {relation} {rule.limit:g}")


def junit_xml(audit_id: str, state: str, verdicts: list[Verdict], error: str | None = None) -> str:
    """A JUnit XML report: one test case per rule (a failure when crossed); an audit that did not succeed fails
    every rule with its state."""
    failures = len(verdicts) if state != "succeeded" else sum(v.crossed for v in verdicts)
    suite = ET.Element(
        "testsuite", name="bind-audit thresholds", tests=str(len(verdicts)), failures=str(failures), errors="0"
    )
    ET.SubElement(ET.SubElement(suite, "properties"), "property", name="audit_id", value=audit_id)
    for verdict in verdicts:
        case = ET.SubElement(suite, "testcase", classname=f"bind-audit.{audit_id}", name=str(verdict.rule))
        if state != "succeeded":
            ET.SubElement(case, "failure", message=f"the audit {state}: {error or 'no results'}")
        elif verdict.crossed:
            ET.SubElement(case, "failure", message=verdict.reason)
        else:
            ET.SubElement(case, "system-out").text = verdict.reason
    return ET.tostring(suite, encoding="unicode", xml_declaration=True)
