"""A debiasing row's ``change``: after − before per metric with its paired bootstrap interval over the test nodes
(:func:`bind_core.fairness.bootstrap.paired_change`), in the audit's results with the bootstrap and absent without."""

from __future__ import annotations

import math

import pytest

from bind_core.data.datasets import synthetic
from bind_core.fairness.bootstrap import METRICS
from bind_core.pipeline.audit import AuditConfig, run_audit
from bind_core.reporting.page import fmt
from bind_core.reporting.report import render_report
from bind_core.reporting.text import render
from bind_core.training.fit import TrainConfig


def _config(bootstrap: int) -> AuditConfig:
    return AuditConfig(
        training=TrainConfig(epochs=40),
        budgets=(0.1,),
        bootstrap=bootstrap,
        validation_sample=0,
        stages=("training", "metrics", "influence", "debiasing"),
    )


def test_each_budget_carries_the_change_with_its_paired_interval() -> None:
    graph = synthetic(200, seed=6)
    rows = run_audit(graph, _config(300)).debiasing
    assert rows is not None
    (row,) = rows
    change = row.change
    assert change is not None and change.resamples == 300 and change.level == 0.95
    for name in METRICS:
        moved = getattr(change, name)
        before, after = getattr(row.before, name), getattr(row.after, name)
        assert moved.estimate == pytest.approx(after - before, abs=1e-12), name
        assert moved.low is not None and moved.high is not None and moved.low <= moved.high, name
    gap = change.delta_sp
    assert gap is not None and gap.low is not None and gap.high is not None and not math.isclose(gap.low, gap.high)


def test_without_the_bootstrap_there_is_no_change() -> None:
    graph = synthetic(200, seed=6)
    result = run_audit(graph, _config(0))
    assert result.debiasing is not None
    (row,) = result.debiasing
    assert row.change is None
    assert "change" not in result.to_dict()["debiasing"][0]


def test_the_summary_says_whether_each_gaps_change_is_clear_of_sampling_noise() -> None:
    result = run_audit(synthetic(200, seed=6), _config(300))
    assert result.debiasing is not None
    (row,) = result.debiasing
    finding = result.to_dict()["summary"]["debiasing"]
    assert row.change is not None
    for name in ("delta_sp", "delta_eo"):
        band = getattr(row.change, name)
        assert finding["change"][name] == [band.low, band.high]
    assert "with 95% intervals over resampled test nodes: ΔSP" in finding["text"]
    assert ("clear of 0" in finding["text"]) or ("within the test nodes' sampling noise" in finding["text"])
    plain = run_audit(synthetic(200, seed=6), _config(0)).to_dict()["summary"]["debiasing"]
    assert "change" not in plain and "resampled test nodes" not in plain["text"]


def test_the_report_shows_each_change_interval_beside_before_and_after() -> None:
    result = run_audit(synthetic(200, seed=6), _config(300))
    assert result.debiasing is not None and result.debiasing[0].change is not None
    band = result.debiasing[0].change.delta_sp
    assert band is not None and band.low is not None and band.high is not None
    page = render_report(result.to_dict())
    assert f"[{fmt(band.low)}, {fmt(band.high)}]" in page
    assert "In brackets, the change&#39;s 95% interval over 300 resamples of the test nodes" in page
    assert "In brackets" not in render_report(run_audit(synthetic(200, seed=6), _config(0)).to_dict())


def test_the_command_lines_text_gives_each_budgets_change() -> None:
    result = run_audit(synthetic(200, seed=6), _config(300))
    assert result.debiasing is not None and result.debiasing[0].change is not None
    band = result.debiasing[0].change.delta_sp
    assert band is not None and band.estimate is not None and band.low is not None and band.high is not None
    said = f"ΔSP {100 * band.estimate:+.1f} [{100 * band.low:+.1f}, {100 * band.high:+.1f}]"
    line = next(x for x in render(result).splitlines() if "change (points, 95% over resampled test nodes" in x)
    assert said in line
