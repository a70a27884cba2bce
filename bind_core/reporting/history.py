"""A self-contained HTML page of a schedule's history: the bias metrics of its runs over time (drift).

:func:`render_history` takes plain dicts (the schedule and its runs, as the service reads them from the
database) and returns one HTML5 page, the template ``templates/history.html`` over the audit report's shell
(:mod:`bind_core.reporting.page`): inline CSS,
the figure as inline SVG drawn on the server with the report's helpers (:mod:`bind_core.reporting.plots`), no
script and no reference to anything outside the page. ΔSP, ΔEO and Γ of every succeeded run are drawn over
the slot times with the schedule's alert thresholds as dashed lines (crossings ringed), accuracy below them, runs
without a verdict (a supplied model that no longer fits the version's data) boxed in grey, and runs that did not
succeed are marked on the time axis. A table lists every run, newest first, with what to know of it (no verdict and
why, its warnings' codes, a failed run's problem). This module
picks and formats what the page shows as plain text; the template escapes every string taken from the data.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import matplotlib
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from bind_core.reporting import plots
from bind_core.reporting.page import finite, fmt, render, trusted_svg

BIAS = (
    ("delta_sp", "ΔSP", "#c0392b", "gap in positive-prediction rates between groups"),
    ("delta_eo", "ΔEO", "#8e44ad", "gap in true-positive rates between groups"),
    ("gamma", "Γ", "#2471a3", "PDD: λ·Γ_SP + (1−λ)·Γ_EO"),
)
ACCURACY = ("accuracy", "Accuracy", "#27ae60", "utility on the test nodes")
FAILED = "#7f8c8d"


@dataclass(frozen=True, kw_only=True)
class HistoryCard:
    """A metric's card: its latest succeeded value, its change and range, and its meaning."""

    name: str
    value: str
    band: str
    what: str


@dataclass(frozen=True, kw_only=True)
class Latest:
    """The latest succeeded run: when, each metric's card, and how many succeeded runs crossed a threshold."""

    when: str
    cards: list[HistoryCard]
    crossed: int
    succeeded: int


@dataclass(frozen=True, kw_only=True)
class RunRow:
    """One run of the table: each bias value with whether it crossed its threshold."""

    when: str
    state: str
    graph_version: str
    accuracy: str
    bias: list[tuple[str, bool]]
    crossed: str
    audit_id: str
    notes: str
    """What to know of the run beside its figures: no verdict and why, its warnings' codes, a failure's problem."""


def render_history(
    schedule: Mapping[str, Any], runs: Sequence[Mapping[str, Any]], *, title: str = "BIND schedule report"
) -> str:
    """The schedule's runs as one self-contained HTML5 page.

    Args:
        schedule: ``id``, ``graph_name`` or ``dataset``, ``model`` (a supplied model, named, or absent),
            ``interval_seconds`` or ``cron``, ``state``, ``thresholds`` (``{metric: value}``, metrics among
            ``delta_sp``, ``delta_eo``, ``gamma``), ``next_run_at``, ``created_at``; missing keys are shown as unknown.
        runs: one dict per slot, in any order: ``slot_time`` (a datetime or an ISO 8601 string), ``audit_id``,
            ``state``, ``graph_version``, and, for a succeeded run, ``accuracy``, ``delta_sp``, ``delta_eo``,
            ``gamma`` (test-set values, ``None`` where absent) and ``breaches`` (``[{metric, value, threshold}]``);
            optionally ``withheld`` (why the run has no verdict), ``inputs_confirmed`` (a supplied model's own
            outputs on the version confirmed its inputs), ``warning_codes`` and ``failure`` (a failed run's problem,
            in words).
        title: the page's ``<title>`` and heading.

    Returns:
        The HTML document as a string.
    """
    ordered = sorted(runs, key=lambda r: _time(r.get("slot_time")))
    thresholds = {k: float(v) for k, v in (schedule.get("thresholds") or {}).items() if finite(v)}
    done = any(r.get("state") == "succeeded" for r in ordered)
    return render(
        "history.html",
        title=title,
        facts=_facts(schedule, ordered, thresholds),
        latest=_latest(ordered),
        svg=trusted_svg(history_plot(ordered, thresholds, ident="history")) if done else None,
        runs=_runs_table(ordered),
    )


