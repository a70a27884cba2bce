"""The schedule history page (bias over time): content, escaping, edge cases, and headless Chromium."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from test_report import CHROMIUM, chromium, outline

from bind_core.reporting.history import render_history

T0 = datetime(2026, 11, 1, 3, tzinfo=UTC)
SCHEDULE = {"id": "s-1", "graph_name": "demo", "interval_seconds": 86400, "state": "active",
            "thresholds": {"delta_sp": 0.1, "gamma": 0.08}, "next_run_at": T0 + timedelta(days=12)}  # fmt: skip


def run(day: int, state: str = "succeeded", sp: float = 0.05, **extra: Any) -> dict[str, Any]:
    row: dict[str, Any] = {"slot_time": T0 + timedelta(days=day), "audit_id": f"audit-{day}", "state": state,
                           "graph_version": 1 + day // 6}  # fmt: skip
    if state == "succeeded":
        breaches = [{"metric": "delta_sp", "value": sp, "threshold": 0.1}] if sp > 0.1 else []
        row.update(accuracy=0.85, delta_sp=sp, delta_eo=sp * 0.7, gamma=sp * 0.5, breaches=breaches)
    return {**row, **extra}


@pytest.fixture(scope="module")
def runs() -> list[dict[str, Any]]:
    """Twelve daily slots with ΔSP drifting up past its threshold, one failed and one still running;
    slot times as ISO strings (as JSON gives them) and out of order."""
    rows = [run(d, sp=0.04 + 0.01 * d) for d in range(12) if d not in (4, 11)]
    rows += [run(4, "failed"), run(11, "running")]
    return [{**r, "slot_time": r["slot_time"].isoformat()} for r in reversed(rows)]


@pytest.fixture(scope="module")
def page(runs: list[dict[str, Any]]) -> str:
    return render_history(SCHEDULE, runs, title="Schedule s-1")


def test_history_page_is_one_offline_page(page: str) -> None:
    found = outline(page)
    assert page.startswith("<!DOCTYPE html>") and found.title == "Schedule s-1"
    assert {"latest", "over-time", "runs"} <= found.ids and "script" not in found.tags
    assert page.count("<svg") == 1 and all(ref.startswith("#") for ref in found.refs)
    assert not re.search(r"https?:", page) and "default-src 'none'" in page
    ids = re.findall(r'\bid="([^"]+)"', page)
    assert len(set(ids)) == len(ids)


def test_history_page_shows_the_runs_newest_first(page: str, runs: list[dict[str, Any]]) -> None:
    table = page[page.index('id="runs"') :]
    slots = re.findall(r"<td class=l>(2026-11-\d\d \d\d:\d\d:\d\d)</td>", table)
    assert slots == [(T0 + timedelta(days=d)).strftime("%Y-%m-%d %H:%M:%S") for d in range(11, -1, -1)]
    crossed = [r for r in runs if r.get("breaches")]
    assert crossed and table.count("<span class=breach>▲") == len(crossed)  # ΔSP above 0.1 from day 7 on
    assert "ΔSP 0.140 &gt; 0.100" in table and ">failed<" in table and ">running<" in table
    assert "ΔSP &gt; 0.1, Γ &gt; 0.08" in page and "every 1 day" in page
    # The latest succeeded run (day 10) leads the cards, with its change since the first run shown.
    assert "Latest succeeded run: 2026-11-11 03:00:00" in page and "0.140" in page and "+0.100 since" in page
    assert f"{len(crossed)} of 10 succeeded runs crossed a threshold" in page
    # Thresholds are drawn: the dashed lines' legend entries are text in the SVG.
    assert "ΔSP threshold 0.1" in page and "Γ threshold 0.08" in page and "run without metrics" in page


def test_history_page_without_runs_and_with_hostile_text() -> None:
    hostile = {**SCHEDULE, "graph_name": "<script>alert(1)</script>", "thresholds": None, "cron": "0 3 * * *"}
    empty = render_history(hostile, [])
    assert "<svg" not in empty and "No run yet" in empty and "No succeeded run yet" in empty
    assert "<script>" not in empty and "&lt;script&gt;" in empty and "cron 0 3 * * * (UTC)" in empty
    failed_only = render_history(SCHEDULE, [run(0, "failed", audit_id="<b>x</b>")])
    assert "<svg" not in failed_only and "&lt;b&gt;x&lt;/b&gt;" in failed_only
    single = render_history(SCHEDULE, [run(0, sp=0.2, delta_eo=None, accuracy=float("nan"))])
    assert single.count("<svg") == 1 and "<span class=breach>▲ 0.200</span>" in single


@pytest.mark.skipif(not CHROMIUM.exists(), reason="/usr/bin/chromium is absent (apt-get install chromium)")
def test_history_page_in_headless_chromium(page: str, tmp_path: Path) -> None:
    """The page loads in a real browser, offline, without a console message; the screenshot shows a page."""
    broken = tmp_path / "broken.html"
    broken.write_text("<!DOCTYPE html><title>x</title><script>throw new Error('probe')</script>", encoding="utf-8")
    assert any("probe" in line for line in chromium(broken, tmp_path / "broken.png")[1])  # errors are seen

    html, png = tmp_path / "history.html", tmp_path / "history.png"
    html.write_text(page, encoding="utf-8")
    code, console, stderr = chromium(html, png)
    assert code == 0, stderr
    assert console == []
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 50_000


def test_a_run_without_a_verdict_and_a_failed_run_say_why() -> None:
    """A deployed model's schedule: the run whose model no longer fits its snapshot is boxed and says why it has no
    verdict, with its warnings' codes; the failed run says its problem."""
    drift = "on its own training nodes the model does no better than a constant (mean cross-entropy 1.17 against 0.692)"
    rows = [
        run(0, warning_codes=["scaled_inputs"]),
        run(1, sp=0.01, withheld=drift, warning_codes=["scaled_inputs", "training_fit", "training_fit"]),
        run(2, "failed", failure="model-does-not-fit: this version lacks the model's column(s) 'income'"),
    ]
    page = render_history({**SCHEDULE, "model": "model 'credit-gcn'"}, rows)
    table = page[page.index('id="runs"') :]
    assert f"no verdict: {drift}; warnings: scaled_inputs, training_fit<" in table  # each code once
    assert "model-does-not-fit: this version lacks the model&#39;s column(s) &#39;income&#39;" in table
    assert "warnings: scaled_inputs<" in table
    assert "supplied model &#39;credit-gcn&#39; on the graph &#39;demo&#39;" in page
    assert "run without a verdict (see the table)" in page  # the chart's legend: the boxed run
    plain = render_history(SCHEDULE, [run(0), run(1)])
    assert (
        "run without a verdict (see the table)" not in plain and plain.count("<td class=l>—</td>") == 2
    )  # nothing to note
