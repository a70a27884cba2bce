"""The one way the HTML pages are rendered: Jinja2 templates with autoescaping on.

The audit report (:mod:`bind_core.reporting.report`), a schedule's history (:mod:`bind_core.reporting.history`)
and the service's console (``app/console``) are templates in ``bind_core/reporting/templates/`` (shipped as
package data) or beside them, all extending one page shell, ``page.html``: an HTML5 document with the shared
inline CSS and, for the self-contained pages, a Content Security Policy that forbids scripts and outside
references. ``macros.html`` holds the pieces the pages are built of (header, tables, figures, metric cards).

Every value a template prints is HTML-escaped by Jinja2, so data (graph, group and column names, node ids, error
messages) reaches the page only as text. The one exception is the figures: inline SVG drawn on the server by
:mod:`bind_core.reporting.plots`, marked safe explicitly with :func:`trusted_svg` where it is generated.
"""

from __future__ import annotations

import math
from functools import cache
from typing import Any

from jinja2 import BaseLoader, ChoiceLoader, Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

# The self-contained pages run no script and load nothing; a browser that opens one enforces both.
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"


def fmt(value: Any, digits: int = 3) -> str:
    """A number for a person: ``digits`` decimals (scientific when tiny), ``—`` when absent or not finite; any
    other value as its text. Plain text, not HTML: the template that prints it escapes it."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return "—"
        return f"{value:.2e}" if value != 0 and abs(value) < 10 ** (-digits) else f"{value:.{digits}f}"
    return str(value)


def finite(value: Any) -> bool:
    """Whether ``value`` is a finite number (not a bool)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def trusted_svg(svg: str) -> Markup:
    """A figure drawn by :mod:`bind_core.reporting.plots` (or with its helpers), marked safe to print unescaped.

    Only for SVG generated on the server from numbers; never for text that came with the data."""
    return Markup(svg)


def environment(*loaders: BaseLoader) -> Environment:
    """A Jinja2 environment over ``loaders`` (searched first) and the shared templates, autoescaping ``.html``
    templates, failing on undefined names, with the ``num`` filter (:func:`fmt`) and the ``CSP`` global."""
    env = Environment(
        loader=ChoiceLoader([*loaders, PackageLoader("bind_core.reporting", "templates")]),
        autoescape=select_autoescape(["html"], default_for_string=True, default=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["num"] = fmt
    env.globals["CSP"] = Markup(CSP)  # a constant of this module, printed as written
    return env


@cache
def _shared() -> Environment:
    return environment()


def render(template: str, **context: Any) -> str:
    """Render one of the shared templates (``report.html``, ``history.html``) with ``context``."""
    return _shared().get_template(template).render(**context)
