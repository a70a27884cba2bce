"""The page shell the HTML pages share (the audit report, :mod:`bind_core.reporting.report`, and a schedule's
history, :mod:`bind_core.reporting.history`): one self-contained HTML5 document with inline CSS and a Content
Security Policy that forbids scripts and outside references, its header (title and ``label: value`` facts), and the
pieces both pages are built of: number formatting, tables, figures and metric cards. Every string from the data is
HTML-escaped by the caller or here, as each function says.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from html import escape
from typing import Any

# The page runs no script and loads nothing; a browser that opens it enforces both.
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"

CSS = """
body{font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1c2833;margin:0;background:#f4f6f7}
main{max-width:1040px;margin:0 auto;padding:24px 32px;background:#fff}
h1{margin:0 0 4px;font-size:26px}h2{margin:32px 0 8px;border-bottom:2px solid #d5dbdb;padding-bottom:4px}
.meta{color:#566573;font-size:13px}.note{background:#eaf2f8;border-left:4px solid #2471a3;padding:8px 12px}
.warn{background:#fdedec;border-left:4px solid #c0392b;padding:8px 12px;margin:4px 0}
table{border-collapse:collapse;margin:8px 0;font-variant-numeric:tabular-nums}
th,td{padding:4px 10px;border-bottom:1px solid #e5e8e8;text-align:right}th{background:#f2f3f4}
td.l,th.l{text-align:left}.harm{color:#c0392b}.help{color:#2471a3}
.cards{display:flex;flex-wrap:wrap;gap:10px}.card{border:1px solid #d5dbdb;border-radius:6px;padding:8px 12px;
width:210px}.card .v{font-size:22px;font-weight:600}.card .ci,.card .d{font-size:12px;color:#566573}
figure{margin:8px 0}svg{max-width:100%;height:auto}figcaption{font-size:13px;color:#566573}
"""


def page(title: str, parts: Iterable[str], *, extra_css: str = "") -> str:
    """The whole HTML5 document: ``title`` (escaped here) in ``<title>``, the shared :data:`CSS` plus ``extra_css``,
    and the non-empty ``parts`` (already HTML) one per line in ``<main>``."""
    body = "\n".join(p for p in parts if p)
    return (
        f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n<title>{escape(title)}</title>\n'
        f"<style>{CSS}{extra_css}</style>\n</head>\n<body>\n<main>\n{body}\n</main>\n</body>\n</html>\n"
    )


def header(title: str, facts: Mapping[Any, Any]) -> str:
    """The page's heading and, under it, one ``label: value`` line per fact (both escaped here)."""
    lines = "<br>".join(f"<b>{escape(str(k))}</b>: {escape(str(v))}" for k, v in facts.items())
    return f"<h1>{escape(title)}</h1>\n<p class=meta>{lines}</p>"


def fmt(value: Any, digits: int = 3) -> str:
    """A number for a person: ``digits`` decimals (scientific when tiny), ``—`` when absent or not finite."""
    if isinstance(value, bool) or value is None:
        return "—" if value is None else escape(str(value))
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return "—"
        return f"{value:.2e}" if value != 0 and abs(value) < 10 ** (-digits) else f"{value:.{digits}f}"
    return escape(str(value))


def finite(value: Any) -> bool:
    """Whether ``value`` is a finite number (not a bool)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def table(head: Sequence[str], rows: Sequence[Sequence[str]], left: int = 0) -> str:
    """An HTML table of already-escaped cells; the first ``left`` columns are left-aligned."""

    def cells(tag: str, row: Sequence[str]) -> str:
        return "".join(f"<{tag}{' class=l' if i < left else ''}>{c}</{tag}>" for i, c in enumerate(row))

    body = "".join(f"<tr>{cells('td', r)}</tr>" for r in rows)
    return f"<table><thead><tr>{cells('th', head)}</tr></thead><tbody>{body}</tbody></table>"


def figure(svg: str, caption: str) -> str:
    """An inline SVG figure with its caption (both already HTML)."""
    return f"<figure>{svg}<figcaption>{caption}</figcaption></figure>"


def card(name: str, value: str, band: str, what: str) -> str:
    """A metric card: its name, value and the line under it (already HTML), and what it measures (escaped here)."""
    return (
        f"<div class=card><div>{name}</div><div class=v>{value}</div>"
        f"<div class=ci>{band}</div><div class=d>{escape(what)}</div></div>"
    )
