"""``bind-audit run``'s torch threads: one on small graphs, the idle cores on large ones, ``--threads`` first."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import torch

from bind_core.cli import main
from bind_core.cli_threads import SMALL_GRAPH_NODES, busy_cores, default_deletion_threads, default_threads

QUICK = ["--synthetic", "--synthetic-nodes", "200", "--epochs", "5", "--skip", "influence,debiasing,validation",
         "--bootstrap", "0", "--quiet"]  # fmt: skip


def test_small_graphs_get_one_thread_however_many_cores_are_idle() -> None:
    assert default_threads(14_821, cpus=64, load=0.0, torch_default=32) == 1  # Income's size
    assert default_threads(SMALL_GRAPH_NODES - 1, cpus=64, load=0.0, torch_default=32) == 1


@pytest.mark.parametrize(
    ("cpus", "load", "torch_default", "expected"),
    [
        (16, 0.0, 8, 8),  # an idle machine: torch's default (its physical cores), not the hyper-threads
        (8, 3.4, 8, 5),  # three cores busy: the five idle ones
        (2, 5.3, 2, 1),  # a busy 2-core machine: one thread, never zero
        (4, 0.6, 4, 3),  # a core mostly busy counts as busy
    ],
)
def test_large_graphs_get_the_idle_cores(cpus: int, load: float, torch_default: int, expected: int) -> None:
    assert default_threads(SMALL_GRAPH_NODES, cpus=cpus, load=load, torch_default=torch_default) == expected


def test_the_machine_s_own_figures_give_at_least_one_thread() -> None:
    assert 1 <= default_threads(10 * SMALL_GRAPH_NODES) <= torch.get_num_threads()


@pytest.fixture
def restore_threads() -> Iterator[None]:
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


@pytest.mark.usefixtures("restore_threads")
def test_run_uses_the_rule_unless_threads_is_given(capsys: pytest.CaptureFixture[str]) -> None:
    torch.set_num_threads(2)
    assert main(QUICK) == 0
    assert torch.get_num_threads() == 1
    assert "torch threads: 1, deletion threads: " in capsys.readouterr().err
    assert main([*QUICK, "--threads", "2", "--deletion-threads", "3"]) == 0
    assert torch.get_num_threads() == 2
    assert "torch threads: 2, deletion threads: 3\n" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("torch_threads", "cpus", "load", "expected"),
    [(1, 2, 0.0, 2), (1, 2, 1.2, 1), (2, 2, 0.0, 1), (1, 16, 3.0, 13), (4, 16, 0.0, 4), (1, 2, 7.0, 1)],
)
def test_deletion_threads_share_the_idle_cores(torch_threads: int, cpus: int, load: float, expected: int) -> None:
    """The idle cores divided among threads of ``torch_threads`` each, never fewer than one."""
    assert default_deletion_threads(torch_threads, cpus=cpus, load=load) == expected


@pytest.mark.usefixtures("restore_threads")
def test_bad_deletion_threads_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*QUICK, "--deletion-threads", "0"]) == 2
    assert "--deletion-threads: 0 must be >= 1" in capsys.readouterr().err


@pytest.mark.heavy  # a two-layer audit with its polish and step estimate, ~5 s
@pytest.mark.usefixtures("restore_threads")
def test_run_settles_deletions_in_forked_processes_with_its_progress_bar(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The progress bar starts no thread (tqdm's monitor would), so a two-layer audit's deletions are forked."""
    import threading

    import bind_core.threads as threads

    forked: list[int] = []
    each = threads.each_in_forks
    monkeypatch.setattr(threads, "each_in_forks", lambda u, w, p, s: forked.append(len(u)) or each(u, w, p, s))
    seen_threads: list[int] = []
    safe = threads.fork_is_safe
    monkeypatch.setattr(threads, "fork_is_safe", lambda: seen_threads.append(threading.active_count()) or safe())
    quick = [a for a in QUICK if a != "--quiet"]
    skip = quick.index("--skip") + 1
    quick[skip] = "debiasing,validation"
    base = threading.active_count()  # 1 in a fresh process; earlier tests may have left idle threads here
    assert main([*quick, "--layers", "2", "--threads", "1", "--deletion-threads", "2"]) == 0
    assert seen_threads and set(seen_threads) == {base}  # the command started no thread of its own
    assert bool(forked) == (base == 1), capsys.readouterr().err


def _stat(*cpus: tuple[int, int]) -> str:
    """``/proc/stat``'s text with each CPU's (busy, idle) ticks (busy as user time, idle split into idle and iowait)."""
    lines = [f"cpu  {sum(b for b, _ in cpus)} 0 0 {sum(i for _, i in cpus)} 0 0 0 0 0 0"]
    lines += [f"cpu{n} {busy} 0 0 {idle - idle // 4} {idle // 4} 0 0 0 0 0" for n, (busy, idle) in enumerate(cpus)]
    return "\n".join([*lines, "intr 12345 0 0", "ctxt 999", "btime 1700000000", "processes 42"]) + "\n"


def test_busy_cores_are_read_from_the_cpus_counters_now() -> None:
    """Over the interval CPU 0 was busy throughout, CPU 1 a quarter of it, CPU 2 (not this process's) throughout."""
    texts = iter([_stat((100, 900), (50, 950), (10, 0)), _stat((200, 900), (75, 1025), (110, 0))])
    slept: list[float] = []
    assert busy_cores(0.25, cpus={0, 1}, read=lambda: next(texts), sleep=slept.append) == pytest.approx(1.25)
    assert slept == [0.25]


def test_a_cpu_without_ticks_in_between_counts_as_idle() -> None:
    texts = iter([_stat((100, 900), (5, 5)), _stat((100, 1000), (5, 5))])
    assert busy_cores(0.0, cpus={0, 1, 7}, read=lambda: next(texts), sleep=lambda _: None) == 0.0


def test_unreadable_counters_fall_back_to_the_load_average() -> None:
    def unreadable() -> str:
        raise OSError("no /proc here")

    expected = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    assert busy_cores(0.0, read=unreadable, sleep=lambda _: None) == pytest.approx(expected, abs=0.5)
    assert busy_cores(0.0, read=lambda: "intr 1 2\n", sleep=lambda _: None) == pytest.approx(expected, abs=0.5)


def test_the_machine_s_counters_give_a_share_of_its_cpus() -> None:
    assert 0.0 <= busy_cores(0.05) <= (os.cpu_count() or 1)
