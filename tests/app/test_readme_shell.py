"""The README's shell blocks work on a first run: every ``bash`` block is marked, and the blocks marked
``<!-- readme-test: run -->`` run in order, as one shell session, against a live ``bind-audit serve`` on its
embedded default (SQLite and a server-less queue in a fresh folder, one worker process), failing on any non-zero
step (``set -euo pipefail``).

The one change to the blocks' text: the README's ``localhost:8000`` becomes the free port the test serves on. The live
test needs neither Postgres nor Redis; it carries ``integration`` because it starts service processes (the marker's
meaning in pyproject.toml), so the inner loop (``scripts/fast``) leaves its ~45 s out while ``scripts/check`` runs it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
MARKER = re.compile(r"<!-- readme-test: (run|skip \(.+?\)) -->\n```bash\n(.*?)```", re.S)
SERVE_SECONDS = 120.0
SCRIPT_SECONDS = 300.0


def bash_blocks() -> list[tuple[str | None, str]]:
    """Every ``bash`` block of the README with its marker (``"run"``, ``"skip (why)"`` or ``None``)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    marked = {m.start(2): (m.group(1), m.group(2)) for m in MARKER.finditer(text)}
    blocks: list[tuple[str | None, str]] = []
    for block in re.finditer(r"```bash\n(.*?)```", text, re.S):
        blocks.append(marked.get(block.start(1), (None, block.group(1))))
    return blocks


def test_every_shell_block_is_marked_run_or_skip_with_a_reason() -> None:
    blocks = bash_blocks()
    assert [code for marker, code in blocks if marker is None] == []
    assert sum(marker == "run" for marker, _ in blocks) >= 2  # the service demo and the schedule


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[int, dict[str, str]]]:
    """``bind-audit serve`` in ``tmp_path`` on a free port, with no ``BIND_`` setting from the environment."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BIND_")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    port = _free_port()
    entry = "import sys; from app.cli import entry; sys.exit(entry())"
    command = [sys.executable, "-c", entry, "serve", "--port", str(port), "--loglevel", "warning", "--grace", "5"]
    log = (tmp_path / "serve.log").open("wb")
    server = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + SERVE_SECONDS
        while True:
            assert server.poll() is None, (tmp_path / "serve.log").read_text(errors="replace")
            try:
                if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "bind-audit serve did not become ready"
            time.sleep(0.5)
        yield port, env
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()


@pytest.mark.integration
def test_the_readme_runs_against_a_live_server(served: tuple[int, dict[str, str]], tmp_path: Path) -> None:
    port, env = served
    assert shutil.which("curl") and shutil.which("jq"), (
        "the README's shell blocks need curl and jq (.ci/run installs them)"
    )
    steps = [code for marker, code in bash_blocks() if marker == "run"]
    script = "set -euo pipefail\n" + "\n".join(steps).replace("localhost:8000", f"127.0.0.1:{port}")
    shell = subprocess.Popen(
        ["bash", "-c", script], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, start_new_session=True,
    )  # fmt: skip
    try:
        out, _ = shell.communicate(timeout=SCRIPT_SECONDS)
    except subprocess.TimeoutExpired:
        os.killpg(shell.pid, signal.SIGKILL)
        out, _ = shell.communicate()
        pytest.fail(f"the README's blocks ran past {SCRIPT_SECONDS:.0f} s:\n{out}")
    assert shell.returncode == 0, out
    printed = re.search(r'^\{\n  "state".*?^\}$', out, re.S | re.M)  # the audit's summary, as jq prints it
    assert printed is not None, out
    summary = json.loads(printed.group(0))
    assert summary["state"] == "succeeded", out
    # The README says the demo's self-check passes (per-node Pearson 0.996 measured) and warns of nothing.
    assert summary["self_check"] >= 0.9 and summary["warnings"] == [], summary
    assert summary["verdict"].startswith(("Biased: sens=", "No clear bias")), summary  # the verdict, in group names
    assert out.rstrip().splitlines()[-1] == "paused", out  # then the DELETE (curl -f: a 204, no body)


def test_the_sites_first_audit_is_the_readmes() -> None:
    """docs/service.md repeats the README's service block; the test above runs the README's, so they must agree."""
    readme_service = next(code for marker, code in bash_blocks() if marker == "run")
    assert readme_service in (ROOT / "docs" / "service.md").read_text(encoding="utf-8")
