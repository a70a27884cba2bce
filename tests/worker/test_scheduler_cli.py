"""``bind-audit scheduler``: the CLI hands over to ``python -m worker.scheduler``; the process refuses a zero
interval. (Running schedulers against Postgres: ``tests/integration/test_scheduler_process.py``.)"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from app import cli


def test_scheduler_subcommand_execs_the_scheduler_module(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[list[str]] = []

    def fake_execv(path: str, argv: list[str]) -> None:
        assert path == argv[0]
        calls.append(argv)
        raise SystemExit(0)  # execv does not return

    monkeypatch.setattr(os, "execv", fake_execv)
    for argv in (["scheduler", "--interval", "0.5"], ["scheduler"]):
        with pytest.raises(SystemExit):
            cli.main(argv)
    assert calls == [
        [sys.executable, "-m", "worker.scheduler", "--interval=0.5"],
        [sys.executable, "-m", "worker.scheduler"],
    ]


def test_standalone_scheduler_refuses_a_zero_interval() -> None:
    env = {**os.environ, "BIND_SCHEDULER_INTERVAL": "0"}
    done = subprocess.run(
        [sys.executable, "-m", "worker.scheduler"], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2 and "interval must be above 0" in done.stderr