def history_plot(runs: Sequence[Mapping[str, Any]], thresholds: Mapping[str, float], *, ident: str) -> str:
    """ΔSP, ΔEO and Γ over the slot times with the thresholds as dashed lines (crossings ringed), accuracy in a
    panel below; runs without a verdict (``withheld``) boxed in grey in both panels, runs that did not succeed marked
    with a grey x on the time axis. ``runs`` oldest first."""
    done = [r for r in runs if r.get("state") == "succeeded"]
    other = [_time(r.get("slot_time")) for r in runs if r.get("state") != "succeeded"]
    with matplotlib.rc_context(plots._RC):
        fig = Figure(figsize=(9.0, 5.2), layout="constrained")
        FigureCanvasAgg(fig)  # pyplot-free, as in report_plots
        bias, accuracy = fig.subplots(2, 1, sharex=True, height_ratios=[2.2, 1.0])
        for key, name, colour, _ in BIAS:
            points = [(_time(r.get("slot_time")), float(r[key])) for r in done if finite(r.get(key))]
            if points:
                xs, ys = zip(*points, strict=True)
                bias.plot(xs, ys, color=colour, marker="o", markersize=3.5, linewidth=1.4, label=name)
            if key in thresholds:
                limit = thresholds[key]
                bias.axhline(limit, color=colour, linestyle="--", linewidth=1.0, label=f"{name} threshold {limit:g}")
                over = [(x, y) for x, y in points if y > limit]
                if over:
                    xs, ys = zip(*over, strict=True)
                    bias.scatter(xs, ys, s=70, facecolors="none", edgecolors=colour, linewidths=1.5, zorder=4)
        doubted = [r for r in done if r.get("withheld")]
        for axis, keys in ((bias, [k for k, _, _, _ in BIAS]), (accuracy, [ACCURACY[0]])):
            boxed = [(_time(r.get("slot_time")), float(r[k])) for r in doubted for k in keys if finite(r.get(k))]
            if boxed:
                xs, ys = zip(*boxed, strict=True)
                label = "run without a verdict (see the table)" if axis is bias else None
                axis.scatter(xs, ys, s=90, marker="s", facecolors="none", edgecolors=FAILED, zorder=5, label=label)
        if other:
            bias.scatter(
                other,
                [0.0] * len(other),
                marker="x",
                color=FAILED,
                zorder=4,
                clip_on=False,
                label="run without metrics",
            )
        bias.set_ylim(bottom=0)
        bias.set(ylabel="bias on the test nodes")
        bias.legend(frameon=False, fontsize=8, ncols=2, loc="upper left")
        points = [(_time(r.get("slot_time")), float(r["accuracy"])) for r in done if finite(r.get("accuracy"))]
        if points:
            xs, ys = zip(*points, strict=True)
            accuracy.plot(xs, ys, color=ACCURACY[2], marker="o", markersize=3.5, linewidth=1.4)
        accuracy.set(ylabel="accuracy", xlabel="slot time (UTC)")
        plots.fit_time_axis(accuracy, [_time(r.get("slot_time")) for r in runs])  # shared with the bias panel
    return plots._svg(fig, ident)


