"""The report's figures as inline SVG strings, drawn with matplotlib on figures that never touch pyplot.

Each function takes plain numbers (from ``AuditResult.to_dict()`` or influence rows) and returns an ``<svg>``
element ready to embed in HTML: no XML prolog, no DOCTYPE, no metadata, no external references, text kept as
text, and every id prefixed with the figure's ``ident`` so that several figures can share one page.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import matplotlib
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.dates import AutoDateLocator, ConciseDateFormatter
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

HARMFUL, HELPFUL, BEFORE = "#c0392b", "#2471a3", "#7f8c8d"
GROUP_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22")
_RC: dict[Any, Any] = {
    "svg.fonttype": "none",
    "svg.hashsalt": "bind-audit",
    "font.size": 9.0,
    "axes.spines.top": False,
    "axes.spines.right": False,
}


def _svg(fig: Figure, ident: str) -> str:
    """Render ``fig`` as an embeddable ``<svg>`` element (see the module docstring)."""
    buffer = io.StringIO()
    with matplotlib.rc_context(_RC):
        fig.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    text = text[text.index("<svg") :]
    text = re.sub(r"<metadata>.*?</metadata>", "", text, flags=re.S)
    # Inline SVG in HTML5 needs no namespace declarations; without them the page names no URL at all.
    text = re.sub(r'\s+xmlns(:xlink)?="[^"]*"', "", text)
    return re.sub(r'(\bid="|url\(#|href="#)', lambda m: f"{m.group(1)}{ident}-", text)


TIME_MARGIN = 0.05
"""Share of the runs' time span left empty on each side of a time axis."""
LONE_RUN_MARGIN = timedelta(minutes=30)
"""Either side of a time axis holding a single time (no span to take a share of)."""


def fit_time_axis(ax: Axes, times: Sequence[datetime]) -> tuple[datetime, datetime]:
    """Fit ``ax``'s x-axis (UTC) to ``times``: their range plus :data:`TIME_MARGIN` of it on each side.

    Runs a minute apart get an axis of minutes, runs days apart one of days; a single time gets
    :data:`LONE_RUN_MARGIN` either side. The ticks come from matplotlib's ``AutoDateLocator`` with its
    ``ConciseDateFormatter``, which labels each tick with only what changes at that scale (``10:02``,
    ``Nov 03``) and puts the rest (the day, the year) once beside the axis. Returns the limits.
    """
    first, last = min(times), max(times)
    margin = (last - first) * TIME_MARGIN if last > first else LONE_RUN_MARGIN
    ax.set_xlim(first - margin, last + margin)  # type: ignore[arg-type]  # a date axis takes datetimes (units)
    locator = AutoDateLocator(tz=UTC, minticks=3)  # type: ignore[no-untyped-call]
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(ConciseDateFormatter(locator, tz=UTC))  # type: ignore[no-untyped-call]
    return first - margin, last + margin


def _figure(width: float, height: float, cols: int = 1) -> tuple[Figure, list[Any]]:
    with matplotlib.rc_context(_RC):
        fig = Figure(figsize=(width, height), layout="constrained")
        FigureCanvasAgg(fig)  # pyplot-free: no global figure manager, no GUI backend
        axes = [fig.add_subplot(1, cols, i + 1) for i in range(cols)]
    return fig, axes


def probability_histograms(
    histograms: Mapping[str, Any],
    *,
    ident: str,
    names: Mapping[str, str] | None = None,
    positive: str = "y=1",
) -> str:
    """Each group's share of test nodes per bin of P(positive): all test nodes (Γ_SP) and the positives (Γ_EO).

    Args:
        histograms: ``{"bin_edges": [B+1], "all": {group: [B counts]}, "positives": {group: [B counts]}}``.
        ident: the SVG's id prefix.
        names: each group's name by its code (as the histograms' keys), ``region=east``; a code without one is
            shown as ``group <code>``.
        positive: the positive class as the user's label and value, ``approved=1``.
    """
    edges = [float(e) for e in histograms["bin_edges"]]
    known = names or {}
    fig, axes = _figure(9.0, 3.0, cols=2)
    with matplotlib.rc_context(_RC):
        panels = (("all", "all test nodes (Γ_SP)"), ("positives", f"truly {positive} (Γ_EO)"))
        for ax, (key, title) in zip(axes, panels, strict=True):
            for i, (group, counts) in enumerate(sorted(histograms.get(key, {}).items(), key=_group_key)):
                total = sum(counts)
                shares = [c / total if total else 0.0 for c in counts]
                colour = GROUP_COLOURS[i % len(GROUP_COLOURS)]
                label = f"{known.get(str(group), f'group {group}')} (n={total})"
                ax.stairs(shares, edges, color=colour, linewidth=1.6, label=label)
                ax.stairs(shares, edges, color=colour, alpha=0.15, fill=True)
            ax.set(title=title, xlabel=f"predicted P({positive})", ylabel="share of the group", xlim=(0, 1))
            ax.legend(frameon=False)
    return _svg(fig, ident)


