"""``bind-audit submit|status|results|report``: a command-line client of the API, for cron jobs and CI.

The server and key come from ``--url``/``BIND_URL`` and ``--key``/``BIND_API_KEY``. ``submit --fail-on
'delta_sp>0.1'`` (it implies ``--wait``) waits for the audit and exits 1 when a test-set metric, or a bound of its
bootstrap interval (``delta_sp.upper>0.1``), crosses a threshold (:mod:`app.gates`); ``--junit FILE`` writes the
verdicts as JUnit XML, one test case per threshold. A misspelled metric is refused before anything is queued.

Exit codes: 0 fine; 1 a ``--fail-on`` threshold was crossed; 2 the audit failed or was cancelled, or the
command was wrong; 3 the server answered with an error or could not be reached; 4 ``--wait`` timed out.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from app.audits.pace import left_words
from app.gates import METRICS, Rule, WarningRule, judge, junit_xml, parse_rule

OK, THRESHOLD, AUDIT_FAILED, HTTP_ERROR, TIMED_OUT = 0, 1, 2, 3, 4


class ClientError(Exception):
    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def crossed(results: dict[str, Any] | None, rules: list[Rule | WarningRule]) -> list[str]:
    """The rules that hold for the results, in words (a missing value counts as crossed: fail closed)."""
    return [v.reason for v in judge(results, rules) if v.crossed]


def edges_summary(results: dict[str, Any] | None) -> dict[str, Any] | None:
    """The audit's edges in brief (``None`` when it did not ask for them): how many were attributed, the most
    harmful edge (``"u–v (gender=F–gender=M)"``, its endpoints' groups by name, and its ΔΓ), the cross-group edges'
    harm ratio (share of the harm / share of the edges that change anything), and each edge budget's verdict against
    random edges, or why not."""
    edges = (results or {}).get("edges")
    if not edges:
        return None
    if not edges.get("computed"):
        return {"computed": False, "reason": edges.get("reason")}
    top = (edges.get("top_harmful") or [None])[0]
    names = ((results or {}).get("graph") or {}).get("group_labels") or []

    def group(code: Any) -> str:
        return str(names[code]) if isinstance(code, int) and 0 <= code < len(names) else f"group {code}"

    summary: dict[str, Any] = {
        "edges": edges.get("edges"),
        "top_harmful": None
        if top is None
        else {
            "edge": f"{top['u_id']}–{top['v_id']} ({group(top['u_group'])}–{group(top['v_group'])})",
            "delta": top["delta"],
        },
        "cross_group_harm_ratio": (edges.get("cross_group") or {}).get("harm_ratio"),
    }
    if edges.get("debiasing"):
        summary["debiasing"] = [
            {"budget": r["budget"], "deleted": r["deleted"], "verdict": r["verdict"]}
            for r in edges["debiasing"]["budgets"]
        ]
    else:
        summary["debiasing_reason"] = edges.get("debiasing_reason")
    return summary


def _call(http: httpx.Client, method: str, path: str, **kwargs: Any) -> httpx.Response:
    try:
        response = http.request(method, path, **kwargs)
    except httpx.HTTPError as exc:
        raise ClientError(f"cannot reach the server: {exc}", HTTP_ERROR) from exc
    if response.status_code >= 400:
        try:
            doc = response.json()
            detail = doc.get("detail") or doc.get("title")
        except ValueError:
            detail = response.text[:500]
        raise ClientError(f"HTTP {response.status_code}: {detail}", HTTP_ERROR)
    return response


def _settings(text: str | None) -> dict[str, Any]:
    if not text:
        return {}
    raw = Path(text[1:]).read_text() if text.startswith("@") else text
    value = json.loads(raw)
    if not isinstance(value, dict):
        raise ClientError("--settings must be a JSON object", AUDIT_FAILED)
    return value


def wait(
    http: httpx.Client,
    audit_id: str,
    *,
    timeout: float,
    poll: float,
    show: Callable[[str], None] | None = None,
    warn: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Poll the audit until it ends; ``show(line)`` gets its state, stage and progress whenever they change, and
    ``warn(text)`` each of its warnings once, as the worker stores them while it runs (those known once the model and
    its metrics are in: a supplied model fed inputs it never saw is told before the estimate's minutes)."""
    deadline = time.monotonic() + timeout
    last = ""
    warned: set[str] = set()
    while True:
        audit: dict[str, Any] = _call(http, "GET", f"/v1/audits/{audit_id}").json()
        line = progress_line(audit)
        if show is not None and line != last:
            show(line)
            last = line
        if warn is not None and audit["state"] == "running":
            for text in [str(w) for w in audit.get("warnings") or [] if str(w) not in warned]:
                warned.add(text)
                warn(text)
        if audit["state"] in ("succeeded", "failed", "cancelled"):
            return audit
        if time.monotonic() > deadline:
            raise ClientError(f"audit {audit_id} still {audit['state']} after {timeout:.0f}s", TIMED_OUT)
        time.sleep(poll)


def progress_line(audit: dict[str, Any]) -> str:
    """``audit 1f2e…: running, influence 42%, about 3 min left`` (the stage, progress and time left while it
    runs)."""
    state = audit.get("state")
    text = f"audit {audit.get('id')}: {state}"
    if state == "running" and audit.get("stage"):
        text += f", {audit['stage']}"
        if isinstance(audit.get("progress"), int | float):
            text += f" {float(audit['progress']):.0%}"
        if (left := left_words(audit.get("time_left"))) is not None:
            text += f", {left}"
    return text


def _terminal_line() -> Callable[[str], None]:
    """Progress on stderr: one line rewritten in place on a terminal, a line per change otherwise (logs)."""
    if sys.stderr.isatty():
        return lambda line: print(f"\r{line:<78}", end="", file=sys.stderr, flush=True)
    return lambda line: print(line, file=sys.stderr, flush=True)


def _warning_line() -> Callable[[str], None]:
    """A warning on stderr, on a line of its own (below a progress line rewritten in place on a terminal)."""
    lead = "\n" if sys.stderr.isatty() else ""
    return lambda text: print(f"{lead}warning: {text}", file=sys.stderr, flush=True)


def _finish(
    audit: dict[str, Any], rules: list[Rule | WarningRule], out: Callable[[str], None], junit: str | None = None
) -> int:
    verdicts = judge(audit.get("results"), rules)
    if junit:
        error = audit.get("error")
        detail = (error or {}).get("detail") if isinstance(error, dict) else None
        Path(junit).write_text(junit_xml(audit["id"], audit["state"], verdicts, detail), encoding="utf-8")
    if audit["state"] != "succeeded":
        out(json.dumps({k: audit.get(k) for k in ("id", "state", "error", "warnings", "warning_codes")}))
        return AUDIT_FAILED
    test = ((audit.get("results") or {}).get("metrics") or {}).get("test") or {}
    hits = [v.reason for v in verdicts if v.crossed]
    said = (audit.get("results") or {}).get("summary") or {}
    summary: dict[str, Any] = {
        "id": audit["id"],
        "state": "succeeded",
        "verdict": said.get("verdict"),
        "metrics": test,
        "thresholds_crossed": hits,
        "thresholds": [v.to_dict() for v in verdicts],
        "warnings": audit.get("warnings"),
        "warning_codes": audit.get("warning_codes"),
    }
    edges = edges_summary(audit.get("results"))
    out(json.dumps(summary if edges is None else {**summary, "edges": edges}))
    return THRESHOLD if hits else OK


def run(args: argparse.Namespace, http: httpx.Client, out: Callable[[str], None] = print) -> int:
    """Run one client command with ``http`` (its base URL and auth header set); return the exit code."""
    try:
        return _run(args, http, out)
    except ClientError as exc:
        print(f"bind-audit: {exc}", file=sys.stderr)
        return exc.code


def _run(args: argparse.Namespace, http: httpx.Client, out: Callable[[str], None]) -> int:
    if args.command == "submit":
        if not (args.dataset or args.graph_id or args.graph_name or args.model_id):
            raise ClientError("submit: give --dataset, --graph-id, --graph-name or --model-id", AUDIT_FAILED)
        body = _settings(args.settings)
        for flag in ("dataset", "graph_id", "graph_name", "model_id"):
            if getattr(args, flag):
                body[flag] = getattr(args, flag)
        audit = _call(http, "POST", "/v1/audits", json=body).json()
        if not (args.wait or args.fail_on):  # a threshold needs the finished audit: --fail-on implies --wait
            out(json.dumps({"id": audit["id"], "state": audit["state"]}))
            return OK
        show = None if args.quiet else _terminal_line()
        done = wait(http, audit["id"], timeout=args.timeout, poll=args.poll, show=show, warn=_warning_line())
        if show is not None and sys.stderr.isatty():
            print(file=sys.stderr)  # end the line rewritten in place
        return _finish(done, args.fail_on, out, args.junit)
    if args.command == "status":
        audit = _call(http, "GET", f"/v1/audits/{args.audit_id}").json()
        keys = (
            "id", "state", "stage", "progress", "time_left", "attempts", "created_at", "finished_at", "error",
            "warnings", "warning_codes",
        )  # fmt: skip
        out(json.dumps({k: audit.get(k) for k in keys}))
        return OK
    if args.command == "results":
        audit = _call(http, "GET", f"/v1/audits/{args.audit_id}").json()
        if args.fail_on:
            return _finish(audit, args.fail_on, out, args.junit)
        out(json.dumps(audit.get("results"), indent=2))
        return OK if audit["state"] == "succeeded" else AUDIT_FAILED
    html = _call(http, "GET", f"/v1/audits/{args.audit_id}/report").text
    Path(args.output).write_text(html, encoding="utf-8")
    out(args.output)
    return OK


def add_commands(sub: Any) -> None:
    """Add ``submit``, ``status``, ``results`` and ``report`` to the ``bind-audit`` parser."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--url",
        default=os.environ.get("BIND_URL", "http://127.0.0.1:8000"),
        help="the server (default: $BIND_URL or http://127.0.0.1:8000)",
    )
    common.add_argument("--key", default=os.environ.get("BIND_API_KEY"), help="API key (default: $BIND_API_KEY)")
    common.add_argument(
        "--fail-on",
        action="append",
        type=parse_rule,
        default=[],
        metavar="RULE",
        help="exit 1 when a test metric or a bound of its interval satisfies RULE, e.g. "
        "'delta_sp>0.1' or 'delta_sp.upper>0.1' (repeatable; metrics: " + ", ".join(METRICS) + "), or when the "
        "audit warns with a code: 'warning:training_fit'; implies --wait",
    )
    common.add_argument("--junit", metavar="FILE", help="with --fail-on: write the verdicts as JUnit XML")
    submit = sub.add_parser("submit", parents=[common], help="queue an audit on a server (see --wait, --fail-on)")
    source = submit.add_mutually_exclusive_group()
    source.add_argument("--dataset")
    source.add_argument("--graph-id")
    source.add_argument("--graph-name", help="a graph by name: its latest version")
    submit.add_argument(
        "--model-id",
        help="a registered model, audited as given on the graph it was registered for, or with --graph-name or "
        "--graph-id on another version of it (its inputs carried over)",
    )
    submit.add_argument("--settings", help="audit settings as JSON, or @file.json (e.g. '{\"budgets\": [1]}')")
    submit.add_argument("--wait", action="store_true", help="wait for the audit to finish; print its metrics")
    submit.add_argument("--timeout", type=float, default=3600.0, help="seconds --wait waits (exit 4 past it)")
    submit.add_argument("--poll", type=float, default=2.0, help="seconds between two polls")
    submit.add_argument("--quiet", action="store_true", help="no progress line on stderr while waiting")
    for name, text in (("status", "an audit's state"), ("results", "an audit's results (JSON)")):
        command = sub.add_parser(name, parents=[common], help=text)
        command.add_argument("audit_id")
    report = sub.add_parser("report", parents=[common], help="save an audit's HTML report")
    report.add_argument("audit_id")
    report.add_argument("-o", "--output", default="report.html")
    for command in (submit, *[sub.choices[n] for n in ("status", "results", "report")]):
        command.set_defaults(func=main)


def unwritable(path: str | os.PathLike[str]) -> str | None:
    """Why no file can be written at ``path`` (a missing folder, a folder where the file should be, no permission),
    or ``None``: ``bind_core.cli.unwritable``'s rule, here so that the client loads no bind_core (and no torch)."""
    target = Path(path)
    folder = target.parent
    if target.is_dir():
        return f"{target} is a folder"
    if not folder.exists():
        return f"the folder {folder} does not exist"
    if not folder.is_dir():
        return f"{folder} is not a folder"
    if target.exists() and not os.access(target, os.W_OK):
        return f"{target} is not writable"
    if not target.exists() and not os.access(folder, os.W_OK | os.X_OK):
        return f"the folder {folder} is not writable"
    return None


def main(args: argparse.Namespace) -> int:
    if not args.key:
        print("bind-audit: an API key is needed (--key or BIND_API_KEY)", file=sys.stderr)
        return AUDIT_FAILED
    for option, path in (("--junit", args.junit), ("--output", getattr(args, "output", None))):
        why = None if path is None else unwritable(path)
        if why is not None:  # before the audit is waited for or the report fetched
            print(f"bind-audit: {option}: cannot write {path}: {why}", file=sys.stderr)
            return AUDIT_FAILED
    headers = {"Authorization": f"Bearer {args.key}"}
    with httpx.Client(base_url=args.url, headers=headers, timeout=60.0) as http:
        return run(args, http)
