"""CI gates (``--fail-on``, ``--junit``): rules checked before anything is queued, interval bounds, verdicts that
fail closed, JUnit XML, and the progress line while waiting. No server: the client's parser and pure functions."""

from __future__ import annotations

import dataclasses
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from app.cli import build_parser, cmd_run
from app.client import progress_line
from app.gates import INTERVAL_METRICS, METRICS, Rule, judge, junit_xml, parse_rule
from bind_core.fairness.bootstrap import METRICS as BOOTSTRAPPED
from bind_core.fairness.records import Intervals, MetricValues

RESULTS: dict[str, Any] = {
    "metrics": {
        "test": {"delta_sp": 0.302, "delta_eo": 0.05, "gamma": None},
        "intervals": {
            "level": 0.95,
            "resamples": 1000,
            "delta_sp": {"estimate": 0.302, "low": 0.21, "high": 0.39},
            "gamma_eo": {"estimate": 0.1, "low": None, "high": None, "dropped": 1000},
        },
    }
}


def test_the_gate_names_exactly_the_metrics_an_audit_reports() -> None:
    reported = {f.name for f in dataclasses.fields(MetricValues)} - {"nodes", "undefined"}
    typed_intervals = {f.name for f in dataclasses.fields(Intervals)} - {"level", "resamples"}
    assert set(METRICS) == reported == typed_intervals
    assert INTERVAL_METRICS == BOOTSTRAPPED  # the bounds a rule may read are the ones the bootstrap computes
    with pytest.raises(Exception, match="the bootstrap gives no interval for gamma; bounds exist for accuracy"):
        parse_rule("gamma.upper>0.1")


