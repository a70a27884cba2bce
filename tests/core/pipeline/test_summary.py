"""The verdict first: the summary speaks the user's terms, its numbers are the results' own, and its intervals say
whether a gap or a self-check is more than chance."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bind_core import AuditConfig, TrainConfig, from_files, run_audit, synthetic
from bind_core.codec import encode
from bind_core.pipeline.audit import AuditResult
from bind_core.pipeline.chance_rule import chance_decision
from bind_core.pipeline.config import AUTO_CHANCE_SEEDS, chance_retrains
from bind_core.pipeline.summary import _difference_interval, pearson_interval, summarize
from bind_core.reporting.report import render_report
from bind_core.reporting.text import _debiasing_lines
from bind_core.reporting.text import render as text_report


@pytest.fixture(scope="module")
def audited() -> AuditResult:
    config = AuditConfig(training=TrainConfig(epochs=60), budgets=(0.1,), validation_sample=12, bootstrap=200)
    return run_audit(synthetic(400, seed=2), config)


def test_the_verdict_names_the_groups_and_the_gap_with_the_results_numbers(audited: AuditResult) -> None:
    typed = audited.typed()
    summary = typed.summary
    assert summary is not None and summary.sensitive == ["sens"]
    sp = summary.bias[0]
    assert sp.metric == "delta_sp" and {sp.higher, sp.lower} == {"sens=0", "sens=1"}
    rates = {g.name: g.positive_rate for g in typed.metrics.groups}
    assert sp.higher_rate == rates[sp.higher] and sp.lower_rate == rates[sp.lower]
    assert sp.value == typed.metrics.test.delta_sp and sp.higher_rate >= sp.lower_rate
    assert sp.difference_interval is not None and sp.excludes_zero == (sp.difference_interval[0] > 0)
    assert sp.interval is not None and sp.interval[0] <= sp.value <= sp.interval[1]
    assert summary.verdict.startswith("Biased:" if sp.excludes_zero else "No clear bias")
    assert f"{sp.higher} is predicted y=1 more often than {sp.lower}" in summary.verdict
    assert summary.text.splitlines()[0] == summary.verdict


def test_a_model_that_predicts_one_class_gets_no_verdict_on_rates_and_equal_rates_are_said_so(
    audited: AuditResult,
) -> None:
    """Where the model predicts the positive class for no test node, no group can be predicted it more often: the
    verdict says that, not "no clear bias", and quotes Γ_SP, which still compares the probabilities; two groups with
    the same rate are "equally often", never "more often"."""
    typed = audited.typed()
    metrics = typed.metrics
    groups = [replace(g, positive_rate=0.0, tpr=0.0) for g in metrics.groups]
    test = replace(metrics.test, delta_sp=0.0, delta_eo=0.0)
    none = replace(typed, metrics=replace(metrics, groups=groups, test=test))
    summary = summarize(none)
    assert summary.verdict.startswith(
        "No verdict on predicted rates: the model predicts y=1 for none of the test nodes"
    )
    assert f"Γ_SP {100 * metrics.test.gamma_sp:.1f} points" in summary.verdict
    assert "recognised equally often: 0.0% vs 0.0%" in summary.bias[1].text
    assert "more often" not in summary.bias[1].text
    every = replace(typed, metrics=replace(metrics, groups=[replace(g, positive_rate=1.0) for g in groups]))
    assert "predicts y=1 for every one of the test nodes" in summarize(every).verdict
    assert summarize(typed).verdict == typed.summary.verdict  # a model that predicts both classes: as before


def test_a_retrained_before_row_is_compared_with_the_audited_model_not_in_its_place(audited: AuditResult) -> None:
    """A model trained here is its own "before" row; where "before" is a retraining that gives another model (a
    supplied model retrained by its recipe), the sentence says both, so that the audited model's ΔSP is never
    followed by another model's as if it were the same."""
    typed = audited.typed()
    assert typed.debiasing is not None and typed.summary is not None and typed.summary.debiasing is not None
    row = typed.debiasing[0]
    test = typed.metrics.test
    assert row.before.delta_sp == test.delta_sp and typed.summary.debiasing.text.startswith("Deleting")
    other = replace(row.before, delta_sp=(test.delta_sp or 0) / 2, accuracy=(test.accuracy or 0) - 0.05)
    retrained = replace(typed, debiasing=[replace(row, before=other)])
    finding = summarize(retrained).debiasing
    assert finding is not None
    assert finding.text.startswith(
        f"Retrained from scratch on the whole graph, the model has ΔSP {100 * other.delta_sp:.1f}"
    )
    assert f"(the audited model: {100 * (test.delta_sp or 0):.1f}," in finding.text
    assert f"retrained without the {row.deleted} most harmful training nodes" in finding.text
    own = "before is the audited model"
    other_model = "before is the whole graph retrained the same way, another model than the audited one"
    assert own in render_report(encode(typed)) and other_model not in render_report(encode(typed))
    assert other_model in render_report(encode(retrained))
    said = "before: the whole graph retrained the same way, another model than the audited one"
    assert any(said in line for line in _debiasing_lines(retrained.debiasing or [], test))
    assert not any(said in line for line in _debiasing_lines(typed.debiasing, test))


