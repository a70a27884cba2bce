"""When the debiasing's check against chance runs although no seeds were given: the ``chance_seconds`` rule."""

from __future__ import annotations

from bind_core.forks import self_seeded_processes
from bind_core.pipeline.config import AUTO_CHANCE_SEEDS, AuditConfig, chance_retrains
from bind_core.training.fit import TrainedModel


def chance_decision(model: TrainedModel, config: AuditConfig, processes: int = 1) -> tuple[tuple[int, ...], str | None]:
    """The seeds the debiasing's chance check runs with, and, where the audit decided it (``chance_seconds``), the
    rule and its figures in a sentence: with ``debias_seeds``, those; else :data:`AUTO_CHANCE_SEEDS` when the check's
    retrainings times the model's training seconds, shared over the ``processes`` that will run them
    (:func:`~bind_core.forks.each_self_seeded`; one where forking is not safe), fit ``chance_seconds``; else none."""
    if config.debias_seeds or config.chance_seconds <= 0:
        return config.debias_seeds, None
    retrains = chance_retrains(len(config.budgets), config.debias_random_sets)
    seconds = model.history.seconds
    polishes = model.stationarity.polished and config.debias_retrain != "adam"
    polish = model.stationarity.seconds if polishes else 0.0
    if isinstance(seconds, int | float) and isinstance(polish, int | float):
        seconds += polish  # a retraining trains and polishes as the model did
    if not isinstance(seconds, int | float) or seconds <= 0:
        return (), (
            "the check against chance did not run by default: the model was not trained here, so its cost cannot be "
            "estimated; set debias_seeds (on the command line: --debias-seeds 1,10,100)"
        )
    shared = self_seeded_processes(processes, retrains)
    cost = retrains * float(seconds) / shared
    over = "" if shared == 1 else f" / {shared} processes"
    if cost <= config.chance_seconds:
        return AUTO_CHANCE_SEEDS, (
            f"the check against chance ran by default: {retrains} retrainings × {seconds:.2f} s (the model's training"
            f"{' and polish' if polishes else ''}){over} ≈ {cost:.0f} s, within the {config.chance_seconds:g} s "
            "allowed for it"
        )
    return (), (
        f"the check against chance did not run by default: {retrains} retrainings × {seconds:.2f} s{over} ≈ "
        f"{cost:.0f} s, over the {config.chance_seconds:g} s allowed for it; set debias_seeds (on the command line: "
        "--debias-seeds 1,10,100) to run it"
    )
