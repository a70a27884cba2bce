"""Overall progress of an audit from `run_audit`'s per-stage progress reports.

`run_audit` reports ``(stage, fraction of that stage)``; clients see one number from 0 to 1. Each stage the
audit will run gets an equal share (their costs depend on the graph and the settings, so no weighting is
better in general); the number only grows. Which stages run is bind_core's answer
(:func:`bind_core.pipeline.stages.planned_stages`).
"""

from __future__ import annotations


class OverallProgress:
    """Maps ``(stage, fraction)`` reports to ``(stage, overall fraction)``, never going backwards.

    A stage name that is not in the plan (a sub-step), or one already passed (a helper reusing the
    training loop), leaves the stage and the number as they are.
    """

    def __init__(self, plan: tuple[str, ...]) -> None:
        self._plan = plan
        self._stage = plan[0] if plan else "training"
        self._overall = 0.0

    def __call__(self, stage: str, fraction: float) -> tuple[str, float]:
        index = self._plan.index(self._stage) if self._stage in self._plan else 0
        if stage not in self._plan or self._plan.index(stage) < index:
            return self._stage, self._overall
        self._stage, index = stage, self._plan.index(stage)
        share = 1.0 / max(len(self._plan), 1)
        fraction = min(max(float(fraction), 0.0), 1.0)
        self._overall = max(self._overall, min((index + fraction) * share, 1.0))
        return self._stage, self._overall
