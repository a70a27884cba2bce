"""The figures of the report's section "Which connections carry the bias", drawn like
:mod:`bind_core.reporting.plots` (pyplot-free matplotlib, deterministic inline SVG) from the stored ``edges`` section
(:class:`bind_core.pipeline.results.EdgeAttribution`).

Each figure carries its alt text as the SVG's ``<title>`` (with ``role="img"``), besides the caption the report
writes under it. Signs as everywhere in the audit: ΔΓ < 0 is a harmful edge (deleting it reduces bias).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

import matplotlib

from bind_core.reporting.plots import _RC, BEFORE, HARMFUL, HELPFUL, _figure, _svg

__all__ = [
    "CROSS",
    "WITHIN",
    "cross_group_shares",
    "edge_debiasing_bars",
    "edge_label",
    "group_name",
    "top_edges_bars",
]

WITHIN, CROSS = "#5d6d7e", "#d35400"
SHARES = (
    ("edge_share", "share of all edges"),
    ("affecting_share", "share of edges that change anything"),
    ("harm_share", "share of the harm (−ΔΓ of harmful edges)"),
    ("help_share", "share of the help (ΔΓ of helpful edges)"),
)


def titled(svg: str, alt: str) -> str:
    """``svg`` with ``role="img"`` and ``alt`` as its first child ``<title>`` (escaped): a figure's text alternative."""
    head = svg.index(">", svg.index("<svg")) + 1
    opening = svg[:head].replace("<svg", '<svg role="img"', 1)
    return f"{opening}<title>{escape(alt)}</title>{svg[head:]}"


def group_name(names: Sequence[str], code: Any) -> str:
    """Group ``code``'s name (``region=east``), or ``group <code>`` where ``names`` has none for it."""
    return names[code] if isinstance(code, int) and 0 <= code < len(names) else f"group {code}"


def edge_label(edge: Mapping[str, Any], names: Sequence[str] = ()) -> str:
    """``u–v (a–b)`` of an :class:`~bind_core.pipeline.results.EdgeRow`: its original ids and its endpoints' groups by
    name (:func:`group_name`)."""
    return f"{edge['u_id']}–{edge['v_id']} ({group_name(names, edge['u_group'])}–{group_name(names, edge['v_group'])})"


def top_edges_bars(
    harmful: Sequence[Mapping[str, Any]],
    helpful: Sequence[Mapping[str, Any]],
    *,
    ident: str,
    names: Sequence[str] = (),
) -> str:
    """Horizontal bars of the top harmful (ΔΓ < 0, most negative first) and helpful edges' ΔΓ, one per edge labelled
    :func:`edge_label`, coloured within-group or cross-group.

    Args:
        harmful, helpful: ``edges.top_harmful`` and ``edges.top_helpful`` (rows with ``u_id``, ``v_id``,
            ``u_group``, ``v_group``, ``within_group``, ``delta``); at least one row in all.
        ident: the SVG's id prefix.
        names: the groups' names by code (``graph.group_labels``).
    """
    rows = [*harmful, *helpful]
    fig, (ax,) = _figure(8.0, 1.2 + 0.24 * len(rows))
    with matplotlib.rc_context(_RC):
        ys = list(range(len(rows)))
        colours = [WITHIN if r["within_group"] else CROSS for r in rows]
        ax.barh(ys, [float(r["delta"]) for r in rows], color=colours, height=0.7)
        ax.set_yticks(ys, [edge_label(r, names) for r in rows])
        ax.invert_yaxis()
        ax.axvline(0.0, color="black", linewidth=0.8)
        if harmful and helpful:
            ax.axhline(len(harmful) - 0.5, color=BEFORE, linewidth=0.6, linestyle=":")
        for colour, name in ((WITHIN, "within a group"), (CROSS, "across groups")):
            if colour in colours:
                ax.barh([0], [0.0], color=colour, label=name)  # a legend entry only: zero width
        ax.set_xlabel("estimated ΔΓ of deleting the edge (negative: harmful)")
        ax.set_title(f"{len(harmful)} most harmful and {len(helpful)} most helpful edges")
        ax.legend(frameon=False, loc="lower right")
    each = (
        f"{edge_label(r, names)}, {'within' if r['within_group'] else 'across'}, {float(r['delta']):.4g}" for r in rows
    )
    alt = f"Bar chart of the estimated ΔΓ of the {len(harmful)} most harmful and {len(helpful)} most helpful edges: "
    alt += "; ".join(each)
    return titled(_svg(fig, ident), alt)


