"""The HTML report and the exports, on the results of a tiny real audit; the page rendered in headless Chromium."""

from __future__ import annotations

import dataclasses
import io
import json
import math
import re
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from markupsafe import escape

from bind_core.codec import ResultFormatError, encode, json_safe
from bind_core.data.datasets import synthetic
from bind_core.explain.summary import profile_lines
from bind_core.pipeline.audit import AuditConfig, run_audit
from bind_core.pipeline.results import AuditResults, EdgeRow, InfluenceRow
from bind_core.reporting.exports import (
    EDGE_COLUMNS,
    INFLUENCE_COLUMNS,
    csv_cell,
    edges_csv,
    influence_csv,
    influence_parquet,
    model_card,
)
from bind_core.reporting.report import render_report
from bind_core.reporting.text import render
from bind_core.training.fit import TrainConfig

SECTIONS = ("verdict", "warnings", "metrics", "groups", "influence", "top-harmful", "stability", "trust", "debiasing")
CHROMIUM = Path("/usr/bin/chromium")
Audited = tuple[dict[str, Any], list[InfluenceRow]]


@pytest.fixture(scope="module")
def audit() -> Audited:
    """``(results, influence_rows)`` of a real audit, through JSON as the service stores them."""
    config = AuditConfig(
        training=TrainConfig(epochs=30), validation_sample=5, bootstrap=200, stability_seeds=(10, 11), stability_k=5
    )
    result = run_audit(synthetic(300, seed=1), config)
    return json.loads(json.dumps(result.to_dict())), result.influence_rows()


@pytest.fixture(scope="module")
def page(audit: Audited) -> str:
    return render_report(*audit, meta={"audit": "<script>alert(1)</script>"})