def _facts(
    schedule: Mapping[str, Any], runs: Sequence[Mapping[str, Any]], thresholds: Mapping[str, float]
) -> dict[str, str]:
    """The header's ``label: value`` lines: what the schedule audits, when, its state and thresholds, the runs."""
    source = (
        f"graph {schedule['graph_name']!r} (latest version at each run)"
        if schedule.get("graph_name")
        else f"dataset {schedule.get('dataset', '?')}"
    )
    if schedule.get("model"):
        source = f"supplied {schedule['model']} on the {source}"
    timing = (
        f"cron {schedule['cron']} (UTC)"
        if schedule.get("cron")
        else f"every {_duration(schedule.get('interval_seconds'))}"
    )
    names = {key: name for key, name, _, _ in BIAS}
    limits = ", ".join(f"{names.get(k, k)} > {v:g}" for k, v in thresholds.items()) or "none"
    states: dict[str, int] = {}
    for run in runs:
        states[str(run.get("state"))] = states.get(str(run.get("state")), 0) + 1
    return {
        "schedule": str(schedule.get("id", "?")),
        "audits": source,
        "when": timing,
        "state": f"{schedule.get('state', '?')}; next slot {_when(schedule.get('next_run_at'))}",
        "alert thresholds": limits,
        "runs shown": f"{len(runs)} ({', '.join(f'{n} {s}' for s, n in sorted(states.items())) or 'none yet'})",
    }


def _latest(runs: Sequence[Mapping[str, Any]]) -> Latest | None:
    """Cards: each metric's latest succeeded value, its change since the first one shown, and its range."""
    done = [r for r in runs if r.get("state") == "succeeded"]
    if not done:
        return None
    cards = []
    for key, name, _, what in (*BIAS, ACCURACY):
        values = [float(r[key]) for r in done if finite(r.get(key))]
        if not values:
            continue
        change = values[-1] - values[0]
        band = (
            f"{'+' if change >= 0 else '−'}{fmt(abs(change))} since the first run shown; "
            f"range [{fmt(min(values))}, {fmt(max(values))}]"
        )
        cards.append(HistoryCard(name=name, value=fmt(values[-1]), band=band, what=what))
    crossed = sum(1 for r in done if r.get("breaches"))
    return Latest(when=_when(done[-1].get("slot_time")), cards=cards, crossed=crossed, succeeded=len(done))


def _runs_table(runs: Sequence[Mapping[str, Any]]) -> list[RunRow]:
    """One row per run, newest first; each bias value with whether it crossed its threshold."""
    names = {key: name for key, name, _, _ in BIAS}
    rows = []
    for run in reversed(runs):
        crossed = {str(b.get("metric")): b for b in run.get("breaches") or []}
        rows.append(
            RunRow(
                when=_when(run.get("slot_time")),
                state=str(run.get("state", "?")),
                graph_version=fmt(run.get("graph_version")),
                accuracy=fmt(run.get("accuracy")),
                bias=[(fmt(run.get(key)), key in crossed) for key, _, _, _ in BIAS],
                crossed=", ".join(
                    f"{names.get(k, k)} {fmt(b.get('value'))} > {fmt(b.get('threshold'))}" for k, b in crossed.items()
                )
                or "—",
                audit_id=str(run.get("audit_id", "")),
                notes=_notes(run),
            )
        )
    return rows


def _notes(run: Mapping[str, Any]) -> str:
    """What to know of a run beside its figures: no verdict and why, its inputs confirmed by the model's own outputs,
    its warnings' codes, a failed run's problem."""
    said = []
    if run.get("withheld"):
        said.append(f"no verdict: {run['withheld']}")
    if run.get("inputs_confirmed"):
        said.append("inputs confirmed by the model's own outputs on this version")
    codes = [str(c) for c in run.get("warning_codes") or []]
    if codes:
        said.append("warnings: " + ", ".join(dict.fromkeys(codes)))
    if run.get("failure"):
        said.append(str(run["failure"]))
    return "; ".join(said) or "—"


def _time(value: Any) -> datetime:
    """A slot time as an aware UTC datetime (ISO strings parsed; naive taken as UTC; unknown: the epoch)."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            value = None
    if not isinstance(value, datetime):
        return datetime(1970, 1, 1, tzinfo=UTC)
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _when(value: Any) -> str:
    return "?" if value is None else _time(value).astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def _duration(seconds: Any) -> str:
    if not isinstance(seconds, int) or seconds <= 0:
        return "?"
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds % size == 0:
            count = seconds // size
            return f"{count} {unit}{'s' if count != 1 else ''}"
    return f"{seconds} s"