def cross_group_shares(cross: Mapping[str, Any], *, ident: str) -> str:
    """Bars of the cross-group edges' share of all edges, of the edges that change anything, of the harm and of the
    help (``edges.cross_group``); a share that is null is left out (the caller says why)."""
    shown = [(name, float(cross[key])) for key, name in SHARES if cross.get(key) is not None]
    fig, (ax,) = _figure(7.0, 0.9 + 0.32 * len(shown))
    with matplotlib.rc_context(_RC):
        ys = list(range(len(shown)))
        colours = [HARMFUL if "harm" in name else HELPFUL if "help" in name else BEFORE for name, _ in shown]
        ax.barh(ys, [100 * v for _, v in shown], color=colours, height=0.6)
        for y, (_, value) in zip(ys, shown, strict=True):
            ax.text(100 * value + 1, y, f"{100 * value:.1f}%", va="center")
        ax.set_yticks(ys, [name for name, _ in shown])
        ax.invert_yaxis()
        ax.set_xlim(0, 105)
        ax.set_xlabel("cross-group edges' share (%)")
    alt = "Bar chart of the cross-group edges' shares: " + "; ".join(f"{n} {100 * v:.1f}%" for n, v in shown)
    return titled(_svg(fig, ident), alt)


def edge_debiasing_bars(budgets: Sequence[Mapping[str, Any]], *, ident: str) -> str:
    """Per edge budget, the selected edges' mean ΔΓ after deletion and retraining (error bar: its standard deviation
    over the seeds) next to the random edge sets' mean (error bar: the standard deviation of the sets' means).

    Args:
        budgets: ``edges.debiasing.budgets`` (:class:`~bind_core.pipeline.results.EdgeDebiasingRow`); a budget
            that deleted nothing (``selected`` null) gets no bars and the words "nothing deleted".
    """
    fig, (ax,) = _figure(8.0, 3.2)
    parts: list[str] = []
    labelled: set[str] = set()
    with matplotlib.rc_context(_RC):
        width = 0.38
        for i, row in enumerate(budgets):
            selected, random = row.get("selected"), row.get("random")
            if not selected or not random:
                ax.text(i, 0.0, "nothing deleted", ha="center", va="bottom", color=BEFORE)
                parts.append(f"{_budget(row)}: nothing deleted")
                continue
            pair = ((-1, selected, HARMFUL, "selected edges"), (1, random, BEFORE, "random edges"))
            for shift, part, colour, name in pair:
                ax.bar(
                    i + shift * width / 2,
                    float(part["mean"]),
                    width=width,
                    yerr=float(part["std"]),
                    color=colour,
                    capsize=3,
                    label=None if name in labelled else name,
                )
                labelled.add(name)
            parts.append(
                f"{_budget(row)}: selected {float(selected['mean']):.4g} ± {float(selected['std']):.2g}, "
                f"random {float(random['mean']):.4g} ± {float(random['std']):.2g}"
            )
        ax.axhline(0.0, color="black", linewidth=0.8)
        ax.set_xticks(range(len(budgets)), [f"{_budget(r)} ({r['deleted']} edges)" for r in budgets])
        ax.set_xlim(-0.6, len(budgets) - 0.4)
        ax.set_ylabel("ΔΓ after retraining (mean)")
        if labelled:
            ax.legend(frameon=False)
    alt = "Bar chart of ΔΓ per edge budget, the selected edges against random edges: " + "; ".join(parts)
    return titled(_svg(fig, ident), alt)


def _budget(row: Mapping[str, Any]) -> str:
    return f"{100 * float(row['budget']):.2g}%"