class Outline(HTMLParser):
    """Tags, ids, attributes and the title of a page; ``html.parser`` raises on nothing, so count what matters."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.ids: set[str] = set()
        self.refs: list[str] = []
        self.title = ""
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self._in_title = tag == "title"
        for name, value in attrs:
            if name == "id" and value:
                self.ids.add(value)
            if name in {"src", "href", "xlink:href", "action", "data"} and value is not None:
                self.refs.append(value)

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
            self._in_title = False


def outline(html: str) -> Outline:
    parser = Outline()
    parser.feed(html)
    parser.close()
    return parser


def test_report_is_one_offline_page(page: str) -> None:
    found = outline(page)
    assert page.startswith("<!DOCTYPE html>") and found.title == "BIND audit report"
    assert set(SECTIONS) <= found.ids
    assert page.count("<svg") == 5 and found.tags.count("svg") == 5 and "<image" not in page
    assert "script" not in found.tags and "<script>alert" not in page and "&lt;script&gt;alert(1)" in page
    assert all(ref.startswith("#") for ref in found.refs), [r for r in found.refs if not r.startswith("#")]
    assert not re.search(r"(src|href)\s*=\s*[\"']?(https?:)?//", page) and not re.search(r"https?:", page)
    assert len(set(re.findall(r'\bid="([^"]+)"', page))) == len(re.findall(r'\bid="([^"]+)"', page))  # unique ids
    assert "harmful" in page and "ΔΓ = Γ(retrained without the node) − Γ(now)" in page
    assert "95% CI [" in page and "Pearson" in page and "Spearman" in page


def test_report_shows_the_data(page: str, audit: Audited) -> None:
    results, rows = audit
    worst = min(rows, key=lambda r: r.delta)
    assert f"<td>{worst.node_id}</td>" in page and f"{worst.delta:.4f}" in page
    for warning in results["warnings"]:
        assert str(escape(warning)) in page  # Jinja2's escaping (&#39; for a quote where html.escape has &#x27;)
    for run in results["debiasing"]:
        assert f"after deleting {run['deleted']} " in page
    stability = results["stability"]
    pair = stability["pairwise"][0]
    assert f"<td class=l>10 vs 11</td><td>{pair['intersection']}</td><td>{pair['union']}</td>" in page
    assert f"<td>{pair['jaccard']:.3f}</td>" in page and "Overlap of the top-5 harmful sets:" in page
    for ids in stability["sets"].values():
        assert ", ".join(str(i) for i in ids) in page
    # the verdict first, in the groups' names; the node table by the user's ids and group names
    summary = results["summary"]
    assert page.index('id="verdict"') < page.index('id="warnings"') < page.index('id="metrics"')
    assert str(escape(summary["verdict"])) in page and all(
        str(escape(line)) in page for line in summary["text"].splitlines()
    )
    labels = results["graph"]["group_labels"]
    assert f"<td>{worst.node_id}</td><td>{labels[worst.group]}</td>" in page
    assert results["graph"]["node_id_meaning"] in page


def test_report_without_optional_blocks_and_hostile_text(audit: tuple[dict[str, Any], Any]) -> None:
    results = dict(audit[0], influence_summary=None, top_harmful=None, debiasing=None, validation=None, stability=None)
    results["graph"] = dict(results["graph"], name='<img src="http://x/y.png">')
    results["warnings"] = ["<b onmouseover=alert(1)>&"]
    html = render_report(results, title="a <b> & c")
    found = outline(html)
    assert (
        found.title == "a <b> & c"
        and all(r.startswith("#") for r in found.refs)
        and "img" not in found.tags
        and "<b onmouseover" not in html
    )
    assert html.count("<svg") == 1 and "Not computed" in html and "Not run" in html


HOSTILE = "<script>alert(1)</script>"


def test_report_escapes_hostile_names(audit: tuple[dict[str, Any], Any]) -> None:
    """Graph, group and model names, node ids, warnings and verdicts from the data come out as text, never markup."""
    results = json.loads(json.dumps(audit[0]))
    results["graph"]["name"] = HOSTILE
    results["model"]["arch"] = HOSTILE
    results["warnings"] = [HOSTILE]
    results["device"] = HOSTILE
    for group in results["metrics"]["groups"]:
        group["name"] = HOSTILE
    results["metrics"]["test"]["undefined"] = {"delta_eo": HOSTILE}
    results["graph"]["group_labels"] = [HOSTILE] * results["graph"]["groups"]  # a group in the user's terms
    results["top_harmful"] = [dict(results["top_harmful"][0], node_id=HOSTILE)]
    results["validation"]["mode"] = HOSTILE
    page = render_report(results, title=HOSTILE, meta={HOSTILE: HOSTILE})
    found = outline(page)
    assert "script" not in found.tags and "<script" not in page and found.title == HOSTILE
    escaped = "&lt;script&gt;alert(1)&lt;/script&gt;"
    assert page.count(escaped) >= 11, page.count(escaped)
    groups, top = _section(page, "groups"), _section(page, "top-harmful")
    assert f"<td class=l>{escaped}</td>" in groups and f"<td>{escaped}</td>" in top
    assert f"<div class=v>undefined<div class=d>{escaped}</div></div>" in _section(page, "metrics")
    assert f"<div class=warn>⚠ {escaped}</div>" in _section(page, "warnings")


def _section(html: str, ident: str) -> str:
    return html[html.index(f'<section id="{ident}">') :].split("</section>", 1)[0]


def test_report_draws_the_stability_of_the_ranking(audit: tuple[dict[str, Any], Any]) -> None:
    """Three seeds with known overlaps: the numbers, the sets and the grid's cells and labels appear."""
    stability = {
        "k": 3,
        "seeds": [1, 10, 100],
        "sets": {"1": [5, 7, 9], "10": [5, 7, 11], "100": [5, 12, 13]},
        "pairwise": [
            {"seeds": [1, 10], "intersection": 2, "union": 4, "jaccard": 0.5},
            {"seeds": [1, 100], "intersection": 1, "union": 5, "jaccard": 0.2},
            {"seeds": [10, 100], "intersection": 1, "union": 5, "jaccard": 0.2},
        ],
        "all": {"intersection": 1, "union": 6, "jaccard": 1 / 6},
        "mean_pairwise_jaccard": 0.3,
    }
    html = render_report(dict(audit[0], stability=stability))
    section = _section(html, "stability")
    assert "<td class=l>1 vs 10</td><td>2</td><td>4</td><td>0.500</td>" in section
    assert "<td class=l>10 vs 100</td><td>1</td><td>5</td><td>0.200</td>" in section
    assert "<td class=l>all seeds</td><td>1</td><td>6</td><td>0.167</td>" in section
    assert "mean over pairs <b>0.300</b>" in section and "top-3 harmful set" in section
    assert "<td class=l>100</td><td class=l>5, 12, 13</td>" in section
    svg = section[section.index("<svg") : section.index("</svg>")]
    texts = re.findall(r"<text[^>]*>([^<]*)</text>", svg)
    assert texts.count("0.50") == 2 and texts.count("0.20") == 4 and texts.count("1.00") == 3, texts
    assert texts.count("2 node(s)") == 2 and texts.count("3 node(s)") == 3, texts
    assert {"1", "10", "100"} <= set(texts) and "<image" not in svg
    assert len(re.findall(r'id="stability-', svg)) >= 1 and not re.findall(r'id="(?!stability-)', svg)
    assert "Not computed (the audit named no stability seeds" in _section(
        render_report(audit[0] | {"stability": None}), "stability"
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [("=1+2", "'=1+2"), ("+31", "'+31"), ("-x", "'-x"), ("@SUM(A1)", "'@SUM(A1)"), ("\tcmd", "'\tcmd"),
     ("plain", "plain"), ("", ""), (-0.5, -0.5), (-3, -3), (0, 0), (None, None)],
)  # fmt: skip
def test_csv_cell_escapes_only_formula_strings(value: Any, expected: Any) -> None:
    assert csv_cell(value) == expected