def _signed_bins(values: Sequence[float], bins: int) -> list[float]:
    """Equal-width bin edges covering ``values`` with 0 as an edge, so that no bin mixes signs."""
    low, high = min(min(values), 0.0), max(max(values), 0.0)
    width = (high - low) / bins or 1.0
    below, above = math.ceil(-low / width), math.ceil(high / width)
    return [k * width for k in range(-below, above + 1)]


def influence_histogram(deltas: Sequence[float], bins: int = 40, *, ident: str) -> str:
    """Histogram of the estimated ΔΓ over the training nodes, harmful (ΔΓ < 0) and helpful apart, log counts."""
    fig, (ax,) = _figure(9.0, 3.0)
    with matplotlib.rc_context(_RC):
        edges = _signed_bins(deltas, bins)
        for name, colour, part in (
            ("harmful (ΔΓ < 0)", HARMFUL, [d for d in deltas if d < 0]),
            ("helpful (ΔΓ ≥ 0)", HELPFUL, [d for d in deltas if d >= 0]),
        ):
            if part:
                ax.hist(part, bins=edges, color=colour, label=f"{name}: {len(part)}")
        ax.axvline(0.0, color="black", linewidth=0.8)
        ax.set_yscale("log")
        ax.set(xlabel="estimated ΔΓ = Γ(without the node) − Γ(now)", ylabel="training nodes (log scale)")
        ax.legend(frameon=False)
    return _svg(fig, ident)


TRUTHS = {
    "proximal": "actual ΔΓ (re-optimised near the given weights)",
    "reoptimize": "actual ΔΓ (re-optimised)",
}
"""The self-check's ground truth (its ``mode``) → the scatter's y label: for a step estimate the re-optimisation is
kept near the given weights, the question it answers, not a retraining."""


def validation_scatter(
    points: Sequence[Mapping[str, Any]],
    pearson: float | None,
    spearman: float | None,
    *,
    ident: str,
    mode: str | None = None,
) -> str:
    """Estimated against actual (re-optimised, ``mode``: the ground truth's) ΔΓ for the checked nodes, with the line
    y = x (nodes without a ground truth or an estimate, ``actual`` or ``estimated`` null, are left out)."""
    defined = [p for p in points if p.get("actual") is not None and p.get("estimated") is not None]
    est = [float(p["estimated"][0]) for p in defined]
    act = [float(p["actual"][0]) for p in defined]
    fig, (ax,) = _figure(4.6, 4.0)
    with matplotlib.rc_context(_RC):
        colours = [HARMFUL if e < 0 else HELPFUL for e in est]
        ax.scatter(est, act, c=colours, s=22, zorder=3)
        span = [min([*est, *act, 0.0]), max([*est, *act, 0.0])]
        ax.plot(span, span, color=BEFORE, linestyle="--", linewidth=1, label="y = x")
        ax.axhline(0, color="black", linewidth=0.5)
        ax.axvline(0, color="black", linewidth=0.5)
        ax.set(xlabel="estimated ΔΓ (the audit's estimate)", ylabel=TRUTHS.get(mode or "", "actual ΔΓ"))
        left_out = len(points) - len(defined)
        without = f"\n{left_out} without a ground truth, not shown" if left_out else ""
        ax.set_title(f"Pearson {_num(pearson)}, Spearman {_num(spearman)}, n={len(defined)}{without}")
        ax.legend(frameon=False, loc="upper left")
    return _svg(fig, ident)


