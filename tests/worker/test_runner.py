"""`app.audits.run.execute`: claim, progress, cancellation, fencing and the stored outcome."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session, sessionmaker

from app.audits import run as runner
from app.audits.engine import LIBRARY, Engine
from app.core.db.session import now
from app.core.db.tables import Audit, InfluenceRow, Webhook, WebhookDelivery
from app.core.lease import LeaseLost
from app.core.settings import Settings
from bind_core import AuditConfig, ConfigError, Graph, synthetic
from bind_core.codec import encode
from bind_core.pipeline import Caveat
from bind_core.pipeline.results import EdgeRow
from bind_core.pipeline.results import InfluenceRow as NodeRow

Progress = Callable[[str, float], None]


class FakeModel:
    def to_bytes(self) -> bytes:
        return b"safetensors-bytes"

    def config_dict(self) -> dict[str, Any]:
        return {"arch": "gcn", "hidden": 16}


@dataclass
class FakeResult:
    rows: list[NodeRow] = field(default_factory=list)
    model: FakeModel = field(default_factory=FakeModel)
    config: Any = field(default_factory=lambda: SimpleNamespace(to_dict=dict))  # the runner logs config.to_dict()

    def to_dict(self) -> dict[str, Any]:
        return {"metrics": {"accuracy": 0.75}, "influence_summary": None}

    def influence_rows(self) -> list[NodeRow]:
        return self.rows

    def iter_edge_rows(self) -> Iterator[EdgeRow]:
        return iter(())


def rows(n: int) -> list[NodeRow]:
    return [
        NodeRow(
            position=i,
            node_index=10 + i,
            node_id=100 + i,
            group=i % 2,
            label=1,
            delta=-0.1 * i,
            delta_sp=-0.05 * i,
            delta_eo=-0.05 * i,
        )
        for i in range(n)
    ]


_WARNED: dict[str, Callable[[list[str]], None]] = {}
"""The attempt's ``on_warnings`` as the double was handed it (:func:`fake_audit`)."""

_ENGINE: dict[str, Engine] = {}
"""The engine the test installed (:func:`fake_audit`); without one, the service's own."""


@pytest.fixture
def fake_audit() -> Iterator[Callable[[Callable[[Progress], FakeResult]], None]]:
    """A typed double of the attempt's engine (:class:`app.audits.engine.Engine`): a small real graph, and the audit
    replaced by ``body``, which gets the progress callback."""
    graph = synthetic(80, seed=0)

    def install(body: Callable[[Progress], FakeResult]) -> None:
        def compute(
            graph: Graph, config: AuditConfig | None = None, *, progress: Any = None, model: Any = None,
            device: str = "cpu", chunk_runner: Any = None, keep: Any = None, deletion_threads: int = 1,
            on_warnings: Any = None,
        ) -> FakeResult:  # fmt: skip
            assert progress is not None
            _WARNED["on_warnings"] = on_warnings
            return body(progress)

        _ENGINE["engine"] = Engine(load=lambda sessions, settings, claim: graph, compute=compute)

    yield install
    _ENGINE.clear()
    _WARNED.clear()


def run(audit_id: uuid.UUID, sessions: sessionmaker[Session], settings: Settings) -> runner.Outcome:
    engine = _ENGINE.get("engine", LIBRARY)
    return runner.execute(str(audit_id), sessions=sessions, settings=settings, device="cpu", engine=engine)


def get(sessions: sessionmaker[Session], audit_id: uuid.UUID) -> Audit:
    with sessions() as session:
        audit = session.get(Audit, audit_id)
        assert audit is not None
        _ = audit.model_weights  # load the deferred column before the session closes
        return audit


def count_rows(sessions: sessionmaker[Session], audit_id: uuid.UUID) -> int:
    with sessions() as session:
        return session.scalar(select(func.count()).where(InfluenceRow.audit_id == audit_id)) or 0


def test_success_stores_results_weights_and_rows_once(sessions, settings, new_audit, fake_audit) -> None:
    seen: list[tuple[str, float]] = []

    def body(progress: Progress) -> FakeResult:
        progress("training", 0.5)
        with sessions() as session:
            audit = session.get(Audit, audit_id)
            assert audit is not None
            seen.append((audit.stage or "", audit.progress))
        return FakeResult(rows(3))

    fake_audit(body)
    audit_id = new_audit()
    assert run(audit_id, sessions, settings).status == "succeeded"
    audit = get(sessions, audit_id)
    assert seen == [("training", pytest.approx(0.5 / 5))]  # a fifth of the audit: five stages planned
    assert (audit.state, audit.attempts, audit.device, audit.stage, audit.progress) == (
        "succeeded", 1, "cpu", None, 1.0)  # fmt: skip
    assert audit.results == {"metrics": {"accuracy": 0.75}, "influence_summary": None}
    assert audit.model_weights == b"safetensors-bytes"
    assert audit.model_config == {"arch": "gcn", "hidden": 16}
    assert audit.started_at is not None and audit.finished_at is not None
    assert count_rows(sessions, audit_id) == 3

    # A redelivered message for a finished audit is a no-op.
    assert run(audit_id, sessions, settings).status == "skipped"
    assert get(sessions, audit_id).attempts == 1