def test_influence_csv(audit: Audited) -> None:
    rows = audit[1]
    text = influence_csv(rows).decode()
    assert text.splitlines()[0] == ",".join(INFLUENCE_COLUMNS) and "\r\n" in text
    frame = pd.read_csv(io.StringIO(text))
    assert len(frame) == len(rows) and frame["delta"].dtype == "float64" and (frame["delta"] < 0).any()
    assert frame["delta"].tolist() == [r.delta for r in rows]  # negative numbers stay numbers, exactly
    hostile = influence_csv([dataclasses.replace(rows[0], node_id="=HYPERLINK(1)")]).decode()
    assert ",'=HYPERLINK(1)," in hostile


def test_influence_parquet_round_trip(audit: Audited) -> None:
    rows = audit[1]
    frame = pd.read_parquet(io.BytesIO(influence_parquet(rows)))
    assert list(frame.columns) == list(INFLUENCE_COLUMNS)
    assert frame.to_dict("records") == [dataclasses.asdict(r) for r in rows]  # settled: None, the linear estimate
    assert str(frame["node_id"].dtype) == "int64" and str(frame["delta"].dtype) == "float64"


def test_a_rows_json_keys_are_the_export_columns(audit: Audited) -> None:
    """``encode`` of a row (the CLI's JSON, the API's items) has exactly the CSV and Parquet columns, in order: the
    node rows' and the edge rows' (which carry ``affects`` and never ``settled``). A node row's ``settled`` is the
    step estimate's: absent from a linear estimate's row (the CSV's cell empty); ``no_minimum`` is present only where
    true."""
    node = audit[1][0]
    optional = ("settled", "no_minimum")
    assert node.settled is None and tuple(encode(node)) == tuple(c for c in INFLUENCE_COLUMNS if c not in optional)
    assert tuple(encode(dataclasses.replace(node, settled=False))) == tuple(
        c for c in INFLUENCE_COLUMNS if c != "no_minimum"
    )
    undefined = dataclasses.replace(node, settled=False, no_minimum=True, delta=None, delta_sp=None, delta_eo=None)
    assert tuple(encode(undefined)) == INFLUENCE_COLUMNS
    assert influence_csv([node]).decode().splitlines()[0] == ",".join(INFLUENCE_COLUMNS)
    edge = EdgeRow(
        position=0,
        u_index=1,
        v_index=2,
        u_id="a",
        v_id=7,
        u_group=0,
        v_group=1,
        within_group=False,
        affects=True,
        delta=-0.5,
        delta_sp=-0.25,
        delta_eo=-0.75,
        u_group_name="=north",  # a user's text: escaped in the CSV as any string cell
        v_group_name="south",
    )
    assert tuple(encode(edge)) == EDGE_COLUMNS and "settled" not in EDGE_COLUMNS
    assert edges_csv([edge]).decode().splitlines() == [
        ",".join(EDGE_COLUMNS),
        "0,1,2,a,7,0,1,false,true,-0.5,-0.25,-0.75,'=north,south",
    ]