def test_attribution_debiasing_and_trust_come_from_their_sections(audited: AuditResult) -> None:
    typed = audited.typed()
    summary = typed.summary
    assert summary is not None and summary.attribution is not None and typed.top_harmful is not None
    assert summary.attribution.top_ids == [r.node_id for r in typed.top_harmful[:5]]
    assert typed.profile is not None and summary.attribution.harm_share == typed.profile.sets.harmful.harm_share
    assert summary.debiasing is not None and typed.debiasing is not None
    assert summary.debiasing.after["delta_sp"] == typed.debiasing[0].after.delta_sp
    assert not summary.debiasing.chance_checked and "debias_seeds" in summary.debiasing.text  # how to check it
    trust = summary.trust
    assert typed.validation is not None and trust.pearson == typed.validation.pearson
    assert trust.interval is not None and trust.interval[0] <= trust.pearson <= trust.interval[1] + 1e-12
    assert trust.verdict in ("trustworthy", "rough", "no better than chance")


def test_the_difference_interval_and_the_pearson_interval_by_hand() -> None:
    low, high = _difference_interval(0.5, 100, 0.3, 100) or [0.0, 0.0]
    se = np.sqrt(0.25 / 100 + 0.21 / 100)
    assert low == pytest.approx(0.2 - 1.959963984540054 * se) and high == pytest.approx(0.2 + 1.959963984540054 * se)
    assert _difference_interval(0.5, 0, 0.3, 10) is None
    x = np.arange(20, dtype=np.float64)
    assert pearson_interval(x, 2 * x + 1) == pytest.approx([1.0, 1.0])
    rng = np.random.default_rng(0)
    low, high = pearson_interval(rng.normal(size=40), rng.normal(size=40))
    assert low < 0 < high  # unrelated: the interval covers 0, so the check is no better than chance


def _audited_table(
    tmp_path: Path, nodes: pd.DataFrame, approved: np.ndarray, sensitive: str, *, edges: int, rng: np.random.Generator
) -> AuditResult:
    """A quick audit of ``nodes`` (ids in ``uid``) labelled ``approved``, with ``edges`` random links by id."""
    nodes = nodes.assign(approved=approved)
    nodes.to_csv(tmp_path / "people.csv", index=False)
    pairs = rng.integers(0, len(nodes), size=(edges, 2))
    pd.DataFrame({"a": nodes.uid[pairs[:, 0]].to_numpy(), "b": nodes.uid[pairs[:, 1]].to_numpy()}).to_csv(
        tmp_path / "links.csv", index=False
    )
    graph = from_files(
        tmp_path / "people.csv", tmp_path / "links.csv", label="approved", sensitive=sensitive, node_id="uid"
    )
    config = AuditConfig(training=TrainConfig(epochs=40), budgets=(0.05,), validation_sample=0, bootstrap=0)
    return run_audit(graph, config)