@dataclass
class WarnedResult(FakeResult):
    warnings: list[str] = field(default_factory=list)
    warning_codes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return super().to_dict() | {"warnings": self.warnings, "warning_codes": self.warning_codes}


def test_warnings_are_stored_while_the_audit_runs_then_replaced_by_the_results(
    sessions, settings, new_audit, fake_audit
) -> None:
    """The model's and metrics' warnings reach the row before the estimate runs (a supplied model fed inputs it
    never saw is told before the estimate's minutes); the results' full list replaces them."""
    seen: list[list[str] | None] = []
    codes: list[list[str] | None] = []

    def body(progress: Progress) -> FakeResult:
        progress("metrics", 1.0)
        seen.append(get(sessions, audit_id).warnings)  # none known yet: null, not an empty list
        _WARNED["on_warnings"]([Caveat("the model does no better than a constant", "training_fit")])
        seen.append(get(sessions, audit_id).warnings)
        codes.append(get(sessions, audit_id).warning_codes)
        progress("influence", 0.5)
        return WarnedResult(
            rows(3),
            warnings=["the model does no better than a constant", "a low self-check"],
            warning_codes=["training_fit", "self_check_low"],
        )

    fake_audit(body)
    audit_id = new_audit()
    assert run(audit_id, sessions, settings).status == "succeeded"
    assert seen == [None, ["the model does no better than a constant"]]
    assert codes == [["training_fit"]]  # each warning's code beside it, for a machine to act on
    done = get(sessions, audit_id)
    assert done.warnings == ["the model does no better than a constant", "a low self-check"]
    assert done.warning_codes == ["training_fit", "self_check_low"]


def test_stored_warnings_are_sent_to_the_audit_warned_webhooks_once(
    sessions, settings, new_audit, fake_audit, tenant_id
) -> None:
    """The warnings' transaction writes the ``audit.warned`` deliveries (subscribers of other events get none); a
    later attempt that stores the same warnings sends nothing again."""
    with sessions.begin() as session:
        warned = Webhook(tenant_id=tenant_id, url="https://example.org/w", events=["audit.warned"], secret="whsec_x")
        other = Webhook(tenant_id=tenant_id, url="https://example.org/s", events=["audit.succeeded"], secret="whsec_y")
        session.add_all([warned, other])
        session.flush()
        hooks = (warned.id, other.id)
    early = [Caveat("the model does no better than a constant", "training_fit")]

    def body(progress: Progress) -> FakeResult:
        _WARNED["on_warnings"](early)
        _WARNED["on_warnings"](early)  # the same again (another attempt): no second event
        return WarnedResult(rows(1), warnings=early)

    fake_audit(body)
    audit_id = new_audit()
    try:
        assert run(audit_id, sessions, settings).status == "succeeded"
        with sessions() as session:
            sent = session.scalars(select(WebhookDelivery).where(WebhookDelivery.webhook_id.in_(hooks))).all()
            by_event = sorted((d.event, d.webhook_id == hooks[0]) for d in sent)
            assert by_event == [("audit.succeeded", False), ("audit.warned", True)]
            payload = next(d.payload for d in sent if d.event == "audit.warned")
            assert payload["data"]["audit_id"] == str(audit_id) and payload["data"]["warnings"] == early
            assert payload["data"]["warning_codes"] == ["training_fit"]
            assert payload["data"]["state"] == "running"
    finally:
        with sessions.begin() as session:
            session.execute(delete(Webhook).where(Webhook.id.in_(hooks)))


