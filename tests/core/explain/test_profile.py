"""The profile of the harmful nodes (issue 19): a planted harmful subgroup is named by the top rule, a rule that
does not hold on the held-out half is not reported, and the summary statistics are right on a hand-made graph."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest
import torch

from bind_core.codec import decode, encode
from bind_core.data.datasets import ingest_files, synthetic
from bind_core.data.graph import Graph
from bind_core.explain.profile import cross_group_share, profile_nodes
from bind_core.explain.rules import halves
from bind_core.explain.summary import profile_lines
from bind_core.influence import estimate
from bind_core.pipeline.audit import AuditConfig, run_audit
from bind_core.pipeline.results import NodeProfile
from bind_core.reporting.profile_view import profile_view
from bind_core.reporting.report import render_report
from bind_core.training.fit import TrainConfig, train

torch.set_num_threads(1)


def _planted() -> tuple[Graph, np.ndarray]:
    """Labels independent of the group, except for the training nodes in a region (a binary feature ``region``
    held by a fifth of all nodes): those are labelled by group. Returns the graph and the planted training
    positions' mask (in ``train_idx`` order)."""
    g = synthetic(600, seed=4, sens_label_corr=0.0, train_per_class=150)
    region = torch.rand(g.num_nodes, generator=torch.Generator().manual_seed(0)) < 0.2
    planted = torch.zeros(g.num_nodes, dtype=torch.bool)
    planted[g.train_idx] = True
    planted &= region
    y = g.y.clone()
    y[planted] = (g.sens[planted] == 0).long()
    names = (*(f"x{i}" for i in range(g.num_features)), "region")
    x = torch.cat([g.x, region.float()[:, None]], 1)
    graph = dataclasses.replace(g, x=x, y=y, feature_names=names)
    return graph, planted[g.train_idx].numpy()


@pytest.fixture(scope="module")
def planted() -> tuple[Graph, np.ndarray, np.ndarray]:
    graph, mask = _planted()
    model = train(graph, TrainConfig(epochs=150, lr=0.01))
    return graph, mask, estimate(model, graph).delta.numpy()


def test_the_top_rule_names_the_planted_subgroup(planted: tuple[Graph, np.ndarray, np.ndarray]) -> None:
    graph, mask, delta = planted
    assert delta[mask].mean() < 0 < delta[~mask].mean()  # the construction plants harm
    found = profile_nodes(graph, delta, seed=0)
    doc = encode(found.document)
    rules = doc["rules"]
    assert rules, doc["search"]
    top = rules[0]
    assert any(c["variable"] == "feature:region" and c["value"] == 1.0 for c in top["conditions"])
    members = np.zeros(mask.size, dtype=bool)
    members[found.members[0]] = True
    precision, recall = mask[members].mean(), mask[members].sum() / mask.sum()
    assert precision >= 0.8 and recall >= 0.6, (precision, recall)
    assert top["holdout"]["mean_delta"] < 0 and top["holdout"]["harm_share"] >= 0.5 * top["fit"]["harm_share"]
    assert top["p_value"] <= 0.05
    # the harmful set is mostly planted, and it holds more of the harm than its share of the nodes
    harmful = doc["sets"]["harmful"]
    assert harmful["harm_share"] > 0.3 and harmful["nodes"] == int(np.ceil(0.1 * mask.size))
    region = next(f for f in doc["features"] if f["name"] == "region")
    assert region["kind"] == "binary" and region["harmful"]["share"] > 2 * region["all"]["share"]
    decode(NodeProfile, doc)  # the document has the typed shape
    # Each rule keeps its members (positions in the training split) for the what-if that deletes them.
    assert [rule["members"] for rule in rules] == found.members
    assert len(top["members"]) == top["fit"]["support"] + top["holdout"]["support"]
    assert json.loads(json.dumps(doc))["rules"][0]["members"] == found.members[0]


def test_a_rule_fitted_to_structure_only_in_the_fit_half_is_not_reported(
    planted: tuple[Graph, np.ndarray, np.ndarray],
) -> None:
    """The planted region is harmful on the fit half only: the tree finds it there, the held-out half refutes it."""
    graph, mask, _ = planted
    n = mask.size
    rng = np.random.default_rng(1)
    delta = rng.normal(0.0, 1.0, n)
    fit, _ = halves(n, 7)
    in_fit = np.zeros(n, dtype=bool)
    in_fit[fit] = True
    delta[mask & in_fit] -= 4.0
    found = encode(profile_nodes(graph, delta, seed=7).document)
    assert found["rules"] == []
    assert found["search"]["tested"] >= 1 and found["search"]["rejected"] == found["search"]["tested"]
    assert found["search"]["reason"] == "no candidate rule held on the held-out half"
    # the same plant on both halves is reported
    both = rng.normal(0.0, 1.0, n)
    both[mask] -= 4.0
    assert encode(profile_nodes(graph, both, seed=7).document)["rules"]


