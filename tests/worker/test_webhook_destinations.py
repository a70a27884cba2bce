"""Webhook deliveries and server-side request forgery: the worker checks where a URL points before every
attempt (DNS may have changed since the subscription) and connects to the address it checked."""

from __future__ import annotations

import ipaddress
import socket
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.core.db.tables import Webhook, WebhookDelivery
from app.core.settings import Settings
from app.webhooks import delivery as webhooks
from app.webhooks.delivery import deliver, pinned
from app.webhooks.service import UnsafeDestination, public_addresses


class Local:
    """A receiver on 127.0.0.1 that records the ``Host`` header of every request and answers 204 (or, with
    ``redirect`` set, 307 to that URL)."""

    def __init__(self) -> None:
        self.hosts: list[str] = []
        self.redirect: str | None = None
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length", "0")))
                outer.hosts.append(self.headers.get("host", ""))
                self.send_response(204 if outer.redirect is None else 307)
                if outer.redirect is not None:
                    self.send_header("location", outer.redirect)
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


def test_a_rebinding_resolver_cannot_move_a_delivery(
    settings: Settings, sessions: sessionmaker[Session], tenant_id: uuid.UUID, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DNS rebinding: the name answers a public address the first time and 127.0.0.1 ever after.

    The first attempt connects to the public address it validated (a second lookup, as an unpinned client
    makes when it connects, would have reached 127.0.0.1); the second attempt validates again, sees
    127.0.0.1 and is refused without connecting. ``socket.create_connection`` is replaced by one that
    resolves like the real one, records where it would connect, and refuses.
    """
    asked: list[str] = []

    def getaddrinfo(host: str, port: int, *args: Any, **kwargs: Any) -> list[Any]:
        try:
            address = str(ipaddress.ip_address(host))  # a literal resolves to itself, as in the real resolver
        except ValueError:
            asked.append(host)
            address = "93.184.215.14" if len(asked) == 1 else "127.0.0.1"
        return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (address, port))]

    connected: list[tuple[str, int]] = []

    def create_connection(address: tuple[str, int], *args: Any, **kwargs: Any) -> socket.socket:
        resolved = socket.getaddrinfo(address[0], address[1], type=socket.SOCK_STREAM)[0][4]
        connected.append((str(resolved[0]), int(resolved[1])))
        raise ConnectionRefusedError("test: no network")

    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    monkeypatch.setattr(socket, "create_connection", create_connection)
    delivery_id = pending(sessions, tenant_id, "http://rebind.example:8080/hook")

    assert deliver(delivery_id, sessions, settings) is not None  # failed (connection refused): retried
    first = row(sessions, delivery_id)
    assert first.last_error is not None and first.last_error.startswith("ConnectError"), first.last_error
    assert connected == [("93.184.215.14", 8080)] and asked == ["rebind.example"]

    assert deliver(delivery_id, sessions, settings) is not None
    second = row(sessions, delivery_id)
    assert second.last_error is not None and second.last_error.startswith("refused: "), second.last_error
    assert "127.0.0.1 (loopback)" in second.last_error and second.attempts == 2
    assert connected == [("93.184.215.14", 8080)] and asked == ["rebind.example"] * 2  # nothing more sent


@pytest.mark.parametrize("allow_private", [False, True])
def test_redirects_are_not_followed(
    settings: Settings, sessions: sessionmaker[Session], tenant_id: uuid.UUID, local: Local,
    monkeypatch: pytest.MonkeyPatch, allow_private: bool,
) -> None:  # fmt: skip
    """A 307 to another address is a failed attempt, not a second request (it would skip the address check)."""
    local.redirect = f"http://127.0.0.1:{local.port}/elsewhere"
    monkeypatch.setattr(webhooks, "public_addresses", lambda url: [ipaddress.ip_address("127.0.0.1")])
    host = "127.0.0.1" if allow_private else "hooks.test"  # checked and pinned to 127.0.0.1 (patched)
    delivery_id = pending(sessions, tenant_id, f"http://{host}:{local.port}/hook")
    checked = settings.model_copy(update={"webhook_allow_private": allow_private})
    assert deliver(delivery_id, sessions, checked) is not None
    assert row(sessions, delivery_id).last_error == "HTTP 307" and len(local.hosts) == 1


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