def test_audit_warned_goes_only_to_subscriptions_whose_codes_it_has(
    sessions, settings, new_audit, fake_audit, tenant_id
) -> None:
    """A subscription naming warning codes gets ``audit.warned`` only for an audit with one of them: a scheduled
    audit's repeated ``scaled_inputs`` reaches the unfiltered subscription, not the one waiting for a misfit."""
    with sessions.begin() as session:
        drift = Webhook(tenant_id=tenant_id, url="https://example.org/d", events=["audit.warned"],
                        warning_codes=["output_order", "training_fit"], secret="whsec_x")  # fmt: skip
        every = Webhook(tenant_id=tenant_id, url="https://example.org/e", events=["audit.warned"], secret="whsec_y")
        session.add_all([drift, every])
        session.flush()
        hooks = (drift.id, every.id)
    sent: dict[str, list[uuid.UUID]] = {}
    try:
        for name, codes in (("scaled", ["scaled_inputs"]), ("misfit", ["scaled_inputs", "training_fit"])):
            early = [Caveat(f"said: {code}", code) for code in codes]

            def body(progress: Progress, early: list[Caveat] = early) -> FakeResult:
                _WARNED["on_warnings"](early)
                return WarnedResult(rows(1), warnings=early)

            fake_audit(body)
            audit_id = new_audit()
            assert run(audit_id, sessions, settings).status == "succeeded"
            with sessions() as session:
                sent[name] = sorted(
                    session.scalars(
                        select(WebhookDelivery.webhook_id).where(
                            WebhookDelivery.event == "audit.warned",
                            WebhookDelivery.webhook_id.in_(hooks),
                            WebhookDelivery.payload["data"]["audit_id"].as_string() == str(audit_id),
                        )
                    ).all(),
                    key=hooks.index,
                )
        assert sent == {"scaled": [every.id], "misfit": [drift.id, every.id]}
    finally:
        with sessions.begin() as session:
            session.execute(delete(Webhook).where(Webhook.id.in_(hooks)))


def test_warnings_of_a_cancelled_audit_are_not_written(sessions, settings, new_audit, fake_audit) -> None:
    def body(progress: Progress) -> FakeResult:
        with sessions.begin() as session:  # the API's cancel
            session.execute(update(Audit).where(Audit.id == audit_id).values(state="cancelled"))
        _WARNED["on_warnings"](["late"])  # a fenced miss: nothing written, nothing raised
        progress("metrics", 1.0)
        raise AssertionError("the progress callback should have raised")

    fake_audit(body)
    audit_id = new_audit()
    assert run(audit_id, sessions, settings).status == "cancelled"
    assert get(sessions, audit_id).warnings is None


def test_takeover_of_a_dead_attempt_replaces_its_rows(sessions, settings, new_audit, fake_audit) -> None:
    fake_audit(lambda progress: FakeResult(rows(2)))
    stale = now() - timedelta(seconds=settings.heartbeat_timeout + 5)
    audit_id = new_audit(state="running", attempts=1, heartbeat_at=stale)
    with sessions.begin() as session:  # leftovers of an earlier attempt
        session.add_all(InfluenceRow(audit_id=audit_id, **_db_row(r)) for r in rows(5))
    assert run(audit_id, sessions, settings).status == "succeeded"
    assert get(sessions, audit_id).attempts == 2
    assert count_rows(sessions, audit_id) == 2


def _db_row(row: NodeRow) -> dict[str, Any]:
    out = encode(row)
    out["grp"] = out.pop("group")
    return out


def test_a_stale_audit_with_no_attempts_left_is_not_claimed(sessions, settings, new_audit, fake_audit) -> None:
    fake_audit(lambda progress: FakeResult())
    stale = now() - timedelta(seconds=settings.heartbeat_timeout + 5)
    audit_id = new_audit(state="running", attempts=settings.max_attempts, heartbeat_at=stale)
    assert run(audit_id, sessions, settings).status == "skipped"  # the sweeper fails it instead


def test_running_elsewhere_with_fresh_heartbeat_is_skipped(sessions, settings, new_audit, fake_audit) -> None:
    fake_audit(lambda progress: FakeResult())
    audit_id = new_audit(state="running", attempts=1, heartbeat_at=now())
    assert run(audit_id, sessions, settings).status == "skipped"
    assert get(sessions, audit_id).attempts == 1


def test_bind_error_fails_with_a_problem_document(sessions, settings, new_audit, fake_audit) -> None:
    def body(progress: Progress) -> FakeResult:
        progress("training", 0.1)
        raise ConfigError("solver: expected one of auto, exact, cg, lissa, got 'magic'")

    fake_audit(body)
    audit_id = new_audit()
    assert run(audit_id, sessions, settings).status == "failed"
    audit = get(sessions, audit_id)
    assert audit.state == "failed" and audit.results is None and audit.finished_at is not None
    assert audit.error is not None
    assert audit.error["status"] == 422
    assert audit.error["type"].endswith("/invalid-config")
    assert "'magic'" in audit.error["detail"]
    assert audit.error["stage"] == "training"
    assert audit.error["instance"] == f"/v1/audits/{audit_id}"


def test_internal_error_shows_no_message_and_no_trace(sessions, settings, new_audit, fake_audit) -> None:
    def body(progress: Progress) -> FakeResult:
        raise RuntimeError("secret: /home/svc/.cache password=hunter2")

    fake_audit(body)
    audit_id = new_audit()
    assert run(audit_id, sessions, settings).status == "failed"
    error = get(sessions, audit_id).error
    assert error is not None and error["status"] == 500
    text = json.dumps(error)
    assert "hunter2" not in text and "Traceback" not in text and "RuntimeError" in text