def test_text_ids_and_attribute_names_come_out_as_the_user_wrote_them(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    n = 240
    gender = rng.choice(["F", "M"], n)
    approved = (rng.random(n) < np.where(gender == "M", 0.7, 0.3)).astype(int)
    nodes = pd.DataFrame({"uid": [f"u-{i:03d}" for i in range(n)], "gender": gender, "f": rng.normal(size=n)})
    result = _audited_table(tmp_path, nodes, approved, "gender", edges=700, rng=rng)
    doc = result.to_dict()
    assert doc["graph"]["sensitive"] == ["gender"] and doc["graph"]["group_labels"] == ["gender=F", "gender=M"]
    assert doc["graph"]["node_id_column"] == "uid" and doc["graph"]["label"] == "approved"
    ids = set(nodes.uid)
    assert all(isinstance(r["node_id"], str) and r["node_id"] in ids for r in doc["top_harmful"] + doc["top_helpful"])
    assert all(node in ids for node in doc["debiasing"][0]["nodes"])
    assert "approved=1" in doc["summary"]["verdict"] and "gender=" in doc["summary"]["verdict"]
    typed = result.typed()  # the typed form takes text ids as they are
    assert typed.top_harmful is not None and typed.top_harmful[0].node_id == doc["top_harmful"][0]["node_id"]


def test_the_chance_check_runs_by_default_only_where_cheap(audited: AuditResult) -> None:
    model = audited.model
    still = replace(model.stationarity, seconds=0.0)  # the polish's measured seconds would vary with the load
    cheap = replace(model, history=replace(model.history, seconds=0.01), stationarity=still)
    dear = replace(model, history=replace(model.history, seconds=100.0), stationarity=still)
    config = AuditConfig(budgets=(0.01, 0.1), chance_seconds=60)
    retrains = chance_retrains(2, config.debias_random_sets)
    seeds, rule = chance_decision(cheap, config)
    assert seeds == AUTO_CHANCE_SEEDS and rule is not None and f"{retrains} retrainings" in rule and "ran" in rule
    seeds, rule = chance_decision(dear, config)
    assert seeds == () and rule is not None and "did not run" in rule and "--debias-seeds" in rule
    assert chance_decision(cheap, replace(config, chance_seconds=0)) == ((), None)  # off: the library's default
    assert chance_decision(dear, replace(config, debias_seeds=(1, 2, 3))) == ((1, 2, 3), None)  # given: as given


def test_the_quote_before_queueing_counts_a_default_chance_check_as_if_it_ran() -> None:
    from bind_core.pipeline.budget import GraphSize, audit_cost

    size = GraphSize.of_summary(synthetic(300, seed=1).summary())
    off = audit_cost(AuditConfig(), size).work["debiasing"]
    auto = audit_cost(AuditConfig(chance_seconds=60), size).work["debiasing"]
    given = audit_cost(AuditConfig(debias_seeds=AUTO_CHANCE_SEEDS), size).work["debiasing"]
    assert off < auto == given  # an upper bound: the rule may still decide against it


def test_with_three_groups_the_verdict_names_the_widest_pair_beside_the_mean_gap(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    n = 300
    region = rng.choice(["north", "south", "east"], n)
    approved = (rng.random(n) < np.select([region == "north", region == "south"], [0.8, 0.2], 0.5)).astype(int)
    nodes = pd.DataFrame({"uid": [f"u{i}" for i in range(n)], "region": region, "f": rng.normal(size=n)})
    result = _audited_table(tmp_path, nodes, approved, "region", edges=900, rng=rng)
    typed = result.typed()
    summary = typed.summary
    assert summary is not None
    sp = summary.bias[0]
    rates = {g.name: g.positive_rate for g in typed.metrics.groups}
    assert sp.pairs == 3 and sp.higher_rate == rates[sp.higher] and sp.lower_rate == rates[sp.lower]
    assert sp.pair_gap == pytest.approx(max(rates.values()) - min(rates.values()))  # the widest pair
    assert sp.value == typed.metrics.test.delta_sp and sp.pair_gap is not None and sp.pair_gap > sp.value  # the mean
    assert f"{100 * sp.pair_gap:.1f} points, the widest gap of the 3 pairs" in summary.verdict
    assert f"ΔSP, the mean gap over the pairs, is {100 * sp.value:.1f} points" in summary.verdict
    assert sp.difference_interval is not None  # widened for the 3 pairs compared
    a = next(g for g in typed.metrics.groups if g.name == sp.higher)
    b = next(g for g in typed.metrics.groups if g.name == sp.lower)
    plain = _difference_interval(sp.higher_rate, a.size, sp.lower_rate, b.size)
    assert plain is not None and sp.difference_interval[0] < plain[0] and sp.difference_interval[1] > plain[1]
    html = render_report(result.to_dict())  # the report names the groups and the positive class the same way
    assert "mean P(approved=1)" in html and "distribution of predicted P(approved=1) on the test nodes" in html
    assert all(f"{name} (n=" in html for name in rates)


def test_the_bonferroni_interval_by_hand() -> None:
    low, high = _difference_interval(0.5, 100, 0.3, 100, pairs=3) or [0.0, 0.0]
    se = np.sqrt(0.25 / 100 + 0.21 / 100)
    z = 2.3939797998  # the standard normal's 1 − 0.025/3 quantile
    assert low == pytest.approx(0.2 - z * se, rel=1e-8) and high == pytest.approx(0.2 + z * se, rel=1e-8)


def test_with_three_classes_the_verdict_quotes_the_class_with_the_widest_gap(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    n = 400
    gender = rng.choice(["F", "M"], n)
    risk = np.where(
        gender == "M",
        rng.choice(["low", "mid", "high"], n, p=[0.2, 0.3, 0.5]),
        rng.choice(["low", "mid", "high"], n, p=[0.5, 0.3, 0.2]),
    )
    nodes = pd.DataFrame({"uid": [f"p{i}" for i in range(n)], "gender": gender, "f": rng.normal(size=n)})
    result = _audited_table(tmp_path, nodes, risk, "gender", edges=1500, rng=rng)
    typed = result.typed()
    assert typed.summary is not None and typed.graph.class_names == ["high", "low", "mid"]
    for finding, per_class in zip(typed.summary.bias, ("class_rates", "class_tprs"), strict=True):
        f, m = typed.metrics.groups
        gaps = [abs(a - b) for a, b in zip(getattr(f, per_class), getattr(m, per_class), strict=True)]
        widest = int(np.argmax(gaps))
        assert finding.value == pytest.approx(sum(gaps) / 3)  # the metric is the mean over the classes
        assert finding.label_class == f"approved={typed.graph.class_names[widest]}"
        assert finding.pair_gap == pytest.approx(gaps[widest]) and finding.pairs == 1
        assert {finding.higher_rate, finding.lower_rate} == {
            getattr(f, per_class)[widest],
            getattr(m, per_class)[widest],
        }
        assert "the widest gap of the 3 classes" in finding.text and finding.label_class in finding.text
    f, m = typed.metrics.groups
    assert f.positive_rate == f.class_rates[-1] and m.tpr == m.class_tprs[-1]  # the last class, as P(last class)
    assert "(rates of class 'mid'; the verdict compares every class)" in text_report(result)  # the CLI says which
