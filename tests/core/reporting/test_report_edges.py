"""The report's figures of the edges (issue 19): the top edges' ΔΓ, the cross-group shares and, when edge debiasing
ran, the selected edges against random ones; drawn from a tiny real audit, deterministic, and replaced by the reason
when there is nothing to draw."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import torch
from markupsafe import escape

from bind_core.data.datasets import synthetic
from bind_core.data.graph import Graph
from bind_core.influence.edges import undirected_edges
from bind_core.pipeline.audit import AuditConfig, run_audit
from bind_core.reporting import edge_plots
from bind_core.reporting.report import render_report

torch.set_num_threads(1)

FAST: dict[str, Any] = {"training": {"epochs": 30}, "bootstrap": 0, "validation_sample": 0, "budgets": []}
DEBIAS: dict[str, Any] = {"debias_seeds": [1, 2, 3], "edge_budgets": [0.05, 0.2], "debias_random_sets": 2}


@pytest.fixture(scope="module")
def graph() -> Graph:
    return synthetic(80, seed=0, train_per_class=15)


def _stored(graph: Graph, settings: dict[str, Any]) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(json.dumps(run_audit(graph, AuditConfig.from_dict(settings)).to_dict()))
    return doc


@pytest.fixture(scope="module")
def doc(graph: Graph) -> dict[str, Any]:
    """Stored results of an audit with edges and edge debiasing."""
    return _stored(graph, {**FAST, "edges": True, **DEBIAS})


def section(page: str) -> str:
    start = page.index('<section id="edges">')
    return page[start : page.index("</section>", start)]


def figures(html: str) -> dict[str, str]:
    """The section's SVGs by their ``ident`` (the prefix of every id inside them)."""
    out = {}
    for svg in re.findall(r"<svg.*?</svg>", html, flags=re.S):
        idents = set(re.findall(r'id="(edges-[a-z]+)-', svg))
        assert len(idents) == 1, idents
        out[idents.pop()] = svg
    return out


def alt_text(svg: str) -> str:
    assert svg.startswith('<svg role="img"')
    found = re.search(r"<title>([^<]*)</title>", svg)
    assert found is not None
    return found[1]


def test_the_section_draws_the_edges(doc: dict[str, Any]) -> None:
    edges = doc["edges"]
    drawn = figures(section(render_report(doc)))
    assert set(drawn) == {"edges-top", "edges-shares", "edges-debiasing"}
    top = drawn["edges-top"]
    texts = re.findall(r"<text[^>]*>([^<]*)</text>", top)
    names = doc["graph"]["group_labels"]
    assert names == ["sens=0", "sens=1"]
    for row in [*edges["top_harmful"], *edges["top_helpful"]]:
        label = f"{row['u_id']}–{row['v_id']} ({names[row['u_group']]}–{names[row['v_group']]})"  # groups by name
        assert label == edge_plots.edge_label(row, names) and label in texts and label in alt_text(top)
    table = section(render_report(doc))
    assert f"{names[edges['top_harmful'][0]['u_group']]} – {names[edges['top_harmful'][0]['v_group']]}" in table
    crossing = any(not r["within_group"] for r in [*edges["top_harmful"], *edges["top_helpful"]])
    assert (edge_plots.CROSS in top) is crossing and edge_plots.WITHIN in top
    cross = edges["cross_group"]
    shares = alt_text(drawn["edges-shares"])
    assert f"share of all edges {100 * cross['edge_share']:.1f}%" in shares
    assert f"{100 * cross['harm_share']:.1f}%" in shares and "<image" not in "".join(drawn.values())


def test_the_debiasing_chart_shows_each_budget_against_random_edges(doc: dict[str, Any]) -> None:
    svg = figures(section(render_report(doc)))["edges-debiasing"]
    alt = alt_text(svg)
    for row in doc["edges"]["debiasing"]["budgets"]:
        budget = f"{100 * row['budget']:.2g}%"
        assert f"{budget} ({row['deleted']} edges)" in re.findall(r"<text[^>]*>([^<]*)</text>", svg)
        shown = f"{budget}: selected {row['selected']['mean']:.4g} ± {row['selected']['std']:.2g}, random "
        assert str(escape(shown + f"{row['random']['mean']:.4g}")) in alt


def test_the_figures_are_deterministic(doc: dict[str, Any]) -> None:
    edges = doc["edges"]
    assert render_report(doc) == render_report(json.loads(json.dumps(doc)))
    twice = [edge_plots.edge_debiasing_bars(edges["debiasing"]["budgets"], ident="x") for _ in range(2)]
    assert twice[0] == twice[1] and twice[0].count("<svg") == 1


def test_no_debiasing_chart_unless_edge_debiasing_ran(graph: Graph, doc: dict[str, Any]) -> None:
    plain = _stored(graph, {**FAST, "edges": True})
    assert "debiasing" not in plain["edges"] and plain["edges"]["debiasing_reason"]
    part = section(render_report(plain))
    assert set(figures(part)) == {"edges-top", "edges-shares"}
    assert f"Not checked: {escape(plain['edges']['debiasing_reason'])}." in part
    nothing = {**doc["edges"]["debiasing"], "budgets": []}
    emptied = {**doc, "edges": {**doc["edges"], "debiasing": nothing}}
    assert "edges-debiasing" not in figures(section(render_report(emptied)))


def test_without_edges_there_is_the_reason_and_no_figure(graph: Graph) -> None:
    no_influence = _stored(graph, {**FAST, "stages": ["training", "metrics"], "edges": True})
    part = section(render_report(no_influence))
    assert "Not computed: the influence stage did not run" in part and "<svg" not in part
    bare = _stored(graph.without_edges(undirected_edges(graph)), {**FAST, "edges": True})
    part = section(render_report(bare))
    why = bare["edges"]["cross_group"]["undefined"]
    assert "<svg" not in part and "No edge has ΔΓ &lt; 0." in part
    reason = f"edge share: {why['edge_share']}; harm share: {why['harm_share']}"
    assert f"No chart of the cross-group shares: {escape(reason)}." in part


def test_a_budget_that_deleted_nothing_has_no_bars(doc: dict[str, Any]) -> None:
    first, second = doc["edges"]["debiasing"]["budgets"]
    empty = {**first, "deleted": 0, "selected": None, "random": None, "advantage": None, "after": None}
    svg = edge_plots.edge_debiasing_bars([empty, second], ident="x")
    assert "5%: nothing deleted" in alt_text(svg) and "nothing deleted" in re.findall(r"<text[^>]*>([^<]*)</text>", svg)
    assert f"20%: selected {second['selected']['mean']:.4g}" in alt_text(svg)