def test_missing_dataset_fails_with_422(sessions, settings, new_audit) -> None:
    audit_id = new_audit(dataset="income")  # the data root is an empty folder
    assert run(audit_id, sessions, settings).status == "failed"
    error = get(sessions, audit_id).error
    assert error is not None and error["status"] == 422
    assert error["type"].endswith("/dataset-not-found")


def test_cancel_during_run_stops_without_results(sessions, settings, new_audit, fake_audit) -> None:
    def body(progress: Progress) -> FakeResult:
        progress("training", 0.1)
        with sessions.begin() as session:  # the API's cancel
            session.execute(update(Audit).where(Audit.id == audit_id).values(state="cancelled"))
        progress("training", 0.2)
        raise AssertionError("the progress callback should have raised")

    fake_audit(body)
    audit_id = new_audit()
    assert run(audit_id, sessions, settings).status == "cancelled"
    audit = get(sessions, audit_id)
    assert (audit.state, audit.results, audit.error) == ("cancelled", None, None)
    assert audit.finished_at is not None
    assert count_rows(sessions, audit_id) == 0


def test_cancel_after_the_last_callback_discards_the_result(sessions, settings, new_audit, fake_audit) -> None:
    def body(progress: Progress) -> FakeResult:
        with sessions.begin() as session:
            session.execute(update(Audit).where(Audit.id == audit_id).values(state="cancelled"))
        return FakeResult(rows(3))

    fake_audit(body)
    audit_id = new_audit()
    assert run(audit_id, sessions, settings).status == "cancelled"
    assert get(sessions, audit_id).results is None
    assert count_rows(sessions, audit_id) == 0


@pytest.mark.parametrize("when", ["during the run", "after the last callback", "failing", "with its plan"])
def test_an_audit_erased_while_running_ends_cancelled(sessions, settings, new_audit, fake_audit, when) -> None:
    """``DELETE /v1/audits/{id}`` or a graph's purge racing the attempt: no row is left to write to, and the attempt
    stops as cancelled without raising (``Lease.CANCELLED``) and without writing anything back."""

    def body(progress: Progress) -> FakeResult:
        progress("training", 0.1)
        with sessions.begin() as session:  # the API's erasure
            session.execute(delete(Audit).where(Audit.id == audit_id))
        if when == "during the run":
            progress("training", 0.2)
            raise AssertionError("the progress callback should have raised")
        if when == "failing":
            raise RuntimeError("the audit fails after its row was erased")
        if when == "with its plan":  # a distributed estimate's coordinator finds its plan gone with the audit
            raise LeaseLost
        return FakeResult(rows(3))

    fake_audit(body)
    audit_id = new_audit()
    assert run(audit_id, sessions, settings).status == "cancelled"
    with sessions() as session:
        assert session.get(Audit, audit_id) is None
    assert count_rows(sessions, audit_id) == 0


def test_an_attempt_taken_over_writes_nothing(sessions, settings, new_audit, fake_audit) -> None:
    def body(progress: Progress) -> FakeResult:
        with sessions.begin() as session:  # another worker claimed it after our heartbeat went stale
            session.execute(update(Audit).where(Audit.id == audit_id).values(attempts=Audit.attempts + 1))
        progress("metrics", 0.5)
        return FakeResult(rows(3))

    fake_audit(body)
    audit_id = new_audit()
    assert run(audit_id, sessions, settings).status == "lost"
    audit = get(sessions, audit_id)
    assert (audit.state, audit.attempts, audit.results) == ("running", 2, None)
    assert count_rows(sessions, audit_id) == 0


def test_heartbeat_runs_between_callbacks(sessions, settings, new_audit, fake_audit) -> None:
    beats: list[Any] = []

    def body(progress: Progress) -> FakeResult:
        time.sleep(0.3)  # a long stretch without a progress callback
        beats.append(get(sessions, audit_id).heartbeat_at)
        return FakeResult()

    fake_audit(body)
    audit_id = new_audit()
    run(audit_id, sessions, settings)
    assert beats[0] > get(sessions, audit_id).started_at


def test_an_unstorable_result_fails_the_audit(sessions, settings, new_audit, fake_audit) -> None:
    class Broken(FakeResult):
        def to_dict(self) -> dict[str, Any]:
            raise TypeError("not serialisable")

    fake_audit(lambda progress: Broken())
    audit_id = new_audit()
    assert run(audit_id, sessions, settings).status == "failed"
    error = get(sessions, audit_id).error
    assert error is not None and error["status"] == 500


def test_malformed_id_is_dropped(sessions, settings) -> None:
    assert run_raw("not-a-uuid", sessions, settings).status == "skipped"


def run_raw(audit_id: str, sessions: sessionmaker[Session], settings: Settings) -> runner.Outcome:
    return runner.execute(audit_id, sessions=sessions, settings=settings, device="cpu")