def debiasing_bars(runs: Sequence[Mapping[str, Any]], metrics: Sequence[tuple[str, str]], *, ident: str) -> str:
    """Grouped bars: each metric before debiasing and after each budget's deletions and retraining."""
    fig, (ax,) = _figure(9.0, 3.2)
    with matplotlib.rc_context(_RC):
        series = [("before", BEFORE, runs[0]["before"])]
        shades = ("#e67e22", "#27ae60", "#8e44ad", "#16a085", "#d35400", "#2c3e50")
        for i, run in enumerate(runs):
            series.append((f"after deleting {run['deleted']} ({_budget(run['budget'])})", shades[i % 6], run["after"]))
        width = 0.8 / len(series)
        for j, (label, colour, values) in enumerate(series):
            xs = [i + (j - (len(series) - 1) / 2) * width for i in range(len(metrics))]
            heights = [float(values.get(key) or 0.0) for key, _ in metrics]
            ax.bar(xs, heights, width=width, color=colour, label=label)
        ax.set_xticks(range(len(metrics)), [name for _, name in metrics])
        ax.set_ylabel("value on the test nodes")
        ax.legend(frameon=False, ncols=min(len(series), 3), loc="upper center", bbox_to_anchor=(0.5, -0.12))
    return _svg(fig, ident)


def stability_heatmap(stability: Mapping[str, Any], *, ident: str) -> str:
    """Pairwise overlap of the top-k harmful sets across training seeds: a seeds × seeds grid whose cells hold
    the Jaccard index (shade and number) and the size of the intersection; the diagonal is each seed's set.

    Args:
        stability: ``bind_core.influence.stability.topk_stability``'s result (``k``, ``seeds``, ``sets``, ``pairwise``).

    Drawn as rectangles (no raster image), so the SVG holds only vector shapes and text.
    """
    seeds = [int(s) for s in stability["seeds"]]
    where = {s: i for i, s in enumerate(seeds)}
    sets = stability.get("sets") or {}
    jaccard = [[1.0 if i == j else math.nan for j in seeds] for i in seeds]
    counts = [[len(sets.get(str(s)) or []) if s == t else 0 for t in seeds] for s in seeds]
    for pair in stability.get("pairwise") or []:
        i, j = (where[int(s)] for s in pair["seeds"])
        jaccard[i][j] = jaccard[j][i] = float(pair["jaccard"])
        counts[i][j] = counts[j][i] = int(pair["intersection"])
    n = len(seeds)
    side = min(max(2.2 + 0.6 * n, 3.4), 7.5)
    fig, (ax,) = _figure(side, side - 0.4)
    with matplotlib.rc_context(_RC):
        shades = matplotlib.colormaps["Blues"]
        for i in range(n):
            for j in range(n):
                value = jaccard[i][j]
                known = math.isfinite(value)
                colour = shades(0.1 + 0.8 * value) if known else "#f2f3f4"
                ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, facecolor=colour, edgecolor="white", linewidth=1.5))
                text = f"{value:.2f}\n{counts[i][j]} node(s)" if known else "n/a"
                ink = "white" if known and value > 0.55 else "#1c2833"
                ax.text(j, i, text, ha="center", va="center", color=ink, fontsize=8 if n <= 6 else 6.5)
        ax.set_xlim(-0.5, n - 0.5)
        ax.set_ylim(n - 0.5, -0.5)
        ax.set_aspect("equal")
        ax.set_xticks(range(n), [str(s) for s in seeds])
        ax.set_yticks(range(n), [str(s) for s in seeds])
        ax.set(xlabel="training seed", ylabel="training seed")
        ax.set_title(f"Overlap of the top-{stability.get('k')} harmful sets:\nJaccard, and nodes in both")
        ax.spines[["left", "bottom"]].set_visible(False)
        ax.tick_params(length=0)
    return _svg(fig, ident)


def _group_key(item: tuple[str, Any]) -> tuple[int, str]:
    return (int(item[0]), "") if item[0].isdigit() else (1 << 30, item[0])


def _num(value: float | None) -> str:
    return "n/a" if value is None or not math.isfinite(value) else f"{value:.3f}"


def _budget(budget: float) -> str:
    return f"{budget:.0%} budget" if budget < 1 else f"budget {int(budget)}"