def test_estimates_without_structure_give_no_rule(planted: tuple[Graph, np.ndarray, np.ndarray]) -> None:
    graph, mask, _ = planted
    rng = np.random.default_rng(11)
    reported = [
        bool(encode(profile_nodes(graph, rng.standard_normal(mask.size), seed=s).document)["rules"]) for s in range(10)
    ]
    assert sum(reported) <= 1  # Bonferroni at 0.05: about one in twenty noise draws reports a rule


def _tiny() -> Graph:
    """8 nodes: training 0..3 on the path 0-1-2-3, the edge 0-4; test 4, 5, 6 (5 and 6 isolated), validation 7."""
    x = [[0.0, 1.0], [1.0, 2.0], [0.0, 3.0], [1.0, 4.0], [0.0, 0.0], [1.0, 0.0], [0.0, 0.0], [1.0, 0.0]]
    return Graph.build(
        x, [[0, 1], [1, 2], [2, 3], [0, 4]], y=[0, 1, 1, 0, 1, 0, 1, 0], sens=[0, 0, 1, 1, 1, 0, 0, 0],
        train_idx=[0, 1, 2, 3], val_idx=[7], test_idx=[4, 5, 6], feature_names=["flag", "score"],
    )  # fmt: skip


def test_summary_statistics_on_a_hand_made_graph() -> None:
    g = _tiny()
    cross = cross_group_share(g)
    # node 0: neighbours 1 (same), 4 (other) → 1/2; node 1: 0, 2 → 1/2; node 2: 1, 3 → 1/2; node 3: 2 → 0
    np.testing.assert_allclose(cross[:5], [0.5, 0.5, 0.5, 0.0, 1.0])
    assert np.isnan(cross[5]) and np.isnan(cross[7])
    delta = np.array([-3.0, -1.0, 2.0, 0.5])
    doc = encode(profile_nodes(g, delta, fraction=0.25).document)
    harmful, helpful, every = (doc["sets"][k] for k in ("harmful", "helpful", "all"))
    assert harmful["nodes"] == 1 and harmful["delta_sum"] == -3.0 and harmful["harm_share"] == 0.75
    assert [r["count"] for r in harmful["groups"]] == [1, 0] and [r["count"] for r in harmful["labels"]] == [1, 0]
    assert helpful["nodes"] == 1 and helpful["delta_mean"] == 2.0 and helpful["harm_share"] == 0.0
    assert every["nodes"] == 4 and every["delta_mean"] == pytest.approx(-1.5 / 4)
    assert [r["share"] for r in every["groups"]] == [0.5, 0.5]
    assert every["degree"]["mean"] == pytest.approx(7 / 4) and every["degree"]["max"] == 2
    assert every["cross_group_share"]["mean"] == pytest.approx(1.5 / 4) and every["no_neighbours"] == 0
    flag, score = doc["features"]
    assert flag["kind"] == "binary" and flag["high"] == 1.0 and flag["all"]["share"] == 0.5
    assert flag["harmful"]["share"] == 0.0 and flag["difference"] == pytest.approx(-0.5 / 0.5)
    assert score["kind"] == "numeric" and score["all"]["mean"] == 2.5 and score["all"]["p50"] == 2.5
    assert score["harmful"]["mean"] == 1.0
    assert doc["rules"] == [] and doc["search"]["reason"] == "too few training nodes"


def test_an_empty_set_has_null_numbers_with_a_reason() -> None:
    doc = encode(profile_nodes(_tiny(), np.array([1.0, 2.0, 3.0, 4.0])).document)
    harmful = doc["sets"]["harmful"]
    assert harmful["nodes"] == 0 and harmful["delta_mean"] is None and harmful["harm_share"] is None
    assert harmful["degree"] is None and "nodes" in harmful["undefined"] and "harm_share" in harmful["undefined"]
    assert all(r["share"] is None for r in harmful["groups"])
    assert all(f["harmful"] is None and f["difference"] is None and f["undefined"] for f in doc["features"])
    decode(NodeProfile, doc)


def test_the_audit_result_carries_the_profile() -> None:
    graph = synthetic(100, seed=1, train_per_class=15)
    config = AuditConfig.from_dict({"training": {"epochs": 20}, "stages": ["training", "metrics", "influence"]})
    result = run_audit(graph, config)
    doc = result.to_dict()
    assert doc["profile"]["sets"]["all"]["nodes"] == graph.train_idx.numel()
    assert doc["profile"]["search"]["seed"] == config.training.seed
    assert result.typed().profile is not None


def test_the_text_lists_the_rules_that_held(planted: tuple[Graph, np.ndarray, np.ndarray]) -> None:
    graph, _, delta = planted
    doc = encode(profile_nodes(graph, delta, seed=0).document)
    text = "\n".join(profile_lines(doc))
    assert "rules that held on the held-out half" in text and doc["rules"][0]["text"] in text
    none = encode(profile_nodes(graph, np.random.default_rng(11).standard_normal(delta.size), seed=0).document)
    assert none["rules"] == [] and "no rule reported:" in "\n".join(profile_lines(none))


