"""The console's errors as pages: an unknown or another tenant's audit, graph, schedule, what-if or model, a
malformed id, a page that does not exist, a refused form... are answered with the status, headers and wording the
API gives (``app/core/problems.py``), as a small page in the console's layout that links back to the list it came
from, never as ``application/problem+json``. The API keeps its problem documents."""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import Response

from app.console.pages import SIGNED_OUT, render_page
from app.core.errors import ProblemError

HOME = ("/console/audits", "audits", "the audits")
LISTS = {
    "audits": HOME,
    "compare": HOME,
    "graphs": ("/console/graphs", "graphs", "the graphs"),
    "schedules": ("/console/schedules", "schedules", "the schedules"),
    "webhooks": ("/console/webhooks", "webhooks", "the webhooks"),
    "sign-in": ("/console/sign-in", "", "signing in"),
}
"""The first part of a console path: the list a page under it links back to (its URL, its section in the navigation
bar, how the link says it)."""


def problem_page(request: Request, error: ProblemError) -> Response:
    """``error`` on a console path as a page: its title, detail and field errors (escaped by the templates), the
    problem's type, and a link back to the list; the navigation bar when someone is signed in."""
    path = request.url.path
    href, section, label = LISTS.get(path.removeprefix("/console").strip("/").split("/")[0], HOME)
    if error.slug == "role-not-allowed":  # not back to a list the role may not see
        href, section, label = HOME
    detail = error.detail
    if detail is None and error.status == 404:
        detail = f"There is no page at {path}."
    shell = getattr(request.state, "console_shell", SIGNED_OUT)
    response = render_page(
        "problem.html",
        shell,
        status_code=error.status,
        title=f"{error.title} · bind-audit",
        section=section,
        problem={"status": error.status, "title": error.title, "detail": detail, "errors": error.errors},
        slug=error.slug,
        back={"href": href, "label": label},
    )
    for name, value in error.headers.items():  # Retry-After, Allow...
        response.headers.setdefault(name, value)
    return response
