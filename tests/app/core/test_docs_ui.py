"""The API's documentation pages work offline: same-origin assets only, served, and rendered by a browser.

``/docs`` (Swagger UI) and ``/redoc`` (ReDoc) come from ``app/core/docs_ui``; no database or broker is needed
(the embedded SQLite defaults, in a temporary folder).
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from app.core.docs_ui.pages import REDOC_STYLE_HASHES
from app.core.settings import Settings
from app.main import create_app

ROOT = Path(__file__).resolve().parents[3]
CHROMIUM = Path("/usr/bin/chromium")
PAGES = ("/docs", "/redoc")
CONTENT_TYPES = {".js": "text/javascript", ".css": "text/css", ".png": "image/png"}


class Refs(HTMLParser):
    """Every ``src`` and ``href`` of a page, and the text inside its ``<script>`` and ``<style>`` elements."""

    def __init__(self) -> None:
        super().__init__()
        self.refs: list[str] = []
        self.inline: list[str] = []
        self._open: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.refs += [value or "" for name, value in attrs if name in ("src", "href")]
        self._open = tag if tag in ("script", "style") else None
        if tag == "style" or (tag == "script" and not dict(attrs).get("src")):
            self.inline.append(tag)

    def handle_endtag(self, tag: str) -> None:
        self._open = None

    def handle_data(self, data: str) -> None:
        if self._open and data.strip():
            self.inline.append(data)


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    folder = tmp_path_factory.mktemp("docs")
    settings = Settings(database_url=f"sqlite:///{folder}/bind.db", broker_url=f"sqla+sqlite:///{folder}/broker.db")
    with TestClient(create_app(settings)) as client:
        yield client


@pytest.mark.parametrize("page", PAGES)
def test_docs_pages_use_only_same_origin_assets_and_they_are_served(client: TestClient, page: str) -> None:
    response = client.get(page)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    parser = Refs()
    parser.feed(response.text)
    assert parser.inline == [], "no inline script or style (the CSP forbids them)"
    assert len(parser.refs) >= 3
    for ref in parser.refs:
        assert ref.startswith("/") and not ref.startswith("//"), ref
        asset = client.get(ref)
        assert asset.status_code == 200, ref
        assert asset.headers["content-type"].startswith(CONTENT_TYPES[Path(ref).suffix]), ref
        assert len(asset.content) > 100, ref
        assert b"cdn.redoc.ly" not in asset.content and b"cdn.jsdelivr.net" not in asset.content, ref


@pytest.mark.parametrize("page", PAGES)
def test_docs_pages_carry_a_strict_csp_and_the_security_headers(client: TestClient, page: str) -> None:
    headers = client.get(page).headers
    policy = dict(part.strip().split(" ", 1) for part in headers["content-security-policy"].split(";"))
    assert policy["default-src"] == "'none'"
    assert policy["script-src"] == "'self'"
    assert policy["style-src"].startswith("'self'") and "unsafe-inline" not in policy["style-src"]
    assert "unsafe" not in headers["content-security-policy"] and "http" not in headers["content-security-policy"]
    assert headers["x-content-type-options"] == "nosniff" and headers["x-frame-options"] == "DENY"


def test_only_redoc_allows_its_style_elements_by_hash(client: TestClient) -> None:
    """Swagger UI needs styles from this origin only; ReDoc also the ``<style>`` elements its bundle writes."""
    styles = {}
    for page in PAGES:
        policy = client.get(page).headers["content-security-policy"]
        styles[page] = next(p.split()[1:] for p in policy.split("; ") if p.startswith("style-src"))
    assert styles["/docs"] == ["'self'"]
    assert styles["/redoc"] == ["'self'", *(f"'{h}'" for h in REDOC_STYLE_HASHES)]


def test_docs_follow_the_root_path(tmp_path: Path) -> None:
    """Behind a proxy that mounts the API under a prefix, the page's references carry it."""
    settings = Settings(database_url=f"sqlite:///{tmp_path}/bind.db", broker_url=f"sqla+sqlite:///{tmp_path}/b.db")
    with TestClient(create_app(settings), root_path="/audit-api") as client:
        parser = Refs()
        parser.feed(client.get("/docs").text)
    assert parser.refs and all(ref.startswith("/audit-api/docs-assets/") for ref in parser.refs)


