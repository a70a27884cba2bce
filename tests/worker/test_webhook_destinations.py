"""Webhook deliveries and server-side request forgery: the worker checks where a URL points before every
attempt (DNS may have changed since the subscription) and connects to the address it checked."""

from __future__ import annotations

import ipaddress
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.db.models import Webhook, WebhookDelivery
from app.services.webhooks import UnsafeDestination, public_addresses
from app.settings import Settings
from worker import webhooks
from worker.webhooks import deliver, pinned


class Local:
    """A receiver on 127.0.0.1 that records the ``Host`` header of every request and answers 204."""

    def __init__(self) -> None:
        self.hosts: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length", "0")))
                outer.hosts.append(self.headers.get("host", ""))
                self.send_response(204)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = int(self.server.server_address[1])
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def local() -> Iterator[Local]:
    receiver = Local()
    yield receiver
    receiver.server.shutdown()


def pending(sessions: sessionmaker[Session], tenant_id: uuid.UUID, url: str) -> uuid.UUID:
    """A subscription to ``url`` written straight to the database (as if its DNS changed after the check)."""
    with sessions.begin() as session:
        hook = Webhook(tenant_id=tenant_id, url=url, events=["audit.failed"], secret="whsec_" + "a" * 44)
        session.add(hook)
        session.flush()
        delivery = WebhookDelivery(webhook_id=hook.id, event="audit.failed", payload={"type": "audit.failed"})
        session.add(delivery)
        session.flush()
        return delivery.id


def row(sessions: sessionmaker[Session], delivery_id: uuid.UUID) -> WebhookDelivery:
    with sessions() as session:
        found = session.scalar(select(WebhookDelivery).where(WebhookDelivery.id == delivery_id))
        assert found is not None
        return found


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "2130706433"])
def test_delivery_to_a_private_address_is_refused_then_allowed_by_the_setting(
    settings: Settings, sessions: sessionmaker[Session], tenant_id: uuid.UUID, local: Local, host: str
) -> None:
    delivery_id = pending(sessions, tenant_id, f"http://{host}:{local.port}/hook")
    retry = deliver(delivery_id, sessions, settings)
    refused = row(sessions, delivery_id)
    assert retry is not None and refused.state == "pending" and refused.attempts == 1
    assert refused.last_error is not None and refused.last_error.startswith("refused: ")
    assert "127.0.0.1 (loopback)" in refused.last_error and refused.response_status is None
    assert local.hosts == []  # nothing was sent

    assert deliver(delivery_id, sessions, settings.model_copy(update={"webhook_allow_private": True})) is None
    done = row(sessions, delivery_id)
    assert (done.state, done.attempts, done.response_status, done.last_error) == ("succeeded", 2, 204, None)
    assert local.hosts == [f"{host}:{local.port}"]


def test_delivery_connects_to_the_checked_address(
    settings: Settings, sessions: sessionmaker[Session], tenant_id: uuid.UUID, local: Local,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """The name is resolved once, by the check; the request goes to that address with the name as ``Host``.

    ``rebind.test`` resolves nowhere (``.test`` is reserved), so a request that looked the name up again
    would fail; it succeeds only if it was sent to the checked address.
    """
    checked: list[str] = []

    def check(url: str) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
        checked.append(url)
        return [ipaddress.ip_address("127.0.0.1")]  # as if the check had found (and passed) this address

    monkeypatch.setattr(webhooks, "public_addresses", check)
    url = f"http://rebind.test:{local.port}/hook"
    assert deliver(pending(sessions, tenant_id, url), sessions, settings) is None
    assert checked == [url] and local.hosts == [f"rebind.test:{local.port}"]


def test_pinned_request_keeps_the_name_for_host_and_tls() -> None:
    target, host, extensions = pinned("https://hooks.example.com:8443/a?b=1", ipaddress.ip_address("2001:db8::1"))
    assert str(target) == "https://[2001:db8::1]:8443/a?b=1"
    assert host == {"host": "hooks.example.com:8443"} and extensions == {"sni_hostname": "hooks.example.com"}
    target, host, extensions = pinned("http://hooks.example.com/x", ipaddress.ip_address("192.0.2.7"))
    assert (str(target), host, extensions) == ("http://192.0.2.7/x", {"host": "hooks.example.com"}, {})


@pytest.mark.parametrize(
    ("url", "why"),
    [("http://127.0.0.1/", "loopback"), ("http://[::1]:9/", "loopback"), ("http://10.1.2.3/", "private"),
     ("http://169.254.169.254/latest/meta-data", "link-local"), ("http://224.0.0.1/", "multicast"),
     ("http://0.0.0.0/", "unspecified"), ("http://[::ffff:192.168.0.1]/", "private"),
     ("http://100.64.0.1/", "not globally routable"), ("http://no-such-host.test/", "cannot resolve")],
)  # fmt: skip
def test_public_addresses_refuses(url: str, why: str) -> None:
    with pytest.raises(UnsafeDestination, match=why):
        public_addresses(url)


def test_public_addresses_accepts_a_global_literal() -> None:
    assert public_addresses("https://8.8.8.8/hook") == [ipaddress.ip_address("8.8.8.8")]
