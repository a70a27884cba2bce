"""A budget whose deletion raises a bias metric is flagged wherever it is shown: the rows (``backfired``), the typed
results, the command line and the HTML report; the command line also says when the check against chance did not
run, and how to run it."""

from __future__ import annotations

from dataclasses import replace

import pytest

import bind_core as bc
from bind_core.codec import encode
from bind_core.debiasing.debias import BIAS_METRICS, backfired
from bind_core.fairness.records import MetricValues
from bind_core.reporting import render_report
from bind_core.reporting.text import render


def test_backfired_names_the_bias_metrics_that_rose() -> None:
    before = _values(accuracy=0.8, delta_sp=0.169, delta_eo=0.2, gamma=0.1)
    after = _values(accuracy=0.7, delta_sp=0.266, delta_eo=0.2, gamma=None)
    assert backfired(before, after) == ["delta_sp"]  # accuracy is not a bias metric; an undefined one is left out
    assert backfired(before, before) == []
    assert backfired(before, replace(before, delta_eo=0.2 + 1e-15)) == []  # rounding is not a rise


def _values(**numbers: float | None) -> MetricValues:
    """Test metrics with these numbers (the others undefined)."""
    unset = dict.fromkeys(("accuracy", "auc", "f1", "delta_sp", "delta_eo", "gamma_sp", "gamma_eo", "gamma"))
    return MetricValues(nodes=100, **(unset | numbers))


@pytest.fixture(scope="module")
def audit() -> bc.AuditResult:
    graph = bc.synthetic(300, seed=1)
    config = bc.AuditConfig(training=bc.TrainConfig(epochs=60), budgets=(0.05, 0.2), validation_sample=0, bootstrap=0)
    return bc.run_audit(graph, config)


def test_every_row_says_which_bias_metrics_rose(audit: bc.AuditResult) -> None:
    assert audit.debiasing
    for row in audit.debiasing:
        after, before = encode(row.after), encode(row.before)
        rose = [k for k in BIAS_METRICS if after[k] is not None and after[k] > before[k] + 1e-12]
        assert row.backfired == rose
    stored = audit.to_dict()["debiasing"]
    assert [r["backfired"] for r in stored] == [r.backfired for r in audit.debiasing]


def test_the_command_line_and_the_report_flag_a_backfire(audit: bc.AuditResult) -> None:
    assert audit.debiasing
    row = audit.debiasing[0]
    assert row.before.delta_sp is not None
    row.after = replace(row.after, delta_sp=row.before.delta_sp + 0.097)
    row.backfired = backfired(row.before, row.after)
    text = render(audit)
    assert f"budget {row.budget} BACKFIRED: the deletion raised ΔSP" in text
    assert "against chance: not checked" in text and "--debias-seeds 1,10,100" in text
    page = render_report(audit.to_dict())
    assert "the deletion backfired: it raised ΔSP" in page