def test_docs_pages_are_not_operations_of_the_api(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert not [path for path in paths if path.startswith(("/docs", "/redoc"))]


# --- a real browser, with every host but 127.0.0.1 unreachable ----------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def live_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One uvicorn process serving the app on loopback (embedded SQLite, no worker); yields its base URL."""
    folder = tmp_path_factory.mktemp("live")
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "BIND_LOG_FORMAT": "text",
           "BIND_DATABASE_URL": f"sqlite:///{folder}/bind.db",
           "BIND_BROKER_URL": f"sqla+sqlite:///{folder}/b.db"}  # fmt: skip
    command = [sys.executable, "-m", "uvicorn", "app.main:create_app", "--factory", "--host", "127.0.0.1",
               "--port", str(port)]  # fmt: skip
    log = (folder / "uvicorn.log").open("wb")
    process = subprocess.Popen(command, cwd=folder, env=env, stdout=log, stderr=log)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert process.poll() is None, (folder / "uvicorn.log").read_text()
            try:
                if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        else:
            pytest.fail("uvicorn did not answer within 60 s")
        yield base
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()


def chromium_dom(url: str, profile: Path) -> tuple[int, str, list[str], str]:
    """Load ``url`` in headless Chromium with only 127.0.0.1 resolvable; ``(exit code, DOM, console lines, stderr)``.

    ``--virtual-time-budget`` lets the page's scripts run (fetching the OpenAPI document, rendering) before
    ``--dump-dom`` prints the DOM. Console messages, CSP violations and uncaught exceptions included, are
    logged on stderr as ``INFO:CONSOLE``.
    """
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1", f"--user-data-dir={profile}",
             "--enable-logging=stderr", "--v=0", "--virtual-time-budget=15000", "--dump-dom"]  # fmt: skip
    done = subprocess.run([str(CHROMIUM), *flags, url], capture_output=True, text=True, timeout=120)
    console = [line for line in done.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    return done.returncode, done.stdout, console, done.stderr[-3000:]


def _operations(live_server: str) -> set[tuple[str, str]]:
    paths = httpx.get(f"{live_server}/openapi.json", timeout=10).json()["paths"]
    return {(method.upper(), path) for path, item in paths.items() for method in item}


needs_chromium = pytest.mark.skipif(not CHROMIUM.exists(), reason="/usr/bin/chromium is absent (apt install chromium)")


@needs_chromium
def test_this_chromium_reports_console_errors_and_reaches_no_other_host(tmp_path: Path) -> None:
    """The probes behind the tests below: a throwing script shows on stderr, and a remote image fails."""
    page = tmp_path / "probe.html"
    page.write_text(
        "<!DOCTYPE html><title>probe</title><script>throw new Error('probe-throw')</script>"
        '<img src="https://example.com/x.png" onerror="document.title = \'offline\'"'
        " onload=\"document.title = 'online'\">",
        encoding="utf-8",
    )
    code, dom, console, stderr = chromium_dom(page.as_uri(), tmp_path / "profile")
    assert code == 0, stderr
    assert any("Uncaught" in line and "probe-throw" in line for line in console), console
    assert "<title>offline</title>" in dom


@needs_chromium
def test_swagger_ui_renders_every_operation_offline(live_server: str, tmp_path: Path) -> None:
    code, dom, console, stderr = chromium_dom(f"{live_server}/docs", tmp_path / "profile")
    assert code == 0, stderr
    assert console == [], console
    shown = set(re.findall(r'opblock-summary-method">(\w+)</span>.*?data-path="([^"]+)"', dom))
    assert ("POST", "/v1/audits") in shown
    assert shown == _operations(live_server)


@needs_chromium
def test_redoc_renders_every_operation_offline(live_server: str, tmp_path: Path) -> None:
    code, dom, console, stderr = chromium_dom(f"{live_server}/redoc", tmp_path / "profile")
    assert code == 0, stderr
    assert console == [], console
    shown = {(m.upper(), p) for m, p in re.findall(r'http-verb \w+">(\w+)</span><span[^>]*>([^<]+)</span>', dom)}
    assert ("POST", "/v1/audits") in shown
    assert shown == _operations(live_server)