def test_the_report_has_a_section_on_the_profile(planted: tuple[Graph, np.ndarray, np.ndarray]) -> None:
    graph = synthetic(100, seed=1, train_per_class=15)
    config = AuditConfig.from_dict({"training": {"epochs": 20}, "stages": ["training", "metrics", "influence"]})
    results = json.loads(json.dumps(run_audit(graph, config).to_dict()))
    page = render_report(results)
    assert 'id="profile"' in page and "What the harmful nodes have in common" in page
    assert "<script" not in page
    # with a rule that held: its text in the rules table, escaped
    planted_graph, _, delta = planted
    results["profile"] = encode(profile_nodes(planted_graph, delta, seed=0).document)
    page = render_report(results)
    rule = results["profile"]["rules"][0]["text"]
    assert f"<td class=l>{rule}</td>" in page and "reported only when they hold on the other half" in page
    assert "<td class=l>region</td>" in page  # the most distinctive feature
    del results["profile"]
    assert 'id="profile"' not in render_report(results)


def _table_graph(tmp_path) -> tuple[Graph, np.ndarray, pd.DataFrame]:
    """A node table read with its features scaled (``region`` text with two values, the sensitive column; ``job``
    text, one-hot; ``income`` from 21.49 to 81.91), and a ΔΓ that plants harm on the training nodes with the
    highest incomes."""
    rng = np.random.default_rng(3)
    n = 400
    table = pd.DataFrame(
        {
            "region": rng.choice(["north", "south"], n),
            "income": np.round(rng.uniform(21.49, 81.91, n), 2),
            "job": rng.choice(["a", "b", "c"], n),
            "approved": rng.integers(0, 2, n),
        }
    )
    table.loc[0, "income"], table.loc[1, "income"] = 21.49, 81.91
    (tmp_path / "people.csv").write_text(table.to_csv(index=False), encoding="utf-8")
    (tmp_path / "edges.csv").write_text("".join(f"{i} {(i + 1) % n}\n" for i in range(n)), encoding="utf-8")
    graph = ingest_files(tmp_path / "people.csv", tmp_path / "edges.csv", label="approved", sensitive="region").graph
    income = table["income"].to_numpy()[graph.train_idx.numpy()]
    delta = np.where(income > 60.0, -1.0, 0.2) + np.random.default_rng(4).normal(0, 0.05, income.size)
    return graph, delta, table


def test_the_profile_speaks_the_tables_units(tmp_path) -> None:
    graph, delta, table = _table_graph(tmp_path)
    assert graph.feature_ranges  # read scaled: the model saw [-1, 1]
    doc = encode(profile_nodes(graph, delta, seed=0).document)
    assert doc["feature_units"] == "table"
    train = table.iloc[graph.train_idx.numpy()]
    features = {f["name"]: f for f in doc["features"]}
    income = features["income"]
    assert income["all"]["mean"] == pytest.approx(train["income"].mean(), rel=1e-6)
    assert income["harmful"]["p10"] > 55  # the harmful nodes' incomes, in the table's units
    region = features["region"]  # held as group codes: named by the group
    assert region["kind"] == "binary" and region["high"] == 1.0 and region["level"] == "region=south"
    assert region["all"]["share"] == pytest.approx((train["region"] == "south").mean())
    assert features["job=a"]["level"] == "job=a" and features["job=a"]["high"] == 1.0
    rule = doc["rules"][0]
    (cond,) = [c for c in rule["conditions"] if c["variable"] == "feature:income"]
    assert cond["op"] == ">" and 21.49 < cond["value"] < 81.91 and f"income > {cond['value']:.4g}" in rule["text"]
    decode(NodeProfile, doc)
    text = "\n".join(profile_lines(doc))
    assert "in the node table's own units" in text and "income mean" in text
    view = profile_view(decode(NodeProfile, doc))
    assert view is not None and "node table's own units" in view.units
    # a graph given as arrays (no scaling recorded): its values as given, and said so
    given = dataclasses.replace(graph, feature_ranges=())
    arrays = encode(profile_nodes(given, delta, seed=0).document)
    assert arrays["feature_units"] == "as given"
    assert next(f for f in arrays["features"] if f["name"] == "income")["all"]["mean"] < 1.0
    assert "as the graph was given them" in "\n".join(profile_lines(arrays))


def test_a_text_sensitive_column_among_several_is_named_by_its_value(tmp_path) -> None:
    _, delta, table = _table_graph(tmp_path)
    table["gender"] = np.where(np.arange(len(table)) % 3 == 0, "F", "M")
    table.to_csv(tmp_path / "both.csv", index=False)
    both = ingest_files(tmp_path / "both.csv", tmp_path / "edges.csv", label="approved", sensitive="region,gender")
    doc = encode(profile_nodes(both.graph, delta, seed=0).document)
    features = {f["name"]: f for f in doc["features"]}
    assert features["region"]["level"] == "region=south" and features["gender"]["level"] == "gender=M"