def test_model_card(audit: tuple[dict[str, Any], Any]) -> None:
    results = audit[0]
    typed = model_card(dict(results, validation=dict(results["validation"], pearson=math.nan)), audit_id="a1")
    assert typed.validation is not None and math.isnan(typed.validation.pearson or 0.0)  # typed: as the results hold it
    card: Any = json_safe(typed.to_dict())  # strict JSON: null
    json.dumps(card, allow_nan=False)
    metrics = card["quantitative_analysis"]["performance_metrics"]
    accuracy = next(m for m in metrics if m["type"] == "accuracy" and m["slice"] == "test")
    band = results["metrics"]["intervals"]["accuracy"]
    assert accuracy["value"] == results["metrics"]["test"]["accuracy"]
    assert accuracy["confidence_interval"] == {"lower_bound": band["low"], "upper_bound": band["high"]}
    assert {m["slice"] for m in metrics} == {"test", "group=0", "group=1"}
    gamma, gamma_band = next(m for m in metrics if m["type"] == "gamma"), results["metrics"]["intervals"]["gamma"]
    assert gamma["confidence_interval"] == {"lower_bound": gamma_band["low"], "upper_bound": gamma_band["high"]}
    assert card["influence"]["count"] == len(audit[1]) and card["influence"]["top_harmful"]
    assert [d["budget"] for d in card["debiasing"]] == [0.01, 0.1] and card["validation"]["pearson"] is None
    assert card["summary"]["verdict"] == results["summary"]["verdict"]  # the verdict travels with the card
    names = {g["group"]: g["name"] for g in results["metrics"]["groups"]}
    for m in metrics:
        if m["slice"] != "test":
            assert m["slice"] == f"group={m['group']}" and m["group_name"] == names[m["group"]] and m["included"]
    assert not any(m["type"].endswith("_worst_pair") for m in metrics)  # two groups: the worst pair is the mean


def test_model_card_names_groups_and_worst_pairs(audit: tuple[dict[str, Any], Any]) -> None:
    """Three groups, one kept out: every group slice carries its name; each multi-group metric its worst pair."""
    results = json.loads(json.dumps(audit[0]))
    metrics = results["metrics"]
    base = metrics["groups"][0]
    metrics["groups"] = [
        dict(base, group=0, name="gender=F, race=A"),
        dict(base, group=1, name="gender=F, race=B", included=False, excluded_reason="absent from the test split"),
        dict(base, group=2, name="gender=M, race=A"),
        dict(base, group=3, name="gender=M, race=B"),
    ]
    metrics["included_groups"] = [0, 2, 3]
    metrics["test"]["worst_pairs"] = {
        "delta_sp": {"value": 0.4, "groups": [0, 3]},
        "delta_eo": {"value": 0.3, "groups": [2, 3]},
        "gamma_sp": {"value": 0.2, "groups": [0, 2]},
        "gamma_eo": {"value": math.nan, "groups": [0, 3]},
    }
    card: Any = json_safe(model_card(results).to_dict())
    json.dumps(card, allow_nan=False)
    performance = card["quantitative_analysis"]["performance_metrics"]
    tpr = {m["slice"]: m for m in performance if m["type"] == "true_positive_rate"}
    assert list(tpr) == ["group=0", "group=1", "group=2", "group=3"]
    assert tpr["group=1"]["group_name"] == "gender=F, race=B" and tpr["group=1"]["included"] is False
    assert tpr["group=3"]["group_name"] == "gender=M, race=B" and tpr["group=3"]["included"] is True
    worst = {m["type"]: m for m in performance if m["type"].endswith("_worst_pair")}
    assert worst["delta_sp_worst_pair"] == {
        "type": "delta_sp_worst_pair",
        "value": 0.4,
        "slice": "group=0 vs group=3",
        "groups": [0, 3],
        "group_names": ["gender=F, race=A", "gender=M, race=B"],
    }
    assert worst["delta_eo_worst_pair"]["group_names"] == ["gender=M, race=A", "gender=M, race=B"]
    assert worst["gamma_sp_worst_pair"]["value"] == 0.2 and worst["gamma_eo_worst_pair"]["value"] is None
    metrics["included_groups"] = [0, 2]  # two measured groups: no worst pair beyond the mean
    again = model_card(results).quantitative_analysis.performance_metrics
    assert not any(m.type.endswith("_worst_pair") for m in again)


