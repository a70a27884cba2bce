"""The allocator settings the CLI and the benchmarks restart with (app/core/allocator.py)."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import textwrap

import pytest

from app.core.allocator import MALLOC_TUNABLES, reexec_tuned, tuned_environment

GLIBC = platform.libc_ver()[0] == "glibc"

# A child that restarts itself with the settings, then reports them and the page faults of allocating (and
# touching) a 64 MiB tensor five times over, once the heap has settled (glibc's first few rounds grow it).
CHILD = textwrap.dedent(
    """
    import os, resource, sys
    from app.core.allocator import reexec_tuned
    reexec_tuned()
    import torch
    for _ in range(10):
        torch.ones(8 * 2**20, dtype=torch.float64)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(5):
        torch.ones(8 * 2**20, dtype=torch.float64)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    print(repr(os.environ.get("GLIBC_TUNABLES")), faults, sys.argv[1:])
    """
)
PAGES = 64 * 2**20 // 4096  # the faults of mapping 64 MiB afresh once


def _child(env: dict[str, str]) -> tuple[str, int, str]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, "--flag", "value"], env=env, capture_output=True, text=True, check=True,
        timeout=120,
    )  # fmt: skip
    tunables, faults, argv = out.stdout.strip().split(" ", 2)
    return tunables, int(faults), argv


def test_the_settings_are_added_only_to_glibc_processes_without_their_own() -> None:
    assert tuned_environment({"A": "1"}, libc="glibc") == {"A": "1", "GLIBC_TUNABLES": MALLOC_TUNABLES}
    assert tuned_environment({"GLIBC_TUNABLES": "glibc.malloc.hugetlb=1"}, libc="glibc") is None
    assert tuned_environment({"GLIBC_TUNABLES": ""}, libc="glibc") is None  # an empty value opts out
    assert tuned_environment({}, libc="") is None  # musl, macOS: nothing to tune this way


@pytest.mark.heavy  # 5 s here
@pytest.mark.skipif(not GLIBC, reason="glibc's tunables only")
def test_a_process_restarts_once_with_them_and_stops_faulting_in_its_large_blocks() -> None:
    env = {k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES"}
    tunables, faults, argv = _child(env)
    assert tunables == repr(MALLOC_TUNABLES) and argv == "['--flag', 'value']"  # same command line
    assert faults < PAGES  # the heap kept the block: reused, not mapped and faulted in again five times
    # The control: opted out, every allocation of the block is a fresh mapping.
    tunables, faults, _ = _child({**env, "GLIBC_TUNABLES": ""})
    assert tunables == "''"
    assert faults >= 4 * PAGES


def test_a_process_that_cannot_be_run_again_goes_on_untuned(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def refuse(path: str, argv: list[str], env: dict[str, str]) -> None:
        calls.append(env["GLIBC_TUNABLES"])
        raise PermissionError(path)

    monkeypatch.delenv("GLIBC_TUNABLES", raising=False)
    monkeypatch.setattr("platform.libc_ver", lambda: ("glibc", "2.36"))
    monkeypatch.setattr("os.execve", refuse)
    reexec_tuned()  # returns: the caller goes on with the default allocator
    assert calls == [MALLOC_TUNABLES]
