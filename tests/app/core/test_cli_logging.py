"""The client commands (``bind-audit submit``, ``status``, ``results``, ``report``) print their own progress line;
httpx's line per request (INFO) is not among their output."""

from __future__ import annotations

import subprocess
import sys

REQUEST = """
import logging
import httpx
from app.cli import configure_cli_logging
{setup}
client = httpx.Client(transport=httpx.MockTransport(lambda request: httpx.Response(200, json={{}})))
client.get("http://bind-audit.invalid/v1/audits")
logging.getLogger("app").info("the command's own line")
"""


def _stderr(setup: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", REQUEST.format(setup=setup)], capture_output=True, text=True, check=True, timeout=120
    )
    return done.stderr


def test_the_client_commands_print_no_line_per_request() -> None:
    said = _stderr("configure_cli_logging()")
    assert "the command's own line" in said and "HTTP Request" not in said
    plain = _stderr('logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")')
    assert "httpx: HTTP Request: GET http://bind-audit.invalid/v1/audits" in plain  # what they printed before
