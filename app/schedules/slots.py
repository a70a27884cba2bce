"""The slots of a schedule: every ``interval_seconds`` from its start, or the times of a cron expression (UTC).

Missed slots (no scheduler ran for a while) are not replayed one by one: the next slot after ``now`` follows
the one that ran, so a schedule catches up with a single run.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

from croniter import CroniterBadDateError, croniter

from app.core.errors import ValidationProblem
from app.core.settings import Settings

_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_MONTH_DAYS = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
_FROM = datetime(2026, 1, 1, tzinfo=UTC)  # a fixed moment, so that the checks do not depend on when they run


class CronNeverFires(ValidationProblem):
    """A valid cron expression without any time (``0 3 31 2 *``: Feb 31): 422 naming ``cron``."""

    def __init__(self, expression: str) -> None:
        why = never_fires_reason(expression)
        super().__init__(f"cron: {why}.", errors=[{"field": "cron", "message": why}])


def check_cron(expression: str) -> str | None:
    """``None`` if ``expression`` is a valid five-field cron expression that fires, else why not."""
    if len(expression.split()) != 5:
        return "a cron expression has five fields: minute hour day-of-month month day-of-week"
    if not croniter.is_valid(expression):
        return "not a valid cron expression"
    try:
        croniter(expression, _FROM).get_next(datetime)
    except CroniterBadDateError:
        return never_fires_reason(expression)
    return None


def never_fires_reason(expression: str) -> str:
    """Why a cron expression has no time, e.g. "never fires: Feb 30 and Feb 31 do not exist"."""
    (_, _, days, months, _), _ = croniter.expand(expression)
    numbers = [d for d in days if isinstance(d, int)]
    if len(numbers) == len(days):
        chosen = range(1, 13) if months == ["*"] else [m for m in months if isinstance(m, int)]
        missing = [f"{_MONTHS[m - 1]} {d}" for m in chosen for d in numbers if d > _MONTH_DAYS[m - 1]]
        if missing:
            if len(missing) == 1:
                return f"never fires: {missing[0]} does not exist"
            head, last = missing[: min(len(missing) - 1, 4)], missing[-1] if len(missing) <= 5 else "..."
            shown = ", ".join(head) + (" and " if len(missing) <= 5 else ", ") + last
            return f"never fires: {shown} do not exist"
    return "never fires: no date matches its day-of-month, month and day-of-week together"


def first_slot(*, interval_seconds: int | None, cron: str | None, now: datetime) -> datetime:
    """An interval schedule runs at once (on the whole second); a cron one at its next time."""
    if cron is not None:
        return _cron_next(cron, now)
    return now.replace(microsecond=0)


def next_slot(slot: datetime, *, interval_seconds: int | None, cron: str | None, now: datetime) -> datetime:
    """The first slot after both ``slot`` and ``now`` (on the interval's grid from ``slot``)."""
    if cron is not None:
        return _cron_next(cron, max(slot, now))
    assert interval_seconds is not None
    steps = max(1, math.floor((now - slot).total_seconds() / interval_seconds) + 1)
    return slot + timedelta(seconds=steps * interval_seconds)


def shortest_cron_gap(cron: str, *, sample: int = 200) -> float:
    """The shortest time in seconds between two of a cron expression's next ``sample`` times, from a fixed
    moment (so that the answer does not depend on when it is asked)."""
    times = croniter(cron, _FROM)
    try:
        previous = times.get_next(datetime)
    except CroniterBadDateError as exc:
        raise CronNeverFires(cron) from exc
    shortest = timedelta.max
    for _ in range(sample):
        try:
            current = times.get_next(datetime)
        except CroniterBadDateError:  # no time after the ones sampled (as far as croniter looks ahead)
            break
        shortest = min(shortest, current - previous)
        previous = current
    return shortest.total_seconds()


def _cron_next(cron: str, after: datetime) -> datetime:
    """The cron expression's next time after ``after``; :class:`CronNeverFires` (a 422) if there is none."""
    try:
        value = croniter(cron, after.astimezone(UTC)).get_next(datetime)
    except CroniterBadDateError as exc:
        raise CronNeverFires(cron) from exc
    assert isinstance(value, datetime)
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def check_interval_floor(*, interval_seconds: int | None, cron: str | None, settings: Settings) -> None:
    """422 ``schedule-too-frequent`` when a schedule would run more often than ``BIND_SCHEDULE_MIN_INTERVAL``.

    A cron expression is judged by its shortest gap (:func:`shortest_cron_gap`).
    """
    floor = settings.schedule_min_interval
    if interval_seconds is not None:
        field, gap = "interval_seconds", float(interval_seconds)
    elif cron is not None:
        field, gap = "cron", shortest_cron_gap(cron)
    else:
        return
    if gap >= floor:
        return
    why = f"runs every {gap:g} s; the least allowed (BIND_SCHEDULE_MIN_INTERVAL) is {floor} s"
    raise ValidationProblem(
        f"{field}: {why}.",
        slug="schedule-too-frequent",
        title="Schedule too frequent",
        errors=[{"field": field, "message": why}],
    )
