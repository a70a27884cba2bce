"""The schedule history chart's time axis is fitted to the runs: minutes apart, days apart, or one run."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from matplotlib.dates import num2date
from matplotlib.figure import Figure

from bind_core.reporting.history import history_plot
from bind_core.reporting.plots import LONE_RUN_MARGIN, TIME_MARGIN, fit_time_axis

T0 = datetime(2026, 11, 1, 10, tzinfo=UTC)


def runs(step: timedelta, count: int = 5) -> list[dict[str, Any]]:
    return [{"slot_time": T0 + i * step, "state": "succeeded", "accuracy": 0.8, "delta_sp": 0.05 + 0.01 * i,
             "delta_eo": 0.03, "gamma": 0.02} for i in range(count)]  # fmt: skip


def x_limits(times: list[datetime]) -> tuple[datetime, datetime]:
    ax = Figure().add_subplot()
    returned = fit_time_axis(ax, times)
    low, high = (num2date(x, tz=UTC) for x in ax.get_xlim())
    assert abs(low - returned[0]) < timedelta(seconds=1) and abs(high - returned[1]) < timedelta(seconds=1)
    return low, high


@pytest.mark.parametrize("step", [timedelta(minutes=1), timedelta(days=1), timedelta(seconds=5)])
def test_axis_spans_the_runs_and_a_small_margin(step: timedelta) -> None:
    times = [T0 + i * step for i in range(5)]
    low, high = x_limits(times)
    span = times[-1] - times[0]
    assert low < times[0] and high > times[-1]
    tolerance = timedelta(milliseconds=10)
    assert abs((times[0] - low) - span * TIME_MARGIN) < tolerance
    assert abs((high - times[-1]) - span * TIME_MARGIN) < tolerance
    assert high - low < span * 1.2  # runs four minutes apart in all: an axis of minutes, not hours or a day


def test_one_run_gets_a_window_around_it() -> None:
    low, high = x_limits([T0])
    assert (low, high) == (T0 - LONE_RUN_MARGIN, T0 + LONE_RUN_MARGIN)


def tick_labels(svg: str) -> list[str]:
    """The x-axis tick labels of a history chart: the texts between the legend's last entry and the x label."""
    texts = re.findall(r"<text[^>]*>([^<]*)</text>", svg)
    return texts[texts.index("Γ") + 1 : texts.index("slot time (UTC)")]


def test_chart_of_runs_a_minute_apart_is_labelled_by_the_minute() -> None:
    labels = tick_labels(history_plot(runs(timedelta(minutes=1)), {"delta_sp": 0.1}, ident="h"))
    assert labels == ["10:00", "10:01", "10:02", "10:03", "10:04"]


def test_chart_of_runs_days_apart_is_labelled_by_the_day() -> None:
    labels = tick_labels(history_plot(runs(timedelta(days=1)), {"delta_sp": 0.1}, ident="h"))
    assert labels == ["02", "03", "04", "05"]  # the month and year once, beside the axis ("2026-Nov")
