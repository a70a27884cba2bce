"""``bind-audit``: run an audit locally, serve the API with a worker, run a worker or the scheduler, migrate,
create keys, and talk to a server (``submit``, ``status``, ``results``, ``report``: see :mod:`app.client`).

The CLI starts the worker (``python -m celery -A worker.celery_app worker``) and the scheduler
(``python -m worker.scheduler``) as processes and never imports `worker`, so the arrows stay
``worker -> app -> bind_core``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import Any

from app.gates import METRICS, judge, junit_xml, parse_rule

log = logging.getLogger("bind-audit")

WORKER_ARGV = ["-m", "celery", "-A", "worker.celery_app", "worker", "--pool=solo", "--concurrency=1"]
SCHEDULER_ARGV = ["-m", "worker.scheduler"]


def worker_command(loglevel: str = "INFO", extra: Sequence[str] = ()) -> list[str]:
    """The command line of one Celery worker process (one audit at a time)."""
    return [sys.executable, *WORKER_ARGV, f"--loglevel={loglevel}", *extra]


def _migrate() -> None:
    from app.core.db.migrate import upgrade
    from app.core.db.session import ensure_sqlite_dir
    from app.core.settings import get_settings

    url = get_settings().database_url
    ensure_sqlite_dir(url)
    upgrade(url)


def cmd_run(argv: list[str]) -> int:
    """``bind-audit run``: bind_core's command line, plus the CI gates of ``submit`` (``--fail-on``, ``--junit``:
    :mod:`app.gates`) judged on the audit's ``--json`` document (a temporary one when none is asked for)."""
    from bind_core.cli import main as core_main
    from bind_core.cli import unwritable

    gates = argparse.ArgumentParser(prog="bind-audit run", add_help=False, allow_abbrev=False)  # --j is not --junit
    gates.add_argument("--fail-on", action="append", type=parse_rule, default=[])
    gates.add_argument("--junit")
    known, rest = gates.parse_known_args(argv)
    if "-h" in rest or "--help" in rest:
        try:
            code = int(core_main(rest) or 0)
        except SystemExit as exc:
            code = int(exc.code or 0)
        print(RUN_GATES_HELP)
        return code
    if not known.fail_on:
        if known.junit:
            gates.error("--junit needs --fail-on")
        return int(core_main(rest) or 0)
    if known.junit and (why := unwritable(known.junit)) is not None:  # before the audit, not after it
        gates.error(f"--junit: cannot write {known.junit}: {why}")
    with tempfile.TemporaryDirectory(prefix="bind-run-") as scratch:
        asked = _json_flag(rest)
        json_path = asked or str(Path(scratch) / "audit.json")
        code = int(core_main(rest if asked else [*rest, "--json", json_path]) or 0)
        if code != 0:
            return code
        results = json.loads(Path(json_path).read_text(encoding="utf-8"))
    verdicts = judge(results, known.fail_on)
    if known.junit:
        Path(known.junit).write_text(junit_xml("local", "succeeded", verdicts), encoding="utf-8")
    for verdict in verdicts:
        print(f"{'CROSSED' if verdict.crossed else 'ok':8s} {verdict.rule}: {verdict.reason}")
    return 1 if any(v.crossed for v in verdicts) else 0


RUN_GATES_HELP = (
    """
CI gates (as in 'bind-audit submit'):
  --fail-on RULE        exit 1 when a test metric or a bound of its interval satisfies RULE, e.g. 'delta_sp>0.1'
                        or 'delta_sp.upper>0.1' (repeatable; metrics: """
    + ", ".join(METRICS)
    + """), or when the audit warns with a
                        code: 'warning:training_fit'
  --junit FILE          with --fail-on: write the verdicts as JUnit XML"""
)


def _json_flag(argv: list[str]) -> str | None:
    """The value of ``--json`` in ``argv`` (``--json FILE`` or ``--json=FILE``), if given."""
    for i, arg in enumerate(argv):
        if arg == "--json" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--json="):
            return arg.split("=", 1)[1]
    return None


def cmd_migrate(_: argparse.Namespace) -> int:
    _migrate()
    print("database is at the latest migration")
    return 0


KEY_ROLES = ("viewer", "auditor", "admin")
"""``app.core.db.tables.ROLES``, spelled out so that building the parser loads no database code."""


