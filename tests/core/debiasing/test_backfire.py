"""A budget whose deletion raises a bias metric is flagged wherever it is shown: the rows (``backfired``), the typed
results, the command line and the HTML report; the command line also says when the check against chance did not
run, and how to run it. A rise whose change's paired interval over the test nodes reaches 0 (``within_noise``) is
said to be within the sampling noise, not called a backfire."""

from __future__ import annotations

import html
from dataclasses import replace

import pytest

import bind_core as bc
from bind_core.codec import encode
from bind_core.debiasing.debias import BIAS_METRICS, backfired, within_noise
from bind_core.fairness.records import Interval, Intervals, MetricValues
from bind_core.pipeline.summary import summarize
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
    config = bc.AuditConfig(training=bc.TrainConfig(epochs=60), budgets=(0.05, 0.2), validation_sample=0, bootstrap=200)
    return bc.run_audit(graph, config)


def test_every_row_says_which_bias_metrics_rose(audit: bc.AuditResult) -> None:
    assert audit.debiasing
    for row in audit.debiasing:
        after, before = encode(row.after), encode(row.before)
        rose = [k for k in BIAS_METRICS if after[k] is not None and after[k] > before[k] + 1e-12]
        assert row.backfired == rose
        assert row.change is not None  # with the bootstrap, every rise is judged against the test nodes' noise
        assert row.within_noise == [k for k in rose if (band := getattr(row.change, k)) and band.low <= 0]
    stored = audit.to_dict()["debiasing"]
    assert [r["backfired"] for r in stored] == [r.backfired for r in audit.debiasing]
    assert [r["within_noise"] for r in stored] == [r.within_noise for r in audit.debiasing]


def test_a_rise_is_within_noise_where_its_change_interval_reaches_0() -> None:
    change = Intervals(
        level=0.95,
        resamples=200,
        delta_sp=Interval(estimate=0.02, low=-0.01, high=0.05, dropped=0),
        delta_eo=Interval(estimate=0.02, low=0.01, high=0.03, dropped=0),
        gamma=Interval(estimate=0.01, low=0.0, high=0.02, dropped=0),
    )
    assert within_noise(["delta_sp", "delta_eo", "gamma"], change) == ["delta_sp", "gamma"]  # low 0 reaches 0
    assert within_noise(["delta_eo"], change) == []
    assert within_noise(["delta_sp"], None) is None  # no interval: nothing to judge by
    no_gamma = Intervals(level=0.95, resamples=200, delta_sp=change.delta_sp)
    assert within_noise(["gamma"], no_gamma) == []  # a metric without an interval stays a plain backfire


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


def test_a_rise_within_noise_is_not_called_a_backfire(audit: bc.AuditResult) -> None:
    """The command line, the summary and the HTML report say a rise inside the noise is one, and keep
    BACKFIRED for the clear rises."""
    assert audit.debiasing
    row = audit.debiasing[0]
    assert row.before.delta_sp is not None and row.before.delta_eo is not None
    row.after = replace(row.after, delta_sp=row.before.delta_sp + 0.097, delta_eo=row.before.delta_eo + 0.01)
    row.backfired = ["delta_sp", "delta_eo"]
    row.within_noise = ["delta_eo"]
    assert row.clear_rises() == ["delta_sp"]
    text = render(audit)
    assert f"budget {row.budget} BACKFIRED: the deletion raised ΔSP" in text
    assert f"budget {row.budget}: ΔEO" in text and "rose within the test nodes' sampling noise" in text
    row.backfired = ["delta_eo"]
    text = render(audit)
    assert f"budget {row.budget} BACKFIRED" not in text and "rose, within noise" in text
    summary = summarize(audit.typed())
    assert summary.debiasing is not None
    assert not [b for b in summary.debiasing.backfired if b.startswith(f"budget {row.budget:g}:")]
    assert summary.debiasing.within_noise is not None
    assert f"budget {row.budget:g}: delta_eo" in summary.debiasing.within_noise
    assert "Rose within the test nodes' sampling noise, not a clear backfire" in summary.debiasing.text
    assert f"budget {row.budget:g}: ΔEO" in summary.debiasing.text and "delta_eo" not in summary.debiasing.text
    page = html.unescape(render_report(audit.to_dict()))
    assert "ΔEO" in page and "rose within the test nodes' sampling noise, not a clear backfire" in page
