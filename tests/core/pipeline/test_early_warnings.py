"""``run_audit(on_warnings=...)``: the warnings known once the model and its metrics are in, handed over before the
influence stage's minutes, each of them repeated in the results' ``warnings``."""

from __future__ import annotations

from bind_core import AuditConfig, run_audit, synthetic


def test_warnings_known_after_the_metrics_are_handed_over_before_the_estimate() -> None:
    graph = synthetic(300)  # one group has few positive test nodes: the metrics warn
    events: list[tuple[str, object]] = []
    config = AuditConfig(stages=("training", "metrics", "influence"), bootstrap=100)
    result = run_audit(
        graph,
        config,
        progress=lambda stage, fraction: events.append((stage, fraction)),
        on_warnings=lambda warnings: events.append(("warned", list(warnings))),
    )
    warned = [i for i, (name, _) in enumerate(events) if name == "warned"]
    assert len(warned) == 1  # once
    at = warned[0]
    early = events[at][1]
    assert isinstance(early, list) and early
    assert any("positive test nodes" in text for text in early)
    assert {name for name, _ in events[:at]} == {"training", "metrics"}  # after the metrics...
    assert {name for name, _ in events[at + 1 :]} == {"influence"}  # ...and before the estimate
    assert set(early) <= set(result.warnings())


def test_an_audit_without_warnings_hands_over_none() -> None:
    graph = synthetic(1600)  # groups large enough, no bootstrap: nothing to warn of
    warned: list[list[str]] = []
    result = run_audit(graph, AuditConfig(stages=("training", "metrics"), bootstrap=0), on_warnings=warned.append)
    assert result.warnings() == [] and warned == []