def cmd_keys(args: argparse.Namespace) -> int:
    """``bind-audit keys create | list | revoke | rotate`` (``app/tenants/cli.py``)."""
    from app.tenants.cli import COMMANDS

    return COMMANDS[args.keys_command](args)


def cmd_worker(args: argparse.Namespace) -> int:
    extra = args.celery_args[1:] if args.celery_args[:1] == ["--"] else args.celery_args
    cmd = worker_command(args.loglevel, extra)
    os.execv(cmd[0], cmd)  # replace this process: signals go straight to Celery


def scheduler_command(interval: float | None = None) -> list[str]:
    """The command line of a standalone scheduler process."""
    return [sys.executable, *SCHEDULER_ARGV, *([f"--interval={interval}"] if interval is not None else [])]


def cmd_scheduler(args: argparse.Namespace) -> int:
    cmd = scheduler_command(args.interval)
    os.execv(cmd[0], cmd)  # replace this process: SIGTERM goes straight to the scheduler


class Stopped(Exception):
    """SIGTERM or SIGINT asked ``serve`` to stop."""


def _raise_stopped(signum: int, _: FrameType | None) -> None:
    raise Stopped(signal.Signals(signum).name)


def cmd_serve(args: argparse.Namespace) -> int:
    """Migrate, start one worker subprocess and serve the API in this process until SIGTERM or SIGINT.

    Either signal (what Docker, systemd and Ctrl-C send) stops the API gracefully, then the worker
    (:func:`stop_worker`), and exits 0. If the worker dies on its own, the API is stopped too and the exit
    status is 1. Production settings unsafe for the API (``app/core/production.py``): the reasons, exit status 2.
    """
    from app.core.db.session import ensure_sqlite_dir
    from app.core.production import unsafe_reasons
    from app.core.settings import get_settings

    if reasons := unsafe_reasons(get_settings()):
        print("bind-audit: BIND_ENVIRONMENT=production refuses to start with these settings:", file=sys.stderr)
        print("\n".join(f"  - {r}" for r in reasons), file=sys.stderr)
        return 2

    # Set before uvicorn starts: uvicorn swaps in its own handlers while it serves, then restores these and
    # raises the signal it caught again, which lands here after its graceful shutdown.
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, _raise_stopped)
    settings = get_settings()
    worker: subprocess.Popen[bytes] | None = None
    asked: str | None = None
    try:
        os.makedirs("var", exist_ok=True)
        if settings.broker_url.startswith("sqla+"):
            ensure_sqlite_dir(settings.broker_url)
        _migrate()
        # A process group of its own: a terminal's Ctrl-C reaches only this process, which stops the worker
        # once (a second SIGINT would make Celery abandon its audit), and the whole group can be stopped.
        worker = subprocess.Popen(worker_command(args.loglevel.upper()), start_new_session=True)
        server = api_server(args.host, args.port, args.loglevel)
        _watch(worker, server)
        print(
            f"bind-audit: API on http://{args.host}:{args.port} (docs at /docs), one worker (pid {worker.pid})",
            file=sys.stderr,
        )
        server.run()
    except Stopped as exc:
        asked = str(exc)
    finally:
        hurry = threading.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):  # a second signal: kill the worker now
            signal.signal(signum, lambda *_: hurry.set())
        if asked is not None:
            log.info("%s: stopping the worker (up to %.0f s for its current audit)", asked, args.grace)
        if worker is not None:
            stop_worker(worker, grace=args.grace, hurry=hurry)
    if asked is not None or worker is None:
        return 0
    return 0 if worker.returncode in (0, -signal.SIGTERM) else 1


def api_server(host: str, port: int, loglevel: str = "info") -> Any:
    """The ``uvicorn.Server`` of ``serve``'s API. uvicorn's own access line is off: the app writes one per
    request, in ``BIND_LOG_FORMAT`` (:func:`app.core.logs.configure_logging`)."""
    import uvicorn

    config = uvicorn.Config(
        "app.main:create_app", factory=True, host=host, port=port, log_level=loglevel.lower(), access_log=False
    )
    return uvicorn.Server(config)


def _watch(worker: subprocess.Popen[bytes], server: Any) -> None:
    """Stop the API (``server``: a ``uvicorn.Server``) when the worker exits on its own."""

    def watch() -> None:
        code = worker.wait()
        if not server.should_exit:
            log.error("the worker exited (code %s); stopping the API", code)
            server.should_exit = True

    threading.Thread(target=watch, name="watch-worker", daemon=True).start()