@pytest.mark.parametrize("command", [["submit", "--graph-id", "g"], ["results", "some-id"]])
def test_a_misspelled_metric_exits_2_before_anything_is_queued(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        build_parser().parse_args([*command, "--fail-on", "dsp>0.1"])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert "unknown metric 'dsp'" in err and "valid metrics: accuracy, auc, f1, delta_sp" in err


def test_rules_parse_bounds_and_refuse_unknown_ones() -> None:
    assert parse_rule("delta_sp.upper>0.1") == Rule("delta_sp", "upper", ">", 0.1)
    assert str(parse_rule(" gamma_eo.lower >= 1e-2 ")) == "gamma_eo.lower>=0.01"
    with pytest.raises(Exception, match="unknown bound 'top'; valid: lower, upper"):
        parse_rule("delta_sp.top>0.1")


def test_verdicts_read_the_metric_or_its_interval_and_fail_closed() -> None:
    verdicts = judge(RESULTS, [parse_rule(r) for r in (
        "delta_sp>0.1", "delta_sp.lower>0.25", "delta_sp.upper>0.35", "delta_eo>0.1", "gamma>0.1", "delta_eo.upper>0.1",
        "gamma_sp.upper>0.1", "gamma_eo.upper>0.5",
    )])  # fmt: skip
    assert [v.crossed for v in verdicts] == [True, False, True, False, True, True, True, True]
    assert verdicts[0].reason == "delta_sp=0.302 > 0.1" and verdicts[0].value == 0.302
    assert verdicts[1].reason == "delta_sp.lower=0.21 <= 0.25"
    assert verdicts[2].value == 0.39
    assert "undefined" in verdicts[4].reason and verdicts[4].value is None
    assert "no resample defined this bound" not in verdicts[5].reason
    assert "gave no interval for delta_eo" in verdicts[5].reason
    assert "no resample defined this bound" in verdicts[7].reason
    no_bootstrap = judge({"metrics": {"test": {"delta_sp": 0.3}}}, [parse_rule("delta_sp.upper>0.1")])[0]
    assert no_bootstrap.crossed and "no bootstrap interval (run it with bootstrap > 0)" in no_bootstrap.reason


def test_junit_has_one_case_per_threshold_and_fails_the_crossed_ones() -> None:
    rules = [parse_rule("delta_sp>0.1"), parse_rule("delta_eo>0.1")]
    suite = ET.fromstring(junit_xml("a1", "succeeded", judge(RESULTS, rules)))
    assert (suite.get("tests"), suite.get("failures")) == ("2", "1")
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == ["delta_sp>0.1", "delta_eo>0.1"]
    failure = cases[0].find("failure")
    assert failure is not None and failure.get("message") == "delta_sp=0.302 > 0.1"
    assert cases[1].find("failure") is None
    failed = ET.fromstring(junit_xml("a1", "failed", judge(None, rules), "the graph is gone"))
    assert failed.get("failures") == "2"
    assert all("the audit failed: the graph is gone" in (c.find("failure").get("message") or "")  # type: ignore[union-attr]
               for c in failed.findall("testcase"))  # fmt: skip


def test_the_progress_line_names_the_stage_while_running() -> None:
    assert progress_line({"id": "a1", "state": "queued"}) == "audit a1: queued"
    running = {"id": "a1", "state": "running", "stage": "influence", "progress": 0.42}
    assert progress_line(running) == "audit a1: running, influence 42%"
    known = running | {"time_left": {"seconds": 200.0, "stage_seconds": 30.0, "basis": "…"}}
    assert progress_line(known) == "audit a1: running, influence 42%, about 3 min left"
    stage = running | {"time_left": {"seconds": None, "stage_seconds": 40.2, "basis": "…"}}
    assert progress_line(stage) == "audit a1: running, influence 42%, this stage about 40 s left"
    begun = running | {"time_left": {"seconds": None, "stage_seconds": None, "basis": "…"}}
    assert progress_line(begun) == "audit a1: running, influence 42%"


FAST_RUN = ["--synthetic", "--synthetic-nodes", "200", "--epochs", "5", "--skip", "influence,debiasing,validation",
            "--bootstrap", "0", "--quiet"]  # fmt: skip


def test_bind_audit_run_takes_the_same_gates(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    junit = tmp_path / "gates.xml"
    assert cmd_run([*FAST_RUN, "--fail-on", "delta_sp>=0", "--junit", str(junit)]) == 1
    out = capsys.readouterr().out
    assert "CROSSED  delta_sp>=0: delta_sp=" in out
    assert ET.fromstring(junit.read_text(encoding="utf-8")).get("failures") == "1"
    kept = tmp_path / "audit.json"
    assert cmd_run([*FAST_RUN, "--fail-on", "delta_sp<0", "--json", str(kept)]) == 0  # the user's --json is used
    assert kept.exists() and "ok       delta_sp<0" in capsys.readouterr().out
    with pytest.raises(SystemExit) as stopped:
        cmd_run([*FAST_RUN, "--fail-on", "dsp>0.1"])
    assert stopped.value.code == 2 and "unknown metric 'dsp'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cmd_run([*FAST_RUN, "--junit", str(junit)])
    assert "--junit needs --fail-on" in capsys.readouterr().err


def test_unwritable_output_files_are_refused_before_the_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``run --junit`` and ``report --output`` into a missing folder exit 2 before the audit runs or the server is
    asked."""
    import bind_core.cli
    from app import client

    def never(*_: Any, **__: Any) -> int:
        raise AssertionError("the work ran before the output path was checked")

    monkeypatch.setattr(bind_core.cli, "main", never)
    missing = tmp_path / "missing"
    with pytest.raises(SystemExit) as stopped:
        cmd_run([*FAST_RUN, "--fail-on", "delta_sp>0.1", "--junit", str(missing / "gates.xml")])
    assert stopped.value.code == 2 and f"--junit: cannot write {missing / 'gates.xml'}" in capsys.readouterr().err
    monkeypatch.setattr(client, "run", never)
    args = build_parser().parse_args(["report", "a1", "--key", "k", "-o", str(missing / "r.html")])
    assert client.main(args) == client.AUDIT_FAILED
    err = capsys.readouterr().err
    assert f"--output: cannot write {missing / 'r.html'}: the folder {missing} does not exist" in err