def chromium(html: Path, png: Path) -> tuple[int, list[str], str]:
    """Open ``html`` in headless Chromium, offline, screenshot it to ``png``; returns its console lines."""
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={png.with_suffix('.profile')}", f"--screenshot={png}", "--window-size=1280,2000",
             "--enable-logging=stderr", "--v=0"]  # fmt: skip
    done = subprocess.run([str(CHROMIUM), *flags, html.as_uri()], capture_output=True, text=True, timeout=60)
    # Chromium logs console messages (errors and uncaught exceptions included) as ``INFO:CONSOLE``.
    console = [line for line in done.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    return done.returncode, console, done.stderr[-2000:]


@pytest.mark.skipif(not CHROMIUM.exists(), reason="/usr/bin/chromium is absent (apt-get install chromium)")
def test_report_in_headless_chromium(page: str, tmp_path: Path) -> None:
    """The page loads in a real browser, offline, with no console message at all; the screenshot shows a page.

    A page that throws is opened first, to prove that this Chromium reports console errors on stderr.
    """
    broken = tmp_path / "broken.html"
    broken.write_text("<!DOCTYPE html><title>x</title><script>throw new Error('probe')</script>", encoding="utf-8")
    _, console, _ = chromium(broken, tmp_path / "broken.png")
    assert any("Uncaught" in line and "probe" in line for line in console), console

    html, png = tmp_path / "report.html", tmp_path / "report.png"
    html.write_text(page, encoding="utf-8")
    code, console, stderr = chromium(html, png)
    assert code == 0, stderr
    assert console == []
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 50_000


def test_report_says_when_estimates_were_refined(audit: tuple[dict[str, Any], Any]) -> None:
    plain = _section(render_report(dict(audit[0], refinement=None)), "influence")
    refined = dict(audit[0], refinement={"deletions": 200, "max_iter": 300, "converged": 187})
    section = _section(render_report(refined), "influence")
    assert "Refined" not in plain
    assert "Refined" in section and "200 deletions" in section and "187" in section


def test_the_trust_check_names_its_ground_truth(audit: tuple[dict[str, Any], Any]) -> None:
    # a one-layer audit's truth is re-optimisation; a step estimate's is the proximal response, kept near the weights
    assert audit[0]["validation"]["mode"] == "reoptimize"
    plain = _section(render_report(audit[0]), "trust")
    assert "actual ΔΓ (re-optimised)" in plain and "near the given weights" not in plain and "retrained)" not in plain
    proximal = dict(audit[0], validation={**audit[0]["validation"], "mode": "proximal"})
    section = _section(render_report(proximal), "trust")
    assert "actual ΔΓ (re-optimised near the given weights)" in section
    assert "kept near the given weights (the question a step estimate answers" in section


def test_report_says_whether_debiasing_beats_random_deletion(audit: tuple[dict[str, Any], Any]) -> None:
    plain = _section(render_report(audit[0]), "debiasing")
    assert "help more than deleting any nodes?" in plain and "Not checked" in plain
    check = {
        "size": 3, "seeds": [1, 10, 100], "noise_floor": 0.001, "noise_multiple": 2.0, "yardstick": 0.002,
        "advantage": 0.03,
        "selected": {"effects": [-0.03, -0.031, -0.029], "mean": -0.03, "std": 0.001},
        "random": {"sets": [], "mean": 0.0012, "std": 0.002}, "beats_random": True, "reduces_bias": True,
        "verdict": "deleting the selected nodes reduces bias more than deleting random nodes <b>",
    }  # fmt: skip
    runs = [dict(r, against_random=check) for r in audit[0]["debiasing"]]
    section = _section(render_report(dict(audit[0], debiasing=runs)), "debiasing")
    assert "Not checked" not in section and "seeds 1, 10, 100" in section
    assert "-0.0300 ± 0.0010" in section and "0.0012 ± 0.0020" in section and ">yes<" in section
    assert "&lt;b&gt;" in section and "<b>" not in section


def test_report_reads_old_and_new_documents_alike(audit: tuple[dict[str, Any], Any]) -> None:
    """A document stored before the summary, profile, edges and retraining keys renders the sections it has exactly as
    the new one does; typed results render the same page as their JSON; a document of another shape is refused."""
    results = audit[0]
    dropped = ("summary", "profile", "edges", "supplied_model")
    old = {k: v for k, v in results.items() if k not in dropped}
    old["debiasing"] = [
        {k: v for k, v in r.items() if k not in ("retrain", "recipe", "backfired", "chance_rule")}
        for r in results["debiasing"]
    ]
    new_page, old_page = render_report(results), render_report(old)
    assert 'id="verdict"' in new_page and 'id="verdict"' not in old_page
    assert ('id="profile"' in new_page) == ("profile" in results) and 'id="profile"' not in old_page
    for ident in ("metrics", "groups", "influence", "top-harmful", "stability", "trust", "run"):
        assert _section(old_page, ident) == _section(new_page, ident), ident
    assert "every model was" not in _section(old_page, "debiasing")  # no retraining recorded: nothing claimed
    assert render_report(AuditResults.from_dict(results)) == new_page
    written = results | {
        "config": {"epochs": 30},
        "influence": [encode(r) for r in audit[1]],
        "ingest": {"rows": 300},
    }  # --json's extras
    assert render_report(written) == new_page
    with pytest.raises(ResultFormatError, match=r"results\.metrics"):
        render_report(dict(results, metrics={}))


class _Stored:
    """An audit read back from its stored document: what :func:`bind_core.reporting.text.render` asks of one."""

    def __init__(self, doc: dict[str, Any]) -> None:
        self.doc = doc

    def typed(self) -> AuditResults:
        return AuditResults.from_dict(self.doc)

    def edge_rows(self) -> list[EdgeRow]:
        return []


def test_text_reads_old_and_new_documents_alike(audit: tuple[dict[str, Any], Any]) -> None:
    """The command line's text of a document from before the summary, profile and retraining keys: every line it
    has is the new document's, the verdict and the profile are left out, and nothing else is."""
    results = audit[0]
    old = {k: v for k, v in results.items() if k not in ("summary", "profile", "edges")}
    old["debiasing"] = [{k: v for k, v in r.items() if k not in ("retrain", "recipe")} for r in results["debiasing"]]
    new_lines, old_lines = render(_Stored(results)).splitlines(), render(_Stored(old)).splitlines()  # type: ignore[arg-type]
    assert new_lines[0] == "VERDICT" and "VERDICT" not in old_lines
    assert [line for line in old_lines if line not in new_lines] == []
    left_out = [line for line in new_lines if line not in old_lines]
    summary = results["summary"]["text"].splitlines()
    recipe = [line for line in left_out if line.startswith("  retrained from scratch")]
    profile = [line for line in left_out if line not in recipe and line.strip() not in summary and line != "VERDICT"]
    assert len(recipe) == 1 and all(line for line in profile), left_out
    assert any("harmful" in line for line in profile) and len(profile) == len(profile_lines(results["profile"]))
