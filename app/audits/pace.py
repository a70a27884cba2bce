"""How long a running audit has left, and how far that figure can be trusted.

The worker records its pace on the audit row (``audits.pace``, :class:`PaceTracker`): the stage running, when it
began, the fraction of it done and when that was said, the stages still to come, and how long those took in the
latest earlier audit of the same request (or of the same schedule). :func:`time_left` reads it back.

Within a stage, progress is close to linear in time (epochs trained, nodes estimated, models retrained; within 0.1
on two-layer audits, less so on short one-layer stages: ``bench/bench_pace.py``, docs/SERVICE.md), so the stage's
time left is its pace so far carried to its end. The stages after it are another matter: their cost estimates
(``bind_core.pipeline.budget``, flops) bound memory and work, but as times they are off by up to a hundredfold
between stages, so they are not used here. Only an earlier audit of the same request says how long those stages
take; without one, the whole audit's time left is null, and ``basis`` says why. A what-if verification is one stage
(its retrainings) and reads its time left the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

MIN_FRACTION = 0.05
"""Below this fraction of a stage done, its pace is not known yet (setup costs dominate its first moments)."""
MIN_SECONDS = 2.0
"""Nor before it has run this long."""


@dataclass
class PaceTracker:
    """The pace of one attempt, fed by its progress reports (the stages of ``plan`` only: a sub-step or a helper
    reusing an earlier stage's loop is left out by the caller)."""

    plan: tuple[str, ...]
    earlier: dict[str, Any] | None = None
    """``{"audit_id", "same", "seconds": {stage: seconds}}`` of the latest earlier audit of the same request or
    schedule (``same``: ``request`` or ``schedule``), or None."""
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)
    stage: str | None = None
    started: datetime | None = None
    fraction: float = 0.0
    at: datetime | None = None

    def observe(self, stage: str, fraction: float) -> None:
        if stage not in self.plan:
            return
        t = self.clock()
        if stage != self.stage:
            self.stage, self.started = stage, t
        self.fraction, self.at = min(max(float(fraction), 0.0), 1.0), t

    def record(self) -> dict[str, Any] | None:
        """What ``audits.pace`` holds (None before the first stage)."""
        if self.stage is None or self.started is None or self.at is None:
            return None
        return {
            "stage": self.stage,
            "started_at": self.started.isoformat(),
            "fraction": self.fraction,
            "at": self.at.isoformat(),
            "after": list(self.plan[self.plan.index(self.stage) + 1 :]),
            "earlier": self.earlier,
        }


@dataclass(frozen=True)
class TimeLeft:
    seconds: float | None
    """The whole audit's time left, or None (``basis`` says why)."""
    stage_seconds: float | None
    """The running stage's time left, or None (it has just begun)."""
    basis: str
    """How the figures were reached, or why they are null."""


def time_left(pace: Mapping[str, Any] | None, now: datetime) -> TimeLeft | None:
    """The running audit's time left from its ``audits.pace`` (None when there is none: not started, or a worker
    from before it was recorded)."""
    if not pace:
        return None
    try:
        stage = str(pace["stage"])
        started, at = datetime.fromisoformat(pace["started_at"]), datetime.fromisoformat(pace["at"])
        fraction = float(pace["fraction"])
        after = [str(s) for s in pace.get("after") or []]
    except (KeyError, TypeError, ValueError):
        return None
    spent = (at - started).total_seconds()
    since = max((now - at).total_seconds(), 0.0)
    earlier = pace.get("earlier") or {}
    seconds = earlier.get("seconds") or {}
    if fraction < MIN_FRACTION or spent < MIN_SECONDS:
        if not all(isinstance(seconds.get(s), int | float) for s in [stage, *after]):
            return TimeLeft(None, None, f"the {stage} stage has just begun: its pace is not known yet")
        stage_left = max(float(seconds[stage]) - spent - since, 0.0)
        rest = sum(float(seconds[s]) for s in after)
        said = "it and the stages after it as long as they took" if after else "it as long as it took"
        return TimeLeft(stage_left + rest, stage_left, f"the {stage} stage has just begun: {said}{_in(earlier)}")
    stage_left = max(spent * (1.0 - fraction) / fraction - since, 0.0)
    said = f"the {stage} stage at its pace so far ({fraction:.0%} in {spent:.0f} s)"
    if not after:
        return TimeLeft(stage_left, stage_left, said + "; no stage follows")
    stages = ", ".join(after)
    if not all(isinstance(seconds.get(s), int | float) for s in after):
        return TimeLeft(
            None,
            stage_left,
            said + f"; the stages after it ({stages}) are not estimated: no earlier audit of the same request or "
            "schedule says how long they take",
        )
    rest = sum(float(seconds[s]) for s in after)
    return TimeLeft(stage_left + rest, stage_left, f"{said}; {stages} as long as they took{_in(earlier)}")


def _in(earlier: Mapping[str, Any]) -> str:
    """`` in audit <id> (the same request)``: the earlier run the later stages are timed by."""
    return f" in audit {earlier.get('audit_id')} (the same {earlier.get('same') or 'request'})"


def duration(seconds: float) -> str:
    """``40 s``, ``12 min``, ``2.5 h``: a time left as a person reads it (rounded: it is an estimate)."""
    if seconds < 90:
        return f"{max(round(seconds), 1)} s"
    if seconds < 90 * 60:
        return f"{round(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"


def left_words(found: Mapping[str, Any] | None) -> str | None:
    """A running audit's ``time_left`` (its JSON) in a few words: ``about 3 min left``, ``this stage about 40 s
    left`` where the stages after it are not estimated; None where neither is known."""
    if not found:
        return None
    whole, stage = found.get("seconds"), found.get("stage_seconds")
    if isinstance(whole, int | float):
        return f"about {duration(float(whole))} left"
    if isinstance(stage, int | float):
        return f"this stage about {duration(float(stage))} left"
    return None
