"""Verify an audit's what-if the way the audit would: its stored model rebuilt, its metric groups, its Γ weighting
and its debiasing stage's retraining recipe (:func:`bind_core.debiasing.verify.verify_set`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from bind_core.data.graph import Graph
from bind_core.debiasing.verify import VerifiedSet, verify_set
from bind_core.pipeline.config import AUTO_CHANCE_SEEDS, AuditConfig
from bind_core.pipeline.stages import metric_groups
from bind_core.training.fit import TrainedModel


def verify_seeds(config: AuditConfig) -> tuple[int, ...]:
    """The seeds a what-if of an audit is verified with when none are asked for.

    Args:
        config: the audit's configuration.

    Returns:
        Its ``debias_seeds``, else :data:`~bind_core.pipeline.config.AUTO_CHANCE_SEEDS`.
    """
    return tuple(config.debias_seeds) or AUTO_CHANCE_SEEDS


def verify_what_if(
    weights: bytes,
    model_config: dict[str, Any],
    graph: Graph,
    config: AuditConfig,
    positions: Sequence[int],
    *,
    seeds: Sequence[int],
    random_sets: int,
    device: str = "cpu",
    progress: Callable[[float], None] | None = None,
) -> VerifiedSet:
    """Delete the audit's training nodes at ``positions``, retrain over ``seeds`` and judge against random sets.

    Args:
        weights: the audited model's safetensors bytes (as the audit stored them).
        model_config: its config (:meth:`~bind_core.training.fit.TrainedModel.config_dict`).
        graph: the audited graph.
        config: the audit's configuration (``lam``, ``min_group_size``, ``debias_retrain``).
        positions: places in ``graph.train_idx`` (the audit's influence rows' positions).
        seeds: at least 3 distinct training seeds.
        random_sets: random sets of the same size to compare with.
        device: where to retrain.
        progress: ``progress(fraction)``; may raise to abort.

    Returns:
        The :class:`~bind_core.debiasing.verify.VerifiedSet`: the verification and the first seed's retrained
            model.
    """
    model = TrainedModel.from_bytes(weights, model_config)
    model.module.to(device)
    return verify_set(
        model,
        graph,
        positions,
        seeds=seeds,
        random_sets=random_sets,
        lam=config.lam,
        groups=metric_groups(graph, config.min_group_size),
        retrain=config.debias_training(model.train_config),
        progress=progress,
    )