def stop_worker(process: subprocess.Popen[bytes], *, grace: float, hurry: threading.Event | None = None) -> None:
    """SIGTERM to the worker's process group (Celery's warm shutdown: finish the current audit), then SIGKILL
    to the group after ``grace`` seconds, or at once when ``hurry`` is set; whatever is left of the group
    after its leader exited is killed too.

    A killed audit is not lost: its heartbeat goes stale and the next worker's sweeper re-queues it.
    """
    _signal_group(process.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while process.poll() is None and time.monotonic() < deadline and not (hurry is not None and hurry.is_set()):
        time.sleep(0.1)
    if process.poll() is None:
        log.warning("the worker is still busy; killing it (its audit will be retried)")
    _signal_group(process.pid, signal.SIGKILL)
    process.wait()


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # no process left in the group
        os.killpg(pgid, signum)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bind-audit", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    sub.add_parser(
        "run", help="audit a graph locally, no service (bind_core's CLI; see 'bind-audit run -h')", add_help=False
    )

    serve = sub.add_parser("serve", help="migrate, then run the API and one worker (embedded by default)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--loglevel", default="info", choices=["debug", "info", "warning", "error"])
    serve.add_argument(
        "--grace", type=float, default=20.0, help="seconds the worker may take to finish its audit on SIGTERM or Ctrl-C"
    )
    serve.set_defaults(func=cmd_serve)

    worker = sub.add_parser("worker", help="run one Celery worker (one audit at a time)")
    worker.add_argument("--loglevel", default="INFO")
    worker.add_argument("celery_args", nargs=argparse.REMAINDER, help="more arguments for 'celery worker', after '--'")
    worker.set_defaults(func=cmd_worker)

    scheduler = sub.add_parser(
        "scheduler",
        help="run the scheduler as its own process (turns due schedule slots into audits; safe beside the "
        "workers' scheduler threads and other schedulers)",
    )
    scheduler.add_argument(
        "--interval", type=float, default=None, help="seconds between two ticks (default: BIND_SCHEDULER_INTERVAL)"
    )
    scheduler.set_defaults(func=cmd_scheduler)

    migrate = sub.add_parser("migrate", help="upgrade the database to the latest migration")
    migrate.set_defaults(func=cmd_migrate)

    keys = sub.add_parser("keys", help="manage API keys: create, list, revoke, rotate")
    keys_sub = keys.add_subparsers(dest="keys_command", required=True)
    create = keys_sub.add_parser("create", help="create an API key for a tenant and print it once")
    create.add_argument("--tenant", required=True)
    create.add_argument("--role", choices=KEY_ROLES, help="required unless the tenant has no key yet (then admin)")
    listing = keys_sub.add_parser("list", help="list a tenant's keys (id, prefix, role, created, revoked)")
    listing.add_argument("--tenant", required=True)
    revoke = keys_sub.add_parser("revoke", help="revoke a key at once (not the tenant's last admin key)")
    rotate = keys_sub.add_parser("rotate", help="replace a key by a new one of the same role and print it once")
    for needs_id in (revoke, rotate):
        needs_id.add_argument("key_id", type=uuid.UUID)
    keys.set_defaults(func=cmd_keys)

    from app.client import add_commands

    add_commands(sub)
    return parser


def configure_cli_logging() -> None:
    """Plain lines for the commands; ``serve``'s API swaps this handler for its own (BIND_LOG_FORMAT)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("alembic.runtime.plugins").setLevel(logging.WARNING)
    for chatty in ("httpx", "httpcore"):  # a line per request beside the client commands' own progress line
        logging.getLogger(chatty).setLevel(logging.WARNING)


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    configure_cli_logging()
    if args_list[:1] == ["run"]:
        return cmd_run(args_list[1:])
    args = build_parser().parse_args(args_list)
    return int(args.func(args))


def entry() -> int:
    """The ``bind-audit`` console script: :func:`main` in a process with the allocator settings of
    :mod:`app.core.allocator` (restarted once with them, unless ``GLIBC_TUNABLES`` is already set)."""
    from app.core.allocator import reexec_tuned

    reexec_tuned()
    return main()


if __name__ == "__main__":
    sys.exit(entry())
