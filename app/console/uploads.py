"""A console form's upload: its multipart body streamed to a scratch folder, the session's CSRF token checked, what a
browser sends for empty inputs left out; and a form of a graph's page built on it (refusals shown on the page)."""

from __future__ import annotations

import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from fastapi import Request
from fastapi.responses import RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from app.console.deps import check_csrf
from app.console.form_errors import form_refusal
from app.console.pages import refused
from app.core.deps import SessionDep
from app.core.errors import ProblemError
from app.core.settings import Settings
from app.graphs.uploads import ReceivedUpload, receive_upload, remove_folder


def filled(received: ReceivedUpload) -> ReceivedUpload:
    """The upload without what a browser sends for a form's empty inputs: files without a name, blank fields."""
    empty = [part for part, name in received.client_names.items() if not name]
    for part in empty:
        received.files.pop(part, None)
        received.client_names.pop(part, None)
    received.fields = {k: v for k, v in received.fields.items() if v.strip()}
    return received


async def received_form(
    request: Request,
    folder: Path,
    settings: Settings,
    user: Any,
    *,
    file_parts: tuple[str, ...],
    field_parts: tuple[str, ...],
    what: str,
) -> ReceivedUpload:
    """A console form's multipart body, streamed to ``folder``: its CSRF token checked and taken out, and what a
    browser sends for its empty inputs left out (:func:`filled`).

    Raises:
        ProblemError: the API's upload refusals (size, type), or a token that is not the session's (403).
    """
    received = await receive_upload(
        request, folder, settings.max_upload_bytes, file_parts=file_parts, field_parts=(*field_parts, "csrf"), what=what
    )
    check_csrf(user, received.fields.pop("csrf", None))
    return filled(received)


async def graph_form(
    request: Request,
    response: Response,
    session: SessionDep,
    user: Any,
    settings: Settings,
    *,
    file_parts: tuple[str, ...],
    field_parts: tuple[str, ...],
    what: str,
    refusal: str,
    act: Callable[[ReceivedUpload], Awaitable[str]],
    shown: Callable[[dict[str, str], ProblemError], Response],
) -> Response:
    """A form of a graph's page that uploads files: its body streamed to a scratch folder (:func:`received_form`),
    ``act`` run on it, then the page ``act`` names (a redirect); a refusal (``refusal`` its headline where the
    problem is not the form's) shown on the graph's page by ``shown``, with the fields as sent."""
    await run_in_threadpool(session.rollback)  # hold no connection while the body streams
    folder = Path(await run_in_threadpool(tempfile.mkdtemp, prefix=f"bind-console-{what}-"))
    sent: dict[str, str] = {}
    try:
        received = await received_form(
            request, folder, settings, user, file_parts=file_parts, field_parts=field_parts, what=what
        )
        sent = dict(received.fields)
        target = await act(received)
    except ProblemError as exc:
        problem = form_refusal(exc, refusal)  # 403 and 404 answered as problem pages
        refused(response, problem.status)
        return await run_in_threadpool(shown, sent, problem)
    finally:
        await run_in_threadpool(remove_folder, folder)
    return RedirectResponse(target, status_code=303)
